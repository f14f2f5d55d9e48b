/* Tile IR -> LLVM IR for gfx942: reductions, layout conversions, shared memory (LDS),
 * cp.async and dot (part of lower.c's lowering; see lower_internal.h). Mirrors
 * backends/nvptx/lower_mem.c.
 *
 * reduce: in-thread over the registers along the axis, then a butterfly of ds_bpermute
 * shuffles over the lanes that hold distinct positions, then (when several warps do) a
 * round through LDS that every thread reads back in the same order, so all replicas agree.
 * convert_layout and reshape go through LDS (row-major staging). local_load / local_store /
 * cp_async address LDS by the buffer's shared layout (row-major by `order`, 16-byte chunks
 * XOR-swizzled by the row) and are vectorized along its fastest dimension; cp_async is a
 * synchronous global load + LDS store (no async copy into LDS is used on gfx942 yet).
 * dot: kind fma (any float, blocked accumulator: v_fma/v_fmac) and kind mma_sync or mfma
 * (MFMA). An mma_sync accumulator is placed as an MFMA accumulator on this backend
 * (lower.c, dim_mfma_acc), and its dot_op operands as MFMA A/B operands, so the mma_sync
 * dots that passes/lower_matmul.c writes for NVIDIA become v_mfma_f32_16x16x16_{f16,bf16}
 * (f32 inputs: v_mfma_f32_16x16x4_f32, exact f32 products) with no data movement; `mfma` layouts with instr 32 use the 32x32 forms. */
#include "backends/amdgpu/lower_internal.h"

#include <string.h>

static LLVMValueRef gep_elems(am_lc_t *lc, LLVMTypeRef et, LLVMValueRef base, LLVMValueRef idx) {
  return LLVMBuildGEP2(lc->b, et, base, &idx, 1, "");
}

static bool cta_sync(am_lc_t *lc, const drk_tile_op_t *op) {
  (void)op;
  am_barrier(lc);
  return true;
}

