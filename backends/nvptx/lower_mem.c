/* Tile IR -> LLVM IR for NVPTX: reductions, layout conversions, shared memory, cp.async
 * and dot (part of lower.c's lowering; see lower_internal.h).
 *
 * reduce: in-thread over the registers along the axis, then a butterfly of shuffles over
 * the lanes that hold distinct positions, then (when several warps do) a round through
 * shared memory that every thread reads back in the same order, so all replicas agree.
 * convert_layout and reshape go through shared memory (row-major staging). local_load /
 * local_store / cp.async address shared memory by the buffer's shared layout (row-major by
 * `order`, 16-byte chunks XOR-swizzled by the row as TMA does) and are vectorized along its
 * fastest dimension. dot: kind fma (any float, blocked accumulator, dot_op operands of it)
 * and mma_sync (f16/bf16 inputs, f32 accumulator: mma.sync.m16n8k16). */
#include "backends/nvptx/lower_internal.h"

#include <string.h>

static LLVMValueRef gep_elems(nv_lc_t *lc, LLVMTypeRef et, LLVMValueRef base, LLVMValueRef idx) {
  return LLVMBuildGEP2(lc->b, et, base, &idx, 1, "");
}

static bool cta_sync(nv_lc_t *lc, const drk_tile_op_t *op) {
  if (lc->in_warp_group) return nv_err(lc, op, "inside a warp_group (it needs a CTA-wide barrier)");
  nv_barrier(lc);
  return true;
}

bool nv_lower_reduce(nv_lc_t *lc, const drk_tile_op_t *op) {
  const drk_tile_value_t *s = op->operands[0], *res = op->results[0];
  int ax = (int)drk_tile_op_attr_int(op, "axis", 0);
  const char *comb = drk_tile_op_attr_ident(op, "combiner", "sum");
  drk_dtype_t t = s->type.dtype;
  if (t == DRK_DT_BOOL || t == DRK_DT_F8E4M3 || t == DRK_DT_F8E5M2 || t == DRK_DT_I4 || t == DRK_DT_U4)
    return nv_err(lc, op, "of %s", drk_dtype_name(t));
  nv_dist_t D;
  if (!nv_dist(lc, op, &s->type, &D)) return false;
  nv_val_t *sv = nv_get(lc, s);
  bool half = t == DRK_DT_F16 || t == DRK_DT_BF16;
  int nres = D.nregs / D.n[ax];
  nv_val_t *x = nv_val_new(lc, nres);
  for (int r = 0; r < D.nregs; r++) {
    int idx[NV_MAXR], k = 0;
    nv_reg_split(&D, r, idx);
    for (int d = 0; d < D.rank; d++)
      if (d != ax) k = k * D.n[d] + idx[d];
    LLVMValueRef v = sv->r[r];
    if (half) v = LLVMBuildFPExt(lc->b, v, lc->f32, "");
    x->r[k] = x->r[k] ? nv_combine(lc, comb, t, x->r[k], v) : v;
    if (!x->r[k]) return nv_err(lc, op, "with combiner '%s'", comb);
  }
  for (int i = 0; i < D.n_xor[ax]; i++)
    for (int k = 0; k < nres; k++) x->r[k] = nv_combine(lc, comb, t, x->r[k], nv_shfl_xor(lc, x->r[k], D.xr[ax][i]));
  int wc = D.wcount[ax];
  if (wc > 1) {
    LLVMTypeRef ct = LLVMTypeOf(x->r[0]);
    unsigned es = LLVMGetTypeKind(ct) == LLVMDoubleTypeKind || ct == lc->i64 ? 8 : ct == lc->i8 ? 1 : ct == lc->i16 ? 2 : 4;
    int W = lc->n_warps;
    LLVMValueRef buf = nv_smem_scratch(lc, op, (unsigned)(nres * W * 32) * es);
    LLVMValueRef lane = nv_lane(lc), warp = nv_warp(lc);
    LLVMValueRef me = LLVMBuildAdd(lc->b, LLVMBuildMul(lc->b, warp, nv_i32(lc, 32), ""), lane, "");
    for (int k = 0; k < nres; k++) {
      LLVMValueRef i = LLVMBuildAdd(lc->b, me, nv_i32(lc, (int64_t)k * W * 32), "");
      LLVMBuildStore(lc->b, x->r[k], gep_elems(lc, ct, buf, i));
    }
    if (!cta_sync(lc, op)) return false;
    LLVMValueRef wst = nv_i32(lc, D.wstride[ax]);
    LLVMValueRef wa = LLVMBuildURem(lc->b, LLVMBuildUDiv(lc->b, warp, wst, ""), nv_i32(lc, wc), "");
    LLVMValueRef w0 = LLVMBuildSub(lc->b, warp, LLVMBuildMul(lc->b, wa, wst, ""), "");
    for (int k = 0; k < nres; k++) {
      LLVMValueRef acc = NULL;
      for (int j = 0; j < wc; j++) {
        LLVMValueRef w = LLVMBuildAdd(lc->b, w0, nv_i32(lc, (int64_t)j * D.wstride[ax]), "");
        LLVMValueRef i = LLVMBuildAdd(lc->b, LLVMBuildAdd(lc->b, LLVMBuildMul(lc->b, w, nv_i32(lc, 32), ""), lane, ""),
                                      nv_i32(lc, (int64_t)k * W * 32), "");
        LLVMValueRef v = LLVMBuildLoad2(lc->b, ct, gep_elems(lc, ct, buf, i), "");
        acc = acc ? nv_combine(lc, comb, t, acc, v) : v;
      }
      x->r[k] = acc;
    }
    if (!cta_sync(lc, op)) return false;
  }
  if (half)
    for (int k = 0; k < nres; k++) x->r[k] = LLVMBuildFPTrunc(lc->b, x->r[k], nv_reg_type(lc, t, false), "");
  (void)res;
  nv_set(lc, res, x);
  return true;
}

