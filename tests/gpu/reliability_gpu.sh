#!/usr/bin/env bash
# GPU check of the issue-24 reliability branch: the stricter attribute table, the module
# reader's checks of meaning and the empty-tensor lowering must not refuse or break real
# models on the GPU path. For the six generated models (tests/models/gen_models.py) and the
# fuzz seed corpus (tests/onnx/fuzz_corpus, symbolic batch bound to 2):
#   1. `drkc run MODEL --device=cuda --check` (GPU against the CPU interpreter, DESIGN.md's
#      tolerances) at sm_90a;
#   2. the module compiled (`drkc MODEL -o M.drkm --target=sm_90a`), read back by `drkrun
#      M.drkm --list` (the stricter reader) and run by `drkrun M.drkm --iters 3 --warmup 1`
#      (the runtime loads it, uploads, launches; a 0-element output included);
#   3. checksum-valid nonsense refused by drkrun before any launch (mutate_module.py).
# Prints one PASS/FAIL line per step and `N passed, N failed`; logs under OUT.
#   usage: DRKC=... DRKRUN=... reliability_gpu.sh OUT     (about 2 minutes; exit 1 on a failure,
#   77 without a CUDA driver)
set -u
OUT=${1:?usage: reliability_gpu.sh OUT}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
DRKC=${DRKC:-$SRC/build/tools/drkc}
DRKRUN=${DRKRUN:-$SRC/build/tools/drkrun}
PY=${PYTHON:-python3}
mkdir -p "$OUT"
ldconfig -p 2>/dev/null | grep -q "libcuda.so.1" || { echo "SKIP: no CUDA driver"; exit 77; }
pass=0; fail=0
step() { # NAME LOG CMD...: runs CMD under a 120 s limit, PASS on exit 0
  local name=$1 log=$2; shift 2
  if timeout 120 "$@" >"$log" 2>&1 && ! grep -q "FAIL" "$log"; then
    pass=$((pass + 1)); echo "PASS $name $(grep -o 'rel error [^ ]*' "$log" | tr '\n' ' ')"
  else
    fail=$((fail + 1)); echo "FAIL $name (exit $?):"; tail -5 "$log" | sed 's/^/  | /'
  fi
}
"$PY" "$SRC/tests/models/gen_models.py" "$OUT/gen" >/dev/null 2>&1 || echo "note: gen_models.py failed; only the corpus runs"
models=()
for m in "$OUT"/gen/*/model.onnx; do [ -f "$m" ] && models+=("$m"); done
# the seeds, and of the fuzzer's finds the one valid model (an empty axis); the other regress_*
# inputs are malformed on purpose
for m in "$SRC"/tests/onnx/fuzz_corpus/*.onnx; do
  case $(basename "$m") in regress_*) [ "$(basename "$m")" = regress_split_empty_axis.onnx ] || continue ;; esac
  models+=("$m")
done
for m in "${models[@]}"; do
  name=$(basename "$(dirname "$m")")/$(basename "$m" .onnx)
  name=${name#fuzz_corpus/}
  tag=$(echo "$name" | tr '/' '_')
  bind=()   # symbolic dims: batch (and seq where the model has one)
  if ! "$DRKC" run "$m" --device=cpu >/dev/null 2>&1; then
    bind=(--bind=batch=2)
    "$DRKC" "$m" --bind=batch=2,seq=16 --emit=graph -o /dev/null >/dev/null 2>&1 && bind=(--bind=batch=2,seq=16)
  fi
  step "$name check" "$OUT/$tag.check.log" "$DRKC" run "$m" --device=cuda --target=sm_90a --check "${bind[@]}"
  if timeout 120 "$DRKC" "$m" --target=sm_90a "${bind[@]}" -o "$OUT/$tag.drkm" >"$OUT/$tag.compile.log" 2>&1; then
    step "$name list" "$OUT/$tag.list.log" "$DRKRUN" "$OUT/$tag.drkm" --list
    step "$name drkrun" "$OUT/$tag.run.log" "$DRKRUN" "$OUT/$tag.drkm" --iters 3 --warmup 1
  else
    fail=$((fail + 1)); echo "FAIL $name compile:"; tail -3 "$OUT/$tag.compile.log" | sed 's/^/  | /'
  fi
done
# the reader refuses nonsense before the runtime touches the GPU
ok=$(ls "$OUT"/*.drkm 2>/dev/null | head -1)
for kind in dtype dims offset params; do
  if [ -n "$ok" ] && "$PY" "$SRC/tests/driver/mutate_module.py" "$ok" "$OUT/mut_$kind.drkm" $kind; then
    if timeout 60 "$DRKRUN" "$OUT/mut_$kind.drkm" --iters 1 --warmup 0 >"$OUT/mut_$kind.log" 2>&1; then
      fail=$((fail + 1)); echo "FAIL mutated $kind: drkrun ran it"
    else
      pass=$((pass + 1)); echo "PASS mutated $kind refused: $(head -1 "$OUT/mut_$kind.log")"
    fi
  fi
done
# a module whose records are consistent but do not match the kernels' code: the runtime checks
# each kernel's parameters with cuFuncGetParamInfo before the first launch
two=$(for f in "$OUT"/*.drkm; do n=$("$DRKRUN" "$f" --list 2>/dev/null | sed -n 's/.*, \([0-9]*\) kernels, .*/\1/p'); [ "${n:-0}" -ge 2 ] && echo "$f" && break; done)
if [ -n "$two" ] && "$PY" "$SRC/tests/driver/mutate_module.py" "$two" "$OUT/mut_shift.drkm" shift; then
  "$DRKRUN" "$OUT/mut_shift.drkm" --list >/dev/null 2>&1 || { fail=$((fail + 1)); echo "FAIL mutated shift: the reader refused it (expected the runtime to)"; }
  if timeout 60 "$DRKRUN" "$OUT/mut_shift.drkm" --iters 1 --warmup 0 >"$OUT/mut_shift.log" 2>&1; then
    fail=$((fail + 1)); echo "FAIL mutated shift: drkrun ran a kernel with the wrong parameters"
  elif grep -q "parameter" "$OUT/mut_shift.log"; then
    pass=$((pass + 1)); echo "PASS mutated shift refused by the runtime: $(grep -m1 parameter "$OUT/mut_shift.log")"
  else
    fail=$((fail + 1)); echo "FAIL mutated shift: failed without naming the parameters:"; tail -3 "$OUT/mut_shift.log" | sed 's/^/  | /'
  fi
fi
echo "$pass passed, $fail failed"
[ $fail = 0 ]
