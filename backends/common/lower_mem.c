/* Target-independent data movement through shared memory for the GPU tile lowerings:
 * convert_layout/reshape (row-major staging through the scratch buffer), local_load /
 * local_store and cp_async, which address shared memory by the buffer's shared layout
 * (row-major by `order`, 16-byte chunks XOR-swizzled by the row as TMA does) and are
 * vectorized along its fastest dimension. cp_async uses the target's asynchronous copy
 * where it has one (gpu_target_t.cp_async) and a synchronous copy otherwise. */
#include "backends/common/lower.h"

#include <string.h>

/* reduce: in-thread over the registers along the axis, then a butterfly of shuffles over
 * the lanes that hold distinct positions, then (when several warps do) the target's round
 * through shared memory (reduce_warps), after which all replicas agree. */
bool gpu_lower_reduce(gpu_lc_t *lc, const drk_tile_op_t *op) {
  const drk_tile_value_t *s = op->operands[0], *res = op->results[0];
  int ax = (int)drk_tile_op_attr_int(op, "axis", 0);
  const char *comb = drk_tile_op_attr_ident(op, "combiner", "sum");
  drk_dtype_t t = s->type.dtype;
  if (t == DRK_DT_BOOL || t == DRK_DT_F8E4M3 || t == DRK_DT_F8E5M2 || t == DRK_DT_I4 || t == DRK_DT_U4)
    return gpu_err(lc, op, "of %s", drk_dtype_name(t));
  gpu_dist_t D;
  if (!gpu_dist(lc, op, &s->type, &D)) return false;
  gpu_val_t *sv = gpu_get(lc, s);
  bool half = t == DRK_DT_F16 || t == DRK_DT_BF16;
  int nres = D.nregs / D.n[ax];
  gpu_val_t *x = gpu_val_new(lc, nres);
  for (int r = 0; r < D.nregs; r++) {
    int idx[GPU_MAXR], k = 0;
    gpu_reg_split(&D, r, idx);
    for (int d = 0; d < D.rank; d++)
      if (d != ax) k = k * D.n[d] + idx[d];
    LLVMValueRef v = sv->r[r];
    if (half) v = LLVMBuildFPExt(lc->b, v, lc->f32, "");
    x->r[k] = x->r[k] ? gpu_combine(lc, comb, t, x->r[k], v) : v;
    if (!x->r[k]) return gpu_err(lc, op, "with combiner '%s'", comb);
  }
  for (int i = 0; i < D.n_xor[ax]; i++)
    for (int k = 0; k < nres; k++) x->r[k] = gpu_combine(lc, comb, t, x->r[k], lc->t->shfl_xor(lc, x->r[k], D.xr[ax][i]));
  if (D.wcount[ax] > 1 && !lc->t->reduce_warps(lc, op, &D, ax, comb, t, x->r, nres)) return false;
  if (half)
    for (int k = 0; k < nres; k++) x->r[k] = LLVMBuildFPTrunc(lc->b, x->r[k], gpu_reg_type(lc, t, false), "");
  (void)res;
  gpu_set(lc, res, x);
  return true;
}

LLVMValueRef gpu_gep_elems(gpu_lc_t *lc, LLVMTypeRef et, LLVMValueRef base, LLVMValueRef idx) {
  return LLVMBuildGEP2(lc->b, et, base, &idx, 1, "");
}

/* Row-major linear index of register r's coordinate. */
static LLVMValueRef lin_index(gpu_lc_t *lc, const gpu_dist_t *D, int r) {
  LLVMValueRef li = gpu_i32(lc, 0);
  for (int d = 0; d < D->rank; d++)
    li = LLVMBuildAdd(lc->b, LLVMBuildMul(lc->b, li, gpu_i32(lc, D->dims[d]), ""), gpu_coord(lc, D, r, d), "");
  return li;
}

