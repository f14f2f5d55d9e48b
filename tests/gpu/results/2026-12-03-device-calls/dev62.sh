#!/bin/bash
# device call 62 (2026-12-03, third session): the short-K cooperative default (76ec21f): small_k.py
# (checks under 8 pins x 9 shapes; times against a6400e7 and cuBLAS), ConvNeXt-T b32 resident
# latency and b8 checked against the interpreter (the b8 stage-1 MLP matmul takes the
# cooperative form by default).
export PYTHONUNBUFFERED=1
W=/tmp/w62; rm -rf $W; mkdir -p $W && tar xJf .carry/bin.tar.xz -C $W && tar xJf .carry/mpi.tar.xz -C $W && tar xJf .carry/old.tar.xz -C $W
source $W/mpi/env.sh; cp $W/mpi/bin/drkc $W/bin/drkc
O=/tmp/o62; rm -rf $O; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > $OUT/dev62-gpu.txt 2>&1
$W/bin/drkc --version >> $OUT/dev62-gpu.txt 2>&1
python3 - $O > $O/export.log 2>&1 <<'P' &
import sys, torch, torchvision
m = torchvision.models.convnext_tiny().eval()
for b in (32, 8):
    torch.onnx.export(m, (torch.randn(b, 3, 224, 224),), f"{sys.argv[1]}/cx{b}.onnx", dynamo=True, external_data=False)
P
DRK_CACHE=0 timeout 150 python3 tests/bench/small_k.py --out $O/sk --drkc $W/bin/drkc --drkrun $W/bin/drkrun --old $W/old/drkc --iters 50 > $OUT/dev62-small-k.log 2>&1
echo "checks: $(grep -c ': PASS' $OUT/dev62-small-k.log) PASS"; grep -E ": FAIL|n/a" $OUT/dev62-small-k.log | head; tail -12 $OUT/dev62-small-k.log
wait
F="--target=sm_90a --precision=fp16 --fusion-aggressiveness=3"
timeout 90 $W/bin/drkc $O/cx32.onnx $F -o $O/cx32.drkm -q && timeout 60 $W/bin/drkrun $O/cx32.drkm --iters 30 --profile > $OUT/dev62-convnext-b32.txt 2>&1
grep "^resident" $OUT/dev62-convnext-b32.txt
timeout 150 $W/bin/drkc run $O/cx8.onnx --device=cuda --check $F > $OUT/dev62-convnext-b8-check.txt 2>&1; echo "b8 check rc=$?"; grep -E "PASS|FAIL" $OUT/dev62-convnext-b8-check.txt | head -3
