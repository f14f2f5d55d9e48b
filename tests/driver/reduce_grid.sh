#!/usr/bin/env bash
# The grid of few-long-row kernels through drkc (lower/schedule.c drk_sched_rows and
# drk_sched_rows_split_plan): the issue's reproduction of poolformer's slow GroupNorm, one
# GroupNormalization(num_groups=1) over [1, 64, 56, 56] followed by Relu, compiled with
# --target=sm_90a --precision=fp16 --fusion-aggressiveness=3, once lowered to grid(1, 1, 1)
# block(32): one warp walking 200,704 elements. Its kernels must now spread over at least 16
# programs of at least 256 threads each; an NHWC-style spatial ReduceMean likewise; and
# rows.col_warps=1,rows.split=1 must still give the old one-program form (the knobs work).
# usage: reduce_grid.sh DRKC WORK_DIR
set -u
DRKC=$1; W=$2
rm -rf "$W"; mkdir -p "$W"
fails=0
cat > "$W/gn1.drkg" <<'G'
graph @gn1(%x: f32[1, 64, 56, 56], %s: f32[64], %b: f32[64]) -> (%y) {
  %g: f32[1, 64, 56, 56] = GroupNormalization(%x, %s, %b) {num_groups = 1, epsilon = 1e-5}
  %y: f32[1, 64, 56, 56] = Relu(%g)
  return %y
}
G
# poolformer's token mixer: the GroupNorm feeds a pool, so it is a kernel of its own
cat > "$W/pool.drkg" <<'G'
graph @pool(%x: f16[1, 64, 56, 56], %s: f16[64], %b: f16[64]) -> (%y) {
  %g: f16[1, 64, 56, 56] = GroupNormalization(%x, %s, %b) {num_groups = 1, epsilon = 1e-5}
  %p: f16[1, 64, 56, 56] = AveragePool(%g) {kernel_shape = [3, 3], pads = [1, 1, 1, 1], strides = [1, 1], count_include_pad = 0}
  %d: f16[1, 64, 56, 56] = Sub(%p, %g)
  %y: f16[1, 64, 56, 56] = Add(%x, %d)
  return %y
}
G
cat > "$W/nhwc.drkg" <<'G'
graph @nhwc(%x: f16[1, 112, 112, 32]) -> (%y) {
  %axes: i64[2] = const [1, 2]
  %y: f16[1, 1, 1, 32] = ReduceMean(%x, %axes)
  return %y
}
G
# check NAME FILE NAMES MIN_PROGRAMS MIN_THREADS [EXTRA FLAGS]: every launch of a kernel whose
# name is k<i>_ followed by one of NAMES (an extended regex) has grid x*y*z >= MIN_PROGRAMS and block >= MIN_THREADS
check() {
  local name=$1 f=$2 pat=$3 minp=$4 mint=$5; shift 5
  if ! "$DRKC" "$W/$f" --target=sm_90a --precision=fp16 --fusion-aggressiveness=3 --emit=tile "$@" -o "$W/$name.drkt" 2> "$W/$name.err"; then
    echo "FAIL $name: drkc failed"; cat "$W/$name.err"; fails=$((fails + 1)); return
  fi
  local lines
  lines=$(grep -E "^# launch @k[0-9]+_($pat) node" "$W/$name.drkt")
  if [ -z "$lines" ]; then echo "FAIL $name: no $pat kernel"; fails=$((fails + 1)); return; fi
  while read -r l; do
    local g b
    g=$(echo "$l" | sed -E 's/.* grid\(([0-9]+), ([0-9]+), ([0-9]+)\).*/\1 \2 \3/')
    b=$(echo "$l" | sed -E 's/.* block\(([0-9]+)\).*/\1/')
    set -- $g
    if [ $(($1 * $2 * $3)) -lt "$minp" ] || [ "$b" -lt "$mint" ]; then
      echo "FAIL $name: $l (want >= $minp programs of >= $mint threads)"; fails=$((fails + 1))
    else
      echo "ok $name: $(echo "$l" | sed -E 's/^# launch (@[^ ]*) .* (grid\([^)]*\) block\([0-9]+\)).*/\1 \2/')"
    fi
  done <<< "$lines"
}
check gn1 gn1.drkg 'fused_GroupNormalization|fused_GroupNormalization_1' 16 256
check pool pool.drkg 'GroupNormalization|GroupNormalization_1' 16 256
check nhwc nhwc.drkg ReduceMean 16 256
check gn1_pinned gn1.drkg fused_GroupNormalization 1 32 --schedule=rows.col_warps=1,rows.split=1
if ! grep -q "grid(1, 1, 1) block(32)" "$W/gn1_pinned.drkt"; then
  echo "FAIL gn1_pinned: rows.col_warps=1,rows.split=1 does not give the one-warp form"; fails=$((fails + 1))
fi
echo "$fails failure(s)"
[ "$fails" -eq 0 ]
