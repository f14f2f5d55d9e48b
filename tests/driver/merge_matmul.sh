#!/usr/bin/env bash
# The merge-matmul pass through drkc (passes/merge_matmul.c): sibling MatMuls of one activation
# by constant weights become one MatMul and Slices at the default fusion level and at 2, never
# at levels 0 and 1; biases merge with them; a member feeding a Sigmoid stays alone; the
# interpreter computes the same outputs after the pass (`drkc run --check`); the merged graph
# compiles for sm_87, sm_90a and gfx942.
# usage: merge_matmul.sh DRKC WORK_DIR PYTHON
set -u
DRKC=$1; W=$2; PY=$3
rm -rf "$W"; mkdir -p "$W"
fails=0
fail() { echo "FAIL $1"; sed 's/^/  | /' "$W/log" | head -40; fails=$((fails + 1)); }
# count OP FILE: live nodes of op OP in a printed graph
count() { grep -c "= $1(" "$2"; }

# gen NAME BIAS SIG: x [2, 5, 8] times q [8, 6], k [8, 4] (and v [8, 5] unless SIG); BIAS adds a
# constant bias to each (k's as [1, 1, 4], first operand); SIG: k also feeds a Sigmoid.
gen() {
  "$PY" - "$W/$1.drkg" "$2" "$3" <<'P'
import math, sys
path, bias, sig = sys.argv[1], sys.argv[2] == "1", sys.argv[3] == "1"
def vals(n, s):
    return ", ".join("%.4f" % (s * math.sin(i * 0.77 + s)) for i in range(n))
L = ["graph @m(%x: f32[2, 5, 8]) -> (%qr, %kt" + (", %ks" if sig else ", %vm") + ") {"]
L += ["  %wq: f32[8, 6] = const [" + vals(48, 0.5) + "]",
      "  %wk: f32[8, 4] = const [" + vals(32, -0.7) + "]",
      "  %wv: f32[8, 5] = const [" + vals(40, 0.9) + "]",
      "  %wo: f32[5, 3] = const [" + vals(15, 0.6) + "]",
      "  %bq: f32[6] = const [" + vals(6, 0.3) + "]",
      "  %bk: f32[1, 1, 4] = const [" + vals(4, -0.2) + "]",
      "  %bv: f32[5] = const [" + vals(5, 0.4) + "]",
      "  %qs: i64[4] = const [2, 5, 2, 3]",
      "  %q0: f32[2, 5, 6] = MatMul(%x, %wq)",
      "  %k0: f32[2, 5, 4] = MatMul(%x, %wk)"]
q, k = "%q0", "%k0"
if bias:
    L += ["  %q: f32[2, 5, 6] = Add(%q0, %bq)", "  %k: f32[2, 5, 4] = Add(%bk, %k0)"]
    q, k = "%q", "%k"
L += ["  %qr: f32[2, 5, 2, 3] = Reshape(" + q + ", %qs)",
      "  %kt: f32[2, 4, 5] = Transpose(" + k + ") {perm = [0, 2, 1]}"]
if sig:
    L += ["  %ks: f32[2, 5, 4] = Sigmoid(" + k + ")", "  return %qr, %kt, %ks"]
else:
    L += ["  %v0: f32[2, 5, 5] = MatMul(%x, %wv)"]
    v = "%v0"
    if bias:
        L += ["  %v: f32[2, 5, 5] = Add(%v0, %bv)"]
        v = "%v"
    L += ["  %vm: f32[2, 5, 3] = MatMul(" + v + ", %wo)", "  return %qr, %kt, %vm"]
open(path, "w").write("\n".join(L + ["}"]) + "\n")
P
}
gen qkv 0 0; gen qkv_bias 1 0; gen sig 0 1

# expect_graph NAME MATMULS SLICES ADDS FILE ARGS...: the graph drkc emits has these counts
expect_graph() {
  local name=$1 mm=$2 sl=$3 ad=$4 f=$5; shift 5
  if ! "$DRKC" "$W/$f.drkg" --emit=graph -o "$W/$name.out.drkg" "$@" >"$W/log" 2>&1; then fail "$name: drkc failed"; return; fi
  local gm gs ga
  gm=$(count MatMul "$W/$name.out.drkg"); gs=$(count Slice "$W/$name.out.drkg"); ga=$(count Add "$W/$name.out.drkg")
  if [ "$gm" != "$mm" ] || [ "$gs" != "$sl" ] || [ "$ga" != "$ad" ]; then
    cp "$W/$name.out.drkg" "$W/log"
    fail "$name: $gm MatMul $gs Slice $ga Add, want $mm $sl $ad"
  else
    echo "PASS $name"
  fi
}
expect_graph default 2 3 0 qkv
expect_graph level2 2 3 0 qkv --fusion-aggressiveness=2
expect_graph level3 2 3 0 qkv --fusion-aggressiveness=3
expect_graph depth-only 2 3 0 qkv --max-graph-depth=10
expect_graph level1 4 0 0 qkv --fusion-aggressiveness=1
expect_graph level0 4 0 0 qkv --fusion-aggressiveness=0
expect_graph bias 2 3 1 qkv_bias
expect_graph bias-level1 4 0 3 qkv_bias --fusion-aggressiveness=1
expect_graph sigmoid 2 0 0 sig

# -v says what it merged; --dump-after names the pass
if "$DRKC" "$W/qkv_bias.drkg" --emit=graph -o "$W/v.drkg" -v --dump-after=merge-matmul >"$W/log" 2>&1 &&
   grep -q "3 MatMuls sharing a left operand merged into 1" "$W/log" && grep -q -- "---- after merge-matmul ----" "$W/log" &&
   grep -Fq '%wq_merged: f32[8, 15] = const' "$W/log" && grep -Fq '%q_merged: f32[2, 5, 15] = Add(%q0_merged, %bq_merged)' "$W/log" &&
   grep -Fq '%k: f32[2, 5, 4] = Slice(%q_merged, %k_starts, %k_ends, %q0_merged_axes)' "$W/log"; then
  echo "PASS verbose"
else
  fail "verbose"
fi

# the interpreter after the pass against the graph as given (random inputs, two seeds)
for f in qkv qkv_bias sig; do
  for seed in 1 7; do
    if "$DRKC" run "$W/$f.drkg" --device=cpu --check --seed=$seed >"$W/log" 2>&1 && ! grep -q FAIL "$W/log" &&
       [ "$(grep -c 'PASS' "$W/log")" = 3 ]; then
      echo "PASS run-check $f seed $seed"
    else
      fail "run-check $f seed $seed"
    fi
  done
done

# the merged graphs compile for every target kind
for f in qkv qkv_bias; do
  if "$DRKC" "$W/$f.drkg" --target=sm_87,sm_90a,gfx942 -o "$W/$f.drkm" >"$W/log" 2>&1 && [ -s "$W/$f.drkm" ]; then
    echo "PASS compile $f"
  else
    fail "compile $f"
  fi
done

echo "$fails failed"
[ "$fails" = 0 ]
