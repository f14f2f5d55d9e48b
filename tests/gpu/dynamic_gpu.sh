#!/bin/bash
# drkc --dynamic on the GPU (issue 21): the committed real exports through dynamic modules against
# exact-shape modules and the interpreter (dynamic_exports.py: every bucket's runtime-size kernels
# as the module runs them), then BERT-base exported by transformers, batch 1..32 x seq 1..512 in
# 20 buckets, against exact modules at 8 points (tests/bench/dynamic_bert.sh --export).
#
# usage: DRKC=/path/drkc DRKRUN=/path/drkrun tests/gpu/dynamic_gpu.sh OUTDIR
# Writes OUTDIR/exports (results.json, a line per check in log.txt) and OUTDIR/dynbert.
set -u
OUT=${1:?usage: DRKC=... DRKRUN=... $0 OUTDIR}
HERE=$(cd "$(dirname "$0")" && pwd)
: "${DRKC:?set DRKC to the drkc binary}"
: "${DRKRUN:?set DRKRUN to the drkrun binary}"
PY=${PYTHON:-python3}
mkdir -p "$OUT/exports"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv > "$OUT/gpu.txt" 2>&1 || true
"$DRKC" --version > "$OUT/drkc_version.txt" 2>&1 || true
timeout -k 10 300 "$PY" "$HERE/dynamic_exports.py" --out "$OUT/exports" --drkc "$DRKC" --drkrun "$DRKRUN" 2>&1 |
  tee "$OUT/exports/log.txt" | tail -n 40
rc1=${PIPESTATUS[0]}
find "$OUT/exports" \( -name '*.drkm' -o -name 'in_*' -o -name 'dyn_*' -o -name 'exact_*' -o -name 'interp_*' \) -prune -exec rm -rf {} +
DRKC=$DRKC DRKRUN=$DRKRUN bash "$HERE/../bench/dynamic_bert.sh" "$OUT/dynbert" --export --iters 200 2>&1 | grep -v Warning | tail -n 30
rc2=${PIPESTATUS[0]}
rm -f "$OUT"/dynbert/*.drkm "$OUT"/dynbert/*.onnx; rm -rf "$OUT"/dynbert/in_* "$OUT"/dynbert/out_*
[ "$rc1" -eq 0 ] && [ "$rc2" -eq 0 ]
