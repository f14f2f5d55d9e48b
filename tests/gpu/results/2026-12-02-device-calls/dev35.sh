#!/bin/bash
# device call 35 (2026-12-02): the rest of the model zoo (the 16 models call 34 did not reach,
# and levit_128s again), four zoo.py processes with --gpu-lock, stopped at 400 s; then
# driver.tune_gpu's script with the one-sided stability rule (d1ede2b).
# zoo.py as in the working tree then: with the BatchNorm statistics calibrated after the weight
# perturbation (a helper's uncommitted change, for LeViT).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
O=/tmp/o35; rm -rf $O; mkdir -p $O; W=/tmp/w35; rm -rf $W; mkdir -p $W && tar xJf .carry/bin.tar.xz -C $W; B=$W/bin
Z="--drkc $B/drkc --drkrun $B/drkrun --init realistic --exporter dynamo --batch 1 --timeout 150 --gpu-lock $O/gpu.lock"
L1="resnet50 wav2vec2 retinanet_head levit_128s"
L2="mobilenet_v3_large poolformer_s12 mistral_small lraspp_mobilenet"
L3="efficientnet_b0 convnext_tiny deeplabv3_mobilenet ssdlite_head"
L4="llama_gqa whisper_encoder mnasnet0_5 yolo_head fcn_resnet50"
python3 tests/models/gen_models.py /tmp/gm > $O/gen_small.log 2>&1 &
i=0; for L in "$L1" "$L2" "$L3" "$L4"; do i=$((i+1))
  timeout 400 python3 tests/zoo/zoo.py $Z --out $O/z$i --only $L > $O/z$i.log 2>&1 &
done
wait
python3 tests/zoo/zoo.py --merge $O/z1 $O/z2 $O/z3 $O/z4 --out $O --name zoo > $O/merge.log 2>&1
cp $O/zoo.md $OUT/zoo-results.md; cp $O/zoo.json $OUT/zoo-results.json
grep -hE "^  [a-z0-9_]+ realistic" $O/z?.log | cut -c1-160
export DRK_CACHE_DIR=/tmp/kc35
timeout 100 tests/driver/tune_gpu.sh $B/drkc /tmp/gm $O/tg > $O/tune_gpu.log 2>&1; echo "tune_gpu rc=$?" >> $O/tune_gpu.log
tail -5 $O/tune_gpu.log
grep -h '"event":"remeasure"' $O/tg/*.jsonl 2>/dev/null | head -5 | cut -c1-300 > $O/remeasure.txt
tar czf $OUT/logs.tgz -C $O z1.log z2.log z3.log z4.log merge.log tune_gpu.log remeasure.txt
