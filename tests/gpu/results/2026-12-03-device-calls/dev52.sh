#!/bin/bash
# After the call: the merge line below was fixed ($O/b* also matched the b*.log files, so the
# merge failed in the call); the groups were merged by a follow-up command in the same machine.
# device call 52 (2026-12-03, second session): issue 18's larger batch for the 23 zoo models
# that calls 49-50 ran at batch 1 only (dynamo exporter, realistic weights, with the torch
# timings serialized by --gpu-lock), and the torch2drkg path's transformers re-timed after the
# SDPA / view-sharing / transposed-weight changes (six with the torch timings, the rest and
# swin_t / wav2vec2 (the two ops mapped after call 51) without).
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
W=/tmp/w52; rm -rf $W; mkdir -p $W && tar xJf .carry/bin.tar.xz -C $W && tar xJf .carry/mpi.tar.xz -C $W
source $W/mpi/env.sh; cp $W/mpi/bin/drkc $W/bin/drkc
O=/tmp/o52; rm -rf $O; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
Z="--drkc $W/bin/drkc --drkrun $W/bin/drkrun --gpu-lock $O/gpu.lock"
B="--batch big --init realistic --exporter dynamo --timeout 240"
i=0; for L in "resnet18 densenet121" "mobilenet_v2 squeezenet1_1" "regnet_y_400mf shufflenet_v2_x1_0" \
  "mnasnet0_5 googlenet" "deit_tiny mixer_s16" "levit_128s poolformer_s12" "distilbert roberta_base" \
  "albert_base t5_encoder" "mistral_small qwen2_small" "wav2vec2 lraspp_mobilenet" "fcn_resnet50" "retinanet_head ssdlite_head"; do i=$((i+1))
  (timeout 545 python3 tests/zoo/zoo.py $Z $B --out $O/b$i --only $L > $O/b$i.log 2>&1) &
done
T="--batch 1 --init realistic --exporter torch2drkg --timeout 240"
(timeout 545 python3 tests/zoo/zoo.py $Z $T --out $O/p1 --only bert_base gpt2 > $O/p1.log 2>&1) &
(timeout 545 python3 tests/zoo/zoo.py $Z $T --out $O/p2 --only llama_gqa vit_b_16 > $O/p2.log 2>&1) &
(timeout 545 python3 tests/zoo/zoo.py $Z $T --out $O/p3 --only whisper_encoder t5_encoder > $O/p3.log 2>&1) &
(timeout 545 python3 tests/zoo/zoo.py $Z $T --no-peers --out $O/q1 --only swin_t wav2vec2 distilbert > $O/q1.log 2>&1) &
(timeout 545 python3 tests/zoo/zoo.py $Z $T --no-peers --out $O/q2 --only roberta_base qwen2_small mistral_small > $O/q2.log 2>&1) &
wait
python3 tests/zoo/zoo.py --merge $(ls -d $O/b*/) --out $O/mb --name zoo > $O/merge-b.log 2>&1
python3 tests/zoo/zoo.py --merge $O/p? $O/q? --out $O/mt --name zoo > $O/merge-t.log 2>&1
cp $O/mb/zoo.md $OUT/zoo-big.md; cp $O/mb/zoo.json $OUT/zoo-big.json
cp $O/mt/zoo.md $OUT/zoo-t2d.md; cp $O/mt/zoo.json $OUT/zoo-t2d.json
(cd $O && tar czf $OUT/zoo-logs.tgz b*.log p?.log q?.log merge-?.log)
grep -hE "^  [a-z0-9_]+ (fresh|realistic)" $O/*.log | cut -c1-200
tail -n 1 $O/merge-b.log $O/merge-t.log
