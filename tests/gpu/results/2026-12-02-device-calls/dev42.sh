#!/bin/bash
# device call 42 (2026-12-02, third session): main with h/pg, h/auto, h/dyn and h/int4 merged:
# synccheck again on the sm_90a kernels (named barriers now the unaligned barrier.sync),
# --dynamic on the GPU (tests/bench/dynamic_bert.sh, BERT-base) beside --precision=auto with a
# budget (tests/gpu/auto_precision.sh), then W4A16 decode GEMMs against cuBLAS fp16 alone
# (tests/bench/w4a16.sh, W4_LLAMA=0).
export PYTHONUNBUFFERED=1
W=/tmp/w42; rm -rf $W; mkdir -p $W && tar xJf .carry/bin.tar.xz -C $W; export DRKC=$W/bin/drkc DRKRUN=$W/bin/drkrun
export DRK_CACHE_DIR=/tmp/kc42 PATH=$PATH:/usr/local/cuda/bin; O=/tmp/o42; mkdir -p $O
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv > $O/gpu.txt 2>&1
python3 tests/models/gen_models.py $O/g >/dev/null 2>&1
F="--target=sm_90a --precision=fp16 --fusion-aggressiveness=3"
for m in $O/g/mlp/model.onnx $O/g/resnet_block/model.onnx tests/lower/hopper/conv_hopper_fused.drkg; do
  n=$(basename $(dirname $m))_$(basename $m | cut -d. -f1); $DRKC $m $F -o $O/$n.drkm > /dev/null 2>&1
  for t in synccheck racecheck memcheck; do
    timeout 90 compute-sanitizer --tool $t --print-limit 4 $DRKRUN $O/$n.drkm --iters 1 --warmup 0 > $O/$n.$t.log 2>&1
    echo "$n $t: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $O/$n.$t.log)"
  done
done 2>&1 | tee $O/sanitize.txt
( timeout -k 5 250 tests/bench/dynamic_bert.sh $O/dyn > $O/dyn.log 2>&1; echo "dynamic_bert rc=$?" >> $O/dyn.log ) &
( ITERS=100 timeout -k 5 250 tests/gpu/auto_precision.sh $W/bin $O/apw $O/ap > $O/ap.log 2>&1; echo "auto_precision rc=$?" >> $O/ap.log ) &
wait
tail -30 $O/dyn.log | cut -c1-250; cat $O/ap/summary.txt 2>/dev/null | cut -c1-250; tail -3 $O/ap.log
W4_LLAMA=0 timeout -k 5 250 tests/bench/w4a16.sh $O/w4 > $O/w4.log 2>&1; echo "w4a16 rc=$?" >> $O/w4.log
cat $O/w4/w4a16.md 2>/dev/null; tail -5 $O/w4.log
cp $O/sanitize.txt $O/w4/w4a16.md $O/ap/summary.txt $O/dyn/results.json $OUT/ 2>/dev/null
tar czf $OUT/logs.tgz --exclude='*.onnx' --exclude='*.onnx.data' --exclude='*.drkm' --exclude='*.pb' --exclude='*.npy' --exclude='*.cubin' --exclude='work' -C /tmp o42 2>/dev/null; ls -la $OUT
