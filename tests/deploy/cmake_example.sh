#!/usr/bin/env bash
# Install and find (docs/deploy.md): `cmake --install` into a fresh prefix puts drkc, drkrun,
# libdrkrt.{a,so}, drk/drkrt.h, the CMake package and drkrt.pc there; examples/cmake builds
# against it with find_package(drkc) + drkc_add_model() (drkc runs at build time), its app runs
# to the "no GPU" status, a second build does nothing, touching the model recompiles it; and
# an app built with pkg-config's flags alone links and runs.
# usage: cmake_example.sh CMAKE BUILD_DIR SRC_DIR WORK_DIR [CC]
set -u
CMAKE=$1; BUILD=$2; SRC=$3; W=$4; CC=${5:-cc}
rm -rf "$W"; mkdir -p "$W"
fails=0
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1"; fails=$((fails + 1)); }
has() { # NAME FILE REGEX want(1|0)
  local n; n=$(grep -cE -- "$3" "$2")
  if { [ "$4" = 1 ] && [ "$n" -gt 0 ]; } || { [ "$4" = 0 ] && [ "$n" = 0 ]; }; then pass "$1: /$3/ x$n"
  else fail "$1: /$3/ matched $n line(s) in $2:"; sed 's/^/  | /' "$2" | head -20; fi
}
export DRK_CUDA_DRIVER=/nonexistent/libcuda.so.1 DRK_HIP_DRIVER=/nonexistent/libamdhip64.so
P=$W/prefix
if ! "$CMAKE" --install "$BUILD" --prefix "$P" >"$W/install.log" 2>&1; then
  fail "cmake --install"; sed 's/^/  | /' "$W/install.log"; echo "$fails failure(s)"; exit 1
fi
for f in bin/drkc bin/drkrun lib/libdrkrt.a lib/libdrkrt.so include/drk/drkrt.h lib/cmake/drkc/drkcConfig.cmake \
         lib/cmake/drkc/drkcConfigVersion.cmake lib/cmake/drkc/drkcTargets.cmake lib/cmake/drkc/drkcAddModel.cmake \
         lib/pkgconfig/drkrt.pc; do
  [ -e "$P/$f" ] && pass "installed $f" || fail "not installed: $f"
done
"$P/bin/drkc" --version >"$W/version.txt" 2>&1 && has installed.drkc "$W/version.txt" '^drkc [0-9]' 1 || fail "installed drkc does not run"

# examples/cmake against the prefix; the model is a copy, so the test can touch it
cp "$SRC/examples/mlp/model.onnx" "$W/model.onnx"
E=$W/example
if "$CMAKE" -S "$SRC/examples/cmake" -B "$E" -DCMAKE_PREFIX_PATH="$P" -DMODEL="$W/model.onnx" -DCMAKE_C_COMPILER="$CC" \
     >"$W/configure.log" 2>&1 && "$CMAKE" --build "$E" >"$W/build1.log" 2>&1; then
  pass "examples/cmake configures and builds"
  has build1.drkc "$W/build1.log" 'drkc: .*model.onnx -> model.o, model.h \(sm_90a, host x86_64-linux-gnu\)' 1
  "$E/classify" >"$W/run.out" 2>"$W/run.err"; rc=$?
  [ "$rc" = 3 ] && pass "classify: exit 3 (no GPU)" || { fail "classify: exit $rc, want 3"; cat "$W/run.out" "$W/run.err"; }
  has run.shapes "$W/run.out" "^input 'input' float32 \[1, 784\], output 'logits' float32 \[1, 10\]$" 1
  has run.status "$W/run.err" '^app: no GPU: starting the model' 1
  readelf -d "$E/classify" | grep NEEDED >"$W/needed.txt"
  has classify.libc_only "$W/needed.txt" 'libdrkrt|libstdc|libLLVM' 0
  "$CMAKE" --build "$E" >"$W/build2.log" 2>&1
  has build2.nothing "$W/build2.log" 'drkc: ' 0
  sleep 1; touch "$W/model.onnx"
  "$CMAKE" --build "$E" >"$W/build3.log" 2>&1
  has build3.recompiles "$W/build3.log" 'drkc: .*model.onnx -> model.o' 1
else
  fail "examples/cmake"; sed 's/^/  | /' "$W/configure.log" "$W/build1.log" 2>/dev/null | tail -30
fi

# pkg-config: the flags of drkrt.pc are all an app needs
if command -v pkg-config >/dev/null; then
  (cd "$W" && "$P/bin/drkc" model.onnx --target=sm_90 -c -o model.o -q) 2>"$W/pc_drkc.log"
  flags=$(PKG_CONFIG_PATH=$P/lib/pkgconfig pkg-config --cflags --libs --static drkrt)
  echo "$flags" >"$W/pkgconfig.txt"
  has pkgconfig.flags "$W/pkgconfig.txt" "^-I$P/lib/pkgconfig/../../include -L$P/lib/pkgconfig/../../lib -ldrkrt -ldl" 1
  if "$CC" -I"$W" "$SRC/examples/c-app/app.c" "$W/model.o" $flags -Wl,-rpath,"$P/lib" -o "$W/app_pc" 2>"$W/pc_cc.log"; then
    "$W/app_pc" >"$W/pc.out" 2>&1; rc=$?
    [ "$rc" = 3 ] && pass "pkg-config app: exit 3 (no GPU)" || { fail "pkg-config app: exit $rc"; cat "$W/pc.out"; }
  else fail "pkg-config app does not build"; sed 's/^/  | /' "$W/pc_cc.log"; fi
else
  echo "SKIP pkg-config part: pkg-config not found (Debian: pkgconf; tools/setup.sh installs it)"
fi
echo "$fails failure(s)"
[ "$fails" = 0 ]
