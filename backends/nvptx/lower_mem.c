/* Tile IR -> LLVM IR for NVPTX: CTA barriers, the cross-warp round of reductions (through
 * shared memory, slots indexed by warp and lane), local_load into 16-bit mma_sync operands
 * (ldmatrix) and dot (part of lower.c's lowering; see lower_internal.h). The rest of reduce,
 * layout conversions, local_load/local_store and cp.async addressing are
 * backends/common/lower_mem.c's. dot: kind fma (any float, blocked accumulator, dot_op
 * operands of it) and mma_sync (f32 accumulator; the input types of the mma_k table). */
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

/* ---- local_load into mma_sync operands: ldmatrix ----
 * A 16-bit dot_op operand of an mma_sync{instr = [16, 8]} accumulator is made of 8x8
 * matrices (8 rows of its non-K dim x 8 K elements), of which each thread holds one pair of
 * K elements per matrix: row lane/4, K 2(lane%4) and +1 (dim_dot_op in lower.c). That is
 * what ldmatrix.m8n8 delivers: .x4 loads four matrices, lane l giving the address of row
 * l%8 of matrix l/8. When the shared layout's fastest dim is K, a matrix row is 8 K elements
 * of one non-K index (plain form); when it is the non-K dim, the rows in memory are K and
 * .trans transposes them. Either way a row is 16 contiguous bytes at a multiple of 16 (the
 * XOR swizzle moves whole 16-byte chunks), so any of the shared layouts works. */
static LLVMValueRef sel_const(nv_lc_t *lc, LLVMValueRef q, const int64_t *v, int n) {
  LLVMValueRef r = gpu_i32(&lc->g, v[0]);
  for (int i = 1; i < n; i++)
    if (v[i] != v[0])
      r = LLVMBuildSelect(lc->g.b, LLVMBuildICmp(lc->g.b, LLVMIntEQ, q, gpu_i32(&lc->g, i), ""), gpu_i32(&lc->g, v[i]), r, "");
  return r;
}

gpu_op_result_t nv_lower_ldmatrix(nv_lc_t *lc, const drk_tile_op_t *op) {
  const drk_tile_value_t *smv = op->operands[0], *res = op->results[0];
  const drk_tile_type_t *st = &smv->type, *rt = &res->type;
  const drk_tile_layout_t *L = rt->layout, *P = L->parent;
  if (L->kind != DRK_TL_DOT_OP || P->kind != DRK_TL_MMA_SYNC || P->instr[0] != 16 || P->instr[1] != 8 ||
      drk_dtype_bits(rt->dtype) != 16 || rt->rank != 2 || st->layout->rank != 2 || lc->cg->arch->sm < 80)
    return GPU_OP_NOT_MINE;
  int kd = L->op_idx == 0 ? 1 : 0, nd = 1 - kd, wm = P->wpc[0], wn = P->wpc[1];
  int64_t cover = L->op_idx == 0 ? 16 * wm : 8 * wn;
  if (rt->dims[nd] % cover || rt->dims[kd] % 16) return GPU_OP_NOT_MINE;
  gpu_dist_t D;
  if (!gpu_dist(&lc->g, op, rt, &D)) return GPU_OP_FAILED;
  int per_nd = L->op_idx == 0 ? 2 : 1;
  if (D.n[kd] != (int)(rt->dims[kd] / 16) * 4 || D.n[nd] != (int)(rt->dims[nd] / cover) * per_nd) return GPU_OP_NOT_MINE;
  bool trans = st->layout->order[0] != kd;
  /* the warp's first row (A) or column (B): the warp part of dim_mma / dim_dot_op */
  LLVMValueRef warp = nv_warp(lc), lane = nv_lane(lc);
  LLVMValueRef wi = L->op_idx == 0 ? LLVMBuildURem(lc->g.b, warp, gpu_i32(&lc->g, wm), "")
                                   : LLVMBuildURem(lc->g.b, LLVMBuildUDiv(lc->g.b, warp, gpu_i32(&lc->g, wm), ""), gpu_i32(&lc->g, wn), "");
  LLVMValueRef w0 = LLVMBuildMul(lc->g.b, wi, gpu_i32(&lc->g, L->op_idx == 0 ? 16 : 8), "");
  LLVMValueRef rr = LLVMBuildAnd(lc->g.b, lane, gpu_i32(&lc->g, 7), "");
  LLVMValueRef mq = LLVMBuildLShr(lc->g.b, lane, gpu_i32(&lc->g, 3), "");
  LLVMValueRef base = gpu_get(&lc->g, smv)->r[0];
  LLVMTypeRef v2 = LLVMVectorType(gpu_reg_type(&lc->g, rt->dtype, false), 2);
  gpu_val_t *x = gpu_val_new(&lc->g, D.nregs);
  /* matrix j: non-K register index j / npairs, K pair j % npairs */
  int npairs = D.n[kd] / 2, nmat = D.n[nd] * npairs;
  for (int j0 = 0; j0 < nmat;) {
    int cnt = nmat - j0 >= 4 ? 4 : nmat - j0 >= 2 ? 2 : 1;
    int64_t no[4], ko[4];
    for (int q = 0; q < cnt; q++) {
      int j = j0 + q;
      no[q] = D.off[nd][j / npairs];
      ko[q] = D.off[kd][2 * (j % npairs)];
    }
    LLVMValueRef q = LLVMBuildAnd(lc->g.b, mq, gpu_i32(&lc->g, cnt - 1), "");
    LLVMValueRef cn = LLVMBuildAdd(lc->g.b, w0, sel_const(lc, q, no, cnt), "");
    LLVMValueRef ck = sel_const(lc, q, ko, cnt);
    if (trans) ck = LLVMBuildAdd(lc->g.b, ck, rr, "");
    else cn = LLVMBuildAdd(lc->g.b, cn, rr, "");
    LLVMValueRef coords[2];
    coords[nd] = cn, coords[kd] = ck;
    LLVMValueRef out[4];
    drk_nvptx_ldmatrix(lc->cg, gpu_smem_elem_addr(&lc->g, base, st, coords), (unsigned)cnt, trans, out);
    for (int i = 0; i < cnt; i++) {
      int j = j0 + i, idx[2];
      idx[nd] = j / npairs;
      LLVMValueRef pr = LLVMBuildBitCast(lc->g.b, out[i], v2, "");
      for (int e = 0; e < 2; e++) {
        idx[kd] = 2 * (j % npairs) + e;
        x->r[gpu_reg_join(&D, idx)] = LLVMBuildExtractElement(lc->g.b, pr, gpu_i32(&lc->g, e), "");
      }
    }
    j0 += cnt;
  }
  gpu_set(&lc->g, res, x);
  return GPU_OP_DONE;
}

