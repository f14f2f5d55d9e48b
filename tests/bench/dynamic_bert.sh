#!/bin/bash
# Issue 21 on the H200: drkc --dynamic on BERT-base (tests/bench/dynamic_bert.py): whether both
# batch 1..32 and seq 1..512 compile as one module (today seq is refused: the flash kernel does
# not take the actual key count), then per seq 128 and 512 one module for batch 1..32 against the
# exact-shape modules: module size vs their sum, drkrun's resident median at 8 (batch, seq)
# points (at a bucket size: within 10% wanted; at the worst padding: reported), and the outputs
# of both modules compared.
#
# usage: DRKC=/path/drkc DRKRUN=/path/drkrun tests/bench/dynamic_bert.sh OUTDIR [--small] [--iters N]
# Writes OUTDIR/log.txt and OUTDIR/results.json. Time: ~20 compiles of BERT-base (a few seconds
# each on 16 cores with the kernel cache warm) and 16 drkrun runs; hard limit 9 minutes.
set -u
OUT=${1:?usage: DRKC=... DRKRUN=... $0 OUTDIR [--small] [--iters N]}
shift
HERE=$(cd "$(dirname "$0")" && pwd)
: "${DRKC:?set DRKC to the drkc binary}"
: "${DRKRUN:?set DRKRUN to the drkrun binary}"
PY=${PYTHON:-python3}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv > "$OUT/gpu.txt" 2>&1 || true
"$DRKC" --version > "$OUT/drkc_version.txt" 2>&1 || true
timeout -k 10 540 "$PY" "$HERE/dynamic_bert.py" --out "$OUT" --drkc "$DRKC" --drkrun "$DRKRUN" "$@" 2>&1 | tee "$OUT/log.txt"
rc=${PIPESTATUS[0]}
[ "$rc" -eq 124 ] && echo "dynamic_bert: timed out after 540 s (partial results in $OUT/log.txt)"
exit "$rc"
