#!/usr/bin/env bash
# Checks the sm_90a matmul kernels under pinned schedules on the GPU: every graph (the matmul
# graphs of tests/nvptx/matmul and tests/lower/exec, plus generated shapes that hit the edges
# of the schedules: an odd number of 128-row tiles, M, N and K off the tile sizes, batches with
# a shared and a per-batch B) under every schedule of SCHEDULES, each with `drkc run --device=cuda
# --check` (the interpreter on the same random inputs). One line per run: PASS or FAIL with the
# check's lines; the last line counts them. Then SwiGLU graphs (tests/gpu/gen_swiglu.py: the gate
# and up MatMuls of one input, silu(g) * u) under PAIR_SCHEDULES: the paired kernel (both weights
# in one matmul, its epilogue on the two halves of each tile; N off the half tile, batches
# folded into M) and, with mm.pair=0, the two kernels. Exit 1 if any failed.
#   usage: matmul_schedules.sh DRKC WORKDIR        SCHEDULES="knobs knobs ..." (drkc --schedule),
#          PAIR_SCHEDULES likewise
set -uo pipefail
DRKC=$1; W=$2
SRC=$(cd "$(dirname "$0")/../.." && pwd)
SCHEDULES=${SCHEDULES:-"mm.cluster=2,mm.tile_n=128 mm.cluster=2,mm.tile_n=256 mm.cluster=2,mm.tile_n=128,mm.split_k=2"}
mkdir -p "$W"
gen() { # name a-shape b-shape y-shape
  printf 'graph @mm(%%a: f16[%s], %%b: f16[%s]) -> (%%c) {\n  %%c: f16[%s] = MatMul(%%a, %%b)\n  return %%c\n}\n' "$2" "$3" "$4" >"$W/$1.drkg"
}
gen odd_tiles 384,512 512,256 384,256
gen edges 200,328 328,136 200,136
gen long_k 256,2056 2056,128 256,128
gen batch_shared_b 3,160,256 256,192 3,160,192
gen batch_full_b 2,384,128 2,128,256 2,384,256
PAIR_SCHEDULES=${PAIR_SCHEDULES:-"mm.pair=1 mm.pair=1,mm.tile_n=256 mm.pair=1,mm.stages=2 mm.pair=0"}
mkdir -p "$W/swiglu"
python3 "$SRC/tests/gpu/gen_swiglu.py" "$W/swiglu/swiglu_edges.drkg" 200 136 328
python3 "$SRC/tests/gpu/gen_swiglu.py" "$W/swiglu/swiglu_batch.drkg" 96 384 256 2
python3 "$SRC/tests/gpu/gen_swiglu.py" "$W/swiglu/swiglu_wide.drkg" 256 1408 512
pass=0; fail=0
for g in "$SRC"/tests/nvptx/matmul/*.drkg "$SRC"/tests/lower/exec/matmul_*.drkg "$W"/*.drkg "$W"/swiglu/*.drkg; do
  S=$SCHEDULES
  case $g in */swiglu/*) S=$PAIR_SCHEDULES ;; esac
  for s in $S; do
    out=$("$DRKC" run "$g" --device=cuda --target=sm_90a --schedule="$s" --check 2>&1)
    if grep -q PASS <<<"$out" && ! grep -q FAIL <<<"$out"; then
      echo "PASS $(basename "$g") $s"; pass=$((pass + 1))
    else
      echo "FAIL $(basename "$g") $s: $(grep -E 'check|error|FAIL' <<<"$out" | head -3 | tr '\n' ' ')"; fail=$((fail + 1))
    fi
  done
done
echo "matmul_schedules: $pass passed, $fail failed"
[ "$fail" = 0 ]
