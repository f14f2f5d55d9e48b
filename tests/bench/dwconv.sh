#!/usr/bin/env bash
# The direct depthwise conv kernel (lower/lower_dwconv.c) on an H200: correctness first, then
# speed against torch (cuDNN and torch.compile) and HBM, then MobileNetV3-Large and
# EfficientNet-B0 end to end.
#
#   DRKC=... DRKRUN=... tests/bench/dwconv.sh OUTDIR        (about 5 minutes; every step has a timeout)
#
# 1. check: `drkc run --device=cuda --check` (GPU against the CPU interpreter; rel L2 <= 1e-2
#    f16, 1e-5 f32) of tests/lower/dw/*.drkg (NHWC f16, NCHW f32, fused epilogues) at the
#    heuristic and one pinned schedule, at --target=sm_90a; then of two single-conv models
#    (fp16, --layout=nhwc) and of both networks at b1 (fp16 flags).
# 2. time: the depthwise shapes of MobileNetV3-L, EfficientNet-B0 and ConvNeXt-T (dwconv.py
#    SHAPES, b32 and some b1) as single-conv ONNX models: drkrun --profile's conv kernel, NHWC
#    fp16 (--layout=nhwc: the kernel the networks run) for all, NCHW f32 (default flags) for
#    six; a pin sweep (dw.pix 2 and 8, dw.warps 8 and 2) on two shapes; cuDNN (fp16 channels_last,
#    cudnn.benchmark) on the same shapes in the same run, torch.compile on two -> GB/s vs 4.2 TB/s;
#    three small-group convs (group widths 2, 4, 8) on the direct kernel and on the grouped
#    implicit GEMM (dw.direct=0), which decides whether dw.direct's default should cover them.
# 3. networks: torchvision MobileNetV3-Large and EfficientNet-B0 at b1 and b32 (random
#    weights, calibrated BatchNorm; torch.onnx.export): drkrun resident median of the fp16
#    build (--target=sm_90a --precision=fp16 --fusion-aggressiveness=3) at b1 and b32 and of the
#    f32 build (--target=sm_90a) for MobileNetV3 b32 and EfficientNet b1, vs torch fp16 eager and torch.compile(mode="reduce-overhead") (compile
#    for MobileNetV3 b32 and EfficientNet b1 only: the issue's two numbers; time).
# OUTDIR/table.txt is the summary; every drkc/drkrun/python call runs under `timeout`; logs
# are OUTDIR/*.log.
set -uo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${1:?usage: DRKC=... DRKRUN=... dwconv.sh OUTDIR}
: "${DRKC:?set DRKC to the drkc binary}" "${DRKRUN:?set DRKRUN to the drkrun binary}"
mkdir -p "$OUT"; WORK=$OUT/work; mkdir -p "$WORK"
F16="--target=sm_90a --precision=fp16 --fusion-aggressiveness=3"
PY=${PYTHON:-python3}
T0=$SECONDS
say() { echo "[$((SECONDS - T0)) s] $*"; }

say "== exports (background: single convs with onnx, networks with torch.onnx.export)"
timeout 60 $PY "$SRC/tests/bench/dwconv.py" export "$WORK" >"$OUT/export.log" 2>&1
tail -1 "$OUT/export.log"
# the networks' exports and compiles (CPU) overlap the GPU work below
netbuild() {
  timeout 120 $PY "$SRC/tests/bench/dwconv.py" models "$WORK" >"$OUT/export-models.log" 2>&1
  for k in mobilenet_v3_large_b1 mobilenet_v3_large_b32 efficientnet_b0_b1 efficientnet_b0_b32; do
    timeout 60 "$DRKC" "$WORK/$k.onnx" $F16 --report -o "$WORK/$k-fp16.drkm" >"$OUT/compile-$k-fp16.log" 2>&1
  done
  for k in mobilenet_v3_large_b32 efficientnet_b0_b1; do
    timeout 60 "$DRKC" "$WORK/$k.onnx" --target=sm_90a -o "$WORK/$k-f32.drkm" >"$OUT/compile-$k-f32.log" 2>&1
  done
  for net in mobilenet_v3_large efficientnet_b0; do
    timeout 60 "$DRKC" "$WORK/${net}_b32.onnx" $F16 --dump-after=layout --emit=graph -o /dev/null 2>&1 |
      grep '^// layout:' >"$OUT/layout-${net}_b32.txt"
  done
}
NET_T0=$SECONDS
netbuild &
EXPORT_PID=$!

