/* Tile IR -> LLVM IR for NVPTX: CTA barriers, the cross-warp round of reductions (through
 * shared memory, slots indexed by warp and lane) and dot (part of lower.c's lowering; see
 * lower_internal.h). The rest of reduce, layout conversions, local_load/local_store and
 * cp.async addressing are backends/common/lower_mem.c's. dot: kind fma (any float, blocked accumulator, dot_op operands of it)
 * and mma_sync (f16/bf16 inputs, f32 accumulator: mma.sync.m16n8k16). */
#include "backends/nvptx/lower_internal.h"

#include <string.h>

bool nv_cta_sync(nv_lc_t *lc, const drk_tile_op_t *op) {
  if (lc->in_warp_group) return gpu_err(&lc->g, op, "inside a warp_group (it needs a CTA-wide barrier)");
  nv_barrier(lc);
  return true;
}

/* gpu_target_t.reduce_warps: the round through shared memory when several warps hold
 * distinct positions along ax (D->wcount[ax] > 1); xr: the nres partial results. */
bool nv_reduce_warps(gpu_lc_t *g, const drk_tile_op_t *op, const gpu_dist_t *D, int ax, const char *comb,
                     drk_dtype_t t, LLVMValueRef *xr, int nres) {
  nv_lc_t *lc = (nv_lc_t *)g;
  int wc = D->wcount[ax];
  LLVMTypeRef ct = LLVMTypeOf(xr[0]);
  unsigned es = LLVMGetTypeKind(ct) == LLVMDoubleTypeKind || ct == lc->g.i64 ? 8 : ct == lc->g.i8 ? 1 : ct == lc->g.i16 ? 2 : 4;
  int W = lc->n_warps;
  LLVMValueRef buf = gpu_smem_scratch(&lc->g, op, (unsigned)(nres * W * 32) * es);
  LLVMValueRef lane = nv_lane(lc), warp = nv_warp(lc);
  LLVMValueRef me = LLVMBuildAdd(lc->g.b, LLVMBuildMul(lc->g.b, warp, gpu_i32(&lc->g, 32), ""), lane, "");
  for (int k = 0; k < nres; k++) {
    LLVMValueRef i = LLVMBuildAdd(lc->g.b, me, gpu_i32(&lc->g, (int64_t)k * W * 32), "");
    LLVMBuildStore(lc->g.b, xr[k], gpu_gep_elems(&lc->g, ct, buf, i));
  }
  if (!nv_cta_sync(lc, op)) return false;
  LLVMValueRef wst = gpu_i32(&lc->g, D->wstride[ax]);
  LLVMValueRef wa = LLVMBuildURem(lc->g.b, LLVMBuildUDiv(lc->g.b, warp, wst, ""), gpu_i32(&lc->g, wc), "");
  LLVMValueRef w0 = LLVMBuildSub(lc->g.b, warp, LLVMBuildMul(lc->g.b, wa, wst, ""), "");
  for (int k = 0; k < nres; k++) {
    LLVMValueRef acc = NULL;
    for (int j = 0; j < wc; j++) {
      LLVMValueRef w = LLVMBuildAdd(lc->g.b, w0, gpu_i32(&lc->g, (int64_t)j * D->wstride[ax]), "");
      LLVMValueRef i = LLVMBuildAdd(lc->g.b, LLVMBuildAdd(lc->g.b, LLVMBuildMul(lc->g.b, w, gpu_i32(&lc->g, 32), ""), lane, ""),
                                    gpu_i32(&lc->g, (int64_t)k * W * 32), "");
      LLVMValueRef v = LLVMBuildLoad2(lc->g.b, ct, gpu_gep_elems(&lc->g, ct, buf, i), "");
      acc = acc ? gpu_combine(&lc->g, comb, t, acc, v) : v;
    }
    xr[k] = acc;
  }
  return nv_cta_sync(lc, op);
}

/* ---- dot ---- */
static LLVMValueRef pack2(nv_lc_t *lc, LLVMTypeRef et, LLVMValueRef lo, LLVMValueRef hi) {
  LLVMValueRef v = LLVMGetUndef(LLVMVectorType(et, 2));
  v = LLVMBuildInsertElement(lc->g.b, v, lo, gpu_i32(&lc->g, 0), "");
  v = LLVMBuildInsertElement(lc->g.b, v, hi, gpu_i32(&lc->g, 1), "");
  return LLVMBuildBitCast(lc->g.b, v, lc->g.i32, "");
}

