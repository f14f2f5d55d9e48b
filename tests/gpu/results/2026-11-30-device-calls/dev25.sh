#!/bin/bash
# device call 25: paired gate/up matmul (SwiGLU): checks (matmul_schedules SwiGLU graphs, medium
# LLaMA fp16/bf16 --check), then LLaMA paired vs mm.pair=0 (alternating) and the peers
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
O=/tmp/o25; rm -rf $O; mkdir -p $O; W=/tmp/w25; rm -rf $W; mkdir -p $W && tar xJf .carry/bin.tar.xz -C $W; B=$W/bin
( python3 tests/models/gen_full_models.py /tmp/fm --only llama_decoder --outputs none > $O/gen.log 2>&1
  M=/tmp/fm/llama_decoder
  $B/drkc $M/model.onnx --target=sm_90a --precision=fp16 --fusion-aggressiveness=3 --report -o $M/model.drkm > $O/compile.log 2>&1 &
  $B/drkc $M/model.onnx --target=sm_90a --precision=fp16 --fusion-aggressiveness=3 --schedule=mm.pair=0 -o $M/nopair.drkm > $O/compile0.log 2>&1 &
  wait ) &
( SCHEDULES="mm.tile_n=128" timeout 200 tests/gpu/matmul_schedules.sh $B/drkc /tmp/ms > $O/matmul-schedules.log 2>&1 ) &
( python3 tests/models/gen_full_models.py /tmp/med --medium --only llama_decoder --outputs none > $O/genmed.log 2>&1
  $B/drkc /tmp/med/llama_decoder/model.onnx --target=sm_90a --precision=fp16 --fusion-aggressiveness=3 --emit=tile -o $O/med.tile > /dev/null 2>&1
  for cfg in "--precision=fp16 --fusion-aggressiveness=3" "--precision=bf16 --fusion-aggressiveness=3" "--precision=fp16"; do
    echo "== medium llama $cfg: $($B/drkc run /tmp/med/llama_decoder/model.onnx --device=cuda --check $cfg 2>&1 | grep -E 'check|error' | tr '\n' ' ')"; done > $O/check-med.log ) &
wait
echo "paired kernels in medium: $(grep -c paired $O/med.tile)"
grep -E "FAIL|matmul_schedules" $O/matmul-schedules.log; cut -c1-200 $O/check-med.log
M=/tmp/fm/llama_decoder; D=$M/test_data_set_0
for r in 1 2; do
  $B/drkrun $M/model.drkm --input-dir $D --iters 50 > $O/pair-$r.log 2>&1; sleep 3
  $B/drkrun $M/nopair.drkm --input-dir $D --iters 50 > $O/nopair-$r.log 2>&1; sleep 3
done
grep -H resident $O/pair-*.log $O/nopair-*.log | sed 's/(GPU events.*GPU)//'
$B/drkrun $M/model.drkm --iters 20 --warmup 3 --profile > $O/profile.log 2>&1
timeout 300 python3 tests/bench/peers.py /tmp/fm --only llama_decoder --modes eager,compile,reduce-overhead --drkrun $B/drkrun --iters 50 --out $O/peers.json > $O/peers.log 2>&1
tail -3 $O/peers.log
tar czf $OUT/o25.tgz -C /tmp o25
