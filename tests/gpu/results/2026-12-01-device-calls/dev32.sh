#!/bin/bash
# device call 32: the model zoo (tests/zoo/zoo.py: dynamo exporter, realistic weights, batch 1)
# on the models call 31 did not reach, with the build of call 31.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
O=/tmp/o32; rm -rf $O; mkdir -p $O; W=/tmp/w32; rm -rf $W; mkdir -p $W && tar xJf .carry/bin.tar.xz -C $W; B=$W/bin
export DRK_CACHE_DIR=/tmp/kc32
timeout 400 python3 tests/zoo/zoo.py --drkc $B/drkc --drkrun $B/drkrun --out $O/zoo --init realistic --exporter dynamo \
  --batch 1 --timeout 60 --only vit_b_16 bert_base gpt2 llama_gqa whisper_encoder swin_t convnext_tiny deeplabv3_mobilenet \
  yolo_head densenet121 regnet_y_400mf distilbert t5_encoder qwen2_small > $O/zoo.log 2>&1
cp $O/zoo/results.md $OUT/zoo-results.md 2>/dev/null; cp $O/zoo/results.json $OUT/zoo-results.json 2>/dev/null
gzip -c $O/zoo.log > $OUT/zoo.log.gz; grep -E "^  [a-z0-9_]+ realistic" $O/zoo.log | cut -c1-220
