#!/bin/bash
# device call 45 (2026-12-02, fourth session): issue 15's acceptance tunes on the generated
# full models (tests/bench/tune_models.sh: tune within a budget, heuristic vs tuned module both
# checked against the CPU interpreter and timed, the warm re-tune from the database).
export PYTHONUNBUFFERED=1
W=/tmp/w45; rm -rf $W; mkdir -p $W && tar xJf .carry/bin.tar.xz -C $W && tar xJf .carry/mpi.tar.xz -C $W
source $W/mpi/env.sh
export DRKC=$W/mpi/bin/drkc DRKRUN=$W/bin/drkrun DRK_CACHE_DIR=/tmp/kc45 PATH=$PATH:/usr/local/cuda/bin; O=/tmp/o45; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
python3 tests/models/gen_full_models.py $O/full --only resnet50 bert_base gpt2_small vit_b16 --outputs none > $O/gen.log 2>&1
TRIALS=32 KERNELS=5 timeout -k 5 540 tests/bench/tune_models.sh $O/tune 40 $O/full/resnet50/model.onnx $O/full/bert_base/model.onnx \
  $O/full/gpt2_small/model.onnx $O/full/vit_b16/model.onnx > $O/tune.log 2>&1
echo "tune_models rc=$?"; cut -c1-300 $O/tune.log | grep -v "^drkc tune:" | tail -24
cp $O/tune/tune.md $OUT/ 2>/dev/null
tar czf $OUT/logs.tgz --exclude='*.onnx' --exclude='*.onnx.data' --exclude='*.drkm' --exclude='*.db' --exclude='*.pb' -C /tmp o45 2>/dev/null; ls -la $OUT
