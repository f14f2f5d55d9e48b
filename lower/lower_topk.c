/* Lowering of TopK: values and int64 indices of the K first elements along one axis (axis
 * negative too), largest 0/1, K a constant.
 *
 * The input is viewed as rows x L (L: the axis length; a row is one (outer, inner) pair of
 * the other dims, at offset outer*L*inner + inner, its element l at + l*inner). A program
 * takes ROWS rows as [ROWS, COLS] tiles in the rows layout of lower/schedule.c (warps along
 * rows, so no `reduce` crosses warps). A `for` over K rounds carries, per row, the element
 * chosen last (value and index); round j scans the row in COLS chunks (an inner `for`) and
 * keeps, per lane, the first element in the output order among those that come strictly
 * after the last chosen one; three `reduce`s then pick the row's first (its class, NaN or
 * number; the best number; the smallest index among equals). The chosen element is loaded
 * again and written, bit-exact, as value j with its index.
 *
 * The order is the interpreter's (ir/interp_reduce.c): largest=1 descending with NaN first,
 * largest=0 ascending with NaN last; equal values (and NaNs among themselves, and -0.0 with
 * +0.0) by ascending index. sorted=0 gets the same sorted output (ONNX leaves that order
 * unspecified). Floats compare in f32 (f64 for f64), integers in i32 (i64 for i64).
 *
 * Cost: K rounds * ceil(L / COLS) chunk passes per program, each a load (from L1/L2 after
 * the first round) and about 25 ALU ops per element: O(K * L) per row. Fine for small K or
 * short rows; K ~ L on long rows (1e5) is quadratic and slow (a sort-based kernel is later
 * work). One program per ROWS rows: a single long row runs on one warp.
 *
 * Requires: static shapes; K a constant (a runtime K is reported as not lowered by
 * drk_lower_topk_supported, before shapes are checked). */
#include <math.h>
#include <string.h>

#include "lower/lower_internal.h"

#define BIN(op, a, b) lw_bin(c, DRK_TOP_##op, (a), (b))

static bool topk_dtype(drk_dtype_t t) {
  switch (t) {
  case DRK_DT_F64: case DRK_DT_F32: case DRK_DT_F16: case DRK_DT_BF16:
  case DRK_DT_I64: case DRK_DT_I32: case DRK_DT_I16: case DRK_DT_I8: case DRK_DT_U8:
    return true;
  default: return false;
  }
}

bool drk_lower_topk_supported(const drk_node_t *n, const char **why) {
  if (!topk_dtype(n->inputs[0]->dtype)) { *why = "dtype"; return false; }
  const drk_value_t *k = n->n_inputs > 1 ? n->inputs[1] : NULL;
  if (!k || k->kind != DRK_VALUE_CONST || !k->data) {
    *why = "K is a runtime input; freeze it with drkc --freeze-input=NAME=FILE";
    return false;
  }
  return true;
}

/* the [ROWS, COLS] frame of one program */
typedef struct tkf {
  drk_schedule_t s;
  const drk_tile_layout_t *P, *Lr, *Lc;
} tkf_t;

static tv_t *row2(drk_lctx_t *c, const tkf_t *f, tv_t *v) { return lw_bcast_row(c, v, f->P, f->s.rows, f->s.cols); }
static tv_t *col2(drk_lctx_t *c, const tkf_t *f, tv_t *v) { return lw_bcast_col(c, v, f->P, f->s.rows, f->s.cols); }

static tv_t *const_tile(drk_lctx_t *c, int rank, const int64_t *d, const drk_tile_layout_t *l, drk_dtype_t t, double v) {
  drk_tile_type_t ty = drk_tile_type_tile(t, rank, d, l);
  if (drk_dtype_is_float(t)) return drk_tile_build_const_float(&c->b, v, ty);
  return drk_tile_build_const_int(&c->b, (int64_t)v, ty);
}

static tv_t *full2(drk_lctx_t *c, const tkf_t *f, drk_dtype_t t, double v) {
  int64_t d[2] = {f->s.rows, f->s.cols};
  return const_tile(c, 2, d, f->P, t, v);
}

static tv_t *full_rows(drk_lctx_t *c, const tkf_t *f, drk_dtype_t t, double v) {
  int64_t d = f->s.rows;
  return const_tile(c, 1, &d, f->Lr, t, v);
}

/* reduce along the columns: [ROWS, COLS] -> [ROWS] */
static tv_t *reduce_cols(drk_lctx_t *c, const tkf_t *f, tv_t *t, const char *comb) {
  int64_t d = f->s.rows;
  drk_tile_op_t *op = drk_tile_build(&c->b, DRK_TOP_REDUCE, 1, &t, 1,
                                     (drk_tile_type_t[]){drk_tile_type_tile(t->type.dtype, 1, &d, f->Lr)});
  drk_tile_op_set_int(c->m, op, "axis", 1);
  drk_tile_op_set_ident(c->m, op, "combiner", comb);
  return op->results[0];
}

