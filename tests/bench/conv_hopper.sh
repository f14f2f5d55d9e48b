#!/usr/bin/env bash
# The sm_90a implicit-GEMM convolution (TMA + mbarrier + wgmma, lower_matmul.c's conv form, the
# default on sm_90a since device call 36; --schedule=conv.hopper=0 pins mma_sync) on an H200:
# correctness first, then speed against cuDNN and torch.compile.
#
#   DRKC=... DRKRUN=... tests/bench/conv_hopper.sh OUTDIR      (about 5 minutes: run it under
#   `timeout -k 5 570`; the torch.compile timings come last, after a first table.txt, so a
#   run cut short keeps the rest)
#
# 0. export (torch.onnx.export, fp32 NCHW, random weights, BatchNorm calibrated): the single
#    convs conv3x3 (N64 C256 H56 K256), conv3x3_14 (the same at H14), stem (ResNet-50's
#    N64 C3 H224 K64 7x7 s2 p3) and torchvision ResNet-50 b1/b64, RegNet-Y-400MF b1/b32,
#    ConvNeXt-T b1/b32.
# 1. check: `drkc run --device=cuda --check` (GPU against the CPU interpreter, rel L2 <= 1e-2
#    for f16/bf16) on tests/lower/hopper/conv_hopper*.drkg at the default schedule and under
#    pinned ones (the old default BN 128 staged, BN 256, no staging, 1x64 and 2x2 windows,
#    split-K 2), and on the b1 models (fp16 flags) by default; ResNet-50 b1 also with
#    conv.hopper=0: the two errors should be alike (random-weight ResNet-50 in fp16 is itself
#    ~5e-3 off). The default now pads the stem's C = 3 to 8 (layout pass) so the stem runs on
#    the TMA kernel: ResNet-50 b1's check covers it.
# 2. time: drkrun --profile of the single convs and the models, each by default ("hopper")
#    and with conv.hopper=0 ("mma_sync"); conv3x3 also under the old default (BN 128 staged:
#    the new default there is BN 256 unstaged). Which kernel each ResNet-50 b64 conv got, and
#    why the ones left on mma_sync stayed there (--report).
# 3. peers: cuDNN through torch (fp16, channels_last, cudnn.benchmark) on the single convs
#    and each ResNet-50 b64 conv; whole models in torch eager (fp16, channels_last) and, last,
#    torch.compile(mode="reduce-overhead") for ResNet-50 b64 and ConvNeXt-T b32
#    (TORCH_COMPILE="..." changes the list). OUTDIR/table.txt: TFLOP/s and ratios.
# Every drkc/drkrun/python call runs under `timeout`; logs are OUTDIR/*.log.
set -uo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${1:?usage: DRKC=... DRKRUN=... conv_hopper.sh OUTDIR}
: "${DRKC:?set DRKC to the drkc binary}" "${DRKRUN:?set DRKRUN to the drkrun binary}"
mkdir -p "$OUT"; WORK=$OUT/work; mkdir -p "$WORK"
FLAGS="--target=sm_90a --precision=fp16 --fusion-aggressiveness=3"
PY=${PYTHON:-python3}
SINGLES="conv3x3 conv3x3_14 stem"
MODELS="resnet50_b64 resnet50_b1 regnet_y_400mf_b32 regnet_y_400mf_b1 convnext_tiny_b32 convnext_tiny_b1"
TORCH_COMPILE=${TORCH_COMPILE:-"resnet50_b64 convnext_tiny_b32"}
T0=$SECONDS
say() { echo "[$((SECONDS - T0)) s] $*"; }
export DRKC DRKRUN FLAGS WORK OUT

say "== 0. export (torch.onnx.export)"
timeout 240 $PY "$SRC/tests/bench/conv_hopper.py" export "$WORK" >"$OUT/export.log" 2>&1 || { echo "export failed:"; tail -5 "$OUT/export.log"; }
grep -E "failed|exported" "$OUT/export.log" | tail -4

