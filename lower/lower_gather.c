/* Lowering of indexed data movement: GatherND, ScatterND, OneHot and Resize (modes nearest,
 * linear, cubic). The entry points are dispatched from lower_move.c; every kernel is flat
 * over its output (offs = pid * BLOCK + range, mask offs < n) with index arithmetic in the
 * node's index dtype (i32 unless a buffer has >= 2^31 elements).
 *
 * The reference interpreter (ir/interp_move.c, ir/interp_resize.c) is the oracle; each op
 * below follows its operation order:
 *
 * - GatherND (batch_dims, i32/i64 indices): each element loads its index tuple, wraps
 *   negative indices and reads data[batch, tuple, slice]; an out-of-range index (which the
 *   interpreter rejects) reads 0.
 * - ScatterND (reduction none/add/mul/max/min): the tile IR has no atomics and the
 *   interpreter applies the index tuples in order (duplicates: the last one wins for none,
 *   every one folds in tuple order otherwise), so each output element is written by exactly
 *   one thread that folds the updates hitting it in tuple order. Two kernel shapes, chosen
 *   by their static cost (out = data elements, T = tuples, slice = elements per tuple):
 *     per output  O(out * T): one kernel; acc = data; a `for` over the T tuples loads the
 *                 tuple's slot (uniform scalar loads) and folds its update where it hits;
 *     per update  O(out + T * T * slice): a copy kernel y = data, then a kernel over the
 *                 T * slice update elements; the first tuple hitting a slot owns it and folds
 *                 data and the updates of every tuple that hits the slot, in tuple order.
 *   The second is taken when it is cheaper (T smaller than the number of slots, roughly).
 *   add/mul on f16/bf16 are computed in f32 and rounded after each step (what the
 *   interpreter's f64 steps round to); max/min are `a > b ? a : b` / `a < b ? a : b` as the
 *   interpreter (NaN updates win, NaN data loses); on bool, add/max are `or`, mul/min `and`.
 *   Out-of-range tuples (rejected by the interpreter) are skipped.
 * - OneHot: y = values[index == coordinate along axis]; float indices truncate toward zero;
 *   a negative index adds depth; out-of-range indices give the off value. depth is the
 *   inferred output dim (shape inference needs it constant).
 * - Resize: per resized axis, the source coordinate is computed in f64 from the output
 *   coordinate with the interpreter's exact operations (its loop-invariant terms folded on
 *   the host the same way), so nearest_mode ties and the floor of linear/cubic taps agree
 *   with it bit for bit. Axes whose taps are the identity (checked on the host for every
 *   output coordinate) cost nothing. nearest: one masked load; linear/cubic: 2^k / 4^k taps
 *   for k resized axes (at most 256; up to 16 unrolled, a `for` over the rest), weights in
 *   f32 (f64 for f64 and integer data, which then round half to even as the interpreter),
 *   zero-weight taps skipped as the interpreter skips them, exclude_outside renormalization,
 *   tf_crop_and_resize's extrapolation_value.
 *   antialias=1 is not lowered (the interpreter has no reference for it). The f64 coordinate
 *   math (a division per resized axis and element) is cheap on H200, slow on Orin's f64 units.
 *
 * Requires: static shapes; Resize scales constant, sizes too with a keep_aspect_ratio_policy
 * other than stretch (with stretch the inferred result dims are the sizes), roi constant for
 * tf_crop_and_resize. */
#include <math.h>
#include <string.h>

#include "lower/lower_internal.h"

#define BIN(op, a, b) lw_bin(c, DRK_TOP_##op, (a), (b))

static const char *const resize_modes[] = {"nearest", "linear", "cubic", NULL};
static const char *const resize_ctms[] = {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
                                          "asymmetric", "tf_crop_and_resize", "tf_half_pixel_for_nn", NULL};