/* Row-major linear index of register r's coordinate. */
static LLVMValueRef lin_index(nv_lc_t *lc, const nv_dist_t *D, int r) {
  LLVMValueRef li = nv_i32(lc, 0);
  for (int d = 0; d < D->rank; d++)
    li = LLVMBuildAdd(lc->b, LLVMBuildMul(lc->b, li, nv_i32(lc, D->dims[d]), ""), nv_coord(lc, D, r, d), "");
  return li;
}

bool nv_lower_relayout(nv_lc_t *lc, const drk_tile_op_t *op) {
  const drk_tile_value_t *s = op->operands[0], *res = op->results[0];
  nv_val_t *sv = nv_get(lc, s);
  if (drk_tile_type_equal(&s->type, &res->type)) {
    nv_set(lc, res, sv);
    return true;
  }
  nv_dist_t Ds, Dd;
  if (!nv_dist(lc, op, &s->type, &Ds) || !nv_dist(lc, op, &res->type, &Dd)) return false;
  drk_dtype_t t = res->type.dtype;
  LLVMTypeRef mt = res->type.is_ptr ? lc->i64 : nv_mem_type(lc, t);
  if (!mt) return nv_err(lc, op, "of %s", drk_dtype_name(t));
  int64_t n = drk_tile_type_numel(&res->type);
  unsigned es = res->type.is_ptr ? 8 : (unsigned)(drk_dtype_bits(t) / 8);
  if (n * es > 96 * 1024) return nv_err(lc, op, "of %lld bytes through shared memory", (long long)(n * es));
  LLVMValueRef buf = nv_smem_scratch(lc, op, (unsigned)(n * es));
  if (!cta_sync(lc, op)) return false;
  for (int r = 0; r < Ds.nregs; r++) {
    LLVMValueRef v = sv->r[r];
    if (res->type.is_ptr) v = LLVMBuildPtrToInt(lc->b, v, lc->i64, "");
    else if (t == DRK_DT_BOOL) v = LLVMBuildZExt(lc->b, v, lc->i8, "");
    LLVMBuildStore(lc->b, v, gep_elems(lc, mt, buf, lin_index(lc, &Ds, r)));
  }
  if (!cta_sync(lc, op)) return false;
  nv_val_t *x = nv_val_new(lc, Dd.nregs);
  for (int r = 0; r < Dd.nregs; r++) {
    LLVMValueRef v = LLVMBuildLoad2(lc->b, mt, gep_elems(lc, mt, buf, lin_index(lc, &Dd, r)), "");
    if (res->type.is_ptr) v = LLVMBuildIntToPtr(lc->b, v, lc->p1, "");
    else if (t == DRK_DT_BOOL) v = LLVMBuildICmp(lc->b, LLVMIntNE, v, LLVMConstInt(lc->i8, 0, 0), "");
    x->r[r] = v;
  }
  if (!cta_sync(lc, op)) return false;
  nv_set(lc, res, x);
  return true;
}

