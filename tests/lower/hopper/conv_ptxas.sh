#!/usr/bin/env bash
# The sm_90a implicit-GEMM convolution through the whole compiler: each graph here lowers by
# default (conv.hopper=1) with every ConvNHWC on the conv_ws kernel (--emit=schedules), its PTX
# has the 4-D TMA box loads of the input, the 3-D ones of the filter and K-major-B wgmma
# (tnspB 0), and ptxas assembles it for sm_90a (--emit=cubin). With conv.hopper=0 pinned the
# convs stay on mma_sync and --report says why. usage: conv_ptxas.sh DRKC PTXAS DIR   (77: no ptxas)
set -uo pipefail
DRKC=$1; PTXAS=$2; DIR=$3
[ -x "$PTXAS" ] || { echo "SKIP: no ptxas"; exit 77; }
export DRK_PTXAS=$PTXAS
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
fail=0
for g in "$DIR"/conv_hopper*.drkg; do
  n=$(basename "$g" .drkg)
  "$DRKC" "$g" --target=sm_90a --emit=schedules -o "$T/$n.sched" || { echo "FAIL $n: schedules"; fail=1; continue; }
  convs=$(grep -c '^k[0-9]*_ConvNHWC' "$T/$n.sched"); ws=$(grep -c '^k[0-9]*_ConvNHWC .* conv_ws ' "$T/$n.sched")
  [ "$convs" -gt 0 ] && [ "$convs" = "$ws" ] || { echo "FAIL $n: $ws of $convs convs on conv_ws"; fail=1; }
  "$DRKC" "$g" --target=sm_90a --schedule=conv.hopper=1 --emit=ptx -o "$T/$n.ptx" || { echo "FAIL $n: ptx"; fail=1; continue; }
  grep -q 'cp.async.bulk.tensor.4d' "$T/$n.ptx" && grep -q 'cp.async.bulk.tensor.3d' "$T/$n.ptx" &&
    grep -Eq 'wgmma.mma_async.sync.aligned.m64n[0-9]+k16.f32.(f16|bf16).(f16|bf16) .*, 1, 1, 0, 0;' "$T/$n.ptx" ||
    { echo "FAIL $n: PTX lacks the 4-D/3-D TMA loads or the K-major wgmma"; fail=1; }
  "$DRKC" "$g" --target=sm_90a --schedule=conv.hopper=1 --emit=cubin -o "$T/$n.cubin" || { echo "FAIL $n: ptxas"; fail=1; continue; }
  "$DRKC" "$g" --target=sm_90a --schedule=conv.hopper=0 --report -o "$T/$n.drkm" 2>"$T/$n.report" || { echo "FAIL $n: conv.hopper=0 build"; fail=1; continue; }
  grep -q 'report: k[0-9]*_ConvNHWC: TMA + wgmma convolution off (conv.hopper=0 pinned)' "$T/$n.report" || { echo "FAIL $n: --report does not say why"; fail=1; }
  echo "ok $n: $convs convs on conv_ws, ptxas sm_90a"
done
exit $fail
