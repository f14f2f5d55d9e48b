#!/usr/bin/env bash
# Outputs are written to a temporary file and renamed: a failed write keeps the previous module
# and says why; -o naming the input is refused before compiling; a compile prints one summary
# line (not with -q).
# usage: safe_output.sh DRKC MODELS_DIR WORK
set -u
DRKC=$1; MODELS=$2; W=$3
rm -rf "$W"; mkdir -p "$W"
fail=0
bad() { echo "FAIL: $*"; fail=1; }
m="$MODELS/mlp/model.onnx"
cp "$m" "$W/m.onnx"
"$DRKC" "$W/m.onnx" --target=sm_80 -o "$W/m.drkm" 2>"$W/ok.err" || bad "first compile failed"
grep -q "^drkc: wrote $W/m.drkm: [0-9]* kernels, [0-9.]* MB, [0-9.]* s$" "$W/ok.err" || { bad "no summary line"; cat "$W/ok.err"; }
"$DRKC" "$W/m.onnx" --target=sm_80 -q -o "$W/q.drkm" 2>"$W/q.err" || bad "-q compile failed"
[ ! -s "$W/q.err" ] || bad "-q printed: $(cat "$W/q.err")"
cp "$W/m.drkm" "$W/good.drkm"
size=$(stat -c %s "$W/m.drkm")
# a file size limit below the module's size: the write fails, the previous module stays whole
( ulimit -f $(( size / 1024 / 2 )); trap '' XFSZ; exec "$DRKC" "$W/m.onnx" --target=sm_80,sm_90a -o "$W/m.drkm" ) 2>"$W/lim.err" &&
  bad "a write over the file size limit succeeded"
grep -q "writing '$W/m.drkm' failed: File too large (the previous file, if any, is kept)" "$W/lim.err" ||
  { bad "no reason given for the failed write:"; cat "$W/lim.err"; }
cmp -s "$W/m.drkm" "$W/good.drkm" || bad "the failed write changed the previous module"
ls "$W" | grep -q '\.tmp\.' && bad "a temporary file was left behind"
# -o equal to the input
cp "$W/m.onnx" "$W/keep.onnx"
"$DRKC" "$W/m.onnx" --target=sm_80 -o "$W/m.onnx" 2>"$W/same.err" && bad "-o the input was accepted"
grep -q "is the input model" "$W/same.err" || bad "no message for -o the input"
cmp -s "$W/m.onnx" "$W/keep.onnx" || bad "the input model was changed"
[ $fail = 0 ] && echo "safe_output: all passed"
exit $fail
