/* Tile IR -> LLVM IR for gfx942 (see docs/backend-amdgpu.md, "Lowering"). Mirrors
 * backends/nvptx/lower.c.
 *
 * Requires a module that passed drk_tile_verify(). Lowers each kernel op by op, in the
 * order of its regions: tile values become arrays of per-thread registers placed by their
 * layout (lower_internal.h), scalars single values, shared-memory buffers addrspace(3)
 * pointers into the kernel's LDS (one static array of the kernel's `smem` bytes, so the
 * code object's group segment size is the whole requirement and launches pass no dynamic
 * LDS). One pre-pass computes axis facts (contiguity, divisibility, constancy) for integer
 * and pointer tiles, with a fixpoint over loops, so loads, stores and LDS accesses are
 * vectorized. Guarantees: a kernel either lowers to a function that LLVMVerifyModule
 * accepts or gets a located error ("amdgpu: cannot lower ..."); only intrinsics the AMDGPU
 * backend selects for gfx942 are emitted, so LLVM never aborts on "Cannot select" or a
 * missing libcall. NVIDIA-only ops (TMA, mbarriers, wgmma, warp groups, setmaxnreg, named
 * barriers, clusters) are located errors. cp_async becomes a synchronous copy (the tile
 * IR's barrier after cp_async_wait orders it), cp_async_commit/wait nothing. This file
 * holds the driver, distributions, axis analysis, data movement, control flow and the
 * entry point; lower_math.c the arithmetic, lower_mem.c reductions, layout conversions,
 * shared memory and dot (MFMA). */
#include "backends/amdgpu/lower_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/Analysis.h>

bool am_err(am_lc_t *lc, const drk_tile_op_t *op, const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  drk_diag_error(lc->d, op ? op->loc : lc->k->loc, "amdgpu: cannot lower '%s' %s",
                 op ? drk_tile_op_name(op->code) : lc->k->name, buf);
  lc->ok = false;
  return false;
}

LLVMValueRef am_i32(am_lc_t *lc, int64_t v) { return LLVMConstInt(lc->i32, (unsigned long long)v, 1); }
LLVMValueRef am_i64(am_lc_t *lc, int64_t v) { return LLVMConstInt(lc->i64, (unsigned long long)v, 1); }

am_val_t *am_val_new(am_lc_t *lc, int n) {
  am_val_t *x = drk_arena_alloc(lc->a, sizeof *x);
  x->n = n;
  x->r = drk_arena_alloc(lc->a, sizeof(LLVMValueRef) * (size_t)(n ? n : 1));
  memset(x->r, 0, sizeof(LLVMValueRef) * (size_t)(n ? n : 1));
  return x;
}

am_val_t *am_get(am_lc_t *lc, const drk_tile_value_t *v) {
  DRK_ASSERT(v->id < lc->n_ids && lc->vals[v->id]);
  return lc->vals[v->id];
}
void am_set(am_lc_t *lc, const drk_tile_value_t *v, am_val_t *x) {
  DRK_ASSERT(v->id < lc->n_ids);
  lc->vals[v->id] = x;
}

