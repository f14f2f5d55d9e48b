#!/usr/bin/env bash
# The attention test graphs through drkc at --fusion-aggressiveness=3 for every target kind:
# sm_87 + sm_90a (LLVM -> PTX -> ptxas) and gfx942 (LLVM -> code object -> ld.lld). Each graph
# must give one fused attention kernel, which must not spill (ptxas -v on sm_90a, the code
# object's metadata on gfx942) and, on gfx942, must use MFMA for f16/bf16.
# usage: attention_targets.sh DRKC PTXAS LLVM_BIN_DIR WORKDIR GRAPH.drkg...
set -u
drkc=$1 ptxas=$2 llvm=$3 work=$4
shift 4
mkdir -p "$work"
rc=0
fail() { echo "FAIL $*"; rc=1; ok=0; }
for f in "$@"; do
  n=$(basename "$f" .drkg)
  ok=1
  "$drkc" "$f" --fusion-aggressiveness=3 --emit=tile -o "$work/$n.drkt" || { fail "$n: tile IR"; continue; }
  k=$(grep -c '^kernel @k[0-9]*_fused_attention' "$work/$n.drkt")
  [ "$k" = 1 ] || fail "$n: $k attention kernels, expected 1"
  "$drkc" "$f" --fusion-aggressiveness=3 --target=sm_87,sm_90a -o "$work/$n.nv.drkm" || fail "$n: sm_87,sm_90a"
  "$drkc" "$f" --fusion-aggressiveness=3 --target=sm_90a --emit=ptx -o "$work/$n.ptx" || fail "$n: ptx"
  "$ptxas" -arch=sm_90a -v "$work/$n.ptx" -o "$work/$n.cubin" >"$work/$n.ptxas.log" 2>&1 || fail "$n: ptxas"
  grep -A2 "_fused_attention" "$work/$n.ptxas.log" | grep -q " 0 bytes spill stores" || fail "$n: spills on sm_90a"
  "$drkc" "$f" --fusion-aggressiveness=3 --target=gfx942 -v -o "$work/$n.amd.drkm" >"$work/$n.amd.log" 2>&1 ||
    { fail "$n: gfx942"; cat "$work/$n.amd.log"; continue; }
  grep "_fused_attention" "$work/$n.amd.log" | grep -q "spills 0/0" || fail "$n: spills on gfx942"
  "$drkc" "$f" --fusion-aggressiveness=3 --target=gfx942 --emit=hsaco -o "$work/$n.hsaco" || fail "$n: hsaco"
  if grep -q "mma = mma_sync" "$work/$n.drkt"; then
    "$llvm/llvm-objdump" -d --mcpu=gfx942 "$work/$n.hsaco" | grep -q "v_mfma_f32_16x16x16" || fail "$n: no MFMA on gfx942"
  fi
  [ $ok = 1 ] && echo "ok $n"
done
exit $rc
