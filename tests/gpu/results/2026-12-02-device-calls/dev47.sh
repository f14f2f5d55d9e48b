#!/bin/bash
# device call 47 (2026-12-02, fourth session): DenseNet-121 b32 again with wide Concats lowered as
# one copy kernel per input (call 46: 10 Concats of 17-24 inputs took 5.5 of 8.6 ms), profiled
# per kernel; ConvNeXt-T b32 beside it; then issue 15's acceptance tunes on the generated
# ResNet-50 and BERT-base (tests/bench/tune_models.sh, bc no longer needed).
export PYTHONUNBUFFERED=1
W=/tmp/w47; rm -rf $W; mkdir -p $W && tar xJf .carry/bin.tar.xz -C $W && tar xJf .carry/mpi.tar.xz -C $W
source $W/mpi/env.sh; cp $W/mpi/bin/drkc $W/bin/drkc
export DRKC=$W/bin/drkc DRKRUN=$W/bin/drkrun DRK_CACHE_DIR=/tmp/kc47 PATH=$PATH:/usr/local/cuda/bin; O=/tmp/o47; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
python3 tests/models/gen_full_models.py $O/full --only resnet50 bert_base --outputs none > $O/gen.log 2>&1 &
timeout -k 5 230 python3 tests/zoo/zoo.py --drkc $DRKC --drkrun $DRKRUN --init realistic --exporter dynamo --batch big --big-batch 32 \
  --timeout 220 --iters 20 --keep --out $O/zoo --only densenet121 convnext_tiny > $O/zoo.log 2>&1
wait
grep -E "^  (densenet|convnext)" $O/zoo.log | cut -c1-300; cp $O/zoo/results.json $OUT/zoo.json 2>/dev/null
M=$(find $O/zoo -path '*densenet*' -name model-fast.drkm | head -1)
if [ -n "$M" ]; then
  $DRKRUN $M --profile --iters 20 --warmup 5 > $O/densenet-profile.txt 2>&1
  grep -E "^resident|total" $O/densenet-profile.txt
  grep -E '^ +[0-9]+ ' $O/densenet-profile.txt | awk '{n=$4; sub(/^k[0-9]+_/,"",n); sub(/_[0-9]+$/,"",n); t[n]+=$2; c[n]++} END {for (k in t) printf "  %-40s %3d kernels %8.4f ms\n", k, c[k], t[k]}' | sort -k4 -nr | head -12
  cp $O/densenet-profile.txt $OUT/
fi
TRIALS=24 KERNELS=4 timeout -k 5 250 tests/bench/tune_models.sh $O/tune 30 $O/full/resnet50/model.onnx $O/full/bert_base/model.onnx > $O/tune.log 2>&1
echo "tune_models rc=$?"; grep -v "^drkc tune:" $O/tune.log | cut -c1-300 | tail -12; cp $O/tune/tune.md $OUT/ 2>/dev/null
tar czf $OUT/logs.tgz --exclude='*.onnx' --exclude='*.onnx.data' --exclude='*.drkm' --exclude='*.db' --exclude='*.pb' --exclude='kcache' --exclude='kernel-cache' -C /tmp o47 2>/dev/null; ls -la $OUT
