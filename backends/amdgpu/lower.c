/* Tile IR -> LLVM IR for gfx942.
 *
 * Requires a verified tile module (drk_tile_verify). Guarantees a module that passes
 * LLVMVerifyModule, or a located error (`file:line:col: error: tile op 'x' ...`) for the
 * first op, layout or dtype this lowering does not handle yet -- never an abort.
 *
 * Model: each register tile becomes the list of elements the executing thread owns, one
 * LLVM value each, enumerated in a fixed order per (layout, shape) (Triton's model). Tile
 * layouts count threads in warps of 32 (the tile IR is written that way); on wave64 a
 * hardware wave holds two layout warps: layout warp = workitem / 32, layout lane =
 * workitem % 32. Cross-lane reductions therefore butterfly over the 32-lane halves through
 * ds_bpermute, and cross-warp ones go through LDS (the op's `scratch` offset in the
 * kernel's dynamic LDS).
 *
 * Supported now: program_id, num_programs, constant, make_range, splat, expand_dims,
 * broadcast, addptr, load/store (masked, per element), elementwise math, cmp, select, cast
 * (not f8), reduce over blocked layouts, barrier, return. Not yet: dot (MFMA), shared
 * memory ops (local_*), convert_layout, for/if, and everything NVIDIA-only (cp_async, TMA,
 * mbarriers, wgmma, warp_group, setmaxnreg). */
#include "backends/amdgpu/amdgpu.h"

#include <stdlib.h>
#include <string.h>

#define DRK_LOWER_MAX_ELEMS 1024 /* per thread and tile: beyond it registers spill anyway */

typedef struct {
  int n;
  LLVMValueRef *e;
} drk_lv_t;

typedef struct {
  const drk_tile_module_t *tm;
  drk_amdgpu_cg_t cg;
  drk_diag_t *d;
  drk_arena_t *scratch;
  drk_lv_t *vals; /* by value id */
  LLVMValueRef fn;
  LLVMValueRef tid, lane32, warp; /* workitem id, layout lane (0..31), layout warp */
  const drk_tile_kernel_t *k;
  bool failed;
} drk_lower_t;

static LLVMValueRef drk_c32(drk_lower_t *L, long long v) {
  return LLVMConstInt(LLVMInt32TypeInContext(L->cg.ctx), (unsigned long long)v, 1);
}

static bool drk_lower_fail(drk_lower_t *L, drk_loc_t loc, const char *fmt, const char *a, const char *b) {
  char msg[512];
  snprintf(msg, sizeof msg, fmt, a, b);
  drk_diag_error(L->d, loc, "%s", msg);
  L->failed = true;
  return false;
}

/* ---- types ---- */
static LLVMTypeRef drk_lower_dtype(drk_lower_t *L, drk_dtype_t t, bool in_memory) {
  LLVMContextRef c = L->cg.ctx;
  switch (t) {
  case DRK_DT_F64: return LLVMDoubleTypeInContext(c);
  case DRK_DT_F32: return LLVMFloatTypeInContext(c);
  case DRK_DT_F16: return LLVMHalfTypeInContext(c);
  case DRK_DT_BF16: return LLVMBFloatTypeInContext(c);
  case DRK_DT_I64: return LLVMInt64TypeInContext(c);
  case DRK_DT_I32: return LLVMInt32TypeInContext(c);
  case DRK_DT_I16: return LLVMInt16TypeInContext(c);
  case DRK_DT_I8: case DRK_DT_U8: return LLVMInt8TypeInContext(c);
  case DRK_DT_BOOL: return in_memory ? LLVMInt8TypeInContext(c) : LLVMInt1TypeInContext(c);
  default: return NULL; /* f8, i4, u4: not yet */
  }
}

static LLVMTypeRef drk_lower_elem_type(drk_lower_t *L, const drk_tile_type_t *t, drk_loc_t loc) {
  if (t->is_ptr) return LLVMPointerTypeInContext(L->cg.ctx, DRK_AMDGPU_AS_GLOBAL);
  LLVMTypeRef r = drk_lower_dtype(L, t->dtype, false);
  if (!r) drk_lower_fail(L, loc, "dtype %s is not supported by the AMDGPU backend yet%s",
                         drk_dtype_name(t->dtype), "");
  return r;
}

/* ---- layouts: which elements a thread owns ---- */
/* The blocked layout under `l` (itself, or the parent of a slice) and the dimension the
 * slice removed (-1 for none). NULL for layouts this lowering does not handle. */
static const drk_tile_layout_t *drk_lower_blocked(const drk_tile_layout_t *l, int *out_removed) {
  if (l && l->kind == DRK_TL_BLOCKED) {
    *out_removed = -1;
    return l;
  }
  if (l && l->kind == DRK_TL_SLICE && l->parent && l->parent->kind == DRK_TL_BLOCKED) {
    *out_removed = l->dim;
    return l->parent;
  }
  return NULL;
}

