#!/bin/bash
# device call 31: drkc tune on the H200 (ResNet-50 and GPT-2 small, fp16, fusion 3, 120 s each),
# the tuned ResNet-50 under --check, a warm compile's stage times, then the model zoo
# (tests/zoo/zoo.py: dynamo exporter, realistic weights, batch 1) on a dozen models.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
O=/tmp/o31; rm -rf $O; mkdir -p $O; W=/tmp/w31; rm -rf $W; mkdir -p $W && tar xJf .carry/bin.tar.xz -C $W; B=$W/bin
export DRK_CACHE_DIR=/tmp/kc31
F="--precision=fp16 --fusion-aggressiveness=3"
python3 tests/models/gen_full_models.py /tmp/fm --only resnet50 gpt2_small --outputs none > $O/gen.log 2>&1
M=/tmp/fm/resnet50/model.onnx
$B/drkc $M --target=sm_90a $F -q -o $O/r.drkm; $B/drkc $M --target=sm_90a $F -q --time-stages -o $O/r.drkm 2> $OUT/stages.txt
for m in resnet50 gpt2_small; do
  timeout 150 $B/drkc tune /tmp/fm/$m/model.onnx $F --time=120 --trials=16 --iters=10 --out=$O/$m.sched --log=$O/tune-$m.jsonl > $O/tune-$m.txt 2>&1
  echo "rc=$?" >> $O/tune-$m.txt
done
timeout 90 $B/drkc run $M --device=cuda --check $F --schedules=$O/resnet50.sched > $O/tuned-check.txt 2>&1; echo "rc=$?" >> $O/tuned-check.txt
cat $O/tune-resnet50.txt $O/tune-gpt2_small.txt $O/tuned-check.txt > $OUT/tune.txt
cat $OUT/tune.txt
timeout 210 python3 tests/zoo/zoo.py --drkc $B/drkc --drkrun $B/drkrun --out $O/zoo --init realistic --exporter dynamo \
  --batch 1 --timeout 70 --only resnet50 mobilenet_v3_large efficientnet_b0 vit_b_16 swin_t bert_base gpt2 llama_gqa \
  whisper_encoder deeplabv3_mobilenet yolo_head convnext_tiny > $O/zoo.log 2>&1
cp $O/zoo/results.md $OUT/zoo-results.md 2>/dev/null; cp $O/zoo/results.json $OUT/zoo-results.json 2>/dev/null
tail -5 $O/zoo.log
cat $O/tune-*.jsonl | gzip > $OUT/tune-logs.jsonl.gz; cp $O/*.sched $OUT/ 2>/dev/null
