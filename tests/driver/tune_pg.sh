#!/usr/bin/env bash
# `drkc tune` and `drkc MODEL --db` on a shared PostgreSQL database (a server of
# tests/search/pg_server.sh), without a GPU (DRKC_TUNE_FAKE_MEASURE, as tests/driver/tune.sh):
# two tuners of one model write one database at the same time and every measurement of each is
# a record there, once (no record lost, no uid twice); `drkc MODEL --db=URL --require-tuned`
# compiles with the tuned records; `drkc db sync` copies them to a local SQLite file, with which
# the compile picks the same schedules.
# usage: tune_pg.sh DRKC MODELS_DIR WORK PG_SERVER_SCRIPT SOCKET_DIR
set -u
DRKC=$1; MODELS=$2; W=$3; PGS=$4; PGD=$5
rm -rf "$W"; mkdir -p "$W"
fail=0
bad() { echo "FAIL: $*"; fail=1; }
export DRK_CACHE_DIR="$W/kcache"
URL=$("$PGS" createdb "$PGD" drv_tune_pg) || { echo "FAIL: cannot create the database"; exit 1; }
m="$MODELS/mlp/model.onnx"
F=(--target=sm_90a --precision=fp16 --fusion-aggressiveness=3)
tune() { # NAME SEED
  DRKC_TUNE_FAKE_MEASURE=1 DRKC_TUNE_FAKE_LOG="$W/measured.$1" \
    "$DRKC" tune "$m" "${F[@]}" --jobs=1 --trials=5 --policy=random --seed="$2" --db="$URL" \
    --out="$W/$1.sched" --log="$W/$1.jsonl" >"$W/$1.out" 2>&1
}
tune a 11 & pa=$!
tune b 12 & pb=$!
wait $pa || bad "tuner a failed: $(tail -5 "$W/a.out")"
wait $pb || bad "tuner b failed: $(tail -5 "$W/b.out")"
[ $fail = 0 ] || exit 1
na=$(wc -l <"$W/measured.a"); nb=$(wc -l <"$W/measured.b")
[ "$na" -ge 15 ] && [ "$nb" -ge 15 ] || bad "the tuners measured $na and $nb points (expected 3 kernels x 5 trials each)"
"$DRKC" db list --db="$URL" >"$W/list" || bad "drkc db list --db=URL failed"
nr=$(($(wc -l <"$W/list") - 1))
[ "$nr" = $((na + nb)) ] || bad "$nr records for $na + $nb measurements"
"$DRKC" db export --db="$URL" -o "$W/all.jsonl" || bad "export failed"
nu=$(grep -o '"uid":"[0-9a-f]*"' "$W/all.jsonl" | sort -u | wc -l)
[ "$nu" = "$nr" ] || bad "$nu distinct uids in $nr records"
grep -q "wrote $W/a.sched and $URL" "$W/a.out" || bad "tuner a does not name the database: $(tail -1 "$W/a.out")"
# compiling with the shared database
"$DRKC" "$m" "${F[@]}" --db="$URL" --require-tuned --emit=schedules -o "$W/url.sched" 2>"$W/url.err" ||
  bad "drkc --db=URL --require-tuned failed: $(cat "$W/url.err")"
"$DRKC" "$m" "${F[@]}" --emit=schedules -o "$W/heur.sched"
cmp -s "$W/url.sched" "$W/heur.sched" && bad "--db=URL changed no kernel's schedule"
# a local copy compiles the same
"$DRKC" db sync "$W/local.db" "$URL" >"$W/sync.out" 2>&1 || bad "sync failed: $(cat "$W/sync.out")"
grep -q "$nr records added, 0 already present" "$W/sync.out" || bad "sync: $(cat "$W/sync.out")"
"$DRKC" "$m" "${F[@]}" --db="$W/local.db" --require-tuned --emit=schedules -o "$W/local.sched" 2>"$W/local.err" ||
  bad "drkc --db=local.db failed: $(cat "$W/local.err")"
cmp -s "$W/url.sched" "$W/local.sched" || bad "the synced local database picks other schedules than the shared one"
[ $fail = 0 ] && echo "tune_pg: 2 tuners at once -> $nr records ($na + $nb measurements, $nu uids); --db=URL and its synced copy agree"
exit $fail
