#!/usr/bin/env bash
# Jetson Orin from x86-64 (docs/deploy.md): libdrkrt and drkrun cross-built for aarch64 with
# Debian's gcc-aarch64-linux-gnu (DRK_RUNTIME_ONLY + cmake/aarch64-linux-gnu.cmake) and
# installed; examples/jetson cross-built against that install with drkc_add_model(... sm_87
# HOST aarch64-linux-gnu); the aarch64 binaries run under qemu-user up to the "no driver"
# status; cuobjdump lists the sm_87 cubin and the PTX inside the aarch64 object, the PTX is ISA
# <= 8.5 and the cubin is exactly what the CUDA 12.x ptxas makes of it (not CUDA 13's, which
# JetPack 6 cannot load). Parts whose tool is missing are skipped with a SKIP line; all of them
# missing skips the test (exit 77).
# usage: jetson.sh CMAKE DRKC SRC_DIR WORK_DIR CUOBJDUMP PTXAS_CUDA12
set -u
CMAKE=$1; DRKC=$(readlink -f "$2"); SRC=$(readlink -f "$3"); W=$4; CUOBJDUMP=${5:-}; PTXAS12=${6:-}
rm -rf "$W"; mkdir -p "$W"
fails=0; ran=0
pass() { echo "PASS $1"; ran=$((ran + 1)); }
fail() { echo "FAIL $1"; fails=$((fails + 1)); }
has() { # NAME FILE REGEX want(1|0)
  local n; n=$(grep -cE -- "$3" "$2")
  if { [ "$4" = 1 ] && [ "$n" -gt 0 ]; } || { [ "$4" = 0 ] && [ "$n" = 0 ]; }; then pass "$1: /$3/ x$n"
  else fail "$1: /$3/ matched $n line(s) in $2:"; sed 's/^/  | /' "$2" | head -20; fi
}
QEMU=$(command -v qemu-aarch64 || command -v qemu-aarch64-static || true)
SYSROOT=/usr/aarch64-linux-gnu
TC=$SRC/cmake/aarch64-linux-gnu.cmake