bool gpu_lower_relayout(gpu_lc_t *lc, const drk_tile_op_t *op) {
  const drk_tile_value_t *s = op->operands[0], *res = op->results[0];
  gpu_val_t *sv = gpu_get(lc, s);
  if (drk_tile_type_equal(&s->type, &res->type)) {
    gpu_set(lc, res, sv);
    return true;
  }
  gpu_dist_t Ds, Dd;
  if (!gpu_dist(lc, op, &s->type, &Ds) || !gpu_dist(lc, op, &res->type, &Dd)) return false;
  drk_dtype_t t = res->type.dtype;
  LLVMTypeRef mt = res->type.is_ptr ? lc->i64 : gpu_mem_type(lc, t);
  if (!mt) return gpu_err(lc, op, "of %s", drk_dtype_name(t));
  int64_t n = drk_tile_type_numel(&res->type);
  unsigned es = res->type.is_ptr ? 8 : (unsigned)(drk_dtype_bits(t) / 8);
  if (!lc->t->smem_fits(lc, op, n * es)) return false;
  LLVMValueRef buf = gpu_smem_scratch(lc, op, (unsigned)(n * es));
  if (!lc->t->sync(lc, op)) return false;
  for (int r = 0; r < Ds.nregs; r++) {
    LLVMValueRef v = sv->r[r];
    if (res->type.is_ptr) v = LLVMBuildPtrToInt(lc->b, v, lc->i64, "");
    else if (t == DRK_DT_BOOL) v = LLVMBuildZExt(lc->b, v, lc->i8, "");
    LLVMBuildStore(lc->b, v, gpu_gep_elems(lc, mt, buf, lin_index(lc, &Ds, r)));
  }
  if (!lc->t->sync(lc, op)) return false;
  gpu_val_t *x = gpu_val_new(lc, Dd.nregs);
  for (int r = 0; r < Dd.nregs; r++) {
    LLVMValueRef v = LLVMBuildLoad2(lc->b, mt, gpu_gep_elems(lc, mt, buf, lin_index(lc, &Dd, r)), "");
    if (res->type.is_ptr) v = LLVMBuildIntToPtr(lc->b, v, lc->p1, "");
    else if (t == DRK_DT_BOOL) v = LLVMBuildICmp(lc->b, LLVMIntNE, v, LLVMConstInt(lc->i8, 0, 0), "");
    x->r[r] = v;
  }
  if (!lc->t->sync(lc, op)) return false;
  gpu_set(lc, res, x);
  return true;
}

/* Tile dim that is the shared layout's fastest one. */
static int smem_fast_dim(const drk_tile_type_t *st) { return st->layout->order[0]; }

static int smem_vec(const gpu_dist_t *D, int f, int es) {
  gpu_axis_t big;
  for (int d = 0; d < GPU_MAXR; d++) big.contig[d] = 1 << 30, big.div[d] = 1 << 30, big.cnst[d] = 1;
  return gpu_vec_width(D, f, es, &big, NULL);
}

static bool smem_access(gpu_lc_t *lc, const drk_tile_op_t *op, const drk_tile_value_t *smv,
                        const drk_tile_value_t *tile, gpu_val_t *regs, bool store) {
  const drk_tile_type_t *st = &smv->type;
  if (st->layout->rank != tile->type.rank) return gpu_err(lc, op, "with a shared layout of another rank");
  gpu_dist_t D;
  if (!gpu_dist(lc, op, &tile->type, &D)) return false;
  drk_dtype_t t = tile->type.dtype;
  LLVMTypeRef mt = gpu_mem_type(lc, t);
  if (!mt || drk_dtype_bits(t) < 8) return gpu_err(lc, op, "of %s", drk_dtype_name(t));
  int es = drk_dtype_bits(t) / 8;
  int f = smem_fast_dim(st);
  int w = smem_vec(&D, f, es);
  LLVMValueRef base = gpu_get(lc, smv)->r[0];
  for (int r = 0; r < D.nregs; r++) {
    int idx[GPU_MAXR];
    gpu_reg_split(&D, r, idx);
    if (idx[f] % w) continue;
    LLVMValueRef c[GPU_MAXR];
    for (int d = 0; d < D.rank; d++) c[d] = gpu_coord(lc, &D, r, d);
    LLVMValueRef a = gpu_smem_elem_addr(lc, base, st, c);
    LLVMTypeRef vt = w > 1 ? LLVMVectorType(mt, (unsigned)w) : mt;
    if (store) {
      LLVMValueRef v = w > 1 ? LLVMGetUndef(vt) : NULL;
      for (int i = 0; i < w; i++) {
        idx[f] += i;
        LLVMValueRef e = regs->r[gpu_reg_join(&D, idx)];
        idx[f] -= i;
        if (t == DRK_DT_BOOL) e = LLVMBuildZExt(lc->b, e, lc->i8, "");
        v = w > 1 ? LLVMBuildInsertElement(lc->b, v, e, gpu_i32(lc, i), "") : e;
      }
      LLVMSetAlignment(LLVMBuildStore(lc->b, v, a), (unsigned)(w * es));
    } else {
      LLVMValueRef v = LLVMBuildLoad2(lc->b, vt, a, "");
      LLVMSetAlignment(v, (unsigned)(w * es));
      for (int i = 0; i < w; i++) {
        LLVMValueRef e = w > 1 ? LLVMBuildExtractElement(lc->b, v, gpu_i32(lc, i), "") : v;
        if (t == DRK_DT_BOOL) e = LLVMBuildICmp(lc->b, LLVMIntNE, e, LLVMConstInt(lc->i8, 0, 0), "");
        idx[f] += i;
        regs->r[gpu_reg_join(&D, idx)] = e;
        idx[f] -= i;
      }
    }
  }
  return true;
}

