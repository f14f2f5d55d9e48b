#!/bin/bash
# device call 18: staged epilogue (default) vs registers (mm.staged=0): correctness and speed
O=/tmp/o18; rm -rf $O; mkdir -p $O; W=/tmp/w18; rm -rf $W; mkdir -p $W && tar xJf .carry/bin.tar.xz -C $W; B=$W/bin
( python3 tests/models/gen_full_models.py /tmp/fm --only llama_decoder gpt2_small --outputs none > $O/gen.log 2>&1; python3 tests/models/gen_full_models.py /tmp/fmm --medium --only llama_decoder gpt2_small > $O/genm.log 2>&1 ) &
SCHEDULES="mm.staged=1 mm.staged=1,mm.tile_n=256 mm.staged=1,mm.tile_n=128 mm.staged=1,mm.cluster=2,mm.tile_n=128" tests/gpu/matmul_schedules.sh $B/drkc $W/ms > $O/pinned.log 2>&1
tail -1 $O/pinned.log; grep FAIL $O/pinned.log | head -5
SHAPES="1024,2304,768 1024,3072,768 1024,768,3072 2048,2048,2048 2048,3072,2048 2048,5632,2048 2048,2048,5632 4096,4096,4096" \
SCHEDULES="u=mm.staged=0 s128=mm.tile_n=128 s256=mm.tile_n=256 p128=mm.persistent=1,mm.tile_n=128" tests/bench/mm_shapes.sh $B/drkc $O/shapes > $O/shapes.log 2>&1
for k in add_bf16 matmul_bf16 matmul_f16; do $B/drkc tests/bench/$k.drkg --target=sm_90a -o $O/shapes/$k.drkm; done
for k in matmul_bf16 matmul_f16; do $B/drkc tests/bench/$k.drkg --target=sm_90 -o $O/shapes/${k}_mma.drkm; done
$B/bench_kernels $O/shapes $O/bench.md > $O/bench.log 2>&1
grep -E "MatMul f16 [0-9x]+ \(" $O/bench.md | sed 's/information (shape sweep)//' | awk -F'|' '{print $2 $3 $5}'
wait
for m in llama_decoder gpt2_small; do
  for s in mm.staged=0 mm.staged=1; do
    echo "$m medium $s: $($B/drkc run /tmp/fmm/$m/model.onnx --device=cuda --precision=fp16 --fusion-aggressiveness=3 --schedule=$s --check 2>&1 | grep -E 'PASS|FAIL|error' | head -3 | tr '\n' ' ')"
  done
done | tee $O/medium.log
V="default mm.staged=0 mm.persistent=0"
for m in llama_decoder gpt2_small; do
  for s in $V; do
    k=$s; [ $s = default ] && k=mm.tile_n=0
    $B/drkc /tmp/fm/$m/model.onnx --target=sm_90a --precision=fp16 --fusion-aggressiveness=3 $([ $s = default ] || echo --schedule=$s) -o /tmp/fm/$m/$s.drkm > $O/compile-$m-$s.log 2>&1 &
  done
  wait
  for r in 1 2; do for s in $V; do echo "$m $s: $($B/drkrun /tmp/fm/$m/$s.drkm --iters 30 --warmup 5 2>&1 | grep resident)"; done; done | tee -a $O/models-speed.log
  $B/drkrun /tmp/fm/$m/default.drkm --iters 10 --warmup 3 --profile > $O/profile-$m.log 2>&1
done
rm -rf $O/shapes/*.drkm
tar czf $OUT/o18.tgz -C /tmp o18
