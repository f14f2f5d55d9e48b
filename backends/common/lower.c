/* Target-independent half of the GPU tile lowerings (backends/nvptx, backends/amdgpu): the
 * lowering context, register placement (distributions), index math, the axis analysis, data
 * movement between global memory and registers, shared-memory addressing and the static
 * scratch buffer. What differs per target (thread ids, layouts placed on warps or waves,
 * arithmetic, shared-memory symbols) comes through the gpu_target_t hooks. */
#include "backends/common/lower.h"

#include <llvm-c/DebugInfo.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool gpu_err(gpu_lc_t *lc, const drk_tile_op_t *op, const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  drk_diag_error(lc->d, op ? op->loc : lc->k->loc, "%s: cannot lower '%s' %s", lc->t->name,
                 op ? drk_tile_op_name(op->code) : lc->k->name, buf);
  lc->ok = false;
  return false;
}

LLVMValueRef gpu_i32(gpu_lc_t *lc, int64_t v) { return LLVMConstInt(lc->i32, (unsigned long long)v, 1); }
LLVMValueRef gpu_i64(gpu_lc_t *lc, int64_t v) { return LLVMConstInt(lc->i64, (unsigned long long)v, 1); }

gpu_val_t *gpu_val_new(gpu_lc_t *lc, int n) {
  gpu_val_t *x = drk_arena_alloc(lc->a, sizeof *x);
  x->n = n;
  x->r = drk_arena_alloc(lc->a, sizeof(LLVMValueRef) * (size_t)(n ? n : 1));
  memset(x->r, 0, sizeof(LLVMValueRef) * (size_t)(n ? n : 1));
  return x;
}

gpu_val_t *gpu_get(gpu_lc_t *lc, const drk_tile_value_t *v) {
  DRK_ASSERT(v->id < lc->n_ids && lc->vals[v->id]);
  return lc->vals[v->id];
}
void gpu_set(gpu_lc_t *lc, const drk_tile_value_t *v, gpu_val_t *x) {
  DRK_ASSERT(v->id < lc->n_ids);
  lc->vals[v->id] = x;
}

LLVMTypeRef gpu_reg_type(gpu_lc_t *lc, drk_dtype_t t, bool is_ptr) {
  if (is_ptr) return lc->p1;
  switch (t) {
  case DRK_DT_F64: return lc->f64;
  case DRK_DT_F32: return lc->f32;
  case DRK_DT_F16: return lc->f16;
  case DRK_DT_BF16: return lc->bf16;
  case DRK_DT_F8E4M3: case DRK_DT_F8E5M2: case DRK_DT_I8: case DRK_DT_U8: return lc->i8;
  case DRK_DT_I64: return lc->i64;
  case DRK_DT_I32: return lc->i32;
  case DRK_DT_I16: return lc->i16;
  case DRK_DT_BOOL: return lc->i1;
  default: return NULL; /* i4/u4 */
  }
}
LLVMTypeRef gpu_mem_type(gpu_lc_t *lc, drk_dtype_t t) {
  return t == DRK_DT_BOOL ? lc->i8 : gpu_reg_type(lc, t, false);
}

LLVMValueRef gpu_smem_scratch(gpu_lc_t *lc, const drk_tile_op_t *op, unsigned bytes) {
  const drk_tile_attr_t *s = drk_tile_op_attr(op, "scratch");
  if (s && s->kind == DRK_TA_INT) {
    LLVMValueRef base = lc->t->smem_base(lc);
    LLVMValueRef idx = gpu_i64(lc, s->i);
    return LLVMBuildGEP2(lc->b, lc->i8, base, &idx, 1, "scratch");
  }
  if (!lc->scratch) {
    char name[160];
    snprintf(name, sizeof name, "%s.scratch.tmp", lc->k->name);
    lc->scratch = lc->t->smem_static(lc, name, 16, 16);
  }
  if (bytes > lc->scratch_bytes) lc->scratch_bytes = bytes;
  return lc->scratch;
}

void gpu_scratch_finish(gpu_lc_t *lc) {
  if (!lc->scratch) return;
  char name[160];
  snprintf(name, sizeof name, "%s.scratch", lc->k->name);
  LLVMValueRef g = lc->t->smem_static(lc, name, lc->scratch_bytes, 16);
  LLVMReplaceAllUsesWith(lc->scratch, g);
  LLVMDeleteGlobal(lc->scratch);
  lc->scratch = NULL;
}

/* ---- distributions ---- */
static int ilog2(int64_t v) {
  int k = 0;
  while (((int64_t)1 << k) < v) k++;
  return k;
}

int64_t *gpu_offs_new(gpu_lc_t *lc, int n) {
  int64_t *o = drk_arena_alloc(lc->a, sizeof(int64_t) * (size_t)(n ? n : 1));
  return o;
}

void gpu_dim_const(gpu_lc_t *lc, gpu_dist_t *D, int s, int64_t size) {
  /* every thread holds all `size` elements of this dim */
  D->n[s] = (int)size;
  D->off[s] = gpu_offs_new(lc, (int)size);
  for (int r = 0; r < size; r++) D->off[s][r] = r;
  D->thr[s] = NULL;
  D->thr_align[s] = 1 << 30;
  D->wrap[s] = false;
  D->n_xor[s] = 0;
  D->wstride[s] = 1;
  D->wcount[s] = 1;
}

void gpu_dim_blocked(gpu_lc_t *lc, const drk_tile_layout_t *L, int d, int64_t size, gpu_dist_t *D, int s,
                     LLVMValueRef lane, LLVMValueRef warp, int wstride_unit) {
  int ls[GPU_MAXR], ws[GPU_MAXR];
  int accl = 1, accw = 1;
  for (int i = 0; i < L->rank; i++) {
    int o = L->order[i];
    ls[o] = accl, accl *= L->tpw[o];
    ws[o] = accw, accw *= L->wpc[o];
  }
  int64_t sp = L->spt[d], t = L->tpw[d], w = L->wpc[d], cover = sp * t * w;
  if (size <= sp) {
    gpu_dim_const(lc, D, s, size);
    return;
  }
  LLVMValueRef ld = LLVMBuildAnd(lc->b, LLVMBuildLShr(lc->b, lane, gpu_i32(lc, ilog2(ls[d])), ""), gpu_i32(lc, t - 1), "");
  LLVMValueRef wd = LLVMBuildAnd(lc->b, LLVMBuildLShr(lc->b, warp, gpu_i32(lc, ilog2(ws[d])), ""), gpu_i32(lc, w - 1), "");
  LLVMValueRef td = LLVMBuildAdd(lc->b, ld, LLVMBuildMul(lc->b, wd, gpu_i32(lc, t), ""), "");
  D->thr[s] = LLVMBuildMul(lc->b, td, gpu_i32(lc, sp), "");
  D->thr_align[s] = sp;
  if (size >= cover) {
    D->n[s] = (int)(sp * (size / cover));
    D->off[s] = gpu_offs_new(lc, D->n[s]);
    for (int r = 0; r < D->n[s]; r++) D->off[s][r] = (r / sp) * cover + r % sp;
    D->wrap[s] = false;
  } else {
    D->n[s] = (int)sp;
    D->off[s] = gpu_offs_new(lc, D->n[s]);
    for (int r = 0; r < D->n[s]; r++) D->off[s][r] = r;
    D->wrap[s] = true;
  }
  int64_t P = size / sp;
  D->n_xor[s] = 0;
  for (int k = 0; ((int64_t)1 << k) < t && ((int64_t)1 << k) < P; k++) D->xr[s][D->n_xor[s]++] = (unsigned)ls[d] << k;
  D->wstride[s] = wstride_unit * ws[d];
  D->wcount[s] = P > t ? (int)(P / t < w ? P / t : w) : 1;
}

