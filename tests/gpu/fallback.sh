#!/usr/bin/env bash
# The fallback plan of `--target=sm_90` on a Hopper GPU (issue 19 part 3, docs/deploy.md): each
# generated model (tests/models/gen_models.py, ONNX Runtime's outputs as the reference) compiled
# once with --target=sm_90 (fp32, and fp16 with the fast flags), then run four ways from the one
# module: the main sm_90a plan (DRK_VARIANT=main), the main plan JIT-compiled from its
# compute_90a PTX (DRK_CUDA_JIT=1), the fallback plan's sm_90 cubin (DRK_VARIANT=fallback) and
# the fallback plan JIT-compiled from its compute_90 PTX (both: what a GPU after Hopper runs).
# Every run's outputs are checked against the reference (tests/models/compare_outputs.py: f32
# 1e-4, fp16 builds 1e-2) and timed (drkrun, resident median). Writes OUT/fallback.md.
#   usage: tests/gpu/fallback.sh BIN_DIR WORK OUT    (BIN_DIR: drkc and drkrun)
set -u
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BIN=$1; W=$2; OUT=$3
mkdir -p "$W" "$OUT"
python3 "$SRC/tests/models/gen_models.py" "$W/g" >/dev/null || { echo "model generation failed"; exit 1; }
R=$OUT/fallback.md
{
  echo "# --target=sm_90: the main plan and the fallback plan on $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1), $(date -u '+%F %H:%M') UTC"
  echo
  echo "One module per row (drkc --target=sm_90 FLAGS); latency: drkrun resident median (ms); check: relative L2 error of the"
  echo "worst output against ONNX Runtime (tolerance f32 1e-4, fp16 builds 1e-2)."
  echo
  echo "| model | flags | kernels main / fallback | main sm_90a cubin | main, compute_90a PTX JIT | fallback sm_90 cubin | fallback, compute_90 PTX JIT |"
  echo "|---|---|---|---|---|---|---|"
} >"$R"
fails=0
for m in mlp bert_layer gpt_layer resnet_block vit_patch unet_block; do
  D=$W/g/$m
  for v in fp32 fp16; do
    fl=(); tol=1e-4
    [ $v = fp16 ] && fl=(--precision=fp16 --fusion-aggressiveness=3) && tol=1e-2
    M=$W/$m-$v.drkm
    if ! "$BIN/drkc" "$D/model.onnx" --target=sm_90 "${fl[@]}" --shapes-from="$D/test_data_set_0" -o "$M" >"$W/$m-$v.compile" 2>&1; then
      echo "| $m | $v | compile failed: $(tail -1 "$W/$m-$v.compile" | cut -c1-120) | | | | |" >>"$R"; fails=$((fails + 1)); continue
    fi
    "$BIN/drkrun" "$M" --list >"$W/$m-$v.list" 2>&1
    kf=$(grep -oE '^  fallback module .* ([0-9]+) kernels' "$W/$m-$v.list" | grep -oE '[0-9]+ kernels' | cut -d' ' -f1)
    km=$(grep -oE '^  arena .* ([0-9]+) kernels' "$W/$m-$v.list" | grep -oE '[0-9]+ kernels' | cut -d' ' -f1)
    row="| $m | $v | $km / ${kf:-none} |"
    for mode in main main-jit fallback fallback-jit; do
      env=(DRK_VARIANT=main); case $mode in
        main-jit) env=(DRK_VARIANT=main DRK_CUDA_JIT=1) ;; fallback) env=(DRK_VARIANT=fallback) ;;
        fallback-jit) env=(DRK_VARIANT=fallback DRK_CUDA_JIT=1) ;; esac
      O=$W/o-$m-$v-$mode; rm -rf "$O"
      env "${env[@]}" "$BIN/drkrun" "$M" --input-dir "$D/test_data_set_0" --output-dir "$O" --iters 50 --warmup 10 >"$O.log" 2>&1
      rc=$?
      lat=$(grep "^resident" "$O.log" | grep -oE "median [0-9.]+" | cut -d' ' -f2)
      plan=ok
      case $mode in fallback*) grep -q "running the module's fallback plan: targets sm_90" "$O.log" || plan="not the fallback plan" ;; esac
      err=$(python3 "$SRC/tests/models/compare_outputs.py" "$D/test_data_set_0" "$O" --tol-f32 "$tol" 2>&1)
      crc=$?
      worst=$(grep -oE "rel_err [0-9.e+-]+" <<<"$err" | cut -d' ' -f2 | sort -g | tail -1)
      if [ $rc != 0 ] || [ $crc != 0 ] || [ "$plan" != ok ]; then
        fails=$((fails + 1)); row="$row FAIL (rc $rc, $plan, check: $(tail -1 <<<"$err" | cut -c1-80)) |"
        echo "== $m $v $mode"; tail -5 "$O.log"; echo "$err" | tail -3
      else
        row="$row ${lat:-?} ms, err ${worst:-ok} |"
      fi
    done
    echo "$row" >>"$R"
  done
done
echo >>"$R"; echo "$fails failure(s)" >>"$R"
cat "$R"
[ $fails = 0 ]
