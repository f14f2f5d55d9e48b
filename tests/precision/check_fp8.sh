#!/bin/sh
# --precision=fp8 end to end through drkc on one generated model: the PTX for sm_90a has
# fp8 mma.sync (m16n8k32 e4m3) and the e4m3 conversion, a module builds for sm_89 and sm_90a
# (ptxas), the gfx942 code object has fp8 MFMA and v_cvt_pk_fp8_f32, the interpreter's fp8
# result is within the --check tolerance of the f32 model, and a target without fp8 falls
# back to f16 with a warning naming it (whose PTX then has no fp8 mma: the greps can fail).
# usage: check_fp8.sh DRKC LLVM_BINDIR MODEL_DIR OUTDIR   (exit 77 when a tool is missing)
set -u
drkc=$1 bin=$2 mdir=$3 out=$4
fail=0
bad() { echo "FAIL: $*"; fail=1; }
objdump=
for t in "$bin/llvm-objdump" "$(command -v llvm-objdump-22 2>/dev/null)" "$(command -v llvm-objdump 2>/dev/null)"; do
  if [ -n "$t" ] && [ -x "$t" ]; then objdump=$t; break; fi
done
[ -n "$objdump" ] || { echo "SKIP: llvm-objdump not found"; exit 77; }
[ -f "$mdir/model.onnx" ] || { echo "SKIP: $mdir/model.onnx not generated"; exit 77; }
mkdir -p "$out" || exit 1
m=$mdir/model.onnx shapes="--shapes-from=$mdir/test_data_set_0"
"$drkc" "$m" $shapes --precision=fp8 --target=sm_90a --emit=ptx -o "$out/fp8.ptx" || bad "drkc --emit=ptx (sm_90a) failed"
grep -q 'mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32' "$out/fp8.ptx" || bad "no fp8 mma.sync in the sm_90a PTX"
grep -q 'cvt.rn.satfinite.e4m3x2.f32' "$out/fp8.ptx" || bad "no e4m3 conversion in the sm_90a PTX"
"$drkc" "$m" $shapes --precision=fp8 --target=sm_89,sm_90a -o "$out/fp8.drkm" || bad "drkc module for sm_89,sm_90a failed"
"$drkc" "$m" $shapes --precision=fp8 --target=gfx942 --emit=hsaco -o "$out/fp8.hsaco" || bad "drkc --emit=hsaco failed"
"$objdump" -d --mcpu=gfx942 "$out/fp8.hsaco" > "$out/fp8.s" || bad "llvm-objdump failed"
grep -Eq 'v_mfma_f32_(16x16x32|32x32x16)_fp8_fp8' "$out/fp8.s" || bad "no fp8 MFMA in the gfx942 code object"
grep -q 'v_cvt_pk_fp8_f32' "$out/fp8.s" || bad "no v_cvt_pk_fp8_f32 in the gfx942 code object"
"$drkc" "$m" $shapes --precision=fp8 --target=sm_90a,gfx942 -o "$out/fp8_mixed.drkm" || bad "drkc module for sm_90a,gfx942 failed"
"$drkc" run "$m" --device=cpu --precision=fp8 --check --input-dir "$mdir/test_data_set_0" > "$out/check.txt" 2>&1 \
  || bad "drkc run --check (cpu, fp8) failed: $(cat "$out/check.txt")"
grep -q 'PASS' "$out/check.txt" || bad "no PASS from drkc run --check"
cat "$out/check.txt" | grep check
"$drkc" "$m" $shapes --precision=fp8 --target=sm_87 --emit=ptx -o "$out/fp16.ptx" 2> "$out/fallback.txt" \
  || bad "drkc fp8 -> fp16 fallback (sm_87) failed"
grep -q 'warning: sm_87 has no fp8' "$out/fallback.txt" || bad "no fallback warning naming sm_87: $(cat "$out/fallback.txt")"
grep -q 'e4m3' "$out/fp16.ptx" && bad "fp8 instructions in the fp16 fallback's PTX"
[ $fail -eq 0 ] && echo "OK"
exit $fail