/* Whether a (at index ia) comes before b (at index ib) in the output order. */
static tv_t *precedes(drk_lctx_t *c, bool fl, bool largest, tv_t *a, tv_t *ia, tv_t *b, tv_t *ib) {
  tv_t *strict = lw_cmp(c, largest ? "gt" : "lt", a, b);
  tv_t *same = lw_cmp(c, "eq", a, b);
  if (fl) {
    tv_t *an = lw_cmp(c, "ne", a, a), *bn = lw_cmp(c, "ne", b, b); /* NaN */
    tv_t *aok = lw_cmp(c, "eq", a, a), *bok = lw_cmp(c, "eq", b, b);
    strict = BIN(OR, strict, largest ? BIN(AND, an, bok) : BIN(AND, aok, bn));
    same = BIN(OR, same, BIN(AND, an, bn));
  }
  return BIN(OR, strict, BIN(AND, same, lw_cmp(c, "lt", ia, ib)));
}

static tv_t *scaled(drk_lctx_t *c, tv_t *v, int64_t k) { return k == 1 ? v : BIN(MUL, v, lw_ci(c, v, k)); }

/* The row's first remaining element, from the per-lane candidates (bv, bi; bi == L: none). */
static tv_t *pick(drk_lctx_t *c, const tkf_t *f, bool fl, bool largest, drk_dtype_t at, int64_t L, tv_t *bv, tv_t *bi) {
  tv_t *none = lw_ci(c, bi, L);
  tv_t *valid = lw_cmp(c, "ne", bi, none);
  tv_t *hit;
  if (fl) {
    /* class: 2 comes first (NaN when largest, numbers otherwise), 1 second, 0 no candidate */
    tv_t *isn = lw_cmp(c, "ne", bv, bv);
    tv_t *p1 = full2(c, f, DRK_DT_I32, largest ? 2 : 1), *p2 = full2(c, f, DRK_DT_I32, largest ? 1 : 2);
    tv_t *pri = lw_sel(c, valid, lw_sel(c, isn, p1, p2), full2(c, f, DRK_DT_I32, 0));
    tv_t *incls = lw_cmp(c, "eq", pri, row2(c, f, reduce_cols(c, f, pri, "max")));
    tv_t *num = BIN(AND, incls, lw_cmp(c, "eq", bv, bv));
    tv_t *vm = lw_sel(c, num, bv, lw_cf(c, bv, largest ? -INFINITY : INFINITY));
    tv_t *m = row2(c, f, reduce_cols(c, f, vm, largest ? "max" : "min"));
    hit = BIN(AND, incls, BIN(OR, isn, lw_cmp(c, "eq", bv, m)));
  } else {
    int64_t lo = at == DRK_DT_I64 ? INT64_MIN : INT32_MIN, hi = at == DRK_DT_I64 ? INT64_MAX : INT32_MAX;
    tv_t *vm = lw_sel(c, valid, bv, lw_ci(c, bv, largest ? lo : hi));
    tv_t *m = row2(c, f, reduce_cols(c, f, vm, largest ? "max" : "min"));
    hit = BIN(AND, valid, lw_cmp(c, "eq", bv, m));
  }
  return reduce_cols(c, f, lw_sel(c, hit, bi, none), "min");
}

