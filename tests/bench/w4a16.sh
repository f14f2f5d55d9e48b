#!/usr/bin/env bash
# W4A16 decode GEMMs on an H200 (issue 20 part 2; docs/precision.md "W4A16"): drkc's MatMulNBits
# kernel (4-bit weights, block 128, zero points, f16 activations; lower/lower_w4.c) against
# torch's fp16 matmul (cuBLAS) of the same shape, M = 1, 4, 16, 64 with K = N = 4096 and the
# LLaMA-7B MLP shapes (K 4096 -> N 11008, K 11008 -> N 4096).
#
#   DRKC=... DRKRUN=... tests/bench/w4a16.sh OUTDIR          (about 4 minutes; every step has a timeout)
#
# 1. export (w4a16.py export): per shape one model of R distinct MatMulNBits weights (>= 128 MB
#    of 4-bit weights, so L2 never holds them) reading one x [M, K] (M symbolic), and a check
#    model with one.
# 2. check first: `drkc run --device=cuda --check` of each check model at each M (GPU against the
#    CPU interpreter on the same 4-bit weights; f16 tolerance rel. L2 1e-2).
# 3. time: drkc --bind=M=... --target=sm_90a -> drkrun --profile (resident median / R: the
#    kernel and its split-K sum); a split-K sweep on 4096x4096 (mm.split_k 1..16 at M 1, 16, 64);
#    torch (w4a16.py torch): the R fp16 matmuls in a CUDA graph / R.
# 4. OUTDIR/w4a16.md: the table (w4a16.py table). Logs are OUTDIR/*.log.
# DRKC/DRKRUN: the static drkc and drkrun the lead carries to the GPU machine (as the other
# tests/bench/*.sh); PYTHON (default python3) needs numpy, onnx and torch.
set -uo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${1:?usage: DRKC=... DRKRUN=... w4a16.sh OUTDIR}
: "${DRKC:?set DRKC to the drkc binary}" "${DRKRUN:?set DRKRUN to the drkrun binary}"
mkdir -p "$OUT"; WORK=$OUT/work; mkdir -p "$WORK"
PY=${PYTHON:-python3}
TARGET=${W4_TARGET:-sm_90a}
T0=$SECONDS
say() { echo "[$((SECONDS - T0)) s] $*"; }

say "== 1. export"
timeout 120 $PY "$SRC/tests/bench/w4a16.py" export "$WORK" >"$OUT/export.log" 2>&1 || { cat "$OUT/export.log"; exit 1; }
cat "$OUT/export.log"
SHAPES="4096x4096 4096x11008 11008x4096"
MS="1 4 16 64"

say "== 2. correctness (GPU vs interpreter)"
for s in $SHAPES; do
  for M in $MS; do
    log=$OUT/check-$s-$M.log
    timeout 120 "$DRKC" run "$WORK/w4_${s}_check.onnx" --device=cuda --check --bind=M=$M --target=$TARGET >"$log" 2>&1
    echo "$s M=$M: rc=$? $(grep -E 'PASS|FAIL' "$log" | head -1)"
  done
done

say "== 3. drkc: compile and time"
for s in $SHAPES; do
  for M in $MS; do
    k=$s-$M
    timeout 120 "$DRKC" "$WORK/w4_$s.onnx" --bind=M=$M --target=$TARGET --report -o "$WORK/w4-$k.drkm" >"$OUT/compile-$k.log" 2>&1 ||
      { echo "compile $k failed: $(tail -1 "$OUT/compile-$k.log")"; continue; }
    timeout 120 "$DRKRUN" "$WORK/w4-$k.drkm" --warmup 10 --iters 50 --profile >"$OUT/run-$k.log" 2>&1 ||
      echo "drkrun $k failed: $(tail -1 "$OUT/run-$k.log")"
    echo "$k: $(grep 'resident latency' "$OUT/run-$k.log" | sed 's/.*median/median/')"
  done
done

say "== 3a. split-K sweep (4096x4096; --schedule=mm.split_k=S; the heuristic's choice is in compile-*.log's schedules)"
for M in 1 16 64; do
  for S in 1 2 4 8 16; do
    k=4096x4096-$M-sk$S
    timeout 120 "$DRKC" "$WORK/w4_4096x4096.onnx" --bind=M=$M --target=$TARGET --schedule=mm.split_k=$S -o "$WORK/w4-$k.drkm" \
      >"$OUT/compile-$k.log" 2>&1 || { echo "compile $k failed: $(tail -1 "$OUT/compile-$k.log")"; continue; }
    timeout 120 "$DRKRUN" "$WORK/w4-$k.drkm" --warmup 10 --iters 50 >"$OUT/run-$k.log" 2>&1 ||
      echo "drkrun $k failed: $(tail -1 "$OUT/run-$k.log")"
    echo "$k: $(grep 'resident latency' "$OUT/run-$k.log" | sed 's/.*median/median/')"
  done
done

say "== 3b. torch fp16 (cuBLAS)"
timeout 300 $PY "$SRC/tests/bench/w4a16.py" torch "$OUT" >"$OUT/torch.log" 2>&1 || echo "torch failed: $(tail -3 "$OUT/torch.log")"
cat "$OUT/torch.log"

say "== 4. table"
$PY "$SRC/tests/bench/w4a16.py" table "$WORK" "$OUT"
say "done: $OUT/w4a16.md"
