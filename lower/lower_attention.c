/* Lowering of an ATTENTION group (lower/fuse.h, docs/fusion.md) to one flash-attention kernel.
 *
 * One program per (BLOCK_M query rows, batch coordinates): grid (last batch dim, product of
 * the other batch dims, ceil(Sq / BM)), so that programs start row block by row block. Q's
 * rows are loaded once (chunks of KC columns, through shared memory into the dot operand
 * layout), then a loop over key blocks of BN (kv_loop) carries the running row max m, the
 * running sum l and the output accumulators (chunks of VC columns, f32):
 *   K^T and V blocks: cp_async into a ring of 2 slots, block b + 1 issued at the top of step
 *       b (after its one barrier) so that its copy overlaps step b's math (1 slot, copied
 *       and awaited at the top of each step, where 2 do not fit the target's shared memory)
 *   S = Q.K^T (dot, f32 accumulator, summed over the KC chunks; operands by local_load)
 *   S = the group's steps (scale, additive masks, Where masks, casts) on S in f32, reading
 *       each mask at the block's (row, key) coordinates; keys past Sk get -inf
 *   m' = max(m, rowmax(S)); a = exp(m - m'); P = exp(S - m'); l = l a + rowsum(P)
 *       (16-bit inputs: exp(x) = exp2 {approx} of x log2 e)
 *   O = O a + P.V (P rounded to the input dtype, local_store into a swizzled buffer, one
 *       barrier, local_load into the dot operand layout)
 * with m' read as 0 while it is -inf (a row with only -inf scores so far) so that no
 * exp(-inf - -inf) appears. At the end O / l is stored (rows < Sq, columns < Dv) through the
 * output view. A row whose scores are all -inf ends with l = 0 and O = 0/0 = NaN, which is
 * what Softmax gives it in the interpreter; when the group ends in torch's Where(IsNaN(P), 0,
 * P) (zero_nan_rows) a row whose l is not > 0 (0, or NaN from a NaN/+inf score: exactly the
 * rows Softmax leaves NaN) stores 0 instead. With a causal mask (fuse.h: causal_step) the
 * loop stops at the block holding the last kept key of the program's last row, the last row
 * block runs first (the longest programs), and the key blocks lie in two loops on one ring:
 * those at or below the diagonal of the program's first row skip the causal step and the
 * Sk mask, the rest apply them (a causal Where compares j <= i + t instead of loading its
 * mask).
 *
 * f16/bf16: dot kind mma_sync (mma_sync{wpc = [W, 1]}: each warp owns 16 rows, so row
 * reductions stay inside a warp; the AMDGPU backend places the same layouts as MFMA), BN =
 * 64, KC = VC = 16, BM = 64 with W = 4 warps, or BM = 128 with 8 warps when the grid has
 * WIDE_WAVES programs of 128 rows per multiprocessor of the target and the buffers fit its
 * shared memory (the same registers per thread, half the K/V copies per query row). Q is
 * kept in registers when D <= 64 (else re-read from shared memory for every block). f32: dot
 * kind fma (blocked accumulator, warps along rows), BM = BN = 32, KC = 8, VC = 16, Q re-read.
 * sm_90a (16-bit, head dims <= 256, each of Q, K, V with its head dim contiguous in memory):
 * dot kind wgmma on shared-memory operands, one warpgroup (4 warps, BM = BN = 64), KC = VC =
 * 64: every chunk is one 128-byte swizzled [64 x 64] block, the canonical wgmma layout (K^T
 * chunks K-major, V chunks N-major); S is one chain of wgmmas over the Q/K^T chunks, P goes
 * to its buffer by local_store, and O's chunks are one wgmma each; each chain is committed
 * and waited for at once. fence.proxy.async after the cp_async waits, Q's stores and P's
 * store makes those generic-proxy writes visible to wgmma before the barrier that follows.
 * Head dims are covered by ceil(D / KC) (ceil(Dv / VC)) chunks, the last one zero-filled
 * past D; at most 128. Shared buffers are 128-byte swizzled, each with its fastest dim the
 * one contiguous in global memory, so the copies are 16-byte cp.async (synchronous copies on
 * gfx942) and the operand loads ldmatrix (.trans for V stored d-fastest) on NVIDIA.
 *
 * Requires: a group fuse_attention.c matched (every view and step in group->attn).
 * Member views that alias their input (Reshape and kin) are declared aliases; so are a member
 * Split's outputs (of its input: they are never written nor read, the kernel reads the
 * input through its views, so they need no bytes of their own).
 * Guarantees: the kernel computes the group's result up to rounding (softmax in f32, P in
 * the input dtype as the unfused graph rounds it, O accumulated in f32). */
#include <math.h>
#include <string.h>

#include "lower/lower_internal.h"

#define BIN(op, a, b) lw_bin(c, DRK_TOP_##op, (a), (b))
#define UN(op, a) lw_un(c, DRK_TOP_##op, (a))

#define SWZ 128 /* shared buffers: 128-byte XOR swizzle (ldmatrix-style bank spreading) */
#define MAX_PARAMS 64
#define WIDE_WAVES 2 /* BM = 128 needs this many programs of 128 rows per multiprocessor */

typedef struct ak {
  drk_lctx_t *c;
  const drk_fusion_attention_t *at;
  bool mma;
  bool wg;     /* sm_90a: dots as wgmma on shared-memory operands (one warpgroup) */
  bool q_regs; /* Q stays in registers (else re-read from shared memory for every block) */
  int64_t BM, BN, KC, VC;
  int nkc, nvc; /* chunks of KC (VC) columns covering D (Dv) */
  drk_dtype_t t; /* Q, K, V, P */
  const drk_tile_layout_t *acc, *opA, *opB, *Lr, *Lc, *shr, *shc;
  const drk_value_t *pv[MAX_PARAMS];
  tv_t *pt[MAX_PARAMS];
  int np;
  int warps; /* 4, or 8 with BM = 128 (each warp 16 rows) */
  int ns;    /* ring slots of K^T and V blocks: 2 (double buffering), 1 where 2 do not fit */
  tv_t *bc[DRK_FUSION_MAX_RANK]; /* batch coordinates (scalars) */
} ak_t;

