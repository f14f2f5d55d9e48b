#!/usr/bin/env bash
# Reductions at the hardware limit (issue 16 part 3) on the GPU machine: every case of
# reductions.py (EfficientNet-B0 SE ReduceMean NCHW/NHWC at batch 1 and 32, the SE gate,
# ResNet's GlobalAveragePool, poolformer's GroupNorm(1 group) + Relu, ConvNeXt's LayerNorm, a
# long softmax; f16 and f32 graphs, --target=sm_90a --precision=fp16 --fusion-aggressiveness=3)
# is first checked against the CPU interpreter (drkc run --device=cuda --check), then timed
# (drkrun --profile) next to torch eager / torch.compile of the same op; then poolformer_s12
# (timm, torch.onnx.export dynamo, batch 1) end to end through tests/zoo/zoo.py.
#
#   DRKC=/path/drkc DRKRUN=/path/drkrun tests/bench/reductions.sh OUT_DIR
#
# Bounded: at most 300 s for the kernels (typically 2-3 min), 240 s for poolformer (timeouts; results are written
# as they come, so a cut-short run keeps what it measured). Prints each case's row as it is
# measured (the poolformer token mixer and GroupNorm+Relu first) and the zoo's poolformer row. Exit status: 0 when every case passed its check and was timed.
set -u
OUT=${1:?usage: DRKC=... DRKRUN=... reductions.sh OUT_DIR}
: "${DRKC:?set DRKC to the drkc binary}" "${DRKRUN:?set DRKRUN to the drkrun binary}"
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${PYTHON:-python3}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv > "$OUT/gpu.txt" 2>&1
# each case's row is printed as it is measured (and OUT/kernels/results.md rewritten), so an
# outer timeout still leaves the rows measured so far in the caller's log
timeout -k 10 300 "$PY" "$HERE/reductions.py" "$OUT/kernels" --drkc "$DRKC" --drkrun "$DRKRUN" --iters 100 2>&1 \
  | tee "$OUT/kernels.txt"
rc=${PIPESTATUS[0]}
echo "== poolformer_s12 (zoo.py, dynamo export, batch 1, fresh init)"
timeout -k 10 240 "$PY" "$HERE/../zoo/zoo.py" --out "$OUT/zoo" --drkc "$DRKC" --drkrun "$DRKRUN" --only poolformer_s12 \
  --init fresh --exporter dynamo --batch 1 --iters 50 --timeout 230 > "$OUT/poolformer.txt" 2>&1
echo "zoo.py exit $?"
grep -i "poolformer" "$OUT/zoo/results.md" 2>/dev/null || tail -15 "$OUT/poolformer.txt"
exit $rc