say "== 1. correctness (GPU vs interpreter)"
for g in "$SRC"/tests/lower/dw/*.drkg; do
  n=$(basename "$g" .drkg)
  for pin in "" dw.pix=1,dw.ctile=8,dw.warps=2; do
    log=$OUT/check-$n${pin:+-${pin//[=,.]/_}}.log
    timeout 60 "$DRKC" run "$g" --device=cuda --check --target=sm_90a ${pin:+--schedule=$pin} >"$log" 2>&1
    echo "$n ${pin:-heuristic}: rc=$? $(grep -c PASS "$log") PASS $(grep -c FAIL "$log") FAIL"
    grep FAIL "$log" | head -2
  done
done
for m in mnv3_112x16_k3s1_b1 convnext_56x96_k7_b1; do
  log=$OUT/check-$m.log
  timeout 90 "$DRKC" run "$WORK/$m.onnx" --device=cuda --check $F16 --layout=nhwc >"$log" 2>&1
  echo "$m fp16 nhwc: rc=$? $(grep -E 'PASS|FAIL' "$log" | head -1)"
done

say "== 2. single convs: compile and profile"
prof() { # model form flags...
  local m=$1 f=$2; shift 2
  timeout 60 "$DRKC" "$WORK/$m.onnx" "$@" --emit=schedules -o "$OUT/schedules-$m-$f.txt" >/dev/null 2>&1
  timeout 60 "$DRKC" "$WORK/$m.onnx" "$@" -o "$WORK/$m-$f.drkm" >"$OUT/compile-$m-$f.log" 2>&1 ||
    { echo "compile $m $f failed: $(tail -1 "$OUT/compile-$m-$f.log")"; return 1; }
  timeout 60 "$DRKRUN" "$WORK/$m-$f.drkm" --warmup 5 --iters 20 --profile >"$OUT/profile-$m-$f.log" 2>&1 ||
    echo "drkrun $m $f failed: $(tail -1 "$OUT/profile-$m-$f.log")"
}
SHAPES=$($PY -c "import sys; sys.path.insert(0, '$SRC/tests/bench'); import dwconv; print(' '.join(dwconv.SHAPES))")
for m in $SHAPES; do prof "$m" nhwc $F16 --layout=nhwc; done
for m in mnv3_112x16_k3s1_b32 mnv3_56x72_k5s2_b32 mnv3_14x480_k3s1_b32 effb0_56x144_k3s1_b32 convnext_56x96_k7_b32 convnext_7x768_k7_b32; do
  prof "$m" nchw32 --target=sm_90a
done
say "pin sweep (conv kernel ms; heuristic first)"
for m in mnv3_112x16_k3s1_b32 convnext_56x96_k7_b32; do
  line="$m: heuristic $(grep -E 'Conv' "$OUT/profile-$m-nhwc.log" 2>/dev/null | awk '{print $2}' | head -1) ($(grep -o 'dw.pix=[0-9]* dw.ctile=[0-9]* dw.warps=[0-9]*' "$OUT/schedules-$m-nhwc.txt" 2>/dev/null))"
  for pin in dw.pix=2 dw.pix=8 dw.warps=8 dw.warps=2; do
    f=pin-${pin//[=,.]/_}
    prof "$m" "$f" $F16 --layout=nhwc --schedule=$pin >/dev/null
    line="$line, $pin $(grep -E 'Conv' "$OUT/profile-$m-$f.log" 2>/dev/null | awk '{print $2}' | head -1)"
  done
  echo "$line"
done
say "small groups: direct kernel vs grouped implicit GEMM"
SMALLG=$($PY -c "import sys; sys.path.insert(0, '$SRC/tests/bench'); import dwconv; print(' '.join(dwconv.SMALLG))")
for m in $SMALLG; do
  prof "$m" nhwc $F16 --layout=nhwc
  prof "$m" gemm $F16 --layout=nhwc --schedule=dw.direct=0
done
# NCHW f32: lanes along the pixel groups; is register blocking (PW 4, lanes 16 bytes apart) or
# coalesced single columns (PW 1) better there?
m=mnv3_112x16_k3s1_b32
line="$m nchw32: heuristic $(grep -E 'Conv' "$OUT/profile-$m-nchw32.log" 2>/dev/null | awk '{print $2}' | head -1)"
for pin in dw.pix=1 dw.pix=2 dw.ctile=1; do
  f=nchw32-pin-${pin//[=,.]/_}
  prof "$m" "$f" --target=sm_90a --schedule=$pin >/dev/null
  line="$line, $pin $(grep -E 'Conv' "$OUT/profile-$m-$f.log" 2>/dev/null | awk '{print $2}' | head -1)"
done
echo "$line"

say "== torch on the same shapes (cuDNN eager; torch.compile on two)"
timeout 120 $PY "$SRC/tests/bench/dwconv.py" torch "$WORK" "$OUT" mnv3_14x480_k3s1_b32,convnext_56x96_k7_b32 >"$OUT/torch.log" 2>&1
tail -1 "$OUT/torch.log"

say "== 3. networks (waiting for the background exports and compiles)"
# at most 300 s after the exports began (each of its steps has a timeout of its own too)
while kill -0 $EXPORT_PID 2>/dev/null && [ $((SECONDS - NET_T0)) -lt 300 ]; do sleep 1; done
kill -0 $EXPORT_PID 2>/dev/null && { echo "network exports/compiles still running after 300 s: going on without them"; kill $EXPORT_PID; }
tail -1 "$OUT/export-models.log"
for net in mobilenet_v3_large efficientnet_b0; do
  for b in 1 32; do
    k=${net}_b$b
    for f in fp16 f32; do
      [ -f "$WORK/$k-$f.drkm" ] && timeout 60 "$DRKRUN" "$WORK/$k-$f.drkm" --warmup 10 --iters 50 >"$OUT/run-$k-$f.log" 2>&1
    done
    echo "$k: fp16 $(grep -o 'median [0-9.]* ms' "$OUT/run-$k-fp16.log" 2>/dev/null | head -1) (compile: $(tail -1 "$OUT/compile-$k-fp16.log" 2>/dev/null)), f32 $(grep -o 'median [0-9.]* ms' "$OUT/run-$k-f32.log" 2>/dev/null | head -1)"
  done
  echo "$net layout decisions: $(grep -c 'NHWC' "$OUT/layout-${net}_b32.txt") convs NHWC, $(grep -c ': NCHW' "$OUT/layout-${net}_b32.txt") NCHW, $(grep -c 'back to' "$OUT/layout-${net}_b32.txt") layout changes back"
  grep 'back to\|: NCHW' "$OUT/layout-${net}_b32.txt" | head -4
  log=$OUT/check-${net}_b1.log
  timeout 90 "$DRKC" run "$WORK/${net}_b1.onnx" --device=cuda --check $F16 >"$log" 2>&1
  echo "${net}_b1 fp16 check: rc=$? $(grep -E 'PASS|FAIL' "$log" | head -1)"
done
timeout 180 $PY "$SRC/tests/bench/dwconv.py" zoo "$OUT" mobilenet_v3_large_b32,efficientnet_b0_b1 >"$OUT/zoo.log" 2>&1
tail -1 "$OUT/zoo.log"

say "== table"
$PY "$SRC/tests/bench/dwconv.py" table "$WORK" "$OUT" | tee "$OUT/table.txt"
say "done"
