#!/bin/bash
# device call 15: cooperative persistent sm_90a matmul (mm.persistent=2): correctness and speed
O=/tmp/o15; rm -rf $O; mkdir -p $O; W=/tmp/w15; rm -rf $W; mkdir -p $W && tar xJf .carry/bin.tar.xz -C $W; B=$W/bin
( python3 tests/models/gen_full_models.py /tmp/fm --only llama_decoder --outputs none > $O/gen.log 2>&1 ) &
SCHEDULES="mm.persistent=2,mm.tile_n=128 mm.persistent=2,mm.tile_n=256 mm.persistent=2,mm.tile_n=64,mm.stages=2" tests/gpu/matmul_schedules.sh $B/drkc $W/ms > $O/pinned.log 2>&1
tail -1 $O/pinned.log; grep FAIL $O/pinned.log | head -5
SHAPES="2048,2048,2048 2048,3072,2048 2048,5632,2048 2048,2048,5632 4096,4096,4096 1024,3072,768" \
SCHEDULES="n128=mm.tile_n=128,mm.split_k=1 n256=mm.tile_n=256,mm.split_k=1 q128=mm.persistent=2,mm.tile_n=128 q256=mm.persistent=2,mm.tile_n=256 p128=mm.persistent=1,mm.tile_n=128" tests/bench/mm_shapes.sh $B/drkc $O/shapes > $O/shapes.log 2>&1
for k in add_bf16 matmul_bf16 matmul_f16; do $B/drkc tests/bench/$k.drkg --target=sm_90a -o $O/shapes/$k.drkm; done
for k in matmul_bf16 matmul_f16; do $B/drkc tests/bench/$k.drkg --target=sm_90 -o $O/shapes/${k}_mma.drkm; done
$B/bench_kernels $O/shapes $O/bench.md > $O/bench.log 2>&1
grep -E "MatMul f16 [0-9x]+ \(" $O/bench.md | sed 's/information (shape sweep)//' | awk -F'|' '{print $2 $3 $5}'
wait
m=llama_decoder
V="mm.persistent=0 mm.persistent=2 mm.persistent=2,mm.tile_n=256"
for s in $V; do
  $B/drkc /tmp/fm/$m/model.onnx --target=sm_90a --precision=fp16 --fusion-aggressiveness=3 --schedule=$s -o /tmp/fm/$m/$s.drkm > $O/compile-$s.log 2>&1 &
done
$B/drkc /tmp/fm/$m/model.onnx --target=sm_90a --precision=fp16 --fusion-aggressiveness=3 -o /tmp/fm/$m/default.drkm > $O/compile-default.log 2>&1
wait
for r in 1 2; do for s in default $V; do echo "$m $s: $($B/drkrun /tmp/fm/$m/$s.drkm --iters 30 --warmup 5 2>&1 | grep resident)"; done; done | tee $O/models-speed.log
$B/drkrun /tmp/fm/$m/mm.persistent=2.drkm --iters 10 --warmup 3 --profile > $O/profile-coop.log 2>&1
$B/drkrun /tmp/fm/$m/mm.persistent=2,mm.tile_n=256.drkm --iters 10 --warmup 3 --profile > $O/profile-coop256.log 2>&1
rm -rf $O/shapes/*.drkm
tar czf $OUT/o15.tgz -C /tmp o15
