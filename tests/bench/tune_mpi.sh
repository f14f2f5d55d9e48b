#!/usr/bin/env bash
# Scaling of `drkc tune --mpi` on one GPU machine (issue 22 part 3): candidates compiled and
# measured per minute with 1, 2, 4, 8 and 15 compile ranks feeding one measure rank, and the
# GPU's busy fraction (seconds the measure rank spent inside measurements / the search's wall
# seconds), next to the local tune without offload (a round's candidates compiled in forked
# processes, --jobs at once, then measured one by one by the worker). Every run starts cold: a
# fresh database and kernel cache, the same seed and --time. Writes a markdown table to OUT.md;
# each run's output and JSON log go to OUT.md's folder.
#
#   usage: tests/bench/tune_mpi.sh DRKC MODEL OUT.md
#   env:   TUNE_TIME  each run's --time (default 120s)
#          RANKS      compile rank counts (default "1 2 4 8 15")
#          BATCH      tune.batch, candidates per round (default 16: a round of 8, the default,
#                     leaves compile ranks past 8 idle)
#          TUNE_FLAGS default "--target=sm_90a --precision=fp16 --fusion-aggressiveness=3 --policy=rl --seed=1"
#          MPIRUN     default: mpirun on PATH
#          JOBS       the local tune's --jobs (default: every CPU but one, as the MPI runs)
#
# On the H200 host, which has no MPI: here `tools/pack_mpi.sh mpi.tar.xz` (Debian's Open MPI and
# an MPI drkc with static LLVM), carry it, and there:
#   mkdir -p M && tar xJf mpi.tar.xz -C M && source M/mpi/env.sh
#   tests/bench/tune_mpi.sh M/mpi/bin/drkc MODEL OUT.md
# DRKC_TUNE_FAKE_MEASURE=1 tries the script out without a GPU (the busy fractions are then ~0:
# a fake measurement takes no time).
set -u
DRKC=${1:?usage: tune_mpi.sh DRKC MODEL OUT.md}; MODEL=${2:?model}; OUT=${3:?OUT.md}
TUNE_TIME=${TUNE_TIME:-120s}
RANKS=${RANKS:-"1 2 4 8 15"}
BATCH=${BATCH:-16}
FLAGS=${TUNE_FLAGS:-"--target=sm_90a --precision=fp16 --fusion-aggressiveness=3 --policy=rl --seed=1"}
MPIRUN=${MPIRUN:-mpirun}
NCPU=$(nproc)
JOBS=${JOBS:-$((NCPU > 1 ? NCPU - 1 : 1))}
mkdir -p "$(dirname "$OUT")"
D=$(cd "$(dirname "$OUT")" && pwd)/$(basename "$OUT" .md)
mkdir -p "$D"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 DRKC_TUNE_NO_PROGRESS=1
# MPI on this host only: shared memory, no fabric libraries (UCX may load CUDA in the ranks)
export OMPI_MCA_pml=${OMPI_MCA_pml:-ob1} OMPI_MCA_btl=${OMPI_MCA_btl:-self,vader,tcp}
printf 'tune.batch = %d\n' "$BATCH" >"$D/tune.conf"

# model_end's numbers of a log: measurements search_s compile_s measure_s
ends() {
  python3 - "$1" <<'EOF' 2>/dev/null || echo "- - - -"
import json, sys
e = [json.loads(l) for l in open(sys.argv[1]) if l.startswith('{"event":"model_end"')][-1]
print(e["measurements"], "%.1f" % e["search_s"], "%.1f" % e["compile_s"], "%.1f" % e["measure_s"])
EOF
}
row() { # NAME COMPILE_RANKS LOG RC
  local name=$1 k=$2 log=$3 rc=$4 n s c ms
  read -r n s c ms <<<"$(ends "$log")"
  if [ "$n" = - ]; then
    echo "| $name | $k | failed (exit $rc: $(basename "$log" .jsonl).out) | | | | |" >>"$OUT"
    return
  fi
  python3 - "$name" "$k" "$n" "$s" "$c" "$ms" >>"$OUT" <<'EOF'
import sys
name, k, n, s, c, m = sys.argv[1:]
n, s, c, m = int(n), float(s), float(c), float(m)
print(f"| {name} | {k} | {n} | {60 * n / s:.1f} | {c:.0f} | {m:.1f} | {100 * m / s:.0f}% |" if s > 0 else f"| {name} | {k} | {n} | - | | | |")
EOF
}
run_local() {
  local d=$D/local
  rm -rf "$d"; mkdir -p "$d"
  DRK_CACHE_DIR=$d/kcache timeout 400 "$DRKC" tune "$MODEL" $FLAGS --time="$TUNE_TIME" --trials=100000 --jobs="$JOBS" \
    --config="$D/tune.conf" --out="$d/t.sched" --db="$d/t.db" --log="$D/local.jsonl" >"$D/local.out" 2>&1
  row "local, no offload (--jobs=$JOBS)" "($JOBS forks)" "$D/local.jsonl" $?
}
run_mpi() { # K
  local k=$1 d=$D/mpi$1
  rm -rf "$d"; mkdir -p "$d"
  DRK_CACHE_DIR=$d/kcache timeout 400 $MPIRUN --oversubscribe --mca orte_abort_on_non_zero_status 0 -x DRK_CACHE_DIR \
    -np $((k + 2)) "$DRKC" tune "$MODEL" --mpi --ranks=compile:"$k",measure:1 $FLAGS --time="$TUNE_TIME" \
    --trials=100000 --config="$D/tune.conf" --out="$d/t.sched" --db="$d/t.db" --log="$D/mpi$k.jsonl" >"$D/mpi$k.out" 2>&1
  row "mpi: policy + $k compile + 1 measure" "$k" "$D/mpi$k.jsonl" $?
}

{
  echo "# drkc tune --mpi scaling: $(basename "$MODEL")"
  echo
  echo "host: $NCPU CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), " \
       "GPU: $(nvidia-smi -L 2>/dev/null | head -1 || echo none); $(date -u '+%F %H:%M') UTC"
  echo "drkc: $("$DRKC" --version 2>/dev/null | head -1); MPI: $($MPIRUN --version 2>/dev/null | head -1)"
  echo "flags: $FLAGS --time=$TUNE_TIME, tune.batch = $BATCH; each run cold (fresh database and kernel cache)"
  [ -n "${DRKC_TUNE_FAKE_MEASURE:-}" ] && echo "DRKC_TUNE_FAKE_MEASURE=1: synthetic measurements (no GPU)"
  echo
  echo "Per minute: measurements / the search's wall time (model_end search_s, from the first kernel's"
  echo "tune to the last one's end). Compile s: seconds spent compiling candidates, summed over"
  echo "ranks. GPU busy: the measure rank's (or the local worker's) seconds inside measurements /"
  echo "search_s."
  echo
  echo "| run | compile ranks | measurements | per minute | compile s | measure s | GPU busy |"
  echo "|---|---|---|---|---|---|---|"
} >"$OUT"
run_local
for k in $RANKS; do run_mpi "$k"; done
cat "$OUT"
