#!/usr/bin/env bash
# Whole rows through the whole compiler (docs/lowering.md "Whole rows"): the issue's bf16 row
# kernels, LayerNorm, Softmax and RMSNorm written as primitives (Pow, ReduceMean, Add, Sqrt,
# Div, Mul: one fused row group) over 8192 x 8192, 4096 x 32768 and 16384 x 1024 at
# --target=sm_90a --precision=bf16 --fusion-aggressiveness=3. Each must be one kernel per op
# with no chunk loop (the row read once: --emit=tile has no `for`), one row per program for the
# long rows, 16-byte loads and stores in its PTX (ld/st.global.v4) and assemble with ptxas for
# sm_90a without spills (ptxas -v). rows.whole=0 must give back the chunk loops.
# usage: rows_ptxas.sh DRKC PTXAS   (77: no ptxas)
set -uo pipefail
DRKC=$1; PTXAS=$2
[ -x "$PTXAS" ] || { echo "SKIP: no ptxas"; exit 77; }
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
FL=(--target=sm_90a --precision=bf16 --fusion-aggressiveness=3)
fail=0
for shape in 8192x8192 4096x32768 16384x1024; do
  M=${shape%x*}; N=${shape#*x}
  cat > "$T/g$shape.drkg" <<G
graph @rows(%x: bf16[$M, $N], %s: bf16[$N], %b: bf16[$N]) -> (%y, %z, %w) {
  %ax: i64[1] = const [-1]
  %eps: bf16[] = const [1e-6]
  %two: bf16[] = const [2.0]
  %y: bf16[$M, $N] = LayerNormalization(%x, %s, %b) {axis = -1}
  %z: bf16[$M, $N] = Softmax(%x) {axis = -1}
  %sq: bf16[$M, $N] = Pow(%x, %two)
  %ms: bf16[$M, 1] = ReduceMean(%sq, %ax)
  %mse: bf16[$M, 1] = Add(%ms, %eps)
  %rt: bf16[$M, 1] = Sqrt(%mse)
  %xn: bf16[$M, $N] = Div(%x, %rt)
  %w: bf16[$M, $N] = Mul(%xn, %s)
  return %y, %z, %w
}
G
  g=$T/g$shape.drkg
  "$DRKC" "$g" "${FL[@]}" --emit=tile -o "$T/$shape.drkt" || { echo "FAIL $shape: drkc"; fail=1; continue; }
  nk=$(grep -c '^kernel @' "$T/$shape.drkt"); nf=$(grep -cE '(= for |^ *for )' "$T/$shape.drkt")
  [ "$nk" = 3 ] && [ "$nf" = 0 ] || { echo "FAIL $shape: $nk kernels (want 3), $nf chunk loops (want 0)"; fail=1; }
  if [ "$N" -gt 1024 ] && grep -E '^# launch' "$T/$shape.drkt" | grep -qv "grid($M, 1, 1)"; then
    echo "FAIL $shape: not one row per program"; grep '^# launch' "$T/$shape.drkt"; fail=1
  fi
  "$DRKC" "$g" "${FL[@]}" --emit=ptx -o "$T/$shape.ptx" || { echo "FAIL $shape: ptx"; fail=1; continue; }
  grep -q 'ld.global.v4' "$T/$shape.ptx" && grep -q 'st.global.v4' "$T/$shape.ptx" ||
    { echo "FAIL $shape: no 16-byte loads/stores"; fail=1; }
  "$PTXAS" -arch=sm_90a -v "$T/$shape.ptx" -o "$T/$shape.cubin" > "$T/$shape.ptxas" 2>&1 || { echo "FAIL $shape: ptxas"; cat "$T/$shape.ptxas"; fail=1; continue; }
  if grep -E 'bytes spill (stores|loads)' "$T/$shape.ptxas" | grep -qv ' 0 bytes spill stores, 0 bytes spill loads'; then
    echo "FAIL $shape: spills"; grep -E 'Compiling|spill|registers' "$T/$shape.ptxas"; fail=1
  fi
  echo "ok $shape: $nk kernels, no chunk loop, 16-byte accesses, registers $(grep -oE 'Used [0-9]+ registers' "$T/$shape.ptxas" | grep -oE '[0-9]+' | tr '\n' ' ')no spills"
done
"$DRKC" "$T/g8192x8192.drkg" "${FL[@]}" --schedule=rows.whole=0 --emit=tile -o "$T/w0.drkt" &&
  [ "$(grep -cE '(= for |^ *for )' "$T/w0.drkt")" -gt 0 ] || { echo "FAIL rows.whole=0: no chunk loops"; fail=1; }
exit $fail