/* Places layout L of the given shape on threads: slices through their parent, blocked
 * layouts and dot_op operands of a blocked parent here, the rest (mma, wgmma, mfma and the
 * dot_op operands of those) by the target's dist_dim. false: cannot be placed. */
static bool gpu_dist_layout(gpu_lc_t *lc, const drk_tile_layout_t *L, drk_dtype_t dt, int rank,
                            const int64_t *dims, gpu_dist_t *D, LLVMValueRef lane, LLVMValueRef warp) {
  if (L->kind == DRK_TL_SLICE) {
    int64_t pd[GPU_MAXR];
    int pr = rank + 1;
    if (pr > GPU_MAXR) return false;
    for (int i = 0, j = 0; i < pr; i++) pd[i] = i == L->dim ? 1 : dims[j++];
    gpu_dist_t P;
    memset(&P, 0, sizeof P);
    if (!gpu_dist_layout(lc, L->parent, dt, pr, pd, &P, lane, warp)) return false;
    D->rank = rank;
    for (int i = 0, j = 0; i < pr; i++) {
      if (i == L->dim) continue;
      D->dims[j] = P.dims[i], D->n[j] = P.n[i], D->off[j] = P.off[i], D->thr[j] = P.thr[i];
      D->thr_align[j] = P.thr_align[i], D->wrap[j] = P.wrap[i], D->n_xor[j] = P.n_xor[i];
      memcpy(D->xr[j], P.xr[i], sizeof P.xr[i]);
      D->wstride[j] = P.wstride[i], D->wcount[j] = P.wcount[i];
      j++;
    }
    return true;
  }
  D->rank = rank;
  for (int d = 0; d < rank; d++) {
    D->dims[d] = dims[d];
    if (L->kind == DRK_TL_BLOCKED) {
      if (L->rank != rank) return false;
      gpu_dim_blocked(lc, L, d, dims[d], D, d, lane, warp, lc->t->wstride_unit);
    } else if (L->kind == DRK_TL_DOT_OP && rank == 2 && L->parent->kind == DRK_TL_BLOCKED) {
      /* fma dots: the parent's placement along M/N, all of K in every thread */
      if ((L->op_idx == 0) == (d == 1)) gpu_dim_const(lc, D, d, dims[d]);
      else gpu_dim_blocked(lc, L->parent, d, dims[d], D, d, lane, warp, lc->t->wstride_unit);
    } else if (!lc->t->dist_dim(lc, L, dt, rank, d, dims[d], D, lane, warp)) {
      return false;
    }
  }
  return true;
}

bool gpu_dist(gpu_lc_t *lc, const drk_tile_op_t *op, const drk_tile_type_t *t, gpu_dist_t *out) {
  memset(out, 0, sizeof *out);
  if (t->kind != DRK_TT_TILE) {
    out->rank = 0;
    out->nregs = 1;
    return true;
  }
  LLVMValueRef lane = lc->t->lane(lc), warp = lc->t->warp(lc);
  if (!gpu_dist_layout(lc, t->layout, t->dtype, t->rank, t->dims, out, lane, warp)) {
    char buf[128];
    drk_tile_type_format(t, buf, sizeof buf);
    return gpu_err(lc, op, "with layout %s kind '%s' for %s", t->layout->name,
                  drk_tile_layout_kind_name(t->layout->kind), buf);
  }
  int64_t n = 1;
  for (int d = 0; d < out->rank; d++) n *= out->n[d];
  if (n > 4096) return gpu_err(lc, op, "with %lld registers per thread", (long long)n);
  out->nregs = (int)n;
  return true;
}

void gpu_reg_split(const gpu_dist_t *D, int reg, int *idx) {
  for (int d = D->rank - 1; d >= 0; d--) {
    idx[d] = reg % D->n[d];
    reg /= D->n[d];
  }
}
int gpu_reg_join(const gpu_dist_t *D, const int *idx) {
  int r = 0;
  for (int d = 0; d < D->rank; d++) r = r * D->n[d] + idx[d];
  return r;
}

LLVMValueRef gpu_coord(gpu_lc_t *lc, const gpu_dist_t *D, int reg, int d) {
  int idx[GPU_MAXR];
  gpu_reg_split(D, reg, idx);
  LLVMValueRef c = gpu_i32(lc, D->off[d][idx[d]]);
  if (D->thr[d]) c = LLVMBuildAdd(lc->b, D->thr[d], c, "");
  if (D->wrap[d]) c = LLVMBuildAnd(lc->b, c, gpu_i32(lc, D->dims[d] - 1), "");
  return c;
}

int gpu_fastest_dim(const drk_tile_type_t *t) {
  if (t->kind != DRK_TT_TILE || t->rank == 0) return 0;
  const drk_tile_layout_t *L = t->layout;
  int drop[GPU_MAXR], nd = 0;
  while (L->kind == DRK_TL_SLICE) {
    drop[nd++] = L->dim;
    L = L->parent;
  }
  int f = t->rank - 1;
  if (L->kind == DRK_TL_BLOCKED) {
    for (int i = 0; i < L->rank; i++) {
      int o = L->order[i];
      bool dropped = false;
      for (int j = 0; j < nd; j++) dropped |= drop[j] == o;
      if (dropped) continue;
      /* map parent dim o to the sliced rank */
      int m = o;
      for (int j = 0; j < nd; j++)
        if (drop[j] < o) m--;
      return m;
    }
  }
  return f;
}

int gpu_vec_width(const gpu_dist_t *D, int f, int esize, const gpu_axis_t *pa, const gpu_axis_t *ma) {
  if (D->rank == 0 || !pa) return 1;
  int w = 1;
  while (2 * w * esize <= 16) {
    int c = 2 * w;
    /* registers come in aligned runs of c consecutive offsets */
    if (D->n[f] % c) break;
    bool ok = true;
    for (int r = 0; r < D->n[f] && ok; r += c) {
      if (D->off[f][r] % c) ok = false;
      for (int i = 1; i < c && ok; i++) ok = D->off[f][r + i] == D->off[f][r] + i;
    }
    if (!ok || D->thr_align[f] % c || D->wrap[f]) break;
    if (pa->contig[f] % c || pa->div[f] % (c * esize)) break;
    if (ma && ma->cnst[f] % c) break;
    w = c;
  }
  return w;
}