/* Per-dimension coordinates of this thread in the parent blocked layout. */
static void drk_lower_thread_coords(drk_lower_t *L, const drk_tile_layout_t *p, LLVMValueRef *lane_d,
                                    LLVMValueRef *warp_d) {
  LLVMBuilderRef b = L->cg.b;
  LLVMValueRef lane = L->lane32, warp = L->warp;
  for (int i = 0; i < p->rank; i++) {
    int dd = p->order[i];
    lane_d[dd] = LLVMBuildURem(b, lane, drk_c32(L, p->tpw[dd]), "");
    lane = LLVMBuildUDiv(b, lane, drk_c32(L, p->tpw[dd]), "");
    warp_d[dd] = LLVMBuildURem(b, warp, drk_c32(L, p->wpc[dd]), "");
    warp = LLVMBuildUDiv(b, warp, drk_c32(L, p->wpc[dd]), "");
  }
}

/* Elements per thread along parent dimension dd for a tile extent D. */
static int64_t drk_lower_per_dim(const drk_tile_layout_t *p, int dd, int64_t D) {
  int64_t cover = (int64_t)p->spt[dd] * p->tpw[dd] * p->wpc[dd];
  return p->spt[dd] * (D > cover ? D / cover : 1);
}

/* Number of elements this thread owns of a tile of type t; -1 if unsupported. Enumeration
 * order: row-major over the tile's dimensions, each dimension's own elements in order. */
static int64_t drk_lower_count(const drk_tile_type_t *t) {
  int removed;
  const drk_tile_layout_t *p = drk_lower_blocked(t->layout, &removed);
  if (!p) return -1;
  int64_t n = 1;
  for (int i = 0, dd = 0; i < t->rank; i++, dd++) {
    if (dd == removed) dd++;
    n *= drk_lower_per_dim(p, dd, t->dims[i]);
  }
  return n;
}

/* idx[k * rank + i] = tile index along dimension i of the thread's k-th element. */
static LLVMValueRef *drk_lower_indices(drk_lower_t *L, const drk_tile_type_t *t, int64_t n) {
  int removed;
  const drk_tile_layout_t *p = drk_lower_blocked(t->layout, &removed);
  LLVMValueRef lane_d[DRK_TILE_MAX_RANK], warp_d[DRK_TILE_MAX_RANK];
  drk_lower_thread_coords(L, p, lane_d, warp_d);
  int64_t per[DRK_TILE_MAX_RANK];
  int pdim[DRK_TILE_MAX_RANK];
  for (int i = 0, dd = 0; i < t->rank; i++, dd++) {
    if (dd == removed) dd++;
    pdim[i] = dd;
    per[i] = drk_lower_per_dim(p, dd, t->dims[i]);
  }
  LLVMValueRef *idx = drk_arena_alloc(L->scratch, sizeof *idx * (size_t)(n * (t->rank ? t->rank : 1)));
  LLVMBuilderRef b = L->cg.b;
  for (int64_t k = 0; k < n; k++) {
    int64_t rem = k;
    for (int i = t->rank - 1; i >= 0; i--) {
      int dd = pdim[i];
      int64_t j = rem % per[i];
      rem /= per[i];
      int64_t spt = p->spt[dd], cover = spt * p->tpw[dd] * p->wpc[dd];
      int64_t r = j / spt, s = j % spt;
      /* r*cover + warp*spt*tpw + lane*spt + s, wrapped: smaller tiles replicate. */
      LLVMValueRef v = LLVMBuildAdd(b, LLVMBuildMul(b, warp_d[dd], drk_c32(L, spt * p->tpw[dd]), ""),
                                    LLVMBuildMul(b, lane_d[dd], drk_c32(L, spt), ""), "");
      v = LLVMBuildAdd(b, v, drk_c32(L, r * cover + s), "");
      idx[k * t->rank + i] = LLVMBuildAnd(b, v, drk_c32(L, t->dims[i] - 1), "");
    }
  }
  return idx;
}

/* ---- values ---- */
static drk_lv_t *drk_lower_get(drk_lower_t *L, const drk_tile_value_t *v) { return &L->vals[v->id]; }

static drk_lv_t *drk_lower_def(drk_lower_t *L, const drk_tile_value_t *v, int64_t n) {
  drk_lv_t *r = &L->vals[v->id];
  r->n = (int)n;
  r->e = drk_arena_alloc(L->scratch, sizeof(LLVMValueRef) * (size_t)(n ? n : 1));
  return r;
}

/* Elements of a tile-typed result; checks the layout and per-thread size. */
static drk_lv_t *drk_lower_def_tile(drk_lower_t *L, const drk_tile_op_t *op, const drk_tile_value_t *v) {
  if (v->type.kind == DRK_TT_SCALAR) return drk_lower_def(L, v, 1);
  if (v->type.kind != DRK_TT_TILE) {
    drk_lower_fail(L, op->loc, "tile op '%s': %s values are not supported by the AMDGPU backend yet",
                   drk_tile_op_name(op->code), v->type.kind == DRK_TT_SMEM ? "shared-memory" : "TMA");
    return NULL;
  }
  int64_t n = drk_lower_count(&v->type);
  if (n < 0) {
    drk_lower_fail(L, op->loc, "tile op '%s': layout kind '%s' is not supported by the AMDGPU backend yet",
                   drk_tile_op_name(op->code), drk_tile_layout_kind_name(v->type.layout->kind));
    return NULL;
  }
  if (n > DRK_LOWER_MAX_ELEMS) {
    drk_lower_fail(L, op->loc, "tile op '%s': too many elements per thread for the AMDGPU backend%s",
                   drk_tile_op_name(op->code), "");
    return NULL;
  }
  return drk_lower_def(L, v, n);
}

