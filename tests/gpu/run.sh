#!/usr/bin/env bash
# GPU test: every ONNX conformance case and every generated whole model, compiled by drkc for
# the local GPU, run by drkrun, and compared with the CPU reference interpreter (drkc run
# --device=cpu) under DESIGN.md's tolerances. Closes with `N passed, N failed, N skipped`.
#
#   tests/gpu/run.sh                  prepare and run here (needs drkc, drkrun and a GPU)
#   tests/gpu/run.sh --prepare DIR    compile modules and references into DIR (no GPU needed)
#   tests/gpu/run.sh --run DIR        run a prepared DIR on this machine's GPU
#
# Environment: DRKC, DRKRUN, BENCH (default: build/...), PYTHON (default python3),
# ARCH (default sm_90a), RESULTS (a results file to write; default none).
# A case is skipped when the interpreter cannot run it (out of scope: the import error says
# why) or when it uses an op the GPU path does not lower yet; the reason is printed.
set -uo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
DRKC=${DRKC:-$SRC/build/tools/drkc}
DRKRUN=${DRKRUN:-$SRC/build/tools/drkrun}
BENCH=${BENCH:-$SRC/build/tests/bench/bench_kernels}
PYTHON=${PYTHON:-python3}
ARCH=${ARCH:-sm_90a}
DATA=/usr/share/libonnx-testdata/data

prepare() {
  local dir=$1
  mkdir -p "$dir/cases" "$dir/bench"
  cp "$SRC/tests/gpu/compare_all.py" "$SRC/tests/models/compare_outputs.py" "$dir/"
  local models=$dir/models-src
  "$PYTHON" "$SRC/tests/models/gen_models.py" "$models" >/dev/null || { echo "prepare: model generation failed"; return 1; }
  local list=()
  for suite in node pytorch-converted pytorch-operator simple; do
    for c in "$DATA/$suite"/*/; do list+=("$suite:${c%/}"); done
  done
  for m in "$models"/*/; do list+=("models:${m%/}"); done
  local n=0
  for item in "${list[@]}"; do
    local suite=${item%%:*} c=${item#*:} name
    name=$suite.$(basename "$c")
    local out=$dir/cases/$name set0=$c/test_data_set_0
    [ -f "$c/model.onnx" ] && [ -d "$set0" ] || continue
    mkdir -p "$out/in" "$out/expected"
    cp "$set0"/input_*.pb "$out/in/" 2>/dev/null
    cp "$set0"/output_*.pb "$out/expected/" 2>/dev/null
    [ "$suite" = models ] && cp "$c/model.onnx" "$out/" # for drkc run --check on the GPU machine
    if ! "$DRKC" run "$c/model.onnx" --device=cpu --input-dir "$set0" --output-dir "$out/ref" >/dev/null 2>"$out/err"; then
      echo "SKIP fails on the interpreter: $(head -n1 "$out/err" | head -c 160)" >"$out/status"
      continue
    fi
    local frz=()
    if ! "$DRKC" "$c/model.onnx" --target="$ARCH" --shapes-from="$set0" -o "$out/model.drkm" 2>"$out/err"; then
      # shape-like inputs (Slice starts, Pad pads, ...) given as graph inputs: compile for
      # the test's values (--freeze-input), as TensorRT does for shape tensors
      if grep -Eq "must be a constant|freeze it|depends on data" "$out/err" &&
         mapfile -t frz < <("$PYTHON" "$SRC/tests/gpu/freeze_args.py" "$c/model.onnx" "$set0" "$out/in") &&
         [ ${#frz[@]} -gt 0 ] &&
         "$DRKC" "$c/model.onnx" --target="$ARCH" --shapes-from="$set0" "${frz[@]}" -o "$out/model.drkm" 2>"$out/err"; then
        echo "${frz[*]}" >"$out/frozen"
      else
        echo "SKIP not compiled: $(grep -m1 'error' "$out/err" | sed 's|^.*/||' | head -c 200)" >"$out/status"
        continue
      fi
    fi
    echo "RUN" >"$out/status"
    n=$((n + 1))
  done
  for k in add_bf16 matmul_bf16 matmul_f16; do
    "$DRKC" "$SRC/tests/bench/$k.drkg" --target="$ARCH" -o "$dir/bench/$k.drkm" || echo "prepare: bench $k failed"
  done
  for k in matmul_bf16 matmul_f16; do # the mma.sync kernel (sm_90 is not sm_90a: no wgmma)
    "$DRKC" "$SRC/tests/bench/$k.drkg" --target=sm_90 --portable -o "$dir/bench/${k}_mma.drkm" || echo "prepare: bench ${k}_mma failed"
  done
  echo "prepared $n cases to run in $dir"
}

run() {
  local dir=$1
  [ -x "$DRKRUN" ] || { echo "run: drkrun not found at $DRKRUN"; return 1; }
  # One drkrun per case, 8 at a time: each loads its module, runs once, writes outputs.
  find "$dir/cases" -name status -exec grep -l '^RUN' {} + | xargs -r -n1 dirname | \
    xargs -r -P 8 -I{} sh -c '"$0" "{}/model.drkm" --input-dir "{}/in" --output-dir "{}/out" --iters 1 --warmup 0 >"{}/run.log" 2>&1; echo $? >"{}/rc"' "$DRKRUN"
  "$PYTHON" "$dir/compare_all.py" "$dir" ${RESULTS:+--results "$RESULTS"}
  local rc=$?
  if [ -x "$BENCH" ] && [ -f "$dir/bench/add_bf16.drkm" ]; then
    echo "== kernel benchmarks"
    "$BENCH" "$dir/bench" ${BENCH_RESULTS:+"$BENCH_RESULTS"} || rc=1
  fi
  return $rc
}

case "${1:-}" in
  --prepare) prepare "$2" ;;
  --run) run "$2" ;;
  "") w=$(mktemp -d); prepare "$w" && run "$w" ;;
  *) echo "usage: $0 [--prepare DIR | --run DIR]"; exit 2 ;;
esac
