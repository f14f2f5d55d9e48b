#!/bin/bash
# device call 19 (final): staged-epilogue build: cases + model checks, medium models, matmul schedules
# (in parallel, untimed), then the full-model peers alone. Logs go to $OUT as they are written.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
O=$OUT; W=/tmp/wf; rm -rf $W; mkdir -p $W && tar xJf .carry/bin.tar.xz -C $W; B=$W/bin
( python3 tests/models/gen_full_models.py /tmp/fm --outputs none > $O/gen.log 2>&1; tests/bench/full_models.sh $B /tmp/fm $O compile > $O/fm-compile.log 2>&1 ) &
( python3 tests/models/gen_full_models.py /tmp/med --medium --only gpt2_small llama_decoder --outputs none > $O/genmed.log 2>&1
  for m in gpt2_small llama_decoder; do for cfg in "--precision=fp16 --fusion-aggressiveness=3" "--precision=bf16 --fusion-aggressiveness=3"; do
    echo "== medium $m $cfg: $($B/drkc run /tmp/med/$m/model.onnx --device=cuda --check $cfg 2>&1 | grep -E 'check|error' | tr '\n' ' ')"; done; done > $O/check-med.log ) &
( SCHEDULES="mm.tile_n=128 mm.tile_n=256 mm.tile_n=64" timeout 150 tests/gpu/matmul_schedules.sh $B/drkc /tmp/ms > $O/matmul-schedules.log 2>&1 ) &
CONFIGS="--fusion-aggressiveness=3,--precision=fp16 --precision=bf16 default" timeout 200 tests/gpu/run_bundle.sh .carry $O cases,models > $O/bundle.log 2>&1
wait
grep -E "passed|failed" $O/cases.log | tail -1; grep "models:" $O/bundle.log; grep -v "PASS.*rc=0" $O/models.log | head -5
tail -1 $O/matmul-schedules.log; cut -c1-160 $O/check-med.log
MODELS="llama_decoder" tests/bench/full_models.sh $B /tmp/fm $O profile > $O/fm-profile.log 2>&1
timeout 300 python3 tests/bench/peers.py /tmp/fm --modes eager,compile,reduce-overhead --drkrun $B/drkrun --iters 50 --out $O/peers.json > $O/peers.log 2>&1
tail -9 $O/peers.log