/* ---- axis analysis (pre-pass) ---- */
static int64_t gcd64(int64_t a, int64_t b) {
  while (b) {
    int64_t t = a % b;
    a = b, b = t;
  }
  return a;
}
static int64_t pow2div(int64_t v) {
  if (v == 0) return (int64_t)1 << 30;
  int64_t p = 1;
  while (!(v & p) && p < ((int64_t)1 << 30)) p <<= 1;
  return p;
}
#define AX_BIG ((int64_t)1 << 30)

static gpu_axis_t *ax_new(gpu_lc_t *lc) {
  gpu_axis_t *a = drk_arena_alloc(lc->a, sizeof *a);
  for (int d = 0; d < GPU_MAXR; d++) a->contig[d] = 1, a->div[d] = 1, a->cnst[d] = 1;
  return a;
}
static const gpu_axis_t *ax_of(gpu_lc_t *lc, const drk_tile_value_t *v) {
  return v->id < lc->n_ids ? lc->axis[v->id] : NULL;
}
static bool is_intlike(const drk_tile_type_t *t) {
  return t->is_ptr || (t->kind != DRK_TT_SMEM && t->kind != DRK_TT_TMADESC &&
                       (drk_dtype_is_int(t->dtype) || t->dtype == DRK_DT_BOOL));
}
static int64_t ediv(const gpu_axis_t *a, int d) { return a->contig[d] == 1 ? a->div[d] : 1; }

static void ax_meet(gpu_axis_t *x, const gpu_axis_t *y) {
  for (int d = 0; d < GPU_MAXR; d++) {
    x->contig[d] = gcd64(x->contig[d], y->contig[d]);
    x->div[d] = gcd64(x->div[d], y->div[d]);
    x->cnst[d] = gcd64(x->cnst[d], y->cnst[d]);
  }
}
static bool ax_eq(const gpu_axis_t *x, const gpu_axis_t *y) { return memcmp(x, y, sizeof *x) == 0; }

static void ax_op(gpu_lc_t *lc, const drk_tile_op_t *op) {
  if (op->code == DRK_TOP_FOR) {
    const drk_tile_region_t *body = op->regions[0];
    int nc = op->n_operands - 3;
    /* the induction variable lo + i * step is divisible by what divides both */
    gpu_axis_t *iv = ax_new(lc);
    const gpu_axis_t *lo = ax_of(lc, op->operands[0]), *step = ax_of(lc, op->operands[2]);
    for (int d = 0; lo && step && d < GPU_MAXR; d++) iv->div[d] = gcd64(lo->div[d], step->div[d]);
    lc->axis[body->args[0]->id] = iv;
    for (int i = 0; i < nc; i++) {
      const gpu_axis_t *ia = ax_of(lc, op->operands[3 + i]);
      gpu_axis_t *a = ax_new(lc);
      if (ia) *a = *ia;
      lc->axis[body->args[1 + i]->id] = ia ? a : NULL;
    }
    for (int it = 0; it < 8; it++) {
      gpu_axis_region(lc, body);
      const drk_tile_op_t *y = body->n_ops ? body->ops[body->n_ops - 1] : NULL;
      bool changed = false;
      for (int i = 0; i < nc && y && y->code == DRK_TOP_YIELD && i < y->n_operands; i++) {
        gpu_axis_t *ca = lc->axis[body->args[1 + i]->id];
        const gpu_axis_t *ya = ax_of(lc, y->operands[i]);
        if (!ca) continue;
        if (!ya) {
          lc->axis[body->args[1 + i]->id] = NULL;
          changed = true;
          continue;
        }
        gpu_axis_t old = *ca;
        ax_meet(ca, ya);
        if (!ax_eq(&old, ca)) changed = true;
      }
      if (!changed) break;
      if (it == 7)
        for (int i = 0; i < nc; i++) lc->axis[body->args[1 + i]->id] = NULL;
    }
    for (int i = 0; i < op->n_results; i++) lc->axis[op->results[i]->id] = lc->axis[body->args[1 + i]->id];
    return;
  }
  for (int i = 0; i < op->n_regions; i++) gpu_axis_region(lc, op->regions[i]);
  if (op->n_results != 1) return;
  const drk_tile_value_t *res = op->results[0];
  if (!is_intlike(&res->type)) return;
  gpu_axis_t *x = ax_new(lc);
  int rank = res->type.kind == DRK_TT_TILE ? res->type.rank : 0;
  const gpu_axis_t *a = op->n_operands > 0 ? ax_of(lc, op->operands[0]) : NULL;
  const gpu_axis_t *b = op->n_operands > 1 ? ax_of(lc, op->operands[1]) : NULL;
  gpu_axis_t one;
  for (int d = 0; d < GPU_MAXR; d++) one.contig[d] = 1, one.div[d] = 1, one.cnst[d] = 1;
  switch (op->code) {
  case DRK_TOP_CONSTANT: {
    const drk_tile_attr_t *v = drk_tile_op_attr(op, "value");
    int64_t iv = v && v->kind == DRK_TA_INT ? v->i : 1;
    for (int d = 0; d < GPU_MAXR; d++) x->div[d] = pow2div(iv), x->cnst[d] = d < rank ? res->type.dims[d] : 1;
    break;
  }
  case DRK_TOP_MAKE_RANGE: {
    int64_t s = drk_tile_op_attr_int(op, "start", 0), e = drk_tile_op_attr_int(op, "end", 1);
    x->contig[0] = e - s, x->div[0] = pow2div(s);
    break;
  }
  case DRK_TOP_SPLAT:
    if (!a) break;
    for (int d = 0; d < GPU_MAXR; d++) x->div[d] = a->div[0], x->cnst[d] = d < rank ? res->type.dims[d] : 1;
    break;
  case DRK_TOP_BROADCAST: {
    if (!a) break;
    const drk_tile_type_t *st = &op->operands[0]->type;
    for (int d = 0; d < rank; d++) {
      if (st->dims[d] == 1 && res->type.dims[d] != 1)
        x->contig[d] = 1, x->div[d] = ediv(a, d), x->cnst[d] = res->type.dims[d];
      else
        x->contig[d] = a->contig[d], x->div[d] = a->div[d], x->cnst[d] = a->cnst[d];
    }
    break;
  }
  case DRK_TOP_EXPAND_DIMS: {
    if (!a) break;
    int ax = (int)drk_tile_op_attr_int(op, "axis", 0);
    int64_t ed = AX_BIG;
    for (int d = 0; d < rank - 1; d++) ed = gcd64(ed, ediv(a, d));
    for (int d = 0, j = 0; d < rank; d++) {
      if (d == ax) {
        x->contig[d] = 1, x->div[d] = ed, x->cnst[d] = 1;
        continue;
      }
      x->contig[d] = a->contig[j], x->div[d] = a->div[j], x->cnst[d] = a->cnst[j];
      j++;
    }
    break;
  }
  case DRK_TOP_ADD:
  case DRK_TOP_SUB:
  case DRK_TOP_ADDPTR: {
    if (!a || !b) break;
    int64_t es = op->code == DRK_TOP_ADDPTR ? drk_dtype_bits(res->type.dtype) / 8 : 1;
    if (es < 1) es = 1;
    for (int d = 0; d < GPU_MAXR; d++) {
      int64_t c1 = gcd64(a->contig[d], b->cnst[d]);
      int64_t c2 = op->code == DRK_TOP_SUB ? 1 : gcd64(a->cnst[d], b->contig[d]);
      x->contig[d] = c1 > c2 ? c1 : c2;
      x->div[d] = gcd64(a->div[d], b->div[d] * es);
      x->cnst[d] = gcd64(a->cnst[d], b->cnst[d]);
    }
    break;
  }
  case DRK_TOP_MUL:
    if (!a || !b) break;
    for (int d = 0; d < GPU_MAXR; d++) {
      int64_t v = ediv(a, d) * ediv(b, d);
      x->div[d] = v > AX_BIG ? AX_BIG : v;
      x->cnst[d] = gcd64(a->cnst[d], b->cnst[d]);
    }
    break;
  case DRK_TOP_DIV:
  case DRK_TOP_REM: {
    /* by a positive constant C (index math: the operand is non-negative in the lanes an
     * access uses): over sub-runs of g = gcd(contig, div, C) consecutive values starting at
     * multiples of g, a % C stays consecutive (no wrap) and a / C constant */
    const drk_tile_op_t *cd = op->operands[1]->def;
    const drk_tile_attr_t *cv = cd && cd->code == DRK_TOP_CONSTANT ? drk_tile_op_attr(cd, "value") : NULL;
    if (!a || !cv || cv->kind != DRK_TA_INT || cv->i <= 0) break;
    int64_t C = cv->i;
    for (int d = 0; d < GPU_MAXR; d++) {
      int64_t g = a->contig[d] > 1 ? gcd64(gcd64(a->contig[d], a->div[d]), C) : 1;
      if (op->code == DRK_TOP_REM) {
        x->contig[d] = g;
        x->div[d] = a->contig[d] > 1 ? g : gcd64(a->div[d], C);
        x->cnst[d] = a->cnst[d];
      } else {
        x->cnst[d] = a->cnst[d] > g ? a->cnst[d] : g;
      }
    }
    break;
  }
  case DRK_TOP_CMP: {
    if (!a || !b) break;
    const char *p = drk_tile_op_attr_ident(op, "pred", "");
    for (int d = 0; d < GPU_MAXR; d++) {
      x->cnst[d] = gcd64(a->cnst[d], b->cnst[d]);
      if ((strcmp(p, "lt") == 0 || strcmp(p, "ge") == 0) && b->cnst[d] > 1) {
        int64_t g = gcd64(a->contig[d], gcd64(a->div[d], ediv(b, d)));
        if (g > x->cnst[d]) x->cnst[d] = g;
      }
    }
    break;
  }
  default:
    /* elementwise: constant runs survive */
    if (op->n_operands >= 1 && res->type.kind == DRK_TT_TILE) {
      for (int d = 0; d < GPU_MAXR; d++) x->cnst[d] = AX_BIG;
      for (int i = 0; i < op->n_operands; i++) {
        const gpu_axis_t *o = ax_of(lc, op->operands[i]);
        if (!o || !drk_tile_type_same_shape(&op->operands[i]->type, &res->type)) {
          for (int d = 0; d < GPU_MAXR; d++) x->cnst[d] = 1;
          break;
        }
        for (int d = 0; d < GPU_MAXR; d++) x->cnst[d] = gcd64(x->cnst[d], o->cnst[d]);
      }
      if (op->code != DRK_TOP_SELECT && op->code != DRK_TOP_AND && op->code != DRK_TOP_OR &&
          op->code != DRK_TOP_DIV && op->code != DRK_TOP_REM && op->code != DRK_TOP_MAX &&
          op->code != DRK_TOP_MIN && op->code != DRK_TOP_CAST && op->code != DRK_TOP_NEG)
        for (int d = 0; d < GPU_MAXR; d++) x->cnst[d] = 1;
    }
    break;
  }
  (void)one;
  lc->axis[res->id] = x;
}

