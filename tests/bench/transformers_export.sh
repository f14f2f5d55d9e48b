#!/bin/bash
# Issue 17 on the H200: transformers exported by torch.onnx.export(dynamo=True) at the issue's
# sizes (BERT-base b8 s128, GPT-2 small + LM head b1 s1024, LLaMA-style 8 x 1024 GQA b1 s2048,
# Whisper-base encoder, ViT-B/16 b1), compiled fp16 and bf16 at --target=sm_90a
# --fusion-aggressiveness=3: flash-attention kernel count per model (wanted: one per layer) and
# kernel forms from --report, `drkc run --device=cuda --check`, then (checked modules only)
# drkrun's resident median vs torch.compile(mode="reduce-overhead") in the same dtype. The check
# is judged like tests/zoo/zoo.py: within max(1e-2, 2 x torch's own error in that dtype), which
# each line prints ("torch fp16 ..."); fp16 lines are followed by drkrun --profile's top-10
# kernels ("  profile MODEL fp16: MS PCT% KERNEL").
#
# usage: DRKC=/path/drkc DRKRUN=/path/drkrun tests/bench/transformers_export.sh OUTDIR [args of
#        transformers_export.py, e.g. --only gpt2 llama --precisions fp16]
# Writes OUTDIR/log.txt (the table lines) and OUTDIR/results.json. Time: about 6 minutes (the
# exports on the CPU ~1.5 min, torch.compile ~30 s a model; torch timings stop being started
# after --budget 330 s; fp16 only unless --torch-bf16); hard limit 9 minutes.
set -u
OUT=${1:?usage: DRKC=... DRKRUN=... $0 OUTDIR [args]}
shift
HERE=$(cd "$(dirname "$0")" && pwd)
: "${DRKC:?set DRKC to the drkc binary}"
: "${DRKRUN:?set DRKRUN to the drkrun binary}"
PY=${PYTHON:-python3}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv > "$OUT/gpu.txt" 2>&1 || true
"$DRKC" --version > "$OUT/drkc_version.txt" 2>&1 || true
timeout -k 10 540 "$PY" "$HERE/transformers_export.py" --out "$OUT" --drkc "$DRKC" --drkrun "$DRKRUN" "$@" \
  > "$OUT/full_log.txt" 2>&1
rc=$?
grep -E "^(bert|gpt2|llama|whisper|vit) |^  profile |^\{|^total" "$OUT/full_log.txt" | tee "$OUT/log.txt"
[ $rc -eq 124 ] && echo "transformers_export: timed out after 540 s (partial results in $OUT/results.json)"
tail -5 "$OUT/full_log.txt" | grep -i -E "error|Traceback" || true
exit $rc
