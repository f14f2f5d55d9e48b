#!/bin/sh
# --precision=auto --accuracy-budget=E through drkc on one generated model:
#  - budgets 1e-2 and 1e-4 each give a choice (--report) whose every output is within the
#    budget, and the two choices differ;
#  - checked independently: `drkc run --device=cpu --check` runs the chosen mix through the
#    interpreter against the model as given, on inputs the choice never saw (--seed 5), with
#    the budget as tolerance; on the calibration inputs (--seed 0's draws) the check's error is
#    the one the report measured;
#  - a budget only fp32 meets (1e-9) gives fp32 for every group that changes the outputs;
#  - --target=sm_87 never offers fp8 and says so naming sm_87; --calibration=DIR reads DIR;
#  - a group chosen tf32 runs on tf32 mma.sync in the PTX;
#  - invalid budgets and combinations are usage errors (exit 2);
#  - with ptxas: the module records the choice (PRECISION_AUTO, drkrun --list).
# usage: check_auto.sh DRKC DRKRUN MODEL_DIR OUTDIR BIND|- PTXAS(0|1)   (exit 77: no model)
set -u
drkc=$1 drkrun=$2 mdir=$3 out=$4 bind=$5 ptxas=$6
fail=0
bad() { echo "FAIL: $*"; fail=1; }
[ -f "$mdir/model.onnx" ] || { echo "SKIP: $mdir/model.onnx not generated"; exit 77; }
mkdir -p "$out" || exit 1
m=$mdir/model.onnx
b=
[ "$bind" != "-" ] && b="--bind=$bind"

# relative difference of two numbers below 1% (the report prints %.2e, the check %.3g)
close() { awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; s = (a < 0 ? -a : a); exit !(d <= 0.01 * s + 1e-12) }'; }

for e in 1e-2 1e-4; do
  r=$out/report_$e.txt
  "$drkc" "$m" $b --precision=auto --accuracy-budget=$e --emit=graph -o "$out/auto_$e.drkg" --report 2> "$r" \
    || bad "drkc --accuracy-budget=$e failed: $(cat "$r")"
  grep '^  group ' "$r" | sed 's/ alone .*//' > "$out/groups_$e.txt"
  [ -s "$out/groups_$e.txt" ] || bad "budget $e: no op groups in the report"
  grep -q '^  output ' "$r" || bad "budget $e: no output lines in the report"
  grep '^  output ' "$r" | grep -v ' <= ' && bad "budget $e: an output over the budget"
  grep -E '^precision auto|^  (group|output) ' "$r"
  # independently, on other inputs
  "$drkc" run "$m" $b --device=cpu --precision=auto --accuracy-budget=$e --check --seed 5 > "$out/check5_$e.txt" 2>&1 \
    || bad "budget $e: drkc run --check --seed 5 failed: $(cat "$out/check5_$e.txt")"
  grep 'check output' "$out/check5_$e.txt"
  grep 'check output' "$out/check5_$e.txt" | grep -q FAIL && bad "budget $e: --check FAIL on --seed 5"
  # on the calibration inputs: the same error as measured
  "$drkc" run "$m" $b --device=cpu --precision=auto --accuracy-budget=$e --check --seed 0 > "$out/check0_$e.txt" 2>&1 \
    || bad "budget $e: drkc run --check --seed 0 failed: $(cat "$out/check0_$e.txt")"
  want=$(grep '^  output ' "$r" | head -1 | sed 's/.* error \([^ ]*\) .*/\1/')
  got=$(grep 'check output 0' "$out/check0_$e.txt" | sed 's/.*rel error \([^ ]*\) .*/\1/')
  close "$got" "$want" || bad "budget $e: --check on the calibration inputs measures $got, the choice measured $want"
  # tf32 groups run on tf32 tensor cores
  if grep -q ' tf32$' "$out/groups_$e.txt"; then
    "$drkc" "$m" $b --precision=auto --accuracy-budget=$e --target=sm_90a --emit=ptx -o "$out/auto_$e.ptx" \
      || bad "budget $e: --emit=ptx failed"
    grep -q 'mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32' "$out/auto_$e.ptx" \
      || bad "budget $e: a group chose tf32 but the PTX has no tf32 mma.sync"
  fi