void gpu_axis_region(gpu_lc_t *lc, const drk_tile_region_t *r) {
  for (size_t i = 0; i < r->n_ops; i++) ax_op(lc, r->ops[i]);
}

/* ---- data movement ---- */
static LLVMValueRef mem_to_reg(gpu_lc_t *lc, drk_dtype_t t, LLVMValueRef v) {
  return t == DRK_DT_BOOL ? LLVMBuildICmp(lc->b, LLVMIntNE, v, LLVMConstInt(lc->i8, 0, 0), "") : v;
}
static LLVMValueRef reg_to_mem(gpu_lc_t *lc, drk_dtype_t t, LLVMValueRef v) {
  return t == DRK_DT_BOOL ? LLVMBuildZExt(lc->b, v, lc->i8, "") : v;
}

LLVMBasicBlockRef gpu_block(gpu_lc_t *lc, const char *name) {
  return LLVMAppendBasicBlockInContext(lc->ctx, lc->fn, name);
}

bool gpu_lower_load(gpu_lc_t *lc, const drk_tile_op_t *op) {
  const drk_tile_value_t *res = op->results[0];
  drk_dtype_t dt = res->type.dtype;
  gpu_dist_t D;
  if (!gpu_dist(lc, op, &res->type, &D)) return false;
  LLVMTypeRef mt = gpu_mem_type(lc, dt);
  if (!mt) return gpu_err(lc, op, "of dtype %s", drk_dtype_name(dt));
  int es = drk_dtype_bits(dt) / 8;
  gpu_val_t *p = gpu_get(lc, op->operands[0]);
  gpu_val_t *mk = op->n_operands > 1 ? gpu_get(lc, op->operands[1]) : NULL;
  gpu_val_t *ot = op->n_operands > 2 ? gpu_get(lc, op->operands[2]) : NULL;
  int f = gpu_fastest_dim(&res->type);
  int w = gpu_vec_width(&D, f, es, ax_of(lc, op->operands[0]), mk ? ax_of(lc, op->operands[1]) : NULL);
  gpu_val_t *x = gpu_val_new(lc, D.nregs);
  LLVMTypeRef vt = w > 1 ? LLVMVectorType(mt, (unsigned)w) : mt;
  for (int r = 0; r < D.nregs; r++) {
    int idx[GPU_MAXR];
    gpu_reg_split(&D, r, idx);
    if (D.rank && idx[f] % w) continue;
    int regs[16];
    for (int i = 0; i < w; i++) {
      idx[f] += i;
      regs[i] = D.rank ? gpu_reg_join(&D, idx) : 0;
      idx[f] -= i;
    }
    LLVMValueRef ld_v;
    LLVMBasicBlockRef cur = LLVMGetInsertBlock(lc->b), bl = NULL, bj = NULL;
    if (mk) {
      bl = gpu_block(lc, "ld");
      bj = gpu_block(lc, "ld.join");
      LLVMBuildCondBr(lc->b, mk->r[r], bl, bj);
      LLVMPositionBuilderAtEnd(lc->b, bl);
    }
    ld_v = LLVMBuildLoad2(lc->b, vt, p->r[r], "");
    LLVMSetAlignment(ld_v, (unsigned)(w * es));
    LLVMValueRef vals[16];
    for (int i = 0; i < w; i++)
      vals[i] = mem_to_reg(lc, dt, w > 1 ? LLVMBuildExtractElement(lc->b, ld_v, gpu_i32(lc, i), "") : ld_v);
    if (mk) {
      LLVMBuildBr(lc->b, bj);
      LLVMPositionBuilderAtEnd(lc->b, bj);
      LLVMTypeRef rt = LLVMTypeOf(vals[0]);
      for (int i = 0; i < w; i++) {
        LLVMValueRef phi = LLVMBuildPhi(lc->b, rt, "");
        LLVMValueRef o = ot ? ot->r[regs[i]] : LLVMConstNull(rt);
        LLVMValueRef iv[2] = {vals[i], o};
        LLVMBasicBlockRef ib[2] = {bl, cur};
        LLVMAddIncoming(phi, iv, ib, 2);
        vals[i] = phi;
      }
    }
    for (int i = 0; i < w; i++) x->r[regs[i]] = vals[i];
  }
  gpu_set(lc, res, x);
  return true;
}