# 1. the aarch64 object from this machine's drkc (needs a CUDA 12.x ptxas for sm_87)
if (cd "$W" && "$DRKC" "$SRC/examples/mlp/model.onnx" --target=sm_87 -c --host=aarch64-linux-gnu -o model.o --report) \
     >"$W/drkc.log" 2>&1; then
  pass "drkc --target=sm_87 -c --host=aarch64-linux-gnu"
  has drkc.ptxas "$W/drkc.log" '^report: sm_87 cubins by ptxas .* \(CUDA 12\.[0-9]+\)$' 1
  readelf -hW "$W/model.o" >"$W/model.readelf"; has obj.machine "$W/model.readelf" 'Machine: +AArch64' 1
  if [ -n "$CUOBJDUMP" ] && [ -x "$CUOBJDUMP" ]; then
    "$CUOBJDUMP" --list-elf --list-ptx "$W/model.o" >"$W/cuobjdump.txt" 2>&1
    has cuobjdump.elf "$W/cuobjdump.txt" '^ELF file +1: .*\.sm_87\.cubin$' 1
    has cuobjdump.ptx "$W/cuobjdump.txt" '^PTX file +1: .*\.sm_87\.ptx$' 1
    mkdir -p "$W/x" && (cd "$W/x" && "$CUOBJDUMP" -xelf all ../model.o && "$CUOBJDUMP" -xptx all ../model.o) >/dev/null 2>&1
    ptx=$(ls "$W"/x/*.ptx 2>/dev/null | head -1); cubin=$(ls "$W"/x/*.cubin 2>/dev/null | head -1)
    ver=$(grep -m1 '^\.version' "$ptx" 2>/dev/null | awk '{print $2}')
    echo "PTX .version $ver" >"$W/ptxver.txt"
    if [ -n "$ver" ] && awk -v v="$ver" 'BEGIN { split(v, p, "."); exit !(p[1] * 10 + p[2] <= 85) }'; then
      pass "PTX ISA $ver <= 8.5 (a CUDA 12.6 driver JITs it)"
    else fail "PTX ISA '$ver' (want <= 8.5)"; fi
    if [ -n "$PTXAS12" ] && [ -x "$PTXAS12" ] && [ -n "$ptx" ]; then
      "$PTXAS12" -arch=sm_87 -O3 --split-compile=0 "$ptx" -o "$W/x/ref12.cubin" 2>"$W/x/ref12.log" &&
        cmp -s "$W/x/ref12.cubin" "$cubin" && pass "the cubin is the CUDA 12.x ptxas's" ||
        fail "the cubin differs from what $PTXAS12 makes of the PTX"
    fi
  else
    echo "SKIP cuobjdump parts: no cuobjdump (PyPI nvidia-cuda-cuobjdump; tools/setup.sh)"
  fi
else
  if grep -q 'needs a CUDA 12.x ptxas' "$W/drkc.log"; then
    echo "SKIP object parts: $(grep -m1 'needs a CUDA' "$W/drkc.log")"
  else fail "drkc sm_87 aarch64 object"; sed 's/^/  | /' "$W/drkc.log"; fi
fi

# 2. libdrkrt + drkrun for aarch64, installed into a prefix
if ! command -v aarch64-linux-gnu-gcc >/dev/null; then
  echo "SKIP cross builds: no aarch64-linux-gnu-gcc (Debian gcc-aarch64-linux-gnu; tools/setup.sh)"
else
  B=$W/build-aarch64; P=$W/prefix-aarch64
  if "$CMAKE" -S "$SRC" -B "$B" -DDRK_RUNTIME_ONLY=ON -DCMAKE_TOOLCHAIN_FILE="$TC" -DCMAKE_BUILD_TYPE=Release >"$W/rt_cfg.log" 2>&1 &&
     "$CMAKE" --build "$B" -j2 >"$W/rt_build.log" 2>&1 && "$CMAKE" --install "$B" --prefix "$P" >"$W/rt_install.log" 2>&1; then
    pass "libdrkrt and drkrun cross-built for aarch64 and installed"
    has rt.warnings "$W/rt_build.log" 'warning:' 0
    readelf -hW "$P/lib/libdrkrt.so" >"$W/rt.readelf"; has rt.machine "$W/rt.readelf" 'Machine: +AArch64' 1
    # 3. examples/jetson against it
    E=$W/build-jetson
    if [ -f "$W/model.o" ] && "$CMAKE" -S "$SRC/examples/jetson" -B "$E" -DCMAKE_TOOLCHAIN_FILE="$TC" -DCMAKE_PREFIX_PATH="$P" \
         -DDRKC_EXECUTABLE="$DRKC" >"$W/ex_cfg.log" 2>&1 && "$CMAKE" --build "$E" >"$W/ex_build.log" 2>&1; then
      pass "examples/jetson cross-builds"
      has ex.drkc "$W/ex_build.log" 'drkc: .*model.onnx -> model.o, model.h \(sm_87, host aarch64-linux-gnu\)' 1
      readelf -hW "$E/classify" >"$W/ex.readelf"; has ex.machine "$W/ex.readelf" 'Machine: +AArch64' 1
      readelf -d "$E/classify" | grep NEEDED >"$W/ex.needed"; has ex.libc_only "$W/ex.needed" 'libdrkrt|libstdc' 0
    elif [ -f "$W/model.o" ]; then
      fail "examples/jetson"; sed 's/^/  | /' "$W/ex_cfg.log" "$W/ex_build.log" | tail -30
    fi
    # 4. under qemu-user: the app and drkrun reach the runtime's "no driver" status
    if [ -n "$QEMU" ] && [ -d "$SYSROOT" ]; then
      if [ -x "$E/classify" ]; then
        "$QEMU" -L "$SYSROOT" "$E/classify" >"$W/qemu_app.out" 2>"$W/qemu_app.err"; rc=$?
        [ "$rc" = 3 ] && pass "qemu: classify exits 3 (no GPU)" || { fail "qemu: classify exit $rc"; cat "$W/qemu_app.out" "$W/qemu_app.err"; }
        has qemu.app.model "$W/qemu_app.out" '^model: drkc [0-9.]+; targets sm_87;' 1
        has qemu.app.status "$W/qemu_app.err" '^app: no GPU: starting the model: no CUDA driver: dlopen\("libcuda.so.1"\) failed' 1
      fi
      if (cd "$W" && "$DRKC" "$SRC/examples/mlp/model.onnx" --target=sm_87 -o model.drkm -q) 2>/dev/null; then
        "$QEMU" -L "$SYSROOT" "$P/bin/drkrun" "$W/model.drkm" --list >"$W/qemu_list.out" 2>&1
        has qemu.drkrun.list "$W/qemu_list.out" 'ELF sm_87' 1
        "$QEMU" -L "$SYSROOT" "$P/bin/drkrun" "$W/model.drkm" >"$W/qemu_run.out" 2>&1; rc=$?
        [ "$rc" = 1 ] && has qemu.drkrun.nodriver "$W/qemu_run.out" 'drkrun: error: starting the runtime: no CUDA driver' 1 ||
          { fail "qemu: drkrun exit $rc, want 1"; cat "$W/qemu_run.out"; }
      fi
    else
      echo "SKIP qemu parts: no qemu-aarch64 or $SYSROOT (Debian qemu-user, libc6-dev-arm64-cross; tools/setup.sh)"
    fi
  else
    fail "cross build of libdrkrt"; sed 's/^/  | /' "$W/rt_cfg.log" "$W/rt_build.log" "$W/rt_install.log" 2>/dev/null | tail -30
  fi
fi
echo "$fails failure(s), $ran checks passed"
[ "$fails" = 0 ] || exit 1
[ "$ran" -gt 0 ] || { echo "SKIP: nothing could run here"; exit 77; }
