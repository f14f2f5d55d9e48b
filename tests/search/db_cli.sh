#!/usr/bin/env bash
# `drkc db ...` (search/db_main.c) on a small database: every command, --help, and the errors a
# user meets (no database, unknown option or command, a bad id, a record of another drkc
# version or target, a bad import line), with their exit codes (0 done, 1 error, 2 usage).
# With PG_SERVER_SCRIPT and SOCKET_DIR (tests/search/pg_server.sh and its running server), the
# databases are PostgreSQL ones (URLs), the same commands giving the same answers.
# usage: db_cli.sh DRKC_DB_CLI TEST_SEARCH_DB WORK [PG_SERVER_SCRIPT SOCKET_DIR]
set -u
CLI=$1; MAKE=$2; W=$3; PGS=${4:-}; PGD=${5:-}
rm -rf "$W"; mkdir -p "$W"
# db NAME: a new empty database's --db value (a file path, or a URL with --pg)
db() {
  if [ -n "$PGS" ]; then "$PGS" createdb "$PGD" "cli_$1" || { echo "FAIL: createdb $1"; exit 1; }
  else echo "$W/$1.db"; fi
}
A=$(db a); B=$(db b); C=$(db c)
if [ -n "$PGS" ]; then MISSING=$("$PGS" url "$PGD" cli_missing); NOSUCH="does not exist"
else MISSING=$W/missing.db; NOSUCH="no such database"; fi
fail=0
bad() { echo "FAIL: $*"; fail=1; }
# run EXPECTED_RC NEEDLE cmd...: exit code and a substring of stdout+stderr
run() {
  local want=$1 needle=$2; shift 2
  out=$("$@" 2>&1); rc=$?
  [ "$rc" = "$want" ] || bad "'$*' exited $rc, expected $want: $out"
  [ -z "$needle" ] || grep -qF -- "$needle" <<<"$out" || bad "'$*' does not say '$needle': $out"
}
read -r WL1 WL2 KH KA < <("$MAKE" make-db "$A") || { echo "FAIL: make-db"; exit 1; }
unset DRKC_DB
run 0 "usage: drkc db COMMAND" "$CLI" db --help
run 2 "usage: drkc db COMMAND" "$CLI" db
for c in list show best workloads export import merge sync prune tag; do
  run 0 "usage: drkc db $c" "$CLI" db $c --help
done
run 2 "unknown command 'lsit'" "$CLI" db lsit
run 2 "no database: give --db=FILE or --db=postgresql://... (or set DRKC_DB)" "$CLI" db list
run 1 "$NOSUCH" "$CLI" db list --db="$MISSING"
[ ! -e "$W/missing.db" ] || bad "list created a database"
run 2 "unknown option '--bogus'" "$CLI" db list --db="$A" --bogus
run 2 "--limit: 'x' is not a count" "$CLI" db list --db="$A" --limit=x
run 2 "prune takes no filter options" "$CLI" db prune --db="$A" --keep=1 --valid
run 0 "INVALID" "$CLI" db list --db="$A"
[ "$("$CLI" db list --db="$A" | wc -l)" = 6 ] || bad "list: expected a header and 5 records"
[ "$(DRKC_DB="$A" "$CLI" db list --valid | grep -c INVALID)" = 0 ] || bad "list --valid lists an invalid record"
[ "$("$CLI" db list --db="$A" --workload="$WL1" --best --limit=1 | tail -1 | awk '{print $5}')" = 7.000 ] ||
  bad "list --best: the first is not the fastest"
