#!/usr/bin/env bash
# Compiles every model under MODELS_DIR (DIR/<name>/model.onnx) with two drkc binaries and
# checks that the modules (and the tile IR) are byte-identical, under several flag sets: the
# check that a refactoring changed no emitted code. The module's provenance holds the command
# line (both run as argv[0] 'drkc' with one -o path), the model's hash, drkc's version and the target list,
# which are then the same for both.
# With REF == NEW it checks that compiles are deterministic (two runs, same bytes); with
# DRKC_B_ENV set, the second compile runs under that environment (e.g. DRK_JOBS=1).
# usage: identical.sh REF_DRKC NEW_DRKC MODELS_DIR WORK
set -u
REF=$1; NEW=$2; MODELS=$3; W=$4
rm -rf "$W"; mkdir -p "$W"
flagsets=("--target=sm_90a --precision=fp16 --fusion-aggressiveness=3"
          "--target=sm_90a"
          "--target=sm_87,sm_90a --precision=bf16"
          "--target=sm_80 --fusion-aggressiveness=0")
pass=0; fail=0
for m in "$MODELS"/*/model.onnx; do
  name=$(basename "$(dirname "$m")")
  for i in "${!flagsets[@]}"; do
    read -r -a f <<<"${flagsets[$i]}"
    for kind in tile module; do
      a="$W/$name.$i.a.$kind"; b="$W/$name.$i.b.$kind"
      # the same argv[0] for both: the command line is part of the provenance
      # and the same -o (both are in the provenance)
      o="$W/out.$kind"
      (exec -a drkc "$REF" "$m" "${f[@]}" --emit=$kind -o "$o" 2>"$a.err") && mv "$o" "$a"; ra=$?
      (export ${DRKC_B_ENV:-DRKC_B_ENV=}; exec -a drkc "$NEW" "$m" "${f[@]}" --emit=$kind -o "$o" 2>"$b.err") && mv "$o" "$b"; rb=$?
      if [ $ra != $rb ]; then
        fail=$((fail + 1)); echo "FAIL $name [${flagsets[$i]}] --emit=$kind: exit $ra vs $rb"; sed 's/^/  | /' "$b.err" | head -5
      elif [ $ra = 0 ] && ! cmp -s "$a" "$b"; then
        fail=$((fail + 1)); echo "FAIL $name [${flagsets[$i]}] --emit=$kind: outputs differ ($(cmp "$a" "$b" | head -1))"
      else
        pass=$((pass + 1))
      fi
    done
  done
done
echo "$pass identical, $fail differ"
[ "$fail" = 0 ] && [ "$pass" -gt 0 ]
