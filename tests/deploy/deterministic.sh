#!/usr/bin/env bash
# Deterministic builds (docs/deploy.md): the same model and flags give byte-identical .drkm,
# .o, .h and .a files: built twice in two folders with the same command line, once from an
# empty compiled-kernel cache, once from the cache the first build filled, and with one or
# two compile jobs (kernels are compiled in parallel; their order must not leak into the
# bytes). Then the provenance fields that must differ do: another command line (-o name) or
# another model changes the module, and nothing else does.
# usage: deterministic.sh DRKC MODEL WORK_DIR
set -u
DRKC=$1; MODEL=$2; W=$3
rm -rf "$W"; mkdir -p "$W"
fails=0
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1"; fails=$((fails + 1)); }
# build DIR ENV... -- ARGS...: in W/DIR, the same relative command line each time
build() {
  local dir=$W/$1; shift
  mkdir -p "$dir"
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done; shift
  (cd "$dir" && env "${envs[@]}" "$DRKC" "$MODEL" -q "$@") 2>>"$W/drkc.log" || fail "drkc $* in $dir"
}
same() { # NAME FILE_A FILE_B
  if cmp -s "$2" "$3"; then pass "$1: identical ($(stat -c %s "$2") bytes)"; else fail "$1: $2 and $3 differ"; cmp "$2" "$3" | head -3; fi
}
C=$W/cache
for kind in "module|-o model.drkm|model.drkm" "obj|-c -o model.o|model.o model.h" "lib|--emit=lib -o libmodel.a|libmodel.a model.h" \
            "aarch64|-c --host=aarch64-linux-gnu -o model.o|model.o model.h" "fp16|--precision=fp16 -c -o model.o|model.o model.h" \
            "external|--weights=external -c -o model.o|model.o model.h model.weights"; do
  IFS='|' read -r name args files <<<"$kind"
  # a: empty cache, 2 jobs; b: the cache a filled, 1 job; c: no cache at all
  # (the job count from DRK_JOBS: -j would be part of the command line, which is provenance)
  build "$name.a" DRK_CACHE_DIR="$C.$name" DRK_JOBS=2 -- --target=sm_90 $args
  build "$name.b" DRK_CACHE_DIR="$C.$name" DRK_JOBS=2 -- --target=sm_90 $args
  build "$name.c" DRK_CACHE=0 DRK_JOBS=1 -- --target=sm_90 $args
  for f in $files; do
    same "$name.$f.cached" "$W/$name.a/$f" "$W/$name.b/$f"
    same "$name.$f.nocache" "$W/$name.a/$f" "$W/$name.c/$f"
  done
done
# what must differ: the command line is provenance (here: another -o name) ...
build other DRK_CACHE=0 -- --target=sm_90 -o other.drkm
if cmp -s "$W/module.a/model.drkm" "$W/other/other.drkm"; then fail "another command line gave the same module"
else
  n=$(cmp -l "$W/module.a/model.drkm" "$W/other/other.drkm" 2>/dev/null | wc -l)
  pass "another command line changes the module ($n bytes: the STRINGS section and checksums)"
fi
echo "$fails failure(s)"
[ "$fails" = 0 ]
