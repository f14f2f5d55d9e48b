#!/usr/bin/env bash
# The general matmul kernel on a GPU against the CPU interpreter: every graph of
# tests/nvptx/matmul and tests/lower/exec/matmul_*.drkg through `drkc run --device=cuda --check`
# (random inputs, DESIGN.md's tolerances: f16/bf16 1e-2, f32 1e-4, TF32 5e-4, f64 1e-5) for
# each target of TARGETS (default sm_90: on an H100/H200 that is the mma_sync path, where
# sm_90a would take the wgmma kernel for plain f16/bf16 MatMuls) and, for the f32 graphs, with
# --matmul-precision=high (TF32 mma.sync) too. Exit 77 without a GPU.
# usage: matmul_gpu.sh DRKC [TARGETS]     e.g. matmul_gpu.sh build/tools/drkc sm_90,sm_90a
set -u
DRKC=$1; TARGETS=${2:-sm_90}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
if ! ldconfig -p 2>/dev/null | grep -q "libcuda.so.1"; then
  echo "SKIP: no CUDA driver"
  exit 77
fi
pass=0; fail=0
for g in "$SRC"/tests/nvptx/matmul/*.drkg "$SRC"/tests/lower/exec/matmul_*.drkg; do
  for t in ${TARGETS//,/ }; do
    precs=("--matmul-precision=highest")
    grep -q "f32\[" "$g" && precs+=("--matmul-precision=high")
    for p in "${precs[@]}"; do
      name="$(basename "$g" .drkg) $t $p"
      # --portable: sm_90 stays the mma.sync path (plain sm_90 means sm_90a)
      if out=$("$DRKC" run "$g" --device=cuda --target="$t" --portable "$p" --check 2>&1) && ! grep -q FAIL <<<"$out"; then
        pass=$((pass + 1)); echo "PASS $name: $(grep -o "rel error [^ ]*" <<<"$out" | tr '\n' ' ')"
      else
        fail=$((fail + 1)); echo "FAIL $name:"; sed 's/^/  | /' <<<"$out" | head -20
      fi
    done
  done
done
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
