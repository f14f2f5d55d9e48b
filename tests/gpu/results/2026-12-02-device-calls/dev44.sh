#!/bin/bash
# device call 44 (2026-12-02, fourth session): issue 22 part 3, the scaling of drkc tune --mpi on
# the H200 host (tests/gpu/tune_mpi_h200.sh: the local tune, then 1, 2, 4, 8 and 15 compile
# ranks feeding one measure rank; every run cold, 40 s of search each) on the generated BERT
# layer at batch 8, seq 512; then DenseNet-121 at batch 32 again (fold-batchnorm now turns its
# pre-activation BatchNorms into x*a+b: no layout transposes), alone on the GPU.
export PYTHONUNBUFFERED=1
W=/tmp/w44; rm -rf $W; mkdir -p $W && tar xJf .carry/bin.tar.xz -C $W && tar xJf .carry/mpi.tar.xz -C $W
export DRK_CACHE_DIR=/tmp/kc44 PATH=$PATH:/usr/local/cuda/bin; O=/tmp/o44; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
python3 tests/models/gen_models.py $O/g --only bert_layer >/dev/null 2>&1
RANKS="1 2 4 8 15" TUNE_TIME=40s timeout -k 5 400 tests/gpu/tune_mpi_h200.sh .carry/mpi.tar.xz $O/g/bert_layer/model.onnx $O/mpi \
  --target=sm_90a --precision=fp16 --fusion-aggressiveness=3 --bind=batch=8,seq=512 --policy=rl --seed=1 > $O/mpi.log 2>&1
echo "tune_mpi rc=$?"; tail -14 $O/mpi.log | cut -c1-250
cp $O/mpi/tune_mpi.md $OUT/ 2>/dev/null
( source $W/mpi/env.sh; timeout -k 5 175 python3 tests/zoo/zoo.py --drkc $W/mpi/bin/drkc --drkrun $W/bin/drkrun --init realistic --exporter dynamo \
    --batch big --big-batch 32 --timeout 165 --iters 30 --out $O/zoo --only densenet121 > $O/zoo.log 2>&1 )
grep -E "^  densenet" $O/zoo.log | cut -c1-300; tail -3 $O/zoo.log; cp $O/zoo/results.json $OUT/densenet.json 2>/dev/null
tar czf $OUT/logs.tgz --exclude='*.onnx' --exclude='*.drkm' --exclude='*.db' --exclude='kcache' --exclude='*.pb' -C /tmp o44 2>/dev/null; ls -la $OUT
