#!/usr/bin/env bash
# Reductions and row kernels at the hardware limit (issues 16 part 3, 17 part 4) on the GPU
# machine. Two sets of reductions.py, each case first checked against the CPU interpreter
# (drkc run --device=cuda --check), then timed (drkrun --profile) next to torch eager and
# torch.compile of the same op:
#   rows:    bf16 LayerNorm, RMSNorm written as primitives and Softmax over 8192 x 8192,
#            4096 x 32768 and 16384 x 1024 (--precision=bf16), the issue's row kernels;
#   spatial: EfficientNet-B0 SE ReduceMean NCHW/NHWC at batch 1 and 32, the SE gate, ResNet's
#            GlobalAveragePool, poolformer's GroupNorm(1 group) (+ Relu, and as its token
#            mixer), ConvNeXt's LayerNorm, a long softmax; f16 (and f32 for six),
#            --precision=fp16;
# then, only with REDUCTIONS_POOLFORMER=1, poolformer_s12 (timm, torch.onnx.export dynamo,
# batch 1) end to end through tests/zoo/zoo.py (up to 240 s more).
#
#   DRKC=/path/drkc DRKRUN=/path/drkrun [REDUCTIONS_SET=rows|spatial|all] [REDUCTIONS_POOLFORMER=1] \
#     tests/bench/reductions.sh OUT_DIR
#
# Bounded: 4 minutes in all without poolformer (timeouts: rows 150 s then spatial 90 s; a
# single set 240 s). Each case's row is printed as it is measured (and OUT/<set>/results.md
# rewritten), so a set cut short keeps what it measured (the spatial set's torch.compile of
# 22 graphs may not all fit after the rows: REDUCTIONS_SET=spatial runs all of it).
# Exit status: 0 when every case run passed its check and was timed.
set -u
OUT=${1:?usage: DRKC=... DRKRUN=... reductions.sh OUT_DIR}
: "${DRKC:?set DRKC to the drkc binary}" "${DRKRUN:?set DRKRUN to the drkrun binary}"
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${PYTHON:-python3}
SETS=${REDUCTIONS_SET:-all}
[ "$SETS" = all ] && SETS="rows spatial"
cap() { case "$SETS" in *" "*) [ "$1" = rows ] && echo 150 || echo 90 ;; *) echo 240 ;; esac; }
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv > "$OUT/gpu.txt" 2>&1
rc=0
for set in $SETS; do
  echo "== $set"
  timeout -k 10 "$(cap "$set")" "$PY" "$HERE/reductions.py" "$OUT/$set" --set "$set" --drkc "$DRKC" --drkrun "$DRKRUN" --iters 100 2>&1 \
    | tee "$OUT/$set.txt"
  r=${PIPESTATUS[0]}
  [ "$r" -ne 0 ] && { echo "reductions.py --set $set exit $r"; rc=1; }
done
if [ "${REDUCTIONS_POOLFORMER:-0}" = 1 ]; then
  echo "== poolformer_s12 (zoo.py, dynamo export, batch 1, fresh init)"
  timeout -k 10 240 "$PY" "$HERE/../zoo/zoo.py" --out "$OUT/zoo" --drkc "$DRKC" --drkrun "$DRKRUN" --only poolformer_s12 \
    --init fresh --exporter dynamo --batch 1 --iters 50 --timeout 230 > "$OUT/poolformer.txt" 2>&1
  echo "zoo.py exit $?"
  grep -i "poolformer" "$OUT/zoo/results.md" 2>/dev/null || tail -15 "$OUT/poolformer.txt"
fi
exit $rc
