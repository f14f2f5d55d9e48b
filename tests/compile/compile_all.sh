#!/usr/bin/env bash
# Compiles every ONNX conformance case and every generated whole model for sm_87 and sm_90a
# (tile IR -> LLVM -> PTX -> ptxas -> cubins -> fat binary -> module) and checks that the
# module's fat binary lists a cubin for both archs. A case is skipped when drkc cannot import
# it (out of scope) or does not lower one of its ops for GPUs yet; the reason is printed.
# Any other compile error fails the test. Needs no GPU; needs ptxas.
# MODE ptx (the sanitizer build) stops at the PTX of both targets: every line of drkc's own code
# runs under the sanitizers, without ptxas's minutes of optimizing every case twice.
# usage: compile_all.sh DRKC DRKRUN MODELS_DIR WORK [MODE: module (default) | ptx]
set -u
DRKC=$1; DRKRUN=$2; MODELS=$3; W=$4; MODE=${5:-module}
rm -rf "$W"; mkdir -p "$W"
pass=0; fail=0; skip=0
for c in /usr/share/libonnx-testdata/data/{node,pytorch-converted,pytorch-operator,simple}/*/ "$MODELS"/*/; do
  c=${c%/}
  [ -f "$c/model.onnx" ] && [ -d "$c/test_data_set_0" ] || continue
  name=$(basename "$(dirname "$c")")/$(basename "$c")
  frz=()
  compile() { # the sm_87 + sm_90a module, or in ptx mode each target's PTX
    if [ "$MODE" = ptx ]; then
      "$DRKC" "$c/model.onnx" --target=sm_87 "$@" --emit=ptx -o "$W/m87.ptx" &&
      "$DRKC" "$c/model.onnx" --target=sm_90a "$@" --emit=ptx -o "$W/m90.ptx"
    else
      "$DRKC" "$c/model.onnx" --target=sm_87,sm_90a "$@" -o "$W/m.drkm"
    fi
  }
  if ! compile --shapes-from="$c/test_data_set_0" 2>"$W/err" &&
     ! { grep -Eq "must be a constant|freeze it|depends on data" "$W/err" && [ -n "${PYTHON:-}" ] &&
         mapfile -t frz < <("$PYTHON" "$(dirname "$0")/../gpu/freeze_args.py" "$c/model.onnx" "$c/test_data_set_0" -) &&
         [ ${#frz[@]} -gt 0 ] &&
         compile --shapes-from="$c/test_data_set_0" "${frz[@]}" 2>"$W/err"; }; then
    if grep -Eq "unsupported|not lowered|must be a constant|needs static shapes|scales must be" "$W/err"; then
      skip=$((skip + 1)); echo "SKIP $name: $(grep -m1 error "$W/err" | sed 's/.*error: //' | head -c 120)"
    else
      fail=$((fail + 1)); echo "FAIL $name: $(grep -m1 error "$W/err" | head -c 300)"
    fi
    continue
  fi
  if [ "$MODE" = ptx ]; then
    if grep -q "^\.target sm_87" "$W/m87.ptx" && grep -q "^\.target sm_90a" "$W/m90.ptx"; then pass=$((pass + 1))
    else fail=$((fail + 1)); echo "FAIL $name: PTX without the .target line"; fi
    continue
  fi
  "$DRKRUN" "$W/m.drkm" --list >"$W/list" 2>&1
  if grep -q "ELF sm_87," "$W/list" && grep -q "ELF sm_90a," "$W/list" && grep -q "PTX sm_87," "$W/list"; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1)); echo "FAIL $name: fat binary does not list sm_87 and sm_90a cubins:"; sed 's/^/  | /' "$W/list"
  fi
done
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" = 0 ] && [ "$pass" -gt 0 ]