/* Operand i, as many elements as the result has (scalars broadcast). */
static LLVMValueRef drk_lower_elem(drk_lower_t *L, const drk_tile_value_t *v, int k) {
  drk_lv_t *x = drk_lower_get(L, v);
  DRK_ASSERT(x->n > 0);
  return x->e[x->n == 1 ? 0 : k];
}

/* ---- elementwise ---- */
static LLVMValueRef drk_lower_binary(drk_lower_t *L, drk_tile_opcode_t code, drk_dtype_t dt, LLVMValueRef a,
                                     LLVMValueRef c) {
  LLVMBuilderRef b = L->cg.b;
  bool f = drk_dtype_is_float(dt), s = drk_dtype_is_signed_int(dt);
  LLVMTypeRef t = LLVMTypeOf(a);
  LLVMValueRef args[] = {a, c};
  switch (code) {
  case DRK_TOP_ADD: return f ? LLVMBuildFAdd(b, a, c, "") : LLVMBuildAdd(b, a, c, "");
  case DRK_TOP_SUB: return f ? LLVMBuildFSub(b, a, c, "") : LLVMBuildSub(b, a, c, "");
  case DRK_TOP_MUL: return f ? LLVMBuildFMul(b, a, c, "") : LLVMBuildMul(b, a, c, "");
  case DRK_TOP_DIV: return f ? LLVMBuildFDiv(b, a, c, "") : s ? LLVMBuildSDiv(b, a, c, "") : LLVMBuildUDiv(b, a, c, "");
  case DRK_TOP_REM: return f ? LLVMBuildFRem(b, a, c, "") : s ? LLVMBuildSRem(b, a, c, "") : LLVMBuildURem(b, a, c, "");
  case DRK_TOP_MAX:
    return drk_amdgpu_call_intrinsic(&L->cg, f ? "llvm.maximum" : s ? "llvm.smax" : "llvm.umax", &t, 1, args, 2);
  case DRK_TOP_MIN:
    return drk_amdgpu_call_intrinsic(&L->cg, f ? "llvm.minimum" : s ? "llvm.smin" : "llvm.umin", &t, 1, args, 2);
  case DRK_TOP_AND: return LLVMBuildAnd(b, a, c, "");
  case DRK_TOP_OR: return LLVMBuildOr(b, a, c, "");
  default: drk_unreachable();
  }
}

static LLVMValueRef drk_lower_unary(drk_lower_t *L, drk_tile_opcode_t code, drk_dtype_t dt, LLVMValueRef a) {
  LLVMBuilderRef b = L->cg.b;
  LLVMTypeRef t = LLVMTypeOf(a);
  bool f = drk_dtype_is_float(dt);
  const char *intr = NULL;
  switch (code) {
  case DRK_TOP_NEG: return f ? LLVMBuildFNeg(b, a, "") : LLVMBuildNeg(b, a, "");
  case DRK_TOP_ABS:
    if (!f) {
      LLVMValueRef args[] = {a, LLVMConstInt(LLVMInt1TypeInContext(L->cg.ctx), 0, 0)};
      return drk_amdgpu_call_intrinsic(&L->cg, "llvm.abs", &t, 1, args, 2);
    }
    intr = "llvm.fabs";
    break;
  case DRK_TOP_EXP: intr = "llvm.exp"; break;
  case DRK_TOP_EXP2: intr = "llvm.exp2"; break;
  case DRK_TOP_LOG: intr = "llvm.log"; break;
  case DRK_TOP_SQRT: intr = "llvm.sqrt"; break;
  case DRK_TOP_RSQRT: {
    LLVMValueRef s = drk_amdgpu_call_intrinsic(&L->cg, "llvm.sqrt", &t, 1, &a, 1);
    return LLVMBuildFDiv(b, LLVMConstReal(t, 1.0), s, "");
  }
  case DRK_TOP_TANH: {
    /* tanh x = 1 - 2 / (exp(2x) + 1): exact at +-inf, no libcall (AMDGPU has none). */
    LLVMValueRef e = LLVMBuildFMul(b, a, LLVMConstReal(t, 2.0), "");
    e = drk_amdgpu_call_intrinsic(&L->cg, "llvm.exp", &t, 1, &e, 1);
    e = LLVMBuildFDiv(b, LLVMConstReal(t, 2.0), LLVMBuildFAdd(b, e, LLVMConstReal(t, 1.0), ""), "");
    return LLVMBuildFSub(b, LLVMConstReal(t, 1.0), e, "");
  }
  default: return NULL; /* erf: no intrinsic; not yet */
  }
  return drk_amdgpu_call_intrinsic(&L->cg, intr, &t, 1, &a, 1);
}

static LLVMValueRef drk_lower_cast(drk_lower_t *L, LLVMValueRef v, drk_dtype_t from, drk_dtype_t to, LLVMTypeRef tt) {
  LLVMBuilderRef b = L->cg.b;
  bool ff = drk_dtype_is_float(from), tf = drk_dtype_is_float(to);
  if (from == to) return v;
  if (to == DRK_DT_BOOL)
    return ff ? LLVMBuildFCmp(b, LLVMRealUNE, v, LLVMConstNull(LLVMTypeOf(v)), "")
              : LLVMBuildICmp(b, LLVMIntNE, v, LLVMConstNull(LLVMTypeOf(v)), "");
  if (ff && tf) return LLVMBuildFPCast(b, v, tt, "");
  if (ff) return drk_dtype_is_signed_int(to) ? LLVMBuildFPToSI(b, v, tt, "") : LLVMBuildFPToUI(b, v, tt, "");
  bool fs = drk_dtype_is_signed_int(from);
  if (tf) return fs ? LLVMBuildSIToFP(b, v, tt, "") : LLVMBuildUIToFP(b, v, tt, "");
  return LLVMBuildIntCast2(b, v, tt, fs, "");
}

