#!/usr/bin/env bash
# GPU sanitizers over drkc's kernels (issue 24 row 6; issue 17 part 6 for synccheck):
# compute-sanitizer memcheck, racecheck, initcheck and synccheck on drkrun running compiled
# modules. Models: the generated ones (tests/models/gen_models.py), the sm_90a matmul forms
# (tests/lower/hopper/*.drkg and tests/bench/matmul_f16.drkg: one-tile, staged, persistent,
# split-K, conv), and any exported models given as arguments (ONNX files, each optionally
# `FILE:--bind=...`). Each model is compiled twice: at the defaults (sm_90a) and at
# `--precision=fp16 --fusion-aggressiveness=3` (the wgmma/TMA kernels).
# Writes OUT/sanitize.md (one row per model and flags: errors per tool), the logs, and for a
# kernel a tool flags, the kernel's name and SASS around the reported PC (OUT/sass/).
# GPU_LOCK=FILE: each sanitizer run holds flock(FILE), so that timings taken beside it (zoo.py
# --gpu-lock FILE) never overlap a sanitized run.
#   usage: DRKC=... DRKRUN=... sanitize.sh OUT [MODEL[:FLAGS]...]
#   exit 0 when every tool reports 0 errors, 1 otherwise, 77 without a CUDA driver or
#   compute-sanitizer.
set -u
OUT=${1:?usage: sanitize.sh OUT [MODEL...]}; shift
SRC=$(cd "$(dirname "$0")/../.." && pwd)
DRKC=${DRKC:-$SRC/build/tools/drkc}
DRKRUN=${DRKRUN:-$SRC/build/tools/drkrun}
PY=${PYTHON:-python3}
TOOLS=${TOOLS:-"memcheck racecheck initcheck synccheck"}
LIMIT=${LIMIT:-240}
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
ldconfig -p 2>/dev/null | grep -q "libcuda.so.1" || { echo "SKIP: no CUDA driver"; exit 77; }
[ -n "$CS" ] || { echo "SKIP: compute-sanitizer not found"; exit 77; }
mkdir -p "$OUT/sass"
"$PY" "$SRC/tests/models/gen_models.py" "$OUT/gen" >/dev/null 2>&1 || echo "note: gen_models.py failed"
models=()
for m in "$OUT"/gen/*/model.onnx; do [ -f "$m" ] && models+=("$m:"); done
for m in "$SRC"/tests/lower/hopper/*.drkg "$SRC/tests/bench/matmul_f16.drkg"; do [ -f "$m" ] && models+=("$m:"); done
models+=("$@")
bad=0
{
  echo "# compute-sanitizer over drkc modules ($(date -u +%F), $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1))"
  echo
  echo "$($CS --version 2>&1 | tail -1). Errors per tool (\`ERROR SUMMARY\`; racecheck: hazards); \`-\`: not run (compile failed), \`T\`: over ${LIMIT} s."
  echo
  echo "| model | flags | kernels | $(echo $TOOLS | sed 's/ / | /g') |"
  echo "|---|---|---|$(for t in $TOOLS; do printf -- '---|'; done)"
} > "$OUT/sanitize.md"
for spec in "${models[@]}"; do
  m=${spec%%:*}; bind=${spec#*:}; [ "$bind" = "$spec" ] && bind=
  name=$(basename "$(dirname "$m")")_$(basename "$m" | sed 's/\.[a-z]*$//')
  for fl in default fast; do
    flags=(--target=sm_90a); [ $fl = fast ] && flags+=(--precision=fp16 --fusion-aggressiveness=3)
    tag=$name.$fl
    # a bind the model does not know is an error: try with it, then without
    if ! timeout 300 "$DRKC" "$m" "${flags[@]}" $bind -o "$OUT/$tag.drkm" >"$OUT/$tag.compile.log" 2>&1 &&
       ! timeout 300 "$DRKC" "$m" "${flags[@]}" -o "$OUT/$tag.drkm" >>"$OUT/$tag.compile.log" 2>&1; then
      echo "| $name | $fl | - | $(for t in $TOOLS; do printf -- '- | '; done)" >> "$OUT/sanitize.md"
      echo "COMPILE FAIL $tag: $(tail -1 "$OUT/$tag.compile.log")"; continue
    fi
    nk=$("$DRKRUN" "$OUT/$tag.drkm" --list 2>/dev/null | grep -oE "[0-9]+ kernels" | head -1 | cut -d' ' -f1)
    row="| $name | $fl | $nk |"
    for t in $TOOLS; do
      log=$OUT/$tag.$t.log
      extra=(); [ $t = racecheck ] && extra=(--racecheck-report hazard)
      [ $t = initcheck ] && extra=(--track-unused-memory no)
      lock=(); [ -n "${GPU_LOCK:-}" ] && lock=(flock "$GPU_LOCK")
      "${lock[@]}" timeout -k 5 "$LIMIT" "$CS" --tool "$t" "${extra[@]}" --print-limit 20 "$DRKRUN" "$OUT/$tag.drkm" --iters 1 --warmup 0 >"$log" 2>&1
      rc=$?
      n=$(grep -oE "(ERROR|RACECHECK) SUMMARY: [0-9]+" "$log" | grep -oE "[0-9]+$" | tail -1)
      if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then n=T
      elif [ -z "$n" ]; then n="rc=$rc"; fi
      row="$row $n |"
      if [ "$n" != 0 ] && [ "$n" != T ]; then
        bad=1
        echo "FLAGGED $tag $t: $n"; grep -m3 -A4 -E "^========= (Barrier|Invalid|Race|Uninit|Error|.*hazard)" "$log" | head -12
        # the flagged kernel's SASS, for the PC the report names
        k=$(grep -m1 -oE "in [A-Za-z_][A-Za-z0-9_]*" "$log" | head -1 | cut -c4-)
        if [ -n "$k" ] && [ ! -f "$OUT/sass/$tag.sass" ]; then
          timeout 120 "$DRKC" "$m" "${flags[@]}" $bind --emit=cubin -o "$OUT/sass/$tag.cubin" >/dev/null 2>&1 ||
            timeout 120 "$DRKC" "$m" "${flags[@]}" --emit=cubin -o "$OUT/sass/$tag.cubin" >/dev/null 2>&1
          timeout 120 "$DRKC" "$m" "${flags[@]}" $bind --emit=ptx -o "$OUT/sass/$tag.ptx" >/dev/null 2>&1 ||
            timeout 120 "$DRKC" "$m" "${flags[@]}" --emit=ptx -o "$OUT/sass/$tag.ptx" >/dev/null 2>&1
          cuobjdump -sass "$OUT/sass/$tag.cubin" > "$OUT/sass/$tag.sass" 2>&1 || true
        fi
      fi
    done
    echo "$row" >> "$OUT/sanitize.md"; echo "$row"
  done
done
exit $bad
