#!/bin/bash
# device call 10: wgmma flash attention (sm_90a) checked against the interpreter, then speed
O=/tmp/o10; rm -rf $O; mkdir -p $O; W=/tmp/w10; rm -rf $W; mkdir -p $W && tar xJf .carry/bin.tar.xz -C $W && tar xJf .carry/gpuprep.tar.xz -C $W; B=$W/bin
( python3 tests/models/gen_full_models.py /tmp/fm --only llama_decoder gpt2_small --outputs none > $O/gen.log 2>&1;
  python3 tests/models/gen_full_models.py /tmp/med --medium --only gpt2_small llama_decoder --outputs none > $O/genmed.log 2>&1 ) &
for g in tests/fuse/attn_*.drkg tests/fuse/rope_*.drkg; do
  for cfg in "--fusion-aggressiveness=3" "--fusion-aggressiveness=3 --precision=bf16"; do
    out=$($B/drkc run $g --device=cuda --target=sm_90a --check $cfg 2>&1)
    if grep -q PASS <<<"$out" && ! grep -q FAIL <<<"$out"; then echo "PASS $(basename $g) $cfg: $(grep -o 'rel error [^ ]*' <<<"$out" | head -2 | tr '\n' ' ')"; else echo "FAIL $(basename $g) $cfg: $(grep -E 'check|error' <<<"$out" | head -3 | tr '\n' ' ')"; fi
  done
done > $O/attn.log 2>&1
echo "attn graphs: $(grep -c ^PASS $O/attn.log) PASS, $(grep -c ^FAIL $O/attn.log) FAIL"; grep ^FAIL $O/attn.log | head -5
CONFIGS="default --precision=fp16 --precision=bf16 --fusion-aggressiveness=3,--precision=fp16 --fusion-aggressiveness=3,--precision=bf16 --precision=fp8" tests/gpu/run_bundle.sh .carry $O cases,models > $O/bundle.log 2>&1
grep -E "passed|failed" $O/cases.log | tail -1; tail -1 $O/bundle.log; grep -v "PASS.*rc=0" $O/models.log | head
wait
for m in gpt2_small llama_decoder; do for cfg in "--precision=fp16 --fusion-aggressiveness=3" "--precision=bf16 --fusion-aggressiveness=3"; do
  echo "== medium $m $cfg: $($B/drkc run /tmp/med/$m/model.onnx --device=cuda --check $cfg 2>&1 | grep -E 'check|error' | tr '\n' ' ')"; done; done | tee $O/check-med.log
for m in llama_decoder gpt2_small; do
  for s in mm.persistent=0 mm.persistent=1; do
    $B/drkc /tmp/fm/$m/model.onnx --target=sm_90a --precision=fp16 --fusion-aggressiveness=3 --schedule=$s -o /tmp/fm/$m/$s.drkm > $O/compile-$m-$s.log 2>&1
  done
  for s in mm.persistent=0 mm.persistent=1 mm.persistent=0 mm.persistent=1; do echo "$m $s: $($B/drkrun /tmp/fm/$m/$s.drkm --iters 30 --warmup 5 2>&1 | grep resident)"; done
  $B/drkrun /tmp/fm/$m/mm.persistent=0.drkm --iters 10 --warmup 3 --profile > $O/profile-$m.log 2>&1
  grep -E "attention|ReduceMean" $O/profile-$m.log | head -4
done | tee $O/models-speed.log
SCHEDULES="n128=mm.tile_n=128,mm.split_k=1 n256=mm.tile_n=256,mm.split_k=1 p128=mm.persistent=1,mm.tile_n=128 p64=mm.persistent=1,mm.tile_n=64" tests/bench/mm_shapes.sh $B/drkc $W/gpuprep/bench > $O/shapes.log 2>&1
$B/bench_kernels $W/gpuprep/bench $O/bench.md > $O/bench.log 2>&1
grep -E "MatMul f16 [0-9x]+ \(" $O/bench.md | sed 's/information (shape sweep)//' | cut -c1-150
tar czf $OUT/o10.tgz -C /tmp o10
