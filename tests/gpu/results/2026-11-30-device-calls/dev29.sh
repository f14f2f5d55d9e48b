#!/bin/bash
# device call 29 (final): build of the session's last commit: conformance cases and the generated
# models (4 configurations), matmul schedules (tile_n 128/256, SwiGLU pairs), then the five full
# models against PyTorch eager / torch.compile / reduce-overhead, and the paired kernel's BN
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
O=/tmp/o29; rm -rf $O; mkdir -p $O; W=/tmp/w29; rm -rf $W; mkdir -p $W && tar xJf .carry/bin.tar.xz -C $W; B=$W/bin
( python3 tests/models/gen_full_models.py /tmp/fm --outputs none > $O/gen.log 2>&1; tests/bench/full_models.sh $B /tmp/fm $O compile > $O/fm-compile.log 2>&1
  $B/drkc /tmp/fm/llama_decoder/model.onnx --target=sm_90a --precision=fp16 --fusion-aggressiveness=3 --schedule=mm.tile_n=128 -o /tmp/fm/llama_decoder/n128.drkm > $O/compile-n128.log 2>&1 ) &
( SCHEDULES="mm.tile_n=128 mm.tile_n=256" timeout 200 tests/gpu/matmul_schedules.sh $B/drkc /tmp/ms > $O/matmul-schedules.log 2>&1 ) &
CONFIGS="default --precision=bf16 --fusion-aggressiveness=3,--precision=fp16 --precision=fp8" timeout 220 tests/gpu/run_bundle.sh .carry $O cases,models > $O/bundle.log 2>&1
wait
{ grep -E "passed|failed" $O/cases.log | tail -1; grep "models:" $O/bundle.log; grep -v "PASS.*rc=0" $O/models.log | head -8
  tail -1 $O/matmul-schedules.log; grep FAIL $O/matmul-schedules.log | head -3; grep -h "report\|compile rc" $O/compile-*.log | head -12; } > $OUT/checks.txt 2>&1
cat $OUT/checks.txt
timeout 260 python3 tests/bench/peers.py /tmp/fm --modes eager,compile,reduce-overhead --drkrun $B/drkrun --iters 50 --out $O/peers.json > $O/peers.log 2>&1
cp $O/peers.log $O/peers.json $OUT/ 2>/dev/null; tail -8 $O/peers.log
M=/tmp/fm/llama_decoder
for r in 1 2; do for v in model n128; do echo "llama $v r$r $($B/drkrun $M/$v.drkm --iters 50 | grep resident | sed 's/.*: median/median/')"; sleep 2; done; done | tee $OUT/n128.log
tar czf $OUT/o29.tgz -C /tmp o29
