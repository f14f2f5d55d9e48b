/* Tile IR -> LLVM IR for gfx942: the cross-wave round of reductions (through LDS, slots
 * indexed by work-item) and dot (part of lower.c's lowering; see lower_internal.h). The
 * rest of reduce (in-thread, then a butterfly of ds_bpermute shuffles), layout conversions
 * and LDS accesses are backends/common/lower_mem.c's; cp_async is a synchronous global
 * load + LDS store there (no async copy into LDS is used on gfx942 yet).
 * dot: kind fma (any float, blocked accumulator: v_fma/v_fmac) and kind mma_sync or mfma
 * (MFMA). An mma_sync accumulator is placed as an MFMA accumulator on this backend
 * (lower.c, dim_mfma_acc), and its dot_op operands as MFMA A/B operands, so the mma_sync
 * dots that lower/lower_matmul.c writes for NVIDIA become v_mfma_f32_16x16x16_{f16,bf16}
 * (f32 inputs: v_mfma_f32_16x16x4_f32, exact f32 products) with no data movement; `mfma` layouts with instr 32 use the 32x32 forms.
 * f8 dots use v_mfma_f32_{16x16x32,32x32x16}_{fp8,bf8}. The tile IR's f8 is OCP (e4m3fn,
 * e5m2); gfx942's MFMA reads the same bytes as e4m3fnuz / e5m2fnuz (exponent bias one
 * larger), i.e. as half their value, except 0x80 (NaN there; drkc's weight quantization and
 * gfx942's f8 casts never write it) and the OCP NaN/inf bytes. So the MFMAs of one dot run on a zero
 * accumulator and their sum, times 4 (2 per operand, exact), is added to the accumulator:
 * one weight format serves NVIDIA and AMD targets of the same module. */
#include "backends/amdgpu/lower_internal.h"

#include <string.h>

bool am_cta_sync(am_lc_t *lc, const drk_tile_op_t *op) {
  (void)op;
  am_barrier(lc);
  return true;
}

/* gpu_target_t.reduce_warps: the round through shared memory when several warps hold
 * distinct positions along ax (D->wcount[ax] > 1); xr: the nres partial results. */
bool am_reduce_warps(gpu_lc_t *g, const drk_tile_op_t *op, const gpu_dist_t *D, int ax, const char *comb,
                     drk_dtype_t t, LLVMValueRef *xr, int nres) {
  am_lc_t *lc = (am_lc_t *)g;
  int wc = D->wcount[ax];
  LLVMTypeRef ct = LLVMTypeOf(xr[0]);
  unsigned es = LLVMGetTypeKind(ct) == LLVMDoubleTypeKind || ct == lc->g.i64 ? 8 : ct == lc->g.i8 ? 1 : ct == lc->g.i16 ? 2 : 4;
  /* slot of work-item t for result k: k * block + t; the partner holding the same
   * elements in warp j along the axis is t0 + j * wstride (wstride in work-items) */
  int64_t W = lc->g.k->block;
  if ((uint64_t)(nres * W) * es > lc->cg->arch->lds_bytes)
    return gpu_err(&lc->g, op, "needing %lld bytes of LDS scratch", (long long)(nres * W) * es);
  LLVMValueRef buf = gpu_smem_scratch(&lc->g, op, (unsigned)(nres * W) * es);
  LLVMValueRef me = am_tid(lc);
  if (!am_cta_sync(lc, op)) return false; /* the scratch may still be read by an earlier op */
  for (int k = 0; k < nres; k++) {
    LLVMValueRef i = LLVMBuildAdd(lc->g.b, me, gpu_i32(&lc->g, (int64_t)k * W), "");
    LLVMBuildStore(lc->g.b, xr[k], gpu_gep_elems(&lc->g, ct, buf, i));
  }
  if (!am_cta_sync(lc, op)) return false;
  LLVMValueRef wst = gpu_i32(&lc->g, D->wstride[ax]);
  LLVMValueRef wa = LLVMBuildURem(lc->g.b, LLVMBuildUDiv(lc->g.b, me, wst, ""), gpu_i32(&lc->g, wc), "");
  LLVMValueRef w0 = LLVMBuildSub(lc->g.b, me, LLVMBuildMul(lc->g.b, wa, wst, ""), "");
  for (int k = 0; k < nres; k++) {
    LLVMValueRef acc = NULL;
    for (int j = 0; j < wc; j++) {
      LLVMValueRef w = LLVMBuildAdd(lc->g.b, w0, gpu_i32(&lc->g, (int64_t)j * D->wstride[ax]), "");
      LLVMValueRef i = LLVMBuildAdd(lc->g.b, w, gpu_i32(&lc->g, (int64_t)k * W), "");
      LLVMValueRef v = LLVMBuildLoad2(lc->g.b, ct, gpu_gep_elems(&lc->g, ct, buf, i), "");
      acc = acc ? gpu_combine(&lc->g, comb, t, acc, v) : v;
    }
    xr[k] = acc;
  }
  return am_cta_sync(lc, op);
}