bool nv_lower_dot(nv_lc_t *lc, const drk_tile_op_t *op) {
  const drk_tile_value_t *A = op->operands[0], *Bv = op->operands[1], *C = op->operands[2], *res = op->results[0];
  const char *kind = drk_tile_op_attr_ident(op, "kind", "");
  if (A->type.kind != DRK_TT_TILE || Bv->type.kind != DRK_TT_TILE)
    return gpu_err(&lc->g, op, "kind=%s with shared-memory operands", kind);
  gpu_dist_t Da, Db, Dc;
  if (!gpu_dist(&lc->g, op, &A->type, &Da) || !gpu_dist(&lc->g, op, &Bv->type, &Db) || !gpu_dist(&lc->g, op, &C->type, &Dc))
    return false;
  gpu_val_t *a = gpu_get(&lc->g, A), *b = gpu_get(&lc->g, Bv), *c = gpu_get(&lc->g, C);
  gpu_val_t *x = gpu_val_new(&lc->g, Dc.nregs);
  drk_dtype_t ti = A->type.dtype, tc = C->type.dtype;
  if (strcmp(kind, "fma") == 0) {
    if (!drk_dtype_is_float(ti) || !drk_dtype_is_float(tc) || Bv->type.dtype != ti ||
        ti == DRK_DT_F8E4M3 || ti == DRK_DT_F8E5M2 || tc == DRK_DT_F8E4M3 || tc == DRK_DT_F8E5M2)
      return gpu_err(&lc->g, op, "kind=fma on %s x %s -> %s", drk_dtype_name(ti), drk_dtype_name(Bv->type.dtype),
                    drk_dtype_name(tc));
    if (C->type.layout->kind != DRK_TL_BLOCKED || A->type.layout->kind != DRK_TL_DOT_OP ||
        Bv->type.layout->kind != DRK_TL_DOT_OP)
      return gpu_err(&lc->g, op, "kind=fma without a blocked accumulator and dot_op operands");
    int K = (int)A->type.dims[1];
    if (Da.n[1] != K || Db.n[0] != K || Da.n[0] != Dc.n[0] || Db.n[1] != Dc.n[1])
      return gpu_err(&lc->g, op, "kind=fma with mismatched operand distributions");
    LLVMTypeRef ct = tc == DRK_DT_F64 ? lc->g.f64 : lc->g.f32;
    LLVMTypeRef rt = gpu_reg_type(&lc->g, tc, false);
    for (int i = 0; i < Dc.n[0]; i++)
      for (int j = 0; j < Dc.n[1]; j++) {
        LLVMValueRef acc = c->r[i * Dc.n[1] + j];
        if (LLVMTypeOf(acc) != ct) acc = LLVMBuildFPExt(lc->g.b, acc, ct, "");
        for (int k = 0; k < K; k++) {
          LLVMValueRef av = a->r[i * K + k], bv = b->r[k * Db.n[1] + j];
          if (LLVMTypeOf(av) != ct) av = LLVMBuildFPCast(lc->g.b, av, ct, "");
          if (LLVMTypeOf(bv) != ct) bv = LLVMBuildFPCast(lc->g.b, bv, ct, "");
          LLVMValueRef args[3] = {av, bv, acc};
          acc = drk_nvptx_call_intrinsic(lc->cg, "llvm.fma", &ct, 1, args, 3);
        }
        if (ct != rt) acc = LLVMBuildFPTrunc(lc->g.b, acc, rt, "");
        x->r[i * Dc.n[1] + j] = acc;
      }
    gpu_set(&lc->g, res, x);
    return true;
  }
  if (strcmp(kind, "mma_sync") == 0) {
    if (lc->cg->arch->sm < 80) return gpu_err(&lc->g, op, "kind=mma_sync before sm_80");
    if (!((ti == DRK_DT_F16 || ti == DRK_DT_BF16) && Bv->type.dtype == ti && tc == DRK_DT_F32))
      return gpu_err(&lc->g, op, "kind=mma_sync on %s x %s -> %s (f16/bf16 x same -> f32 only)",
                    drk_dtype_name(ti), drk_dtype_name(Bv->type.dtype), drk_dtype_name(tc));
    if (C->type.layout->kind != DRK_TL_MMA_SYNC || C->type.layout->instr[0] != 16 || C->type.layout->instr[1] != 8)
      return gpu_err(&lc->g, op, "kind=mma_sync without an mma_sync{instr = [16, 8]} accumulator");
    int RM = Dc.n[0] / 2, RN = Dc.n[1] / 2, KK = (int)(A->type.dims[1] / 16);
    if (Da.n[0] != 2 * RM || Da.n[1] != 4 * KK || Db.n[0] != 4 * KK || Db.n[1] != RN)
      return gpu_err(&lc->g, op, "kind=mma_sync with mismatched operand distributions");
    LLVMTypeRef et = gpu_reg_type(&lc->g, ti, false);
    drk_nvptx_mma_in_t in = ti == DRK_DT_BF16 ? DRK_NVPTX_MMA_BF16 : DRK_NVPTX_MMA_F16;
    int n1 = Dc.n[1];
    for (int r = 0; r < Dc.nregs; r++) x->r[r] = c->r[r];
    for (int rm = 0; rm < RM; rm++)
      for (int kk = 0; kk < KK; kk++) {
        LLVMValueRef af[4];
        for (int q = 0; q < 4; q++) {
          int row = 2 * rm + (q & 1), kc = 4 * kk + 2 * (q >> 1);
          af[q] = pack2(lc, et, a->r[row * Da.n[1] + kc], a->r[row * Da.n[1] + kc + 1]);
        }
        for (int rn = 0; rn < RN; rn++) {
          LLVMValueRef bf[2], cc[4], dd[4];
          for (int q = 0; q < 2; q++) {
            int kr = 4 * kk + 2 * q;
            bf[q] = pack2(lc, et, b->r[kr * Db.n[1] + rn], b->r[(kr + 1) * Db.n[1] + rn]);
          }
          for (int q = 0; q < 4; q++) cc[q] = x->r[(2 * rm + (q >> 1)) * n1 + 2 * rn + (q & 1)];
          drk_nvptx_mma_m16n8k16(lc->cg, in, af, bf, cc, dd);
          for (int q = 0; q < 4; q++) x->r[(2 * rm + (q >> 1)) * n1 + 2 * rn + (q & 1)] = dd[q];
        }
      }
    gpu_set(&lc->g, res, x);
    return true;
  }
  return gpu_err(&lc->g, op, "kind=%s (only fma and mma_sync are lowered)", kind);
}
