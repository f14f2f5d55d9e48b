#!/bin/bash
# device call 60 (2026-12-03, third session): call 59's small_k.py again after the split-K fix
# (a pinned split_k past the k tiles left a split with no k tile: its consumer waited forever;
# three checks of call 59 timed out so): every form checked under 8 pins x 9 shapes, then the
# short-K shapes timed against the build before (a6400e7, no peel) and cuBLAS; then where
# ConvNeXt-T b32's time goes now (drkrun --profile of the fp16 module).
export PYTHONUNBUFFERED=1
W=/tmp/w60; rm -rf $W; mkdir -p $W && tar xJf .carry/bin.tar.xz -C $W && tar xJf .carry/mpi.tar.xz -C $W && tar xJf .carry/old.tar.xz -C $W
source $W/mpi/env.sh; cp $W/mpi/bin/drkc $W/bin/drkc
O=/tmp/o60; rm -rf $O; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > $OUT/dev60-gpu.txt 2>&1
$W/bin/drkc --version >> $OUT/dev60-gpu.txt 2>&1; $W/old/drkc --version >> $OUT/dev60-gpu.txt 2>&1
python3 - $O/cx.onnx > $O/export.log 2>&1 <<'P' &
import sys, torch, torchvision
m = torchvision.models.convnext_tiny().eval()
torch.onnx.export(m, (torch.randn(32, 3, 224, 224),), sys.argv[1], dynamo=True, external_data=False)
P
DRK_CACHE=0 timeout 240 python3 tests/bench/small_k.py --out $O/sk --drkc $W/bin/drkc --drkrun $W/bin/drkrun --old $W/old/drkc --iters 50 > $OUT/dev60-small-k.log 2>&1
echo "checks: $(grep -c ': PASS' $OUT/dev60-small-k.log) PASS"; grep -E ": FAIL|n/a" $OUT/dev60-small-k.log | head; tail -13 $OUT/dev60-small-k.log
wait
F="--target=sm_90a --precision=fp16 --fusion-aggressiveness=3"
for b in new old; do
  B=$W/bin/drkc; [ $b = old ] && B=$W/old/drkc
  timeout 90 $B $O/cx.onnx $F -o $O/cx-$b.drkm -q && timeout 60 $W/bin/drkrun $O/cx-$b.drkm --iters 30 --profile > $OUT/dev60-convnext-b32-$b.txt 2>&1
  grep "^resident" $OUT/dev60-convnext-b32-$b.txt
done