/* ---- memory ---- */
/* if (mask) r = *p else r = other, with a branch per element: AMDGPU turns these into
 * exec-masked loads. */
static LLVMValueRef drk_lower_masked_load(drk_lower_t *L, LLVMTypeRef t, LLVMValueRef p, LLVMValueRef mask,
                                          LLVMValueRef other, unsigned align) {
  LLVMBuilderRef b = L->cg.b;
  if (!mask) {
    LLVMValueRef v = LLVMBuildLoad2(b, t, p, "");
    LLVMSetAlignment(v, align);
    return v;
  }
  LLVMBasicBlockRef from = LLVMGetInsertBlock(b);
  LLVMBasicBlockRef ld = LLVMAppendBasicBlockInContext(L->cg.ctx, L->fn, "ld");
  LLVMBasicBlockRef join = LLVMAppendBasicBlockInContext(L->cg.ctx, L->fn, "ld.join");
  LLVMBuildCondBr(b, mask, ld, join);
  LLVMPositionBuilderAtEnd(b, ld);
  LLVMValueRef v = LLVMBuildLoad2(b, t, p, "");
  LLVMSetAlignment(v, align);
  LLVMBuildBr(b, join);
  LLVMPositionBuilderAtEnd(b, join);
  LLVMValueRef phi = LLVMBuildPhi(b, t, "");
  LLVMValueRef in_v[] = {v, other ? other : LLVMGetPoison(t)};
  LLVMBasicBlockRef in_b[] = {ld, from};
  LLVMAddIncoming(phi, in_v, in_b, 2);
  return phi;
}

static void drk_lower_masked_store(drk_lower_t *L, LLVMValueRef v, LLVMValueRef p, LLVMValueRef mask, unsigned align) {
  LLVMBuilderRef b = L->cg.b;
  if (!mask) {
    LLVMSetAlignment(LLVMBuildStore(b, v, p), align);
    return;
  }
  LLVMBasicBlockRef st = LLVMAppendBasicBlockInContext(L->cg.ctx, L->fn, "st");
  LLVMBasicBlockRef join = LLVMAppendBasicBlockInContext(L->cg.ctx, L->fn, "st.join");
  LLVMBuildCondBr(b, mask, st, join);
  LLVMPositionBuilderAtEnd(b, st);
  LLVMSetAlignment(LLVMBuildStore(b, v, p), align);
  LLVMBuildBr(b, join);
  LLVMPositionBuilderAtEnd(b, join);
}

/* ---- reduce ---- */
static LLVMValueRef drk_lower_combine(drk_lower_t *L, const char *comb, drk_dtype_t dt, LLVMValueRef a, LLVMValueRef c) {
  drk_tile_opcode_t code = strcmp(comb, "sum") == 0 ? DRK_TOP_ADD : strcmp(comb, "max") == 0 ? DRK_TOP_MAX : DRK_TOP_MIN;
  return drk_lower_binary(L, code, dt, a, c);
}

/* reduce along `axis` of a blocked tile: within the thread, then across the lanes of the
 * layout warp that split the axis (butterfly through ds_bpermute; lane strides stay within
 * the 32-lane half of the wave), then across warps through LDS at the op's `scratch`
 * offset. Every thread ends up with the reduced values of its slice elements. */