say "== 1. correctness (GPU vs interpreter)"
for g in "$SRC"/tests/lower/hopper/conv_hopper*.drkg; do
  n=$(basename "$g" .drkg)
  pins='"" conv.hopper=0 mm.tile_n=128,mm.staged=1 mm.tile_n=256,mm.stages=3 mm.staged=0 conv.tile_h=1,conv.tile_w=64 conv.tile_h=2,conv.tile_w=2 mm.split_k=2'
  [ "$n" = conv_hopper ] || pins='"" mm.tile_n=256,mm.staged=0'
  for pin in $pins; do
    pin=${pin//\"/}
    log=$OUT/check-$n${pin:+-}${pin//[=,.]/_}.log
    timeout 120 "$DRKC" run "$g" --device=cuda --check --target=sm_90a ${pin:+--schedule=$pin} >"$log" 2>&1
    rc=$?
    echo "$n ${pin:-default}: rc=$rc $(grep -c PASS "$log") PASS $(grep -c FAIL "$log") FAIL"
    grep FAIL "$log" | head -3
  done
done
# the b1 models in parallel (each check runs the CPU interpreter)
check_model() { # model knob
  local log=$OUT/check-$1${2:+-}${2//[=,.]/_}.log
  timeout 300 "$DRKC" run "$WORK/$1.onnx" --device=cuda --check $FLAGS ${2:+--schedule=$2} >"$log" 2>&1
  echo "$1 fp16 ${2:-default}: rc=$? $(grep -E 'PASS|FAIL' "$log" | head -2 | tr '\n' ' ')"
}
check_model resnet50_b1 "" >"$OUT/c1" & check_model resnet50_b1 conv.hopper=0 >"$OUT/c2" &
check_model regnet_y_400mf_b1 "" >"$OUT/c3" & check_model convnext_tiny_b1 "" >"$OUT/c4" &
wait
cat "$OUT"/c[1-4]

say "== 2. compile (in parallel) and profile"
compile() { # model form schedule...
  local m=$1 f=$2; shift 2
  timeout 300 "$DRKC" "$WORK/$m.onnx" $FLAGS "$@" --report -o "$WORK/$m-$f.drkm" >"$OUT/compile-$m-$f.log" 2>&1 ||
    echo "compile $m $f failed: $(tail -1 "$OUT/compile-$m-$f.log")"
}
export -f compile
{
  for m in $SINGLES $MODELS; do echo "$m hopper"; echo "$m mma_sync --schedule=conv.hopper=0"; done
  echo "conv3x3 bn128 --schedule=mm.tile_n=128,mm.staged=1"
} | xargs -P 12 -L 1 bash -c 'compile "$@"' _
for m in $SINGLES conv3x3:bn128 $MODELS; do
  for f in hopper mma_sync; do
    case $m in *:*) f=${m#*:}; m=${m%%:*};; esac
    [ -f "$WORK/$m-$f.drkm" ] || continue
    timeout 120 "$DRKRUN" "$WORK/$m-$f.drkm" --warmup 5 --iters 30 --profile >"$OUT/profile-$m-$f.log" 2>&1 ||
      { echo "drkrun $m $f failed"; tail -3 "$OUT/profile-$m-$f.log"; }
    [ "$f" = bn128 ] && break
  done
done
timeout 120 "$DRKC" "$WORK/resnet50_b64.onnx" $FLAGS --emit=schedules -o "$OUT/schedules-resnet50_b64.txt" >/dev/null 2>&1
echo "ResNet-50 b64 kernels by kind (default): $(grep '^k' "$OUT/schedules-resnet50_b64.txt" | awk '{print $3}' | sort | uniq -c | tr '\n' ' ')"
echo "ResNet-50 b64 conv_ws schedules: $(grep ' conv_ws ' "$OUT/schedules-resnet50_b64.txt" | grep -o 'mm.tile_n=[0-9]* .*mm.staged=[01]' | sed 's/ mm.split_k=[0-9]* mm.stages=[0-9]*//' | sort | uniq -c | tr '\n' ';')"
for m in resnet50_b64 regnet_y_400mf_b32 convnext_tiny_b32; do
  echo "$m convs left on mma_sync (default), by reason:"
  grep -h "report: k[0-9]*_Conv" "$OUT/compile-$m-hopper.log" | sed 's/^report: k[0-9]*_[^:]*: //' | sort | uniq -c | sort -nr | head -4
done

say "== 3. cuDNN (torch) on the same conv shapes; torch eager on the models"
timeout 120 $PY "$SRC/tests/bench/conv_hopper.py" cudnn "$WORK" "$OUT" 2>&1 | tail -2
for m in $MODELS; do
  timeout 90 $PY "$SRC/tests/bench/conv_hopper.py" torch "$WORK" "$OUT" "$m" eager 2>&1 | grep -E "^torch|Error" | tail -1
done
say "== table (before torch.compile)"
$PY "$SRC/tests/bench/conv_hopper.py" table "$WORK" "$OUT" | tee "$OUT/table.txt"
say "== torch.compile(mode=reduce-overhead): $TORCH_COMPILE"
for m in $TORCH_COMPILE; do
  timeout 150 $PY "$SRC/tests/bench/conv_hopper.py" torch "$WORK" "$OUT" "$m" reduce-overhead 2>&1 | grep -E "^torch|Error" | tail -1
done
say "== table"
$PY "$SRC/tests/bench/conv_hopper.py" table "$WORK" "$OUT" | tee "$OUT/table.txt"
say "done"