bool am_lower_reduce(am_lc_t *lc, const drk_tile_op_t *op) {
  const drk_tile_value_t *s = op->operands[0], *res = op->results[0];
  int ax = (int)drk_tile_op_attr_int(op, "axis", 0);
  const char *comb = drk_tile_op_attr_ident(op, "combiner", "sum");
  drk_dtype_t t = s->type.dtype;
  if (t == DRK_DT_BOOL || t == DRK_DT_F8E4M3 || t == DRK_DT_F8E5M2 || t == DRK_DT_I4 || t == DRK_DT_U4)
    return am_err(lc, op, "of %s", drk_dtype_name(t));
  am_dist_t D;
  if (!am_dist(lc, op, &s->type, &D)) return false;
  am_val_t *sv = am_get(lc, s);
  bool half = t == DRK_DT_F16 || t == DRK_DT_BF16;
  int nres = D.nregs / D.n[ax];
  am_val_t *x = am_val_new(lc, nres);
  for (int r = 0; r < D.nregs; r++) {
    int idx[AM_MAXR], k = 0;
    am_reg_split(&D, r, idx);
    for (int d = 0; d < D.rank; d++)
      if (d != ax) k = k * D.n[d] + idx[d];
    LLVMValueRef v = sv->r[r];
    if (half) v = LLVMBuildFPExt(lc->b, v, lc->f32, "");
    x->r[k] = x->r[k] ? am_combine(lc, comb, t, x->r[k], v) : v;
    if (!x->r[k]) return am_err(lc, op, "with combiner '%s'", comb);
  }
  for (int i = 0; i < D.n_xor[ax]; i++)
    for (int k = 0; k < nres; k++) x->r[k] = am_combine(lc, comb, t, x->r[k], am_shfl_xor(lc, x->r[k], D.xr[ax][i]));
  int wc = D.wcount[ax];
  if (wc > 1) {
    LLVMTypeRef ct = LLVMTypeOf(x->r[0]);
    unsigned es = LLVMGetTypeKind(ct) == LLVMDoubleTypeKind || ct == lc->i64 ? 8 : ct == lc->i8 ? 1 : ct == lc->i16 ? 2 : 4;
    /* slot of work-item t for result k: k * block + t; the partner holding the same
     * elements in warp j along the axis is t0 + j * wstride (wstride in work-items) */
    int64_t W = lc->k->block;
    if ((uint64_t)(nres * W) * es > lc->cg->arch->lds_bytes)
      return am_err(lc, op, "needing %lld bytes of LDS scratch", (long long)(nres * W) * es);
    LLVMValueRef buf = am_smem_scratch(lc, op, (unsigned)(nres * W) * es);
    LLVMValueRef me = am_tid(lc);
    if (!cta_sync(lc, op)) return false; /* the scratch may still be read by an earlier op */
    for (int k = 0; k < nres; k++) {
      LLVMValueRef i = LLVMBuildAdd(lc->b, me, am_i32(lc, (int64_t)k * W), "");
      LLVMBuildStore(lc->b, x->r[k], gep_elems(lc, ct, buf, i));
    }
    if (!cta_sync(lc, op)) return false;
    LLVMValueRef wst = am_i32(lc, D.wstride[ax]);
    LLVMValueRef wa = LLVMBuildURem(lc->b, LLVMBuildUDiv(lc->b, me, wst, ""), am_i32(lc, wc), "");
    LLVMValueRef w0 = LLVMBuildSub(lc->b, me, LLVMBuildMul(lc->b, wa, wst, ""), "");
    for (int k = 0; k < nres; k++) {
      LLVMValueRef acc = NULL;
      for (int j = 0; j < wc; j++) {
        LLVMValueRef w = LLVMBuildAdd(lc->b, w0, am_i32(lc, (int64_t)j * D.wstride[ax]), "");
        LLVMValueRef i = LLVMBuildAdd(lc->b, w, am_i32(lc, (int64_t)k * W), "");
        LLVMValueRef v = LLVMBuildLoad2(lc->b, ct, gep_elems(lc, ct, buf, i), "");
        acc = acc ? am_combine(lc, comb, t, acc, v) : v;
      }
      x->r[k] = acc;
    }
    if (!cta_sync(lc, op)) return false;
  }
  if (half)
    for (int k = 0; k < nres; k++) x->r[k] = LLVMBuildFPTrunc(lc->b, x->r[k], am_reg_type(lc, t, false), "");
  (void)res;
  am_set(lc, res, x);
  return true;
}

/* Row-major linear index of register r's coordinate. */
static LLVMValueRef lin_index(am_lc_t *lc, const am_dist_t *D, int r) {
  LLVMValueRef li = am_i32(lc, 0);
  for (int d = 0; d < D->rank; d++)
    li = LLVMBuildAdd(lc->b, LLVMBuildMul(lc->b, li, am_i32(lc, D->dims[d]), ""), am_coord(lc, D, r, d), "");
  return li;
}

bool am_lower_relayout(am_lc_t *lc, const drk_tile_op_t *op) {
  const drk_tile_value_t *s = op->operands[0], *res = op->results[0];
  am_val_t *sv = am_get(lc, s);
  if (drk_tile_type_equal(&s->type, &res->type)) {
    am_set(lc, res, sv);
    return true;
  }
  am_dist_t Ds, Dd;
  if (!am_dist(lc, op, &s->type, &Ds) || !am_dist(lc, op, &res->type, &Dd)) return false;
  drk_dtype_t t = res->type.dtype;
  LLVMTypeRef mt = res->type.is_ptr ? lc->i64 : am_mem_type(lc, t);
  if (!mt) return am_err(lc, op, "of %s", drk_dtype_name(t));
  int64_t n = drk_tile_type_numel(&res->type);
  unsigned es = res->type.is_ptr ? 8 : (unsigned)(drk_dtype_bits(t) / 8);
  if (n * es > (int64_t)lc->cg->arch->lds_bytes)
    return am_err(lc, op, "of %lld bytes through LDS (%u available)", (long long)(n * es), lc->cg->arch->lds_bytes);
  LLVMValueRef buf = am_smem_scratch(lc, op, (unsigned)(n * es));
  if (!cta_sync(lc, op)) return false;
  for (int r = 0; r < Ds.nregs; r++) {
    LLVMValueRef v = sv->r[r];
    if (res->type.is_ptr) v = LLVMBuildPtrToInt(lc->b, v, lc->i64, "");
    else if (t == DRK_DT_BOOL) v = LLVMBuildZExt(lc->b, v, lc->i8, "");
    LLVMBuildStore(lc->b, v, gep_elems(lc, mt, buf, lin_index(lc, &Ds, r)));
  }
  if (!cta_sync(lc, op)) return false;
  am_val_t *x = am_val_new(lc, Dd.nregs);
  for (int r = 0; r < Dd.nregs; r++) {
    LLVMValueRef v = LLVMBuildLoad2(lc->b, mt, gep_elems(lc, mt, buf, lin_index(lc, &Dd, r)), "");
    if (res->type.is_ptr) v = LLVMBuildIntToPtr(lc->b, v, lc->p1, "");
    else if (t == DRK_DT_BOOL) v = LLVMBuildICmp(lc->b, LLVMIntNE, v, LLVMConstInt(lc->i8, 0, 0), "");
    x->r[r] = v;
  }
  if (!cta_sync(lc, op)) return false;
  am_set(lc, res, x);
  return true;
}