static bool drk_lower_reduce(drk_lower_t *L, const drk_tile_op_t *op) {
  const drk_tile_value_t *src = op->operands[0], *res = op->results[0];
  const drk_tile_type_t *st = &src->type;
  int removed;
  const drk_tile_layout_t *p = drk_lower_blocked(st->layout, &removed);
  if (!p || removed >= 0)
    return drk_lower_fail(L, op->loc, "tile op 'reduce': operand layout must be blocked on the AMDGPU backend%s%s", "", "");
  int axis = (int)drk_tile_op_attr_int(op, "axis", 0);
  const char *comb = drk_tile_op_attr_ident(op, "combiner", "sum");
  drk_dtype_t dt = st->dtype;
  drk_lv_t *in = drk_lower_get(L, src);
  int64_t per[DRK_TILE_MAX_RANK];
  for (int i = 0; i < st->rank; i++) per[i] = drk_lower_per_dim(p, i, st->dims[i]);
  /* Only elements with distinct tile indices count: a tile smaller than the layout
   * replicates, and replicas must not be summed twice. */
  int64_t cover = (int64_t)p->spt[axis] * p->tpw[axis] * p->wpc[axis];
  if (st->dims[axis] < cover && strcmp(comb, "sum") == 0)
    return drk_lower_fail(L, op->loc, "tile op 'reduce': a sum over a replicated axis is not supported by the AMDGPU backend yet%s%s", "", "");
  int64_t nout = 1;
  for (int i = 0; i < st->rank; i++)
    if (i != axis) nout *= per[i];
  drk_lv_t *out = res->type.kind == DRK_TT_SCALAR ? drk_lower_def(L, res, 1) : drk_lower_def_tile(L, op, res);
  if (!out) return false;
  DRK_ASSERT(out->n == nout);
  /* 1. within the thread: element k of the source maps to output element of its other dims. */
  LLVMValueRef *acc = drk_arena_alloc(L->scratch, sizeof *acc * (size_t)nout);
  for (int64_t k = 0; k < in->n; k++) {
    int64_t rem = k, o = 0, mul = 1;
    for (int i = st->rank - 1; i >= 0; i--) {
      int64_t j = rem % per[i];
      rem /= per[i];
      if (i != axis) {
        o += j * mul;
        mul *= per[i];
      }
    }
    acc[o] = acc[o] ? drk_lower_combine(L, comb, dt, acc[o], in->e[k]) : in->e[k];
  }
  /* 2. across lanes: the lane bits of `axis` are a contiguous run of the lane id. */
  int lane_stride = 1;
  for (int i = 0; i < p->rank && p->order[i] != axis; i++) lane_stride *= p->tpw[p->order[i]];
  LLVMTypeRef et = LLVMTypeOf(acc[0]);
  bool is32 = LLVMGetTypeKind(et) == LLVMFloatTypeKind || et == LLVMInt32TypeInContext(L->cg.ctx);
  if (p->tpw[axis] > 1 && !is32)
    return drk_lower_fail(L, op->loc, "tile op 'reduce': cross-lane reduction of %s is not supported by the AMDGPU backend yet%s",
                          drk_dtype_name(dt), "");
  for (int o = 0; o < nout; o++)
    for (int s = 1; s < p->tpw[axis]; s *= 2) {
      LLVMValueRef src_lane = LLVMBuildXor(L->cg.b, drk_amdgpu_lane_id(&L->cg), drk_c32(L, s * lane_stride), "");
      LLVMValueRef other = drk_amdgpu_bpermute(&L->cg, acc[o], src_lane);
      acc[o] = drk_lower_combine(L, comb, dt, acc[o], other);
    }
  /* 3. across warps: through LDS. */
  if (p->wpc[axis] > 1) {
    const drk_tile_attr_t *sa = drk_tile_op_attr(op, "scratch");
    if (!sa)
      return drk_lower_fail(L, op->loc, "tile op 'reduce': a cross-warp reduction needs a 'scratch' offset%s%s", "", "");
    if (!is32)
      return drk_lower_fail(L, op->loc, "tile op 'reduce': cross-warp reduction of %s is not supported by the AMDGPU backend yet%s",
                            drk_dtype_name(dt), "");
    /* Layout: [nwarps][nout] values of 4 bytes; every warp writes its partials, then each
     * thread combines the wpc[axis] partials of its own warp group along the axis. */
    int nw = drk_tile_layout_num_warps(p);
    if (sa->i + (int64_t)nw * nout * 4 > L->k->smem)
      return drk_lower_fail(L, op->loc, "tile op 'reduce': scratch does not fit in the kernel's smem%s%s", "", "");
    LLVMValueRef base = drk_amdgpu_lds_dynamic(&L->cg);
    LLVMTypeRef i8 = LLVMInt8TypeInContext(L->cg.ctx);
    LLVMValueRef off = drk_c32(L, sa->i);
    LLVMValueRef sbase = LLVMBuildInBoundsGEP2(L->cg.b, i8, base, &off, 1, "");
    int warp_stride = 1;
    for (int i = 0; i < p->rank && p->order[i] != axis; i++) warp_stride *= p->wpc[p->order[i]];
    drk_amdgpu_barrier(&L->cg); /* the scratch may still be read by an earlier op */
    for (int o = 0; o < nout; o++) {
      LLVMValueRef slot = LLVMBuildAdd(L->cg.b, LLVMBuildMul(L->cg.b, L->warp, drk_c32(L, nout), ""), drk_c32(L, o), "");
      drk_amdgpu_global_store(&L->cg, acc[o], sbase, slot, 4);
    }
    drk_amdgpu_barrier(&L->cg);
    /* The warp with axis coordinate 0 in this thread's group. */
    LLVMValueRef wa = LLVMBuildURem(L->cg.b, LLVMBuildUDiv(L->cg.b, L->warp, drk_c32(L, warp_stride), ""),
                                    drk_c32(L, p->wpc[axis]), "");
    LLVMValueRef w0 = LLVMBuildSub(L->cg.b, L->warp, LLVMBuildMul(L->cg.b, wa, drk_c32(L, warp_stride), ""), "");
    for (int o = 0; o < nout; o++) {
      LLVMValueRef r = NULL;
      for (int w = 0; w < p->wpc[axis]; w++) {
        LLVMValueRef wi = LLVMBuildAdd(L->cg.b, w0, drk_c32(L, w * warp_stride), "");
        LLVMValueRef slot = LLVMBuildAdd(L->cg.b, LLVMBuildMul(L->cg.b, wi, drk_c32(L, nout), ""), drk_c32(L, o), "");
        LLVMValueRef v = drk_amdgpu_global_load(&L->cg, et, sbase, slot, 4);
        r = r ? drk_lower_combine(L, comb, dt, r, v) : v;
      }
      acc[o] = r;
    }
  }
  for (int o = 0; o < nout; o++) out->e[o] = acc[o];
  return true;
}

/* ---- ops ---- */
static bool drk_lower_region(drk_lower_t *L, const drk_tile_region_t *r);

