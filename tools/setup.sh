#!/usr/bin/env bash
# Installs what drkc needs on Debian 12, then a Python venv (.venv) with the test oracles.
# Quiet and fast when everything is present; works as root or through sudo. chromium: the
# report test (tests/report) opens `drkc report`'s page in it, headless. libpq-dev: the kernel
# database on PostgreSQL; postgresql: the throwaway server of the database tests
# (tests/search/pg_server.sh). The aarch64 cross compiler, qemu-user and pkgconf serve the
# deployment tests (tests/deploy, docs/deploy.md), as do the PyPI CUDA tools: a CUDA 12.x ptxas
# for Jetson Orin's sm_87 cubins and cuobjdump.
# Open MPI (libopenmpi-dev, openmpi-bin) builds and tests drkc tune --mpi (docs/distributed.md).
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES="build-essential cmake llvm-22-dev lld-22 clang-22 clang-tools-22 libclang-rt-22-dev
  libprotobuf-c-dev protobuf-c-compiler libonnx-dev libonnx-testdata flex bison libsqlite3-dev libpq-dev postgresql
  libamdhip64-dev zlib1g-dev libzstd-dev libedit-dev libxml2-dev libffi-dev libncurses-dev python3 python3-venv python3-pip
  chromium gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user pkgconf libopenmpi-dev openmpi-bin"
PY_PACKAGES="onnx onnxruntime numpy"
# ptxas 12.x (nvidia/cuda_nvcc/bin/ptxas) and cuobjdump; no system CUDA needed
PY_CUDA_PACKAGES="nvidia-cuda-nvcc-cu12 nvidia-cuda-cuobjdump"

missing=()
for p in $APT_PACKAGES; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ]; then SUDO=; elif command -v sudo >/dev/null; then SUDO=sudo; else
    echo "setup: need root or sudo to install: ${missing[*]}" >&2; exit 1; fi
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

PY=/usr/bin/python3; [ -x "$PY" ] || PY=python3
if ! .venv/bin/python -c "import onnx, onnxruntime, numpy" 2>/dev/null; then
  echo "setup: creating .venv with $PY_PACKAGES"
  rm -rf .venv
  "$PY" -m venv .venv
  .venv/bin/python -m pip install -q --disable-pip-version-check $PY_PACKAGES
fi
if ! ls .venv/lib/python3*/site-packages/nvidia/cuda_nvcc/bin/ptxas >/dev/null 2>&1 ||
   ! ls .venv/lib/python3*/site-packages/nvidia/*/bin/cuobjdump >/dev/null 2>&1; then
  echo "setup: installing $PY_CUDA_PACKAGES into .venv"
  .venv/bin/python -m pip install -q --disable-pip-version-check $PY_CUDA_PACKAGES
fi

cuda_bin=""
for d in "${CUDA_HOME:-}/bin" /usr/local/cuda/bin; do
  [ -x "$d/ptxas" ] && { cuda_bin=$d; break; }
done
if [ -z "$cuda_bin" ] && ! command -v ptxas >/dev/null; then
  echo "setup: note: CUDA tools (ptxas, fatbinary) not found under \$CUDA_HOME/bin or /usr/local/cuda/bin;" \
       "what needs them is skipped, with a message (they come with NVIDIA's CUDA toolkit)"
fi