/* ---- dot ---- */
static LLVMValueRef pack2(nv_lc_t *lc, LLVMTypeRef et, LLVMValueRef lo, LLVMValueRef hi) {
  LLVMValueRef v = LLVMGetUndef(LLVMVectorType(et, 2));
  v = LLVMBuildInsertElement(lc->g.b, v, lo, gpu_i32(&lc->g, 0), "");
  v = LLVMBuildInsertElement(lc->g.b, v, hi, gpu_i32(&lc->g, 1), "");
  return LLVMBuildBitCast(lc->g.b, v, lc->g.i32, "");
}

/* ---- dot kind=mma_sync ----
 * One mma.sync.m16n8kK per warp, 16-row block, 8-column block and K step. Per instruction
 * the dot_op distributions (lower.c, dim_dot_op) give each thread `per` = 2 * epr elements
 * along K: epr (the elements of one 32-bit register) at k and epr at k + K/2; A's rows come
 * as pairs (r, r + 8) of registers, B's columns one register per 8-column block. A fragment
 * register q of A is (row half q & 1, K half q >> 1), of B (K half q). New input types add a
 * row to mma_k, a packing to mma_reg and an instruction to mma_issue. */
static int mma_k(drk_dtype_t ti) {
  switch (ti) {
  case DRK_DT_F16: case DRK_DT_BF16: return 16; /* m16n8k16 */
  case DRK_DT_F32: return 8;                    /* m16n8k8 tf32 */
  case DRK_DT_F8E4M3: case DRK_DT_F8E5M2: return 32; /* m16n8k32 (sm_89+) */
  default: return 0;
  }
}

/* One 32-bit operand register from the epr consecutive K elements v[0..epr). */
static LLVMValueRef mma_reg(nv_lc_t *lc, drk_dtype_t ti, LLVMValueRef *v) {
  if (ti == DRK_DT_F32) return drk_nvptx_cvt_tf32(lc->cg, v[0]); /* cvt.rna.tf32.f32 */
  if (gpu_is_f8(ti)) { /* four bytes, the lowest K in the low byte */
    LLVMValueRef w = LLVMGetUndef(LLVMVectorType(lc->g.i8, 4));
    for (int e = 0; e < 4; e++) w = LLVMBuildInsertElement(lc->g.b, w, v[e], gpu_i32(&lc->g, e), "");
    return LLVMBuildBitCast(lc->g.b, w, lc->g.i32, "");
  }
  return pack2(lc, gpu_reg_type(&lc->g, ti, false), v[0], v[1]);
}