static bool drk_lower_op(drk_lower_t *L, const drk_tile_op_t *op) {
  drk_amdgpu_cg_t *cg = &L->cg;
  LLVMBuilderRef b = cg->b;
  const char *name = drk_tile_op_name(op->code);
  const drk_tile_op_info_t *info = drk_tile_op_info(op->code);
  const drk_tile_value_t *res = op->n_results ? op->results[0] : NULL;
  if (info->flags & (DRK_TOPF_EWB | DRK_TOPF_EWU)) {
    drk_lv_t *o = drk_lower_def_tile(L, op, res);
    if (!o) return false;
    for (int k = 0; k < o->n; k++) {
      LLVMValueRef a = drk_lower_elem(L, op->operands[0], k);
      if (info->flags & DRK_TOPF_EWB) {
        o->e[k] = drk_lower_binary(L, op->code, res->type.dtype, a, drk_lower_elem(L, op->operands[1], k));
      } else if (!(o->e[k] = drk_lower_unary(L, op->code, res->type.dtype, a))) {
        return drk_lower_fail(L, op->loc, "tile op '%s' is not supported by the AMDGPU backend yet%s", name, "");
      }
    }
    return true;
  }
  switch (op->code) {
  case DRK_TOP_PROGRAM_ID:
  case DRK_TOP_NUM_PROGRAMS: {
    int axis = (int)drk_tile_op_attr_int(op, "axis", 0);
    drk_lower_def(L, res, 1)->e[0] = op->code == DRK_TOP_PROGRAM_ID ? drk_amdgpu_workgroup_id(cg, axis)
                                                                    : drk_amdgpu_num_workgroups(cg, axis);
    return true;
  }
  case DRK_TOP_CONSTANT: {
    LLVMTypeRef t = drk_lower_elem_type(L, &res->type, op->loc);
    if (!t) return false;
    const drk_tile_attr_t *a = drk_tile_op_attr(op, "value");
    LLVMValueRef c;
    if (drk_dtype_is_float(res->type.dtype))
      c = LLVMConstReal(t, a->kind == DRK_TA_FLOAT ? a->f : (double)a->i);
    else
      c = LLVMConstInt(t, (unsigned long long)a->i, 1);
    drk_lv_t *o = drk_lower_def_tile(L, op, res);
    if (!o) return false;
    for (int k = 0; k < o->n; k++) o->e[k] = c;
    return true;
  }
  case DRK_TOP_MAKE_RANGE: {
    drk_lv_t *o = drk_lower_def_tile(L, op, res);
    if (!o) return false;
    LLVMValueRef *idx = drk_lower_indices(L, &res->type, o->n);
    int64_t start = drk_tile_op_attr_int(op, "start", 0);
    for (int k = 0; k < o->n; k++) o->e[k] = LLVMBuildAdd(b, idx[k], drk_c32(L, start), "");
    return true;
  }
  case DRK_TOP_SPLAT: {
    drk_lv_t *o = drk_lower_def_tile(L, op, res);
    if (!o) return false;
    for (int k = 0; k < o->n; k++) o->e[k] = drk_lower_elem(L, op->operands[0], 0);
    return true;
  }
  case DRK_TOP_EXPAND_DIMS:
  case DRK_TOP_BROADCAST: {
    /* The result's element k takes the operand element with the same coordinates in the
     * dimensions the operand has (per-thread counts along size-1 or removed dims are 1). */
    const drk_tile_type_t *it = &op->operands[0]->type, *ot = &res->type;
    drk_lv_t *o = drk_lower_def_tile(L, op, res);
    if (!o || drk_lower_count(it) < 0) {
      if (o) drk_lower_fail(L, op->loc, "tile op '%s': operand layout is not supported by the AMDGPU backend yet%s", name, "");
      return false;
    }
    int orem, irem;
    const drk_tile_layout_t *op_ = drk_lower_blocked(ot->layout, &orem), *ip = drk_lower_blocked(it->layout, &irem);
    int64_t operb[DRK_TILE_MAX_RANK], iper[DRK_TILE_MAX_RANK];
    for (int i = 0, dd = 0; i < ot->rank; i++, dd++) {
      if (dd == orem) dd++;
      operb[i] = drk_lower_per_dim(op_, dd, ot->dims[i]);
    }
    int axis = op->code == DRK_TOP_EXPAND_DIMS ? (int)drk_tile_op_attr_int(op, "axis", 0) : -1;
    for (int i = 0, dd = 0; i < it->rank; i++, dd++) {
      if (dd == irem) dd++;
      iper[i] = drk_lower_per_dim(ip, dd, it->dims[i]);
    }
    drk_lv_t *x = drk_lower_get(L, op->operands[0]);
    for (int64_t k = 0; k < o->n; k++) {
      int64_t rem = k, coord[DRK_TILE_MAX_RANK];
      for (int i = ot->rank - 1; i >= 0; i--) {
        coord[i] = rem % operb[i];
        rem /= operb[i];
      }
      int64_t src = 0;
      for (int i = 0, j = 0; i < ot->rank; i++) {
        if (i == axis) continue; /* expand_dims: the new dim */
        int64_t c = it->dims[j] == 1 ? 0 : coord[i];
        src = src * iper[j] + (c < iper[j] ? c : c % iper[j]);
        j++;
      }
      o->e[k] = x->e[x->n == 1 ? 0 : src];
    }
    return true;
  }
  case DRK_TOP_ADDPTR: {
    drk_lv_t *o = drk_lower_def_tile(L, op, res);
    if (!o) return false;
    LLVMTypeRef et = drk_lower_dtype(L, res->type.dtype, true);
    if (!et) return drk_lower_fail(L, op->loc, "tile op 'addptr': dtype %s is not supported by the AMDGPU backend yet%s",
                                   drk_dtype_name(res->type.dtype), "");
    for (int k = 0; k < o->n; k++) {
      LLVMValueRef i = drk_lower_elem(L, op->operands[1], k);
      o->e[k] = LLVMBuildGEP2(b, et, drk_lower_elem(L, op->operands[0], k), &i, 1, "");
    }
    return true;
  }
  case DRK_TOP_LOAD: {
    drk_lv_t *o = drk_lower_def_tile(L, op, res);
    if (!o) return false;
    drk_dtype_t dt = res->type.dtype;
    LLVMTypeRef mt = drk_lower_dtype(L, dt, true);
    if (!mt) return drk_lower_fail(L, op->loc, "tile op 'load': dtype %s is not supported by the AMDGPU backend yet%s", drk_dtype_name(dt), "");
    unsigned align = (unsigned)drk_dtype_nbytes(dt, 1);
    for (int k = 0; k < o->n; k++) {
      LLVMValueRef m = op->n_operands > 1 ? drk_lower_elem(L, op->operands[1], k) : NULL;
      LLVMValueRef other = op->n_operands > 2 ? drk_lower_elem(L, op->operands[2], k) : NULL;
      if (other && dt == DRK_DT_BOOL) other = LLVMBuildZExt(b, other, mt, "");
      LLVMValueRef v = drk_lower_masked_load(L, mt, drk_lower_elem(L, op->operands[0], k), m, other, align);
      o->e[k] = dt == DRK_DT_BOOL ? LLVMBuildICmp(b, LLVMIntNE, v, LLVMConstNull(mt), "") : v;
    }
    return true;
  }
  case DRK_TOP_STORE: {
    const drk_tile_value_t *pv = op->operands[0];
    drk_dtype_t dt = pv->type.dtype;
    LLVMTypeRef mt = drk_lower_dtype(L, dt, true);
    if (!mt) return drk_lower_fail(L, op->loc, "tile op 'store': dtype %s is not supported by the AMDGPU backend yet%s", drk_dtype_name(dt), "");
    int64_t n = pv->type.kind == DRK_TT_TILE ? drk_lower_count(&pv->type) : 1;
    if (n < 0) return drk_lower_fail(L, op->loc, "tile op 'store': layout is not supported by the AMDGPU backend yet%s%s", "", "");
    for (int k = 0; k < n; k++) {
      LLVMValueRef v = drk_lower_elem(L, op->operands[1], k);
      if (dt == DRK_DT_BOOL) v = LLVMBuildZExt(b, v, mt, "");
      LLVMValueRef m = op->n_operands > 2 ? drk_lower_elem(L, op->operands[2], k) : NULL;
      drk_lower_masked_store(L, v, drk_lower_elem(L, pv, k), m, (unsigned)drk_dtype_nbytes(dt, 1));
    }
    return true;
  }
  case DRK_TOP_CMP: {
    drk_lv_t *o = drk_lower_def_tile(L, op, res);
    if (!o) return false;
    drk_dtype_t dt = op->operands[0]->type.dtype;
    const char *pred = drk_tile_op_attr_ident(op, "pred", "eq");
    static const char *const names[] = {"eq", "ne", "lt", "le", "gt", "ge"};
    static const LLVMRealPredicate fp[] = {LLVMRealOEQ, LLVMRealUNE, LLVMRealOLT, LLVMRealOLE, LLVMRealOGT, LLVMRealOGE};
    static const LLVMIntPredicate sp[] = {LLVMIntEQ, LLVMIntNE, LLVMIntSLT, LLVMIntSLE, LLVMIntSGT, LLVMIntSGE};
    static const LLVMIntPredicate up[] = {LLVMIntEQ, LLVMIntNE, LLVMIntULT, LLVMIntULE, LLVMIntUGT, LLVMIntUGE};
    int pi = 0;
    while (pi < 6 && strcmp(names[pi], pred) != 0) pi++;
    if (pi == 6) return drk_lower_fail(L, op->loc, "tile op 'cmp': unknown predicate '%s'%s", pred, "");
    for (int k = 0; k < o->n; k++) {
      LLVMValueRef a = drk_lower_elem(L, op->operands[0], k), c = drk_lower_elem(L, op->operands[1], k);
      o->e[k] = drk_dtype_is_float(dt) ? LLVMBuildFCmp(b, fp[pi], a, c, "")
                : drk_dtype_is_signed_int(dt) ? LLVMBuildICmp(b, sp[pi], a, c, "")
                                              : LLVMBuildICmp(b, up[pi], a, c, "");
    }
    return true;
  }
  case DRK_TOP_SELECT: {
    drk_lv_t *o = drk_lower_def_tile(L, op, res);
    if (!o) return false;
    for (int k = 0; k < o->n; k++)
      o->e[k] = LLVMBuildSelect(b, drk_lower_elem(L, op->operands[0], k), drk_lower_elem(L, op->operands[1], k),
                                drk_lower_elem(L, op->operands[2], k), "");
    return true;
  }
  case DRK_TOP_CAST: {
    drk_dtype_t from = op->operands[0]->type.dtype, to = res->type.dtype;
    LLVMTypeRef tt = drk_lower_dtype(L, to, false);
    if (!tt || !drk_lower_dtype(L, from, false))
      return drk_lower_fail(L, op->loc, "tile op 'cast': %s -> %s is not supported by the AMDGPU backend yet",
                            drk_dtype_name(from), drk_dtype_name(to));
    drk_lv_t *o = drk_lower_def_tile(L, op, res);
    if (!o) return false;
    for (int k = 0; k < o->n; k++) o->e[k] = drk_lower_cast(L, drk_lower_elem(L, op->operands[0], k), from, to, tt);
    return true;
  }
  case DRK_TOP_REDUCE: return drk_lower_reduce(L, op);
  case DRK_TOP_BARRIER:
    if (drk_tile_op_attr(op, "id"))
      return drk_lower_fail(L, op->loc, "tile op 'barrier': named barriers are not supported by the AMDGPU backend%s%s", "", "");
    drk_amdgpu_barrier(cg);
    return true;
  case DRK_TOP_RETURN: LLVMBuildRetVoid(b); return true;
  default:
    return drk_lower_fail(L, op->loc, "tile op '%s' is not supported by the AMDGPU backend yet%s", name, "");
  }
}

