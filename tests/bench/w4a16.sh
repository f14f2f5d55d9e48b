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
# 5. (W4_LLAMA=0 skips it) the LLaMA-style decoder of tests/models/gen_full_models.py: the
#    medium config quantized (--quantize=int4-weight --precision=fp16) through
#    `drkc run --device=cuda --check` (reference: the quantized model), and the full one's
#    latency (prefill, seq 2048) in fp16 and int4 builds (drkrun); printed, in the logs.
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

if [ "${W4_LLAMA:-1}" = 1 ]; then
  say "== 5. LLaMA-style decoder (tests/models/gen_full_models.py llama_decoder): --quantize=int4-weight vs fp16"
  # medium (2 layers, hidden 512, seq 512): GPU --check against the interpreter on the quantized
  # model (drkc run's reference with --quantize); full (8 layers, hidden 2048, seq 2048, prefill:
  # M = 2048, not the decode shapes above): drkrun resident latency of both builds
  timeout 300 $PY "$SRC/tests/models/gen_full_models.py" "$WORK/llama_medium" --only llama_decoder --medium --outputs=none \
    >"$OUT/llama-gen-medium.log" 2>&1 || echo "llama medium export failed: $(tail -1 "$OUT/llama-gen-medium.log")"
  timeout 300 "$DRKC" run "$WORK/llama_medium/llama_decoder/model.onnx" --device=cuda --check --target=$TARGET \
    --quantize=int4-weight --precision=fp16 >"$OUT/llama-check-int4.log" 2>&1
  echo "llama medium int4 (fp16 activations) --check: rc=$? $(grep -cE 'PASS' "$OUT/llama-check-int4.log") PASS $(grep -cE 'FAIL' "$OUT/llama-check-int4.log") FAIL"
  timeout 600 $PY "$SRC/tests/models/gen_full_models.py" "$WORK/llama_full" --only llama_decoder --outputs=none \
    >"$OUT/llama-gen-full.log" 2>&1 || echo "llama full export failed: $(tail -1 "$OUT/llama-gen-full.log")"
  m=$WORK/llama_full/llama_decoder/model.onnx
  for v in fp16 int4; do
    q=; [ $v = int4 ] && q=--quantize=int4-weight
    timeout 300 "$DRKC" "$m" --target=$TARGET --precision=fp16 $q --report -o "$WORK/llama-$v.drkm" >"$OUT/llama-compile-$v.log" 2>&1 ||
      { echo "llama $v compile failed: $(tail -1 "$OUT/llama-compile-$v.log")"; continue; }
    timeout 300 "$DRKRUN" "$WORK/llama-$v.drkm" --warmup 5 --iters 20 --profile >"$OUT/llama-run-$v.log" 2>&1 ||
      echo "llama $v drkrun failed: $(tail -1 "$OUT/llama-run-$v.log")"
    echo "llama full $v: $(grep 'resident latency' "$OUT/llama-run-$v.log" | sed 's/.*median/median/') $(grep -- '--quantize' "$OUT/llama-compile-$v.log")"
  done
fi
say "done: $OUT/w4a16.md"
