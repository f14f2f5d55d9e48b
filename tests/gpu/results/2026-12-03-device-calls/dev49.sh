#!/bin/bash
# device call 49 (2026-12-03): the zoo's other configurations at batch 1 on the H200: freshly
# initialised weights through the dynamo exporter (its optimizer shares identical initializers)
# and realistic weights through the TorchScript exporter (opset 17), all 35 models, checks at
# both flag sets and drkc's latency; no torch timings (--no-peers: call 34/35 timed batch 1).
# Six zoo.py processes on disjoint model lists, each stopped at 540 s; models not reached are
# missing from the table.
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
W=/tmp/w49; rm -rf $W; mkdir -p $W && tar xJf .carry/bin.tar.xz -C $W && tar xJf .carry/mpi.tar.xz -C $W
source $W/mpi/env.sh; cp $W/mpi/bin/drkc $W/bin/drkc
O=/tmp/o49; rm -rf $O; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
Z="--drkc $W/bin/drkc --drkrun $W/bin/drkrun --batch 1 --timeout 300 --no-peers --gpu-lock $O/gpu.lock"
L1="vit_b_16 resnet18 mobilenet_v2 googlenet levit_128s albert_base"
L2="bert_base swin_t deit_tiny mixer_s16 poolformer_s12 mistral_small"
L3="gpt2 distilbert roberta_base t5_encoder qwen2_small deeplabv3_mobilenet"
L4="regnet_y_400mf densenet121 squeezenet1_1 shufflenet_v2_x1_0 mnasnet0_5 fcn_resnet50"
L5="efficientnet_b0 convnext_tiny lraspp_mobilenet ssdlite_head wav2vec2 yolo_head"
L6="llama_gqa whisper_encoder retinanet_head resnet50 mobilenet_v3_large"
i=0; for L in "$L1" "$L2" "$L3" "$L4" "$L5" "$L6"; do i=$((i+1))
  (timeout 540 python3 tests/zoo/zoo.py $Z --init fresh --exporter dynamo --out $O/f$i --only $L > $O/f$i.log 2>&1
   ) &
  (timeout 540 python3 tests/zoo/zoo.py $Z --init realistic --exporter torchscript --out $O/t$i --only $L > $O/t$i.log 2>&1
   ) &
done
wait
python3 tests/zoo/zoo.py --merge $O/f? $O/t? --out $O --name zoo > $O/merge.log 2>&1
cp $O/zoo.md $OUT/zoo-results.md; cp $O/zoo.json $OUT/zoo-results.json
(cd $O && tar czf $OUT/zoo-logs.tgz f?.log t?.log merge.log)
grep -hE "^  [a-z0-9_]+ (fresh|realistic)" $O/[ft]?.log | cut -c1-220
tail -1 $O/merge.log