bool gpu_lower_store(gpu_lc_t *lc, const drk_tile_op_t *op) {
  const drk_tile_value_t *pv = op->operands[0];
  drk_dtype_t dt = op->operands[1]->type.dtype;
  gpu_dist_t D;
  if (!gpu_dist(lc, op, &pv->type, &D)) return false;
  LLVMTypeRef mt = gpu_mem_type(lc, dt);
  if (!mt) return gpu_err(lc, op, "of dtype %s", drk_dtype_name(dt));
  int es = drk_dtype_bits(dt) / 8;
  gpu_val_t *p = gpu_get(lc, pv), *v = gpu_get(lc, op->operands[1]);
  gpu_val_t *mk = op->n_operands > 2 ? gpu_get(lc, op->operands[2]) : NULL;
  int f = gpu_fastest_dim(&pv->type);
  int w = gpu_vec_width(&D, f, es, ax_of(lc, pv), mk ? ax_of(lc, op->operands[2]) : NULL);
  /* Stores from replicated threads write equal values: harmless. */
  for (int r = 0; r < D.nregs; r++) {
    int idx[GPU_MAXR];
    gpu_reg_split(&D, r, idx);
    if (D.rank && idx[f] % w) continue;
    LLVMBasicBlockRef bj = NULL;
    if (mk) {
      LLVMBasicBlockRef bs = gpu_block(lc, "st");
      bj = gpu_block(lc, "st.join");
      LLVMBuildCondBr(lc->b, mk->r[r], bs, bj);
      LLVMPositionBuilderAtEnd(lc->b, bs);
    }
    LLVMValueRef sv;
    if (w > 1) {
      sv = LLVMGetUndef(LLVMVectorType(mt, (unsigned)w));
      for (int i = 0; i < w; i++) {
        idx[f] += i;
        sv = LLVMBuildInsertElement(lc->b, sv, reg_to_mem(lc, dt, v->r[gpu_reg_join(&D, idx)]), gpu_i32(lc, i), "");
        idx[f] -= i;
      }
    } else {
      sv = reg_to_mem(lc, dt, v->r[r]);
    }
    LLVMValueRef st = LLVMBuildStore(lc->b, sv, p->r[r]);
    LLVMSetAlignment(st, (unsigned)(w * es));
    if (mk) {
      LLVMBuildBr(lc->b, bj);
      LLVMPositionBuilderAtEnd(lc->b, bj);
    }
  }
  return true;
}

/* Register r of a tile of distribution Dd broadcast from a tile of distribution Ds whose
 * dims are 1 where mapped[d] is false. */
bool gpu_lower_broadcast(gpu_lc_t *lc, const drk_tile_op_t *op) {
  const drk_tile_value_t *s = op->operands[0], *res = op->results[0];
  if (!drk_tile_layout_equal(s->type.layout, res->type.layout)) return gpu_err(lc, op, "across layouts");
  gpu_dist_t Ds, Dd;
  if (!gpu_dist(lc, op, &s->type, &Ds) || !gpu_dist(lc, op, &res->type, &Dd)) return false;
  gpu_val_t *sv = gpu_get(lc, s), *x = gpu_val_new(lc, Dd.nregs);
  for (int r = 0; r < Dd.nregs; r++) {
    int idx[GPU_MAXR];
    gpu_reg_split(&Dd, r, idx);
    for (int d = 0; d < Dd.rank; d++)
      if (s->type.dims[d] == 1) idx[d] = 0;
      else if (Ds.n[d] != Dd.n[d]) return gpu_err(lc, op, "with mismatched distributions");
    x->r[r] = sv->r[gpu_reg_join(&Ds, idx)];
  }
  gpu_set(lc, res, x);
  return true;
}

bool gpu_lower_expand_dims(gpu_lc_t *lc, const drk_tile_op_t *op) {
  const drk_tile_value_t *s = op->operands[0], *res = op->results[0];
  gpu_dist_t Ds, Dd;
  if (!gpu_dist(lc, op, &s->type, &Ds) || !gpu_dist(lc, op, &res->type, &Dd)) return false;
  if (Ds.nregs != Dd.nregs) return gpu_err(lc, op, "with mismatched distributions");
  gpu_val_t *sv = gpu_get(lc, s), *x = gpu_val_new(lc, Dd.nregs);
  for (int r = 0; r < Dd.nregs; r++) x->r[r] = sv->r[r];
  gpu_set(lc, res, x);
  return true;
}

static const drk_tile_type_t *ty(const drk_tile_value_t *v) { return &v->type; }

bool gpu_lower_elementwise(gpu_lc_t *lc, const drk_tile_op_t *op) {
  const drk_tile_value_t *res = op->results[0];
  int n = res->type.kind == DRK_TT_TILE ? 0 : 1;
  if (!n) {
    gpu_dist_t D;
    if (!gpu_dist(lc, op, ty(res), &D)) return false;
    n = D.nregs;
  }
  gpu_val_t *x = gpu_val_new(lc, n);
  gpu_val_t *o[3] = {0};
  for (int i = 0; i < op->n_operands && i < 3; i++) {
    o[i] = gpu_get(lc, op->operands[i]);
    if (o[i]->n != n) return gpu_err(lc, op, "with operands of different distributions");
  }
  drk_dtype_t t = op->operands[op->code == DRK_TOP_SELECT ? 1 : 0]->type.dtype;
  for (int r = 0; r < n; r++) {
    LLVMValueRef v = NULL;
    switch (op->code) {
    case DRK_TOP_SELECT: v = LLVMBuildSelect(lc->b, o[0]->r[r], o[1]->r[r], o[2]->r[r], ""); break;
    case DRK_TOP_FMA: { /* f16/bf16/f8 in their f32 compute type, one rounding back */
      LLVMValueRef a[3];
      for (int i = 0; i < 3; i++) a[i] = gpu_to_compute(lc, t, o[i]->r[r]);
      LLVMTypeRef ct = LLVMTypeOf(a[0]);
      v = gpu_from_compute(lc, t, lc->t->call_intrinsic(lc, "llvm.fma", &ct, 1, a, 3));
      break;
    }
    case DRK_TOP_CMP: v = gpu_cmp(lc, op, t, drk_tile_op_attr_ident(op, "pred", "eq"), o[0]->r[r], o[1]->r[r]); break;
    case DRK_TOP_BITCAST: v = LLVMBuildBitCast(lc->b, o[0]->r[r], gpu_reg_type(lc, res->type.dtype, false), ""); break;
    case DRK_TOP_CAST:
      v = gpu_cast(lc, op, t, res->type.dtype, o[0]->r[r],
                  strcmp(drk_tile_op_attr_ident(op, "rounding", "rn"), "rz") == 0);
      break;
    default:
      if (drk_tile_op_info(op->code)->flags & DRK_TOPF_EWB) v = gpu_ew_binary(lc, op, t, o[0]->r[r], o[1]->r[r]);
      else if (drk_tile_op_info(op->code)->flags & DRK_TOPF_EWU) v = gpu_ew_unary(lc, op, t, o[0]->r[r]);
      break;
    }
    if (!v) return lc->ok ? gpu_err(lc, op, "on %s", drk_dtype_name(t)) : false;
    x->r[r] = v;
  }
  gpu_set(lc, res, x);
  return true;
}