run 0 "schedule     mm.tile_n=128 mm.split_k=2" "$CLI" db show 3 --db="$A"
run 0 "mm_ws: mm_ws M=128 N=768" "$CLI" db show 3 --db="$A"
run 1 "no record 99" "$CLI" db show 99 --db="$A"
run 2 "'x1' is not a record id" "$CLI" db show x1 --db="$A"
run 0 "N=3072" "$CLI" db workloads --db="$A"
# best: the stable valid fastest of this version; the invalid 1 us record never
run 0 "time_us      8.0000" "$CLI" db best "$WL1" --target="$KH" --db="$A"
run 0 "time_us      7.0000" "$CLI" db best "$WL1" --target="$KH" --version=0.0.9 --db="$A"
run 1 "is from drkc 0.0.9 (not used" "$CLI" db best "$WL1" --target="$KH" --version=0.3.0 --db="$A"
run 1 "is from target $KH (not used" "$CLI" db best "$WL1" --target="$KA" --db="$A"
run 1 "no stable valid record" "$CLI" db best 0123456789abcdef0123456789abcdef --target="$KA" --db="$A"
run 2 "--target=KEY is required" "$CLI" db best "$WL1" --db="$A"
# export -> import into a new database -> the same export
run 0 "" "$CLI" db export --db="$A" -o "$W/a.jsonl"
[ "$(wc -l <"$W/a.jsonl")" = 5 ] || bad "export: expected 5 lines"
run 0 "5 records added, 0 already present" "$CLI" db import "$W/a.jsonl" --db="$B"
run 0 "0 records added, 5 already present" "$CLI" db import - --db="$B" <"$W/a.jsonl"
"$CLI" db export --db="$B" >"$W/b.jsonl"
cmp -s "$W/a.jsonl" "$W/b.jsonl" || bad "export of the imported database differs"
run 0 "" "$CLI" db export --db="$A" --valid --workload="$WL2" -o "$W/wl2.jsonl"
[ "$(wc -l <"$W/wl2.jsonl")" = 1 ] || bad "export --workload --valid: expected 1 line"
printf '{"uid":"zz"}\n' >"$W/bad.jsonl"
run 1 "bad.jsonl:1: error: \"uid\" 'zz' is not 32 hex digits" "$CLI" db import "$W/bad.jsonl" --db="$B"
run 1 "cannot open" "$CLI" db import "$W/nothing.jsonl" --db="$B"
# merge, tag, prune
"$MAKE" make-db "$C" >/dev/null
run 0 "5 records added, 0 already present" "$CLI" db merge "$C" --db="$A"
run 0 "5 records added, 5 already present" "$CLI" db merge "$A" --db="$B"
run 1 "merging a database into itself" "$CLI" db merge "$A" --db="$A"
# sync with a local file: both ways, by uid, saying what it copied
run 0 "-> $W/local.db: 10 records added, 0 already present" "$CLI" db sync "$W/local.db" "$B"
run 0 "$W/local.db -> " "$CLI" db sync "$W/local.db" "$B"
run 0 "0 records added, 10 already present" "$CLI" db sync "$B" "$W/local.db"
"$CLI" db export --db="$W/local.db" >"$W/local.jsonl"
"$CLI" db export --db="$B" >"$W/b2.jsonl"
[ "$(sort "$W/local.jsonl")" = "$(sort "$W/b2.jsonl")" ] || bad "sync: the two databases hold different records"
run 2 "A and B are one database" "$CLI" db sync "$B" "$B"
run 2 "expected two databases" "$CLI" db sync "$B"
run 2 "sync takes its two databases as arguments, not --db" "$CLI" db sync "$B" "$W/local.db" --db="$B"
run 0 "" "$CLI" db tag 1 3 --add=fp16 --db="$A"
[ "$("$CLI" db list --db="$A" --tag=fp16 | wc -l)" = 3 ] || bad "tag --add: expected 2 tagged records"
run 0 "" "$CLI" db tag 1 --remove=fp16 --db="$A"
[ "$("$CLI" db list --db="$A" --tag=fp16 | wc -l)" = 2 ] || bad "tag --remove"
run 1 "no record 42" "$CLI" db tag 3 42 --add=x --db="$A"
[ "$("$CLI" db list --db="$A" --tag=x | wc -l)" = 1 ] || bad "a failed tag command tagged some records"
run 2 "give one of --add=TAG or --remove=TAG" "$CLI" db tag 1 --db="$A"
run 0 "7 records would be deleted" "$CLI" db prune --keep=1 --dry-run --db="$A"
run 0 "7 records deleted" "$CLI" db prune --keep=1 --db="$A"
run 2 "--keep=N is required" "$CLI" db prune --db="$A"
[ "$("$CLI" db list --db="$A" | wc -l)" = 4 ] || bad "prune --keep=1: expected 3 records left (one per key)"
exit $fail
