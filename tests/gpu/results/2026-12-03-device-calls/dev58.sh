#!/bin/bash
# device call 58 (2026-12-03, third session): issue 16 after a6400e7 (ConvNeXt's depthwise convs
# start a channels-last region from the model's own permutes; PoolFormer's GroupNorm(1) computed
# channels-last). (1) tests/zoo/zoo.py, dynamo exports, realistic weights, --check, against
# torch.compile(reduce-overhead): ConvNeXt-T b1/b32 and PoolFormer-S12 b1/b8 (the models that lost
# in call 57), ViT-B/16, Swin-T and MobileNetV3-L at b1 as regression checks of the patch-conv and
# layout changes; drkrun --profile of the two fp16 modules.
export PYTHONUNBUFFERED=1
W=/tmp/w58; rm -rf $W; mkdir -p $W && tar xJf .carry/bin.tar.xz -C $W && tar xJf .carry/mpi.tar.xz -C $W
source $W/mpi/env.sh; cp $W/mpi/bin/drkc $W/bin/drkc
O=/tmp/o58; rm -rf $O; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > $OUT/dev58-gpu.txt 2>&1
$W/bin/drkc --version >> $OUT/dev58-gpu.txt 2>&1
Z="--drkc $W/bin/drkc --drkrun $W/bin/drkrun --gpu-lock $O/gpu.lock --init realistic --exporter dynamo --timeout 230 --keep"
(timeout 240 python3 tests/zoo/zoo.py $Z --batch both --big-batch 32 --out $O/z1 --only convnext_tiny > $O/z1.log 2>&1) &
(timeout 240 python3 tests/zoo/zoo.py $Z --batch both --out $O/z2 --only poolformer_s12 > $O/z2.log 2>&1) &
(timeout 240 python3 tests/zoo/zoo.py $Z --batch 1 --out $O/z3 --only vit_b_16 swin_t mobilenet_v3_large > $O/z3.log 2>&1) &
wait
python3 tests/zoo/zoo.py --merge $O/z1 $O/z2 $O/z3 --out $O/m --name zoo > $O/merge.log 2>&1
cp $O/m/zoo.md $OUT/dev58-zoo.md; cp $O/m/zoo.json $OUT/dev58-zoo.json
(cd $O && tar czf $OUT/dev58-zoo-logs.tgz z*.log merge.log)
grep -hE "^  [a-z0-9_]+ (fresh|realistic)" $O/z*.log | cut -c1-200
tail -n 1 $O/merge.log
for m in $(find $O/z1 $O/z2 -path '*b32*' -name 'model-fast.drkm' -o -path '*b8*' -name 'model-fast.drkm'); do
  echo "== $m"; timeout 60 $W/bin/drkrun $m --iters 30 --profile 2>&1 | head -110
done > $OUT/dev58-profiles.txt 2>&1
