#!/usr/bin/env bash
# `drkc tune --mpi` for real under mpirun, on synthetic measurements (DRKC_TUNE_FAKE_MEASURE:
# the compile ranks really compile every candidate with LLVM and ptxas; the measure rank checks
# the module it is sent and the time is a function of the knobs). Checks, with 4 ranks on this
# machine (--oversubscribe: it may have fewer cores):
#   1. the MPI tune gives the same winners and the same records, point for point, as the local
#      tune with the same seed;
#   2. a compile rank SIGKILLed mid-run is lost, its candidate goes to the other compile rank;
#      later the other one hangs (SIGSTOP), is lost too (no heartbeat), and rank 0 compiles
#      what is left itself; the tune still finishes with the same winners and records, and the
#      job ends (rank 0 aborts it: the hung rank would never finalize);
#   3. the measure rank SIGKILLed: lost at its deadline, the tune stops ("no measure rank is
#      left"), the records made so far stay;
#   4. the roles and per-rank events; --ranks that cannot be met, --ranks without --mpi.
# mpirun runs with --mca orte_abort_on_non_zero_status 0 (Open MPI would otherwise kill the job
# when a rank dies; docs/distributed.md). CI runs as root: mpirun needs the two variables below.
# usage: tune_mpi.sh DRKC MODELS_DIR WORK     (exit 77: no mpirun, or drkc built without MPI)
set -u
DRKC=$1; MODELS=$2; W=$3
rm -rf "$W"; mkdir -p "$W"
fail=0
bad() { echo "FAIL: $*"; fail=1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export DRKC_TUNE_FAKE_MEASURE=1 DRKC_TUNE_NO_PROGRESS=1
command -v mpirun >/dev/null || { echo "SKIP: no mpirun (apt install openmpi-bin libopenmpi-dev)"; exit 77; }
m="$MODELS/mlp/model.onnx"
F=(--target=sm_90a --precision=fp16 --fusion-aggressiveness=3 --trials=8 --policy=rl --seed=5)
DRK_CACHE_DIR="$W/kcache" "$DRKC" tune "$m" --mpi "${F[@]}" --out="$W/probe.sched" >"$W/probe.out" 2>&1
if grep -q 'needs a drkc built with MPI' "$W/probe.out"; then
  echo "SKIP: $(grep -o 'needs a drkc built with MPI.*' "$W/probe.out" | head -1)"
  exit 77
fi
# without mpirun, one rank: nobody to measure, said so
grep -q 'no rank can measure' "$W/probe.out" || bad "--mpi alone does not say no rank can measure: $(tail -2 "$W/probe.out")"
MPIRUN=(mpirun --oversubscribe --mca orte_abort_on_non_zero_status 0 -np 4)
records() { # DB: every record but its id and the drkc version, in order
  "$DRKC" db list --db="$1" | awk 'NR > 1 { $1 = ""; $4 = ""; print }'
}
# ---- the local tune: the reference ----
# each tune has a kernel cache of its own: the compile ranks really compile (LLVM, ptxas)
export DRK_CACHE_DIR="$W/kcache.local"
"$DRKC" tune "$m" "${F[@]}" --jobs=2 --out="$W/local.sched" --log="$W/local.jsonl" >"$W/local.out" 2>&1 ||
  { bad "the local tune failed: $(tail -3 "$W/local.out")"; exit 1; }
records "$W/local.db" >"$W/local.records"
nrec=$(wc -l <"$W/local.records")
[ "$nrec" -ge 24 ] || bad "the local tune made $nrec records, expected at least 24 (3 kernels x 8)"
# ---- 1: 4 ranks: policy, 2 compile, 1 measure ----
export DRK_CACHE_DIR="$W/kcache.mpi"
timeout 300 "${MPIRUN[@]}" "$DRKC" tune "$m" --mpi --ranks=compile:2,measure:1 "${F[@]}" --out="$W/mpi.sched" \
  --log="$W/mpi.jsonl" >"$W/mpi.out" 2>&1
rc=$?
[ $rc = 0 ] || bad "the MPI tune exited $rc: $(tail -5 "$W/mpi.out")"
for r in "1 .*: measure, device 0" "2 .*: compile" "3 .*: compile"; do
  grep -q "^drkc tune: mpi: rank $r\$" "$W/mpi.out" || bad "no role line 'rank $r' in the MPI tune's output"
done
diff <(grep -v '^#' "$W/local.sched") <(grep -v '^#' "$W/mpi.sched") >"$W/mpi.diff" ||
  bad "the MPI tune's winners differ from the local tune's: $(cat "$W/mpi.diff")"
records "$W/mpi.db" >"$W/mpi.records"
diff "$W/local.records" "$W/mpi.records" >"$W/mpi.rdiff" ||
  bad "the MPI tune's records differ from the local tune's: $(head -5 "$W/mpi.rdiff")"
# the compile ranks did the compiling, the measure rank the measuring
c2=$(grep -o '"rank":2,"role":"compile","host":"[^"]*","answers":[0-9]*' "$W/mpi.jsonl" | grep -o '[0-9]*$')
c3=$(grep -o '"rank":3,"role":"compile","host":"[^"]*","answers":[0-9]*' "$W/mpi.jsonl" | grep -o '[0-9]*$')
m1=$(grep -o '"rank":1,"role":"measure","host":"[^"]*","answers":[0-9]*' "$W/mpi.jsonl" | grep -o '[0-9]*$')
[ "${c2:-0}" -ge 1 ] && [ "${c3:-0}" -ge 1 ] || bad "a compile rank compiled nothing (rank 2: ${c2:-none}, rank 3: ${c3:-none})"
[ $(( ${c2:-0} + ${c3:-0} )) -ge "$nrec" ] || bad "the compile ranks answered $(( ${c2:-0} + ${c3:-0} )) times for $nrec records"
[ "${m1:-0}" -ge $((nrec - 3)) ] || bad "the measure rank answered ${m1:-0} times for $nrec records"
tail -5 "$W/mpi.jsonl" | grep -q '^{"event":"model_end".*"mpi":true' || bad "no model_end with \"mpi\":true"
# ---- 2: the same with compile rank 2 SIGKILLed mid-run ----
export DRK_CACHE_DIR="$W/kcache.kill"
(timeout 300 "${MPIRUN[@]}" "$DRKC" tune "$m" --mpi --ranks=compile:2,measure:1 --compile-timeout=20 "${F[@]}" \
  --out="$W/kill.sched" --log="$W/kill.jsonl" >"$W/kill.out" 2>&1; echo $? >"$W/kill.rc") &
bg=$!
n=0
for _ in $(seq 1500); do # until 8 trials are in (the tune is under way), at most 5 minutes
  n=$(grep -c '"event":"trial"' "$W/kill.jsonl" 2>/dev/null)
  [ "${n:-0}" -ge 8 ] && break
  sleep 0.2
done
pid=$(sed -n 's/^drkc tune: mpi: rank 2 (.*, pid \([0-9]*\)): compile$/\1/p' "$W/kill.out")
if [ -n "$pid" ] && [ "${n:-0}" -ge 8 ]; then
  kill -9 "$pid" || bad "cannot kill compile rank 2 (pid $pid)"
else
  bad "the tune did not get under way (${n:-0} trials, rank 2's pid '${pid}')"
fi
killed_after=${n:-0}
for _ in $(seq 1500); do # 6 trials later, compile rank 3 hangs (SIGSTOP): no compile rank is left
  n=$(grep -c '"event":"trial"' "$W/kill.jsonl" 2>/dev/null)
  [ "${n:-0}" -ge $((killed_after + 6)) ] && break
  sleep 0.2
done
pid3=$(sed -n 's/^drkc tune: mpi: rank 3 (.*, pid \([0-9]*\)): compile$/\1/p' "$W/kill.out")
[ -n "$pid3" ] && kill -STOP "$pid3"
stopped_after=${n:-0}
wait $bg
# mpirun reports the killed rank in its exit status (137); rank 0's result is its output
grep -q '^drkc tune: [0-9]* measurements .* wrote ' "$W/kill.out" || bad "the tune with a killed rank did not finish: $(tail -5 "$W/kill.out")"
grep -q "^drkc tune: mpi: rank 2 (.*) lost: " "$W/kill.out" || bad "rank 0 never noticed that rank 2 was lost"
grep -q "^drkc tune: mpi: rank 3 (.*) lost: silent for" "$W/kill.out" ||
  bad "rank 0 never noticed that rank 3 hung (stopped after $stopped_after trials)"
grep -q '"rank":0,"role":"policy","host":"[^"]*","answers":[1-9]' "$W/kill.jsonl" ||
  bad "with no compile rank left, rank 0 compiled nothing itself"
[ -n "$pid3" ] && { kill -CONT "$pid3" 2>/dev/null; st=$(ps -o stat= -p "$pid3"); [ -z "$st" ] || [ "${st#Z}" != "$st" ] ||
  { bad "the hung rank 3 (pid $pid3) outlived the job"; kill -9 "$pid3"; }; }
diff <(grep -v '^#' "$W/local.sched") <(grep -v '^#' "$W/kill.sched") >"$W/kill.diff" ||
  bad "with a killed compile rank the winners differ: $(cat "$W/kill.diff")"
records "$W/kill.db" >"$W/kill.records"
diff "$W/local.records" "$W/kill.records" >"$W/kill.rdiff" ||
  bad "with a killed compile rank the records differ: $(head -5 "$W/kill.rdiff")"
grep -q '"rank":2,"role":"compile",.*"lost":true' "$W/kill.jsonl" || bad "no mpi_rank event with rank 2 lost"
for p in $(sed -n 's/^drkc tune: mpi: rank [0-9]* (.*, pid \([0-9]*\)): .*$/\1/p' "$W/kill.out"); do
  st=$(ps -o stat= -p "$p" 2>/dev/null) # a zombie (Z) has ended: only its parent is gone
  [ -n "$st" ] && [ "${st#Z}" = "$st" ] && bad "rank process $p is still running after the job ($st)"
done
# ---- 3: the measure rank SIGKILLed: no measure rank is left, the tune stops and says so ----
export DRK_CACHE_DIR="$W/kcache.mkill"
(timeout 300 "${MPIRUN[@]}" "$DRKC" tune "$m" --mpi --ranks=compile:2,measure:1 --timeout=5 "${F[@]}" \
  --out="$W/mkill.sched" --log="$W/mkill.jsonl" >"$W/mkill.out" 2>&1) &
bg=$!
for _ in $(seq 600); do
  n=$(grep -c '"event":"trial"' "$W/mkill.jsonl" 2>/dev/null)
  [ "${n:-0}" -ge 4 ] && break
  sleep 0.2
done
pid=$(sed -n 's/^drkc tune: mpi: rank 1 (.*, pid \([0-9]*\)): measure, device 0$/\1/p' "$W/mkill.out")
[ -n "$pid" ] && kill -9 "$pid"
wait $bg
grep -q "^drkc tune: mpi: rank 1 (.*) lost: no answer within 16 s" "$W/mkill.out" ||
  bad "rank 0 did not lose the killed measure rank 1 (pid ${pid:-?}) within 16 s: $(grep mpi: "$W/mkill.out" | tail -3)"
grep -q 'stopped the tune: no measure rank is left; rank 1: no answer' "$W/mkill.out" ||
  bad "the tune did not stop for want of a measure rank: $(tail -5 "$W/mkill.out")"
[ "$("$DRKC" db list --db="$W/mkill.db" | wc -l)" -gt 1 ] || bad "the stopped tune kept no records"
# ---- 4: option errors ----
export DRK_CACHE_DIR="$W/kcache"
"$DRKC" tune "$m" --ranks=compile:1 >"$W/e1.out" 2>&1
[ $? = 2 ] && grep -q -- '--ranks is an option of --mpi' "$W/e1.out" || bad "--ranks without --mpi: $(cat "$W/e1.out")"
"$DRKC" tune "$m" --mpi --ranks=compile:x >"$W/e2.out" 2>&1
[ $? = 2 ] && grep -q -- '--ranks: compile:K,measure:G' "$W/e2.out" || bad "--ranks=compile:x: $(cat "$W/e2.out")"
timeout 120 "${MPIRUN[@]}" "$DRKC" tune "$m" --mpi --ranks=compile:5,measure:1 "${F[@]}" --out="$W/e3.sched" >"$W/e3.out" 2>&1
rc=$?
[ $rc = 1 ] || bad "mpirun exited $rc when rank 0 failed (rank 0's status 1 should reach it through MPI_Abort)"
grep -q 'asks for 5 compile ranks; 2 ranks are left after the 1 measure ranks' "$W/e3.out" ||
  bad "--ranks=compile:5 with 4 ranks: $(grep error "$W/e3.out" | head -2)"
[ $fail = 0 ] && echo "tune_mpi: OK ($nrec records the same locally, over MPI, and with compile rank 2 killed after ${killed_after} trials and rank 3 stopped after ${stopped_after})"
exit $fail