static const char *const nearest_modes[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil", NULL};
static const char *const aspect_policies[] = {"stretch", "not_larger", "not_smaller", NULL};
static const char *const reductions[] = {"none", "add", "mul", "max", "min", NULL};

static int pick(const char *s, const char *const *names) {
  for (int i = 0; names[i]; i++)
    if (strcmp(s, names[i]) == 0) return i;
  return -1;
}

static bool is_index_dtype(drk_dtype_t t) { return t == DRK_DT_I64 || t == DRK_DT_I32; }

bool drk_lower_gather_supported(const drk_node_t *n, const char **why) {
  switch (n->op) {
  case DRK_OP_GATHER_ND:
    if (!is_index_dtype(n->inputs[1]->dtype)) { *why = "indices must be i32 or i64"; return false; }
    return true;
  case DRK_OP_SCATTER_ND:
    if (!is_index_dtype(n->inputs[1]->dtype)) { *why = "indices must be i32 or i64"; return false; }
    if (pick(drk_node_attr_string(n, "reduction", "none"), reductions) < 0) {
      *why = "reduction other than none, add, mul, max, min";
      return false;
    }
    return true;
  case DRK_OP_ONE_HOT:
    if (n->inputs[0]->dtype == DRK_DT_BOOL) { *why = "bool indices"; return false; }
    return true;
  case DRK_OP_RESIZE:
    if (n->inputs[0]->dtype == DRK_DT_BOOL) { *why = "dtype"; return false; }
    if (pick(drk_node_attr_string(n, "mode", "nearest"), resize_modes) < 0) {
      *why = "mode other than nearest, linear, cubic";
      return false;
    }
    if (drk_node_attr_int(n, "antialias", 0)) {
      *why = "antialias=1; the reference interpreter does not implement it either";
      return false;
    }
    return true;
  default: *why = "op not lowered"; return false;
  }
}

/* ---- shared helpers ---- */
static int64_t prod(const drk_value_t *v, int from, int to) {
  int64_t p = 1;
  for (int i = from; i < to; i++) p *= v->shape.dims[i].size;
  return p;
}

/* Scalar load of p[off] (off: scalar of the index dtype); the same address for every thread. */
static tv_t *load_scalar(drk_lctx_t *c, tv_t *p, tv_t *off) {
  tv_t *pp = drk_tile_build1(&c->b, DRK_TOP_ADDPTR, 2, (tv_t *[]){p, off}, p->type);
  return drk_tile_build1(&c->b, DRK_TOP_LOAD, 1, &pp, drk_tile_type_scalar(p->type.dtype));
}

/* An index value v (i32 or i64, scalar or tile) into an axis of D elements: the interpreter
 * accepts [-D, D) and adds D to negatives. Checked in v's own width (an i64 index is not
 * truncated before the check), returned in the kernel's index dtype; *ok gets the check
 * and-ed in. */
static tv_t *wrap_index(drk_lctx_t *c, tv_t *v, int64_t D, tv_t **ok) {
  if (v->type.dtype != DRK_DT_I64 && (c->it == DRK_DT_I64 || D > INT32_MAX)) v = lw_cast(c, v, DRK_DT_I64);
  tv_t *w = lw_sel(c, lw_cmp(c, "lt", v, lw_ci(c, v, 0)), BIN(ADD, v, lw_ci(c, v, D)), v);
  tv_t *in = BIN(AND, lw_cmp(c, "ge", w, lw_ci(c, w, 0)), lw_cmp(c, "lt", w, lw_ci(c, w, D)));
  *ok = lw_and_mask(c, *ok, in);
  return lw_cast(c, w, c->it);
}

/* ---- GatherND ---- */
static bool lower_gather_nd(drk_lctx_t *c) {
  const drk_node_t *n = c->node;
  const drk_value_t *x = n->inputs[0], *iv = n->inputs[1], *y = n->outputs[0];
  int rx = x->shape.rank, ri = iv->shape.rank;
  int64_t b = drk_node_attr_int(n, "batch_dims", 0);
  if (ri < 1) return lw_err(c, "indices must have rank >= 1");
  int64_t q = iv->shape.dims[ri - 1].size;
  if (b < 0 || b >= ri || b >= rx || q < 1 || b + q > rx)
    return lw_err(c, "batch_dims %lld and indices' last dim %lld do not fit data of rank %d", (long long)b, (long long)q, rx);
  for (int i = 0; i < b; i++)
    if (iv->shape.dims[i].size != x->shape.dims[i].size) return lw_err(c, "batch dim %d of indices and data differ", i);
  if (lw_numel(y) != prod(iv, 0, ri - 1) * prod(x, (int)(b + q), rx)) return lw_err(c, "result shape does not match GatherND's");
  int64_t xs[LW_MAX_RANK];
  lw_strides(x, xs);
  int64_t slice = prod(x, (int)(b + q), rx), per_batch = prod(iv, (int)b, ri - 1), bstride = prod(x, (int)b, rx);
  lw_kernel_begin(c, lw_index_dtype(n));
  tv_t *px = lw_param_buf(c, x, "x");
  tv_t *pi = lw_param_buf(c, iv, "indices");
  tv_t *py = lw_param_buf(c, y, "y");
  lw_flat_t f;
  lw_flat_begin(c, lw_numel(y), &f);
  /* offs = t * slice + s, t = bi * per_batch + j: tuple t of the indices */
  tv_t *t = slice > 1 ? BIN(DIV, f.offs, lw_ci(c, f.offs, slice)) : f.offs;
  tv_t *off = NULL, *ok = f.mask;
  if (b > 0) off = lw_addmul(c, NULL, per_batch > 1 ? BIN(DIV, t, lw_ci(c, t, per_batch)) : t, bstride);
  tv_t *tq = q > 1 ? BIN(MUL, t, lw_ci(c, t, q)) : t;
  for (int k = 0; k < q; k++) {
    tv_t *v = lw_load(c, pi, k ? BIN(ADD, tq, lw_ci(c, tq, k)) : tq, f.mask, 0);
    off = lw_addmul(c, off, wrap_index(c, v, x->shape.dims[b + k].size, &ok), xs[b + k]);
  }
  if (slice > 1) off = BIN(ADD, off, BIN(REM, f.offs, lw_ci(c, f.offs, slice)));
  lw_store(c, py, f.offs, lw_load(c, px, off, ok, 0), f.mask);
  lw_flat_end(c, &f);
  return true;
}

/* ---- ScatterND ---- */
typedef struct scatter {
  const drk_value_t *x, *iv, *u, *y;
  int mode; /* index into reductions[] */
  int q;
  int64_t slice, nupd, slots;
  int64_t sstr[LW_MAX_RANK]; /* slot strides of data dims 0..q-1 */
} scatter_t;

/* The slot (row-major over data dims 0..q-1) that tuple t addresses, -1 if an index is out
 * of range. t scalar: uniform scalar loads; t tile: loads masked by mask. */
static tv_t *tuple_slot(drk_lctx_t *c, const scatter_t *S, tv_t *pi, tv_t *t, tv_t *mask) {
  bool scalar = t->type.kind != DRK_TT_TILE;
  tv_t *tq = S->q > 1 ? BIN(MUL, t, lw_ci(c, t, S->q)) : t, *slot = NULL, *ok = NULL;
  for (int k = 0; k < S->q; k++) {
    tv_t *o = k ? BIN(ADD, tq, lw_ci(c, tq, k)) : tq;
    tv_t *v = scalar ? load_scalar(c, pi, o) : lw_load(c, pi, o, mask, 0);
    slot = lw_addmul(c, slot, wrap_index(c, v, S->x->shape.dims[k].size, &ok), S->sstr[k]);
  }
  return lw_sel(c, ok, slot, lw_ci(c, slot, -1));
}

/* The interpreter's fold of update b into a (both of the data dtype). */
static tv_t *scatter_combine(drk_lctx_t *c, int mode, tv_t *a, tv_t *b) {
  drk_dtype_t t = a->type.dtype;
  if (mode == 0) return b;
  if (t == DRK_DT_BOOL) return mode == 1 || mode == 3 ? BIN(OR, a, b) : BIN(AND, a, b);
  if (mode == 3) return lw_sel(c, lw_cmp(c, "gt", a, b), a, b);
  if (mode == 4) return lw_sel(c, lw_cmp(c, "lt", a, b), a, b);
  drk_dtype_t ct = lw_compute_dtype(t);
  tv_t *r = lw_bin(c, mode == 1 ? DRK_TOP_ADD : DRK_TOP_MUL, lw_cast(c, a, ct), lw_cast(c, b, ct));
  return lw_cast(c, r, t);
}

static void scatter_copy(drk_lctx_t *c, const scatter_t *S) {
  lw_kernel_begin(c, lw_index_dtype(c->node));
  tv_t *px = lw_param_buf(c, S->x, "x");
  tv_t *py = lw_param_buf(c, S->y, "y");
  lw_flat_t f;
  lw_flat_begin(c, lw_numel(S->x), &f);
  lw_store(c, py, f.offs, lw_load(c, px, f.offs, f.mask, 0), f.mask);
  lw_flat_end(c, &f);
}

/* One kernel over the output: acc = data, folded with every tuple that hits the slot. */
static void scatter_per_output(drk_lctx_t *c, const scatter_t *S) {
  lw_kernel_begin(c, lw_index_dtype(c->node));
  tv_t *px = lw_param_buf(c, S->x, "x");
  tv_t *pi = lw_param_buf(c, S->iv, "indices");
  tv_t *pu = lw_param_buf(c, S->u, "updates");
  tv_t *py = lw_param_buf(c, S->y, "y");
  lw_flat_t f;
  lw_flat_begin(c, lw_numel(S->x), &f);
  tv_t *slot = S->slice > 1 ? BIN(DIV, f.offs, lw_ci(c, f.offs, S->slice)) : f.offs;
  tv_t *s = S->slice > 1 ? BIN(REM, f.offs, lw_ci(c, f.offs, S->slice)) : NULL;
  tv_t *init = lw_load(c, px, f.offs, f.mask, 0);
  drk_tile_op_t *loop = drk_tile_build_for_begin(&c->b, lw_sci(c, c->it, 0), lw_sci(c, c->it, S->nupd),
                                                 lw_sci(c, c->it, 1), 1, &init);
  tv_t *t = loop->regions[0]->args[0], *acc = loop->regions[0]->args[1];
  tv_t *hit = BIN(AND, f.mask, lw_cmp(c, "eq", slot, lw_splat(c, tuple_slot(c, S, pi, t, NULL), &f.fr)));
  tv_t *uoff = lw_splat(c, S->slice > 1 ? BIN(MUL, t, lw_ci(c, t, S->slice)) : t, &f.fr);
  if (s) uoff = BIN(ADD, uoff, s);
  tv_t *upd = lw_load(c, pu, uoff, hit, 0);
  tv_t *next = lw_sel(c, hit, scatter_combine(c, S->mode, acc, upd), acc);
  loop = drk_tile_build_for_end(&c->b, 1, &next);
  lw_store(c, py, f.offs, loop->results[0], f.mask);
  lw_flat_end(c, &f);
}

/* After scatter_copy: one kernel over the update elements; the first tuple hitting a slot
 * folds (data, then the updates of every tuple hitting it, in order) and stores. */
static void scatter_per_update(drk_lctx_t *c, const scatter_t *S) {
  lw_kernel_begin(c, lw_index_dtype(c->node));
  tv_t *px = lw_param_buf(c, S->x, "x");
  tv_t *pi = lw_param_buf(c, S->iv, "indices");
  tv_t *pu = lw_param_buf(c, S->u, "updates");
  tv_t *py = lw_param_buf(c, S->y, "y");
  lw_flat_t f;
  lw_flat_begin(c, S->nupd * S->slice, &f);
  tv_t *te = S->slice > 1 ? BIN(DIV, f.offs, lw_ci(c, f.offs, S->slice)) : f.offs;
  tv_t *s = S->slice > 1 ? BIN(REM, f.offs, lw_ci(c, f.offs, S->slice)) : NULL;
  tv_t *mine = tuple_slot(c, S, pi, te, f.mask);
  tv_t *live = BIN(AND, f.mask, lw_cmp(c, "ge", mine, lw_ci(c, mine, 0)));
  tv_t *xoff = lw_addmul(c, NULL, mine, S->slice);
  if (s) xoff = BIN(ADD, xoff, s);
  tv_t *init[2] = {S->mode == 0 ? lw_cdt(c, f.offs, S->x->dtype, 0) : lw_load(c, px, xoff, live, 0),
                   lw_ci(c, f.offs, S->nupd)};
  drk_tile_op_t *loop = drk_tile_build_for_begin(&c->b, lw_sci(c, c->it, 0), lw_sci(c, c->it, S->nupd),
                                                 lw_sci(c, c->it, 1), 2, init);
  tv_t *t = loop->regions[0]->args[0], *acc = loop->regions[0]->args[1], *first = loop->regions[0]->args[2];
  tv_t *tt = lw_splat(c, t, &f.fr);
  tv_t *hit = BIN(AND, live, lw_cmp(c, "eq", mine, lw_splat(c, tuple_slot(c, S, pi, t, NULL), &f.fr)));
  tv_t *fold = BIN(AND, hit, lw_cmp(c, "ge", tt, te));
  tv_t *uoff = lw_splat(c, S->slice > 1 ? BIN(MUL, t, lw_ci(c, t, S->slice)) : t, &f.fr);
  if (s) uoff = BIN(ADD, uoff, s);
  tv_t *upd = lw_load(c, pu, uoff, fold, 0);
  tv_t *next[2] = {lw_sel(c, fold, scatter_combine(c, S->mode, acc, upd), acc), lw_sel(c, hit, BIN(MIN, first, tt), first)};
  loop = drk_tile_build_for_end(&c->b, 2, next);
  tv_t *owner = BIN(AND, live, lw_cmp(c, "eq", loop->results[1], te));
  lw_store(c, py, xoff, loop->results[0], owner);
  lw_flat_end(c, &f);
}

static bool lower_scatter_nd(drk_lctx_t *c) {
  const drk_node_t *n = c->node;
  scatter_t S = {.x = n->inputs[0], .iv = n->inputs[1], .u = n->inputs[2], .y = n->outputs[0]};
  S.mode = pick(drk_node_attr_string(n, "reduction", "none"), reductions);
  int rx = S.x->shape.rank, ri = S.iv->shape.rank;
  if (ri < 1) return lw_err(c, "indices must have rank >= 1");
  int64_t q = S.iv->shape.dims[ri - 1].size;
  if (q < 1 || q > rx) return lw_err(c, "indices' last dim %lld does not fit data of rank %d", (long long)q, rx);
  S.q = (int)q;
  if (S.u->dtype != S.x->dtype) return lw_err(c, "updates dtype differs from data");
  S.slice = prod(S.x, S.q, rx);
  S.nupd = prod(S.iv, 0, ri - 1);
  S.slots = prod(S.x, 0, S.q);
  if (lw_numel(S.u) != S.nupd * S.slice) return lw_err(c, "updates shape does not match indices and data");
  for (int k = S.q - 1; k >= 0; k--) S.sstr[k] = k == S.q - 1 ? 1 : S.sstr[k + 1] * S.x->shape.dims[k + 1].size;
  int64_t out = lw_numel(S.x);
  if (S.nupd == 0 || out == 0) {
    scatter_copy(c, &S);
    return true;
  }
  /* per output: out * T loop steps; per update: out copies + T * slice * T loop steps */
  double per_output = (double)out * (double)S.nupd;
  double per_update = (double)out + (double)S.nupd * (double)S.nupd * (double)S.slice;
  if (per_update < per_output) {
    scatter_copy(c, &S);
    scatter_per_update(c, &S);
  } else {
    scatter_per_output(c, &S);
  }
  return true;
}

/* ---- OneHot ---- */
static bool lower_one_hot(drk_lctx_t *c) {
  const drk_node_t *n = c->node;
  const drk_value_t *iv = n->inputs[0], *vals = n->inputs[2], *y = n->outputs[0];
  int r = y->shape.rank;
  if (r != iv->shape.rank + 1) return lw_err(c, "result rank %d is not the indices' rank + 1", r);
  int axis = drk_axis_norm(drk_node_attr_int(n, "axis", -1), r);
  if (axis < 0 || axis >= r) return lw_err(c, "axis out of range");
  if (lw_numel(vals) != 2) return lw_err(c, "values must have 2 elements");
  int64_t depth = y->shape.dims[axis].size, inner = prod(y, axis + 1, r);
  lw_kernel_begin(c, lw_index_dtype(n));
  tv_t *pi = lw_param_buf(c, iv, "indices");
  tv_t *pv = lw_param_buf(c, vals, "values");
  tv_t *py = lw_param_buf(c, y, "y");
  lw_flat_t f;
  lw_flat_begin(c, lw_numel(y), &f);
  int64_t dd[3] = {prod(y, 0, axis), depth, inner};
  tv_t *ioff = inner > 1 ? BIN(REM, f.offs, lw_ci(c, f.offs, inner)) : NULL;
  if (dd[0] > 1) ioff = lw_addmul(c, ioff, lw_coord(c, f.offs, 3, dd, 0), inner);
  if (!ioff) ioff = lw_ci(c, f.offs, 0);
  /* the interpreter's (int64_t) of the index (truncation for floats), + depth if negative */
  tv_t *v = lw_cast(c, lw_load(c, pi, ioff, f.mask, 0), DRK_DT_I64);
  v = lw_sel(c, lw_cmp(c, "lt", v, lw_ci(c, v, 0)), BIN(ADD, v, lw_ci(c, v, depth)), v);
  tv_t *on = lw_cmp(c, "eq", lw_cast(c, lw_coord(c, f.offs, 3, dd, 1), DRK_DT_I64), v);
  tv_t *zero = lw_sci(c, c->it, 0), *one = lw_sci(c, c->it, 1);
  tv_t *val = lw_sel(c, on, lw_splat(c, load_scalar(c, pv, one), &f.fr), lw_splat(c, load_scalar(c, pv, zero), &f.fr));
  lw_store(c, py, f.offs, val, f.mask);
  lw_flat_end(c, &f);
  return true;
}

/* ---- Resize ---- */
enum { RZ_MAX_TAPS = 256, RZ_UNROLL = 16 };

typedef struct resize {
  int mode, ct, nmode; /* indices into resize_modes, resize_ctms, nearest_modes */
  double A, extra;
  bool excl;
  int r;
  int64_t L[LW_MAX_RANK], O[LW_MAX_RANK];
  double s[LW_MAX_RANK], rs[LW_MAX_RANK], re[LW_MAX_RANK];
} resize_t;

/* The interpreter's source coordinate of output coordinate o along axis d (op_resize). */
static double rz_xi(const resize_t *z, int d, double xo) {
  double s = z->s[d], ow = s * (double)z->L[d];
  int64_t L = z->L[d];
  switch (z->ct) {
  case 0: return (xo + 0.5) / s - 0.5;
  case 1: {
    double adj = (double)z->O[d] / ow, center = (double)L / 2;
    return center * (1 - adj) + (xo + 0.5) / s - 0.5;
  }
  case 2: return ow > 1 ? (xo + 0.5) / s - 0.5 : -0.5;
  case 3: return ow == 1 ? 0 : xo * (double)(L - 1) / (ow - 1);
  case 4: return xo / s;
  case 6: return (xo + 0.5) / s;
  default:
    return ow > 1 ? z->rs[d] * (double)(L - 1) + xo * (z->re[d] - z->rs[d]) * (double)(L - 1) / (ow - 1)
                  : 0.5 * (z->rs[d] + z->re[d]) * (double)(L - 1);
  }
}

static void cubic_coeffs(double t, double A, double *c) {
  double r1 = t + 1, r2 = 1 - t, r3 = 2 - t;
  c[0] = ((A * r1 - 5 * A) * r1 + 8 * A) * r1 - 4 * A;
  c[1] = ((A + 2) * t - (A + 3)) * t * t + 1;
  c[2] = ((A + 2) * r2 - (A + 3)) * r2 * r2 + 1;
  c[3] = ((A * r3 - 5 * A) * r3 + 8 * A) * r3 - 4 * A;
}

/* Whether the interpreter's taps along axis d are the identity: every output coordinate o
 * reads input o with weight exactly 1 (its other taps weigh 0) and is not extrapolated. */
static bool rz_identity(const resize_t *z, int d) {
  int64_t L = z->L[d];
  if (L != z->O[d]) return false;
  for (int64_t o = 0; o < L; o++) {
    double xi = rz_xi(z, d, (double)o);
    if (z->ct == 5 && (xi < 0 || xi > (double)(L - 1))) return false;
    double f = floor(xi), fr = xi - f;
    if (z->mode == 0) {
      int64_t k = (int64_t)f;
      if (xi != f && (z->nmode == 3 || (z->nmode == 0 && fr > 0.5) || (z->nmode == 1 && fr >= 0.5))) k++;
      if ((k < 0 ? 0 : k >= L ? L - 1 : k) != o) return false;
      continue;
    }
    int n = z->mode == 1 ? 2 : 4;
    int64_t ix[4];
    double w[4];
    for (int k = 0; k < n; k++) ix[k] = (int64_t)f - (n == 4) + k;
    if (n == 2) w[0] = 1 - fr, w[1] = fr;
    else cubic_coeffs(fr, z->A, w);
    if (z->excl) {
      double sum = 0;
      for (int k = 0; k < n; k++) {
        if (ix[k] < 0 || ix[k] >= L) w[k] = 0;
        sum += w[k];
      }
      if (sum != 0)
        for (int k = 0; k < n; k++) w[k] /= sum;
    }
    int nz = 0;
    for (int k = 0; k < n; k++) {
      if (w[k] == 0) continue;
      int64_t i = ix[k] < 0 ? 0 : ix[k] >= L ? L - 1 : ix[k];
      if (++nz > 1 || w[k] != 1 || i != o) return false;
    }
    if (nz != 1) return false;
  }
  return true;
}

/* The constant parameters, as the interpreter derives them; checks the result shape. */
static bool rz_params(drk_lctx_t *c, resize_t *z) {
  const drk_node_t *n = c->node;
  const drk_value_t *x = n->inputs[0], *y = n->outputs[0];
  const drk_value_t *roi = n->n_inputs > 1 ? n->inputs[1] : NULL, *sc = n->n_inputs > 2 ? n->inputs[2] : NULL,
                    *sz = n->n_inputs > 3 ? n->inputs[3] : NULL;
  if (roi && lw_numel(roi) == 0) roi = NULL;
  if (sc && lw_numel(sc) == 0) sc = NULL;
  if (sz && lw_numel(sz) == 0) sz = NULL;
  if (!sc == !sz) return lw_err(c, "exactly one of scales and sizes must be given");
  const char *ctm = drk_node_attr_string(n, "coordinate_transformation_mode", "half_pixel");
  const char *nm = drk_node_attr_string(n, "nearest_mode", "round_prefer_floor");
  const char *kar = drk_node_attr_string(n, "keep_aspect_ratio_policy", "stretch");
  z->mode = pick(drk_node_attr_string(n, "mode", "nearest"), resize_modes);
  z->ct = pick(ctm, resize_ctms);
  z->nmode = pick(nm, nearest_modes);
  int kp = pick(kar, aspect_policies);
  if (z->ct < 0) return lw_err(c, "coordinate_transformation_mode '%s' is not supported", ctm);
  if (z->nmode < 0) return lw_err(c, "nearest_mode '%s' is not supported", nm);
  if (kp < 0) return lw_err(c, "keep_aspect_ratio_policy '%s' is not supported", kar);
  z->A = (float)drk_node_attr_float(n, "cubic_coeff_a", -0.75);
  z->excl = drk_node_attr_int(n, "exclude_outside", 0) != 0;
  z->extra = (float)drk_node_attr_float(n, "extrapolation_value", 0.0);
  int r = z->r = x->shape.rank;
  if (y->shape.rank != r) return lw_err(c, "result rank differs from the input's");
  size_t nax = 0;
  const int64_t *axattr = drk_node_attr_ints(n, "axes", &nax);
  int axes[LW_MAX_RANK];
  bool seen[LW_MAX_RANK] = {false};
  if (axattr) {
    if ((int)nax > r) return lw_err(c, "too many axes");
    for (size_t i = 0; i < nax; i++) {
      axes[i] = drk_axis_norm(axattr[i], r);
      if (axes[i] < 0 || axes[i] >= r || seen[axes[i]]) return lw_err(c, "axes out of range or repeated");
      seen[axes[i]] = true;
    }
  } else {
    nax = (size_t)r;
    for (int i = 0; i < r; i++) axes[i] = i;
  }
  int64_t od[LW_MAX_RANK];
  for (int i = 0; i < r; i++) {
    z->L[i] = x->shape.dims[i].size;
    z->O[i] = y->shape.dims[i].size;
    z->s[i] = 1;
    od[i] = z->L[i];
    z->rs[i] = 0;
    z->re[i] = 1;
  }
  if (sc) {
    if (sc->kind != DRK_VALUE_CONST || !sc->data) return lw_err(c, "scales must be a constant");
    if (!drk_dtype_is_float(sc->dtype) || lw_numel(sc) != (int64_t)nax) return lw_err(c, "scales must hold %zu floats", nax);
    for (size_t i = 0; i < nax; i++) {
      double s = drk_value_const_f64(sc, (int64_t)i);
      if (!(s > 0)) return lw_err(c, "scales must be positive");
      z->s[axes[i]] = s;
      od[axes[i]] = (int64_t)floor((double)z->L[axes[i]] * s);
    }
  } else if (kp == 0) {
    if (lw_numel(sz) != (int64_t)nax) return lw_err(c, "sizes must hold %zu values", nax);
    for (size_t i = 0; i < nax; i++) { /* the sizes are the inferred result dims */
      int a = axes[i];
      od[a] = z->O[a];
      z->s[a] = z->L[a] ? (double)od[a] / (double)z->L[a] : 1;
    }
  } else {
    int64_t v[LW_MAX_RANK];
    int nv;
    if (sz->kind != DRK_VALUE_CONST || !sz->data)
      return lw_err(c, "sizes must be a constant with keep_aspect_ratio_policy '%s'", kar);
    if (!lw_const_ints(c, sz, v, LW_MAX_RANK, &nv)) return false;
    if (nv != (int)nax) return lw_err(c, "sizes must hold %zu values", nax);
    double s = kp == 1 ? INFINITY : 0;
    for (size_t i = 0; i < nax; i++) {
      int a = axes[i];
      double q = z->L[a] ? (double)v[i] / (double)z->L[a] : 1;
      s = kp == 1 ? (q < s ? q : s) : (q > s ? q : s);
    }
    for (size_t i = 0; i < nax; i++) {
      z->s[axes[i]] = s;
      od[axes[i]] = (int64_t)nearbyint(s * (double)z->L[axes[i]]);
    }
  }
  if (z->ct == 5) {
    if (!roi || roi->kind != DRK_VALUE_CONST || !roi->data)
      return lw_err(c, "roi must be a constant for coordinate_transformation_mode tf_crop_and_resize");
    if (!drk_dtype_is_float(roi->dtype) || lw_numel(roi) != 2 * (int64_t)nax)
      return lw_err(c, "tf_crop_and_resize needs roi with %zu values", 2 * nax);
    for (size_t i = 0; i < nax; i++) {
      z->rs[axes[i]] = drk_value_const_f64(roi, (int64_t)i);
      z->re[axes[i]] = drk_value_const_f64(roi, (int64_t)(nax + i));
    }
  }
  for (int i = 0; i < r; i++) {
    if (od[i] != z->O[i])
      return lw_err(c, "result dim %d is %lld but the reference computes %lld from the scales/sizes", i,
                    (long long)z->O[i], (long long)od[i]);
    if (z->L[i] == 0 && z->O[i] > 0) return lw_err(c, "cannot resize an empty axis");
  }
  return true;
}

/* The source coordinate xi (f64 tile) of output coordinate o (index tile), with the same
 * operations as rz_xi in the same order; loop invariants computed here as there. */
static tv_t *rz_xi_tile(drk_lctx_t *c, const resize_t *z, int d, tv_t *o) {
  tv_t *xo = lw_cast(c, o, DRK_DT_F64);
  double s = z->s[d], ow = s * (double)z->L[d], Lm1 = (double)(z->L[d] - 1);
#define K(v) lw_cf(c, xo, (v))
  switch (z->ct) {
  case 0: return BIN(SUB, BIN(DIV, BIN(ADD, xo, K(0.5)), K(s)), K(0.5));
  case 1: {
    double adj = (double)z->O[d] / ow, center = (double)z->L[d] / 2;
    return BIN(SUB, BIN(ADD, K(center * (1 - adj)), BIN(DIV, BIN(ADD, xo, K(0.5)), K(s))), K(0.5));
  }
  case 2: return ow > 1 ? BIN(SUB, BIN(DIV, BIN(ADD, xo, K(0.5)), K(s)), K(0.5)) : K(-0.5);
  case 3: return ow == 1 ? K(0) : BIN(DIV, BIN(MUL, xo, K(Lm1)), K(ow - 1));
  case 4: return BIN(DIV, xo, K(s));
  case 6: return BIN(DIV, BIN(ADD, xo, K(0.5)), K(s));
  default:
    if (!(ow > 1)) return K(0.5 * (z->rs[d] + z->re[d]) * Lm1);
    return BIN(ADD, K(z->rs[d] * Lm1), BIN(DIV, BIN(MUL, BIN(MUL, xo, K(z->re[d] - z->rs[d])), K(Lm1)), K(ow - 1)));
  }
#undef K
}

/* taps of one resized axis: clamped input indices (index dtype) and weights (NULL: 1) */
typedef struct rz_axis {
  int d, n;
  tv_t *ix[4], *w[4];
} rz_axis_t;

static tv_t *clamp_i(drk_lctx_t *c, tv_t *v, int64_t lo, int64_t hi) {
  return BIN(MIN, BIN(MAX, v, lw_ci(c, v, lo)), lw_ci(c, v, hi));
}

/* f64 clamp by compare and select (no reliance on f64 max/min lowering) */
static tv_t *clamp_f(drk_lctx_t *c, tv_t *v, double lo, double hi) {
  v = lw_sel(c, lw_cmp(c, "lt", v, lw_cf(c, v, lo)), lw_cf(c, v, lo), v);
  return lw_sel(c, lw_cmp(c, "gt", v, lw_cf(c, v, hi)), lw_cf(c, v, hi), v);
}

/* Taps of axis a->d from xi, as the interpreter: nearest rounding, or floor + weights (in at)
 * with exclude_outside's renormalization, then indices clamped to the axis. */
static void rz_taps(drk_lctx_t *c, const resize_t *z, tv_t *xi, drk_dtype_t at, rz_axis_t *a) {
  int64_t L = z->L[a->d];
  tv_t *f = lw_un(c, DRK_TOP_FLOOR, xi), *fr = BIN(SUB, xi, f);
  if (z->mode == 0) {
    a->n = 1;
    a->w[0] = NULL;
    const char *pred = z->nmode == 0 ? "gt" : z->nmode == 1 ? "ge" : NULL; /* fr vs 0.5 */
    tv_t *up = pred ? lw_cmp(c, pred, fr, lw_cf(c, fr, 0.5)) : z->nmode == 3 ? lw_cmp(c, "gt", fr, lw_cf(c, fr, 0)) : NULL;
    tv_t *k = up ? lw_sel(c, up, BIN(ADD, f, lw_cf(c, f, 1)), f) : f;
    a->ix[0] = lw_cast(c, clamp_f(c, k, 0, (double)(L - 1)), c->it);
    return;
  }
  int n = a->n = z->mode == 1 ? 2 : 4;
  /* base clamped to [-8, L + 8] before the integer cast: all taps outside the axis stay
   * outside, so the exclusion and the clamping below see the same thing */
  tv_t *base = lw_cast(c, clamp_f(c, f, -8, (double)L + 8), c->it);
  tv_t *t = lw_cast(c, fr, at);
  tv_t *one = lw_cf(c, t, 1);
  if (n == 2) {
    a->w[0] = BIN(SUB, one, t);
    a->w[1] = t;
  } else {
    double A = z->A;
    tv_t *r[4] = {BIN(ADD, t, one), t, BIN(SUB, one, t), BIN(SUB, lw_cf(c, t, 2), t)};
    for (int k = 0; k < 4; k++) {
      tv_t *x = r[k], *p;
      if (k == 0 || k == 3) { /* ((A x - 5A) x + 8A) x - 4A */
        p = BIN(SUB, BIN(MUL, lw_cf(c, x, A), x), lw_cf(c, x, 5 * A));
        p = BIN(ADD, BIN(MUL, p, x), lw_cf(c, x, 8 * A));
        p = BIN(SUB, BIN(MUL, p, x), lw_cf(c, x, 4 * A));
      } else { /* ((A + 2) x - (A + 3)) x x + 1 */
        p = BIN(SUB, BIN(MUL, lw_cf(c, x, A + 2), x), lw_cf(c, x, A + 3));
        p = BIN(ADD, BIN(MUL, BIN(MUL, p, x), x), lw_cf(c, x, 1));
      }
      a->w[k] = p;
    }
  }
  for (int k = 0; k < n; k++) a->ix[k] = BIN(ADD, base, lw_ci(c, base, k - (n == 4)));
  if (z->excl) {
    tv_t *sum = NULL;
    for (int k = 0; k < n; k++) {
      tv_t *out = BIN(OR, lw_cmp(c, "lt", a->ix[k], lw_ci(c, base, 0)), lw_cmp(c, "ge", a->ix[k], lw_ci(c, base, L)));
      a->w[k] = lw_sel(c, out, lw_cf(c, t, 0), a->w[k]);
      sum = sum ? BIN(ADD, sum, a->w[k]) : BIN(ADD, lw_cf(c, t, 0), a->w[k]);
    }
    tv_t *nz = lw_cmp(c, "ne", sum, lw_cf(c, sum, 0));
    for (int k = 0; k < n; k++) a->w[k] = lw_sel(c, nz, BIN(DIV, a->w[k], sum), a->w[k]);
  }
  for (int k = 0; k < n; k++) a->ix[k] = clamp_i(c, a->ix[k], 0, L - 1);
}

/* The interpreter's sum over taps: in its order (last axis fastest), each weight the product
 * from the last axis to the first, zero-weight taps skipped (not loaded, not added). The
 * taps of the last axes, up to RZ_UNROLL of them, are unrolled; the combinations of the
 * other axes run in a `for` that selects their tap tiles by digit (code size stays bounded:
 * 256 unrolled taps take ptxas minutes). */
static tv_t *rz_accumulate(drk_lctx_t *c, const resize_t *z, tv_t *px, tv_t *base, tv_t *mask, const rz_axis_t *ax,
                           int nr, const int64_t *xs, drk_dtype_t at) {
  int per = z->mode == 1 ? 2 : 4, nin = 0, nout, inner = 1, outer = 1;
  while (nin < nr && inner * per <= RZ_UNROLL) nin++, inner *= per;
  nout = nr - nin;
  for (int j = 0; j < nout; j++) outer *= per;
  tv_t *acc = lw_cdt(c, base, at, 0), *ow[LW_MAX_RANK], *obase = base;
  drk_tile_op_t *loop = NULL;
  if (nout > 0) {
    loop = drk_tile_build_for_begin(&c->b, lw_sci(c, c->it, 0), lw_sci(c, c->it, outer), lw_sci(c, c->it, 1), 1, &acc);
    tv_t *iv = loop->regions[0]->args[0];
    acc = loop->regions[0]->args[1];
    int64_t stride = outer;
    for (int j = 0; j < nout; j++) { /* digit of axis j: (iv / per^(nout-1-j)) % per */
      stride /= per;
      tv_t *dg = stride > 1 ? BIN(DIV, iv, lw_ci(c, iv, stride)) : iv;
      if (j > 0) dg = BIN(REM, dg, lw_ci(c, dg, per));
      tv_t *ix = ax[j].ix[per - 1];
      ow[j] = ax[j].w[per - 1];
      for (int k = per - 2; k >= 0; k--) {
        tv_t *is = lw_splat(c, lw_cmp(c, "eq", dg, lw_ci(c, dg, k)), &base->type);
        ix = lw_sel(c, is, ax[j].ix[k], ix);
        ow[j] = lw_sel(c, is, ax[j].w[k], ow[j]);
      }
      obase = lw_addmul(c, obase, ix, xs[ax[j].d]);
    }
  }
  for (int tap = 0; tap < inner; tap++) {
    int kk[LW_MAX_RANK], rem = tap;
    for (int j = nr - 1; j >= nout; j--) {
      kk[j] = rem % per;
      rem /= per;
    }
    tv_t *off = obase, *w = NULL;
    for (int j = nout; j < nr; j++) off = lw_addmul(c, off, ax[j].ix[kk[j]], xs[ax[j].d]);
    for (int j = nr - 1; j >= 0; j--) {
      tv_t *wj = j >= nout ? ax[j].w[kk[j]] : ow[j];
      w = w ? BIN(MUL, w, wj) : wj;
    }
    tv_t *nz = lw_cmp(c, "ne", w, lw_cf(c, w, 0));
    tv_t *v = lw_cast(c, lw_load(c, px, off, BIN(AND, mask, nz), 0), at);
    acc = lw_sel(c, nz, BIN(ADD, acc, BIN(MUL, w, v)), acc);
  }
  if (loop) {
    loop = drk_tile_build_for_end(&c->b, 1, &acc);
    acc = loop->results[0];
  }
  return acc;
}

static bool lower_resize(drk_lctx_t *c) {
  const drk_node_t *n = c->node;
  const drk_value_t *x = n->inputs[0], *y = n->outputs[0];
  resize_t z = {0};
  if (!rz_params(c, &z)) return false;
  int r = z.r;
  int res[LW_MAX_RANK], nr = 0, ntaps = 1;
  for (int d = 0; d < r; d++)
    if (!rz_identity(&z, d)) res[nr++] = d;
  for (int j = 0; j < nr; j++) ntaps *= z.mode == 0 ? 1 : z.mode == 1 ? 2 : 4;
  if (ntaps > RZ_MAX_TAPS)
    return lw_err(c, "Resize %s over %d axes needs %d taps per element; at most %d are lowered for GPU",
                  resize_modes[z.mode], nr, ntaps, RZ_MAX_TAPS);
  drk_dtype_t dt = x->dtype;
  drk_dtype_t at = dt == DRK_DT_F64 || !drk_dtype_is_float(dt) ? DRK_DT_F64 : DRK_DT_F32;
  int64_t xs[LW_MAX_RANK], yd[LW_MAX_RANK];
  lw_strides(x, xs);
  for (int d = 0; d < r; d++) yd[d] = z.O[d];
  lw_kernel_begin(c, lw_index_dtype(n));
  tv_t *px = lw_param_buf(c, x, "x");
  tv_t *py = lw_param_buf(c, y, "y");
  lw_flat_t f;
  lw_flat_begin(c, lw_numel(y), &f);
  /* identity axes read the output coordinate; resized ones get taps */
  tv_t *base = NULL, *inside = NULL;
  rz_axis_t ax[LW_MAX_RANK];
  for (int d = 0, j = 0; d < r; d++) {
    if (yd[d] == 1 && (j >= nr || res[j] != d)) continue;
    tv_t *o = lw_coord(c, f.offs, r, yd, d);
    if (j >= nr || res[j] != d) {
      base = lw_addmul(c, base, o, xs[d]);
      continue;
    }
    tv_t *xi = rz_xi_tile(c, &z, d, o);
    if (z.ct == 5) { /* tf_crop_and_resize: outside [0, L-1] is extrapolated */
      tv_t *lo = lw_cmp(c, "ge", xi, lw_cf(c, xi, 0)), *hi = lw_cmp(c, "le", xi, lw_cf(c, xi, (double)(z.L[d] - 1)));
      inside = lw_and_mask(c, inside, BIN(AND, lo, hi));
    }
    ax[j].d = d;
    rz_taps(c, &z, xi, at, &ax[j]);
    j++;
  }
  if (!base) base = lw_ci(c, f.offs, 0);
  tv_t *mask = lw_and_mask(c, f.mask, inside), *out;
  if (z.mode == 0 || nr == 0) { /* nearest, or no axis resized (a copy; no taps to sum) */
    tv_t *off = base;
    for (int j = 0; j < nr; j++) off = lw_addmul(c, off, ax[j].ix[0], xs[ax[j].d]);
    out = lw_load(c, px, off, mask, 0);
    if (inside) out = lw_sel(c, inside, out, lw_cdt(c, out, dt, drk_dtype_is_float(dt) ? z.extra : nearbyint(z.extra)));
  } else {
    tv_t *acc = rz_accumulate(c, &z, px, base, mask, ax, nr, xs, at);
    if (inside) acc = lw_sel(c, inside, acc, lw_cf(c, acc, z.extra));
    if (!drk_dtype_is_float(dt)) acc = lw_cast(c, lw_un(c, DRK_TOP_RINT, acc), DRK_DT_I64); /* then wraps to dt */
    out = acc;
  }
  lw_store(c, py, f.offs, out, f.mask);
  lw_flat_end(c, &f);
  return true;
}

bool drk_lower_gather(drk_lctx_t *c) {
  switch (c->node->op) {
  case DRK_OP_GATHER_ND: return lower_gather_nd(c);
  case DRK_OP_SCATTER_ND: return lower_scatter_nd(c);
  case DRK_OP_ONE_HOT: return lower_one_hot(c);
  case DRK_OP_RESIZE: return lower_resize(c);
  default: return lw_err(c, "internal: not a gather-family op");
  }
}
