#!/bin/bash
# device call 46 (2026-12-02, fourth session): --target=sm_90's fallback plan on the H200
# (tests/gpu/fallback.sh: one module, four ways: main cubin, main PTX JIT, fallback cubin,
# fallback compute_90 PTX JIT, each checked against ONNX Runtime); DenseNet-121 b32 profiled per
# kernel (call 44: 2.41x torch.compile); then issue 15's acceptance tunes on the generated
# ResNet-50 and BERT-base (tests/bench/tune_models.sh) in what time is left.
export PYTHONUNBUFFERED=1
W=/tmp/w46; rm -rf $W; mkdir -p $W && tar xJf .carry/bin.tar.xz -C $W && tar xJf .carry/mpi.tar.xz -C $W
source $W/mpi/env.sh; cp $W/mpi/bin/drkc $W/bin/drkc
export DRKC=$W/bin/drkc DRKRUN=$W/bin/drkrun DRK_CACHE_DIR=/tmp/kc46 PATH=$PATH:/usr/local/cuda/bin; O=/tmp/o46; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
timeout -k 5 200 tests/gpu/fallback.sh $W/bin $O/fb $O/fbr > $O/fallback.log 2>&1; echo "fallback rc=$?"
cat $O/fbr/fallback.md; grep -A6 "^== " $O/fallback.log | head -40; cp $O/fbr/fallback.md $OUT/ 2>/dev/null
timeout -k 5 150 python3 tests/zoo/zoo.py --drkc $DRKC --drkrun $DRKRUN --init realistic --exporter dynamo --batch big --big-batch 32 \
  --timeout 140 --iters 20 --keep --out $O/zoo --only densenet121 > $O/zoo.log 2>&1
grep -E "^  densenet" $O/zoo.log | cut -c1-300
M=$(find $O/zoo -name model-fast.drkm | head -1)
if [ -n "$M" ]; then
  $DRKRUN $M --profile --iters 20 --warmup 5 > $O/densenet-profile.txt 2>&1
  grep -E "^resident|total" $O/densenet-profile.txt
  grep -E '^ +[0-9]+ ' $O/densenet-profile.txt | sort -k2 -nr | head -25
  grep -E '^ +[0-9]+ ' $O/densenet-profile.txt | awk '{n=$4; sub(/^k[0-9]+_/,"",n); t[n]+=$2; c[n]++} END {for (k in t) printf "  %-40s %3d kernels %8.4f ms\n", k, c[k], t[k]}' | sort -k4 -nr | head -12
  $DRKRUN $M --list > $O/densenet-list.txt 2>&1; cp $O/densenet-profile.txt $O/densenet-list.txt $OUT/
fi
python3 tests/models/gen_full_models.py $O/full --only resnet50 bert_base --outputs none > $O/gen.log 2>&1
TRIALS=32 KERNELS=5 timeout -k 5 250 tests/bench/tune_models.sh $O/tune 40 $O/full/resnet50/model.onnx $O/full/bert_base/model.onnx > $O/tune.log 2>&1
echo "tune_models rc=$?"; grep -v "^drkc tune:" $O/tune.log | cut -c1-300 | tail -12; cp $O/tune/tune.md $OUT/ 2>/dev/null
tar czf $OUT/logs.tgz --exclude='*.onnx' --exclude='*.onnx.data' --exclude='*.drkm' --exclude='*.db' --exclude='*.pb' --exclude='kcache' -C /tmp o46 2>/dev/null; ls -la $OUT
