#!/usr/bin/env bash
# Issue 17 phase 2 on the H200, the kernels first (< 1 minute): `drkc run --device=cuda --check`
# (GPU against the CPU interpreter, fusion level 3, sm_90a) of
#   - tests/lower/exec/matmul_result_n_fused.drkg: pad-matmul-n's MatMul {result_n} with the
#     f32 Cast fused (the wgmma kernel storing 131 of 136 columns, f32, masked);
#   - OUT/lm_head.drkg: the same at GPT-2's LM head size (h [1, 1024, 768] x w [768, 50264],
#     result_n 50257), then drkrun --profile of it (its one kernel's time; 206 MB of f32
#     logits are ~49 us at 4.2 TB/s);
#   - tests/lower/exec/patch_embed_fused.drkg: conv-to-matmul's patch embedding form (im2col
#     copy, wgmma MatMul, bias, transposes, position add).
# Then the whole models: run tests/bench/transformers_export.sh as before (its fp16 lines are now
# followed by drkrun --profile's top-10 kernels, and each check line shows torch's own error).
#   usage: DRKC=... DRKRUN=... tests/gpu/tfm_phase2.sh OUT     exit 1 if a check fails, 77 without a GPU
set -u
OUT=${1:?usage: DRKC=... DRKRUN=... $0 OUT}
: "${DRKC:?set DRKC}"; : "${DRKRUN:?set DRKRUN}"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$OUT"
ldconfig -p 2>/dev/null | grep -q "libcuda.so.1" || { echo "SKIP: no CUDA driver"; exit 77; }
cat > "$OUT/lm_head.drkg" <<'EOG'
graph @lm_head(%h: f16[1, 1024, 768], %w: f16[768, 50264]) -> (%logits) {
  %y: f16[1, 1024, 50257] = MatMul(%h, %w) {result_n = 50257}
  %logits: f32[1, 1024, 50257] = Cast(%y) {to = 1}
  return %logits
}
EOG
pass=0; fail=0
for g in "$SRC/tests/lower/exec/matmul_result_n_fused.drkg" "$OUT/lm_head.drkg" "$SRC/tests/lower/exec/patch_embed_fused.drkg"; do
  n=$(basename "$g" .drkg)
  out=$(timeout -k 5 60 "$DRKC" run "$g" --device=cuda --target=sm_90a --fusion-aggressiveness=3 --check 2>&1)
  echo "$out" > "$OUT/$n.check.txt"
  if grep -q PASS <<<"$out" && ! grep -q FAIL <<<"$out"; then
    pass=$((pass + 1)); echo "PASS $n: $(grep -o 'rel error [^ ]*' <<<"$out" | tr '\n' ' ')"
  else
    fail=$((fail + 1)); echo "FAIL $n:"; sed 's/^/  | /' <<<"$out" | head -10
  fi
done
if timeout -k 5 60 "$DRKC" "$OUT/lm_head.drkg" --target=sm_90a --fusion-aggressiveness=3 --report -o "$OUT/lm_head.drkm" \
     > "$OUT/lm_head.compile.txt" 2>&1; then
  grep "kernel forms" "$OUT/lm_head.compile.txt"
  timeout -k 5 60 "$DRKRUN" "$OUT/lm_head.drkm" --warmup 5 --iters 50 --profile > "$OUT/lm_head.profile.txt" 2>&1
  grep -E "median|^ +0 |total" "$OUT/lm_head.profile.txt" | head -5
else
  fail=$((fail + 1)); echo "FAIL lm_head compile:"; tail -5 "$OUT/lm_head.compile.txt"
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