/* Tile dim that is the shared layout's fastest one. */
static int smem_fast_dim(const drk_tile_type_t *st) { return st->layout->order[0]; }

static int smem_vec(const am_dist_t *D, int f, int es) {
  am_axis_t big;
  for (int d = 0; d < AM_MAXR; d++) big.contig[d] = 1 << 30, big.div[d] = 1 << 30, big.cnst[d] = 1;
  return am_vec_width(D, f, es, &big, NULL);
}

static bool smem_access(am_lc_t *lc, const drk_tile_op_t *op, const drk_tile_value_t *smv,
                        const drk_tile_value_t *tile, am_val_t *regs, bool store) {
  const drk_tile_type_t *st = &smv->type;
  if (st->layout->rank != tile->type.rank) return am_err(lc, op, "with a shared layout of another rank");
  am_dist_t D;
  if (!am_dist(lc, op, &tile->type, &D)) return false;
  drk_dtype_t t = tile->type.dtype;
  LLVMTypeRef mt = am_mem_type(lc, t);
  if (!mt || drk_dtype_bits(t) < 8) return am_err(lc, op, "of %s", drk_dtype_name(t));
  int es = drk_dtype_bits(t) / 8;
  int f = smem_fast_dim(st);
  int w = smem_vec(&D, f, es);
  LLVMValueRef base = am_get(lc, smv)->r[0];
  for (int r = 0; r < D.nregs; r++) {
    int idx[AM_MAXR];
    am_reg_split(&D, r, idx);
    if (idx[f] % w) continue;
    LLVMValueRef c[AM_MAXR];
    for (int d = 0; d < D.rank; d++) c[d] = am_coord(lc, &D, r, d);
    LLVMValueRef a = am_smem_elem_addr(lc, base, st, c);
    LLVMTypeRef vt = w > 1 ? LLVMVectorType(mt, (unsigned)w) : mt;
    if (store) {
      LLVMValueRef v = w > 1 ? LLVMGetUndef(vt) : NULL;
      for (int i = 0; i < w; i++) {
        idx[f] += i;
        LLVMValueRef e = regs->r[am_reg_join(&D, idx)];
        idx[f] -= i;
        if (t == DRK_DT_BOOL) e = LLVMBuildZExt(lc->b, e, lc->i8, "");
        v = w > 1 ? LLVMBuildInsertElement(lc->b, v, e, am_i32(lc, i), "") : e;
      }
      LLVMSetAlignment(LLVMBuildStore(lc->b, v, a), (unsigned)(w * es));
    } else {
      LLVMValueRef v = LLVMBuildLoad2(lc->b, vt, a, "");
      LLVMSetAlignment(v, (unsigned)(w * es));
      for (int i = 0; i < w; i++) {
        LLVMValueRef e = w > 1 ? LLVMBuildExtractElement(lc->b, v, am_i32(lc, i), "") : v;
        if (t == DRK_DT_BOOL) e = LLVMBuildICmp(lc->b, LLVMIntNE, e, LLVMConstInt(lc->i8, 0, 0), "");
        idx[f] += i;
        regs->r[am_reg_join(&D, idx)] = e;
        idx[f] -= i;
      }
    }
  }
  return true;
}

