#!/usr/bin/env bash
# The sm_90a implicit-GEMM convolution (TMA + mbarrier + wgmma, lower_matmul.c's conv form,
# behind --schedule=conv.hopper=1) on an H200: correctness first, then speed against cuDNN.
#
#   DRKC=... DRKRUN=... tests/bench/conv_hopper.sh OUTDIR        (about 5 minutes)
#
# 1. check: `drkc run --device=cuda --check` (GPU against the CPU interpreter, rel L2 <= 1e-2
#    for f16/bf16) on tests/lower/hopper/*.drkg with conv.hopper=1 at the default schedule and
#    under pinned ones (BN 128/256, no staging, 1x64 and 2x2 windows, split-K 2), and on
#    torchvision ResNet-50 b1 (torch.onnx.export, fp16 flags) with conv.hopper=0 and =1: the
#    two errors should be alike (random-weight ResNet-50 in fp16 is itself ~1e-2 off,
#    tests/zoo/README.md).
# 2. time: drkrun --profile of conv 3x3 N64 C256 H56 K256 (and H14, ResNet-50's layer 3), 1x1
#    N64 C64 H56 K64 (ONNX Conv, fp16 flags) and ResNet-50 b64, each with conv.hopper=0
#    (mma_sync) and =1, against cuDNN through torch (fp16, channels_last, cudnn.benchmark, same
#    shapes) in the same run: TFLOP/s and ratios (OUTDIR/table.txt); the 3x3s also under
#    other windows and BN. 1x1 stride-1 convs are MatMuls after the layout pass (the sm_90a
#    matmul), so conv1x1 does not depend on the knob.
# Every drkc/drkrun call runs under `timeout`; logs are OUTDIR/*.log.
set -uo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${1:?usage: DRKC=... DRKRUN=... conv_hopper.sh OUTDIR}
: "${DRKC:?set DRKC to the drkc binary}" "${DRKRUN:?set DRKRUN to the drkrun binary}"
mkdir -p "$OUT"; WORK=$OUT/work; mkdir -p "$WORK"
FLAGS="--target=sm_90a --precision=fp16 --fusion-aggressiveness=3"
PY=${PYTHON:-python3}
T0=$SECONDS
say() { echo "[$((SECONDS - T0)) s] $*"; }

say "== 1. correctness (GPU vs interpreter)"
for g in "$SRC"/tests/lower/hopper/conv_hopper*.drkg; do
  n=$(basename "$g" .drkg)
  pins='"" ,mm.tile_n=128 ,mm.tile_n=256,mm.stages=3 ,mm.staged=0 ,conv.tile_h=1,conv.tile_w=64 ,conv.tile_h=2,conv.tile_w=2 ,mm.split_k=2'
  [ "$n" = conv_hopper ] || pins='""'
  for pin in $pins; do
    pin=${pin//\"/}
    log=$OUT/check-$n${pin//[=,.]/_}.log
    timeout 120 "$DRKC" run "$g" --device=cuda --check --target=sm_90a --schedule=conv.hopper=1$pin >"$log" 2>&1
    rc=$?
    echo "$n conv.hopper=1$pin: rc=$rc $(grep -c PASS "$log") PASS $(grep -c FAIL "$log") FAIL"
    grep FAIL "$log" | head -3
  done
done

say "== export (torch.onnx.export)"
timeout 300 $PY "$SRC/tests/bench/conv_hopper.py" export "$WORK" >"$OUT/export.log" 2>&1 || { echo "export failed:"; tail -5 "$OUT/export.log"; }
tail -1 "$OUT/export.log"

for k in 0 1; do
  log=$OUT/check-resnet50_b1-hopper$k.log
  timeout 300 "$DRKC" run "$WORK/resnet50_b1.onnx" --device=cuda --check $FLAGS --schedule=conv.hopper=$k >"$log" 2>&1
  echo "ResNet-50 b1 fp16 conv.hopper=$k: rc=$? $(grep -E 'PASS|FAIL' "$log" | head -2 | tr '\n' ' ')"
done

say "== 2. compile and profile"
build() { # model form knob
  timeout 300 "$DRKC" "$WORK/$1.onnx" $FLAGS --schedule=conv.hopper=$3 --report -o "$WORK/$1-$2.drkm" >"$OUT/compile-$1-$2.log" 2>&1 ||
    { echo "compile $1 $2 failed"; tail -3 "$OUT/compile-$1-$2.log"; return 1; }
  timeout 120 "$DRKRUN" "$WORK/$1-$2.drkm" --warmup 5 --iters 30 --profile >"$OUT/profile-$1-$2.log" 2>&1 ||
    { echo "drkrun $1 $2 failed"; tail -3 "$OUT/profile-$1-$2.log"; }
}
for m in conv3x3 conv3x3_14 conv1x1 resnet50_b64; do
  build "$m" mma_sync 0
  build "$m" hopper 1
done
# the output window and BN (heuristic at 56 x 56: 2 images of 8 x 8; at 14 x 14: 32 images
# of 2 x 2, boxes of 256-byte runs: are narrow boxes slow?)
sweep() { # model pins...
  local m=$1; shift
  for win in "$@"; do
    f=${win//[=,.]/_}
    timeout 120 "$DRKC" "$WORK/$m.onnx" $FLAGS --schedule=conv.hopper=1,$win -o "$WORK/$m-$f.drkm" >"$OUT/compile-$m-$f.log" 2>&1 &&
      timeout 60 "$DRKRUN" "$WORK/$m-$f.drkm" --warmup 5 --iters 30 --profile >"$OUT/profile-$m-$f.log" 2>&1
    echo "$m $win: $(grep -E '^ +[0-9]+ ' "$OUT/profile-$m-$f.log" 2>/dev/null | sort -k2 -nr | head -1)"
  done
}
sweep conv3x3 conv.tile_h=2,conv.tile_w=64 conv.tile_h=8,conv.tile_w=16 conv.tile_h=4,conv.tile_w=32 mm.tile_n=128 mm.tile_n=256,mm.staged=0
sweep conv3x3_14 conv.tile_h=8,conv.tile_w=8 conv.tile_h=4,conv.tile_w=4 conv.tile_h=16,conv.tile_w=8
timeout 120 "$DRKC" "$WORK/resnet50_b64.onnx" $FLAGS --schedule=conv.hopper=1 --emit=schedules -o "$OUT/schedules-resnet50_b64-hopper.txt" >/dev/null 2>&1
echo "ResNet-50 b64 kernels by kind with conv.hopper=1: $(grep '^k' "$OUT/schedules-resnet50_b64-hopper.txt" | awk '{print $3}' | sort | uniq -c | tr '\n' ' ')"
echo "ResNet-50 b64 convs left on mma_sync with conv.hopper=1, by reason:"
grep -h "report: k[0-9]*_" "$OUT"/compile-resnet50_b64-hopper.log | sed 's/^report: k[0-9]*_[^:]*: //' | sort | uniq -c | sort -nr | head -5

say "== cuDNN (torch) on the same shapes"
timeout 300 $PY "$SRC/tests/bench/conv_hopper.py" cudnn "$WORK" "$OUT" 2>&1 | tail -2

say "== table"
$PY "$SRC/tests/bench/conv_hopper.py" table "$WORK" "$OUT" | tee "$OUT/table.txt"
say "done"
