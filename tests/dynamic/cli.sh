#!/bin/bash
# drkc --dynamic and drkrun on modules with shape buckets, without a GPU (tests/dynamic):
# modules compile, --list shows the dims, the buckets and their kernels, and every error a user
# can cause says what is wrong; check_merge compares each bucket with the one-bucket module of
# its sizes. Usage: cli.sh DRKC DRKRUN CHECK_MERGE MODELS_DIR WORK
set -u
drkc=$1 drkrun=$2 check_merge=$3 models=$4 work=$5
rm -rf "$work" && mkdir -p "$work"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
# expect_error WANT CMD...: CMD fails and its stderr has WANT
expect_error() {
  local want=$1; shift
  if "$@" >"$work/out.txt" 2>"$work/err.txt"; then fail "succeeded: $*"; return; fi
  grep -qF -- "$want" "$work/err.txt" || { fail "no '$want' from: $*"; cat "$work/err.txt"; }
}

# a CNN with dynamic batch: 4 buckets (1, 2, 4, 8), one image each, the weights once
"$drkc" "$models/cnn/model.onnx" --target=sm_90a --dynamic=batch=1..8 -o "$work/cnn.drkm" --report \
  2>"$work/cnn.report" || { fail "cnn compile"; cat "$work/cnn.report"; }
grep -q "report: dynamic module: 4 buckets" "$work/cnn.report" || fail "cnn: no bucket report"
"$drkrun" "$work/cnn.drkm" --list >"$work/cnn.list" || fail "cnn: --list"
grep -q "dynamic dims: batch=1..8; 4 buckets" "$work/cnn.list" || fail "cnn: --list has no dims line"
for b in 1 2 4 8; do grep -q "bucket [0-9]*: batch=$b: kernels" "$work/cnn.list" || fail "cnn: --list lacks bucket batch=$b"; done
grep -q "input 3 'x': f32\[8, 8, 16, 16\]" "$work/cnn.list" || fail "cnn: --list lacks the batch=8 input"
# one weights copy: the module is smaller than the 4 exact-shape modules together. The exact
# modules for check_merge are one-bucket modules (--dynamic=batch=B..B: the buckets' own lowering,
# whose flat kernels take their element count at launch); the static compiles give the sizes.
size=0
for b in 1 2 4 8; do
  "$drkc" "$models/cnn/model.onnx" --target=sm_90a --bind=batch=$b -o "$work/cnn_s$b.drkm" -q || fail "cnn static b$b"
  size=$((size + $(stat -c %s "$work/cnn_s$b.drkm")))
  "$drkc" "$models/cnn/model.onnx" --target=sm_90a --dynamic=batch=$b..$b -o "$work/cnn_b$b.drkm" -q || fail "cnn exact b$b"
done
dyn=$(stat -c %s "$work/cnn.drkm")
[ "$dyn" -lt "$size" ] || fail "cnn: dynamic module $dyn bytes, exact modules $size together"
echo "cnn: dynamic module $dyn bytes, 4 exact-shape modules $size bytes together"
"$check_merge" "$work/cnn.drkm" "$work"/cnn_b{1,2,4,8}.drkm || fail "cnn: buckets differ from the exact modules"
"$check_merge" "$work/cnn.drkm" "$work"/cnn_b{2,1,4,8}.drkm >/dev/null 2>&1 && fail "check_merge accepts swapped buckets"

# per-token block: batch and seq dynamic, listed buckets; a kernel shared (batch=4,seq=8 and
# batch=1,seq=32 have the same rows)
"$drkc" "$models/tokens/model.onnx" --target=sm_90a --dynamic=batch=1..4,seq=1..32 --buckets='seq:8,32' \
  -o "$work/tok.drkm" -q || fail "tokens compile"
"$drkrun" "$work/tok.drkm" --list >"$work/tok.list" || fail "tokens: --list"
grep -q "dynamic dims: batch=1..4 seq=1..32; 6 buckets" "$work/tok.list" || fail "tokens: dims"
grep -q "batch=4,seq=8: kernels [0-9.]* ([0-9]* own code, [1-9][0-9]* shared)" "$work/tok.list" ||
  { fail "tokens: no kernel shared by batch=4,seq=8"; grep bucket "$work/tok.list"; }
tok_exact=()
for b in 1 2 4; do
  for s in 8 32; do
    "$drkc" "$models/tokens/model.onnx" --target=sm_90a --dynamic=batch=$b..$b,seq=$s..$s -o "$work/tok_b${b}_s$s.drkm" -q ||
      fail "tokens exact b$b s$s"
    tok_exact+=("$work/tok_b${b}_s$s.drkm")
  done
done
"$check_merge" "$work/tok.drkm" "${tok_exact[@]}" || fail "tokens: buckets differ from the exact modules"

