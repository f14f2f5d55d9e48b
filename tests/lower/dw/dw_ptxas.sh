#!/usr/bin/env bash
# The direct depthwise kernel through the whole compiler: in each graph here every grouped
# conv lowers to the dw kernel (--emit=schedules), the PTX multiplies-adds with fma.rn.f32
# (the tile IR's `fma`), the f16 NHWC graph's input and output move as 16-byte vectors
# (ld/st.global.v4.b32), and ptxas assembles it for sm_90a (--emit=cubin).
# usage: dw_ptxas.sh DRKC PTXAS DIR   (77: no ptxas)
set -uo pipefail
DRKC=$1; PTXAS=$2; DIR=$3
[ -x "$PTXAS" ] || { echo "SKIP: no ptxas"; exit 77; }
export DRK_PTXAS=$PTXAS
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
fail=0
for g in "$DIR"/dw_*.drkg; do
  n=$(basename "$g" .drkg)
  "$DRKC" "$g" --target=sm_90a --emit=schedules -o "$T/$n.sched" || { echo "FAIL $n: schedules"; fail=1; continue; }
  convs=$(grep -c '^k[0-9]*_Conv' "$T/$n.sched"); dw=$(grep -c '^k[0-9]*_Conv[A-Z]* .* dw dw.direct=1 ' "$T/$n.sched")
  [ "$convs" -gt 0 ] && [ "$convs" = "$dw" ] || { echo "FAIL $n: $dw of $convs convs on the dw kernel"; fail=1; }
  "$DRKC" "$g" --target=sm_90a --emit=ptx -o "$T/$n.ptx" || { echo "FAIL $n: ptx"; fail=1; continue; }
  grep -q 'fma.rn.f32' "$T/$n.ptx" || { echo "FAIL $n: no fma.rn.f32"; fail=1; }
  if [ "$n" = dw_nhwc ]; then
    grep -q 'ld.global.v4.b32' "$T/$n.ptx" && grep -q 'st.global.v4.b32' "$T/$n.ptx" ||
      { echo "FAIL $n: no 16-byte loads/stores"; fail=1; }
  fi
  "$DRKC" "$g" --target=sm_90a --emit=cubin -o "$T/$n.cubin" || { echo "FAIL $n: ptxas"; fail=1; continue; }
  echo "ok $n: $convs convs on the dw kernel, ptxas sm_90a"
done
exit $fail