bool drk_lower_topk(drk_lctx_t *c) {
  const drk_node_t *n = c->node;
  const drk_value_t *x = n->inputs[0];
  const drk_value_t *yv = n->outputs[0], *yi = n->n_outputs > 1 ? n->outputs[1] : NULL;
  int r = x->shape.rank;
  if (r < 1) return lw_err(c, "TopK needs an input of rank >= 1");
  int64_t axis_attr = drk_node_attr_int(n, "axis", -1);
  int axis = drk_axis_norm(axis_attr, r);
  if (axis < 0 || axis >= r) return lw_err(c, "axis %lld out of range for rank %d", (long long)axis_attr, r);
  int64_t kv[1];
  int nk = 0;
  if (!lw_const_ints(c, n->inputs[1], kv, 1, &nk)) return false;
  if (nk != 1) return lw_err(c, "K must have one element");
  int64_t K = kv[0], L = x->shape.dims[axis].size, outer = 1, inner = 1;
  if (K < 0 || K > L) return lw_err(c, "K=%lld out of range for axis length %lld", (long long)K, (long long)L);
  for (int d = 0; d < r; d++) {
    if (d < axis) outer *= x->shape.dims[d].size;
    if (d > axis) inner *= x->shape.dims[d].size;
  }
  for (int o = 0; o < 2; o++) {
    const drk_value_t *y = o ? yi : yv;
    if (!y) continue;
    if (y->shape.rank != r || y->shape.dims[axis].size != K)
      return lw_err(c, "result '%s' does not have K=%lld along axis %d", y->name, (long long)K, axis);
  }
  if (yi && yi->dtype != DRK_DT_I64) return lw_err(c, "Indices must be i64, not %s", drk_dtype_name(yi->dtype));
  bool largest = drk_node_attr_int(n, "largest", 1) != 0;
  bool fl = drk_dtype_is_float(x->dtype);
  drk_dtype_t at = lw_compute_dtype(x->dtype);
  if (!fl && at != DRK_DT_I64) at = DRK_DT_I32;
  int64_t rows = outer * inner;

  tkf_t f;
  bool contig = inner == 1;
  f.s = drk_sched_rows(rows, L, contig, 0, &c->o.knobs);
  /* narrower chunks than a plain reduction: each lane carries a value and an index */
  if (contig && f.s.cols > 256) f.s.cols = 256;
  if (!contig && f.s.cols > 16) f.s.cols = 16;
  f.s.kind = "topk";
  int64_t big = lw_numel(x) + f.s.cols;
  drk_dtype_t it = lw_index_dtype_for(big);
  lw_kernel_begin(c, it);
  tv_t *px = lw_param_buf(c, x, "x");
  tv_t *pv = yv ? lw_param_buf(c, yv, "values") : NULL;
  tv_t *pi = yi ? lw_param_buf(c, yi, "indices") : NULL;
  f.P = drk_sched_rows_layout(c->m, &f.s, contig);
  f.Lr = drk_tile_layout_slice(c->m, f.P, 1);
  f.Lc = drk_tile_layout_slice(c->m, f.P, 0);
  c->lay = f.P;

  tv_t *ri = lw_cast(c, lw_range(c, f.s.rows, f.Lr), it);
  tv_t *row = BIN(ADD, lw_splat(c, BIN(MUL, lw_pid(c, 0), lw_sci(c, it, f.s.rows)), &ri->type), ri);
  tv_t *rmask = lw_cmp(c, "lt", row, lw_ci(c, row, rows));
  int64_t rd[2] = {outer, inner}, xs[2] = {L * inner, 1}, ys[2] = {K * inner, 1};
  tv_t *xbase = lw_affine(c, row, 2, rd, xs, 0), *ybase = lw_affine(c, row, 2, rd, ys, 0);
  tv_t *xbase2 = row2(c, &f, xbase), *rmask2 = row2(c, &f, rmask);
  tv_t *cidx = lw_cast(c, lw_range(c, f.s.cols, f.Lc), it);

  /* rounds: carry the last chosen value and index per row (index -1: none yet) */
  tv_t *rinit[2] = {full_rows(c, &f, at, 0), full_rows(c, &f, it, -1)};
  drk_tile_op_t *rl = drk_tile_build_for_begin(&c->b, lw_sci(c, it, 0), lw_sci(c, it, K), lw_sci(c, it, 1), 2, rinit);
  tv_t *j = rl->regions[0]->args[0], *pval = rl->regions[0]->args[1], *pidx = rl->regions[0]->args[2];
  tv_t *pval2 = row2(c, &f, pval), *pidx2 = row2(c, &f, pidx);
  tv_t *first2 = row2(c, &f, lw_cmp(c, "lt", pidx, lw_ci(c, pidx, 0)));

  /* chunks: the per-lane first eligible element (index L: none) */
  tv_t *cinit[2] = {full2(c, &f, at, 0), full2(c, &f, it, (double)L)};
  drk_tile_op_t *cl = drk_tile_build_for_begin(&c->b, lw_sci(c, it, 0), lw_sci(c, it, L), lw_sci(c, it, f.s.cols), 2, cinit);
  tv_t *kb = cl->regions[0]->args[0], *bv = cl->regions[0]->args[1], *bi = cl->regions[0]->args[2];
  tv_t *col = BIN(ADD, lw_splat(c, kb, &cidx->type), cidx);
  tv_t *cm2 = BIN(AND, rmask2, col2(c, &f, lw_cmp(c, "lt", col, lw_ci(c, col, L))));
  tv_t *colt = col2(c, &f, col);
  tv_t *off2 = BIN(ADD, xbase2, col2(c, &f, scaled(c, col, inner)));
  tv_t *xv = lw_cast(c, lw_load(c, px, off2, cm2, 0), at);
  tv_t *elig = BIN(AND, cm2, BIN(OR, first2, precedes(c, fl, largest, pval2, pidx2, xv, colt)));
  tv_t *better = BIN(AND, elig, BIN(OR, lw_cmp(c, "eq", bi, lw_ci(c, bi, L)), precedes(c, fl, largest, xv, colt, bv, bi)));
  tv_t *cy[2] = {lw_sel(c, better, xv, bv), lw_sel(c, better, colt, bi)};
  cl = drk_tile_build_for_end(&c->b, 2, cy);

  tv_t *idx = pick(c, &f, fl, largest, at, L, cl->results[0], cl->results[1]);
  tv_t *val = lw_load(c, px, BIN(ADD, xbase, scaled(c, idx, inner)), rmask, 0); /* the element itself */
  tv_t *yo = BIN(ADD, ybase, lw_splat(c, scaled(c, j, inner), &ybase->type));
  if (pv) lw_store(c, pv, yo, val, rmask);
  if (pi) lw_store(c, pi, yo, lw_cast(c, idx, DRK_DT_I64), rmask);
  tv_t *ry[2] = {lw_cast(c, val, at), idx};
  drk_tile_build_for_end(&c->b, 2, ry);
  lw_kernel_end(c, (rows + f.s.rows - 1) / f.s.rows, 1, 1, f.s.warps, 0, &f.s);
  return true;
}