static bool drk_lower_region(drk_lower_t *L, const drk_tile_region_t *r) {
  for (size_t i = 0; i < r->n_ops; i++)
    if (!drk_lower_op(L, r->ops[i])) return false;
  return true;
}

static bool drk_lower_kernel(drk_lower_t *L, const drk_tile_kernel_t *k) {
  LLVMTypeRef *ps = drk_arena_alloc(L->scratch, sizeof *ps * (size_t)(k->n_params + 1));
  for (int i = 0; i < k->n_params; i++) {
    const drk_tile_value_t *p = k->params[i];
    if (p->type.kind != DRK_TT_SCALAR)
      return drk_lower_fail(L, p->loc, "kernel parameter '%%%s': only scalars and pointers are supported by the AMDGPU backend%s",
                            p->name, "");
    ps[i] = drk_lower_elem_type(L, &p->type, p->loc);
    if (!ps[i]) return false;
  }
  if (k->cluster[0] * k->cluster[1] * k->cluster[2] != 1)
    return drk_lower_fail(L, k->loc, "kernel '@%s': clusters do not exist on AMD GPUs%s", k->name, "");
  if (k->smem > L->cg.arch->lds_bytes) {
    char b1[32];
    snprintf(b1, sizeof b1, "%u", L->cg.arch->lds_bytes);
    return drk_lower_fail(L, k->loc, "kernel '@%s': shared memory exceeds the %s bytes of LDS per workgroup", k->name, b1);
  }
  if (k->block > 1024 || k->block < 1)
    return drk_lower_fail(L, k->loc, "kernel '@%s': block size must be 1..1024 on AMD GPUs%s", k->name, "");
  L->k = k;
  L->fn = drk_amdgpu_kernel_add(&L->cg, k->name, ps, (unsigned)k->n_params);
  drk_amdgpu_kernel_set_workgroup_size(&L->cg, L->fn, (int)k->block, (int)k->block);
  for (int i = 0; i < k->n_params; i++) {
    drk_lv_t *v = drk_lower_def(L, k->params[i], 1);
    v->e[0] = LLVMGetParam(L->fn, (unsigned)i);
    LLVMSetValueName2(v->e[0], k->params[i]->name, strlen(k->params[i]->name));
  }
  LLVMPositionBuilderAtEnd(L->cg.b, LLVMAppendBasicBlockInContext(L->cg.ctx, L->fn, "entry"));
  L->tid = drk_amdgpu_workitem_id(&L->cg, 0);
  L->lane32 = LLVMBuildAnd(L->cg.b, L->tid, drk_c32(L, 31), "lane");
  L->warp = LLVMBuildLShr(L->cg.b, L->tid, drk_c32(L, 5), "warp");
  return drk_lower_region(L, k->body);
}

LLVMModuleRef drk_amdgpu_lower_module(const drk_tile_module_t *tm, LLVMContextRef ctx, const char *arch,
                                      drk_diag_t *d) {
  const drk_amdgpu_arch_t *a = drk_amdgpu_arch_find(arch, d);
  if (!a) return NULL;
  LLVMModuleRef m = drk_amdgpu_module_create(ctx, tm->source ? tm->source : "tile", d);
  if (!m) return NULL;
  drk_lower_t L = {.tm = tm, .d = d, .scratch = drk_arena_create()};
  L.cg = (drk_amdgpu_cg_t){ctx, m, LLVMCreateBuilderInContext(ctx), a};
  L.vals = drk_arena_alloc(L.scratch, sizeof *L.vals * (tm->next_value_id + 1));
  bool ok = true;
  for (size_t i = 0; ok && i < tm->n_kernels; i++) ok = drk_lower_kernel(&L, tm->kernels[i]);
  LLVMDisposeBuilder(L.cg.b);
  drk_arena_destroy(L.scratch);
  if (!ok) {
    LLVMDisposeModule(m);
    return NULL;
  }
  return m;
}
