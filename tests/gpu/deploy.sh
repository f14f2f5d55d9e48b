#!/usr/bin/env bash
# On a GPU machine: the deployment path of docs/deploy.md gives what drkrun gives. For two
# models (examples/mlp, f32; tests/models resnet_block with --precision=fp16, convolutions on
# tensor cores, its object built with --weights=external so the app reads model.weights), at
# --target=sm_90 (= sm_90a kernels):
#   1. `drkc run --device=cuda --check` with the same flags: the GPU kernels against the CPU
#      interpreter (PASS/FAIL lines);
#   2. `drkc -o model.drkm` and `drkc -c -o model.o` (+ model.h) from the same flags;
#   3. examples/c-app/app.c built with cc, linking model.o and libdrkrt.a only;
#   4. one input (raw float32, fixed seed) through `drkrun model.drkm --input-dir` and through
#      the app; their outputs compared element by element (max |diff|, which should be 0: the
#      same kernels on the same bytes).
# Prints one line per model: "deploy MODEL: check PASS|FAIL, app vs drkrun max|diff| X over N
# values: SAME|DIFFERENT" and "deploy: N/2 models the same". Runs in about a minute; every
# command under `timeout`.
# usage: DRKC=... DRKRUN=... [LIBDRKRT=.../libdrkrt.a] [CC=cc] [PYTHON=python3] tests/gpu/deploy.sh OUTDIR
# LIBDRKRT defaults to libdrkrt.a next to DRKRUN (make_bundle.sh puts it there).
set -u
SRC=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${1:?usage: tests/gpu/deploy.sh OUTDIR}
DRKC=${DRKC:?set DRKC}; DRKRUN=${DRKRUN:?set DRKRUN}
LIBDRKRT=${LIBDRKRT:-$(dirname "$DRKRUN")/libdrkrt.a}
CC=${CC:-cc}; PY=${PYTHON:-python3}
mkdir -p "$OUT"
OUT=$(readlink -f "$OUT"); DRKC=$(readlink -f "$DRKC"); DRKRUN=$(readlink -f "$DRKRUN"); LIBDRKRT=$(readlink -f "$LIBDRKRT")
log() { echo "$*" | tee -a "$OUT/summary.txt"; }
for need in "$DRKC" "$DRKRUN" "$LIBDRKRT"; do [ -e "$need" ] || { log "deploy: missing $need"; exit 1; }; done
command -v "$CC" >/dev/null || { log "deploy: no C compiler ($CC); set CC"; exit 1; }
timeout 120 "$PY" "$SRC/tests/models/gen_models.py" "$OUT/models" --only resnet_block >"$OUT/gen.log" 2>&1 ||
  log "deploy: gen_models.py failed (see gen.log)"
same=0; n=0
for spec in "mlp|$SRC/examples/mlp/model.onnx||" "resnet_block|$OUT/models/resnet_block/model.onnx|--precision=fp16|--weights=external"; do
  IFS='|' read -r name model flags objflags <<<"$spec"
  d="$OUT/$name"; mkdir -p "$d"; n=$((n + 1))
  [ -f "$model" ] || { log "deploy $name: no model"; continue; }
  # 1. the GPU kernels against the interpreter
  timeout 180 "$DRKC" run "$model" --device=cuda --target=sm_90 $flags --check --seed 7 >"$d/check.log" 2>&1
  check=FAIL; grep -q PASS "$d/check.log" && ! grep -q FAIL "$d/check.log" && check=PASS
  # 2. module and object from the same flags (run in $d: -o names in the provenance match)
  (cd "$d" && timeout 180 "$DRKC" "$model" --target=sm_90 $flags -o model.drkm -q &&
     timeout 180 "$DRKC" "$model" --target=sm_90 $flags $objflags -c -o model.o -q) >"$d/drkc.log" 2>&1 ||
    { log "deploy $name: check $check, drkc failed: $(tail -n 3 "$d/drkc.log" | tr '\n' ' ')"; continue; }
  # 3. the app
  "$CC" -O2 -I"$SRC/runtime/include" -I"$d" "$SRC/examples/c-app/app.c" "$d/model.o" "$LIBDRKRT" -ldl -o "$d/app" \
    >"$d/cc.log" 2>&1 || { log "deploy $name: check $check, the app does not build: $(head -c 300 "$d/cc.log")"; continue; }
  # 4. one input through both
  mkdir -p "$d/in" "$d/out"
  "$PY" - "$d/model.h" "$d/in/input_0.bin" <<'PY'
import re, sys, numpy as np
h = open(sys.argv[1]).read()
numel = int(re.search(r"#define MODEL_INPUT_0_NUMEL (\d+)", h).group(1))
np.random.default_rng(7).standard_normal(numel).astype(np.float32).tofile(sys.argv[2])
PY
  timeout 120 "$DRKRUN" "$d/model.drkm" --input-dir "$d/in" --output-dir "$d/out" --warmup 1 --iters 3 >"$d/drkrun.log" 2>&1 ||
    { log "deploy $name: check $check, drkrun failed: $(tail -n 2 "$d/drkrun.log" | tr '\n' ' ')"; continue; }
  # (in $d: a model.weights of --weights=external is read from the current directory)
  (cd "$d" && timeout 120 ./app in/input_0.bin app_out.bin) >"$d/app.log" 2>&1 ||
    { log "deploy $name: check $check, the app failed (exit $?): $(tail -n 2 "$d/app.log" | tr '\n' ' ')"; continue; }
  cmp=$("$PY" - "$d/out" "$d/app_out.bin" <<'PY'
import glob, sys, numpy as np, onnx
from onnx import numpy_helper
pb = glob.glob(sys.argv[1] + "/output_0.pb")
ref = numpy_helper.to_array(onnx.load_tensor(pb[0])).astype(np.float32).ravel() if pb else \
      np.fromfile(sys.argv[1] + "/output_0.bin", dtype=np.float32)
app = np.fromfile(sys.argv[2], dtype=np.float32)
if app.size != ref.size:
    print(f"sizes differ: app {app.size}, drkrun {ref.size}: DIFFERENT")
else:
    diff = float(np.max(np.abs(app - ref))) if ref.size else 0.0
    ok = diff == 0.0 and np.all(np.isfinite(app))
    print(f"max|diff| {diff:.3g} over {ref.size} values: {'SAME' if ok else 'DIFFERENT'}")
PY
)
  log "deploy $name: check $check, app vs drkrun $cmp; app: $(grep '^top 1' "$d/app.log")"
  [ "$check" = PASS ] && [[ "$cmp" == *SAME ]] && same=$((same + 1))
done
log "deploy: $same/$n models the same (app linking model.o vs drkrun, both checked against the interpreter)"
[ "$same" = "$n" ]