bool gpu_lower_addptr(gpu_lc_t *lc, const drk_tile_op_t *op) {
  const drk_tile_value_t *res = op->results[0];
  gpu_val_t *p = gpu_get(lc, op->operands[0]), *o = gpu_get(lc, op->operands[1]);
  if (p->n != o->n) return gpu_err(lc, op, "with operands of different distributions");
  LLVMTypeRef et = gpu_mem_type(lc, res->type.dtype);
  if (!et) return gpu_err(lc, op, "to %s", drk_dtype_name(res->type.dtype));
  gpu_val_t *x = gpu_val_new(lc, p->n);
  for (int r = 0; r < p->n; r++) {
    LLVMValueRef idx = o->r[r];
    x->r[r] = LLVMBuildGEP2(lc->b, et, p->r[r], &idx, 1, "");
  }
  gpu_set(lc, res, x);
  return true;
}

bool gpu_lower_splat_const_range(gpu_lc_t *lc, const drk_tile_op_t *op) {
  const drk_tile_value_t *res = op->results[0];
  gpu_dist_t D;
  if (!gpu_dist(lc, op, ty(res), &D)) return false;
  gpu_val_t *x = gpu_val_new(lc, D.nregs);
  LLVMValueRef c = NULL;
  if (op->code == DRK_TOP_CONSTANT) {
    c = gpu_const(lc, res->type.dtype, drk_tile_op_attr(op, "value"));
    if (!c) return gpu_err(lc, op, "of dtype %s", drk_dtype_name(res->type.dtype));
  } else if (op->code == DRK_TOP_SPLAT) {
    c = gpu_get(lc, op->operands[0])->r[0];
  }
  int64_t start = drk_tile_op_attr_int(op, "start", 0);
  for (int r = 0; r < D.nregs; r++) {
    if (op->code == DRK_TOP_MAKE_RANGE)
      x->r[r] = LLVMBuildAdd(lc->b, gpu_coord(lc, &D, r, 0), gpu_i32(lc, start), "");
    else
      x->r[r] = c;
  }
  gpu_set(lc, res, x);
  return true;
}

/* ---- shared memory descriptors ---- */
static int64_t smem_bytes(const drk_tile_type_t *t) {
  int64_t n = drk_dtype_bits(t->dtype) / 8;
  for (int d = 0; d < t->rank; d++) n *= t->dims[d];
  return n;
}

/* Byte address of element `coords` of smem buffer st (its last layout-rank dims; leading
 * stage dims are 0): row-major by the layout's order, then the XOR swizzle of 16-byte
 * chunks with the row index mod 1024/128 (CUTLASS Swizzle<log2(S/16), 4, 3>, what TMA and
 * wgmma use). */
LLVMValueRef gpu_smem_elem_addr(gpu_lc_t *lc, LLVMValueRef base, const drk_tile_type_t *st,
                               LLVMValueRef *coords) {
  const drk_tile_layout_t *L = st->layout;
  int lr = L->rank, first = st->rank - lr;
  int64_t es = drk_dtype_bits(st->dtype) / 8, stride = es;
  LLVMValueRef off = gpu_i32(lc, 0);
  /* A swizzled fastest dim longer than the swizzle is split into chunks of `swizzle` bytes,
   * each a [rows][swizzle] block (what TMA writes box by box, and a canonical wgmma layout). */
  int f = L->order[0];
  int64_t ce = L->swizzle ? L->swizzle / es : 0, rest = 1;
  bool chunked = ce > 0 && st->dims[first + f] > ce;
  for (int i = 0; i < lr; i++) {
    int d = L->order[i];
    LLVMValueRef cd = coords[d];
    if (chunked && i == 0) cd = LLVMBuildAnd(lc->b, cd, gpu_i32(lc, ce - 1), "");
    off = LLVMBuildAdd(lc->b, off, LLVMBuildMul(lc->b, cd, gpu_i32(lc, stride), ""), "");
    stride *= chunked && i == 0 ? ce : st->dims[first + d];
    if (i) rest *= st->dims[first + d];
  }
  if (chunked) {
    LLVMValueRef ch = LLVMBuildUDiv(lc->b, coords[f], gpu_i32(lc, ce), "");
    off = LLVMBuildAdd(lc->b, off, LLVMBuildMul(lc->b, ch, gpu_i32(lc, rest * L->swizzle), ""), "");
  }
  if (L->swizzle) {
    int64_t m = L->swizzle / 16 - 1;
    LLVMValueRef row = LLVMBuildAnd(lc->b, LLVMBuildLShr(lc->b, off, gpu_i32(lc, 7), ""), gpu_i32(lc, m), "");
    off = LLVMBuildXor(lc->b, off, LLVMBuildShl(lc->b, row, gpu_i32(lc, 4), ""), "");
  }
  LLVMValueRef o64 = LLVMBuildZExt(lc->b, off, lc->i64, "");
  return LLVMBuildGEP2(lc->b, lc->i8, base, &o64, 1, "");
}

bool gpu_lower_local_alloc(gpu_lc_t *lc, const drk_tile_op_t *op) {
  int64_t off = drk_tile_op_attr_int(op, "offset", 0);
  LLVMValueRef base = lc->t->smem_base(lc);
  LLVMValueRef idx = gpu_i64(lc, off);
  gpu_val_t *x = gpu_val_new(lc, 1);
  x->r[0] = LLVMBuildGEP2(lc->b, lc->i8, base, &idx, 1, "smem");
  gpu_set(lc, op->results[0], x);
  return true;
}

bool gpu_lower_memdesc_index(gpu_lc_t *lc, const drk_tile_op_t *op) {
  const drk_tile_value_t *res = op->results[0];
  LLVMValueRef base = gpu_get(lc, op->operands[0])->r[0];
  LLVMValueRef i = gpu_get(lc, op->operands[1])->r[0];
  if (LLVMTypeOf(i) != lc->i32) i = LLVMBuildTrunc(lc->b, i, lc->i32, "");
  int64_t sb = smem_bytes(&res->type);
  LLVMValueRef o = LLVMBuildZExt(lc->b, LLVMBuildMul(lc->b, i, gpu_i32(lc, sb), ""), lc->i64, "");
  gpu_val_t *x = gpu_val_new(lc, 1);
  x->r[0] = LLVMBuildGEP2(lc->b, lc->i8, base, &o, 1, "");
  gpu_set(lc, res, x);
  return true;
}

