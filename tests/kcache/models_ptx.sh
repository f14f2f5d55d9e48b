#!/bin/sh
# Lowers every small model of tests/models (DATA/*/model.onnx) with drkc (--emit=tile, fp16)
# and checks with test_codegen that its PTX is the same through the one-module path, 1 and
# 4 jobs and the cache, for sm_90a and sm_80.
# Usage: models_ptx.sh DRKC TEST_CODEGEN DATA OUT. Exit 77 when DATA has no model.
drkc=$1 tc=$2 data=$3 out=$4
mkdir -p "$out" || exit 1
n=0 fail=0
for m in "$data"/*/model.onnx; do
  [ -f "$m" ] || continue
  name=$(basename "$(dirname "$m")")
  for arch in sm_90a sm_80; do
    t="$out/$name.$arch.drkt"
    if ! "$drkc" "$m" --target=$arch --precision=fp16 --shapes-from="$(dirname "$m")/test_data_set_0" --emit=tile -o "$t"; then
      echo "FAIL $name $arch: drkc --emit=tile"
      fail=1
      continue
    fi
    if "$tc" ptx $arch "$t"; then n=$((n + 1)); else echo "FAIL $name $arch"; fail=1; fi
  done
done
[ $n -gt 0 ] || [ $fail -ne 0 ] || { echo "SKIP: no models in $data"; exit 77; }
echo "$n model/arch pairs identical"
exit $fail
