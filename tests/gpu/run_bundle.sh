#!/usr/bin/env bash
# Runs the GPU checks from a bundle made on a machine with drkc (no LLVM needed here):
#   BUNDLE/bin.tar.xz       bin/{drkc (static), drkrun, bench_kernels, test_hopper_matmul}
#   BUNDLE/gpuprep.tar.xz   gpuprep/ from `tests/gpu/run.sh --prepare`
#   BUNDLE/hop.tar.xz       hop/ from `test_hopper_matmul prepare hop` (optional)
# Writes logs to OUTDIR. usage: run_bundle.sh BUNDLE OUTDIR [STEPS]   (STEPS: a list of
# hopper,cases,models,bench; default all)
set -uo pipefail
B=$1; O=$2; STEPS=${3:-hopper,cases,models,bench}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
W=$(mktemp -d)
tar xJf "$B/bin.tar.xz" -C "$W" && tar xJf "$B/gpuprep.tar.xz" -C "$W" || exit 1
[ -f "$B/hop.tar.xz" ] && tar xJf "$B/hop.tar.xz" -C "$W"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$O/gpu.txt"
has() { case ",$STEPS," in *",$1,"*) return 0;; esac; return 1; }
if has hopper && [ -d "$W/hop" ]; then
  echo "== Hopper matmul (TMA + wgmma) vs CPU reference"
  "$W/bin/test_hopper_matmul" run "$W/hop" 2>&1 | tee "$O/hopper.log" | tail -n 25
fi
if has cases; then
  echo "== conformance cases and whole models: drkrun vs interpreter"
  DRKRUN=$W/bin/drkrun BENCH=/nonexistent PYTHON=python3 RESULTS=$O/cases.txt \
    "$SRC/tests/gpu/run.sh" --run "$W/gpuprep" >"$O/cases.log" 2>&1
  grep -E '^(FAIL|[0-9]+ passed)' "$O/cases.log" | tail -n 60
fi
if has models; then
  echo "== drkc run --device=cuda --check on the whole models"
  for c in "$W"/gpuprep/cases/models.*; do
    [ -f "$c/model.onnx" ] || continue
    echo "-- $(basename "$c")"
    "$W/bin/drkc" run "$c/model.onnx" --device=cuda --check --input-dir "$c/in" 2>&1 | grep -v '^output ' | tail -n 6
  done 2>&1 | tee "$O/models.log"
fi
if has bench; then
  echo "== benchmarks"
  "$W/bin/bench_kernels" "$W/gpuprep/bench" "$O/bench.md" 2>&1 | tee "$O/bench.log"
fi
