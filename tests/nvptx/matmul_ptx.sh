#!/usr/bin/env bash
# The general matmul kernel (lower/lower_matmul.c) through the NVPTX backend, checked in the
# PTX it produces: the cp.async ring (16-byte copies, commit/wait groups), ldmatrix into the
# mma.sync operands (.trans where the shared tile is not K-contiguous), mma.sync m16n8k16 for
# f16/bf16 and m16n8k8 tf32 (with cvt.rna.tf32.f32) for f32 under --matmul-precision=high or
# --precision=tf32, FFMA otherwise; ptxas -v: no spills at sm_80 and sm_90 for the 128x128
# kernel; and the same graphs compile for gfx942. Needs no GPU.
# usage: matmul_ptx.sh DRKC PTXAS WORK   (PTXAS may be empty: the ptxas checks are skipped)
set -u
DRKC=$1; PTXAS=$2; W=$3
G=$(cd "$(dirname "$0")" && pwd)/matmul
rm -rf "$W"; mkdir -p "$W"
fail=0
bad() { echo "FAIL $*"; fail=$((fail + 1)); }
ptx() { # out graph arch [drkc options...]
  local out=$1 g=$2 arch=$3; shift 3
  # --portable: sm_90 here is the portable mma.sync path (plain sm_90 builds sm_90a's wgmma)
  "$DRKC" "$G/$g.drkg" --target="$arch" --portable --emit=ptx "$@" -o "$W/$out.ptx" 2>"$W/$out.err" ||
    { bad "$out: drkc failed: $(head -c 300 "$W/$out.err")"; return 1; }
}
has() { grep -q -- "$2" "$W/$1.ptx" || bad "$1: no '$2' in the PTX"; }
hasnt() { ! grep -q -- "$2" "$W/$1.ptx" || bad "$1: unexpected '$2' in the PTX"; }

# f16, 128x128 tiles of 8 warps: N-contiguous B takes ldmatrix.trans, K-contiguous A the plain one
if ptx f16 mm_f16_big sm_80; then
  has f16 "cp.async.cg.shared.global \[%r[d0-9]*[^]]*\], \[%rd[0-9]*[^]]*\], 16;"
  has f16 "cp.async.commit_group"
  has f16 "cp.async.wait_group 	2"
  has f16 "ldmatrix.sync.aligned.m8n8.x4.shared.b16"
  has f16 "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16"
  has f16 "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
  hasnt f16 "ld.shared.u16"
  hasnt f16 "ld.shared.b16"
  [ "$(grep -c "bar.sync" "$W/f16.ptx")" = 1 ] || bad "f16: expected one barrier (one per k step in the loop)"
fi
"$DRKC" "$G/mm_f16_big.drkg" --target=sm_80 --emit=tile 2>/dev/null | grep -q "warps = 8, tile = \[128, 128, 32\], stages = 4, mma = mma_sync" ||
  bad "mm_f16_big: schedule is not 8 warps of 128x128x32 in 4 stages"
# f16 Linear (Gemm transB): the gemm-to-matmul pass stores the constant weight transposed once
# at compile time ([K, N], N-contiguous, as every MatMul weight), so B goes through
# ldmatrix .trans like any MatMul's and A (K-contiguous) through the plain form
if ptx linear linear_f16 sm_86; then
  has linear "ldmatrix.sync.aligned.m8n8.x4.shared.b16"
  has linear "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16"
  has linear "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
fi
if ptx bf16 mm_bf16_edges sm_87; then
  has bf16 "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"
  has bf16 "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16"
fi
# f32: TF32 tensor cores only when allowed
for p in "--matmul-precision=high" "--precision=tf32"; do
  if ptx tf32 mm_f32_big sm_80 "$p"; then
    has tf32 "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"
    has tf32 "cvt.rna.tf32.f32"
    has tf32 "cp.async.cg.shared.global"
  fi
  grep -q "warning" "$W/tf32.err" && bad "tf32 ($p): drkc warns: $(head -c 200 "$W/tf32.err")"
done
if ptx fp32 mm_f32 sm_80; then
  hasnt fp32 "mma.sync"
  hasnt fp32 "tf32"
  has fp32 "fma.rn.f32"
  has fp32 "cp.async"
fi
if ptx convf16 conv_f16 sm_90; then
  has convf16 "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
  has convf16 "ldmatrix.sync.aligned.m8n8.x4"
fi
ptx convtf32 conv_f32 sm_90 --matmul-precision=high && has convtf32 "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"

# registers and spills of the 128x128 kernels
if [ -n "$PTXAS" ] && [ -x "$PTXAS" ]; then
  for arch in sm_80 sm_90; do
    for c in "f16big mm_f16_big" "tf32big mm_f32_big --matmul-precision=high"; do
      set -- $c
      n=$1_$arch; g=$2; shift 2
      ptx "$n" "$g" "$arch" "$@" || continue
      if "$PTXAS" -arch="$arch" -O3 -v "$W/$n.ptx" -o "$W/$n.cubin" >"$W/$n.log" 2>&1; then
        grep -q " 0 bytes spill stores, 0 bytes spill loads" "$W/$n.log" || bad "$n: spills: $(grep spill "$W/$n.log")"
        echo "$n: $(grep -o "Used [0-9]* registers" "$W/$n.log")"
      else
        bad "$n: ptxas failed: $(head -c 300 "$W/$n.log")"
      fi
    done
  done
fi

# gfx942 compiles what the lowering emits (cp_async as synchronous copies, mma_sync as MFMA)
for c in "mm_f16_big" "linear_f16" "conv_f16" "mm_f32 --matmul-precision=high" "conv_f32"; do
  set -- $c
  g=$1; shift
  "$DRKC" "$G/$g.drkg" --target=gfx942 --emit=hsaco "$@" -o "$W/$g.hsaco" 2>"$W/$g.amd.err" ||
    bad "$g for gfx942: $(grep -m1 error "$W/$g.amd.err" | head -c 300)"
done

[ "$fail" = 0 ] && echo "matmul PTX checks passed"
[ "$fail" = 0 ]