LLVMTypeRef am_reg_type(am_lc_t *lc, drk_dtype_t t, bool is_ptr) {
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
LLVMTypeRef am_mem_type(am_lc_t *lc, drk_dtype_t t) {
  return t == DRK_DT_BOOL ? lc->i8 : am_reg_type(lc, t, false);
}

LLVMValueRef am_tid(am_lc_t *lc) { return drk_amdgpu_workitem_id(lc->cg, 0); }
LLVMValueRef am_lane(am_lc_t *lc) { return LLVMBuildAnd(lc->b, am_tid(lc), am_i32(lc, 31), "lane"); }
LLVMValueRef am_warp(am_lc_t *lc) { return LLVMBuildLShr(lc->b, am_tid(lc), am_i32(lc, 5), "warp"); }
LLVMValueRef am_lane64(am_lc_t *lc) { return LLVMBuildAnd(lc->b, am_tid(lc), am_i32(lc, 63), "lane64"); }
/* Wave-uniform: readfirstlane puts it (and what is computed from it) in scalar registers. */
LLVMValueRef am_wave(am_lc_t *lc) {
  return drk_amdgpu_readfirstlane(lc->cg, LLVMBuildLShr(lc->b, am_tid(lc), am_i32(lc, 6), "wave"));
}

void am_barrier(am_lc_t *lc) { drk_amdgpu_barrier(lc->cg); }

/* The kernel's LDS: a static array of k->smem bytes (created on first use). */
static LLVMValueRef lds_base(am_lc_t *lc) {
  if (!lc->lds) {
    char name[160];
    snprintf(name, sizeof name, "%s.lds", lc->k->name);
    lc->lds = drk_amdgpu_lds_static(lc->cg, name, (unsigned)(lc->k->smem > 0 ? lc->k->smem : 16), 16);
  }
  return lc->lds;
}

/* Scratch shared memory for op: its `scratch` attribute (offset into dynamic smem) or the
 * kernel's static scratch buffer. Every user brackets its use with CTA barriers (write,
 * barrier, read, barrier), so all ops share one buffer, sized at the end of the kernel. */
LLVMValueRef am_smem_scratch(am_lc_t *lc, const drk_tile_op_t *op, unsigned bytes) {
  const drk_tile_attr_t *s = drk_tile_op_attr(op, "scratch");
  if (s && s->kind == DRK_TA_INT) {
    LLVMValueRef base = lds_base(lc);
    LLVMValueRef idx = am_i64(lc, s->i);
    return LLVMBuildGEP2(lc->b, lc->i8, base, &idx, 1, "scratch");
  }
  if (!lc->scratch) {
    char name[160];
    snprintf(name, sizeof name, "%s.scratch.tmp", lc->k->name);
    lc->scratch = drk_amdgpu_lds_static(lc->cg, name, 16, 16);
  }
  if (bytes > lc->scratch_bytes) lc->scratch_bytes = bytes;
  return lc->scratch;
}

/* Replaces the placeholder scratch buffer by one of the final size. */
static void scratch_finish(am_lc_t *lc) {
  if (!lc->scratch) return;
  char name[160];
  snprintf(name, sizeof name, "%s.scratch", lc->k->name);
  LLVMValueRef g = drk_amdgpu_lds_static(lc->cg, name, lc->scratch_bytes, 16);
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

static int64_t *offs_new(am_lc_t *lc, int n) {
  int64_t *o = drk_arena_alloc(lc->a, sizeof(int64_t) * (size_t)(n ? n : 1));
  return o;
}

static void dim_const(am_lc_t *lc, am_dist_t *D, int s, int64_t size) {
  /* every thread holds all `size` elements of this dim */
  D->n[s] = (int)size;
  D->off[s] = offs_new(lc, (int)size);
  for (int r = 0; r < size; r++) D->off[s][r] = r;
  D->thr[s] = NULL;
  D->thr_align[s] = 1 << 30;
  D->wrap[s] = false;
  D->n_xor[s] = 0;
  D->wstride[s] = 1;
  D->wcount[s] = 1;
}

static void dim_blocked(am_lc_t *lc, const drk_tile_layout_t *L, int d, int64_t size, am_dist_t *D,
                        int s, LLVMValueRef lane, LLVMValueRef warp) {
  int ls[AM_MAXR], ws[AM_MAXR];
  int accl = 1, accw = 1;
  for (int i = 0; i < L->rank; i++) {
    int o = L->order[i];
    ls[o] = accl, accl *= L->tpw[o];
    ws[o] = accw, accw *= L->wpc[o];
  }
  int64_t sp = L->spt[d], t = L->tpw[d], w = L->wpc[d], cover = sp * t * w;
  if (size <= sp) {
    dim_const(lc, D, s, size);
    return;
  }
  LLVMValueRef ld = LLVMBuildAnd(lc->b, LLVMBuildLShr(lc->b, lane, am_i32(lc, ilog2(ls[d])), ""), am_i32(lc, t - 1), "");
  LLVMValueRef wd = LLVMBuildAnd(lc->b, LLVMBuildLShr(lc->b, warp, am_i32(lc, ilog2(ws[d])), ""), am_i32(lc, w - 1), "");
  LLVMValueRef td = LLVMBuildAdd(lc->b, ld, LLVMBuildMul(lc->b, wd, am_i32(lc, t), ""), "");
  D->thr[s] = LLVMBuildMul(lc->b, td, am_i32(lc, sp), "");
  D->thr_align[s] = sp;
  if (size >= cover) {
    D->n[s] = (int)(sp * (size / cover));
    D->off[s] = offs_new(lc, D->n[s]);
    for (int r = 0; r < D->n[s]; r++) D->off[s][r] = (r / sp) * cover + r % sp;
    D->wrap[s] = false;
  } else {
    D->n[s] = (int)sp;
    D->off[s] = offs_new(lc, D->n[s]);
    for (int r = 0; r < D->n[s]; r++) D->off[s][r] = r;
    D->wrap[s] = true;
  }
  int64_t P = size / sp;
  D->n_xor[s] = 0;
  for (int k = 0; ((int64_t)1 << k) < t && ((int64_t)1 << k) < P; k++) D->xr[s][D->n_xor[s]++] = (unsigned)ls[d] << k;
  D->wstride[s] = 32 * ws[d];
  D->wcount[s] = P > t ? (int)(P / t < w ? P / t : w) : 1;
}

bool am_mfma_geom(const drk_tile_layout_t *acc, drk_dtype_t ab, am_mfma_geom_t *out) {
  if (acc->kind != DRK_TL_MMA_SYNC && acc->kind != DRK_TL_MFMA) return false;
  int a = acc->wpc[0], b = acc->wpc[1], instr = acc->kind == DRK_TL_MFMA ? acc->instr[0] : 16;
  if (instr != 16 && instr != 32) return false;
  am_mfma_geom_t g;
  /* two layout warps make a wave: pair them along N when possible */
  if (b % 2 == 0) g.wm = a, g.wn = b / 2;
  else if (a % 2 == 0) g.wm = a / 2, g.wn = b;
  else return false;
  int bits = drk_dtype_bits(ab);
  g.instr = instr;
  g.e = bits == 16 ? 4 : bits == 32 ? 1 : bits == 8 ? 8 : 0;
  g.k_per = g.e * (64 / instr);
  *out = g;
  return true;
}

static LLVMValueRef wave_coord(am_lc_t *lc, const am_mfma_geom_t *g, int d) {
  LLVMValueRef w = am_wave(lc);
  if (d == 0) return LLVMBuildURem(lc->b, w, am_i32(lc, g->wm), "");
  return LLVMBuildURem(lc->b, LLVMBuildUDiv(lc->b, w, am_i32(lc, g->wm), ""), am_i32(lc, g->wn), "");
}

/* Lanes l .. l ^ (I-1): the I rows/columns one MFMA spreads over lane % I. */
static void xr_low(am_dist_t *D, int s, int instr) {
  D->n_xor[s] = 0;
  for (int m = 1; m < instr; m *= 2) D->xr[s][D->n_xor[s]++] = (unsigned)m;
}

/* MFMA accumulator (mma_sync and mfma layouts on AMD): per wave, instr x instr blocks;
 * 16x16: row 4(l/16) + r (r < 4), column l % 16; 32x32: row 8(r/4) + 4(l/32) + r%4
 * (r < 16), column l % 32. Blocks repeat every instr * waves along each dim. */
static bool dim_mfma_acc(am_lc_t *lc, const drk_tile_layout_t *L, int d, int64_t size, am_dist_t *D, int s) {
  am_mfma_geom_t g;
  if (!am_mfma_geom(L, DRK_DT_F16, &g)) return false;
  if (size == 1) {
    dim_const(lc, D, s, 1);
    return true;
  }
  int I = g.instr;
  int64_t cover = (int64_t)I * (d == 0 ? g.wm : g.wn);
  if (size % cover) return false;
  int64_t reps = size / cover;
  LLVMValueRef l = am_lane64(lc), base = LLVMBuildMul(lc->b, wave_coord(lc, &g, d), am_i32(lc, I), "");
  D->wrap[s] = false;
  if (d == 0) {
    int per = I == 16 ? 4 : 16;
    LLVMValueRef q = I == 16 ? LLVMBuildShl(lc->b, LLVMBuildLShr(lc->b, l, am_i32(lc, 4), ""), am_i32(lc, 2), "")
                             : LLVMBuildShl(lc->b, LLVMBuildLShr(lc->b, l, am_i32(lc, 5), ""), am_i32(lc, 2), "");
    D->thr[s] = LLVMBuildAdd(lc->b, base, q, "");
    D->thr_align[s] = 4;
    D->n[s] = (int)(reps * per);
    D->off[s] = offs_new(lc, D->n[s]);
    for (int r = 0; r < D->n[s]; r++) {
      int i = r % per;
      D->off[s][r] = (r / per) * cover + (I == 16 ? i : 8 * (i / 4) + i % 4);
    }
    D->n_xor[s] = 0;
    for (int m = I; m < 64; m *= 2) D->xr[s][D->n_xor[s]++] = (unsigned)m;
    D->wstride[s] = 64, D->wcount[s] = g.wm;
  } else {
    D->thr[s] = LLVMBuildAdd(lc->b, base, LLVMBuildAnd(lc->b, l, am_i32(lc, I - 1), ""), "");
    D->thr_align[s] = 1;
    D->n[s] = (int)reps;
    D->off[s] = offs_new(lc, D->n[s]);
    for (int r = 0; r < D->n[s]; r++) D->off[s][r] = r * cover;
    xr_low(D, s, I);
    D->wstride[s] = 64 * g.wm, D->wcount[s] = g.wn;
  }
  return true;
}

/* dot_op operands. Of a blocked parent (fma dots): the parent's placement along M/N, all of
 * K in every thread. Of an MFMA-placed parent: A row (B column) lane % I, K elements
 * e(l / I) + v (v < e) per instruction of K = k_per. */
static bool dim_dot_op(am_lc_t *lc, const drk_tile_layout_t *L, drk_dtype_t dt, int d, int64_t size,
                       am_dist_t *D, int s, LLVMValueRef lane, LLVMValueRef warp) {
  const drk_tile_layout_t *P = L->parent;
  bool kdim = (L->op_idx == 0) == (d == 1);
  if (P->kind == DRK_TL_BLOCKED) {
    if (kdim) {
      dim_const(lc, D, s, size);
      return true;
    }
    dim_blocked(lc, P, d, size, D, s, lane, warp);
    return true;
  }
  am_mfma_geom_t g;
  if (!am_mfma_geom(P, dt, &g) || !g.e) return false;
  int I = g.instr;
  LLVMValueRef l = am_lane64(lc);
  D->wrap[s] = false;
  if (!kdim) {
    int md = L->op_idx == 0 ? 0 : 1;
    int64_t cover = (int64_t)I * (md == 0 ? g.wm : g.wn);
    if (size % cover) return false;
    LLVMValueRef base = LLVMBuildMul(lc->b, wave_coord(lc, &g, md), am_i32(lc, I), "");
    D->thr[s] = LLVMBuildAdd(lc->b, base, LLVMBuildAnd(lc->b, l, am_i32(lc, I - 1), ""), "");
    D->thr_align[s] = 1;
    D->n[s] = (int)(size / cover);
    D->off[s] = offs_new(lc, D->n[s]);
    for (int r = 0; r < D->n[s]; r++) D->off[s][r] = r * cover;
    xr_low(D, s, I);
    D->wstride[s] = md == 0 ? 64 : 64 * g.wm, D->wcount[s] = md == 0 ? g.wm : g.wn;
    return true;
  }
  if (size % g.k_per) return false;
  D->n[s] = (int)(size / g.k_per) * g.e;
  D->off[s] = offs_new(lc, D->n[s]);
  for (int r = 0; r < D->n[s]; r++) D->off[s][r] = (r / g.e) * g.k_per + r % g.e;
  D->thr[s] = LLVMBuildMul(lc->b, LLVMBuildLShr(lc->b, l, am_i32(lc, I == 16 ? 4 : 5), ""), am_i32(lc, g.e), "");
  D->thr_align[s] = g.e;
  D->n_xor[s] = 0;
  for (int m = I; m < 64; m *= 2) D->xr[s][D->n_xor[s]++] = (unsigned)m;
  D->wstride[s] = 64, D->wcount[s] = 1;
  return true;
}

static bool dist_layout(am_lc_t *lc, const drk_tile_layout_t *L, drk_dtype_t dt, int rank,
                        const int64_t *dims, am_dist_t *D, LLVMValueRef lane, LLVMValueRef warp) {
  if (L->kind == DRK_TL_SLICE) {
    int64_t pd[AM_MAXR];
    int pr = rank + 1;
    if (pr > AM_MAXR) return false;
    for (int i = 0, j = 0; i < pr; i++) pd[i] = i == L->dim ? 1 : dims[j++];
    am_dist_t P;
    memset(&P, 0, sizeof P);
    if (!dist_layout(lc, L->parent, dt, pr, pd, &P, lane, warp)) return false;
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
    switch (L->kind) {
    case DRK_TL_BLOCKED:
      if (L->rank != rank) return false;
      dim_blocked(lc, L, d, dims[d], D, d, lane, warp);
      break;
    case DRK_TL_MMA_SYNC:
    case DRK_TL_MFMA:
      if (rank != 2 || !dim_mfma_acc(lc, L, d, dims[d], D, d)) return false;
      break;
    case DRK_TL_DOT_OP:
      if (rank != 2 || !dim_dot_op(lc, L, dt, d, dims[d], D, d, lane, warp)) return false;
      break;
    default:
      return false;
    }
  }
  return true;
}

bool am_dist(am_lc_t *lc, const drk_tile_op_t *op, const drk_tile_type_t *t, am_dist_t *out) {
  memset(out, 0, sizeof *out);
  if (t->kind != DRK_TT_TILE) {
    out->rank = 0;
    out->nregs = 1;
    return true;
  }
  LLVMValueRef lane = am_lane(lc), warp = am_warp(lc);
  if (!dist_layout(lc, t->layout, t->dtype, t->rank, t->dims, out, lane, warp)) {
    char buf[128];
    drk_tile_type_format(t, buf, sizeof buf);
    return am_err(lc, op, "with layout %s kind '%s' for %s", t->layout->name,
                  drk_tile_layout_kind_name(t->layout->kind), buf);
  }
  int64_t n = 1;
  for (int d = 0; d < out->rank; d++) n *= out->n[d];
  if (n > 4096) return am_err(lc, op, "with %lld registers per thread", (long long)n);
  out->nregs = (int)n;
  return true;
}

void am_reg_split(const am_dist_t *D, int reg, int *idx) {
  for (int d = D->rank - 1; d >= 0; d--) {
    idx[d] = reg % D->n[d];
    reg /= D->n[d];
  }
}
int am_reg_join(const am_dist_t *D, const int *idx) {
  int r = 0;
  for (int d = 0; d < D->rank; d++) r = r * D->n[d] + idx[d];
  return r;
}

LLVMValueRef am_coord(am_lc_t *lc, const am_dist_t *D, int reg, int d) {
  int idx[AM_MAXR];
  am_reg_split(D, reg, idx);
  LLVMValueRef c = am_i32(lc, D->off[d][idx[d]]);
  if (D->thr[d]) c = LLVMBuildAdd(lc->b, D->thr[d], c, "");
  if (D->wrap[d]) c = LLVMBuildAnd(lc->b, c, am_i32(lc, D->dims[d] - 1), "");
  return c;
}

int am_fastest_dim(const drk_tile_type_t *t) {
  if (t->kind != DRK_TT_TILE || t->rank == 0) return 0;
  const drk_tile_layout_t *L = t->layout;
  int drop[AM_MAXR], nd = 0;
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

int am_vec_width(const am_dist_t *D, int f, int esize, const am_axis_t *pa, const am_axis_t *ma) {
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

static am_axis_t *ax_new(am_lc_t *lc) {
  am_axis_t *a = drk_arena_alloc(lc->a, sizeof *a);
  for (int d = 0; d < AM_MAXR; d++) a->contig[d] = 1, a->div[d] = 1, a->cnst[d] = 1;
  return a;
}
static const am_axis_t *ax_of(am_lc_t *lc, const drk_tile_value_t *v) {
  return v->id < lc->n_ids ? lc->axis[v->id] : NULL;
}
static bool is_intlike(const drk_tile_type_t *t) {
  return t->is_ptr || (t->kind != DRK_TT_SMEM && t->kind != DRK_TT_TMADESC &&
                       (drk_dtype_is_int(t->dtype) || t->dtype == DRK_DT_BOOL));
}
static int64_t ediv(const am_axis_t *a, int d) { return a->contig[d] == 1 ? a->div[d] : 1; }

static void ax_meet(am_axis_t *x, const am_axis_t *y) {
  for (int d = 0; d < AM_MAXR; d++) {
    x->contig[d] = gcd64(x->contig[d], y->contig[d]);
    x->div[d] = gcd64(x->div[d], y->div[d]);
    x->cnst[d] = gcd64(x->cnst[d], y->cnst[d]);
  }
}
static bool ax_eq(const am_axis_t *x, const am_axis_t *y) { return memcmp(x, y, sizeof *x) == 0; }

static void ax_region(am_lc_t *lc, const drk_tile_region_t *r);

static void ax_op(am_lc_t *lc, const drk_tile_op_t *op) {
  if (op->code == DRK_TOP_FOR) {
    const drk_tile_region_t *body = op->regions[0];
    int nc = op->n_operands - 3;
    lc->axis[body->args[0]->id] = ax_new(lc);
    for (int i = 0; i < nc; i++) {
      const am_axis_t *ia = ax_of(lc, op->operands[3 + i]);
      am_axis_t *a = ax_new(lc);
      if (ia) *a = *ia;
      lc->axis[body->args[1 + i]->id] = ia ? a : NULL;
    }
    for (int it = 0; it < 8; it++) {
      ax_region(lc, body);
      const drk_tile_op_t *y = body->n_ops ? body->ops[body->n_ops - 1] : NULL;
      bool changed = false;
      for (int i = 0; i < nc && y && y->code == DRK_TOP_YIELD && i < y->n_operands; i++) {
        am_axis_t *ca = lc->axis[body->args[1 + i]->id];
        const am_axis_t *ya = ax_of(lc, y->operands[i]);
        if (!ca) continue;
        if (!ya) {
          lc->axis[body->args[1 + i]->id] = NULL;
          changed = true;
          continue;
        }
        am_axis_t old = *ca;
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
  for (int i = 0; i < op->n_regions; i++) ax_region(lc, op->regions[i]);
  if (op->n_results != 1) return;
  const drk_tile_value_t *res = op->results[0];
  if (!is_intlike(&res->type)) return;
  am_axis_t *x = ax_new(lc);
  int rank = res->type.kind == DRK_TT_TILE ? res->type.rank : 0;
  const am_axis_t *a = op->n_operands > 0 ? ax_of(lc, op->operands[0]) : NULL;
  const am_axis_t *b = op->n_operands > 1 ? ax_of(lc, op->operands[1]) : NULL;
  am_axis_t one;
  for (int d = 0; d < AM_MAXR; d++) one.contig[d] = 1, one.div[d] = 1, one.cnst[d] = 1;
  switch (op->code) {
  case DRK_TOP_CONSTANT: {
    const drk_tile_attr_t *v = drk_tile_op_attr(op, "value");
    int64_t iv = v && v->kind == DRK_TA_INT ? v->i : 1;
    for (int d = 0; d < AM_MAXR; d++) x->div[d] = pow2div(iv), x->cnst[d] = d < rank ? res->type.dims[d] : 1;
    break;
  }
  case DRK_TOP_MAKE_RANGE: {
    int64_t s = drk_tile_op_attr_int(op, "start", 0), e = drk_tile_op_attr_int(op, "end", 1);
    x->contig[0] = e - s, x->div[0] = pow2div(s);
    break;
  }
  case DRK_TOP_SPLAT:
    if (!a) break;
    for (int d = 0; d < AM_MAXR; d++) x->div[d] = a->div[0], x->cnst[d] = d < rank ? res->type.dims[d] : 1;
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
    for (int d = 0; d < AM_MAXR; d++) {
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
    for (int d = 0; d < AM_MAXR; d++) {
      int64_t v = ediv(a, d) * ediv(b, d);
      x->div[d] = v > AX_BIG ? AX_BIG : v;
      x->cnst[d] = gcd64(a->cnst[d], b->cnst[d]);
    }
    break;
  case DRK_TOP_CMP: {
    if (!a || !b) break;
    const char *p = drk_tile_op_attr_ident(op, "pred", "");
    for (int d = 0; d < AM_MAXR; d++) {
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
      for (int d = 0; d < AM_MAXR; d++) x->cnst[d] = AX_BIG;
      for (int i = 0; i < op->n_operands; i++) {
        const am_axis_t *o = ax_of(lc, op->operands[i]);
        if (!o || !drk_tile_type_same_shape(&op->operands[i]->type, &res->type)) {
          for (int d = 0; d < AM_MAXR; d++) x->cnst[d] = 1;
          break;
        }
        for (int d = 0; d < AM_MAXR; d++) x->cnst[d] = gcd64(x->cnst[d], o->cnst[d]);
      }
      if (op->code != DRK_TOP_SELECT && op->code != DRK_TOP_AND && op->code != DRK_TOP_OR &&
          op->code != DRK_TOP_DIV && op->code != DRK_TOP_REM && op->code != DRK_TOP_MAX &&
          op->code != DRK_TOP_MIN && op->code != DRK_TOP_CAST && op->code != DRK_TOP_NEG)
        for (int d = 0; d < AM_MAXR; d++) x->cnst[d] = 1;
    }
    break;
  }
  (void)one;
  lc->axis[res->id] = x;
}

static void ax_region(am_lc_t *lc, const drk_tile_region_t *r) {
  for (size_t i = 0; i < r->n_ops; i++) ax_op(lc, r->ops[i]);
}

/* ---- data movement ---- */
static LLVMValueRef mem_to_reg(am_lc_t *lc, drk_dtype_t t, LLVMValueRef v) {
  return t == DRK_DT_BOOL ? LLVMBuildICmp(lc->b, LLVMIntNE, v, LLVMConstInt(lc->i8, 0, 0), "") : v;
}
static LLVMValueRef reg_to_mem(am_lc_t *lc, drk_dtype_t t, LLVMValueRef v) {
  return t == DRK_DT_BOOL ? LLVMBuildZExt(lc->b, v, lc->i8, "") : v;
}

static LLVMBasicBlockRef am_block(am_lc_t *lc, const char *name) {
  return LLVMAppendBasicBlockInContext(lc->ctx, lc->fn, name);
}

static bool lower_load(am_lc_t *lc, const drk_tile_op_t *op) {
  const drk_tile_value_t *res = op->results[0];
  drk_dtype_t dt = res->type.dtype;
  am_dist_t D;
  if (!am_dist(lc, op, &res->type, &D)) return false;
  LLVMTypeRef mt = am_mem_type(lc, dt);
  if (!mt) return am_err(lc, op, "of dtype %s", drk_dtype_name(dt));
  int es = drk_dtype_bits(dt) / 8;
  am_val_t *p = am_get(lc, op->operands[0]);
  am_val_t *mk = op->n_operands > 1 ? am_get(lc, op->operands[1]) : NULL;
  am_val_t *ot = op->n_operands > 2 ? am_get(lc, op->operands[2]) : NULL;
  int f = am_fastest_dim(&res->type);
  int w = am_vec_width(&D, f, es, ax_of(lc, op->operands[0]), mk ? ax_of(lc, op->operands[1]) : NULL);
  am_val_t *x = am_val_new(lc, D.nregs);
  LLVMTypeRef vt = w > 1 ? LLVMVectorType(mt, (unsigned)w) : mt;
  for (int r = 0; r < D.nregs; r++) {
    int idx[AM_MAXR];
    am_reg_split(&D, r, idx);
    if (D.rank && idx[f] % w) continue;
    int regs[16];
    for (int i = 0; i < w; i++) {
      idx[f] += i;
      regs[i] = D.rank ? am_reg_join(&D, idx) : 0;
      idx[f] -= i;
    }
    LLVMValueRef ld_v;
    LLVMBasicBlockRef cur = LLVMGetInsertBlock(lc->b), bl = NULL, bj = NULL;
    if (mk) {
      bl = am_block(lc, "ld");
      bj = am_block(lc, "ld.join");
      LLVMBuildCondBr(lc->b, mk->r[r], bl, bj);
      LLVMPositionBuilderAtEnd(lc->b, bl);
    }
    ld_v = LLVMBuildLoad2(lc->b, vt, p->r[r], "");
    LLVMSetAlignment(ld_v, (unsigned)(w * es));
    LLVMValueRef vals[16];
    for (int i = 0; i < w; i++)
      vals[i] = mem_to_reg(lc, dt, w > 1 ? LLVMBuildExtractElement(lc->b, ld_v, am_i32(lc, i), "") : ld_v);
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
  am_set(lc, res, x);
  return true;
}

static bool lower_store(am_lc_t *lc, const drk_tile_op_t *op) {
  const drk_tile_value_t *pv = op->operands[0];
  drk_dtype_t dt = op->operands[1]->type.dtype;
  am_dist_t D;
  if (!am_dist(lc, op, &pv->type, &D)) return false;
  LLVMTypeRef mt = am_mem_type(lc, dt);
  if (!mt) return am_err(lc, op, "of dtype %s", drk_dtype_name(dt));
  int es = drk_dtype_bits(dt) / 8;
  am_val_t *p = am_get(lc, pv), *v = am_get(lc, op->operands[1]);
  am_val_t *mk = op->n_operands > 2 ? am_get(lc, op->operands[2]) : NULL;
  int f = am_fastest_dim(&pv->type);
  int w = am_vec_width(&D, f, es, ax_of(lc, pv), mk ? ax_of(lc, op->operands[2]) : NULL);
  /* Stores from replicated threads write equal values: harmless. */
  for (int r = 0; r < D.nregs; r++) {
    int idx[AM_MAXR];
    am_reg_split(&D, r, idx);
    if (D.rank && idx[f] % w) continue;
    LLVMBasicBlockRef bj = NULL;
    if (mk) {
      LLVMBasicBlockRef bs = am_block(lc, "st");
      bj = am_block(lc, "st.join");
      LLVMBuildCondBr(lc->b, mk->r[r], bs, bj);
      LLVMPositionBuilderAtEnd(lc->b, bs);
    }
    LLVMValueRef sv;
    if (w > 1) {
      sv = LLVMGetUndef(LLVMVectorType(mt, (unsigned)w));
      for (int i = 0; i < w; i++) {
        idx[f] += i;
        sv = LLVMBuildInsertElement(lc->b, sv, reg_to_mem(lc, dt, v->r[am_reg_join(&D, idx)]), am_i32(lc, i), "");
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
static bool lower_broadcast(am_lc_t *lc, const drk_tile_op_t *op) {
  const drk_tile_value_t *s = op->operands[0], *res = op->results[0];
  if (!drk_tile_layout_equal(s->type.layout, res->type.layout)) return am_err(lc, op, "across layouts");
  am_dist_t Ds, Dd;
  if (!am_dist(lc, op, &s->type, &Ds) || !am_dist(lc, op, &res->type, &Dd)) return false;
  am_val_t *sv = am_get(lc, s), *x = am_val_new(lc, Dd.nregs);
  for (int r = 0; r < Dd.nregs; r++) {
    int idx[AM_MAXR];
    am_reg_split(&Dd, r, idx);
    for (int d = 0; d < Dd.rank; d++)
      if (s->type.dims[d] == 1) idx[d] = 0;
      else if (Ds.n[d] != Dd.n[d]) return am_err(lc, op, "with mismatched distributions");
    x->r[r] = sv->r[am_reg_join(&Ds, idx)];
  }
  am_set(lc, res, x);
  return true;
}

static bool lower_expand_dims(am_lc_t *lc, const drk_tile_op_t *op) {
  const drk_tile_value_t *s = op->operands[0], *res = op->results[0];
  am_dist_t Ds, Dd;
  if (!am_dist(lc, op, &s->type, &Ds) || !am_dist(lc, op, &res->type, &Dd)) return false;
  if (Ds.nregs != Dd.nregs) return am_err(lc, op, "with mismatched distributions");
  am_val_t *sv = am_get(lc, s), *x = am_val_new(lc, Dd.nregs);
  for (int r = 0; r < Dd.nregs; r++) x->r[r] = sv->r[r];
  am_set(lc, res, x);
  return true;
}

static const drk_tile_type_t *ty(const drk_tile_value_t *v) { return &v->type; }

static bool lower_elementwise(am_lc_t *lc, const drk_tile_op_t *op) {
  const drk_tile_value_t *res = op->results[0];
  int n = res->type.kind == DRK_TT_TILE ? 0 : 1;
  if (!n) {
    am_dist_t D;
    if (!am_dist(lc, op, ty(res), &D)) return false;
    n = D.nregs;
  }
  am_val_t *x = am_val_new(lc, n);
  am_val_t *o[3] = {0};
  for (int i = 0; i < op->n_operands && i < 3; i++) {
    o[i] = am_get(lc, op->operands[i]);
    if (o[i]->n != n) return am_err(lc, op, "with operands of different distributions");
  }
  drk_dtype_t t = op->operands[op->code == DRK_TOP_SELECT ? 1 : 0]->type.dtype;
  for (int r = 0; r < n; r++) {
    LLVMValueRef v = NULL;
    switch (op->code) {
    case DRK_TOP_SELECT: v = LLVMBuildSelect(lc->b, o[0]->r[r], o[1]->r[r], o[2]->r[r], ""); break;
    case DRK_TOP_CMP: v = am_cmp(lc, op, t, drk_tile_op_attr_ident(op, "pred", "eq"), o[0]->r[r], o[1]->r[r]); break;
    case DRK_TOP_CAST:
      v = am_cast(lc, op, t, res->type.dtype, o[0]->r[r],
                  strcmp(drk_tile_op_attr_ident(op, "rounding", "rn"), "rz") == 0);
      break;
    default:
      if (drk_tile_op_info(op->code)->flags & DRK_TOPF_EWB) v = am_ew_binary(lc, op, t, o[0]->r[r], o[1]->r[r]);
      else if (drk_tile_op_info(op->code)->flags & DRK_TOPF_EWU) v = am_ew_unary(lc, op, t, o[0]->r[r]);
      break;
    }
    if (!v) return lc->ok ? am_err(lc, op, "on %s", drk_dtype_name(t)) : false;
    x->r[r] = v;
  }
  am_set(lc, res, x);
  return true;
}

static bool lower_addptr(am_lc_t *lc, const drk_tile_op_t *op) {
  const drk_tile_value_t *res = op->results[0];
  am_val_t *p = am_get(lc, op->operands[0]), *o = am_get(lc, op->operands[1]);
  if (p->n != o->n) return am_err(lc, op, "with operands of different distributions");
  LLVMTypeRef et = am_mem_type(lc, res->type.dtype);
  if (!et) return am_err(lc, op, "to %s", drk_dtype_name(res->type.dtype));
  am_val_t *x = am_val_new(lc, p->n);
  for (int r = 0; r < p->n; r++) {
    LLVMValueRef idx = o->r[r];
    x->r[r] = LLVMBuildGEP2(lc->b, et, p->r[r], &idx, 1, "");
  }
  am_set(lc, res, x);
  return true;
}

static bool lower_splat_const_range(am_lc_t *lc, const drk_tile_op_t *op) {
  const drk_tile_value_t *res = op->results[0];
  am_dist_t D;
  if (!am_dist(lc, op, ty(res), &D)) return false;
  am_val_t *x = am_val_new(lc, D.nregs);
  LLVMValueRef c = NULL;
  if (op->code == DRK_TOP_CONSTANT) {
    c = am_const(lc, res->type.dtype, drk_tile_op_attr(op, "value"));
    if (!c) return am_err(lc, op, "of dtype %s", drk_dtype_name(res->type.dtype));
  } else if (op->code == DRK_TOP_SPLAT) {
    c = am_get(lc, op->operands[0])->r[0];
  }
  int64_t start = drk_tile_op_attr_int(op, "start", 0);
  for (int r = 0; r < D.nregs; r++) {
    if (op->code == DRK_TOP_MAKE_RANGE)
      x->r[r] = LLVMBuildAdd(lc->b, am_coord(lc, &D, r, 0), am_i32(lc, start), "");
    else
      x->r[r] = c;
  }
  am_set(lc, res, x);
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
LLVMValueRef am_smem_elem_addr(am_lc_t *lc, LLVMValueRef base, const drk_tile_type_t *st,
                               LLVMValueRef *coords) {
  const drk_tile_layout_t *L = st->layout;
  int lr = L->rank, first = st->rank - lr;
  int64_t es = drk_dtype_bits(st->dtype) / 8, stride = es;
  LLVMValueRef off = am_i32(lc, 0);
  /* A swizzled fastest dim longer than the swizzle is split into chunks of `swizzle` bytes,
   * each a [rows][swizzle] block (what TMA writes box by box, and a canonical wgmma layout). */
  int f = L->order[0];
  int64_t ce = L->swizzle ? L->swizzle / es : 0, rest = 1;
  bool chunked = ce > 0 && st->dims[first + f] > ce;
  for (int i = 0; i < lr; i++) {
    int d = L->order[i];
    LLVMValueRef cd = coords[d];
    if (chunked && i == 0) cd = LLVMBuildAnd(lc->b, cd, am_i32(lc, ce - 1), "");
    off = LLVMBuildAdd(lc->b, off, LLVMBuildMul(lc->b, cd, am_i32(lc, stride), ""), "");
    stride *= chunked && i == 0 ? ce : st->dims[first + d];
    if (i) rest *= st->dims[first + d];
  }
  if (chunked) {
    LLVMValueRef ch = LLVMBuildUDiv(lc->b, coords[f], am_i32(lc, ce), "");
    off = LLVMBuildAdd(lc->b, off, LLVMBuildMul(lc->b, ch, am_i32(lc, rest * L->swizzle), ""), "");
  }
  if (L->swizzle) {
    int64_t m = L->swizzle / 16 - 1;
    LLVMValueRef row = LLVMBuildAnd(lc->b, LLVMBuildLShr(lc->b, off, am_i32(lc, 7), ""), am_i32(lc, m), "");
    off = LLVMBuildXor(lc->b, off, LLVMBuildShl(lc->b, row, am_i32(lc, 4), ""), "");
  }
  LLVMValueRef o64 = LLVMBuildZExt(lc->b, off, lc->i64, "");
  return LLVMBuildGEP2(lc->b, lc->i8, base, &o64, 1, "");
}

static bool lower_local_alloc(am_lc_t *lc, const drk_tile_op_t *op) {
  int64_t off = drk_tile_op_attr_int(op, "offset", 0);
  LLVMValueRef base = lds_base(lc);
  LLVMValueRef idx = am_i64(lc, off);
  am_val_t *x = am_val_new(lc, 1);
  x->r[0] = LLVMBuildGEP2(lc->b, lc->i8, base, &idx, 1, "smem");
  am_set(lc, op->results[0], x);
  return true;
}

static bool lower_memdesc_index(am_lc_t *lc, const drk_tile_op_t *op) {
  const drk_tile_value_t *res = op->results[0];
  LLVMValueRef base = am_get(lc, op->operands[0])->r[0];
  LLVMValueRef i = am_get(lc, op->operands[1])->r[0];
  if (LLVMTypeOf(i) != lc->i32) i = LLVMBuildTrunc(lc->b, i, lc->i32, "");
  int64_t sb = smem_bytes(&res->type);
  LLVMValueRef o = LLVMBuildZExt(lc->b, LLVMBuildMul(lc->b, i, am_i32(lc, sb), ""), lc->i64, "");
  am_val_t *x = am_val_new(lc, 1);
  x->r[0] = LLVMBuildGEP2(lc->b, lc->i8, base, &o, 1, "");
  am_set(lc, res, x);
  return true;
}

/* ---- control flow ---- */
static bool lower_region(am_lc_t *lc, const drk_tile_region_t *r, const drk_tile_op_t **out_yield);

static bool lower_for(am_lc_t *lc, const drk_tile_op_t *op) {
  const drk_tile_region_t *body = op->regions[0];
  int nc = op->n_operands - 3;
  LLVMValueRef lb = am_get(lc, op->operands[0])->r[0], ub = am_get(lc, op->operands[1])->r[0];
  LLVMValueRef step = am_get(lc, op->operands[2])->r[0];
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(lc->b);
  LLVMBasicBlockRef hdr = am_block(lc, "for.hdr"), bb = am_block(lc, "for.body"), ex = am_block(lc, "for.exit");
  LLVMBuildBr(lc->b, hdr);
  LLVMPositionBuilderAtEnd(lc->b, hdr);
  LLVMValueRef iv = LLVMBuildPhi(lc->b, LLVMTypeOf(lb), "iv");
  am_val_t *ivv = am_val_new(lc, 1);
  ivv->r[0] = iv;
  am_set(lc, body->args[0], ivv);
  am_val_t **phis = drk_arena_alloc(lc->a, sizeof(am_val_t *) * (size_t)(nc ? nc : 1));
  for (int i = 0; i < nc; i++) {
    am_val_t *in = am_get(lc, op->operands[3 + i]);
    phis[i] = am_val_new(lc, in->n);
    if (in->n == 1 && op->operands[3 + i]->type.kind == DRK_TT_SMEM) {
      phis[i]->r[0] = LLVMBuildPhi(lc->b, lc->p3, "");
    } else {
      for (int r = 0; r < in->n; r++) phis[i]->r[r] = LLVMBuildPhi(lc->b, LLVMTypeOf(in->r[r]), "");
    }
    for (int r = 0; r < in->n; r++) LLVMAddIncoming(phis[i]->r[r], &in->r[r], &pre, 1);
    am_set(lc, body->args[1 + i], phis[i]);
  }
  LLVMAddIncoming(iv, &lb, &pre, 1);
  LLVMBuildCondBr(lc->b, LLVMBuildICmp(lc->b, LLVMIntSLT, iv, ub, ""), bb, ex);
  LLVMPositionBuilderAtEnd(lc->b, bb);
  const drk_tile_op_t *y = NULL;
  if (!lower_region(lc, body, &y)) return false;
  LLVMValueRef next = LLVMBuildAdd(lc->b, iv, step, "iv.next");
  LLVMBasicBlockRef latch = LLVMGetInsertBlock(lc->b);
  for (int i = 0; i < nc && y; i++) {
    am_val_t *yv = am_get(lc, y->operands[i]);
    if (yv->n != phis[i]->n) return am_err(lc, op, "with a yield of another distribution");
    for (int r = 0; r < yv->n; r++) LLVMAddIncoming(phis[i]->r[r], &yv->r[r], &latch, 1);
  }
  LLVMAddIncoming(iv, &next, &latch, 1);
  LLVMBuildBr(lc->b, hdr);
  LLVMPositionBuilderAtEnd(lc->b, ex);
  for (int i = 0; i < op->n_results; i++) am_set(lc, op->results[i], phis[i]);
  return true;
}

static bool lower_if(am_lc_t *lc, const drk_tile_op_t *op) {
  LLVMValueRef c = am_get(lc, op->operands[0])->r[0];
  LLVMBasicBlockRef bt = am_block(lc, "then"), be = am_block(lc, "else"), bj = am_block(lc, "endif");
  LLVMBuildCondBr(lc->b, c, bt, be);
  const drk_tile_op_t *yt = NULL, *ye = NULL;
  LLVMPositionBuilderAtEnd(lc->b, bt);
  if (!lower_region(lc, op->regions[0], &yt)) return false;
  LLVMBasicBlockRef et = LLVMGetInsertBlock(lc->b);
  LLVMBuildBr(lc->b, bj);
  LLVMPositionBuilderAtEnd(lc->b, be);
  if (op->n_regions > 1 && !lower_region(lc, op->regions[1], &ye)) return false;
  LLVMBasicBlockRef ee = LLVMGetInsertBlock(lc->b);
  LLVMBuildBr(lc->b, bj);
  LLVMPositionBuilderAtEnd(lc->b, bj);
  for (int i = 0; i < op->n_results; i++) {
    if (!yt || !ye) return am_err(lc, op, "with results but no else region");
    am_val_t *a = am_get(lc, yt->operands[i]), *b = am_get(lc, ye->operands[i]);
    if (a->n != b->n) return am_err(lc, op, "with yields of different distributions");
    am_val_t *x = am_val_new(lc, a->n);
    for (int r = 0; r < a->n; r++) {
      x->r[r] = LLVMBuildPhi(lc->b, LLVMTypeOf(a->r[r]), "");
      LLVMValueRef iv[2] = {a->r[r], b->r[r]};
      LLVMBasicBlockRef ib[2] = {et, ee};
      LLVMAddIncoming(x->r[r], iv, ib, 2);
    }
    am_set(lc, op->results[i], x);
  }
  return true;
}

static bool lower_barrier(am_lc_t *lc, const drk_tile_op_t *op) {
  if (drk_tile_op_attr(op, "id")) return am_err(lc, op, "with an id (named barriers do not exist on AMD GPUs)");
  am_barrier(lc);
  return true;
}

static bool lower_op(am_lc_t *lc, const drk_tile_op_t *op) {
  const drk_tile_op_info_t *info = drk_tile_op_info(op->code);
  switch (op->code) {
  case DRK_TOP_PROGRAM_ID:
  case DRK_TOP_NUM_PROGRAMS: {
    int ax = (int)drk_tile_op_attr_int(op, "axis", 0);
    am_val_t *x = am_val_new(lc, 1);
    x->r[0] = op->code == DRK_TOP_PROGRAM_ID ? drk_amdgpu_workgroup_id(lc->cg, ax) : drk_amdgpu_num_workgroups(lc->cg, ax);
    if (op->results[0]->type.dtype == DRK_DT_I64) x->r[0] = LLVMBuildZExt(lc->b, x->r[0], lc->i64, "");
    am_set(lc, op->results[0], x);
    return true;
  }
  case DRK_TOP_CONSTANT:
  case DRK_TOP_SPLAT:
  case DRK_TOP_MAKE_RANGE:
    if (op->results[0]->type.kind != DRK_TT_TILE) {
      am_val_t *x = am_val_new(lc, 1);
      x->r[0] = am_const(lc, op->results[0]->type.dtype, drk_tile_op_attr(op, "value"));
      if (!x->r[0]) return am_err(lc, op, "of dtype %s", drk_dtype_name(op->results[0]->type.dtype));
      am_set(lc, op->results[0], x);
      return true;
    }
    return lower_splat_const_range(lc, op);
  case DRK_TOP_BROADCAST: return lower_broadcast(lc, op);
  case DRK_TOP_EXPAND_DIMS: return lower_expand_dims(lc, op);
  case DRK_TOP_RESHAPE:
  case DRK_TOP_CONVERT_LAYOUT: return am_lower_relayout(lc, op);
  case DRK_TOP_ADDPTR: return lower_addptr(lc, op);
  case DRK_TOP_LOAD: return lower_load(lc, op);
  case DRK_TOP_STORE: return lower_store(lc, op);
  case DRK_TOP_CP_ASYNC: return am_lower_cp_async(lc, op);
  case DRK_TOP_CP_ASYNC_COMMIT:
  case DRK_TOP_CP_ASYNC_WAIT: return true; /* cp_async copies synchronously */
  case DRK_TOP_LOCAL_ALLOC: return lower_local_alloc(lc, op);
  case DRK_TOP_MEMDESC_INDEX: return lower_memdesc_index(lc, op);
  case DRK_TOP_LOCAL_LOAD: return am_lower_local_load(lc, op);
  case DRK_TOP_LOCAL_STORE: return am_lower_local_store(lc, op);
  case DRK_TOP_DOT: return am_lower_dot(lc, op);
  case DRK_TOP_TMA_LOAD: case DRK_TOP_TMA_STORE: case DRK_TOP_TMA_STORE_WAIT:
  case DRK_TOP_MBARRIER_INIT: case DRK_TOP_MBARRIER_ARRIVE: case DRK_TOP_MBARRIER_EXPECT_TX:
  case DRK_TOP_MBARRIER_WAIT: case DRK_TOP_FENCE: case DRK_TOP_SETMAXNREG:
  case DRK_TOP_WGMMA_FENCE: case DRK_TOP_WGMMA_COMMIT: case DRK_TOP_WGMMA_WAIT: case DRK_TOP_WARP_GROUP:
    return am_err(lc, op, "(an NVIDIA Hopper op; the AMDGPU backend has no equivalent: lower for sm_80)");
  case DRK_TOP_REDUCE: return am_lower_reduce(lc, op);
  case DRK_TOP_FOR: return lower_for(lc, op);
  case DRK_TOP_IF: return lower_if(lc, op);
  case DRK_TOP_YIELD:
  case DRK_TOP_RETURN: return true;
  case DRK_TOP_BARRIER: return lower_barrier(lc, op);
  case DRK_TOP_ADD: case DRK_TOP_SUB: case DRK_TOP_MUL: case DRK_TOP_DIV: case DRK_TOP_REM:
  case DRK_TOP_MAX: case DRK_TOP_MIN: case DRK_TOP_AND: case DRK_TOP_OR: case DRK_TOP_SELECT:
  case DRK_TOP_CMP: case DRK_TOP_CAST:
    return lower_elementwise(lc, op);
  default:
    if (info->flags & (DRK_TOPF_EWB | DRK_TOPF_EWU)) return lower_elementwise(lc, op);
    return am_err(lc, op, "(not supported by the AMDGPU lowering yet)");
  }
}

static bool lower_region(am_lc_t *lc, const drk_tile_region_t *r, const drk_tile_op_t **out_yield) {
  for (size_t i = 0; i < r->n_ops; i++) {
    const drk_tile_op_t *op = r->ops[i];
    if (op->code == DRK_TOP_YIELD) *out_yield = op;
    if (!lower_op(lc, op)) {
      if (lc->ok) am_err(lc, op, "(internal: failed without a message)");
      return false;
    }
  }
  return true;
}

/* ---- entry points ---- */
static LLVMTypeRef param_type(am_lc_t *lc, const drk_tile_type_t *t) {
  if (t->kind != DRK_TT_SCALAR) return NULL;
  if (t->is_ptr) return lc->p1;
  return am_reg_type(lc, t->dtype, false);
}

static bool lower_kernel(drk_amdgpu_cg_t *cg, const drk_tile_module_t *m, const drk_tile_kernel_t *k, drk_diag_t *d) {
  am_lc_t lc;
  memset(&lc, 0, sizeof lc);
  lc.cg = cg, lc.b = cg->b, lc.ctx = cg->ctx, lc.m = m, lc.k = k, lc.d = d, lc.ok = true;
  lc.a = drk_arena_create();
  lc.i1 = LLVMInt1TypeInContext(cg->ctx), lc.i8 = LLVMInt8TypeInContext(cg->ctx);
  lc.i16 = LLVMInt16TypeInContext(cg->ctx), lc.i32 = LLVMInt32TypeInContext(cg->ctx);
  lc.i64 = LLVMInt64TypeInContext(cg->ctx), lc.f16 = LLVMHalfTypeInContext(cg->ctx);
  lc.bf16 = LLVMBFloatTypeInContext(cg->ctx), lc.f32 = LLVMFloatTypeInContext(cg->ctx);
  lc.f64 = LLVMDoubleTypeInContext(cg->ctx), lc.vd = LLVMVoidTypeInContext(cg->ctx);
  lc.p0 = LLVMPointerTypeInContext(cg->ctx, 0), lc.p1 = LLVMPointerTypeInContext(cg->ctx, DRK_AMDGPU_AS_GLOBAL);
  lc.p3 = LLVMPointerTypeInContext(cg->ctx, DRK_AMDGPU_AS_LDS);
  lc.n_ids = m->next_value_id + 1;
  lc.vals = drk_arena_alloc(lc.a, sizeof(am_val_t *) * lc.n_ids);
  memset(lc.vals, 0, sizeof(am_val_t *) * lc.n_ids);
  lc.axis = drk_arena_alloc(lc.a, sizeof(am_axis_t *) * lc.n_ids);
  memset(lc.axis, 0, sizeof(am_axis_t *) * lc.n_ids);
  bool ok = false;
  LLVMTypeRef pts[64];
  if (k->n_params > 64) {
    drk_diag_error(d, k->loc, "amdgpu: cannot lower kernel '%s' with more than 64 parameters", k->name);
    goto done;
  }
  if (k->cluster[0] * k->cluster[1] * k->cluster[2] != 1) {
    drk_diag_error(d, k->loc, "amdgpu: cannot lower kernel '%s': clusters do not exist on AMD GPUs", k->name);
    goto done;
  }
  if (k->block < 1 || k->block > 1024) {
    drk_diag_error(d, k->loc, "amdgpu: cannot lower kernel '%s': block of %lld threads (AMD GPUs allow 1..1024)",
                   k->name, (long long)k->block);
    goto done;
  }
  if (k->smem > (int64_t)cg->arch->lds_bytes) {
    drk_diag_error(d, k->loc, "amdgpu: cannot lower kernel '%s': %lld bytes of shared memory exceed the %u bytes of LDS of %s",
                   k->name, (long long)k->smem, cg->arch->lds_bytes, cg->arch->name);
    goto done;
  }
  for (int i = 0; i < k->n_params; i++) {
    pts[i] = param_type(&lc, &k->params[i]->type);
    if (!pts[i]) {
      drk_diag_error(d, k->params[i]->loc, "amdgpu: cannot lower parameter '%%%s' of this type%s", k->params[i]->name,
                     k->params[i]->type.kind == DRK_TT_TMADESC ? " (TMA descriptors are NVIDIA-only)" : "");
      goto done;
    }
  }
  lc.fn = drk_amdgpu_kernel_add(cg, k->name, pts, (unsigned)k->n_params);
  drk_amdgpu_kernel_set_workgroup_size(cg, lc.fn, (int)k->block, (int)k->block);
  LLVMPositionBuilderAtEnd(cg->b, LLVMAppendBasicBlockInContext(cg->ctx, lc.fn, "entry"));
  for (int i = 0; i < k->n_params; i++) {
    const drk_tile_value_t *p = k->params[i];
    am_val_t *x = am_val_new(&lc, 1);
    x->r[0] = LLVMGetParam(lc.fn, (unsigned)i);
    LLVMSetValueName2(x->r[0], p->name, strlen(p->name));
    am_set(&lc, p, x);
    am_axis_t *a = ax_new(&lc);
    int64_t es = p->type.is_ptr ? drk_dtype_bits(p->type.dtype) / 8 : 1;
    for (int dd = 0; dd < AM_MAXR; dd++) a->div[dd] = es < 1 ? 1 : es;
    for (int j = 0; j < k->param_n_attrs[i]; j++) {
      const drk_tile_attr_t *at = &k->param_attrs[i][j];
      if ((strcmp(at->name, "align") == 0 || strcmp(at->name, "div") == 0) && at->kind == DRK_TA_INT)
        for (int dd = 0; dd < AM_MAXR; dd++) a->div[dd] = at->i;
    }
    if (is_intlike(&p->type)) lc.axis[p->id] = a;
  }
  ax_region(&lc, k->body);
  const drk_tile_op_t *y = NULL;
  if (!lower_region(&lc, k->body, &y)) goto done;
  LLVMBuildRetVoid(cg->b);
  ok = lc.ok;
  if (ok && lc.scratch && (uint64_t)lc.scratch_bytes + (uint64_t)k->smem > cg->arch->lds_bytes) {
    /* LLVM would stop on "local memory limit exceeded": report it here, located */
    drk_diag_error(d, k->loc, "amdgpu: cannot lower kernel '%s': %lld bytes of shared memory plus %u of scratch exceed the %u bytes of LDS",
                   k->name, (long long)k->smem, lc.scratch_bytes, cg->arch->lds_bytes);
    ok = false;
  }
done:
  if (!ok && lc.fn) LLVMDeleteFunction(lc.fn);
  if (ok) scratch_finish(&lc);
  else if (lc.scratch) LLVMDeleteGlobal(lc.scratch);
  if (!ok && lc.lds) LLVMDeleteGlobal(lc.lds);
  drk_arena_destroy(lc.a);
  return ok;
}

LLVMModuleRef drk_amdgpu_lower_module(const drk_tile_module_t *tm, LLVMContextRef ctx, const char *arch,
                                      drk_diag_t *d) {
  const drk_amdgpu_arch_t *ar = drk_amdgpu_arch_find(arch, d);
  if (!ar) return NULL;
  LLVMModuleRef mod = drk_amdgpu_module_create(ctx, tm->source ? tm->source : "tile", d);
  if (!mod) return NULL;
  drk_amdgpu_cg_t cg = {ctx, mod, LLVMCreateBuilderInContext(ctx), ar};
  bool ok = true;
  for (size_t i = 0; i < tm->n_kernels; i++) ok &= lower_kernel(&cg, tm, tm->kernels[i], d);
  LLVMDisposeBuilder(cg.b);
  char *msg = NULL;
  if (ok && LLVMVerifyModule(mod, LLVMReturnStatusAction, &msg)) {
    drk_diag_error(d, drk_loc_none, "amdgpu: internal error: lowering produced invalid LLVM IR: %.2000s",
                   msg ? msg : "?");
    ok = false;
  }
  LLVMDisposeMessage(msg);
  if (!ok) {
    LLVMDisposeModule(mod);
    return NULL;
  }
  return mod;
}
