#!/bin/bash
# device call 40 (2026-12-02, third session): the runtime under misuse (test_gpu_misuse,
# per-session streams), a real --target=sm_87 module on the H200, compute-sanitizer's four
# tools over the generated models and the sm_90a matmul/conv graphs (tests/gpu/sanitize.sh,
# holding the timing lock), and issue 16's CNN list at batch 1 and 32 against
# torch.compile(reduce-overhead) (zoo.py, 4 workers sharing one timing lock).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
W=/tmp/w40; rm -rf $W; mkdir -p $W && tar xJf .carry/bin.tar.xz -C $W; export DRKC=$W/bin/drkc DRKRUN=$W/bin/drkrun
export DRK_CACHE_DIR=/tmp/kc40 PATH=$PATH:/usr/local/cuda/bin; O=/tmp/o40; mkdir -p $O; L=/tmp/gpu40.lock; touch $L
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > $O/gpu.txt 2>&1
timeout 60 $W/bin/test_gpu_misuse $(command -v ptxas) > $O/misuse.log 2>&1; echo "misuse rc=$?" >> $O/misuse.log; tail -25 $O/misuse.log
python3 tests/models/gen_models.py $O/g87 >/dev/null 2>&1; $DRKC $O/g87/mlp/model.onnx --target=sm_87 -o $O/m87.drkm > $O/sm87.log 2>&1
$DRKRUN $O/m87.drkm --iters 1 --warmup 0 >> $O/sm87.log 2>&1; echo "drkrun sm_87 module rc=$?" >> $O/sm87.log; cat $O/sm87.log
( GPU_LOCK=$L LIMIT=90 timeout -k 5 470 tests/gpu/sanitize.sh $O/san > $O/san.log 2>&1; echo "sanitize rc=$?" >> $O/san.log ) &
Z="--drkc $DRKC --drkrun $DRKRUN --init realistic --exporter dynamo --batch both --big-batch 32 --gpu-lock $L --timeout 300 --iters 30"
i=0; for grp in "resnet50 mobilenet_v3_large" "efficientnet_b0 densenet121" "convnext_tiny regnet_y_400mf" "deeplabv3_mobilenet"; do
  i=$((i+1)); ( timeout -k 5 480 python3 tests/zoo/zoo.py $Z --out $O/zoo$i --only $grp > $O/zoo$i.log 2>&1 ) &
done
wait
cat $O/san.log | grep -v "^  " | head -60
python3 tests/zoo/zoo.py --merge $O/zoo1 $O/zoo2 $O/zoo3 $O/zoo4 --out $O --name cnn-zoo > /dev/null 2>&1; cat $O/cnn-zoo.md | cut -c1-400
cp $O/cnn-zoo.md $O/cnn-zoo.json $O/san/sanitize.md $O/misuse.log $OUT/ 2>/dev/null
tar czf $OUT/logs.tgz --exclude='*.onnx' --exclude='*.onnx.data' --exclude='*.drkm' --exclude='*.pb' --exclude='*.npy' --exclude='*.cubin' -C /tmp o40 2>/dev/null
ls -la $OUT
