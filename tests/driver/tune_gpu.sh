#!/usr/bin/env bash
# `drkc tune` on the local GPU, a small budget: the worker's fingerprint names the GPU, every
# kernel with knobs gets a tuned, stable record, the tuned model passes its check
# (model_end "checked": true), `drkc --db --require-tuned` compiles with the records, and
# --resume measures nothing. Skips (exit 77) without a GPU.
# usage: tune_gpu.sh DRKC MODELS_DIR WORK
set -u
DRKC=$1; MODELS=$2; W=$3
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  echo "SKIP: no NVIDIA GPU here (nvidia-smi -L lists none): drkc tune measures on the GPU"
  exit 77
fi
rm -rf "$W"; mkdir -p "$W"
fail=0
bad() { echo "FAIL: $*"; fail=1; }
export DRK_CACHE_DIR="$W/kcache"
m="$MODELS/mlp/model.onnx"
F=(--target=sm_90a --precision=fp16 --fusion-aggressiveness=3)
"$DRKC" tune "$m" "${F[@]}" --trials=6 --out="$W/mlp.sched" --log="$W/run1.jsonl" --iters=10 >"$W/run1.out" 2>&1 ||
  { bad "drkc tune failed: $(tail -5 "$W/run1.out")"; exit 1; }
cat "$W/run1.out"
head -1 "$W/run1.jsonl" | grep -q '"gpu":"[^"]' || bad "model_start names no GPU: $(head -1 "$W/run1.jsonl")"
nk=$("$DRKC" "$m" "${F[@]}" --emit=schedules | grep '^k' | awk 'NF > 3' | wc -l)
[ "$(grep '^{"event":"kernel_summary"' "$W/run1.jsonl" | grep -c '"tuned":true,"stable":true')" = "$nk" ] ||
  bad "not every one of the $nk kernels with knobs is tuned and stable"
tail -1 "$W/run1.jsonl" | grep -q '"checked":true' || [ "$(grep -c '^k' "$W/mlp.sched")" = 0 ] ||
  bad "the tuned model was not checked: $(tail -1 "$W/run1.jsonl")"
"$DRKC" "$m" "${F[@]}" --db="$W/mlp.db" --require-tuned --report -o "$W/mlp.drkm" 2>"$W/db.err" ||
  bad "--db --require-tuned failed: $(cat "$W/db.err")"
"$DRKC" tune "$m" "${F[@]}" --trials=6 --out="$W/mlp.sched" --log="$W/run2.jsonl" --iters=10 --resume >"$W/run2.out" 2>&1 ||
  bad "drkc tune --resume failed: $(tail -5 "$W/run2.out")"
[ "$(grep -c '^{"event":"trial"' "$W/run2.jsonl")" = 0 ] || bad "--resume measured points again"
[ $fail = 0 ] && echo "tune_gpu: all passed"
exit $fail
