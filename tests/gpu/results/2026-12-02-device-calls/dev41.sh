#!/bin/bash
# device call 41 (2026-12-02, third session): call 40's sanitizer findings up close (the
# runtime no longer probes past a kernel's last parameter: memcheck's API errors), the SASS and
# PTX of the flagged kernels (synccheck on the sm_90a matmul, racecheck on the mma_sync one);
# DenseNet-121 at batch 1 and 32 (call 40 ran out of time on it); drkc tune on the generated
# ResNet-50 (tests/bench/tune_models.sh: tuned vs heuristic, checks, the warm re-tune).
export PYTHONUNBUFFERED=1
W=/tmp/w41; rm -rf $W; mkdir -p $W && tar xJf .carry/bin.tar.xz -C $W; export DRKC=$W/bin/drkc DRKRUN=$W/bin/drkrun
export DRK_CACHE_DIR=/tmp/kc41 PATH=$PATH:/usr/local/cuda/bin; O=/tmp/o41; mkdir -p $O/sd; L=/tmp/gpu41.lock; touch $L
( timeout -k 5 330 python3 tests/zoo/zoo.py --drkc $DRKC --drkrun $DRKRUN --init realistic --exporter dynamo --batch both --big-batch 32 \
    --gpu-lock $L --timeout 320 --iters 30 --out $O/zoo --only densenet121 > $O/zoo.log 2>&1 ) &
python3 tests/models/gen_models.py $O/g >/dev/null 2>&1
S=$O/sd; F="--target=sm_90a --precision=fp16 --fusion-aggressiveness=3"
for v in fast default; do
  fl=$F; [ $v = default ] && fl=--target=sm_90a
  $DRKC $O/g/mlp/model.onnx $fl -o $S/mlp-$v.drkm >/dev/null 2>&1
  $DRKC $O/g/mlp/model.onnx $fl --emit=cubin -o $S/mlp-$v.cubin >/dev/null 2>&1; cuobjdump -sass $S/mlp-$v.cubin > $OUT/mlp-$v.sass 2>&1
  $DRKC $O/g/mlp/model.onnx $fl --emit=ptx -o $OUT/mlp-$v.ptx >/dev/null 2>&1
  for t in memcheck initcheck racecheck synccheck; do
    ex=(); [ $t = racecheck ] && ex=(--racecheck-report hazard)
    flock $L timeout 120 compute-sanitizer --tool $t "${ex[@]}" --print-limit 6 $DRKRUN $S/mlp-$v.drkm --iters 1 --warmup 0 > $S/$v-$t.log 2>&1
    echo "== mlp $v $t rc=$?"; grep -v "Host Frame\|^=========$\|Saved host" $S/$v-$t.log | grep -v "^  " | head -24 | cut -c1-220
  done
done
wait
grep -E "^  densenet" $O/zoo.log | cut -c1-300; tail -3 $O/zoo.log; cp $O/zoo/results.json $OUT/densenet.json 2>/dev/null
python3 tests/models/gen_full_models.py $O/full --only resnet50 --outputs none > /dev/null 2>&1
TRIALS=16 KERNELS=4 timeout -k 5 330 tests/bench/tune_models.sh $O/tune 100 $O/full/resnet50/model.onnx 2>&1 | tail -8
cp $O/tune/tune.md $OUT/tune.md 2>/dev/null; cat $O/tune/resnet50/warm.log | tail -3
tar czf $OUT/logs.tgz -C /tmp o41/sd o41/tune/resnet50/tune.jsonl o41/tune/resnet50/tune.log o41/tune/resnet50/warm.log o41/zoo.log 2>/dev/null; ls -la $OUT