/* Tile dim that is the shared layout's fastest one. */
static int smem_fast_dim(const drk_tile_type_t *st) { return st->layout->order[0]; }

static int smem_vec(const nv_dist_t *D, int f, int es) {
  nv_axis_t big;
  for (int d = 0; d < NV_MAXR; d++) big.contig[d] = 1 << 30, big.div[d] = 1 << 30, big.cnst[d] = 1;
  return nv_vec_width(D, f, es, &big, NULL);
}

static bool smem_access(nv_lc_t *lc, const drk_tile_op_t *op, const drk_tile_value_t *smv,
                        const drk_tile_value_t *tile, nv_val_t *regs, bool store) {
  const drk_tile_type_t *st = &smv->type;
  if (st->layout->rank != tile->type.rank) return nv_err(lc, op, "with a shared layout of another rank");
  nv_dist_t D;
  if (!nv_dist(lc, op, &tile->type, &D)) return false;
  drk_dtype_t t = tile->type.dtype;
  LLVMTypeRef mt = nv_mem_type(lc, t);
  if (!mt || drk_dtype_bits(t) < 8) return nv_err(lc, op, "of %s", drk_dtype_name(t));
  int es = drk_dtype_bits(t) / 8;
  int f = smem_fast_dim(st);
  int w = smem_vec(&D, f, es);
  LLVMValueRef base = nv_get(lc, smv)->r[0];
  for (int r = 0; r < D.nregs; r++) {
    int idx[NV_MAXR];
    nv_reg_split(&D, r, idx);
    if (idx[f] % w) continue;
    LLVMValueRef c[NV_MAXR];
    for (int d = 0; d < D.rank; d++) c[d] = nv_coord(lc, &D, r, d);
    LLVMValueRef a = nv_smem_elem_addr(lc, base, st, c);
    LLVMTypeRef vt = w > 1 ? LLVMVectorType(mt, (unsigned)w) : mt;
    if (store) {
      LLVMValueRef v = w > 1 ? LLVMGetUndef(vt) : NULL;
      for (int i = 0; i < w; i++) {
        idx[f] += i;
        LLVMValueRef e = regs->r[nv_reg_join(&D, idx)];
        idx[f] -= i;
        if (t == DRK_DT_BOOL) e = LLVMBuildZExt(lc->b, e, lc->i8, "");
        v = w > 1 ? LLVMBuildInsertElement(lc->b, v, e, nv_i32(lc, i), "") : e;
      }
      LLVMSetAlignment(LLVMBuildStore(lc->b, v, a), (unsigned)(w * es));
    } else {
      LLVMValueRef v = LLVMBuildLoad2(lc->b, vt, a, "");
      LLVMSetAlignment(v, (unsigned)(w * es));
      for (int i = 0; i < w; i++) {
        LLVMValueRef e = w > 1 ? LLVMBuildExtractElement(lc->b, v, nv_i32(lc, i), "") : v;
        if (t == DRK_DT_BOOL) e = LLVMBuildICmp(lc->b, LLVMIntNE, e, LLVMConstInt(lc->i8, 0, 0), "");
        idx[f] += i;
        regs->r[nv_reg_join(&D, idx)] = e;
        idx[f] -= i;
      }
    }
  }
  return true;
}

bool nv_lower_local_load(nv_lc_t *lc, const drk_tile_op_t *op) {
  const drk_tile_value_t *res = op->results[0];
  nv_dist_t D;
  if (!nv_dist(lc, op, &res->type, &D)) return false;
  nv_val_t *x = nv_val_new(lc, D.nregs);
  if (!smem_access(lc, op, op->operands[0], res, x, false)) return false;
  nv_set(lc, res, x);
  return true;
}

bool nv_lower_local_store(nv_lc_t *lc, const drk_tile_op_t *op) {
  return smem_access(lc, op, op->operands[0], op->operands[1], nv_get(lc, op->operands[1]), true);
}

