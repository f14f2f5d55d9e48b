#!/bin/bash
# device call 34 (2026-12-02): the model zoo on the H200 (dynamo exporter, realistic weights,
# batch 1), four zoo.py processes side by side on disjoint model lists, latencies serialized by
# --gpu-lock; each process stops at 440 s (call 33's zoo part ran past the call's limit: its
# results were lost), models not reached are missing from the table.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
O=/tmp/o34; rm -rf $O; mkdir -p $O; W=/tmp/w34; rm -rf $W; mkdir -p $W && tar xJf .carry/bin.tar.xz -C $W; B=$W/bin
Z="--drkc $B/drkc --drkrun $B/drkrun --init realistic --exporter dynamo --batch 1 --timeout 150 --gpu-lock $O/gpu.lock"
L1="vit_b_16 resnet18 mobilenet_v2 googlenet levit_128s albert_base wav2vec2 retinanet_head resnet50"
L2="bert_base swin_t deit_tiny mixer_s16 poolformer_s12 mistral_small lraspp_mobilenet mobilenet_v3_large"
L3="gpt2 distilbert roberta_base t5_encoder qwen2_small deeplabv3_mobilenet ssdlite_head efficientnet_b0 convnext_tiny"
L4="regnet_y_400mf densenet121 squeezenet1_1 shufflenet_v2_x1_0 mnasnet0_5 fcn_resnet50 yolo_head llama_gqa whisper_encoder"
i=0; for L in "$L1" "$L2" "$L3" "$L4"; do i=$((i+1))
  timeout 440 python3 tests/zoo/zoo.py $Z --out $O/z$i --only $L > $O/z$i.log 2>&1 &
done
wait
python3 tests/zoo/zoo.py --merge $O/z1 $O/z2 $O/z3 $O/z4 --out $O --name zoo > $O/merge.log 2>&1
cp $O/zoo.md $OUT/zoo-results.md; cp $O/zoo.json $OUT/zoo-results.json
tar czf $OUT/zoo-logs.tgz -C $O z1.log z2.log z3.log z4.log merge.log
grep -hE "^  [a-z0-9_]+ realistic" $O/z?.log | cut -c1-160
tail -1 $O/merge.log
