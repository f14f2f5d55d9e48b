#!/usr/bin/env bash
# A module's kernel launch records: a kernel with a thread-block cluster (the sm_90a matmul with
# --schedule=mm.cluster=2) carries its cluster dims, every other kernel none (0 0 0: a plain
# launch, which HIP can make too), as `drkrun --list` shows.
# usage: module_cluster.sh DRKC DRKRUN WORK_DIR
set -u
DRKC=$1; DRKRUN=$2; W=$3
rm -rf "$W"; mkdir -p "$W"
fails=0
cat >"$W/mm.drkg" <<'G'
graph @m(%a: f16[384, 512], %b: f16[512, 256]) -> (%c) {
  %c: f16[384, 256] = MatMul(%a, %b)
  return %c
}
G
# list NAME ARGS...: compile with ARGS, keep drkrun --list's kernel lines in W/NAME.list
list() {
  local name=$1; shift
  if ! "$DRKC" "$W/mm.drkg" "$@" -o "$W/$name.drkm" >"$W/$name.log" 2>&1 || ! "$DRKRUN" "$W/$name.drkm" --list >"$W/$name.list" 2>&1; then
    echo "FAIL $name: drkc or drkrun --list failed:"; sed 's/^/  | /' "$W/$name.log" "$W/$name.list" 2>/dev/null; fails=$((fails + 1)); return 1
  fi
}
check() { # NAME REGEX want(1: a line matches, 0: none does)
  local n; n=$(grep -cE -- "$2" "$W/$1.list")
  if { [ "$3" = 1 ] && [ "$n" -gt 0 ]; } || { [ "$3" = 0 ] && [ "$n" = 0 ]; }; then echo "PASS $1: /$2/ x$n"
  else echo "FAIL $1: /$2/ matched $n line(s) in:"; grep kernel "$W/$1.list" | sed 's/^/  | /'; fails=$((fails + 1)); fi
}
# 3 row tiles of 128 -> a grid of 4 along x, clusters of 2 programs along it
list cluster --target=sm_90a --schedule=mm.cluster=2,mm.tile_n=128 && check cluster 'k0_MatMul grid\(4,2,1\) block\(384\) cluster\(2,1,1\)' 1
list plain --target=sm_90a --schedule=mm.tile_n=128 && { check plain 'k0_MatMul grid\(3,2,1\) block\(384\) smem' 1; check plain 'cluster\(' 0; }
list gfx --target=gfx942 && check gfx 'cluster\(' 0
echo "module_cluster: $fails failure(s)"
[ "$fails" = 0 ]
