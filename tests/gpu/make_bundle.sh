#!/usr/bin/env bash
# Builds what the GPU machine needs (it has no LLVM) into a bundle directory for
# tests/gpu/run_bundle.sh: statically linked drkc (DRK_STATIC_LLVM), drkrun, bench_kernels and
# test_hopper_matmul, stripped, and libdrkrt.a (tests/gpu/deploy.sh), in BUNDLE/bin.tar.xz; the prepared conformance cases and
# models (tests/gpu/run.sh --prepare) in BUNDLE/gpuprep.tar.xz. The device tool copies the
# working tree itself (the scripts); carry BUNDLE (e.g. .carry, gitignored) with it.
#   usage: tests/gpu/make_bundle.sh BUNDLE [BUILD_DIR (default build-static)]
# On the GPU machine: tests/gpu/run_bundle.sh BUNDLE OUTDIR [STEPS].
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
B=$1; BD=${2:-$SRC/build-static}
mkdir -p "$B"
# DRK_MPI=OFF: the bundle's drkc stays self-contained (an MPI drkc needs libmpi at run time:
# tools/pack_mpi.sh packs one with Open MPI for drkc tune --mpi)
cmake -S "$SRC" -B "$BD" -DDRK_STATIC_LLVM=ON -DDRK_MPI=OFF -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BD" -j"$(nproc)" --target drkc drkrun drkrt bench_kernels test_hopper_matmul >/dev/null
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/bin"
for f in tools/drkc tools/drkrun tests/bench/bench_kernels tests/nvptx/test_hopper_matmul; do
  strip -o "$T/bin/$(basename "$f")" "$BD/$f"
done
# libdrkrt.a: tests/gpu/deploy.sh links the example app with it on the GPU machine
strip -g -o "$T/bin/libdrkrt.a" "$BD/runtime/libdrkrt.a"
tar cJf "$B/bin.tar.xz" -C "$T" bin
DRKC=$T/bin/drkc DRKRUN=$T/bin/drkrun PYTHON=${PYTHON:-$SRC/.venv/bin/python} \
  "$SRC/tests/gpu/run.sh" --prepare "$T/gpuprep" | tail -n 1
tar cJf "$B/gpuprep.tar.xz" -C "$T" gpuprep
ls -l "$B"
