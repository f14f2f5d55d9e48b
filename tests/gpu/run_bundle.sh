#!/usr/bin/env bash
# Runs the GPU checks from a bundle made on a machine with drkc (no LLVM needed here):
#   BUNDLE/bin.tar.xz       bin/{drkc (static), drkrun, bench_kernels, test_hopper_matmul}
#   BUNDLE/gpuprep.tar.xz   gpuprep/ from `tests/gpu/run.sh --prepare`
#   BUNDLE/hop.tar.xz       hop/ from `test_hopper_matmul prepare hop` (optional)
# Writes logs to OUTDIR. usage: run_bundle.sh BUNDLE OUTDIR [STEPS]   (STEPS: a list of
# hopper,cases,models,cuobjdump,bench; default all; CONFIGS overrides the models step's list)
set -uo pipefail
B=$1; O=$2; STEPS=${3:-hopper,cases,models,cuobjdump,bench}
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
  echo "== drkc run --device=cuda --check on the whole models, per precision and fusion level"
  # --target=sm_80 runs the sm_80 code (cp.async, ldmatrix, mma.sync) through the PTX JIT;
  # --target=sm_90 the mma.sync path on sm_90 (no wgmma); comma-separated options in one config
  configs=${CONFIGS:-"default --precision=fp16 --precision=bf16 --precision=fp8 --matmul-precision=high --fusion-aggressiveness=0 --fusion-aggressiveness=1 --fusion-aggressiveness=3 --fusion-aggressiveness=3,--precision=fp16 --target=sm_80 --target=sm_80,--precision=fp16 --target=sm_90,--portable,--precision=bf16"}
  mkdir -p "$W/mc"
  cat >"$W/mc.sh" <<'EOS'
#!/bin/sh
# mc.sh DRKC CASE CONFIG: one --check run; CONFIG "default" adds no option.
out="$(dirname "$0")/mc/$(basename "$2").${3#--}"
cfg=$(echo "$3" | tr ',' ' '); [ "$cfg" = default ] && cfg=
"$1" run "$2/model.onnx" --device=cuda --check --input-dir "$2/in" $cfg >"$out" 2>&1
echo "rc=$?" >>"$out"
EOS
  for c in "$W"/gpuprep/cases/models.*; do
    [ -f "$c/model.onnx" ] || continue
    for cfg in $configs; do echo "$c $cfg"; done
  done | xargs -P 6 -n 2 sh "$W/mc.sh" "$W/bin/drkc"
  for f in "$W"/mc/*; do
    printf '%-60s %s\n' "$(basename "$f")" "$(grep -E '^check|^drkc: error|error:' "$f" | tr '\n' ' ' | cut -c1-200) $(tail -n1 "$f")"
  done | tee "$O/models.log"
  echo "models: $(grep -c 'PASS.*rc=0' "$O/models.log") of $(wc -l <"$O/models.log") runs PASS"
fi
if has cuobjdump; then
  echo "== cuobjdump lists drkc's fat binaries"
  for c in "$W"/gpuprep/cases/models.*; do
    [ -f "$c/model.onnx" ] || continue
    "$W/bin/drkc" "$c/model.onnx" --shapes-from="$c/in" --target=sm_80,sm_87,sm_90a --emit=fatbin -o "$W/x.fatbin" &&
      { echo "-- $(basename "$c")"; cuobjdump --list-elf --list-ptx "$W/x.fatbin"; } || echo "FAIL $(basename "$c")"
  done 2>&1 | tee "$O/cuobjdump.log" | tail -n 12
fi
if has bench; then
  echo "== benchmarks"
  "$W/bin/bench_kernels" "$W/gpuprep/bench" "$O/bench.md" 2>&1 | tee "$O/bench.log"
fi