/* ---- control flow ---- */
/* `for {unroll = 0}`: the loop's back edge gets llvm.loop !{self, !{"llvm.loop.unroll.disable"}},
 * so LLVM keeps the loop even when its trip count is a small constant (the sm_90a matmul's
 * consumer: fully unrolled over 2-4 k tiles, ptxas serialized its wgmma, C7520). */
static void loop_no_unroll(gpu_lc_t *lc, LLVMValueRef back) {
  static const char dis[] = "llvm.loop.unroll.disable";
  LLVMMetadataRef s = LLVMMDStringInContext2(lc->ctx, dis, sizeof dis - 1);
  LLVMMetadataRef tmp = LLVMTemporaryMDNode(lc->ctx, NULL, 0);
  LLVMMetadataRef ops[2] = {tmp, LLVMMDNodeInContext2(lc->ctx, &s, 1)};
  LLVMMetadataRef id = LLVMMDNodeInContext2(lc->ctx, ops, 2);
  LLVMMetadataReplaceAllUsesWith(tmp, id);
  LLVMSetMetadata(back, LLVMGetMDKindIDInContext(lc->ctx, "llvm.loop", 9), LLVMMetadataAsValue(lc->ctx, id));
}

bool gpu_lower_for(gpu_lc_t *lc, const drk_tile_op_t *op) {
  const drk_tile_region_t *body = op->regions[0];
  int nc = op->n_operands - 3;
  LLVMValueRef lb = gpu_get(lc, op->operands[0])->r[0], ub = gpu_get(lc, op->operands[1])->r[0];
  LLVMValueRef step = gpu_get(lc, op->operands[2])->r[0];
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(lc->b);
  LLVMBasicBlockRef hdr = gpu_block(lc, "for.hdr"), bb = gpu_block(lc, "for.body"), ex = gpu_block(lc, "for.exit");
  LLVMBuildBr(lc->b, hdr);
  LLVMPositionBuilderAtEnd(lc->b, hdr);
  LLVMValueRef iv = LLVMBuildPhi(lc->b, LLVMTypeOf(lb), "iv");
  gpu_val_t *ivv = gpu_val_new(lc, 1);
  ivv->r[0] = iv;
  gpu_set(lc, body->args[0], ivv);
  gpu_val_t **phis = drk_arena_alloc(lc->a, sizeof(gpu_val_t *) * (size_t)(nc ? nc : 1));
  for (int i = 0; i < nc; i++) {
    gpu_val_t *in = gpu_get(lc, op->operands[3 + i]);
    phis[i] = gpu_val_new(lc, in->n);
    if (in->n == 1 && op->operands[3 + i]->type.kind == DRK_TT_SMEM) {
      phis[i]->r[0] = LLVMBuildPhi(lc->b, lc->p3, "");
    } else {
      for (int r = 0; r < in->n; r++) phis[i]->r[r] = LLVMBuildPhi(lc->b, LLVMTypeOf(in->r[r]), "");
    }
    for (int r = 0; r < in->n; r++) LLVMAddIncoming(phis[i]->r[r], &in->r[r], &pre, 1);
    gpu_set(lc, body->args[1 + i], phis[i]);
  }
  LLVMAddIncoming(iv, &lb, &pre, 1);
  LLVMBuildCondBr(lc->b, LLVMBuildICmp(lc->b, LLVMIntSLT, iv, ub, ""), bb, ex);
  LLVMPositionBuilderAtEnd(lc->b, bb);
  const drk_tile_op_t *y = NULL;
  if (!gpu_lower_region(lc, body, &y)) return false;
  LLVMValueRef next = LLVMBuildAdd(lc->b, iv, step, "iv.next");
  LLVMBasicBlockRef latch = LLVMGetInsertBlock(lc->b);
  for (int i = 0; i < nc && y; i++) {
    gpu_val_t *yv = gpu_get(lc, y->operands[i]);
    if (yv->n != phis[i]->n) return gpu_err(lc, op, "with a yield of another distribution");
    for (int r = 0; r < yv->n; r++) LLVMAddIncoming(phis[i]->r[r], &yv->r[r], &latch, 1);
  }
  LLVMAddIncoming(iv, &next, &latch, 1);
  LLVMValueRef back = LLVMBuildBr(lc->b, hdr);
  if (drk_tile_op_attr_int(op, "unroll", 1) == 0) loop_no_unroll(lc, back);
  LLVMPositionBuilderAtEnd(lc->b, ex);
  for (int i = 0; i < op->n_results; i++) gpu_set(lc, op->results[i], phis[i]);
  return true;
}

bool gpu_lower_if(gpu_lc_t *lc, const drk_tile_op_t *op) {
  LLVMValueRef c = gpu_get(lc, op->operands[0])->r[0];
  LLVMBasicBlockRef bt = gpu_block(lc, "then"), be = gpu_block(lc, "else"), bj = gpu_block(lc, "endif");
  LLVMBuildCondBr(lc->b, c, bt, be);
  const drk_tile_op_t *yt = NULL, *ye = NULL;
  LLVMPositionBuilderAtEnd(lc->b, bt);
  if (!gpu_lower_region(lc, op->regions[0], &yt)) return false;
  LLVMBasicBlockRef et = LLVMGetInsertBlock(lc->b);
  LLVMBuildBr(lc->b, bj);
  LLVMPositionBuilderAtEnd(lc->b, be);
  if (op->n_regions > 1 && !gpu_lower_region(lc, op->regions[1], &ye)) return false;
  LLVMBasicBlockRef ee = LLVMGetInsertBlock(lc->b);
  LLVMBuildBr(lc->b, bj);
  LLVMPositionBuilderAtEnd(lc->b, bj);
  for (int i = 0; i < op->n_results; i++) {
    if (!yt || !ye) return gpu_err(lc, op, "with results but no else region");
    gpu_val_t *a = gpu_get(lc, yt->operands[i]), *b = gpu_get(lc, ye->operands[i]);
    if (a->n != b->n) return gpu_err(lc, op, "with yields of different distributions");
    gpu_val_t *x = gpu_val_new(lc, a->n);
    for (int r = 0; r < a->n; r++) {
      x->r[r] = LLVMBuildPhi(lc->b, LLVMTypeOf(a->r[r]), "");
      LLVMValueRef iv[2] = {a->r[r], b->r[r]};
      LLVMBasicBlockRef ib[2] = {et, ee};
      LLVMAddIncoming(x->r[r], iv, ib, 2);
    }
    gpu_set(lc, op->results[i], x);
  }
  return true;
}

