#!/usr/bin/env bash
# Issue 24's CLI rows: drkrun takes --opt=V as well as --opt V, has --version and a --help with
# every option and its default (on stdout, exit 0), and rejects bad numbers; `drkc run --help`
# works; `drkc run --input-dir` with a missing directory or one that lacks an input is an error
# (it silently fell back to random inputs).
# usage: cli_trust.sh DRKC DRKRUN MODELS_DIR WORK
set -u
DRKC=$1; DRKRUN=$2; MODELS=$3; W=$4
rm -rf "$W"; mkdir -p "$W"
fail=0
bad() { echo "FAIL: $*"; fail=1; }
export DRK_CACHE_DIR="$W/kcache"
m="$MODELS/mlp/model.onnx"
"$DRKC" "$m" -q -o "$W/m.drkm" || { echo "FAIL: compiling mlp"; exit 1; }

"$DRKRUN" "$W/m.drkm" --list --iters=5 --warmup=0 > "$W/list.txt" 2>&1 || bad "--iters=5 --warmup=0 refused: $(cat "$W/list.txt")"
"$DRKRUN" "$W/m.drkm" --list --iters 5 > /dev/null 2>&1 || bad "--iters 5 refused"
out=$("$DRKRUN" --version) && [[ $out == drkrun\ [0-9]* ]] || bad "drkrun --version: '$out'"
out=$("$DRKRUN" --help) || bad "drkrun --help exits $?"
for o in --input-dir --output-dir --warmup --iters --profile --device --latencies --list; do
  grep -q -- "$o" <<<"$out" || bad "drkrun --help does not list $o"
done
grep -q "default 100" <<<"$out" || bad "drkrun --help gives no defaults"
"$DRKRUN" "$W/m.drkm" --iters=abc > "$W/e1.txt" 2>&1; rc=$?
[ $rc = 2 ] && grep -q "needs a whole number, got 'abc'" "$W/e1.txt" || bad "--iters=abc: rc $rc, $(cat "$W/e1.txt")"
"$DRKRUN" "$W/m.drkm" --iters > "$W/e2.txt" 2>&1; rc=$?
[ $rc = 2 ] && grep -q -- "--iters needs a value" "$W/e2.txt" || bad "--iters without a value: rc $rc"

out=$("$DRKC" run --help) && grep -q "drkc run MODEL" <<<"$out" || bad "drkc run --help"
grep -q "%s" <<<"$out" && bad "drkc run --help prints a raw printf format (%s)"
"$DRKC" run "$m" --device=cpu --input-dir "$W/nope" > "$W/e3.txt" 2>&1; rc=$?
[ $rc = 1 ] && grep -q "input-dir $W/nope: No such file or directory" "$W/e3.txt" || bad "missing --input-dir: rc $rc, $(cat "$W/e3.txt")"
mkdir -p "$W/empty"
"$DRKC" run "$m" --device=cpu --input-dir "$W/empty" > "$W/e4.txt" 2>&1; rc=$?
[ $rc = 1 ] && grep -q "has no input_0.pb or input_0.npy for input 0" "$W/e4.txt" || bad "empty --input-dir: rc $rc, $(cat "$W/e4.txt")"
"$DRKC" run "$m" --device=cpu --input-dir "$MODELS/mlp/test_data_set_0" > /dev/null 2>&1 || bad "a full --input-dir refused"
[ $fail = 0 ] && echo "OK"
exit $fail