bool nv_lower_cp_async(nv_lc_t *lc, const drk_tile_op_t *op) {
  const drk_tile_value_t *smv = op->operands[0], *pv = op->operands[1];
  const drk_tile_type_t *st = &smv->type;
  if (st->layout->rank != pv->type.rank) return nv_err(lc, op, "with a shared layout of another rank");
  nv_dist_t D;
  if (!nv_dist(lc, op, &pv->type, &D)) return false;
  drk_dtype_t t = pv->type.dtype;
  LLVMTypeRef mt = nv_mem_type(lc, t);
  if (!mt || drk_dtype_bits(t) < 8) return nv_err(lc, op, "of %s", drk_dtype_name(t));
  int es = drk_dtype_bits(t) / 8;
  int f = smem_fast_dim(st);
  nv_val_t *p = nv_get(lc, pv);
  nv_val_t *mk = op->n_operands > 2 ? nv_get(lc, op->operands[2]) : NULL;
  /* the pointer facts of lower.c's pre-pass; recomputed there, read through the table */
  const nv_axis_t *pa = pv->id < lc->n_ids ? lc->axis[pv->id] : NULL;
  const nv_axis_t *ma = mk && op->operands[2]->id < lc->n_ids ? lc->axis[op->operands[2]->id] : NULL;
  if (mk && !ma) pa = NULL;
  int w = nv_vec_width(&D, f, es, pa, mk ? ma : NULL);
  int ws = smem_vec(&D, f, es);
  if (ws < w) w = ws;
  LLVMValueRef base = nv_get(lc, smv)->r[0];
  for (int r = 0; r < D.nregs; r++) {
    int idx[NV_MAXR];
    nv_reg_split(&D, r, idx);
    if (idx[f] % w) continue;
    LLVMValueRef c[NV_MAXR];
    for (int d = 0; d < D.rank; d++) c[d] = nv_coord(lc, &D, r, d);
    LLVMValueRef a = nv_smem_elem_addr(lc, base, st, c);
    int bytes = w * es;
    if (bytes >= 4) {
      LLVMValueRef sz = mk ? LLVMBuildSelect(lc->b, mk->r[r], nv_i32(lc, bytes), nv_i32(lc, 0), "") : NULL;
      drk_nvptx_cp_async(lc->cg, a, p->r[r], (unsigned)bytes, sz);
      continue;
    }
    /* too narrow for cp.async: a synchronous copy, zero-filled when masked off */
    for (int i = 0; i < w; i++) {
      idx[f] += i;
      int ri = nv_reg_join(&D, idx);
      idx[f] -= i;
      LLVMValueRef ci[NV_MAXR];
      for (int d = 0; d < D.rank; d++) ci[d] = nv_coord(lc, &D, ri, d);
      LLVMValueRef ai = nv_smem_elem_addr(lc, base, st, ci);
      LLVMValueRef v;
      if (mk) {
        LLVMBasicBlockRef cur = LLVMGetInsertBlock(lc->b);
        LLVMBasicBlockRef bl = LLVMAppendBasicBlockInContext(lc->ctx, lc->fn, "cp");
        LLVMBasicBlockRef bj = LLVMAppendBasicBlockInContext(lc->ctx, lc->fn, "cp.join");
        LLVMBuildCondBr(lc->b, mk->r[ri], bl, bj);
        LLVMPositionBuilderAtEnd(lc->b, bl);
        LLVMValueRef l = LLVMBuildLoad2(lc->b, mt, p->r[ri], "");
        LLVMBuildBr(lc->b, bj);
        LLVMPositionBuilderAtEnd(lc->b, bj);
        v = LLVMBuildPhi(lc->b, mt, "");
        LLVMValueRef iv[2] = {l, LLVMConstNull(mt)};
        LLVMBasicBlockRef ib[2] = {bl, cur};
        LLVMAddIncoming(v, iv, ib, 2);
      } else {
        v = LLVMBuildLoad2(lc->b, mt, p->r[ri], "");
      }
      LLVMBuildStore(lc->b, v, ai);
    }
  }
  return true;
}

/* ---- dot ---- */
static LLVMValueRef pack2(nv_lc_t *lc, LLVMTypeRef et, LLVMValueRef lo, LLVMValueRef hi) {
  LLVMValueRef v = LLVMGetUndef(LLVMVectorType(et, 2));
  v = LLVMBuildInsertElement(lc->b, v, lo, nv_i32(lc, 0), "");
  v = LLVMBuildInsertElement(lc->b, v, hi, nv_i32(lc, 1), "");
  return LLVMBuildBitCast(lc->b, v, lc->i32, "");
}