/* ---- op dispatch ---- */
static bool lower_op(gpu_lc_t *lc, const drk_tile_op_t *op) {
  gpu_op_result_t tr = lc->t->lower_op(lc, op);
  if (tr != GPU_OP_NOT_MINE) return tr == GPU_OP_DONE;
  const drk_tile_op_info_t *info = drk_tile_op_info(op->code);
  switch (op->code) {
  case DRK_TOP_CONSTANT:
  case DRK_TOP_SPLAT:
  case DRK_TOP_MAKE_RANGE:
    if (op->results[0]->type.kind != DRK_TT_TILE) {
      gpu_val_t *x = gpu_val_new(lc, 1);
      x->r[0] = gpu_const(lc, op->results[0]->type.dtype, drk_tile_op_attr(op, "value"));
      if (!x->r[0]) return gpu_err(lc, op, "of dtype %s", drk_dtype_name(op->results[0]->type.dtype));
      gpu_set(lc, op->results[0], x);
      return true;
    }
    return gpu_lower_splat_const_range(lc, op);
  case DRK_TOP_BROADCAST: return gpu_lower_broadcast(lc, op);
  case DRK_TOP_EXPAND_DIMS: return gpu_lower_expand_dims(lc, op);
  case DRK_TOP_RESHAPE:
  case DRK_TOP_CONVERT_LAYOUT: return gpu_lower_relayout(lc, op);
  case DRK_TOP_ADDPTR: return gpu_lower_addptr(lc, op);
  case DRK_TOP_LOAD: return gpu_lower_load(lc, op);
  case DRK_TOP_STORE: return gpu_lower_store(lc, op);
  case DRK_TOP_LOCAL_ALLOC: return gpu_lower_local_alloc(lc, op);
  case DRK_TOP_MEMDESC_INDEX: return gpu_lower_memdesc_index(lc, op);
  case DRK_TOP_LOCAL_LOAD: return gpu_lower_local_load(lc, op);
  case DRK_TOP_LOCAL_STORE: return gpu_lower_local_store(lc, op);
  case DRK_TOP_REDUCE: return gpu_lower_reduce(lc, op);
  case DRK_TOP_FOR: return gpu_lower_for(lc, op);
  case DRK_TOP_IF: return gpu_lower_if(lc, op);
  case DRK_TOP_YIELD:
  case DRK_TOP_RETURN: return true;
  case DRK_TOP_ADD: case DRK_TOP_SUB: case DRK_TOP_MUL: case DRK_TOP_DIV: case DRK_TOP_REM:
  case DRK_TOP_MAX: case DRK_TOP_MIN: case DRK_TOP_AND: case DRK_TOP_OR: case DRK_TOP_SELECT:
  case DRK_TOP_FMA: case DRK_TOP_CMP: case DRK_TOP_CAST: case DRK_TOP_BITCAST:
    return gpu_lower_elementwise(lc, op);
  default:
    if (info->flags & (DRK_TOPF_EWB | DRK_TOPF_EWU)) return gpu_lower_elementwise(lc, op);
    return gpu_err(lc, op, "(not supported by the %s lowering yet)", lc->t->desc);
  }
}

bool gpu_lower_region(gpu_lc_t *lc, const drk_tile_region_t *r, const drk_tile_op_t **out_yield) {
  for (size_t i = 0; i < r->n_ops; i++) {
    const drk_tile_op_t *op = r->ops[i];
    if (op->code == DRK_TOP_YIELD) *out_yield = op;
    if (!lower_op(lc, op)) {
      if (lc->ok) gpu_err(lc, op, "(internal: failed without a message)");
      return false;
    }
  }
  return true;
}

void gpu_axis_param(gpu_lc_t *lc, int i) {
  const drk_tile_value_t *p = lc->k->params[i];
  gpu_axis_t *a = ax_new(lc);
  int64_t es = p->type.is_ptr ? drk_dtype_bits(p->type.dtype) / 8 : 1;
  for (int dd = 0; dd < GPU_MAXR; dd++) a->div[dd] = es < 1 ? 1 : es;
  for (int j = 0; j < lc->k->param_n_attrs[i]; j++) {
    const drk_tile_attr_t *at = &lc->k->param_attrs[i][j];
    if ((strcmp(at->name, "align") == 0 || strcmp(at->name, "div") == 0) && at->kind == DRK_TA_INT)
      for (int dd = 0; dd < GPU_MAXR; dd++) a->div[dd] = at->i;
  }
  if (is_intlike(&p->type)) lc->axis[p->id] = a;
}

/* ---- kernels ---- */
void gpu_lc_init(gpu_lc_t *lc, const gpu_target_t *t, LLVMBuilderRef b, LLVMContextRef ctx,
                 const drk_tile_module_t *m, const drk_tile_kernel_t *k, drk_diag_t *d, unsigned as_global,
                 unsigned as_shared) {
  lc->t = t;
  lc->b = b, lc->ctx = ctx, lc->m = m, lc->k = k, lc->d = d, lc->ok = true;
  lc->a = drk_arena_create();
  lc->i1 = LLVMInt1TypeInContext(ctx), lc->i8 = LLVMInt8TypeInContext(ctx);
  lc->i16 = LLVMInt16TypeInContext(ctx), lc->i32 = LLVMInt32TypeInContext(ctx);
  lc->i64 = LLVMInt64TypeInContext(ctx), lc->f16 = LLVMHalfTypeInContext(ctx);
  lc->bf16 = LLVMBFloatTypeInContext(ctx), lc->f32 = LLVMFloatTypeInContext(ctx);
  lc->f64 = LLVMDoubleTypeInContext(ctx), lc->vd = LLVMVoidTypeInContext(ctx);
  lc->p0 = LLVMPointerTypeInContext(ctx, 0), lc->p1 = LLVMPointerTypeInContext(ctx, as_global);
  lc->p3 = LLVMPointerTypeInContext(ctx, as_shared);
  lc->n_ids = m->next_value_id + 1;
  lc->vals = drk_arena_alloc(lc->a, sizeof(gpu_val_t *) * lc->n_ids);
  memset(lc->vals, 0, sizeof(gpu_val_t *) * lc->n_ids);
  lc->axis = drk_arena_alloc(lc->a, sizeof(gpu_axis_t *) * lc->n_ids);
  memset(lc->axis, 0, sizeof(gpu_axis_t *) * lc->n_ids);
}

void gpu_bind_param(gpu_lc_t *lc, int i) {
  const drk_tile_value_t *p = lc->k->params[i];
  gpu_val_t *x = gpu_val_new(lc, 1);
  x->r[0] = LLVMGetParam(lc->fn, (unsigned)i);
  LLVMSetValueName2(x->r[0], p->name, strlen(p->name));
  gpu_set(lc, p, x);
  gpu_axis_param(lc, i);
}

bool gpu_lower_body(gpu_lc_t *lc) {
  gpu_axis_region(lc, lc->k->body);
  const drk_tile_op_t *y = NULL;
  if (!gpu_lower_region(lc, lc->k->body, &y)) return false;
  LLVMBuildRetVoid(lc->b);
  return lc->ok;
}

void gpu_lc_finish(gpu_lc_t *lc, bool ok) {
  if (!ok && lc->fn) LLVMDeleteFunction(lc->fn);
  if (ok) gpu_scratch_finish(lc);
  else if (lc->scratch) LLVMDeleteGlobal(lc->scratch);
  drk_arena_destroy(lc->a);
}
