#!/bin/bash
# device call 48 (2026-12-02, fourth session): the warm re-tune again after 32fca5a (the prune
# hook stops lowering past a kernel's share of --time): tests/bench/tune_models.sh on the
# generated ResNet-50 with a budget its trials fit in (3 kernels x 8 trials in 40 s), so that
# the --resume run should measure nothing, take well under a minute and give the same module.
export PYTHONUNBUFFERED=1
W=/tmp/w48; rm -rf $W; mkdir -p $W && tar xJf .carry/bin.tar.xz -C $W && tar xJf .carry/mpi.tar.xz -C $W
source $W/mpi/env.sh; cp $W/mpi/bin/drkc $W/bin/drkc
export DRKC=$W/bin/drkc DRKRUN=$W/bin/drkrun DRK_CACHE_DIR=/tmp/kc48 PATH=$PATH:/usr/local/cuda/bin; O=/tmp/o48; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
python3 tests/models/gen_full_models.py $O/full --only resnet50 --outputs none > $O/gen.log 2>&1
TRIALS=8 KERNELS=3 timeout -k 5 200 tests/bench/tune_models.sh $O/tune 40 $O/full/resnet50/model.onnx > $O/tune.log 2>&1
echo "tune_models rc=$?"; grep -v "^drkc tune:" $O/tune.log | cut -c1-300 | tail -8; cp $O/tune/tune.md $OUT/ 2>/dev/null
tail -6 $O/tune/resnet50/warm.log; cp $O/tune/resnet50/warm.log $O/tune/resnet50/tune.log $OUT/ 2>/dev/null; ls -la $OUT
