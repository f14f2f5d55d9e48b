#!/usr/bin/env bash
# The H200 run of issue 22 part 3 (docs/distributed.md "Measuring it"): unpacks the carried
# Open MPI pack (tools/pack_mpi.sh: Debian's Open MPI and an MPI drkc with static LLVM; the
# GPU machine has no MPI) and runs tests/bench/tune_mpi.sh on a model: the local tune, then 1,
# 2, 4, 8 and 15 compile ranks feeding one measure rank, TUNE_TIME (default 45s) of search
# each, every run cold. About a minute per run, 6 runs: within one 10-minute device call.
#   usage: tests/gpu/tune_mpi_h200.sh MPI_PACK.tar.xz MODEL OUTDIR [TUNE_FLAGS...]
#   default flags: --target=sm_90a --precision=fp16 --fusion-aggressiveness=3 --policy=rl --seed=1
#   e.g. with the bundle's generated models (tests/gpu/make_bundle.sh, gpuprep.tar.xz):
#   tests/gpu/tune_mpi_h200.sh .carry/mpi.tar.xz gpuprep/models-src/bert_layer/model.onnx $OUT \
#     --target=sm_90a --precision=fp16 --fusion-aggressiveness=3 --bind=batch=8,seq=512 --policy=rl --seed=1
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
PACK=${1:?usage: tune_mpi_h200.sh MPI_PACK.tar.xz MODEL OUTDIR [TUNE_FLAGS...]}; MODEL=$2; OUTD=$3; shift 3
[ $# -gt 0 ] && export TUNE_FLAGS="$*"
M=$(mktemp -d)
trap 'rm -rf "$M"' EXIT
tar xJf "$PACK" -C "$M"
# shellcheck disable=SC1091
source "$M/mpi/env.sh"
mkdir -p "$OUTD"
command -v nvidia-smi >/dev/null && nvidia-smi -L | head -2
TUNE_TIME=${TUNE_TIME:-45s} "$SRC/tests/bench/tune_mpi.sh" "$M/mpi/bin/drkc" "$MODEL" "$OUTD/tune_mpi.md"