/* ---- dot ---- */
static bool lower_dot_fma(am_lc_t *lc, const drk_tile_op_t *op, const gpu_dist_t *Da, const gpu_dist_t *Db,
                          const gpu_dist_t *Dc) {
  const drk_tile_value_t *A = op->operands[0], *Bv = op->operands[1], *C = op->operands[2];
  gpu_val_t *a = gpu_get(&lc->g, A), *b = gpu_get(&lc->g, Bv), *c = gpu_get(&lc->g, C);
  gpu_val_t *x = gpu_val_new(&lc->g, Dc->nregs);
  drk_dtype_t ti = A->type.dtype, tc = C->type.dtype;
  if (!drk_dtype_is_float(ti) || !drk_dtype_is_float(tc) || Bv->type.dtype != ti || ti == DRK_DT_F8E4M3 ||
      ti == DRK_DT_F8E5M2 || tc == DRK_DT_F8E4M3 || tc == DRK_DT_F8E5M2)
    return gpu_err(&lc->g, op, "kind=fma on %s x %s -> %s", drk_dtype_name(ti), drk_dtype_name(Bv->type.dtype),
                  drk_dtype_name(tc));
  if (C->type.layout->kind != DRK_TL_BLOCKED || A->type.layout->kind != DRK_TL_DOT_OP ||
      Bv->type.layout->kind != DRK_TL_DOT_OP)
    return gpu_err(&lc->g, op, "kind=fma without a blocked accumulator and dot_op operands");
  int K = (int)A->type.dims[1];
  if (Da->n[1] != K || Db->n[0] != K || Da->n[0] != Dc->n[0] || Db->n[1] != Dc->n[1])
    return gpu_err(&lc->g, op, "kind=fma with mismatched operand distributions");
  LLVMTypeRef ct = tc == DRK_DT_F64 ? lc->g.f64 : lc->g.f32;
  LLVMTypeRef rt = gpu_reg_type(&lc->g, tc, false);
  for (int i = 0; i < Dc->n[0]; i++)
    for (int j = 0; j < Dc->n[1]; j++) {
      LLVMValueRef acc = c->r[i * Dc->n[1] + j];
      if (LLVMTypeOf(acc) != ct) acc = LLVMBuildFPExt(lc->g.b, acc, ct, "");
      for (int k = 0; k < K; k++) {
        LLVMValueRef av = a->r[i * K + k], bv = b->r[k * Db->n[1] + j];
        if (LLVMTypeOf(av) != ct) av = LLVMBuildFPCast(lc->g.b, av, ct, "");
        if (LLVMTypeOf(bv) != ct) bv = LLVMBuildFPCast(lc->g.b, bv, ct, "");
        LLVMValueRef args[3] = {av, bv, acc};
        acc = drk_amdgpu_call_intrinsic(lc->cg, "llvm.fma", &ct, 1, args, 3);
      }
      if (ct != rt) acc = LLVMBuildFPTrunc(lc->g.b, acc, rt, "");
      x->r[i * Dc->n[1] + j] = acc;
    }
  gpu_set(&lc->g, op->results[0], x);
  return true;
}