bool nv_lower_dot(nv_lc_t *lc, const drk_tile_op_t *op) {
  const drk_tile_value_t *A = op->operands[0], *Bv = op->operands[1], *C = op->operands[2], *res = op->results[0];
  const char *kind = drk_tile_op_attr_ident(op, "kind", "");
  if (A->type.kind != DRK_TT_TILE || Bv->type.kind != DRK_TT_TILE)
    return nv_err(lc, op, "kind=%s with shared-memory operands", kind);
  nv_dist_t Da, Db, Dc;
  if (!nv_dist(lc, op, &A->type, &Da) || !nv_dist(lc, op, &Bv->type, &Db) || !nv_dist(lc, op, &C->type, &Dc))
    return false;
  nv_val_t *a = nv_get(lc, A), *b = nv_get(lc, Bv), *c = nv_get(lc, C);
  nv_val_t *x = nv_val_new(lc, Dc.nregs);
  drk_dtype_t ti = A->type.dtype, tc = C->type.dtype;
  if (strcmp(kind, "fma") == 0) {
    if (!drk_dtype_is_float(ti) || !drk_dtype_is_float(tc) || Bv->type.dtype != ti ||
        ti == DRK_DT_F8E4M3 || ti == DRK_DT_F8E5M2 || tc == DRK_DT_F8E4M3 || tc == DRK_DT_F8E5M2)
      return nv_err(lc, op, "kind=fma on %s x %s -> %s", drk_dtype_name(ti), drk_dtype_name(Bv->type.dtype),
                    drk_dtype_name(tc));
    if (C->type.layout->kind != DRK_TL_BLOCKED || A->type.layout->kind != DRK_TL_DOT_OP ||
        Bv->type.layout->kind != DRK_TL_DOT_OP)
      return nv_err(lc, op, "kind=fma without a blocked accumulator and dot_op operands");
    int K = (int)A->type.dims[1];
    if (Da.n[1] != K || Db.n[0] != K || Da.n[0] != Dc.n[0] || Db.n[1] != Dc.n[1])
      return nv_err(lc, op, "kind=fma with mismatched operand distributions");
    LLVMTypeRef ct = tc == DRK_DT_F64 ? lc->f64 : lc->f32;
    LLVMTypeRef rt = nv_reg_type(lc, tc, false);
    for (int i = 0; i < Dc.n[0]; i++)
      for (int j = 0; j < Dc.n[1]; j++) {
        LLVMValueRef acc = c->r[i * Dc.n[1] + j];
        if (LLVMTypeOf(acc) != ct) acc = LLVMBuildFPExt(lc->b, acc, ct, "");
        for (int k = 0; k < K; k++) {
          LLVMValueRef av = a->r[i * K + k], bv = b->r[k * Db.n[1] + j];
          if (LLVMTypeOf(av) != ct) av = LLVMBuildFPCast(lc->b, av, ct, "");
          if (LLVMTypeOf(bv) != ct) bv = LLVMBuildFPCast(lc->b, bv, ct, "");
          LLVMValueRef args[3] = {av, bv, acc};
          acc = drk_nvptx_call_intrinsic(lc->cg, "llvm.fma", &ct, 1, args, 3);
        }
        if (ct != rt) acc = LLVMBuildFPTrunc(lc->b, acc, rt, "");
        x->r[i * Dc.n[1] + j] = acc;
      }
    nv_set(lc, res, x);
    return true;
  }
  if (strcmp(kind, "mma_sync") == 0) {
    if (lc->cg->arch->sm < 80) return nv_err(lc, op, "kind=mma_sync before sm_80");
    if (!((ti == DRK_DT_F16 || ti == DRK_DT_BF16) && Bv->type.dtype == ti && tc == DRK_DT_F32))
      return nv_err(lc, op, "kind=mma_sync on %s x %s -> %s (f16/bf16 x same -> f32 only)",
                    drk_dtype_name(ti), drk_dtype_name(Bv->type.dtype), drk_dtype_name(tc));
    if (C->type.layout->kind != DRK_TL_MMA_SYNC || C->type.layout->instr[0] != 16 || C->type.layout->instr[1] != 8)
      return nv_err(lc, op, "kind=mma_sync without an mma_sync{instr = [16, 8]} accumulator");
    int RM = Dc.n[0] / 2, RN = Dc.n[1] / 2, KK = (int)(A->type.dims[1] / 16);
    if (Da.n[0] != 2 * RM || Da.n[1] != 4 * KK || Db.n[0] != 4 * KK || Db.n[1] != RN)
      return nv_err(lc, op, "kind=mma_sync with mismatched operand distributions");
    LLVMTypeRef et = nv_reg_type(lc, ti, false);
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
    nv_set(lc, res, x);
    return true;
  }
  return nv_err(lc, op, "kind=%s (only fma and mma_sync are lowered)", kind);
}
