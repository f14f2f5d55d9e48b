#!/usr/bin/env bash
# The README's main job: compile the bundled example model for sm_90, and run it on the GPU
# if one is present, else through the CPU reference interpreter, saying what was skipped.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
DRKC=$BUILD/tools/drkc
MODEL=examples/mlp/model.onnx
OUT=$BUILD/demo
mkdir -p "$OUT"

echo "== drkc $MODEL --target=sm_90 -o $OUT/mlp.drkm"
if "$DRKC" "$MODEL" --target=sm_90 -o "$OUT/mlp.drkm"; then
  compiled=1
  echo "-- built $OUT/mlp.drkm ($(wc -c <"$OUT/mlp.drkm") bytes: kernels, plan, weights, fat binary)"
else
  compiled=0
  echo "-- the GPU module could not be built (above: the stage that is missing); showing the graph IR instead"
  "$DRKC" "$MODEL" --emit=graph -o "$OUT/mlp.drkg" && head -n 12 "$OUT/mlp.drkg" && echo "   ... ($OUT/mlp.drkg)"
fi

gpu=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then gpu=1; fi
if [ $gpu = 1 ] && [ $compiled = 1 ]; then
  echo "== drkrun $OUT/mlp.drkm --profile"
  "$BUILD/tools/drkrun" "$OUT/mlp.drkm" --iters 100 --profile || exit 1
  echo "== drkc run $MODEL --device=cuda --check (GPU vs the reference interpreter)"
  exec "$DRKC" run "$MODEL" --device=cuda --check --seed 1
fi
if [ $gpu = 0 ]; then
  echo "-- GPU run skipped: no NVIDIA GPU on this machine"
else
  echo "-- GPU run skipped: no module was built"
fi
echo "== drkc run $MODEL --device=cpu --seed 1 --output-dir $OUT/cpu (reference interpreter)"
exec "$DRKC" run "$MODEL" --device=cpu --seed 1 --output-dir "$OUT/cpu"
