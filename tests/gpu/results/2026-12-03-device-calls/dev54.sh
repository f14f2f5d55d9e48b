#!/bin/bash
# device call 54 (2026-12-03, second session): call 52's larger-batch groups again for the 18 zoo
# models that timed out there (12 groups at once left each model under 240 s of a crowded
# machine: the dynamo exports alone took 25-75 s), now 9 groups of two with 280 s per model.
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
W=/tmp/w54; rm -rf $W; mkdir -p $W && tar xJf .carry/bin.tar.xz -C $W && tar xJf .carry/mpi.tar.xz -C $W
source $W/mpi/env.sh; cp $W/mpi/bin/drkc $W/bin/drkc
O=/tmp/o54; rm -rf $O; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > $OUT/gpu.txt 2>&1
Z="--drkc $W/bin/drkc --drkrun $W/bin/drkrun --gpu-lock $O/gpu.lock"
B="--batch big --init realistic --exporter dynamo --timeout 280"
i=0; for L in "resnet18 mobilenet_v2" "regnet_y_400mf densenet121" "shufflenet_v2_x1_0 mnasnet0_5" \
  "googlenet levit_128s" "distilbert roberta_base" "albert_base mistral_small" "wav2vec2 lraspp_mobilenet" \
  "fcn_resnet50 retinanet_head" "ssdlite_head poolformer_s12"; do i=$((i+1))
  (timeout 565 python3 tests/zoo/zoo.py $Z $B --out $O/b$i --only $L > $O/b$i.log 2>&1) &
done
wait
python3 tests/zoo/zoo.py --merge $(ls -d $O/b*/) --out $O/mb --name zoo > $O/merge-b.log 2>&1
cp $O/mb/zoo.md $OUT/zoo-big2.md; cp $O/mb/zoo.json $OUT/zoo-big2.json
(cd $O && tar czf $OUT/zoo-logs2.tgz b*.log merge-b.log)
grep -hE "^  [a-z0-9_]+ (fresh|realistic)" $O/*.log | cut -c1-200
tail -n 1 $O/merge-b.log