static void mma_issue(nv_lc_t *lc, drk_dtype_t ti, LLVMValueRef *af, LLVMValueRef *bf, LLVMValueRef *cc, LLVMValueRef *dd) {
  if (ti == DRK_DT_F32) drk_nvptx_mma_m16n8k8_tf32(lc->cg, af, bf, cc, dd);
  else if (gpu_is_f8(ti)) drk_nvptx_mma_m16n8k32_f8(lc->cg, ti == DRK_DT_F8E5M2, ti == DRK_DT_F8E5M2, af, bf, cc, dd);
  else drk_nvptx_mma_m16n8k16(lc->cg, ti == DRK_DT_BF16 ? DRK_NVPTX_MMA_BF16 : DRK_NVPTX_MMA_F16, af, bf, cc, dd);
}

static bool lower_mma_sync(nv_lc_t *lc, const drk_tile_op_t *op, const gpu_dist_t *Da, const gpu_dist_t *Db,
                           const gpu_dist_t *Dc, gpu_val_t *a, gpu_val_t *b, gpu_val_t *c, gpu_val_t *x) {
  const drk_tile_value_t *A = op->operands[0], *Bv = op->operands[1], *C = op->operands[2];
  drk_dtype_t ti = A->type.dtype, tc = C->type.dtype;
  if (lc->cg->arch->sm < 80) return gpu_err(&lc->g, op, "kind=mma_sync before sm_80");
  int kin = mma_k(ti);
  if (!kin || Bv->type.dtype != ti || tc != DRK_DT_F32)
    return gpu_err(&lc->g, op, "kind=mma_sync on %s x %s -> %s (f16/bf16/f32 (tf32)/f8 x same -> f32 only)",
                   drk_dtype_name(ti), drk_dtype_name(Bv->type.dtype), drk_dtype_name(tc));
  if (gpu_is_f8(ti) && lc->cg->arch->sm < 89)
    return gpu_err(&lc->g, op, "kind=mma_sync on %s for %s (fp8 tensor cores need sm_89 or sm_90)", drk_dtype_name(ti),
                   lc->cg->arch->name);
  if (C->type.layout->kind != DRK_TL_MMA_SYNC || C->type.layout->instr[0] != 16 || C->type.layout->instr[1] != 8)
    return gpu_err(&lc->g, op, "kind=mma_sync without an mma_sync{instr = [16, 8]} accumulator");
  int epr = 32 / drk_dtype_bits(ti), per = 2 * epr;
  int RM = Dc->n[0] / 2, RN = Dc->n[1] / 2, KK = (int)(A->type.dims[1] / kin);
  if (A->type.dims[1] % kin || Da->n[0] != 2 * RM || Da->n[1] != per * KK || Db->n[0] != per * KK || Db->n[1] != RN)
    return gpu_err(&lc->g, op, "kind=mma_sync with mismatched operand distributions");
  int n1 = Dc->n[1];
  for (int r = 0; r < Dc->nregs; r++) x->r[r] = c->r[r];
  LLVMValueRef *bfs = drk_arena_alloc(lc->g.a, sizeof(LLVMValueRef) * (size_t)(2 * RN));
  for (int kk = 0; kk < KK; kk++) {
    /* B fragments of this K step, shared by every row block */
    for (int rn = 0; rn < RN; rn++)
      for (int q = 0; q < 2; q++) {
        LLVMValueRef v[4];
        for (int e = 0; e < epr; e++) v[e] = b->r[(kk * per + q * epr + e) * Db->n[1] + rn];
        bfs[2 * rn + q] = mma_reg(lc, ti, v);
      }
    for (int rm = 0; rm < RM; rm++) {
      LLVMValueRef af[4];
      for (int q = 0; q < 4; q++) {
        LLVMValueRef v[4];
        int row = 2 * rm + (q & 1), k = kk * per + (q >> 1) * epr;
        for (int e = 0; e < epr; e++) v[e] = a->r[row * Da->n[1] + k + e];
        af[q] = mma_reg(lc, ti, v);
      }
      for (int rn = 0; rn < RN; rn++) {
        LLVMValueRef cc[4], dd[4];
        for (int q = 0; q < 4; q++) cc[q] = x->r[(2 * rm + (q >> 1)) * n1 + 2 * rn + (q & 1)];
        mma_issue(lc, ti, af, bfs + 2 * rn, cc, dd);
        for (int q = 0; q < 4; q++) x->r[(2 * rm + (q >> 1)) * n1 + 2 * rn + (q & 1)] = dd[q];
      }
    }
  }
  gpu_set(&lc->g, op->results[0], x);
  return true;
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
  if (strcmp(kind, "mma_sync") == 0) return lower_mma_sync(lc, op, &Da, &Db, &Dc, a, b, c, x);
  return gpu_err(&lc->g, op, "kind=%s (only fma and mma_sync are lowered)", kind);
}