/* The MFMA for inputs of type ti and instruction size instr; -1 if none. */
static int mfma_kind(drk_dtype_t ti, int instr) {
  bool s = instr == 16;
  switch (ti) {
  case DRK_DT_BF16: return s ? DRK_AMDGPU_MFMA_F32_16X16X16_BF16 : DRK_AMDGPU_MFMA_F32_32X32X8_BF16;
  case DRK_DT_F16: return s ? DRK_AMDGPU_MFMA_F32_16X16X16_F16 : DRK_AMDGPU_MFMA_F32_32X32X8_F16;
  case DRK_DT_F32: return s ? DRK_AMDGPU_MFMA_F32_16X16X4_F32 : DRK_AMDGPU_MFMA_F32_32X32X2_F32;
  case DRK_DT_F8E4M3: return s ? DRK_AMDGPU_MFMA_F32_16X16X32_FP8 : DRK_AMDGPU_MFMA_F32_32X32X16_FP8;
  case DRK_DT_F8E5M2: return s ? DRK_AMDGPU_MFMA_F32_16X16X32_BF8 : DRK_AMDGPU_MFMA_F32_32X32X16_BF8;
  default: return -1;
  }
}

/* e registers of an operand as the MFMA's A/B type (bf16 goes as i16 bits, fp8 as 8 bytes
 * packed in an i64). */
static LLVMValueRef mfma_operand(am_lc_t *lc, drk_amdgpu_mfma_t kind, drk_dtype_t ti, LLVMValueRef *v, int e) {
  LLVMTypeRef ab = drk_amdgpu_mfma_ab_type(lc->cg, kind);
  if (e == 1) return v[0];
  LLVMTypeRef et = ti == DRK_DT_F16 ? lc->g.f16 : ti == DRK_DT_BF16 ? lc->g.i16 : lc->g.i8;
  LLVMValueRef x = LLVMGetUndef(LLVMVectorType(et, (unsigned)e));
  for (int i = 0; i < e; i++) {
    LLVMValueRef s = ti == DRK_DT_BF16 ? LLVMBuildBitCast(lc->g.b, v[i], lc->g.i16, "") : v[i];
    x = LLVMBuildInsertElement(lc->g.b, x, s, gpu_i32(&lc->g, i), "");
  }
  return LLVMTypeOf(x) == ab ? x : LLVMBuildBitCast(lc->g.b, x, ab, "");
}

