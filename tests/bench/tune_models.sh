#!/usr/bin/env bash
# drkc tune on the GPU machine, per model (issue 15's acceptance, one model at a time):
#   1. `drkc tune MODEL FLAGS --time=T --trials=N` into a fresh database (the log, the
#      tuned schedules, the model's kernels one by one before / after);
#   2. the heuristic module and the tuned one (`--db`), both checked against the CPU
#      interpreter (`drkc run --device=cuda --check`), then timed with drkrun (resident);
#   3. the warm database: the same tune again with --resume (must measure nothing and take
#      well under a minute) and the module compiled from it again (must be byte-identical).
# Prints one summary line per model and writes OUT/tune.md.
#   usage: DRKC=... DRKRUN=... tune_models.sh OUT T_SECONDS MODEL[:BIND]...
#   (FLAGS: TUNE_FLAGS, default "--precision=fp16 --fusion-aggressiveness=3"; TRIALS default 32;
#   KERNELS=K: the K most time-consuming kernels only)
set -u
OUT=${1:?usage: tune_models.sh OUT T MODEL...}; T=${2:?}; shift 2
DRKC=${DRKC:-drkc}; DRKRUN=${DRKRUN:-drkrun}
FLAGS=${TUNE_FLAGS:-"--precision=fp16 --fusion-aggressiveness=3"}
TRIALS=${TRIALS:-32}
KOPT=(); [ -n "${KERNELS:-}" ] && KOPT=(--kernels="$KERNELS")
mkdir -p "$OUT"
{
  echo "# drkc tune, $(date -u +%F) on $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
  echo
  echo "Flags \`$FLAGS\`, \`--time=$T --trials=$TRIALS ${KOPT[*]}\` (trials per kernel). Latencies: drkrun resident median, ms."
  echo
  echo "| model | tune s | kernels tuned | trials (invalid) | kernels 1-by-1 before -> after us | heuristic ms | tuned ms | speedup | check heuristic / tuned | warm re-tune s (measured) | same module |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|"
} > "$OUT/tune.md"
for spec in "$@"; do
  m=${spec%%:*}; bind=${spec#*:}; [ "$bind" = "$spec" ] && bind=
  name=$(basename "$(dirname "$m")")
  W=$OUT/$name; mkdir -p "$W"
  t0=$(date +%s.%N)
  timeout -k 5 $((T + 120)) "$DRKC" tune "$m" $FLAGS $bind --time="$T" --trials="$TRIALS" "${KOPT[@]}" --db="$W/k.db" \
    --log="$W/tune.jsonl" --out="$W/tuned.sched" > "$W/tune.log" 2>&1
  rc=$?; t1=$(date +%s.%N)
  tune_s=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') # (no bc on the GPU host)
  end=$(grep '"model_end"' "$W/tune.jsonl" | tail -1)
  before=$(echo "$end" | grep -oE '"before_us":[0-9.]+' | cut -d: -f2)
  after=$(echo "$end" | grep -oE '"after_us":[0-9.]+' | cut -d: -f2)
  ntuned=$(grep -c '"event":"kernel_summary"' "$W/tune.jsonl" 2>/dev/null)
  trials=$(grep -c '"event":"trial"' "$W/tune.jsonl" 2>/dev/null)
  invalid=$(grep '"event":"trial"' "$W/tune.jsonl" 2>/dev/null | grep -c '"valid":false')
  "$DRKC" "$m" $FLAGS $bind --target=sm_90a -o "$W/heur.drkm" > "$W/heur.log" 2>&1
  "$DRKC" "$m" $FLAGS $bind --target=sm_90a --db="$W/k.db" -o "$W/tuned.drkm" > "$W/tuned.log" 2>&1
  ch=$("$DRKC" run "$m" --device=cuda --check $FLAGS $bind 2>&1 | grep -E "PASS|FAIL" | head -1 | cut -c1-90)
  ct=$("$DRKC" run "$m" --device=cuda --check $FLAGS $bind --db="$W/k.db" 2>&1 | grep -E "PASS|FAIL" | head -1 | cut -c1-90)
  lh=$("$DRKRUN" "$W/heur.drkm" --iters 100 --warmup 20 2>&1 | grep "^resident" | grep -oE "median [0-9.]+" | cut -d' ' -f2)
  lt=$("$DRKRUN" "$W/tuned.drkm" --iters 100 --warmup 20 2>&1 | grep "^resident" | grep -oE "median [0-9.]+" | cut -d' ' -f2)
  sp=$(awk -v a="$lh" -v b="$lt" 'BEGIN { if (a > 0 && b > 0) printf "%.3f", a / b }')
  # warm: the same tune, resumed from the database
  t0=$(date +%s.%N)
  timeout -k 5 300 "$DRKC" tune "$m" $FLAGS $bind --time="$T" --trials="$TRIALS" "${KOPT[@]}" --db="$W/k.db" --resume \
    --log="$W/warm.jsonl" --out="$W/warm.sched" > "$W/warm.log" 2>&1
  t1=$(date +%s.%N); warm_s=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
  wtrials=$(grep -c '"event":"trial"' "$W/warm.jsonl" 2>/dev/null)
  # the same command line (the module's provenance holds it), the database after the re-tune
  mv "$W/tuned.drkm" "$W/tuned1.drkm"
  "$DRKC" "$m" $FLAGS $bind --target=sm_90a --db="$W/k.db" -o "$W/tuned.drkm" > /dev/null 2>&1
  same=no; cmp -s "$W/tuned.drkm" "$W/tuned1.drkm" && same=yes
  row="| $name | ${tune_s%.*} (rc $rc) | $ntuned | $trials ($invalid) | $before -> $after | $lh | $lt | $sp | $ch / $ct | ${warm_s%.*} ($wtrials) | $same |"
  echo "$row" >> "$OUT/tune.md"; echo "$row"
  tail -4 "$W/tune.log"
done
