#!/bin/sh
# Compiles one whole model for gfx942 (test_amd_models) and inspects the result with LLVM's
# tools: every kernel has AMDGPU metadata (wave64, group segment size, VGPR and SGPR counts),
# the matmul ("mm") and normalization ("rows") kernels use no scratch (no spills), matmul
# kernels lowered as mma_sync dots contain v_mfma in the disassembly (when EXPECT_MFMA=1),
# and the offload bundle lists gfx942 and unbundles to the same bytes. MODE fp8: the code
# object also has fp8 MFMAs (v_mfma_f32_{16x16x32,32x32x16}_fp8_fp8) and fp8 conversions
# (v_cvt_pk_fp8_f32).
# usage: check_models.sh TEST_AMD_MODELS LLVM_BINDIR MODEL.onnx DIMS OUTDIR NAME MODE EXPECT_MFMA
# (MODE: tf32, fp32 or fp8; exit 77 when a tool or the model is missing)
set -u
exe=$1 bin=$2 model=$3 dims=$4 dir=$5 name=$6 mode=$7 expect_mfma=$8
fail=0
bad() { echo "FAIL: $name: $*"; fail=1; }
tool() {
  for t in "$bin/$1" "$(command -v "$1-22" 2>/dev/null)" "$(command -v "$1" 2>/dev/null)"; do
    if [ -n "$t" ] && [ -x "$t" ]; then echo "$t"; return 0; fi
  done
  return 1
}
readelf=$(tool llvm-readelf) || { echo "SKIP: llvm-readelf not found"; exit 77; }
objdump=$(tool llvm-objdump) || { echo "SKIP: llvm-objdump not found"; exit 77; }
bundler=$(tool clang-offload-bundler) || { echo "SKIP: clang-offload-bundler not found (Debian clang-tools-22)"; exit 77; }
[ -f "$model" ] || { echo "SKIP: $model not generated"; exit 77; }
mkdir -p "$dir" || exit 1
"$exe" "$model" "$dims" "$dir" "$name" "$mode"
rc=$?
[ $rc -eq 77 ] && exit 77
[ $rc -eq 0 ] || { echo "FAIL: $name: test_amd_models exited $rc"; exit 1; }
h=$dir/$name.hsaco
"$readelf" -h "$h" | grep -q "ABI Version: *3" || bad "not code object v5"
"$readelf" --notes "$h" > "$dir/$name.notes" || bad "llvm-readelf --notes failed"
# One record per kernel from the metadata: name wave lds vgpr sgpr scratch vgpr_spills.
awk '
  /^ *- \.agpr_count:/ { if (n != "") print n, w, g, v, s, p, vs; n = ""; w = g = v = s = p = vs = "?" }
  /\.group_segment_fixed_size:/ { g = $2 }
  /\.private_segment_fixed_size:/ { p = $2 }
  /\.sgpr_count:/ { s = $2 }
  /\.vgpr_count:/ { v = $2 }
  /\.vgpr_spill_count:/ { vs = $2 }
  /\.wavefront_size:/ { w = $2 }
  /^    \.name: / { n = $2 }
  END { if (n != "") print n, w, g, v, s, p, vs }' "$dir/$name.notes" > "$dir/$name.meta"
nk=0
while read -r k kind op mma; do
  nk=$((nk + 1))
  line=$(grep "^$k " "$dir/$name.meta")
  [ -n "$line" ] || { bad "kernel $k has no metadata"; continue; }
  set -- $line
  [ "$2" = 64 ] || bad "$k: wavefront size $2"
  case "$3" in ''|*[!0-9]*) bad "$k: no group segment size";; esac
  [ "$4" -ge 1 ] 2>/dev/null && [ "$4" -le 512 ] || bad "$k: vgpr count $4"
  [ "$5" -ge 1 ] 2>/dev/null && [ "$5" -le 112 ] || bad "$k: sgpr count $5"
  case "$kind" in
    mm|rows) [ "$6" = 0 ] || bad "$k ($kind $op): scratch $6 bytes (spills: vgpr $7)";;
  esac
  if [ "$kind" = mm ] && [ "$mma" = mma_sync ]; then
    "$objdump" -d --mcpu=gfx942 "$h" | awk -v k="$k" '$0 ~ "^[0-9a-f]+ <"k">:" { on = 1; next } /^[0-9a-f]+ </ { on = 0 } on' \
      | grep -q v_mfma || bad "$k: no v_mfma in its disassembly"
    mfma=1
  fi
done < "$dir/$name.kernels"
[ $nk -gt 0 ] || bad "no kernels"
[ "$expect_mfma" = 1 ] && [ "${mfma:-0}" != 1 ] && bad "no matmul kernel lowered as an mma_sync dot (MFMA)"
if [ "$mode" = fp8 ]; then
  "$objdump" -d --mcpu=gfx942 "$h" > "$dir/$name.s" || bad "llvm-objdump failed"
  grep -Eq 'v_mfma_f32_(16x16x32|32x32x16)_fp8_fp8' "$dir/$name.s" || bad "no fp8 MFMA in the code object"
  grep -q 'v_cvt_pk_fp8_f32' "$dir/$name.s" || bad "no v_cvt_pk_fp8_f32 (activation quantization) in the code object"
fi
gfx=hipv4-amdgcn-amd-amdhsa--gfx942
"$bundler" -list -type=o -input="$dir/$name.hipfb" > "$dir/$name.list" 2>&1 || bad "bundler -list failed"
grep -qx "$gfx" "$dir/$name.list" || bad "bundle does not list $gfx: $(cat "$dir/$name.list")"
"$bundler" -unbundle -type=o -targets=$gfx -input="$dir/$name.hipfb" -output="$dir/$name.unbundled" \
  || bad "bundler -unbundle failed"
cmp -s "$dir/$name.unbundled" "$h" || bad "unbundled code object differs"
echo "--- $name ($mode): $nk kernels; name wave lds vgpr sgpr scratch vgpr_spills:"
cat "$dir/$name.meta"
[ $fail -eq 0 ] && echo "OK: $name"
exit $fail
