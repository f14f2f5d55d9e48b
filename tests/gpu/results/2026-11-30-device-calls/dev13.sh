#!/bin/bash
# device call 13: 2-CTA cluster (TMA multicast of B) sm_90a matmul: correctness and speed
O=/tmp/o13; rm -rf $O; mkdir -p $O; W=/tmp/w13; rm -rf $W; mkdir -p $W && tar xJf .carry/bin.tar.xz -C $W; B=$W/bin
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv > $O/smi.txt 2>&1
( python3 tests/models/gen_full_models.py /tmp/fm --only llama_decoder --outputs none > $O/gen.log 2>&1; python3 tests/models/gen_full_models.py /tmp/fmm --medium --only llama_decoder gpt2_small > $O/genm.log 2>&1 ) &
tests/gpu/matmul_schedules.sh $B/drkc $W/ms > $O/pinned.log 2>&1
tail -1 $O/pinned.log; grep FAIL $O/pinned.log | head -5
SHAPES="1024,2304,768 1024,3072,768 1024,768,3072 2048,2048,2048 2048,3072,2048 2048,512,2048 2048,5632,2048 2048,2048,5632 4096,4096,4096" \
SCHEDULES="n128=mm.tile_n=128,mm.split_k=1 n256=mm.tile_n=256,mm.split_k=1 c128=mm.cluster=2,mm.tile_n=128,mm.split_k=1 c256=mm.cluster=2,mm.tile_n=256,mm.split_k=1" tests/bench/mm_shapes.sh $B/drkc $O/shapes > $O/shapes.log 2>&1
$B/bench_kernels $O/shapes $O/bench.md > $O/bench.log 2>&1
grep -E "MatMul f16 [0-9x]+ \(" $O/bench.md | sed 's/information (shape sweep)//' | awk -F'|' '{print $2 $3 $5}'
wait
for m in llama_decoder gpt2_small; do
  for s in mm.cluster=1 mm.cluster=2; do
    echo "$m medium $s: $($B/drkc run /tmp/fmm/$m/model.onnx --device=cuda --precision=fp16 --fusion-aggressiveness=3 --schedule=$s,mm.tile_n=128 --check 2>&1 | grep -E 'PASS|FAIL|error' | head -3 | tr '\n' ' ')"
  done
done | tee $O/medium.log
m=llama_decoder
for s in mm.cluster=1 mm.cluster=2 mm.cluster=2,mm.persistent=0; do
  $B/drkc /tmp/fm/$m/model.onnx --target=sm_90a --precision=fp16 --fusion-aggressiveness=3 --schedule=$s -o /tmp/fm/$m/$s.drkm > $O/compile-$s.log 2>&1
done
for r in 1 2; do for s in mm.cluster=1 mm.cluster=2 mm.cluster=2,mm.persistent=0; do echo "$m $s: $($B/drkrun /tmp/fm/$m/$s.drkm --iters 30 --warmup 5 2>&1 | grep resident)"; done; done | tee $O/models-speed.log
$B/drkrun /tmp/fm/$m/mm.cluster=2.drkm --iters 10 --warmup 3 --profile > $O/profile-cluster.log 2>&1
$B/drkrun /tmp/fm/$m/mm.cluster=1.drkm --iters 10 --warmup 3 --profile > $O/profile-base.log 2>&1
rm -rf $O/shapes/*.drkm
tar czf $OUT/o13.tgz -C /tmp o13