bool gpu_lower_local_load(gpu_lc_t *lc, const drk_tile_op_t *op) {
  const drk_tile_value_t *res = op->results[0];
  gpu_dist_t D;
  if (!gpu_dist(lc, op, &res->type, &D)) return false;
  gpu_val_t *x = gpu_val_new(lc, D.nregs);
  if (!smem_access(lc, op, op->operands[0], res, x, false)) return false;
  gpu_set(lc, res, x);
  return true;
}

bool gpu_lower_local_store(gpu_lc_t *lc, const drk_tile_op_t *op) {
  return smem_access(lc, op, op->operands[0], op->operands[1], gpu_get(lc, op->operands[1]), true);
}

bool gpu_lower_cp_async(gpu_lc_t *lc, const drk_tile_op_t *op) {
  const drk_tile_value_t *smv = op->operands[0], *pv = op->operands[1];
  const drk_tile_type_t *st = &smv->type;
  if (st->layout->rank != pv->type.rank) return gpu_err(lc, op, "with a shared layout of another rank");
  gpu_dist_t D;
  if (!gpu_dist(lc, op, &pv->type, &D)) return false;
  drk_dtype_t t = pv->type.dtype;
  LLVMTypeRef mt = gpu_mem_type(lc, t);
  if (!mt || drk_dtype_bits(t) < 8) return gpu_err(lc, op, "of %s", drk_dtype_name(t));
  int es = drk_dtype_bits(t) / 8;
  int f = smem_fast_dim(st);
  gpu_val_t *p = gpu_get(lc, pv);
  gpu_val_t *mk = op->n_operands > 2 ? gpu_get(lc, op->operands[2]) : NULL;
  /* the pointer facts of lower.c's pre-pass; recomputed there, read through the table */
  const gpu_axis_t *pa = pv->id < lc->n_ids ? lc->axis[pv->id] : NULL;
  const gpu_axis_t *ma = mk && op->operands[2]->id < lc->n_ids ? lc->axis[op->operands[2]->id] : NULL;
  if (mk && !ma) pa = NULL;
  int w = gpu_vec_width(&D, f, es, pa, mk ? ma : NULL);
  int ws = smem_vec(&D, f, es);
  if (ws < w) w = ws;
  LLVMValueRef base = gpu_get(lc, smv)->r[0];
  /* Copies the target cannot make asynchronous (none, or not this width) are w-element
   * loads (branched around when masked off, zero then) and shared stores; all the loads
   * are issued before the first store so that their latencies overlap. */
  LLVMTypeRef vt = w > 1 ? LLVMVectorType(mt, (unsigned)w) : mt;
  LLVMValueRef *sync_addr = drk_arena_alloc(lc->a, sizeof(LLVMValueRef) * (size_t)D.nregs);
  LLVMValueRef *sync_val = drk_arena_alloc(lc->a, sizeof(LLVMValueRef) * (size_t)D.nregs);
  int n_sync = 0;
  for (int r = 0; r < D.nregs; r++) {
    int idx[GPU_MAXR];
    gpu_reg_split(&D, r, idx);
    if (idx[f] % w) continue;
    LLVMValueRef c[GPU_MAXR];
    for (int d = 0; d < D.rank; d++) c[d] = gpu_coord(lc, &D, r, d);
    LLVMValueRef a = gpu_smem_elem_addr(lc, base, st, c);
    if (lc->t->cp_async && lc->t->cp_async(lc, a, p->r[r], w * es, mk ? mk->r[r] : NULL)) continue;
    LLVMValueRef v;
    if (mk) {
      LLVMBasicBlockRef cur = LLVMGetInsertBlock(lc->b);
      LLVMBasicBlockRef bl = LLVMAppendBasicBlockInContext(lc->ctx, lc->fn, "cp");
      LLVMBasicBlockRef bj = LLVMAppendBasicBlockInContext(lc->ctx, lc->fn, "cp.join");
      LLVMBuildCondBr(lc->b, mk->r[r], bl, bj);
      LLVMPositionBuilderAtEnd(lc->b, bl);
      LLVMValueRef l = LLVMBuildLoad2(lc->b, vt, p->r[r], "");
      LLVMSetAlignment(l, (unsigned)(w * es));
      LLVMBuildBr(lc->b, bj);
      LLVMPositionBuilderAtEnd(lc->b, bj);
      v = LLVMBuildPhi(lc->b, vt, "");
      LLVMValueRef iv[2] = {l, LLVMConstNull(vt)};
      LLVMBasicBlockRef ib[2] = {bl, cur};
      LLVMAddIncoming(v, iv, ib, 2);
    } else {
      v = LLVMBuildLoad2(lc->b, vt, p->r[r], "");
      LLVMSetAlignment(v, (unsigned)(w * es));
    }
    sync_addr[n_sync] = a;
    sync_val[n_sync++] = v;
  }
  for (int i = 0; i < n_sync; i++) LLVMSetAlignment(LLVMBuildStore(lc->b, sync_val[i], sync_addr[i]), (unsigned)(w * es));
  return true;
}