bool am_lower_local_load(am_lc_t *lc, const drk_tile_op_t *op) {
  const drk_tile_value_t *res = op->results[0];
  am_dist_t D;
  if (!am_dist(lc, op, &res->type, &D)) return false;
  am_val_t *x = am_val_new(lc, D.nregs);
  if (!smem_access(lc, op, op->operands[0], res, x, false)) return false;
  am_set(lc, res, x);
  return true;
}

bool am_lower_local_store(am_lc_t *lc, const drk_tile_op_t *op) {
  return smem_access(lc, op, op->operands[0], op->operands[1], am_get(lc, op->operands[1]), true);
}

bool am_lower_cp_async(am_lc_t *lc, const drk_tile_op_t *op) {
  const drk_tile_value_t *smv = op->operands[0], *pv = op->operands[1];
  const drk_tile_type_t *st = &smv->type;
  if (st->layout->rank != pv->type.rank) return am_err(lc, op, "with a shared layout of another rank");
  am_dist_t D;
  if (!am_dist(lc, op, &pv->type, &D)) return false;
  drk_dtype_t t = pv->type.dtype;
  LLVMTypeRef mt = am_mem_type(lc, t);
  if (!mt || drk_dtype_bits(t) < 8) return am_err(lc, op, "of %s", drk_dtype_name(t));
  int es = drk_dtype_bits(t) / 8;
  int f = smem_fast_dim(st);
  am_val_t *p = am_get(lc, pv);
  am_val_t *mk = op->n_operands > 2 ? am_get(lc, op->operands[2]) : NULL;
  /* the pointer facts of lower.c's pre-pass; recomputed there, read through the table */
  const am_axis_t *pa = pv->id < lc->n_ids ? lc->axis[pv->id] : NULL;
  const am_axis_t *ma = mk && op->operands[2]->id < lc->n_ids ? lc->axis[op->operands[2]->id] : NULL;
  if (mk && !ma) pa = NULL;
  int w = am_vec_width(&D, f, es, pa, mk ? ma : NULL);
  int ws = smem_vec(&D, f, es);
  if (ws < w) w = ws;
  LLVMValueRef base = am_get(lc, smv)->r[0];
  for (int r = 0; r < D.nregs; r++) {
    int idx[AM_MAXR];
    am_reg_split(&D, r, idx);
    if (idx[f] % w) continue;
    LLVMValueRef c[AM_MAXR];
    for (int d = 0; d < D.rank; d++) c[d] = am_coord(lc, &D, r, d);
    LLVMValueRef a = am_smem_elem_addr(lc, base, st, c);
    (void)a;
    /* a synchronous copy, zero-filled when masked off */
    for (int i = 0; i < w; i++) {
      idx[f] += i;
      int ri = am_reg_join(&D, idx);
      idx[f] -= i;
      LLVMValueRef ci[AM_MAXR];
      for (int d = 0; d < D.rank; d++) ci[d] = am_coord(lc, &D, ri, d);
      LLVMValueRef ai = am_smem_elem_addr(lc, base, st, ci);
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
static bool lower_dot_fma(am_lc_t *lc, const drk_tile_op_t *op, const am_dist_t *Da, const am_dist_t *Db,
                          const am_dist_t *Dc) {
  const drk_tile_value_t *A = op->operands[0], *Bv = op->operands[1], *C = op->operands[2];
  am_val_t *a = am_get(lc, A), *b = am_get(lc, Bv), *c = am_get(lc, C);
  am_val_t *x = am_val_new(lc, Dc->nregs);
  drk_dtype_t ti = A->type.dtype, tc = C->type.dtype;
  if (!drk_dtype_is_float(ti) || !drk_dtype_is_float(tc) || Bv->type.dtype != ti || ti == DRK_DT_F8E4M3 ||
      ti == DRK_DT_F8E5M2 || tc == DRK_DT_F8E4M3 || tc == DRK_DT_F8E5M2)
    return am_err(lc, op, "kind=fma on %s x %s -> %s", drk_dtype_name(ti), drk_dtype_name(Bv->type.dtype),
                  drk_dtype_name(tc));
  if (C->type.layout->kind != DRK_TL_BLOCKED || A->type.layout->kind != DRK_TL_DOT_OP ||
      Bv->type.layout->kind != DRK_TL_DOT_OP)
    return am_err(lc, op, "kind=fma without a blocked accumulator and dot_op operands");
  int K = (int)A->type.dims[1];
  if (Da->n[1] != K || Db->n[0] != K || Da->n[0] != Dc->n[0] || Db->n[1] != Dc->n[1])
    return am_err(lc, op, "kind=fma with mismatched operand distributions");
  LLVMTypeRef ct = tc == DRK_DT_F64 ? lc->f64 : lc->f32;
  LLVMTypeRef rt = am_reg_type(lc, tc, false);
  for (int i = 0; i < Dc->n[0]; i++)
    for (int j = 0; j < Dc->n[1]; j++) {
      LLVMValueRef acc = c->r[i * Dc->n[1] + j];
      if (LLVMTypeOf(acc) != ct) acc = LLVMBuildFPExt(lc->b, acc, ct, "");
      for (int k = 0; k < K; k++) {
        LLVMValueRef av = a->r[i * K + k], bv = b->r[k * Db->n[1] + j];
        if (LLVMTypeOf(av) != ct) av = LLVMBuildFPCast(lc->b, av, ct, "");
        if (LLVMTypeOf(bv) != ct) bv = LLVMBuildFPCast(lc->b, bv, ct, "");
        LLVMValueRef args[3] = {av, bv, acc};
        acc = drk_amdgpu_call_intrinsic(lc->cg, "llvm.fma", &ct, 1, args, 3);
      }
      if (ct != rt) acc = LLVMBuildFPTrunc(lc->b, acc, rt, "");
      x->r[i * Dc->n[1] + j] = acc;
    }
  am_set(lc, op->results[0], x);
  return true;
}

/* The MFMA for inputs of type ti and instruction size instr; -1 if none. */
static int mfma_kind(drk_dtype_t ti, int instr) {
  bool s = instr == 16;
  switch (ti) {
  case DRK_DT_BF16: return s ? DRK_AMDGPU_MFMA_F32_16X16X16_BF16 : DRK_AMDGPU_MFMA_F32_32X32X8_BF16;
  case DRK_DT_F16: return s ? DRK_AMDGPU_MFMA_F32_16X16X16_F16 : DRK_AMDGPU_MFMA_F32_32X32X8_F16;
  case DRK_DT_F32: return s ? DRK_AMDGPU_MFMA_F32_16X16X4_F32 : DRK_AMDGPU_MFMA_F32_32X32X2_F32;
  default: return -1;
  }
}

/* e registers of an operand as the MFMA's A/B type (bf16 goes as i16 bits, fp8 as 8 bytes
 * packed in an i64). */
static LLVMValueRef mfma_operand(am_lc_t *lc, drk_amdgpu_mfma_t kind, drk_dtype_t ti, LLVMValueRef *v, int e) {
  LLVMTypeRef ab = drk_amdgpu_mfma_ab_type(lc->cg, kind);
  if (e == 1) return v[0];
  LLVMTypeRef et = ti == DRK_DT_F16 ? lc->f16 : ti == DRK_DT_BF16 ? lc->i16 : lc->i8;
  LLVMValueRef x = LLVMGetUndef(LLVMVectorType(et, (unsigned)e));
  for (int i = 0; i < e; i++) {
    LLVMValueRef s = ti == DRK_DT_BF16 ? LLVMBuildBitCast(lc->b, v[i], lc->i16, "") : v[i];
    x = LLVMBuildInsertElement(lc->b, x, s, am_i32(lc, i), "");
  }
  return LLVMTypeOf(x) == ab ? x : LLVMBuildBitCast(lc->b, x, ab, "");
}

bool am_lower_dot(am_lc_t *lc, const drk_tile_op_t *op) {
  const drk_tile_value_t *A = op->operands[0], *Bv = op->operands[1], *C = op->operands[2], *res = op->results[0];
  const char *kind = drk_tile_op_attr_ident(op, "kind", "");
  if (A->type.kind != DRK_TT_TILE || Bv->type.kind != DRK_TT_TILE)
    return am_err(lc, op, "kind=%s with shared-memory operands (wgmma is NVIDIA-only)", kind);
  am_dist_t Da, Db, Dc;
  if (!am_dist(lc, op, &A->type, &Da) || !am_dist(lc, op, &Bv->type, &Db) || !am_dist(lc, op, &C->type, &Dc))
    return false;
  if (strcmp(kind, "fma") == 0) return lower_dot_fma(lc, op, &Da, &Db, &Dc);
  if (strcmp(kind, "mma_sync") != 0 && strcmp(kind, "mfma") != 0)
    return am_err(lc, op, "kind=%s (the AMDGPU backend lowers fma, mma_sync and mfma)", kind);
  drk_dtype_t ti = A->type.dtype, tc = C->type.dtype;
  const drk_tile_layout_t *CL = C->type.layout;
  am_mfma_geom_t g;
  if (!am_mfma_geom(CL, ti, &g))
    return am_err(lc, op, "kind=%s with accumulator layout %s (needs mma_sync or mfma over whole 64-lane waves)",
                  kind, CL->name);
  if (ti == DRK_DT_F8E4M3 || ti == DRK_DT_F8E5M2)
    return am_err(lc, op, "kind=%s on %s (gfx942's fp8 MFMA reads the FNUZ formats, not OCP f8)", kind,
                  drk_dtype_name(ti));
  int mk = mfma_kind(ti, g.instr);
  if (mk < 0 || Bv->type.dtype != ti || tc != DRK_DT_F32)
    return am_err(lc, op, "kind=%s on %s x %s -> %s (MFMA takes f16, bf16, f32, f8 of one type -> f32)", kind,
                  drk_dtype_name(ti), drk_dtype_name(Bv->type.dtype), drk_dtype_name(tc));
  const drk_amdgpu_mfma_info_t *mi = drk_amdgpu_mfma_info((drk_amdgpu_mfma_t)mk);
  if (lc->k->block < 64 || lc->k->block % 64)
    return am_err(lc, op, "kind=%s in a block of %lld threads (MFMA needs whole 64-lane waves)", kind,
                  (long long)lc->k->block);
  int per = (int)mi->acc_elems, e = g.e;
  int RM = Dc.n[0] / per, RN = Dc.n[1], KK = (int)(A->type.dims[1] / g.k_per);
  if (Dc.n[0] % per || Da.n[0] != RM || Da.n[1] != KK * e || Db.n[0] != KK * e || Db.n[1] != RN)
    return am_err(lc, op, "kind=%s with mismatched operand distributions", kind);
  am_val_t *a = am_get(lc, A), *b = am_get(lc, Bv), *c = am_get(lc, C);
  am_val_t *x = am_val_new(lc, Dc.nregs);
  LLVMTypeRef vt = LLVMVectorType(lc->f32, (unsigned)per);
  for (int rm = 0; rm < RM; rm++)
    for (int rn = 0; rn < RN; rn++) {
      LLVMValueRef acc = LLVMGetUndef(vt);
      for (int q = 0; q < per; q++)
        acc = LLVMBuildInsertElement(lc->b, acc, c->r[(rm * per + q) * Dc.n[1] + rn], am_i32(lc, q), "");
      for (int kk = 0; kk < KK; kk++) {
        LLVMValueRef av[8], bv[8];
        for (int v = 0; v < e; v++) {
          av[v] = a->r[rm * Da.n[1] + kk * e + v];
          bv[v] = b->r[(kk * e + v) * Db.n[1] + rn];
        }
        acc = drk_amdgpu_mfma(lc->cg, (drk_amdgpu_mfma_t)mk, mfma_operand(lc, (drk_amdgpu_mfma_t)mk, ti, av, e),
                              mfma_operand(lc, (drk_amdgpu_mfma_t)mk, ti, bv, e), acc);
      }
      for (int q = 0; q < per; q++)
        x->r[(rm * per + q) * Dc.n[1] + rn] = LLVMBuildExtractElement(lc->b, acc, am_i32(lc, q), "");
    }
  am_set(lc, res, x);
  return true;
}
