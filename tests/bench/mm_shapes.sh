#!/usr/bin/env bash
# Compiles the matmul shapes of the generated full models (tests/models/gen_full_models.py,
# batch 1) as one-MatMul modules for bench_kernels' shape sweep (DIR/mm_*.drkm), each under the
# default schedule and under the pinned schedules of SCHEDULES (drkc --schedule=...), so one
# GPU run compares drkc's heuristic, its alternatives and cuBLAS on every shape; OUTDIR also
# gets bench_kernels' own modules, so `bench_kernels OUTDIR` runs as it is.
#   usage: mm_shapes.sh DRKC OUTDIR [TARGET]      (TARGET default sm_90a)
#   SHAPES="M,N,K ..." and SCHEDULES="tag=knobs ..." override the lists below.
set -euo pipefail
DRKC=$1; OUT=$2; TARGET=${3:-sm_90a}
mkdir -p "$OUT"
# gpt2_small (seq 1024): QKV, attention out, FFN up, FFN down; llama_decoder (seq 2048): q/o,
# k/v (GQA), gate/up, down; and the square speed-bar shape.
SHAPES=${SHAPES:-"1024,2304,768 1024,768,768 1024,3072,768 1024,768,3072 2048,2048,2048 2048,512,2048 2048,5632,2048 2048,2048,5632 4096,4096,4096"}
SCHEDULES=${SCHEDULES:-"n64=mm.tile_n=64,mm.split_k=1 n128=mm.tile_n=128,mm.split_k=1 n256=mm.tile_n=256,mm.split_k=1"}
for shp in $SHAPES; do
  IFS=, read -r M N K <<<"$shp"
  g="$OUT/mm_f16_${M}x${N}x${K}.drkg"
  cat >"$g" <<EOG
graph @mm(%a: f16[$M, $K], %b: f16[$K, $N]) -> (%c) {
  %c: f16[$M, $N] = MatMul(%a, %b)
  return %c
}
EOG
  "$DRKC" "$g" --target="$TARGET" -o "$OUT/mm_f16_${M}x${N}x${K}_default.drkm"
  for s in $SCHEDULES; do
    "$DRKC" "$g" --target="$TARGET" --schedule="${s#*=}" -o "$OUT/mm_f16_${M}x${N}x${K}_${s%%=*}.drkm"
  done
  rm -f "$g"
done
# bench_kernels DIR needs its own modules next to the sweep (Add, the 4096³ matmuls, the
# mma.sync ones for sm_90 without the 'a')
SRC=$(cd "$(dirname "$0")/../.." && pwd)
for k in add_bf16 matmul_bf16 matmul_f16; do "$DRKC" "$SRC/tests/bench/$k.drkg" --target="$TARGET" -o "$OUT/$k.drkm"; done
for k in matmul_bf16 matmul_f16; do "$DRKC" "$SRC/tests/bench/$k.drkg" --target=sm_90 --portable -o "$OUT/${k}_mma.drkm"; done
echo "mm_shapes: $(ls "$OUT"/mm_*.drkm | wc -l) modules in $OUT"
