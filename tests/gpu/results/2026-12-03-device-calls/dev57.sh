#!/bin/bash
# device call 57 (2026-12-03, third session): issue 16 diagnosis. (1) The CNNs that lose or were
# not re-timed: ConvNeXt-T b32, DenseNet-121 b32 (the BatchNorm fold since call 41), PoolFormer-S12
# b8, through tests/zoo/zoo.py (dynamo export, realistic weights, --check, torch.compile
# reduce-overhead), then drkrun --profile of the fp16 module (where the time goes). (2) ncu of the
# direct depthwise kernel on three shapes of tests/bench/dwconv.py (why 15-55% of HBM).
export PYTHONUNBUFFERED=1
W=/tmp/w57; rm -rf $W; mkdir -p $W && tar xJf .carry/bin.tar.xz -C $W && tar xJf .carry/mpi.tar.xz -C $W
source $W/mpi/env.sh; cp $W/mpi/bin/drkc $W/bin/drkc
O=/tmp/o57; rm -rf $O; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > $OUT/dev57-gpu.txt 2>&1
Z="--drkc $W/bin/drkc --drkrun $W/bin/drkrun --gpu-lock $O/gpu.lock --batch big --init realistic --exporter dynamo --timeout 330 --keep"
(timeout 345 python3 tests/zoo/zoo.py $Z --big-batch 32 --out $O/z1 --only convnext_tiny > $O/z1.log 2>&1) &
(timeout 345 python3 tests/zoo/zoo.py $Z --big-batch 32 --out $O/z2 --only densenet121 > $O/z2.log 2>&1) &
(timeout 345 python3 tests/zoo/zoo.py $Z --out $O/z3 --only poolformer_s12 > $O/z3.log 2>&1) &
# meanwhile: the depthwise shapes under ncu (the GPU lock is not taken: ncu serialises kernels itself)
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
python3 tests/bench/dwconv.py export $O/dw > /dev/null
S="--section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy --section LaunchStats --section SourceCounters"
for s in mnv3_112x16_k3s1_b32 convnext_56x96_k7_b32 effb0_56x144_k3s1_b32; do
  $W/bin/drkc $O/dw/$s.onnx --target=sm_90a --precision=fp16 --fusion-aggressiveness=3 --layout=nhwc -o $O/dw/$s.drkm -q &&
  timeout 90 $NCU $S -k regex:ConvNHWC -c 1 $W/bin/drkrun $O/dw/$s.drkm --iters 1 --warmup 0 > $OUT/dev57-ncu-$s.txt 2>&1
done
wait
python3 tests/zoo/zoo.py --merge $O/z1 $O/z2 $O/z3 --out $O/m --name zoo > $O/merge.log 2>&1
cp $O/m/zoo.md $OUT/dev57-zoo.md; cp $O/m/zoo.json $OUT/dev57-zoo.json
(cd $O && tar czf $OUT/dev57-zoo-logs.tgz z*.log merge.log)
for m in $(find $O/z1 $O/z2 $O/z3 -name 'model-fast.drkm'); do
  echo "== $m"; timeout 60 $W/bin/drkrun $m --iters 30 --profile 2>&1 | head -45
done > $OUT/dev57-profiles.txt 2>&1
grep -hE "^  [a-z0-9_]+ (fresh|realistic)" $O/z*.log | cut -c1-200
tail -n 2 $O/merge.log
