#!/bin/bash
# device call 51 (2026-12-03): the PyTorch graph-dump path on the H200 (issue 18 part 4):
# tests/torch/test_torch2drkg.py with the H200's torch 2.11, then the zoo's 35 models through
# tools/torch2drkg.py (torch.export -> .drkg + safetensors, no ONNX) at batch 1 with realistic
# weights: compiled at both flag sets, `drkc run --device=cuda --check` at both, the default
# build's outputs against torch's f32 outputs, drkc's latency; no torch timings (--no-peers).
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
W=/tmp/w51; rm -rf $W; mkdir -p $W && tar xJf .carry/bin.tar.xz -C $W && tar xJf .carry/mpi.tar.xz -C $W
source $W/mpi/env.sh; cp $W/mpi/bin/drkc $W/bin/drkc
O=/tmp/o51; rm -rf $O; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
python3 tests/torch/test_torch2drkg.py $W/bin/drkc $O/t2d > $OUT/test_torch2drkg.log 2>&1; echo "test_torch2drkg rc=$?"
grep -E "^(ok|FAIL|PASS|FAILED)" $OUT/test_torch2drkg.log | tail -4
Z="--drkc $W/bin/drkc --drkrun $W/bin/drkrun --batch 1 --no-peers --init realistic --exporter torch2drkg --timeout 300 --gpu-lock $O/gpu.lock"
L1="vit_b_16 resnet18 mobilenet_v2 googlenet levit_128s albert_base"
L2="bert_base swin_t deit_tiny mixer_s16 poolformer_s12 mistral_small"
L3="gpt2 distilbert roberta_base t5_encoder qwen2_small deeplabv3_mobilenet"
L4="regnet_y_400mf densenet121 squeezenet1_1 shufflenet_v2_x1_0 mnasnet0_5 fcn_resnet50"
L5="efficientnet_b0 convnext_tiny lraspp_mobilenet ssdlite_head wav2vec2 yolo_head"
L6="llama_gqa whisper_encoder retinanet_head resnet50 mobilenet_v3_large"
i=0; for L in "$L1" "$L2" "$L3" "$L4" "$L5" "$L6"; do i=$((i+1))
  set -- $L; h=$(( ($# + 1) / 2 ))
  (timeout 500 python3 tests/zoo/zoo.py $Z --out $O/a$i --only ${@:1:$h} > $O/a$i.log 2>&1) &
  (timeout 500 python3 tests/zoo/zoo.py $Z --out $O/b$i --only ${@:$((h+1))} > $O/b$i.log 2>&1) &
done
wait
python3 tests/zoo/zoo.py --merge $O/[ab]? --out $O --name zoo > $O/merge.log 2>&1
cp $O/zoo.md $OUT/zoo-results.md; cp $O/zoo.json $OUT/zoo-results.json
(cd $O && tar czf $OUT/zoo-logs.tgz [ab]?.log merge.log)
grep -hE "^  [a-z0-9_]+ realistic" $O/[ab]?.log | cut -c1-220
tail -1 $O/merge.log