# attention over a dynamic seq: the padded keys masked through a length input the runtime fills;
# one flash kernel per layer still
"$drkc" "$models/attn/model.onnx" --target=sm_90a --precision=fp16 --fusion-aggressiveness=3 --dynamic=batch=1..2,seq=1..24 \
  --buckets='seq:8,24' -o "$work/attn.drkm" --report 2>"$work/attn.report" || { fail "attn compile"; cat "$work/attn.report"; }
[ "$(grep -c "report: 2 flash-attention kernels" "$work/attn.report")" = 4 ] || fail "attn: not 2 flash kernels in each of 4 buckets"
"$drkrun" "$work/attn.drkm" --list >"$work/attn.list" || fail "attn: --list"
grep -q "padded seq masked: input 1 ('drk_len_seq') holds its actual size" "$work/attn.list" || fail "attn: no length input listed"

# tuning per bucket (synthetic times: DRKC_TUNE_FAKE_MEASURE, the candidates compiled and run
# through the real path otherwise): one database, a schedule file per bucket, and the dynamic
# module compiled from it takes every bucket's records (their workload keys hold its shapes)
DRKC_TUNE_FAKE_MEASURE=1 DRKC_TUNE_NO_PROGRESS=1 DRK_CACHE_DIR="$work/kc" "$drkc" tune "$models/attn/model.onnx" \
  --target=sm_90a --precision=fp16 --fusion-aggressiveness=3 --dynamic=batch=1..2,seq=1..24 --buckets='seq:8,24' \
  --trials=2 --policy=random --out="$work/attn.sched" --jobs=2 >"$work/tune.log" 2>&1 || { fail "tune --dynamic"; tail -5 "$work/tune.log"; }
[ "$(grep -c '^drkc tune: bucket [1-4] of 4: batch=[12],seq=\(8\|24\)$' "$work/tune.log")" = 4 ] || fail "tune --dynamic: not 4 buckets"
for t in batch1-seq8 batch1-seq24 batch2-seq8 batch2-seq24; do [ -s "$work/attn-$t.sched" ] || fail "tune --dynamic: no attn-$t.sched"; done
grep -E "trials \([1-9][0-9]* invalid" "$work/tune.log" && fail "tune --dynamic: invalid candidates (the length input not at the bucket's size?)"
"$drkc" "$models/attn/model.onnx" --target=sm_90a --precision=fp16 --fusion-aggressiveness=3 --dynamic=batch=1..2,seq=1..24 \
  --buckets='seq:8,24' --db="$work/attn.db" -o "$work/attn_tuned.drkm" --report 2>"$work/attn_tuned.report" || fail "compile --db"
[ "$(grep -cE "report: bucket batch=[12],seq=(8|24): ([1-9][0-9]*) of \2 kernels with knobs tuned from --db" "$work/attn_tuned.report")" = 4 ] ||
  { fail "the dynamic module does not take every bucket's records"; grep "tuned from" "$work/attn_tuned.report"; }

# the errors
enc="$models/encoder/model.onnx"
expect_error "not implemented: exact padding of seq through %y = ReduceProd (ReduceProd over it)" \
  "$drkc" "$models/prodpool/model.onnx" --target=sm_90a --dynamic=seq=1..8 --bind=batch=2 -o "$work/x.drkm"
expect_error "input 'hidden_states' has symbolic dim 'seq', which is neither in --dynamic nor bound" \
  "$drkc" "$enc" --target=sm_90a --dynamic=batch=1..4 -o "$work/x.drkm"
expect_error "no input of the model has a dim named 'width'" "$drkc" "$enc" --dynamic=width=1..4 --bind=batch=1,seq=8 -o "$work/x.drkm"
expect_error "--dynamic: expected NAME=LO..HI" "$drkc" "$enc" --dynamic=batch=4 -o "$work/x.drkm"
expect_error "need 1 <= LO <= HI" "$drkc" "$enc" --dynamic=batch=8..4 -o "$work/x.drkm"
expect_error "the largest bucket must be the range's end 8" "$drkc" "$enc" --dynamic=batch=1..8 --buckets='batch:1,4' -o "$work/x.drkm"
expect_error "above the one before it" "$drkc" "$enc" --dynamic=batch=1..8 --buckets='batch:4,2,8' -o "$work/x.drkm"
expect_error "--buckets: expected NAME:S1,S2,..." "$drkc" "$enc" --dynamic=batch=1..8 --buckets='seq:8' -o "$work/x.drkm"
expect_error "--buckets lists the sizes of --dynamic dims" "$drkc" "$enc" --buckets='batch:8' -o "$work/x.drkm"
expect_error "not implemented: --dynamic writes a module" "$drkc" "$enc" --dynamic=batch=1..2 --bind=seq=8 --emit=ptx
expect_error "unknown option '--dynamic=batch=1..2' for 'drkc run'" "$drkc" run "$enc" --dynamic=batch=1..2
expect_error "--shapes: 'width=3' is not NAME=SIZE" "$drkrun" "$work/cnn.drkm" --shapes width=3
[ "$fails" = 0 ] && echo "dynamic cli: all checks passed"
exit $((fails > 0))
