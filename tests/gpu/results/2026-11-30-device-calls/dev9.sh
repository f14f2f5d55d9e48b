#!/bin/bash
# device call 9: persistent ping-pong sm_90a matmul: correctness (matmul graphs, models) and speed (shapes, LLaMA/GPT-2)
O=/tmp/o9; rm -rf $O; mkdir -p $O; W=/tmp/w9; rm -rf $W; mkdir -p $W && tar xJf .carry/bin.tar.xz -C $W; B=$W/bin
( python3 tests/models/gen_full_models.py /tmp/fm --only llama_decoder gpt2_small --outputs none > $O/gen.log 2>&1 ) &
for g in tests/nvptx/matmul/*.drkg tests/lower/exec/matmul_*.drkg tests/lower/exec/conv_nhwc*.drkg; do
  for s in mm.persistent=1 mm.persistent=1,mm.tile_n=64 mm.persistent=1,mm.stages=2; do
    out=$($B/drkc run $g --device=cuda --target=sm_90a --schedule=$s --check 2>&1)
    if grep -q PASS <<<"$out" && ! grep -q FAIL <<<"$out"; then echo "PASS $(basename $g) $s"; else echo "FAIL $(basename $g) $s: $(grep -E 'check|error' <<<"$out" | head -3 | tr '\n' ' ')"; fi
  done
done > $O/pinned.log 2>&1
echo "pinned: $(grep -c ^PASS $O/pinned.log) PASS, $(grep -c ^FAIL $O/pinned.log) FAIL"
CONFIGS="--fusion-aggressiveness=3,--precision=fp16,--schedule=mm.persistent=1 --precision=bf16,--schedule=mm.persistent=1" tests/gpu/run_bundle.sh .carry $O models > $O/bundle.log 2>&1
tail -1 $O/bundle.log; grep -v "PASS.*rc=0" $O/models.log | head
SCHEDULES="n128=mm.tile_n=128,mm.split_k=1 n256=mm.tile_n=256,mm.split_k=1 p128=mm.persistent=1,mm.tile_n=128 p64=mm.persistent=1,mm.tile_n=64" tests/bench/mm_shapes.sh $B/drkc $O/shapes > $O/shapes.log 2>&1
$B/bench_kernels $O/shapes $O/bench.md > $O/bench.log 2>&1
grep -E "MatMul f16 [0-9x]+ \(" $O/bench.md | sed 's/information (shape sweep)//'
wait
for m in llama_decoder gpt2_small; do
  for s in mm.persistent=0 mm.persistent=1; do
    $B/drkc /tmp/fm/$m/model.onnx --target=sm_90a --precision=fp16 --fusion-aggressiveness=3 --schedule=$s -o /tmp/fm/$m/$s.drkm > $O/compile-$m-$s.log 2>&1
  done
  for s in mm.persistent=0 mm.persistent=1 mm.persistent=0 mm.persistent=1; do echo "$m $s: $($B/drkrun /tmp/fm/$m/$s.drkm --iters 30 --warmup 5 2>&1 | grep resident)"; done
  $B/drkrun /tmp/fm/$m/mm.persistent=1.drkm --iters 10 --warmup 3 --profile > $O/profile-$m-p.log 2>&1
done | tee $O/models-speed.log
rm -rf $O/shapes/*.drkm
tar czf $OUT/o9.tgz -C /tmp o9
