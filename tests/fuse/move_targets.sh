#!/usr/bin/env bash
# The flat groups with data movement (rope_*.drkg, move_*.drkg) through drkc at
# --fusion-aggressiveness=1 for every target kind: sm_87 + sm_90a (LLVM -> PTX -> ptxas) and
# gfx942 (LLVM -> code object -> ld.lld); the fused kernels must not spill (ptxas -v on
# sm_90a, the code object's metadata on gfx942). The numerics are the fuse.graph_* tests'.
# usage: move_targets.sh DRKC PTXAS WORKDIR GRAPH.drkg...
set -u
drkc=$1 ptxas=$2 work=$3
shift 3
mkdir -p "$work"
rc=0
fail() { echo "FAIL $*"; rc=1; ok=0; }
for f in "$@"; do
  n=$(basename "$f" .drkg)
  ok=1
  "$drkc" "$f" --fusion-aggressiveness=1 --target=sm_87,sm_90a -o "$work/$n.nv.drkm" || fail "$n: sm_87,sm_90a"
  "$drkc" "$f" --fusion-aggressiveness=1 --target=sm_90a --emit=ptx -o "$work/$n.ptx" || { fail "$n: ptx"; continue; }
  "$ptxas" -arch=sm_90a -v "$work/$n.ptx" -o "$work/$n.cubin" >"$work/$n.ptxas.log" 2>&1 || fail "$n: ptxas"
  if grep -A2 "_fused_" "$work/$n.ptxas.log" | grep "spill stores" | grep -vq " 0 bytes spill stores"; then
    fail "$n: spills on sm_90a"
  fi
  "$drkc" "$f" --fusion-aggressiveness=1 --target=gfx942 -v -o "$work/$n.amd.drkm" >"$work/$n.amd.log" 2>&1 ||
    { fail "$n: gfx942"; cat "$work/$n.amd.log"; continue; }
  if grep "_fused_" "$work/$n.amd.log" | grep "spills" | grep -vq "spills 0/0"; then
    fail "$n: spills on gfx942"
  fi
  [ $ok = 1 ] && echo "ok $n"
done
exit $rc
