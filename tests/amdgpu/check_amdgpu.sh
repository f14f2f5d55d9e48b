#!/bin/sh
# Runs test_amdgpu, then inspects what it wrote with LLVM's tools and clang-offload-bundler:
# kernel metadata (llvm-readelf --notes), MFMA in the disassembly (llvm-objdump), the offload
# bundle listed and unbundled by clang-offload-bundler, byte-identical to the one clang makes,
# and clang's bundle read back by our reader.
# usage: check_amdgpu.sh TEST_AMDGPU LLVM_BINDIR WORKDIR   (exit 77 when a tool is missing)
set -u
exe=$1 bin=$2 dir=$3
fail=0
bad() { echo "FAIL: $*"; fail=1; }
tool() {
  for t in "$bin/$1" "$(command -v "$1-22" 2>/dev/null)" "$(command -v "$1" 2>/dev/null)"; do
    if [ -n "$t" ] && [ -x "$t" ]; then echo "$t"; return 0; fi
  done
  return 1
}
readelf=$(tool llvm-readelf) || { echo "SKIP: llvm-readelf not found"; exit 77; }
objdump=$(tool llvm-objdump) || { echo "SKIP: llvm-objdump not found"; exit 77; }
bundler=$(tool clang-offload-bundler) || { echo "SKIP: clang-offload-bundler not found (Debian clang-tools-22)"; exit 77; }
rm -rf "$dir" && mkdir -p "$dir" || exit 1
"$exe" build "$dir"
rc=$?
[ $rc -eq 77 ] && exit 77
[ $rc -eq 0 ] || bad "test_amdgpu build exited $rc"

for h in kernels mfma; do
  f=$dir/$h.hsaco
  [ -s "$f" ] || { bad "$f missing"; continue; }
  # Code object v5 = ELF ABI version 3; machine AMDGPU, gfx942.
  "$readelf" -h "$f" | grep -q "ABI Version: *3" || bad "$h: not code object v5"
  "$readelf" -h "$f" | grep -qi "gfx942" || bad "$h: not gfx942"
  notes=$("$readelf" --notes "$f")
  echo "$notes" > "$dir/$h.notes"
  for key in .group_segment_fixed_size .vgpr_count .sgpr_count .wavefront_size; do
    echo "$notes" | grep -q "$key:" || bad "$h: no $key in the metadata"
  done
  echo "$notes" | grep "\.wavefront_size:" | grep -vq " 64$" && bad "$h: a kernel is not wave64"
  echo "$notes" | grep "\.private_segment_fixed_size:" | grep -vq " 0$" && bad "$h: scratch (spills) used"
  echo "$notes" | grep "\.vgpr_count:" | awk '{ if ($2 < 1 || $2 > 512) exit 1 }' || bad "$h: vgpr_count out of range"
  echo "$notes" | grep "\.sgpr_count:" | awk '{ if ($2 < 1 || $2 > 112) exit 1 }' || bad "$h: sgpr_count out of range"
  echo "$notes" | grep -q "amdhsa.version" || bad "$h: no amdhsa.version"
done
grep -A3 "\.name: *mfma_bf16" "$dir/mfma.notes" > /dev/null || bad "mfma_bf16 not in the metadata"
awk '/group_segment_fixed_size/ { g = $2 } /\.name:/ { if ($2 == "mfma_bf16" && g == 1024) ok = 1 } END { exit !ok }' \
  "$dir/mfma.notes" || bad "mfma_bf16: .group_segment_fixed_size is not 1024"

dis=$("$objdump" -d --mcpu=gfx942 "$dir/mfma.hsaco")
echo "$dis" | grep -q "v_mfma_f32_32x32x8_bf16" || bad "no v_mfma_f32_32x32x8_bf16 in the disassembly"
for m in 16x16x16_bf16 32x32x8_f16 16x16x16_f16 16x16x32_fp8_fp8 32x32x16_fp8_fp8 16x16x32_bf8_bf8 32x32x16_bf8_bf8; do
  echo "$dis" | grep -q "v_mfma_f32_$m" || bad "no v_mfma_f32_$m in the disassembly"
done
"$objdump" -d --mcpu=gfx942 "$dir/kernels.hsaco" | grep -q ds_bpermute_b32 || bad "no ds_bpermute_b32"

gfx=hipv4-amdgcn-amd-amdhsa--gfx942
host=host-x86_64-unknown-linux-gnu
"$bundler" -list -type=o -input="$dir/mfma.hipfb" > "$dir/list.txt" 2>&1 || bad "bundler -list failed: $(cat "$dir/list.txt")"
grep -qx "$gfx" "$dir/list.txt" || bad "bundler does not list $gfx: $(cat "$dir/list.txt")"
"$bundler" -unbundle -type=o -targets=$gfx -input="$dir/mfma.hipfb" -output="$dir/unbundled.hsaco" \
  || bad "bundler -unbundle failed"
cmp -s "$dir/unbundled.hsaco" "$dir/mfma.hsaco" || bad "unbundled code object differs from ours"
: > "$dir/empty"
"$bundler" -type=o -targets=$host,$gfx -input="$dir/empty" -input="$dir/mfma.hsaco" \
  -output="$dir/clang.hipfb" -bundle-align=4096 || bad "bundler could not make a bundle"
cmp -s "$dir/clang.hipfb" "$dir/mfma.hipfb" || bad "our bundle differs from clang-offload-bundler's"
"$exe" readbundle "$dir/clang.hipfb" "$dir/mfma.hsaco" || bad "our reader on clang's bundle"
"$bundler" -type=o -targets=$host,$gfx -input="$dir/empty" -input="$dir/mfma.hsaco" \
  -output="$dir/clang1.hipfb" || bad "bundler could not make a packed bundle"
"$exe" readbundle "$dir/clang1.hipfb" "$dir/mfma.hsaco" || bad "our reader on clang's packed bundle"

[ $fail -eq 0 ] && echo "OK: code objects, metadata, MFMA and offload bundles check out"
exit $fail