bool am_lower_dot(am_lc_t *lc, const drk_tile_op_t *op) {
  const drk_tile_value_t *A = op->operands[0], *Bv = op->operands[1], *C = op->operands[2], *res = op->results[0];
  const char *kind = drk_tile_op_attr_ident(op, "kind", "");
  if (A->type.kind != DRK_TT_TILE || Bv->type.kind != DRK_TT_TILE)
    return gpu_err(&lc->g, op, "kind=%s with shared-memory operands (wgmma is NVIDIA-only)", kind);
  gpu_dist_t Da, Db, Dc;
  if (!gpu_dist(&lc->g, op, &A->type, &Da) || !gpu_dist(&lc->g, op, &Bv->type, &Db) || !gpu_dist(&lc->g, op, &C->type, &Dc))
    return false;
  if (strcmp(kind, "fma") == 0) return lower_dot_fma(lc, op, &Da, &Db, &Dc);
  if (strcmp(kind, "mma_sync") != 0 && strcmp(kind, "mfma") != 0)
    return gpu_err(&lc->g, op, "kind=%s (the AMDGPU backend lowers fma, mma_sync and mfma)", kind);
  drk_dtype_t ti = A->type.dtype, tc = C->type.dtype;
  const drk_tile_layout_t *CL = C->type.layout;
  am_mfma_geom_t g;
  if (!am_mfma_geom(CL, ti, &g))
    return gpu_err(&lc->g, op, "kind=%s with accumulator layout %s (needs mma_sync or mfma over whole 64-lane waves)",
                  kind, CL->name);
  bool f8 = ti == DRK_DT_F8E4M3 || ti == DRK_DT_F8E5M2;
  if (f8 && !lc->cg->arch->has_fp8) return gpu_err(&lc->g, op, "kind=%s on %s (%s has no fp8 MFMA)", kind, drk_dtype_name(ti), lc->cg->arch->name);
  int mk = mfma_kind(ti, g.instr);
  if (mk < 0 || Bv->type.dtype != ti || tc != DRK_DT_F32)
    return gpu_err(&lc->g, op, "kind=%s on %s x %s -> %s (MFMA takes f16, bf16, f32, f8 of one type -> f32)", kind,
                  drk_dtype_name(ti), drk_dtype_name(Bv->type.dtype), drk_dtype_name(tc));
  const drk_amdgpu_mfma_info_t *mi = drk_amdgpu_mfma_info((drk_amdgpu_mfma_t)mk);
  if (lc->g.k->block < 64 || lc->g.k->block % 64)
    return gpu_err(&lc->g, op, "kind=%s in a block of %lld threads (MFMA needs whole 64-lane waves)", kind,
                  (long long)lc->g.k->block);
  int per = (int)mi->acc_elems, e = g.e;
  int RM = Dc.n[0] / per, RN = Dc.n[1], KK = (int)(A->type.dims[1] / g.k_per);
  if (Dc.n[0] % per || Da.n[0] != RM || Da.n[1] != KK * e || Db.n[0] != KK * e || Db.n[1] != RN)
    return gpu_err(&lc->g, op, "kind=%s with mismatched operand distributions", kind);
  gpu_val_t *a = gpu_get(&lc->g, A), *b = gpu_get(&lc->g, Bv), *c = gpu_get(&lc->g, C);
  gpu_val_t *x = gpu_val_new(&lc->g, Dc.nregs);
  LLVMTypeRef vt = LLVMVectorType(lc->g.f32, (unsigned)per);
  for (int rm = 0; rm < RM; rm++)
    for (int rn = 0; rn < RN; rn++) {
      LLVMValueRef acc = LLVMGetUndef(vt);
      for (int q = 0; q < per; q++)
        acc = LLVMBuildInsertElement(lc->g.b, acc, c->r[(rm * per + q) * Dc.n[1] + rn], gpu_i32(&lc->g, q), "");
      LLVMValueRef total = acc;
      if (f8) acc = LLVMConstNull(vt); /* the fnuz-scaled sum of this dot, added below */
      for (int kk = 0; kk < KK; kk++) {
        LLVMValueRef av[8], bv[8];
        for (int v = 0; v < e; v++) {
          av[v] = a->r[rm * Da.n[1] + kk * e + v];
          bv[v] = b->r[(kk * e + v) * Db.n[1] + rn];
        }
        acc = drk_amdgpu_mfma(lc->cg, (drk_amdgpu_mfma_t)mk, mfma_operand(lc, (drk_amdgpu_mfma_t)mk, ti, av, e),
                              mfma_operand(lc, (drk_amdgpu_mfma_t)mk, ti, bv, e), acc);
      }
      if (f8) {
        LLVMValueRef fs[16];
        for (int q = 0; q < per; q++) fs[q] = LLVMConstReal(lc->g.f32, 4.0);
        LLVMValueRef args[3] = {acc, LLVMConstVector(fs, (unsigned)per), total};
        acc = drk_amdgpu_call_intrinsic(lc->cg, "llvm.fma", &vt, 1, args, 3);
      }
      for (int q = 0; q < per; q++)
        x->r[(rm * per + q) * Dc.n[1] + rn] = LLVMBuildExtractElement(lc->g.b, acc, gpu_i32(&lc->g, q), "");
    }
  gpu_set(&lc->g, res, x);
  return true;
}
