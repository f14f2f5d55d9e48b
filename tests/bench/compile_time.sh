#!/usr/bin/env bash
# Compile time of whole models: cold (an empty kernel cache) and warm (the same compile again),
# with every core and with one job, each model compiled alone. Prints a markdown table.
# usage: compile_time.sh DRKC MODELS_DIR [MODEL ...]   (MODELS_DIR/<name>/model.onnx; default:
#        every model there; DRKC_FLAGS: default "--target=sm_90a --precision=fp16
#        --fusion-aggressiveness=3")
set -u
DRKC=$1; MODELS=$2; shift 2
FLAGS=${DRKC_FLAGS:-"--target=sm_90a --precision=fp16 --fusion-aggressiveness=3"}
names=("$@")
[ ${#names[@]} -gt 0 ] || names=($(ls "$MODELS"))
CACHE=$(mktemp -d)
trap 'rm -rf "$CACHE"' EXIT
secs() { # command... -> wall seconds (or "fail")
  local t0 t1 ms
  t0=$(date +%s%N)
  "$@" >/dev/null 2>"$CACHE/err" || { echo fail; return; }
  t1=$(date +%s%N)
  ms=$(( (t1 - t0) / 1000000 ))
  printf '%d.%02d' $((ms / 1000)) $(( (ms % 1000) / 10 ))
}
echo "host: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); $(date -u '+%F %H:%M') UTC"
echo "flags: $FLAGS"
echo
echo "| model | kernels | cold, all cores (s) | warm (s) | cold, 1 job (s) | --no-cache (s) |"
echo "|---|---|---|---|---|---|"
for n in "${names[@]}"; do
  m="$MODELS/$n/model.onnx"
  [ -f "$m" ] || continue
  rm -rf "$CACHE/c"; mkdir -p "$CACHE/c"
  cold=$(DRK_CACHE_DIR="$CACHE/c" secs "$DRKC" "$m" $FLAGS -q -o "$CACHE/m.drkm")
  warm=$(DRK_CACHE_DIR="$CACHE/c" secs "$DRKC" "$m" $FLAGS -q -o "$CACHE/m.drkm")
  k=$("$DRKC" "$m" $FLAGS --emit=schedules 2>/dev/null | grep -c '^k')
  rm -rf "$CACHE/c1"; mkdir -p "$CACHE/c1"
  one=$(DRK_CACHE_DIR="$CACHE/c1" secs "$DRKC" "$m" $FLAGS -q --jobs=1 -o "$CACHE/m.drkm")
  nc=$(secs "$DRKC" "$m" $FLAGS -q --no-cache -o "$CACHE/m.drkm")
  echo "| $n | $k | $cold | $warm | $one | $nc |"
done
