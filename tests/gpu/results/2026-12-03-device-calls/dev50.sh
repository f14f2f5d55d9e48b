#!/bin/bash
# device call 50 (2026-12-03): what call 49 did not reach (TorchScript exporter: 10 models;
# fresh weights: 2; densenet121 with a longer per-model limit), and the larger batch (8 for
# image models, 4 for the rest) through the dynamo exporter with realistic weights for 12
# models, with the torch timings (eager, reduce-overhead) serialized by --gpu-lock.
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
W=/tmp/w50; rm -rf $W; mkdir -p $W && tar xJf .carry/bin.tar.xz -C $W && tar xJf .carry/mpi.tar.xz -C $W
source $W/mpi/env.sh; cp $W/mpi/bin/drkc $W/bin/drkc
O=/tmp/o50; rm -rf $O; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
Z="--drkc $W/bin/drkc --drkrun $W/bin/drkrun --gpu-lock $O/gpu.lock"
T="--batch 1 --no-peers --init realistic --exporter torchscript"
(timeout 545 python3 tests/zoo/zoo.py $Z $T --timeout 500 --out $O/t1 --only densenet121 mnasnet0_5 > $O/t1.log 2>&1) &
(timeout 545 python3 tests/zoo/zoo.py $Z $T --timeout 300 --out $O/t2 --only mobilenet_v3_large shufflenet_v2_x1_0 albert_base > $O/t2.log 2>&1) &
(timeout 545 python3 tests/zoo/zoo.py $Z $T --timeout 300 --out $O/t3 --only mistral_small wav2vec2 yolo_head > $O/t3.log 2>&1) &
(timeout 545 python3 tests/zoo/zoo.py $Z $T --timeout 300 --out $O/t4 --only deeplabv3_mobilenet fcn_resnet50 > $O/t4.log 2>&1) &
(timeout 545 python3 tests/zoo/zoo.py $Z --batch 1 --no-peers --init fresh --exporter dynamo --timeout 300 --out $O/f1 --only mistral_small deeplabv3_mobilenet > $O/f1.log 2>&1) &
B="--batch big --init realistic --exporter dynamo --timeout 300"
i=0; for L in "resnet50 efficientnet_b0" "vit_b_16 swin_t" "bert_base whisper_encoder" "gpt2 llama_gqa" "convnext_tiny mobilenet_v3_large" "deeplabv3_mobilenet yolo_head"; do i=$((i+1))
  (timeout 545 python3 tests/zoo/zoo.py $Z $B --out $O/b$i --only $L > $O/b$i.log 2>&1) &
done
wait
python3 tests/zoo/zoo.py --merge $O/t? $O/f1 $O/b? --out $O --name zoo > $O/merge.log 2>&1
cp $O/zoo.md $OUT/zoo-results.md; cp $O/zoo.json $OUT/zoo-results.json
(cd $O && tar czf $OUT/zoo-logs.tgz [tfb]?.log merge.log)
grep -hE "^  [a-z0-9_]+ (fresh|realistic)" $O/[tfb]?.log | cut -c1-220
tail -1 $O/merge.log
