#!/usr/bin/env bash
# Packs this Debian machine's Open MPI (mpirun, orted, libmpi, the MCA and PMIx components a
# job on TCP or shared memory needs, their help texts, and every library they load but glibc's
# and the C++ runtime's) and an MPI-enabled drkc into one tarball, for a GPU machine that has
# no MPI (the H200 host: Ubuntu 24.04, nothing can be installed there). Components for other
# fabrics (UCX, libfabric, PSM, verbs) and Java are left out; Open MPI skips what it lacks.
#
#   usage: tools/pack_mpi.sh OUT.tar.xz [DRKC]
#   DRKC: a drkc built with DRK_STATIC_LLVM=ON and MPI; without it, one is built in
#   build-static-mpi (JOBS=N parallel jobs, default 2).
#
# On the other machine:
#   mkdir -p M && tar xJf OUT.tar.xz -C M && source M/mpi/env.sh
#   mpirun -np 4 drkc tune ... --mpi         (env.sh puts M/mpi/bin first on PATH)
# Checked here: with env.sh, an mpirun -np 4 tune loads every Open MPI, PMIx and hwloc file from
# the unpacked tree (LD_DEBUG=libs), only glibc and libgcc_s from the system.
# env.sh sets OPAL_PREFIX, PMIX_PREFIX (and PMIx's LIBDIR, PKGLIBDIR, PKGDATADIR) and
# HWLOC_PLUGINS_PATH (Open MPI, PMIx and hwloc find their components under the unpacked tree)
# and LD_LIBRARY_PATH, and keeps Open MPI on TCP and shared memory
# (OMPI_MCA_pml=ob1, OMPI_MCA_btl=self,vader,tcp).
set -euo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:?usage: tools/pack_mpi.sh OUT.tar.xz [DRKC]}
case $OUT in /*) ;; *) OUT=$PWD/$OUT ;; esac
DRKC=${2:-}
command -v orterun >/dev/null || { echo "pack_mpi: no Open MPI here (apt install openmpi-bin libopenmpi-dev)" >&2; exit 1; }
if [ -z "$DRKC" ]; then
  BD=$SRC/build-static-mpi
  cmake -S "$SRC" -B "$BD" -DDRK_STATIC_LLVM=ON -DDRK_MPI=ON -DCMAKE_BUILD_TYPE=Release \
    -DPython3_EXECUTABLE="${PYTHON:-$SRC/.venv/bin/python}" >/dev/null
  cmake --build "$BD" -j"${JOBS:-2}" --target drkc >/dev/null
  DRKC=$BD/tools/drkc
fi
deps=$(ldd "$DRKC") # (not piped into grep -q: with pipefail, ldd's SIGPIPE would fail the test)
grep -q 'libmpi\.so' <<<"$deps" || { echo "pack_mpi: $DRKC is not linked with MPI (configure with -DDRK_MPI=ON)" >&2; exit 1; }
if grep -q 'libLLVM' <<<"$deps"; then
  echo "pack_mpi: $DRKC loads a shared LLVM: build it with -DDRK_STATIC_LLVM=ON (the GPU machine has no LLVM)" >&2
  exit 1
fi

MLIB=/usr/lib/x86_64-linux-gnu/openmpi/lib # Debian's Open MPI libdir (ompi_info --path libdir)
PLIB=/usr/lib/x86_64-linux-gnu/pmix2       # PMIx (libpmix2)
[ -d "$MLIB/openmpi3" ] || { echo "pack_mpi: no $MLIB/openmpi3 (not Debian 12's Open MPI 4.1?)" >&2; exit 1; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
R=$T/mpi
mkdir -p "$R/bin" "$R/lib"
# libraries for fabrics the GPU host's single-node runs do not use, and their users
skip='libuc[pmst]|libfabric|libpsm|libibverbs|librdmacm|libnl-|libjvm|libmca_common_(ucx|ofi|verbs)|libmpi_java'
# mirror a file at its path under $R/usr... (Open MPI finds its parts relative to OPAL_PREFIX)
put() { mkdir -p "$R$(dirname "$1")" && cp -aL "$1" "$R$1"; }
objs=()
for f in /usr/bin/orterun /usr/bin/orted; do
  put "$f"
  objs+=("$f")
done
ln -sf orterun "$R/usr/bin/mpirun"
ln -sf orterun "$R/usr/bin/mpiexec"
kept=0; left=0
for c in "$MLIB"/openmpi3/mca_*.so "$MLIB"/libmca_common_*.so* "$PLIB"/lib/pmix/*.so; do
  [ -e "$c" ] || continue
  if ldd "$c" 2>/dev/null | grep -Eq "$skip|not found" || [[ $(basename "$c") =~ $skip ]] ||
     [[ $(basename "$c") =~ ^mca_(pml_ucx|osc_ucx|spml_ucx|atomic_ucx|mtl_|btl_openib|btl_usnic|btl_uct|btl_ofi|coll_hcoll|fcoll_) ]]; then
    left=$((left + 1))
    continue
  fi
  put "$c"
  objs+=("$c")
  kept=$((kept + 1))
done
mkdir -p "$R/usr/share" # Open MPI's help texts (ompi_info --path pkgdatadir)
cp -aL /usr/share/openmpi "$R/usr/share/openmpi"
[ -d "$PLIB/share" ] && put "$PLIB/share/pmix-mca-params.conf" 2>/dev/null || true
[ -d "$PLIB/share/pmix" ] && { mkdir -p "$R$PLIB/share" && cp -aL "$PLIB/share/pmix" "$R$PLIB/share/"; }
strip -o "$R/bin/drkc" "$DRKC" 2>/dev/null || cp "$DRKC" "$R/bin/drkc"
objs+=("$DRKC")
# hwloc's PCI plugin (the topology's devices); its other plugins (GL, OpenCL) are left out, and
# HWLOC_PLUGINS_PATH keeps hwloc from looking for them elsewhere
HWP=/usr/lib/x86_64-linux-gnu/hwloc
mkdir -p "$R/hwloc"
if [ -e "$HWP/hwloc_pci.so" ]; then
  cp -L "$HWP/hwloc_pci.so" "$R/hwloc/"
  objs+=("$HWP/hwloc_pci.so")
fi
# every library these load (libmpi, libopen-rte, libopen-pal, libpmix among them) but glibc's
# and the C++ runtime's
glibc='^(linux-vdso|ld-linux|libc|libm|libdl|libpthread|librt|libresolv|libutil|libstdc\+\+|libgcc_s)\.'
for o in "${objs[@]}"; do
  ldd "$o" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// { print $3 }'
done | sort -u | while read -r lib; do
  b=$(basename "$lib")
  [[ $b =~ $glibc ]] && continue
  cp -L "$lib" "$R/lib/$b"
done
cat >"$R/env.sh" <<'EOF'
# source me: the packed Open MPI (tools/pack_mpi.sh) and drkc first on PATH
_d=$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")" && pwd)
export OPAL_PREFIX=$_d/usr
export PMIX_PREFIX=$_d/usr/lib/x86_64-linux-gnu/pmix2
# PMIx 4 takes its component folder from these, not from PMIX_PREFIX alone (checked: without
# them mpirun loads PMIx's components from /usr/lib/x86_64-linux-gnu/pmix2 when that exists)
export PMIX_LIBDIR=$PMIX_PREFIX/lib PMIX_PKGLIBDIR=$PMIX_PREFIX/lib/pmix PMIX_PKGDATADIR=$PMIX_PREFIX/share/pmix
export HWLOC_PLUGINS_PATH=$_d/hwloc
export PATH=$_d/bin:$_d/usr/bin:$PATH
export LD_LIBRARY_PATH=$_d/lib:$_d/usr/lib/x86_64-linux-gnu/openmpi/lib:$_d/usr/lib/x86_64-linux-gnu/pmix2/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader,tcp
unset _d
EOF
printf 'Open MPI %s from Debian, packed by tools/pack_mpi.sh on %s (%d components, %d for other fabrics left out)\n' \
  "$(orterun --version 2>/dev/null | head -1 | grep -o '[0-9][0-9.]*$')" "$(date -u +%F)" "$kept" "$left" >"$R/README"
tar cJf "$OUT" -C "$T" mpi
echo "pack_mpi: $OUT ($(du -h "$OUT" | cut -f1)): $kept components, $(ls "$R/lib" | wc -l) libraries, drkc $(du -h "$R/bin/drkc" | cut -f1)"
