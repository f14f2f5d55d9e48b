#!/bin/bash
# device call 43 (2026-12-02, third session, the last 4.5 minutes of device time): DenseNet-121
# at batch 32 after BatchNorm became x * a + b (its concatenations stay channels-last),
# against torch.compile(reduce-overhead) (zoo.py); then issue 22's scaling of drkc tune --mpi on
# the H200 host, short: the local tune and 15 compile ranks feeding one measure rank, 20 s of search
# each (tests/gpu/tune_mpi_h200.sh with the carried Open MPI pack, tools/pack_mpi.sh).
export PYTHONUNBUFFERED=1 PATH=$PATH:/usr/local/cuda/bin
W=/tmp/w43; rm -rf $W; mkdir -p $W/m && tar xJf .carry/bin.tar.xz -C $W && tar xJf .carry/mpi.tar.xz -C $W/m
export DRKRUN=$W/bin/drkrun DRKC=$W/m/mpi/bin/drkc DRK_CACHE_DIR=/tmp/kc43; O=/tmp/o43; mkdir -p $O
( source $W/m/mpi/env.sh; $DRKC --version | head -1
  timeout -k 5 100 python3 tests/zoo/zoo.py --drkc $DRKC --drkrun $DRKRUN --init realistic --exporter dynamo --batch big \
    --big-batch 32 --timeout 95 --iters 30 --out $O/zoo --only densenet121 > $O/zoo.log 2>&1 )
grep -E "^  densenet" $O/zoo.log | cut -c1-300; cp $O/zoo/results.json $OUT/densenet.json 2>/dev/null
python3 tests/models/gen_models.py $O/g > /dev/null 2>&1
RANKS="15" TUNE_TIME=20s timeout -k 5 80 tests/gpu/tune_mpi_h200.sh .carry/mpi.tar.xz $O/g/bert_layer/model.onnx $O/mpi \
  --target=sm_90a --precision=fp16 --fusion-aggressiveness=3 --bind=batch=8,seq=512 --policy=rl --seed=1 > $O/mpi.log 2>&1
echo "tune_mpi rc=$?"; cat $O/mpi/tune_mpi.md 2>/dev/null; tail -5 $O/mpi.log
cp $O/mpi/tune_mpi.md $OUT/ 2>/dev/null; tar czf $OUT/logs.tgz --exclude='*.onnx' --exclude='*.data' --exclude='*.drkm' --exclude='*.db' --exclude='kcache' -C /tmp o43 2>/dev/null; ls -la $OUT