done
cmp -s "$out/groups_1e-2.txt" "$out/groups_1e-4.txt" && bad "budgets 1e-2 and 1e-4 chose the same mix"

# only fp32 meets 1e-9
"$drkc" "$m" $b --precision=auto --accuracy-budget=1e-9 --emit=graph -o "$out/auto_1e-9.drkg" --report 2> "$out/report_1e-9.txt" \
  || bad "drkc --accuracy-budget=1e-9 failed"
# (a group whose half precision changes nothing, e.g. an attention mask of 0 and -10000, may
# stay half: its own error is 0)
grep '^  group ' "$out/report_1e-9.txt" | grep -v ' fp32 ' | grep -v 'alone 0.0e+00$' && bad "budget 1e-9: a group that is not fp32"

# no fp8 on sm_87
"$drkc" "$m" $b --precision=auto --accuracy-budget=1e-2 --target=sm_87 --emit=graph -o "$out/auto_87.drkg" --report \
  2> "$out/report_87.txt" || bad "drkc --target=sm_87 failed"
grep -q 'fp8 not offered: sm_87 has no fp8' "$out/report_87.txt" || bad "sm_87: the report does not say fp8 is not offered"
grep '^  group ' "$out/report_87.txt" | grep ' fp8 ' && bad "sm_87: a group chose fp8"

# --calibration=DIR (the model's own test data; symbolic dims bound to it)
if [ -d "$mdir/test_data_set_0" ]; then
  "$drkc" "$m" --shapes-from="$mdir/test_data_set_0" --precision=auto --accuracy-budget=1e-2 \
    --calibration="$mdir/test_data_set_0" --emit=graph -o "$out/auto_cal.drkg" --report 2> "$out/report_cal.txt" \
    || bad "--calibration failed: $(cat "$out/report_cal.txt")"
  grep '^  output ' "$out/report_cal.txt" | grep -v ' <= ' && bad "--calibration: an output over the budget"
  "$drkc" "$m" $b --precision=auto --accuracy-budget=1e-2 --calibration="$out/no-such-dir" --emit=graph -o /dev/null \
    2> "$out/nocal.txt" && bad "--calibration of a missing folder succeeded"
  grep -q 'no-such-dir has no input_0' "$out/nocal.txt" || bad "missing calibration folder: $(cat "$out/nocal.txt")"
fi

# usage errors
for v in 0 -1 1 2 abc nan inf 1e-2x ""; do
  "$drkc" "$m" --precision=auto "--accuracy-budget=$v" --emit=graph -o /dev/null 2>/dev/null
  [ $? -eq 2 ] || bad "--accuracy-budget='$v' is not a usage error"
done
"$drkc" "$m" --precision=fp16 --accuracy-budget=1e-2 --emit=graph -o /dev/null 2>/dev/null
[ $? -eq 2 ] || bad "--precision=fp16 with a budget is not a usage error"
"$drkc" "$m" --precision=auto --accuracy-budget=1e-2 --matmul-precision=high --emit=graph -o /dev/null 2>/dev/null
[ $? -eq 2 ] || bad "--matmul-precision=high with a budget is not a usage error"
"$drkc" "$m" --calibration="$mdir" --emit=graph -o /dev/null 2>/dev/null
[ $? -eq 2 ] || bad "--calibration without a budget is not a usage error"

# the module records the choice
if [ "$ptxas" = 1 ]; then
  "$drkc" "$m" $b --precision=auto --accuracy-budget=1e-2 --target=sm_90a -o "$out/auto.drkm" 2> "$out/module.txt" \
    || bad "module build failed: $(cat "$out/module.txt")"
  "$drkrun" "$out/auto.drkm" --list > "$out/list.txt" 2>&1 || bad "drkrun --list failed"
  grep -q '^  precision auto: budget 1e-02' "$out/list.txt" || bad "drkrun --list shows no precision auto section"
  n1=$(grep -c '^    group ' "$out/list.txt"); n2=$(grep -c '^  group ' "$out/report_1e-2.txt")
  [ "$n1" = "$n2" ] || bad "the module lists $n1 groups, the report $n2"
  grep -q "^    output '.*' <= 1e-02\|^    output .* <= 1e-02" "$out/list.txt" || bad "drkrun --list shows no output error within the budget"
fi
[ $fail -eq 0 ] && echo "OK"
exit $fail
