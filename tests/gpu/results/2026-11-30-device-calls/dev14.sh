#!/bin/bash
# device call 14: cluster matmul with CUTLASS-style remote arrives (release.cta); occupancy; speed
O=/tmp/o14; rm -rf $O; mkdir -p $O; W=/tmp/w14; rm -rf $W; mkdir -p $W && tar xJf .carry/bin.tar.xz -C $W; B=$W/bin
python3 .carry/occ.py .carry/mmd_0.cubin 196672 .carry/mmd_cl.cubin 196672 > $O/occ.log 2>&1; cat $O/occ.log
( python3 tests/models/gen_full_models.py /tmp/fm --only llama_decoder --outputs none > $O/gen.log 2>&1 ) &
SHAPES="2048,2048,2048 2048,3072,2048 2048,5632,2048 2048,2048,5632 4096,4096,4096" \
SCHEDULES="n128=mm.tile_n=128,mm.split_k=1 n256=mm.tile_n=256,mm.split_k=1 c128=mm.cluster=2,mm.tile_n=128,mm.split_k=1 c256=mm.cluster=2,mm.tile_n=256,mm.split_k=1" tests/bench/mm_shapes.sh $B/drkc $O/shapes > $O/shapes.log 2>&1
for k in add_bf16 matmul_bf16 matmul_f16; do $B/drkc tests/bench/$k.drkg --target=sm_90a -o $O/shapes/$k.drkm; done
for k in matmul_bf16 matmul_f16; do $B/drkc tests/bench/$k.drkg --target=sm_90 -o $O/shapes/${k}_mma.drkm; done
$B/bench_kernels $O/shapes $O/bench.md > $O/bench.log 2>&1
grep -E "MatMul f16 [0-9x]+ \(" $O/bench.md | sed 's/information (shape sweep)//' | awk -F'|' '{print $2 $3 $5}'
wait
m=llama_decoder
for s in mm.cluster=1 mm.cluster=2; do
  $B/drkc /tmp/fm/$m/model.onnx --target=sm_90a --precision=fp16 --fusion-aggressiveness=3 --schedule=$s -o /tmp/fm/$m/$s.drkm > $O/compile-$s.log 2>&1
done
for r in 1 2; do for s in mm.cluster=1 mm.cluster=2; do echo "$m $s: $($B/drkrun /tmp/fm/$m/$s.drkm --iters 30 --warmup 5 2>&1 | grep resident)"; done; done | tee $O/models-speed.log
$B/drkrun /tmp/fm/$m/mm.cluster=2.drkm --iters 10 --warmup 3 --profile > $O/profile-cluster.log 2>&1
rm -rf $O/shapes/*.drkm
tar czf $OUT/o14.tgz -C /tmp o14
