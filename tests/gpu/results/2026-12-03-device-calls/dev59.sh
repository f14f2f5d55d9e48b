#!/bin/bash
# device call 59 (2026-12-03, third session): issue 16 after b52ca15 (the sm_90a matmul's first
# k step peeled with scale-d 0 and the k loop kept: no wgmma serialization (C7520) on K <= 256;
# .minnctapersm 1 so setmaxnreg holds). (1) tests/bench/small_k.py: every kernel form checked
# against the interpreter under 8 pins x 9 shapes, then the short-K shapes timed against the
# build before (a6400e7) and cuBLAS. (2) tests/zoo/zoo.py, dynamo exports, realistic weights,
# --check at both flag sets, against torch.compile(reduce-overhead): CNNs at b1 and b32,
# transformers at b1 and their larger batch.
export PYTHONUNBUFFERED=1
W=/tmp/w59; rm -rf $W; mkdir -p $W && tar xJf .carry/bin.tar.xz -C $W && tar xJf .carry/mpi.tar.xz -C $W && tar xJf .carry/old.tar.xz -C $W
source $W/mpi/env.sh; cp $W/mpi/bin/drkc $W/bin/drkc
O=/tmp/o59; rm -rf $O; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > $OUT/dev59-gpu.txt 2>&1
$W/bin/drkc --version >> $OUT/dev59-gpu.txt 2>&1; $W/old/drkc --version >> $OUT/dev59-gpu.txt 2>&1
export DRK_CACHE_DIR=$O/kc
DRK_CACHE=0 timeout 200 python3 tests/bench/small_k.py --out $O/sk --drkc $W/bin/drkc --drkrun $W/bin/drkrun --old $W/old/drkc --iters 50 > $OUT/dev59-small-k.log 2>&1
grep -c "PASS" $OUT/dev59-small-k.log; grep -E "FAIL|n/a" $OUT/dev59-small-k.log | head; tail -12 $OUT/dev59-small-k.log
Z="--drkc $W/bin/drkc --drkrun $W/bin/drkrun --gpu-lock $O/gpu.lock --init realistic --exporter dynamo --timeout 250"
(timeout 260 python3 tests/zoo/zoo.py $Z --batch both --big-batch 32 --out $O/z1 --only convnext_tiny resnet50 > $O/z1.log 2>&1) &
(timeout 260 python3 tests/zoo/zoo.py $Z --batch big --big-batch 32 --out $O/z2 --only mobilenet_v3_large efficientnet_b0 regnet_y_400mf > $O/z2.log 2>&1) &
(timeout 260 python3 tests/zoo/zoo.py $Z --batch both --out $O/z3 --only vit_b_16 bert_base > $O/z3.log 2>&1) &
(timeout 260 python3 tests/zoo/zoo.py $Z --batch big --out $O/z4 --only poolformer_s12 swin_t mixer_s16 > $O/z4.log 2>&1) &
wait
python3 tests/zoo/zoo.py --merge $O/z1 $O/z2 $O/z3 $O/z4 --out $O/m --name zoo > $O/merge.log 2>&1
cp $O/m/zoo.md $OUT/dev59-zoo.md; cp $O/m/zoo.json $OUT/dev59-zoo.json
(cd $O && tar czf $OUT/dev59-zoo-logs.tgz z*.log merge.log)
grep -hE "^  [a-z0-9_]+ (fresh|realistic)" $O/z*.log | cut -c1-200
tail -n 1 $O/merge.log
