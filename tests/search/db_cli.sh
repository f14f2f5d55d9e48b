#!/usr/bin/env bash
# `drkc db ...` (search/db_main.c) on a small database: every command, --help, and the errors a
# user meets (no database, unknown option or command, a bad id, a record of another drkc
# version or target, a bad import line), with their exit codes (0 done, 1 error, 2 usage).
# usage: db_cli.sh DRKC_DB_CLI TEST_SEARCH_DB WORK
set -u
CLI=$1; MAKE=$2; W=$3
rm -rf "$W"; mkdir -p "$W"
fail=0
bad() { echo "FAIL: $*"; fail=1; }
# run EXPECTED_RC NEEDLE cmd...: exit code and a substring of stdout+stderr
run() {
  local want=$1 needle=$2; shift 2
  out=$("$@" 2>&1); rc=$?
  [ "$rc" = "$want" ] || bad "'$*' exited $rc, expected $want: $out"
  [ -z "$needle" ] || grep -qF -- "$needle" <<<"$out" || bad "'$*' does not say '$needle': $out"
}
read -r WL1 WL2 KH KA < <("$MAKE" make-db "$W/a.db") || { echo "FAIL: make-db"; exit 1; }
unset DRKC_DB
run 0 "usage: drkc db COMMAND" "$CLI" db --help
run 2 "usage: drkc db COMMAND" "$CLI" db
for c in list show best workloads export import merge prune tag; do
  run 0 "usage: drkc db $c" "$CLI" db $c --help
done
run 2 "unknown command 'lsit'" "$CLI" db lsit
run 2 "no database: give --db=FILE (or set DRKC_DB)" "$CLI" db list
run 1 "no such database" "$CLI" db list --db="$W/missing.db"
[ ! -e "$W/missing.db" ] || bad "list created a database"
run 2 "unknown option '--bogus'" "$CLI" db list --db="$W/a.db" --bogus
run 2 "--limit: 'x' is not a count" "$CLI" db list --db="$W/a.db" --limit=x
run 2 "prune takes no filter options" "$CLI" db prune --db="$W/a.db" --keep=1 --valid
run 0 "INVALID" "$CLI" db list --db="$W/a.db"
[ "$("$CLI" db list --db="$W/a.db" | wc -l)" = 6 ] || bad "list: expected a header and 5 records"
[ "$(DRKC_DB="$W/a.db" "$CLI" db list --valid | grep -c INVALID)" = 0 ] || bad "list --valid lists an invalid record"
[ "$("$CLI" db list --db="$W/a.db" --workload="$WL1" --best --limit=1 | tail -1 | awk '{print $5}')" = 7.000 ] ||
  bad "list --best: the first is not the fastest"
run 0 "schedule     mm.tile_n=128 mm.split_k=2" "$CLI" db show 3 --db="$W/a.db"
run 0 "mm_ws: mm_ws M=128 N=768" "$CLI" db show 3 --db="$W/a.db"
run 1 "no record 99" "$CLI" db show 99 --db="$W/a.db"
run 2 "'x1' is not a record id" "$CLI" db show x1 --db="$W/a.db"
run 0 "N=3072" "$CLI" db workloads --db="$W/a.db"
# best: the stable valid fastest of this version; the invalid 1 us record never
run 0 "time_us      8.0000" "$CLI" db best "$WL1" --target="$KH" --db="$W/a.db"
run 0 "time_us      7.0000" "$CLI" db best "$WL1" --target="$KH" --version=0.0.9 --db="$W/a.db"
run 1 "is from drkc 0.0.9 (not used" "$CLI" db best "$WL1" --target="$KH" --version=0.3.0 --db="$W/a.db"
run 1 "is from target $KH (not used" "$CLI" db best "$WL1" --target="$KA" --db="$W/a.db"
run 1 "no stable valid record" "$CLI" db best 0123456789abcdef0123456789abcdef --target="$KA" --db="$W/a.db"
run 2 "--target=KEY is required" "$CLI" db best "$WL1" --db="$W/a.db"
# export -> import into a new database -> the same export
run 0 "" "$CLI" db export --db="$W/a.db" -o "$W/a.jsonl"
[ "$(wc -l <"$W/a.jsonl")" = 5 ] || bad "export: expected 5 lines"
run 0 "5 records added, 0 already present" "$CLI" db import "$W/a.jsonl" --db="$W/b.db"
run 0 "0 records added, 5 already present" "$CLI" db import - --db="$W/b.db" <"$W/a.jsonl"
"$CLI" db export --db="$W/b.db" >"$W/b.jsonl"
cmp -s "$W/a.jsonl" "$W/b.jsonl" || bad "export of the imported database differs"
run 0 "" "$CLI" db export --db="$W/a.db" --valid --workload="$WL2" -o "$W/wl2.jsonl"
[ "$(wc -l <"$W/wl2.jsonl")" = 1 ] || bad "export --workload --valid: expected 1 line"
printf '{"uid":"zz"}\n' >"$W/bad.jsonl"
run 1 "bad.jsonl:1: error: \"uid\" 'zz' is not 32 hex digits" "$CLI" db import "$W/bad.jsonl" --db="$W/b.db"
run 1 "cannot open" "$CLI" db import "$W/nothing.jsonl" --db="$W/b.db"
# merge, tag, prune
"$MAKE" make-db "$W/c.db" >/dev/null
run 0 "5 records added, 0 already present" "$CLI" db merge "$W/c.db" --db="$W/a.db"
run 0 "5 records added, 5 already present" "$CLI" db merge "$W/a.db" --db="$W/b.db"
run 1 "merging a database into itself" "$CLI" db merge "$W/a.db" --db="$W/a.db"
run 0 "" "$CLI" db tag 1 3 --add=fp16 --db="$W/a.db"
[ "$("$CLI" db list --db="$W/a.db" --tag=fp16 | wc -l)" = 3 ] || bad "tag --add: expected 2 tagged records"
run 0 "" "$CLI" db tag 1 --remove=fp16 --db="$W/a.db"
[ "$("$CLI" db list --db="$W/a.db" --tag=fp16 | wc -l)" = 2 ] || bad "tag --remove"
run 1 "no record 42" "$CLI" db tag 3 42 --add=x --db="$W/a.db"
[ "$("$CLI" db list --db="$W/a.db" --tag=x | wc -l)" = 1 ] || bad "a failed tag command tagged some records"
run 2 "give one of --add=TAG or --remove=TAG" "$CLI" db tag 1 --db="$W/a.db"
run 0 "7 records would be deleted" "$CLI" db prune --keep=1 --dry-run --db="$W/a.db"
run 0 "7 records deleted" "$CLI" db prune --keep=1 --db="$W/a.db"
run 2 "--keep=N is required" "$CLI" db prune --db="$W/a.db"
[ "$("$CLI" db list --db="$W/a.db" | wc -l)" = 4 ] || bad "prune --keep=1: expected 3 records left (one per key)"
exit $fail
