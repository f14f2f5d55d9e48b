#!/bin/bash
# device call 39 (2026-12-02, second session): main with everything merged (h/tfm phase 2, h/rel,
# the conv small-C and dw group-width defaults from call 38): the runtime's new parameter check
# and the reader on real modules (reliability_gpu.sh), the LM head / patch-embedding forms
# (tfm_phase2.sh), the dynamo-exported transformers with profiles (transformers_export.sh), and
# ResNet-50 / MobileNetV3 at the zoo's larger batch (the stem back on mma_sync).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
W=/tmp/w39; rm -rf $W; mkdir -p $W && tar xJf .carry/bin.tar.xz -C $W; export DRKC=$W/bin/drkc DRKRUN=$W/bin/drkrun
export DRK_CACHE_DIR=/tmp/kc39; O=/tmp/o39; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
timeout -k 5 85 tests/gpu/reliability_gpu.sh $O/rel > $O/rel.log 2>&1; echo "reliability rc=$?" >> $O/rel.log; tail -4 $O/rel.log
timeout -k 5 45 tests/gpu/tfm_phase2.sh $O/p2 > $O/p2.log 2>&1; echo "tfm_phase2 rc=$?" >> $O/p2.log; tail -6 $O/p2.log
timeout -k 5 275 tests/bench/transformers_export.sh $O/tfm > $O/tfm.log 2>&1; echo "transformers rc=$?" >> $O/tfm.log
cp $O/tfm/results.json $OUT/tfm-results.json 2>/dev/null; grep -vE "^\[torch|^Evaluation" $O/tfm/full_log.txt | grep -E "^(bert|gpt2|llama|whisper|vit) |profile" | cut -c1-400
timeout -k 5 85 python3 tests/zoo/zoo.py --drkc $DRKC --drkrun $DRKRUN --out $O/zoo --only resnet50 --init realistic --exporter dynamo --batch big --timeout 80 > $O/zoo.log 2>&1
grep -E "^  resnet50" $O/zoo.log | cut -c1-300; cp $O/zoo/results.md $OUT/zoo-results.md 2>/dev/null
tar czf $OUT/logs.tgz --exclude='*.onnx' --exclude='*.onnx.data' --exclude='*.drkm' --exclude='*.pb' --exclude='*.npy' --exclude='*.o' -C /tmp o39 2>/dev/null
ls -la $OUT