static int64_t align_up(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

static tv_t *param_of(ak_t *K, const drk_value_t *v) {
  for (int i = 0; i < K->np; i++)
    if (K->pv[i] == v) return K->pt[i];
  return NULL;
}

static void add_param(ak_t *K, const drk_value_t *v, const char *name) {
  if (!v || param_of(K, v)) return;
  DRK_ASSERT(K->np < MAX_PARAMS);
  K->pv[K->np] = v;
  K->pt[K->np] = lw_param_buf(K->c, v, drk_arena_printf(K->c->m->arena, "%s%d", name, K->np));
  K->np++;
}

/* sum of view parts of dim d at index x (a scalar or tile of the index dtype); NULL: 0 */
static tv_t *dim_off(ak_t *K, const drk_fusion_view_t *w, int d, tv_t *x) {
  drk_lctx_t *c = K->c;
  tv_t *sum = NULL;
  bool scalar = x->type.kind == DRK_TT_SCALAR;
  for (int i = 0; i < w->n_parts[d]; i++) {
    const drk_fusion_part_t *p = &w->parts[d][i];
    tv_t *t = x;
    if (p->div > 1) t = BIN(DIV, t, scalar ? lw_sci(c, c->it, p->div) : lw_ci(c, t, p->div));
    if (p->div * p->mod < w->dims[d]) t = BIN(REM, t, scalar ? lw_sci(c, c->it, p->mod) : lw_ci(c, t, p->mod));
    if (p->stride != 1) t = BIN(MUL, t, scalar ? lw_sci(c, c->it, p->stride) : lw_ci(c, t, p->stride));
    sum = sum ? BIN(ADD, sum, t) : t;
  }
  return sum;
}

/* the view's offset plus the part of its batch coordinates (a scalar) */
static tv_t *batch_base(ak_t *K, const drk_fusion_view_t *w) {
  tv_t *b = w->offset ? lw_sci(K->c, K->c->it, w->offset) : NULL;
  for (int d = 0; d < K->at->nb; d++) {
    tv_t *o = dim_off(K, w, d, K->bc[d]);
    if (o) b = b ? lw_bin(K->c, DRK_TOP_ADD, b, o) : o;
  }
  return b ? b : lw_sci(K->c, K->c->it, 0);
}

static tv_t *range_at(ak_t *K, tv_t *start, int64_t n, const drk_tile_layout_t *l) {
  drk_lctx_t *c = K->c;
  tv_t *r = lw_cast(c, lw_range(c, n, l), c->it);
  return start ? BIN(ADD, lw_splat(c, start, &r->type), r) : r;
}

/* Element offsets of the [R, C] tile of view w in layout L at rows ri, cols ci (slices of L,
 * indices along view dims dr, dc), base added. */
static tv_t *offs2(ak_t *K, const drk_fusion_view_t *w, tv_t *base, int dr, tv_t *ri, int dc, tv_t *ci,
                   const drk_tile_layout_t *L) {
  drk_lctx_t *c = K->c;
  int64_t R = ri->type.dims[0], C = ci->type.dims[0];
  tv_t *ro = dim_off(K, w, dr, ri), *co = dim_off(K, w, dc, ci);
  tv_t *r = lw_splat(c, base, &ri->type);
  if (ro) r = BIN(ADD, ro, r);
  tv_t *o = lw_bcast_row(c, r, L, R, C);
  return co ? BIN(ADD, o, lw_bcast_col(c, co, L, R, C)) : o;
}

/* rows < nr (when need_r) and cols < nc (when need_c) over [R, C] in L; NULL: no mask */
static tv_t *mask2(ak_t *K, tv_t *ri, int64_t nr, bool need_r, tv_t *ci, int64_t nc, bool need_c,
                   const drk_tile_layout_t *L) {
  drk_lctx_t *c = K->c;
  int64_t R = ri->type.dims[0], C = ci->type.dims[0];
  tv_t *m = NULL;
  if (need_r) m = lw_bcast_row(c, lw_cmp(c, "lt", ri, lw_ci(c, ri, nr)), L, R, C);
  if (need_c) m = lw_and_mask(c, m, lw_bcast_col(c, lw_cmp(c, "lt", ci, lw_ci(c, ci, nc)), L, R, C));
  return m;
}

/* A blocked layout for an [R, C] global load whose dim `fast` is contiguous in memory: 16
 * bytes per thread along it, the warps along the other dim. A chunk smaller than the layout
 * (8 warps over a 16 x 64 chunk) is replicated: equal copies from two threads, harmless. */
static const drk_tile_layout_t *load_layout(ak_t *K, int64_t R, int64_t C, int fast) {
  int64_t ext[2] = {R, C};
  int64_t vec = 16 / (drk_dtype_bits(K->t) / 8);
  if (vec > ext[fast]) vec = ext[fast];
  int64_t lanes = ext[fast] / vec;
  if (lanes > 32) lanes = 32;
  int spt[2], tpw[2], wpc[2], order[2] = {fast, 1 - fast};
  spt[fast] = (int)vec, spt[1 - fast] = 1;
  tpw[fast] = (int)lanes, tpw[1 - fast] = (int)(32 / lanes);
  wpc[fast] = 1, wpc[1 - fast] = K->warps;
  return drk_tile_layout_blocked(K->c->m, 2, spt, tpw, wpc, order);
}

/* Which of the view's dims (dr: tile rows, dc: tile cols) is contiguous in memory: 1 for dc,
 * 0 for dr, default `dflt`. */
static int fast_dim(const drk_fusion_view_t *w, int dr, int dc, int dflt) {
  for (int k = 0; k < 2; k++) {
    int d = k ? dc : dr;
    if (w->n_parts[d] == 1 && w->parts[d][0].stride == 1 && w->parts[d][0].div == 1) return k;
  }
  return dflt;
}

/* One side of a chunk: `n` indices from `start` along view dim `d`, valid below `lim`;
 * `edge`: some of them may be at or past lim (a mask is needed). */
typedef struct span {
  int d;
  tv_t *start;
  int64_t n, lim;
  bool edge;
} span_t;

/* Copies the [rows.n, cols.n] chunk of operand view w into smem buffer sm: a masked load +
 * local_store, or (async) a cp_async whose masked-off elements are zero-filled, like the
 * load's `other` 0. */
static void chunk_to_smem(ak_t *K, const drk_fusion_view_t *w, tv_t *base, span_t rows, span_t cols, int dflt_fast,
                          tv_t *sm, bool async) {
  drk_lctx_t *c = K->c;
  const drk_tile_layout_t *L = load_layout(K, rows.n, cols.n, fast_dim(w, rows.d, cols.d, dflt_fast));
  tv_t *ri = range_at(K, rows.start, rows.n, drk_tile_layout_slice(c->m, L, 1));
  tv_t *ci = range_at(K, cols.start, cols.n, drk_tile_layout_slice(c->m, L, 0));
  tv_t *off = offs2(K, w, base, rows.d, ri, cols.d, ci, L);
  tv_t *mask = mask2(K, ri, rows.lim, rows.edge, ci, cols.lim, cols.edge, L);
  tv_t *prm = param_of(K, w->value);
  if (!async) {
    drk_tile_build(&c->b, DRK_TOP_LOCAL_STORE, 2, (tv_t *[]){sm, lw_load(c, prm, off, mask, 0)}, 0, NULL);
    return;
  }
  drk_tile_type_t pt = off->type;
  pt.dtype = prm->type.dtype;
  pt.is_ptr = true;
  tv_t *ps = drk_tile_build1(&c->b, DRK_TOP_SPLAT, 1, (tv_t *[]){prm}, pt);
  tv_t *pp = drk_tile_build1(&c->b, DRK_TOP_ADDPTR, 2, (tv_t *[]){ps, off}, pt);
  drk_tile_build(&c->b, DRK_TOP_CP_ASYNC, mask ? 3 : 2, (tv_t *[]){sm, pp, mask}, 0, NULL);
}

static tv_t *smem_buf(ak_t *K, int64_t off, int64_t n, int64_t R, int64_t C, const drk_tile_layout_t *sl) {
  drk_tile_type_t t = drk_tile_type_smem(K->t, 3, (int64_t[]){n, R, C}, sl);
  tv_t *b = drk_tile_build1(&K->c->b, DRK_TOP_LOCAL_ALLOC, 0, NULL, t);
  drk_tile_op_set_int(K->c->m, b->def, "offset", off);
  return b;
}

/* stage i (scalar i32) of buf */
static tv_t *stage_at(ak_t *K, tv_t *buf, tv_t *i) {
  const drk_tile_type_t *t = &buf->type;
  return drk_tile_build1(&K->c->b, DRK_TOP_MEMDESC_INDEX, 2, (tv_t *[]){buf, i},
                         drk_tile_type_smem(t->dtype, t->rank - 1, t->dims + 1, t->layout));
}

static tv_t *stage(ak_t *K, tv_t *buf, int64_t i) { return stage_at(K, buf, lw_sci(K->c, DRK_DT_I32, i)); }

/* stage i of ring slot st (scalar i32) of a ring of n-stage slots */
static tv_t *ring_stage(ak_t *K, tv_t *buf, tv_t *st, int n, int i) {
  drk_lctx_t *c = K->c;
  tv_t *x = n > 1 ? BIN(MUL, st, lw_sci(c, DRK_DT_I32, n)) : st;
  return stage_at(K, buf, i ? BIN(ADD, x, lw_sci(c, DRK_DT_I32, i)) : x);
}

static tv_t *ld_op(ak_t *K, tv_t *sm, const drk_tile_layout_t *l) {
  const drk_tile_type_t *t = &sm->type;
  return drk_tile_build1(&K->c->b, DRK_TOP_LOCAL_LOAD, 1, &sm, drk_tile_type_tile(t->dtype, 2, t->dims, l));
}

static tv_t *dot(ak_t *K, tv_t *a, tv_t *b, tv_t *acc) {
  drk_tile_op_t *op = drk_tile_build(&K->c->b, DRK_TOP_DOT, 3, (tv_t *[]){a, b, acc}, 1, &acc->type);
  drk_tile_op_set_ident(K->c->m, op, "kind", K->mma ? "mma_sync" : "fma");
  return op->results[0];
}

static void barrier(ak_t *K) { drk_tile_build(&K->c->b, DRK_TOP_BARRIER, 0, NULL, 0, NULL); }

/* wgmma path: generic-proxy writes (cp_async, local_store) made visible to wgmma's reads */
static void fence_async(ak_t *K) {
  drk_tile_op_t *op = drk_tile_build(&K->c->b, DRK_TOP_FENCE, 0, NULL, 0, NULL);
  drk_tile_op_set_ident(K->c->m, op, "kind", "proxy_async");
}

/* wgmma path: acc[i] += a[i] . b[i] for i < n (chain: acc[0] += every a[i] . b[i]), shared-
 * memory operands, one commit group, waited for; the results replace acc. */
static void dots_wg(ak_t *K, int n, tv_t **a, tv_t **b, tv_t **acc, bool chain) {
  drk_lctx_t *c = K->c;
  drk_tile_build(&c->b, DRK_TOP_WGMMA_FENCE, 0, NULL, 0, NULL);
  for (int i = 0; i < n; i++) {
    tv_t **y = chain ? acc : acc + i;
    drk_tile_op_t *op = drk_tile_build(&c->b, DRK_TOP_DOT, 3, (tv_t *[]){a[i], b[i], *y}, 1, &(*y)->type);
    drk_tile_op_set_ident(c->m, op, "kind", "wgmma");
    *y = op->results[0];
  }
  drk_tile_build(&c->b, DRK_TOP_WGMMA_COMMIT, 0, NULL, 0, NULL);
  int m = chain ? 1 : n;
  drk_tile_type_t ts[16];
  for (int i = 0; i < m; i++) ts[i] = acc[i]->type;
  drk_tile_op_t *w = drk_tile_build(&c->b, DRK_TOP_WGMMA_WAIT, m, acc, m, ts);
  drk_tile_op_set_int(c->m, w, "pending", 0);
  for (int i = 0; i < m; i++) acc[i] = w->results[i];
}

/* Step operand x (or a Where condition) at the block's rows ri / keys kj, in the accumulator
 * layout: a constant, a column vector (no parts along the rows: masks over keys), a row
 * vector (none along the keys) or a full tile. Floats come back in f32. */
static tv_t *step_operand(ak_t *K, const drk_fusion_view_t *w, tv_t *ri, tv_t *kj, bool is_bool) {
  drk_lctx_t *c = K->c;
  const drk_fusion_attention_t *at = K->at;
  int64_t R = K->BM, C = K->BN;
  int dr = at->nb, dc = at->nb + 1;
  drk_tile_type_t ft = drk_tile_type_tile(DRK_DT_F32, 2, (int64_t[]){R, C}, K->acc);
  if (!w->value && is_bool) return drk_tile_build_const_int(&c->b, w->imm != 0, lw_retype(&ft, DRK_DT_BOOL));
  if (!w->value) return drk_tile_build_const_float(&c->b, w->imm, ft);
  tv_t *p = param_of(K, w->value), *base = batch_base(K, w);
  tv_t *v;
  if (!w->n_parts[dr] || !w->n_parts[dc]) {
    bool along_keys = !w->n_parts[dr];
    tv_t *ix = along_keys ? kj : ri;
    int64_t n = along_keys ? at->Sk : at->Sq, len = along_keys ? C : R;
    tv_t *o = dim_off(K, w, along_keys ? dc : dr, ix);
    tv_t *off = o ? BIN(ADD, o, lw_splat(c, base, &ix->type)) : lw_splat(c, base, &ix->type);
    tv_t *m = n % len ? lw_cmp(c, "lt", ix, lw_ci(c, ix, n)) : NULL;
    v = lw_load(c, p, off, m, 0);
    v = along_keys ? lw_bcast_col(c, v, K->acc, R, C) : lw_bcast_row(c, v, K->acc, R, C);
  } else {
    v = lw_load(c, p, offs2(K, w, base, dr, ri, dc, kj, K->acc),
                mask2(K, ri, at->Sq, at->Sq % R != 0, kj, at->Sk, at->Sk % C != 0, K->acc), 0);
  }
  return is_bool ? v : lw_cast(c, v, DRK_DT_F32);
}

/* The group's steps on the scores s at rows ri / keys kj; !masked leaves the causal step out
 * (blocks where it keeps every score). */
static tv_t *apply_steps(ak_t *K, tv_t *s, tv_t *ri, tv_t *kj, bool masked) {
  drk_lctx_t *c = K->c;
  const drk_fusion_attention_t *at = K->at;
  for (int i = 0; i < at->n_steps; i++) {
    const drk_attn_step_t *st = &at->steps[i];
    if (st->kind == DRK_ATTN_CAST) {
      s = lw_cast(c, lw_cast(c, s, st->dtype), DRK_DT_F32);
      continue;
    }
    if (i == at->causal_step && !masked) continue;
    tv_t *x = step_operand(K, &st->x, ri, kj, false);
    tv_t *a = st->scores_right ? x : s, *b = st->scores_right ? s : x;
    switch (st->kind) {
    case DRK_ATTN_MUL: s = BIN(MUL, a, b); break;
    case DRK_ATTN_DIV: s = BIN(DIV, a, b); break;
    case DRK_ATTN_ADD: s = BIN(ADD, a, b); break;
    case DRK_ATTN_SUB: s = BIN(SUB, a, b); break;
    case DRK_ATTN_WHERE: {
      tv_t *cond;
      if (i == at->causal_step) {
        /* the mask is known to keep exactly j <= i + t: compare instead of loading it */
        tv_t *lim = lw_bcast_row(c, BIN(ADD, ri, lw_ci(c, ri, at->causal_offset)), K->acc, K->BM, K->BN);
        cond = lw_cmp(c, st->scores_right ? "gt" : "le", lw_bcast_col(c, kj, K->acc, K->BM, K->BN), lim);
      } else {
        cond = step_operand(K, &st->cond, ri, kj, true);
      }
      s = lw_sel(c, cond, a, b);
      break;
    }
    default: break;
    }
  }
  return s;
}

static tv_t *reduce_rows(ak_t *K, tv_t *t, const char *comb) {
  drk_lctx_t *c = K->c;
  int64_t d = t->type.dims[0];
  drk_tile_op_t *op = drk_tile_build(&c->b, DRK_TOP_REDUCE, 1, &t, 1,
                                     (drk_tile_type_t[]){drk_tile_type_tile(t->type.dtype, 1, &d, K->Lr)});
  drk_tile_op_set_int(c->m, op, "axis", 1);
  drk_tile_op_set_ident(c->m, op, "combiner", comb);
  return op->results[0];
}

/* Byte offsets of the shared buffers: rings of K->ns slots of K^T and V blocks, P's
 * relayout buffer, Q (Q in registers: aliases the rings, read into registers before the
 * prologue's copies). Returns the total. */
typedef struct smem_plan {
  int64_t k, v, p, q;
} smem_plan_t;

static int64_t plan_smem(const ak_t *K, smem_plan_t *sp) {
  int64_t es = drk_dtype_bits(K->t) / 8, NS = K->ns;
  sp->k = 0;
  sp->v = align_up(sp->k + NS * K->nkc * K->KC * K->BN * es, 8 * SWZ);
  sp->p = align_up(sp->v + NS * K->nvc * K->BN * K->VC * es, 8 * SWZ);
  int64_t q_bytes = K->nkc * K->BM * K->KC * es, end = sp->p + K->BM * K->BN * es;
  sp->q = K->q_regs ? 0 : align_up(end, 8 * SWZ);
  return K->q_regs ? (q_bytes > end ? q_bytes : end) : sp->q + q_bytes;
}

/* The target's multiprocessors and the dynamic shared memory one program may use: the
 * module's oldest NVIDIA target (pipeline/pipeline.c, lower_options), sm_80 also standing for gfx942 (64 KB of LDS). */
static int64_t target_smem(const drk_lctx_t *c) {
  int sm = c->o.target_sm ? c->o.target_sm : 80;
  return sm == 86 || sm == 89 ? 99 * 1024 : sm == 87 ? 163 * 1024 : sm == 90 ? 227 * 1024 : 64 * 1024;
}

static void setup(ak_t *K) {
  drk_lctx_t *c = K->c;
  const drk_fusion_attention_t *at = K->at;
  K->t = at->dtype;
  K->mma = at->dtype == DRK_DT_F16 || at->dtype == DRK_DT_BF16;
  K->BM = K->mma ? 64 : 32;
  K->warps = 4;
  K->BN = K->mma ? 64 : 32;
  K->KC = K->mma ? 16 : 8;
  K->VC = 16;
  /* sm_90a: wgmma reads Q, K^T, V and P from 128-byte swizzled chunks of 64 head-dim
   * columns, each the canonical layout when the view's head dim is contiguous in memory */
  int dr = at->nb, dc = at->nb + 1;
  K->wg = K->mma && c->o.target_sm == 90 && c->o.arch_specific && at->D <= 256 && at->Dv <= 256 &&
          fast_dim(&at->q, dr, dc, -1) == 1 && fast_dim(&at->k, dc, dr, -1) == 0 && fast_dim(&at->v, dr, dc, -1) == 1;
  if (K->wg) K->KC = K->VC = 64;
  K->nkc = (int)((at->D + K->KC - 1) / K->KC);
  K->q_regs = K->mma && !K->wg && at->D <= 64;
  K->nvc = (int)((at->Dv + K->VC - 1) / K->VC);
  /* BM = 128 with 8 warps (each warp still 16 rows: the same registers per thread, half the
   * K/V traffic per query row) when the grid still has two programs per multiprocessor and
   * the buffers fit */
  int64_t progs = (at->Sq + 127) / 128;
  for (int i = 0; i < at->nb; i++) progs *= at->batch[i];
  smem_plan_t sp;
  K->ns = 2;
  int pin; /* attn.block_m (64 or 128) */
  if (K->mma && !K->wg &&
      (drk_knob_pinned(&c->o.knobs, DRK_KNOB_ATTN_BLOCK_M, &pin) ? pin == 128 : progs >= WIDE_WAVES * lw_target_sms(&c->o))) {
    K->BM = 128, K->warps = 8;
    if (plan_smem(K, &sp) > target_smem(c)) K->BM = 64, K->warps = 4;
  }
  if (plan_smem(K, &sp) > target_smem(c)) K->ns = 1;
  K->acc = K->wg    ? drk_tile_layout_mma(c->m, DRK_TL_WGMMA, 4, 1, 64, (int)K->BN)
           : K->mma ? drk_tile_layout_mma(c->m, DRK_TL_MMA_SYNC, K->warps, 1, 16, 8)
                    : drk_tile_layout_blocked(c->m, 2, (int[]){2, 2}, (int[]){4, 8}, (int[]){4, 1}, (int[]){1, 0});
  int kw = K->mma ? 8 : 1;
  K->opA = drk_tile_layout_dot_op(c->m, K->acc, 0, kw);
  K->opB = drk_tile_layout_dot_op(c->m, K->acc, 1, kw);
  K->Lr = drk_tile_layout_slice(c->m, K->acc, 1);
  K->Lc = drk_tile_layout_slice(c->m, K->acc, 0);
  K->shr = drk_tile_layout_shared(c->m, SWZ, 2, (int[]){1, 0});
  K->shc = drk_tile_layout_shared(c->m, SWZ, 2, (int[]){0, 1});
}

/* cp_async of key block kb (scalar, it) of K^T and V into ring slot st (scalar i32); keys
 * past Sk and head-dim columns past D (Dv) are zero-filled. */
static void issue_kv(ak_t *K, tv_t *kb, tv_t *st, tv_t *ks, tv_t *vs, tv_t *kbase, tv_t *vbase) {
  drk_lctx_t *c = K->c;
  const drk_fusion_attention_t *at = K->at;
  int dr = at->nb, dc = at->nb + 1;
  span_t keys = {dr, kb, K->BN, at->Sk, at->Sk % K->BN != 0};
  for (int i = 0; i < K->nkc; i++) {
    span_t drows = {dc, lw_sci(c, c->it, i * K->KC), K->KC, at->D, (i + 1) * K->KC > at->D};
    chunk_to_smem(K, &at->k, kbase, drows, keys, 0, ring_stage(K, ks, st, K->nkc, i), true);
  }
  for (int i = 0; i < K->nvc; i++) {
    span_t vcols = {dc, lw_sci(c, c->it, i * K->VC), K->VC, at->Dv, (i + 1) * K->VC > at->Dv};
    chunk_to_smem(K, &at->v, vbase, keys, vcols, 1, ring_stage(K, vs, st, K->nvc, i), true);
  }
}

static void cp_wait(ak_t *K, int64_t pending) {
  drk_tile_op_t *op = drk_tile_build(&K->c->b, DRK_TOP_CP_ASYNC_WAIT, 0, NULL, 0, NULL);
  drk_tile_op_set_int(K->c->m, op, "pending", pending);
}

static void cp_commit(ak_t *K) { drk_tile_build(&K->c->b, DRK_TOP_CP_ASYNC_COMMIT, 0, NULL, 0, NULL); }

/* The largest element offset view w can form with index i_d <= maxi[d] (masked-off lanes
 * included: their offsets are formed too). */
static int64_t view_max_offset(const drk_fusion_view_t *w, const int64_t *maxi) {
  int64_t o = w->offset;
  for (int d = 0; w->value && d < w->rank; d++)
    for (int i = 0; i < w->n_parts[d]; i++) {
      const drk_fusion_part_t *p = &w->parts[d][i];
      int64_t q = maxi[d] / p->div;
      if (p->div * p->mod < w->dims[d] && q > p->mod - 1) q = p->mod - 1;
      o += q * (p->stride < 0 ? -p->stride : p->stride);
    }
  return o;
}

static bool needs_i64(const ak_t *K) {
  const drk_fusion_attention_t *at = K->at;
  int nb = at->nb;
  int64_t mx[DRK_FUSION_MAX_RANK + 2];
  for (int i = 0; i < nb; i++) mx[i] = at->batch[i] - 1;
  int64_t rq = (at->Sq + K->BM - 1) / K->BM * K->BM - 1, rk = (at->Sk + K->BN - 1) / K->BN * K->BN - 1;
  int64_t cd = K->nkc * K->KC - 1, cv = K->nvc * K->VC - 1, big = 0, o;
  const int64_t lim = ((int64_t)1 << 31) - 1;
#define BOUND(w, r, cc)                                                                                              \
  do {                                                                                                               \
    mx[nb] = (r), mx[nb + 1] = (cc), o = view_max_offset((w), mx);                                                    \
    if (o > big) big = o;                                                                                            \
  } while (0)
  BOUND(&at->q, rq, cd);
  BOUND(&at->k, rk, cd);
  BOUND(&at->v, rk, cv);
  BOUND(&at->out, rq, cv);
  for (int i = 0; i < at->n_steps; i++) {
    if (at->steps[i].kind == DRK_ATTN_CAST) continue;
    BOUND(&at->steps[i].x, rq, rk);
    if (at->steps[i].kind == DRK_ATTN_WHERE && i != at->causal_step) BOUND(&at->steps[i].cond, rq, rk);
  }
#undef BOUND
  return big >= lim;
}

/* What the loop over key blocks needs besides K: the end of the causal range, the shared
 * buffers, the operands' batch bases, the block's first row and Q in registers. */
typedef struct kv_loop {
  tv_t *hi, *ks, *vs, *qs, *ps, *kb0, *vb, *m0;
  tv_t **qr;
} kv_loop_t;

/* The loop over key blocks [from, to) (step BN) carrying m, l and the O chunks (init), pipelined
 * (NS >= 2): block b lands in ring slot b % NS; the prologue issued blocks 0 .. NS-2 (one
 * commit group each, empty past hi); step b waits for its group (pending NS-2), then one
 * barrier makes the block visible to every warp and ends every warp's reads of slot
 * (b-1) % NS (step b-1), into which block b+NS-1 is then copied while block b is computed.
 * NS = 1: step b waits for the previous block's readers (barrier), copies block b, waits for
 * it (wait 0, barrier). Two such loops in a row (causal: unmasked blocks, then the diagonal)
 * continue one sequence of blocks. `masked`: apply the causal compare and the Sk mask (else
 * only the other steps). Returns the loop's results. */
static tv_t **kv_loop(ak_t *K, const kv_loop_t *L, tv_t *from, tv_t *to, tv_t **init, bool masked) {
  drk_lctx_t *c = K->c;
  const drk_fusion_attention_t *at = K->at;
  const int64_t BM = K->BM, BN = K->BN, VC = K->VC, NS = K->ns;
  drk_dtype_t it = c->it;
  int ncar = 2 + K->nvc;
  drk_tile_op_t *loop = drk_tile_build_for_begin(&c->b, from, to, lw_sci(c, it, BN), ncar, init);
  tv_t **args = loop->regions[0]->args;
  tv_t *kb = args[0], *mi = args[1], *li = args[2];
  tv_t *bi = NULL; /* block index */
  if (NS == 1) {
    barrier(K);
    issue_kv(K, kb, lw_sci(c, DRK_DT_I32, 0), L->ks, L->vs, L->kb0, L->vb);
    cp_commit(K);
    cp_wait(K, 0);
    if (K->wg) fence_async(K);
    barrier(K);
  } else {
    bi = BIN(DIV, kb, lw_sci(c, it, BN));
    cp_wait(K, NS - 2);
    if (K->wg) fence_async(K);
    barrier(K);
    tv_t *kn = BIN(ADD, kb, lw_sci(c, it, (NS - 1) * BN));
    drk_tile_build_if_begin(&c->b, lw_cmp(c, "lt", kn, L->hi), 0, NULL);
    issue_kv(K, kn, lw_cast(c, BIN(REM, BIN(ADD, bi, lw_sci(c, it, NS - 1)), lw_sci(c, it, NS)), DRK_DT_I32), L->ks,
             L->vs, L->kb0, L->vb);
    drk_tile_build_if_end(&c->b, 0, NULL);
    cp_commit(K);
  }
  tv_t *st = NS == 1 ? lw_sci(c, DRK_DT_I32, 0) : lw_cast(c, BIN(REM, bi, lw_sci(c, it, NS)), DRK_DT_I32);
  tv_t *s = drk_tile_build_const_float(&c->b, 0.0, drk_tile_type_tile(DRK_DT_F32, 2, (int64_t[]){BM, BN}, K->acc));
  if (K->wg) {
    /* S = sum over the 64-column chunks of Q_i . K^T_i: one chain of wgmmas */
    tv_t *qa[4], *kt[4];
    for (int i = 0; i < K->nkc; i++) qa[i] = stage(K, L->qs, i), kt[i] = ring_stage(K, L->ks, st, K->nkc, i);
    dots_wg(K, K->nkc, qa, kt, &s, true);
  } else {
    for (int i = 0; i < K->nkc; i++) {
      tv_t *qa = K->q_regs ? L->qr[i] : ld_op(K, stage(K, L->qs, i), K->opA);
      s = dot(K, qa, ld_op(K, ring_stage(K, L->ks, st, K->nkc, i), K->opB), s);
    }
  }
  tv_t *ri = range_at(K, L->m0, BM, K->Lr), *kj = range_at(K, kb, BN, K->Lc);
  s = apply_steps(K, s, ri, kj, masked);
  if (masked && at->Sk % BN)
    s = lw_sel(c, lw_bcast_col(c, lw_cmp(c, "lt", kj, lw_ci(c, kj, at->Sk)), K->acc, BM, BN), s,
               lw_cf(c, s, -INFINITY));
  /* online softmax; 16-bit inputs: exp(x) as exp2(x log2 e) on the hardware's ex2 (P is
   * rounded to 16 bits next), f32: exp */
  tv_t *mn = BIN(MAX, mi, reduce_rows(K, s, "max"));
  tv_t *mu = lw_sel(c, lw_cmp(c, "eq", mn, lw_cf(c, mn, -INFINITY)), lw_cf(c, mn, 0), mn);
  tv_t *alpha, *p;
  if (K->mma) {
    const double log2e = 1.4426950408889634;
    tv_t *ml = BIN(MUL, mu, lw_cf(c, mu, log2e));
    alpha = lw_approx(c, UN(EXP2, BIN(SUB, BIN(MUL, mi, lw_cf(c, mi, log2e)), ml)));
    p = lw_approx(c, UN(EXP2, BIN(SUB, BIN(MUL, s, lw_cf(c, s, log2e)), lw_bcast_row(c, ml, K->acc, BM, BN))));
  } else {
    alpha = UN(EXP, BIN(SUB, mi, mu));
    p = UN(EXP, BIN(SUB, s, lw_bcast_row(c, mu, K->acc, BM, BN)));
  }
  tv_t *ln = BIN(ADD, BIN(MUL, li, alpha), reduce_rows(K, p, "sum"));
  tv_t *pc = lw_cast(c, p, K->t);
  /* P into the dot operand layout through a swizzled buffer: the loop's first barrier ends
   * the previous block's reads, one barrier between this block's stores and loads */
  drk_tile_build(&c->b, DRK_TOP_LOCAL_STORE, 2, (tv_t *[]){L->ps, pc}, 0, NULL);
  if (K->wg) fence_async(K);
  barrier(K);
  tv_t *yield[2 + 16];
  yield[0] = mn, yield[1] = ln;
  tv_t *a2 = lw_bcast_row(c, alpha, K->acc, BM, VC);
  if (K->wg) {
    tv_t *pa[16], *vb[16];
    for (int i = 0; i < K->nvc; i++)
      pa[i] = L->ps, vb[i] = ring_stage(K, L->vs, st, K->nvc, i), yield[2 + i] = BIN(MUL, args[3 + i], a2);
    dots_wg(K, K->nvc, pa, vb, yield + 2, false);
  } else {
    tv_t *pa = ld_op(K, L->ps, K->opA);
    for (int i = 0; i < K->nvc; i++)
      yield[2 + i] = dot(K, pa, ld_op(K, ring_stage(K, L->vs, st, K->nvc, i), K->opB), BIN(MUL, args[3 + i], a2));
  }
  loop = drk_tile_build_for_end(&c->b, ncar, yield);
  return loop->results;
}

bool drk_lower_attention(drk_lctx_t *c, const drk_fusion_t *f, int gi) {
  const drk_fusion_group_t *gr = &f->groups[gi];
  const drk_fusion_attention_t *at = gr->attn;
  const drk_graph_t *g = c->g;
  ak_t K0, *K = &K0;
  memset(K, 0, sizeof *K);
  K->c = c;
  K->at = at;
  c->node = g->nodes[gr->last];
  c->node_index = (size_t)gr->last;
  /* parameters: Q, K, V, the steps' operands (deduplicated), then the result */
  const drk_value_t *vals[MAX_PARAMS];
  int nv = 0;
  vals[nv++] = at->q.value, vals[nv++] = at->k.value, vals[nv++] = at->v.value;
  for (int i = 0; i < at->n_steps && nv + 2 < MAX_PARAMS; i++) {
    if (at->steps[i].kind == DRK_ATTN_CAST) continue;
    if (at->steps[i].x.value) vals[nv++] = at->steps[i].x.value;
    if (at->steps[i].kind == DRK_ATTN_WHERE && at->steps[i].cond.value && i != at->causal_step)
      vals[nv++] = at->steps[i].cond.value;
  }
  if (nv + 2 >= MAX_PARAMS) return lw_err(c, "attention with too many mask operands");
  vals[nv++] = at->out.value;
  setup(K);
  drk_dtype_t it = needs_i64(K) ? DRK_DT_I64 : DRK_DT_I32;
  lw_kernel_begin(c, it);
  c->k->name = drk_arena_printf(c->m->arena, "k%d_fused_attention", gr->last);
  for (int i = 0; i + 1 < nv; i++) add_param(K, vals[i], "x");
  add_param(K, at->out.value, "y");
  /* runtime sizes: the outer batch dims' count (grid y; the code never reads it) */
  int64_t outer = 1;
  for (int i = 0; i + 1 < at->nb; i++) outer *= at->batch[i];
  tv_t *pouter = at->nb > 1 ? lw_size_param(c, "batch", outer) : NULL;
  for (int i = 0; i < gr->n_nodes; i++) {
    const drk_node_t *n = g->nodes[gr->nodes[i]];
    if (drk_op_aliases_input(n->op)) lw_alias(c, n->outputs[0], n->inputs[0]);
    /* a member Split's outputs are never written nor read (the kernel reads its input through
     * the views): aliases of the input, so that they take no arena bytes of their own */
    if (n->op == DRK_OP_SPLIT)
      for (int o = 0; o < n->n_outputs; o++)
        if (n->outputs[o]) lw_alias(c, n->outputs[o], n->inputs[0]);
  }

  const int64_t BM = K->BM, BN = K->BN, KC = K->KC, VC = K->VC;
  const int nb = at->nb, dr = nb, dc = nb + 1;
  const int64_t NS = K->ns;
  smem_plan_t sp;
  int64_t smem = plan_smem(K, &sp), off_k = sp.k, off_v = sp.v, off_p = sp.p, off_q = sp.q;

  /* program coordinates: grid (last batch dim, the other batch dims, row blocks), so that
   * programs start row block by row block (programs are dispatched x fastest); causal: the
   * last row block (the longest programs) first */
  int64_t nM = (at->Sq + BM - 1) / BM, gx = nb ? at->batch[nb - 1] : 1, gy = 1;
  for (int i = 0; i + 1 < nb; i++) gy *= at->batch[i];
  if (nM > 65535 || gy > 65535) return lw_err(c, "attention grid too large (%lld row blocks, %lld batches)", (long long)nM, (long long)gy);
  tv_t *pm = lw_pid(c, 2);
  if (at->causal_step >= 0) pm = BIN(SUB, lw_sci(c, it, nM - 1), pm);
  if (nb) K->bc[nb - 1] = lw_pid(c, 0);
  if (nb > 1) {
    tv_t *z = lw_pid(c, 1);
    for (int i = nb - 2; i > 0; i--) {
      K->bc[i] = BIN(REM, z, lw_sci(c, it, at->batch[i]));
      z = BIN(DIV, z, lw_sci(c, it, at->batch[i]));
    }
    K->bc[0] = z;
  }
  tv_t *m0 = BIN(MUL, pm, lw_sci(c, it, BM));
  tv_t *qb = batch_base(K, &at->q), *kb0 = batch_base(K, &at->k), *vb = batch_base(K, &at->v);

  /* each buffer's fastest dim is the one contiguous in global memory (16-byte cp_async and
   * stores; ldmatrix reads either orientation, .trans for V [keys, d] stored d-fastest) */
  tv_t *ks = smem_buf(K, off_k, NS * K->nkc, KC, BN, fast_dim(&at->k, dc, dr, 0) ? K->shr : K->shc);
  tv_t *vs = smem_buf(K, off_v, NS * K->nvc, BN, VC, fast_dim(&at->v, dr, dc, 1) ? K->shr : K->shc);
  tv_t *qs = smem_buf(K, off_q, K->nkc, BM, KC, fast_dim(&at->q, dr, dc, 1) ? K->shr : K->shc);
  tv_t *ps = stage(K, smem_buf(K, off_p, 1, BM, BN, K->shr), 0);
  span_t qrows = {dr, m0, BM, at->Sq, at->Sq % BM != 0};
  for (int i = 0; i < K->nkc; i++) {
    span_t dcols = {dc, lw_sci(c, it, i * KC), KC, at->D, (i + 1) * KC > at->D};
    chunk_to_smem(K, &at->q, qb, qrows, dcols, 1, stage(K, qs, i), false);
  }
  if (K->wg) fence_async(K);
  barrier(K);
  tv_t *qr[16] = {0};
  if (K->q_regs) {
    for (int i = 0; i < K->nkc; i++) qr[i] = ld_op(K, stage(K, qs, i), K->opA);
    barrier(K); /* every warp has Q: the prologue's copies may overwrite it */
  }

  /* the key blocks [0, hi): kv_loop; the prologue issues blocks 0 .. NS-2 */
  tv_t *hi = lw_sci(c, it, at->Sk);
  if (at->causal_step >= 0)
    hi = BIN(MIN, BIN(ADD, m0, lw_sci(c, it, BM + at->causal_offset)), lw_sci(c, it, at->Sk));
  for (int64_t i = 0; i + 1 < NS; i++) {
    tv_t *kbi = lw_sci(c, it, i * BN);
    drk_tile_build_if_begin(&c->b, lw_cmp(c, "lt", kbi, hi), 0, NULL);
    issue_kv(K, kbi, lw_sci(c, DRK_DT_I32, i), ks, vs, kb0, vb);
    drk_tile_build_if_end(&c->b, 0, NULL);
    cp_commit(K);
  }
  int64_t rd[1] = {BM};
  drk_tile_type_t rt = drk_tile_type_tile(DRK_DT_F32, 1, rd, K->Lr);
  tv_t *init[2 + 16];
  init[0] = drk_tile_build_const_float(&c->b, -INFINITY, rt);
  init[1] = drk_tile_build_const_float(&c->b, 0.0, rt);
  for (int i = 0; i < K->nvc; i++)
    init[2 + i] = drk_tile_build_const_float(&c->b, 0.0, lw_tt(K->acc, 2, (int64_t[]){BM, VC}, DRK_DT_F32));
  kv_loop_t L = {.hi = hi, .ks = ks, .vs = vs, .qs = qs, .ps = ps, .kb0 = kb0, .vb = vb, .m0 = m0, .qr = qr};
  tv_t **res = init;
  if (at->causal_step >= 0) {
    /* key blocks entirely at or below the diagonal of the program's first row (every key
     * j <= m0 + t, and all of them < Sk) need neither the causal compare nor the Sk mask;
     * the blocks from there to hi do */
    int64_t full_sk = at->Sk / BN * BN;
    tv_t *lo = BIN(MUL, BIN(DIV, BIN(ADD, m0, lw_sci(c, it, at->causal_offset + 1)), lw_sci(c, it, BN)),
                   lw_sci(c, it, BN));
    lo = BIN(MIN, BIN(MIN, lo, lw_sci(c, it, full_sk)), hi);
    res = kv_loop(K, &L, lw_sci(c, it, 0), lo, res, false);
    res = kv_loop(K, &L, lo, hi, res, true);
  } else {
    res = kv_loop(K, &L, lw_sci(c, it, 0), hi, res, true);
  }
  cp_wait(K, 0);

  /* O / l, stored through the output view */
  tv_t *l2 = lw_bcast_row(c, res[1], K->acc, BM, VC);
  tv_t *ro = range_at(K, m0, BM, K->Lr), *ob = batch_base(K, &at->out);
  for (int i = 0; i < K->nvc; i++) {
    tv_t *oc = range_at(K, lw_sci(c, it, i * VC), VC, K->Lc);
    tv_t *o = BIN(DIV, res[2 + i], l2);
    if (at->zero_nan_rows) /* Where(IsNaN(P), 0, P): rows with l = 0 or NaN store 0 */
      o = lw_sel(c, lw_cmp(c, "gt", l2, lw_cf(c, l2, 0)), o, lw_cf(c, o, 0));
    lw_store(c, param_of(K, at->out.value), offs2(K, &at->out, ob, dr, ro, dc, oc, K->acc), o,
             mask2(K, ro, at->Sq, at->Sq % BM != 0, oc, at->Dv, (i + 1) * VC > at->Dv, K->acc));
  }
  drk_schedule_t S = {.kind = "attention", .warps = K->warps, .tile_m = (int)BM, .tile_n = (int)BN, .tile_k = (int)KC,
                      .stages = (int)NS, .mma = K->wg ? "wgmma" : K->mma ? "mma_sync" : "fma"};
  lw_kernel_end(c, gx, gy, nM, K->warps, smem, &S);
  lw_grid_from(c, 1, pouter, 1);
  return true;
}
