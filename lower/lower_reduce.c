/* Lowering of reductions and normalizations: Reduce*, ArgMax/ArgMin, Softmax, LogSoftmax,
 * LayerNormalization, InstanceNormalization, GroupNormalization, GlobalAverage/MaxPool
 * (row reductions), CumSum and ReduceProd (sequential per row), BatchNormalization
 * (inference: elementwise, lower_ew.c).
 *
 * Row reductions view the input as rows x R (R = the reduced elements of one output): each
 * program takes ROWS rows; a loop over R in chunks of COLS carries [ROWS, COLS] accumulators
 * and one `reduce` along axis 1 ends it. Row and column offsets are unravelled separately
 * (kept dims with their strides, reduced dims with theirs) and added as broadcasts.
 *
 * Requires: static shapes. Guarantees: f16/bf16 accumulate in f32, f64 in f64, integers in
 * i64; warps are laid along rows so no reduction crosses warps. */
#include <math.h>
#include <string.h>

#include "lower/lower_internal.h"

#define BIN(op, a, b) lw_bin(c, DRK_TOP_##op, (a), (b))
#define UN(op, a) lw_un(c, DRK_TOP_##op, (a))

static bool is_row_op(drk_op_t op) {
  switch (op) {
  case DRK_OP_REDUCE_SUM: case DRK_OP_REDUCE_MEAN: case DRK_OP_REDUCE_MAX: case DRK_OP_REDUCE_MIN:
  case DRK_OP_REDUCE_L2: case DRK_OP_REDUCE_SUM_SQUARE: case DRK_OP_REDUCE_LOG_SUM_EXP: case DRK_OP_ARG_MAX:
  case DRK_OP_ARG_MIN: case DRK_OP_SOFTMAX: case DRK_OP_LOG_SOFTMAX: case DRK_OP_LAYER_NORMALIZATION:
  case DRK_OP_INSTANCE_NORMALIZATION: case DRK_OP_GROUP_NORMALIZATION: case DRK_OP_GLOBAL_AVERAGE_POOL:
  case DRK_OP_GLOBAL_MAX_POOL:
    return true;
  default: return false;
  }
}

static bool float_op(drk_op_t op) {
  return op != DRK_OP_REDUCE_SUM && op != DRK_OP_REDUCE_MAX && op != DRK_OP_REDUCE_MIN && op != DRK_OP_ARG_MAX &&
         op != DRK_OP_ARG_MIN && op != DRK_OP_REDUCE_PROD && op != DRK_OP_CUM_SUM && op != DRK_OP_GLOBAL_MAX_POOL;
}

bool drk_lower_reduce_supported(const drk_node_t *n, const char **why) {
  if (n->op == DRK_OP_BATCH_NORMALIZATION) return drk_lower_ew_supported(n, why);
  if (!is_row_op(n->op) && n->op != DRK_OP_REDUCE_PROD && n->op != DRK_OP_CUM_SUM) { *why = "op not lowered"; return false; }
  drk_dtype_t t = n->inputs[0]->dtype;
  bool fl = t == DRK_DT_F64 || t == DRK_DT_F32 || t == DRK_DT_F16 || t == DRK_DT_BF16;
  bool in = t == DRK_DT_I64 || t == DRK_DT_I32 || t == DRK_DT_I16 || t == DRK_DT_I8 || t == DRK_DT_U8;
  if (!fl && !(in && !float_op(n->op))) { *why = "dtype"; return false; }
  if (n->op == DRK_OP_LAYER_NORMALIZATION && n->n_inputs > 1 && n->inputs[1] && n->inputs[1]->dtype != t) { *why = "mixed dtypes"; return false; }
  return true;
}

static drk_dtype_t acc_dtype(drk_dtype_t t) {
  if (t == DRK_DT_F64) return DRK_DT_F64;
  if (drk_dtype_is_float(t)) return DRK_DT_F32;
  return DRK_DT_I64;
}

/* a row view of x */
typedef struct rv {
  const drk_value_t *x;
  int nk, nr;
  int64_t kd[LW_MAX_RANK], ks[LW_MAX_RANK], rd[LW_MAX_RANK], rs[LW_MAX_RANK];
  int64_t rows, R;
  bool contig;
  bool may_split; /* set before rv_begin: the kernel can split its rows (plain reductions) */
  int64_t cps;    /* split: chunks of COLS per program along R */
  bool one;       /* one chunk covers the row (no split): no loops, the chunk is made once and
                     its load kept (registers) for every pass */
  tv_t *xc;       /* one: the row's load (load_chunk), made by the first pass */
  tv_t *lb, *ub;  /* split: this program's range of R */
  drk_schedule_t s;
  const drk_tile_layout_t *P, *Lr, *Lc;
  tv_t *px;
  tv_t *row, *rmask, *rowoff, *rowoff2, *rmask2, *ci;
  tv_t *nrows; /* runtime sizes: the row count parameter (not split: split rows index their
                  scratch by the row count), else NULL */
  /* per chunk */
  tv_t *col, *cmask, *off2, *mask2, *col2;
} rv_t;

static void rv_init(rv_t *v, const drk_value_t *x, uint32_t red_mask) {
  memset(v, 0, sizeof *v);
  v->x = x;
  int64_t st[LW_MAX_RANK];
  lw_strides(x, st);
  v->rows = 1;
  v->R = 1;
  for (int i = 0; i < x->shape.rank; i++) {
    int64_t d = x->shape.dims[i].size;
    if (red_mask & (1u << i)) {
      v->rd[v->nr] = d;
      v->rs[v->nr++] = st[i];
      v->R *= d;
    } else {
      v->kd[v->nk] = d;
      v->ks[v->nk++] = st[i];
      v->rows *= d;
    }
  }
  v->contig = v->nr == 0 || v->rs[v->nr - 1] == 1;
}

static void rv_begin(drk_lctx_t *c, rv_t *v) {
  v->s = drk_sched_rows(v->rows, v->R, v->contig, lw_target_sms(&c->o), &c->o.knobs);
  if (!v->contig) drk_sched_rows_vec(&v->s, drk_dtype_bits(v->x->dtype) / 8);
  /* single-node kernels keep only x's chunk live: up to 64 elements per thread */
  if (v->contig)
    drk_sched_rows_whole(&v->s, v->rows, v->R, drk_dtype_bits(v->x->dtype) / 8, lw_target_sms(&c->o), 64, v->may_split,
                         &c->o.knobs);
  if (v->may_split) v->cps = drk_sched_rows_split_plan(&v->s, v->rows, v->R, v->contig, lw_target_sms(&c->o), &c->o.knobs);
  /* one chunk per program: the whole row, or (split rows) all of this program's columns */
  v->one = v->s.split_rows <= 1 ? v->R <= v->s.cols : v->cps == 1;
  v->xc = v->col = NULL;
  v->P = drk_sched_rows_layout(c->m, &v->s, v->contig);
  v->Lr = drk_tile_layout_slice(c->m, v->P, 1);
  v->Lc = drk_tile_layout_slice(c->m, v->P, 0);
  tv_t *ri = lw_cast(c, lw_range(c, v->s.rows, v->Lr), c->it);
  tv_t *base = BIN(MUL, lw_pid(c, 0), lw_sci(c, c->it, v->s.rows));
  v->row = BIN(ADD, lw_splat(c, base, &ri->type), ri);
  v->nrows = v->s.split_rows <= 1 ? lw_size_param(c, "rows", v->rows) : NULL;
  v->rmask = lw_size_lt(c, v->row, v->nrows, v->rows);
  v->rowoff = lw_affine(c, v->row, v->nk, v->kd, v->ks, 0);
  v->rowoff2 = lw_bcast_row(c, v->rowoff, v->P, v->s.rows, v->s.cols);
  /* whole row tiles: no row mask on the loads, so that the backend can see runs of rows
   * (strided rows' 16-byte vectors) */
  v->rmask2 = v->rows % v->s.rows ? lw_bcast_row(c, v->rmask, v->P, v->s.rows, v->s.cols) : NULL;
  v->ci = lw_cast(c, lw_range(c, v->s.cols, v->Lc), c->it);
}

static void rv_chunk(drk_lctx_t *c, rv_t *v, tv_t *kb) {
  v->col = BIN(ADD, lw_splat(c, kb, &v->ci->type), v->ci);
  v->cmask = lw_cmp(c, "lt", v->col, lw_ci(c, v->col, v->R));
  tv_t *coff = lw_affine(c, v->col, v->nr, v->rd, v->rs, 0);
  v->off2 = BIN(ADD, v->rowoff2, lw_bcast_col(c, coff, v->P, v->s.rows, v->s.cols));
  v->mask2 = lw_bcast_col(c, v->cmask, v->P, v->s.rows, v->s.cols);
  if (v->rmask2) v->mask2 = BIN(AND, v->rmask2, v->mask2);
  v->col2 = NULL;
}

static tv_t *rv_col2(drk_lctx_t *c, rv_t *v) {
  if (!v->col2) v->col2 = lw_bcast_col(c, v->col, v->P, v->s.rows, v->s.cols);
  return v->col2;
}

static drk_tile_op_t *rv_loop_begin(drk_lctx_t *c, rv_t *v, int n, tv_t **init) {
  if (v->s.split_rows > 1 && !v->lb) {
    v->lb = BIN(MUL, lw_pid(c, 1), lw_sci(c, c->it, v->cps * v->s.cols));
    v->ub = BIN(ADD, v->lb, lw_sci(c, c->it, v->cps * v->s.cols));
  }
  drk_tile_op_t *f = drk_tile_build_for_begin(&c->b, v->lb ? v->lb : lw_sci(c, c->it, 0), v->ub ? v->ub : lw_sci(c, c->it, v->R),
                                               lw_sci(c, c->it, v->s.cols), n, init);
  rv_chunk(c, v, f->regions[0]->args[0]);
  return f;
}

/* for kb in [0, R) step COLS; split: [lb, ub), this program's chunks (columns past R masked).
 * acc[0..n-1]: the carried values inside the loop. One chunk (v->one: the row, or a split
 * program's columns): no loop, acc are init and the chunk (columns 0..COLS-1, or lb..) is made
 * once, at the first pass. */
static void rv_pass(drk_lctx_t *c, rv_t *v, int n, tv_t **init, tv_t **acc) {
  if (v->one) {
    if (v->s.split_rows > 1 && !v->lb) {
      v->lb = BIN(MUL, lw_pid(c, 1), lw_sci(c, c->it, v->cps * v->s.cols));
      v->ub = BIN(ADD, v->lb, lw_sci(c, c->it, v->cps * v->s.cols));
    }
    if (!v->col) rv_chunk(c, v, v->lb ? v->lb : lw_sci(c, c->it, 0));
    for (int i = 0; i < n; i++) acc[i] = init[i];
    return;
  }
  drk_tile_op_t *f = rv_loop_begin(c, v, n, init);
  for (int i = 0; i < n; i++) acc[i] = f->regions[0]->args[1 + i];
}

/* the end of rv_pass: res[0..n-1] the carried values after the loop (one chunk: y) */
static void rv_pass_end(drk_lctx_t *c, rv_t *v, int n, tv_t **y, tv_t **res) {
  if (v->one) {
    for (int i = 0; i < n; i++) res[i] = y[i];
    return;
  }
  drk_tile_op_t *f = drk_tile_build_for_end(&c->b, n, y);
  for (int i = 0; i < n; i++) res[i] = f->results[i];
}


static tv_t *acc_tile(drk_lctx_t *c, rv_t *v, drk_dtype_t t, double init) {
  int64_t d[2] = {v->s.rows, v->s.cols};
  drk_tile_type_t ty = drk_tile_type_tile(t, 2, d, v->P);
  if (drk_dtype_is_float(t)) return drk_tile_build_const_float(&c->b, init, ty);
  if (init >= 9.2e18) return drk_tile_build_const_int(&c->b, INT64_MAX, ty);
  if (init <= -9.2e18) return drk_tile_build_const_int(&c->b, INT64_MIN, ty);
  return drk_tile_build_const_int(&c->b, (int64_t)init, ty);
}

static tv_t *reduce(drk_lctx_t *c, rv_t *v, tv_t *t, const char *comb) {
  int64_t d = v->s.rows;
  drk_tile_op_t *op = drk_tile_build(&c->b, DRK_TOP_REDUCE, 1, &t, 1,
                                     (drk_tile_type_t[]){drk_tile_type_tile(t->type.dtype, 1, &d, v->Lr)});
  drk_tile_op_set_int(c->m, op, "axis", 1);
  drk_tile_op_set_ident(c->m, op, "combiner", comb);
  return op->results[0];
}

/* x's chunk as dtype at, `other` in the masked lanes. One chunk per row: the first pass's load
 * serves every later pass (their masked lanes are selected away or not stored, so only the
 * first pass's `other` matters: -inf for a max, 0 for a sum). */
static tv_t *load_chunk(drk_lctx_t *c, rv_t *v, double other, drk_dtype_t at) {
  if (v->one && v->xc && v->xc->type.dtype == at) return v->xc;
  tv_t *x = lw_cast(c, lw_load(c, v->px, v->off2, v->mask2, other), at);
  if (v->one) v->xc = x;
  return x;
}

/* The row max over the row's chunks (split rows: this program's columns), with rows of all
 * -inf mapped to 0 so exp(x - max) stays finite (softmax, LogSumExp). */
static tv_t *row_max(drk_lctx_t *c, rv_t *v, drk_dtype_t at) {
  tv_t *init = acc_tile(c, v, at, -INFINITY), *acc, *fr;
  rv_pass(c, v, 1, &init, &acc);
  tv_t *nacc = BIN(MAX, acc, load_chunk(c, v, -INFINITY, at));
  rv_pass_end(c, v, 1, &nacc, &fr);
  tv_t *m = reduce(c, v, fr, "max");
  return lw_sel(c, lw_cmp(c, "eq", m, lw_cf(c, m, -INFINITY)), lw_cf(c, m, 0), m);
}


static void rv_end(drk_lctx_t *c, rv_t *v) {
  lw_kernel_end(c, (v->rows + v->s.rows - 1) / v->s.rows, v->s.split_rows > 1 ? v->s.split_rows : 1, 1, v->s.warps, 0,
                &v->s);
  lw_grid_from(c, 0, v->nrows, v->s.rows);
}

static double lowest(drk_dtype_t t) {
  if (drk_dtype_is_float(t)) return -INFINITY;
  switch (t) {
  case DRK_DT_I32: return -2147483648.0;
  case DRK_DT_I16: return -32768;
  case DRK_DT_I8: return -128;
  case DRK_DT_U8: return 0;
  default: return -1e19;
  }
}

static double highest(drk_dtype_t t) {
  if (drk_dtype_is_float(t)) return INFINITY;
  switch (t) {
  case DRK_DT_I32: return 2147483647.0;
  case DRK_DT_I16: return 32767;
  case DRK_DT_I8: return 127;
  case DRK_DT_U8: return 255;
  default: return 1e19;
  }
}

/* reduced axes of a Reduce* node (bit mask); *noop: identity */
static bool reduce_axes(drk_lctx_t *c, uint32_t *mask, bool *noop) {
  const drk_node_t *n = c->node;
  int r = n->inputs[0]->shape.rank;
  int64_t ax[LW_MAX_RANK * 2];
  int na = 0;
  *noop = false;
  if (n->n_inputs > 1 && n->inputs[1]) {
    if (!lw_const_ints(c, n->inputs[1], ax, LW_MAX_RANK * 2, &na)) return false;
  } else {
    size_t cnt = 0;
    const int64_t *a = drk_node_attr_ints(n, "axes", &cnt);
    for (size_t i = 0; a && i < cnt && i < LW_MAX_RANK * 2; i++) ax[na++] = a[i];
  }
  *mask = 0;
  if (na == 0) {
    if (drk_node_attr_int(n, "noop_with_empty_axes", 0)) *noop = true;
    else *mask = r ? (1u << r) - 1 : 0;
    return true;
  }
  for (int i = 0; i < na; i++) {
    int a = drk_axis_norm(ax[i], r);
    if (a < 0 || a >= r) return lw_err(c, "axis %lld out of range", (long long)ax[i]);
    *mask |= 1u << a;
  }
  return true;
}

/* What follows the sum of a row: the mean's division, ReduceL2's root. */
static tv_t *row_finish(drk_lctx_t *c, drk_op_t op, tv_t *res, int64_t R) {
  if (op == DRK_OP_REDUCE_MEAN || op == DRK_OP_GLOBAL_AVERAGE_POOL) res = BIN(DIV, res, lw_cf(c, res, (double)R));
  if (op == DRK_OP_REDUCE_L2) res = UN(SQRT, res);
  return res;
}

/* Split rows, kernel 2 (`k<i>_<Op>_1`): flat over the rows, combines the SP partials of scratch
 * `ws` (dtype at) in split order (deterministic, like split-K's sum kernel), finishes the row
 * and stores y. */
static bool split_finish(drk_lctx_t *c, int ws, int64_t SP, int64_t rows, int64_t R, drk_dtype_t at, drk_tile_opcode_t comb) {
  const drk_node_t *n = c->node;
  lw_kernel_begin(c, SP * rows < ((int64_t)1 << 31) - 65536 ? DRK_DT_I32 : DRK_DT_I64);
  tv_t *pw = lw_param_scratch(c, ws, at, "ws");
  tv_t *py = lw_param_buf(c, n->outputs[0], "y");
  lw_flat_t F;
  lw_flat_begin(c, rows, &F);
  tv_t *res = lw_load(c, pw, F.offs, F.mask, 0);
  for (int64_t i = 1; i < SP; i++)
    res = lw_bin(c, comb, res, lw_load(c, pw, BIN(ADD, F.offs, lw_ci(c, F.offs, i * rows)), F.mask, 0));
  lw_store(c, py, F.offs, row_finish(c, n->op, res, R), F.mask);
  lw_flat_end(c, &F);
  return true;
}

static bool lower_row_reduce(drk_lctx_t *c, uint32_t mask) {
  const drk_node_t *n = c->node;
  const drk_value_t *x = n->inputs[0], *y = n->outputs[0];
  drk_dtype_t at = acc_dtype(x->dtype);
  drk_op_t op = n->op;
  bool is_max = op == DRK_OP_REDUCE_MAX || op == DRK_OP_GLOBAL_MAX_POOL;
  bool is_min = op == DRK_OP_REDUCE_MIN;
  if (is_max || is_min) at = lw_compute_dtype(x->dtype);
  rv_t v;
  rv_init(&v, x, mask);
  v.may_split = op != DRK_OP_REDUCE_LOG_SUM_EXP;
  lw_kernel_begin(c, lw_index_dtype(n));
  v.px = lw_param_buf(c, x, "x");
  tv_t *py = lw_param_buf(c, y, "y");
  rv_begin(c, &v);
  int ws = -1;
  if (v.s.split_rows > 1) { /* kernel 1 stores its partial, kernel 2 (split_finish) the rest */
    ws = lw_scratch_new(c, (uint64_t)(v.s.split_rows * v.rows) * (uint64_t)drk_dtype_bits(at) / 8);
    py = lw_param_scratch(c, ws, at, "ws");
  }
  tv_t *res;
  if (is_max || is_min) {
    double id = is_max ? lowest(at) : highest(at);
    tv_t *init = acc_tile(c, &v, at, id);
    tv_t *acc;
    rv_pass(c, &v, 1, &init, &acc);
    tv_t *xv = load_chunk(c, &v, id, at);
    tv_t *nacc = lw_bin(c, is_max ? DRK_TOP_MAX : DRK_TOP_MIN, acc, xv);
    tv_t *fr;
    rv_pass_end(c, &v, 1, &nacc, &fr);
    res = reduce(c, &v, fr, is_max ? "max" : "min");
  } else {
    tv_t *mx = NULL;
    if (op == DRK_OP_REDUCE_LOG_SUM_EXP) mx = row_max(c, &v, at);
    tv_t *init = acc_tile(c, &v, at, 0);
    tv_t *acc;
    rv_pass(c, &v, 1, &init, &acc);
    tv_t *xv = load_chunk(c, &v, 0, at);
    if (op == DRK_OP_REDUCE_L2 || op == DRK_OP_REDUCE_SUM_SQUARE) xv = BIN(MUL, xv, xv);
    if (mx) {
      xv = UN(EXP, BIN(SUB, xv, lw_bcast_row(c, mx, v.P, v.s.rows, v.s.cols)));
      xv = lw_sel(c, v.mask2, xv, lw_cf(c, xv, 0));
    }
    tv_t *nacc = BIN(ADD, acc, xv);
    tv_t *fr;
    rv_pass_end(c, &v, 1, &nacc, &fr);
    res = reduce(c, &v, fr, "sum");
    if (ws < 0) res = row_finish(c, op, res, v.R);
    if (mx) res = BIN(ADD, UN(LOG, res), mx);
  }
  if (ws >= 0) {
    /* partial sp of row r at sp * rows + r */
    tv_t *o = BIN(ADD, v.row, lw_splat(c, BIN(MUL, lw_pid(c, 1), lw_sci(c, c->it, v.rows)), &v.row->type));
    lw_store(c, py, o, res, v.rmask);
    rv_end(c, &v);
    return split_finish(c, ws, v.s.split_rows, v.rows, v.R, at, is_max ? DRK_TOP_MAX : is_min ? DRK_TOP_MIN : DRK_TOP_ADD);
  }
  lw_store(c, py, v.row, res, v.rmask);
  rv_end(c, &v);
  return true;
}

static bool lower_argmax(drk_lctx_t *c) {
  const drk_node_t *n = c->node;
  const drk_value_t *x = n->inputs[0], *y = n->outputs[0];
  int r = x->shape.rank;
  int axis = drk_axis_norm(drk_node_attr_int(n, "axis", 0), r);
  if (axis < 0 || axis >= r) return lw_err(c, "axis out of range");
  bool last = drk_node_attr_int(n, "select_last_index", 0) != 0;
  bool mx = n->op == DRK_OP_ARG_MAX;
  drk_dtype_t at = lw_compute_dtype(x->dtype);
  rv_t v;
  rv_init(&v, x, 1u << axis);
  lw_kernel_begin(c, lw_index_dtype(n));
  v.px = lw_param_buf(c, x, "x");
  tv_t *py = lw_param_buf(c, y, "y");
  rv_begin(c, &v);
  double id = mx ? lowest(at) : highest(at);
  tv_t *init[2] = {acc_tile(c, &v, at, id), acc_tile(c, &v, c->it, 0)};
  tv_t *ai[2];
  rv_pass(c, &v, 2, init, ai);
  tv_t *acc = ai[0], *idx = ai[1];
  tv_t *xv = load_chunk(c, &v, id, at);
  const char *pred = mx ? (last ? "ge" : "gt") : (last ? "le" : "lt");
  tv_t *better = BIN(AND, lw_cmp(c, pred, xv, acc), v.mask2);
  tv_t *y2[2] = {lw_sel(c, better, xv, acc), lw_sel(c, better, rv_col2(c, &v), idx)};
  tv_t *fr[2];
  rv_pass_end(c, &v, 2, y2, fr);
  tv_t *best = reduce(c, &v, fr[0], mx ? "max" : "min");
  tv_t *hit = lw_cmp(c, "eq", fr[0], lw_bcast_row(c, best, v.P, v.s.rows, v.s.cols));
  tv_t *cand = lw_sel(c, hit, fr[1], lw_ci(c, fr[1], last ? -1 : (int64_t)INT32_MAX));
  tv_t *res = reduce(c, &v, cand, last ? "max" : "min");
  lw_store(c, py, v.row, lw_cast(c, res, DRK_DT_I64), v.rmask);
  rv_end(c, &v);
  return true;
}

/* Split rows of a normalization or softmax: slot q (0 mean or max, 1 M2 or sum of exp) of split sp for the tile's rows in
 * scratch [2, SP, rows]. */
static tv_t *split_off(drk_lctx_t *c, rv_t *v, int q, tv_t *sp) {
  tv_t *base = BIN(MUL, BIN(ADD, sp, lw_sci(c, c->it, q * v->s.split_rows)), lw_sci(c, c->it, v->rows));
  return BIN(ADD, v->row, lw_splat(c, base, &v->row->type));
}

/* Kernel 2 of a split normalization: the row's mean and M2 from the SP partials in split order
 * (Chan et al.: mean = sum n_i mean_i / R, M2 = sum M2_i + n_i (mean_i - mean)^2). */
static void norm_combine(drk_lctx_t *c, rv_t *v, tv_t *pws, tv_t **out_mean, tv_t **out_m2) {
  int64_t SP = v->s.split_rows, span = v->cps * v->s.cols;
  tv_t *pa[128] = {0}, *pb[128] = {0}, *mean = NULL, *m2 = NULL;
  DRK_ASSERT(SP >= 2 && SP <= 128);
  for (int64_t i = 0; i < SP; i++) {
    pa[i] = lw_load(c, pws, split_off(c, v, 0, lw_sci(c, c->it, i)), v->rmask, 0);
    pb[i] = lw_load(c, pws, split_off(c, v, 1, lw_sci(c, c->it, i)), v->rmask, 0);
  }
  for (int64_t i = 0; i < SP; i++) {
    int64_t ni = v->R - i * span < span ? v->R - i * span : span;
    tv_t *t = BIN(MUL, pa[i], lw_cf(c, pa[i], (double)ni));
    mean = mean ? BIN(ADD, mean, t) : t;
  }
  mean = BIN(DIV, mean, lw_cf(c, mean, (double)v->R));
  for (int64_t i = 0; i < SP; i++) {
    int64_t ni = v->R - i * span < span ? v->R - i * span : span;
    tv_t *d = BIN(SUB, pa[i], mean);
    tv_t *t = BIN(ADD, pb[i], BIN(MUL, BIN(MUL, d, d), lw_cf(c, d, (double)ni)));
    m2 = m2 ? BIN(ADD, m2, t) : t;
  }
  *out_mean = mean;
  *out_m2 = m2;
}

static bool lower_softmax(drk_lctx_t *c) {
  const drk_node_t *n = c->node;
  const drk_value_t *x = n->inputs[0], *y = n->outputs[0];
  int r = x->shape.rank;
  int axis = drk_axis_norm(drk_node_attr_int(n, "axis", -1), r);
  if (axis < 0 || axis >= r) return lw_err(c, "axis out of range");
  drk_dtype_t at = acc_dtype(x->dtype);
  rv_t v;
  rv_init(&v, x, 1u << axis);
  v.may_split = v.contig;
  int part = 0, ws = -1;
  tv_t *py, *m, *m2, *s;
again:
  lw_kernel_begin(c, lw_index_dtype(n));
  v.px = lw_param_buf(c, x, "x");
  py = lw_param_buf(c, y, "y");
  v.lb = v.ub = NULL;
  rv_begin(c, &v);
  tv_t *pws = NULL;
  if (v.s.split_rows > 1) {
    if (ws < 0) ws = lw_scratch_new(c, (uint64_t)(2 * v.s.split_rows * v.rows) * (uint64_t)drk_dtype_bits(at) / 8);
    pws = lw_param_scratch(c, ws, at, "ws");
  }
  if (part == 1) {
    /* split rows, kernel 2: m = max m_i, s = sum s_i exp(m_i - m) in split order */
    int64_t SP = v.s.split_rows;
    tv_t *pm[128] = {0}, *psum[128] = {0};
    DRK_ASSERT(SP >= 2 && SP <= 128);
    for (int64_t i = 0; i < SP; i++) {
      pm[i] = lw_load(c, pws, split_off(c, &v, 0, lw_sci(c, c->it, i)), v.rmask, 0);
      psum[i] = lw_load(c, pws, split_off(c, &v, 1, lw_sci(c, c->it, i)), v.rmask, 0);
    }
    m = pm[0];
    for (int64_t i = 1; i < SP; i++) m = BIN(MAX, m, pm[i]);
    s = NULL;
    for (int64_t i = 0; i < SP; i++) {
      tv_t *t = BIN(MUL, psum[i], UN(EXP, BIN(SUB, pm[i], m)));
      s = s ? BIN(ADD, s, t) : t;
    }
    m2 = lw_bcast_row(c, m, v.P, v.s.rows, v.s.cols);
  } else {
    /* pass 1: row max (split rows: of this program's columns) */
    m = row_max(c, &v, at);
    m2 = lw_bcast_row(c, m, v.P, v.s.rows, v.s.cols);
    /* pass 2: sum of exp(x - max) */
    tv_t *init = acc_tile(c, &v, at, 0), *acc;
    rv_pass(c, &v, 1, &init, &acc);
    tv_t *e = UN(EXP, BIN(SUB, load_chunk(c, &v, -INFINITY, at), m2));
    e = lw_sel(c, v.mask2, e, lw_cf(c, e, 0));
    tv_t *nacc = BIN(ADD, acc, e), *fr;
    rv_pass_end(c, &v, 1, &nacc, &fr);
    s = reduce(c, &v, fr, "sum");
    if (pws) { /* split rows, kernel 1: the partial max and sum of its columns, then kernel 2 */
      lw_store(c, pws, split_off(c, &v, 0, lw_pid(c, 1)), m, v.rmask);
      lw_store(c, pws, split_off(c, &v, 1, lw_pid(c, 1)), s, v.rmask);
      rv_end(c, &v);
      part = 1;
      goto again;
    }
  }
  tv_t *k2;
  if (n->op == DRK_OP_SOFTMAX) k2 = lw_bcast_row(c, BIN(DIV, lw_cf(c, s, 1), s), v.P, v.s.rows, v.s.cols);
  else k2 = lw_bcast_row(c, BIN(ADD, m, UN(LOG, s)), v.P, v.s.rows, v.s.cols);
  /* pass 3: write */
  rv_pass(c, &v, 0, NULL, NULL); /* split rows, kernel 2: this program's columns */
  tv_t *xv = load_chunk(c, &v, 0, at);
  tv_t *out = n->op == DRK_OP_SOFTMAX ? BIN(MUL, UN(EXP, BIN(SUB, xv, m2)), k2) : BIN(SUB, xv, k2);
  lw_store(c, py, v.off2, out, v.mask2);
  rv_pass_end(c, &v, 0, NULL, NULL);
  rv_end(c, &v);
  return true;
}

/* Normalization over rows: LayerNorm, InstanceNorm, GroupNorm. */
static bool lower_norm(drk_lctx_t *c) {
  const drk_node_t *n = c->node;
  const drk_value_t *x = n->inputs[0], *y = n->outputs[0];
  const drk_value_t *scale = n->n_inputs > 1 ? n->inputs[1] : NULL, *bias = n->n_inputs > 2 ? n->inputs[2] : NULL;
  int r = x->shape.rank;
  drk_dtype_t at = acc_dtype(x->dtype);
  double eps = drk_node_attr_float(n, "epsilon", 1e-5);
  rv_t v;
  int64_t C = r >= 2 ? x->shape.dims[1].size : 1, G = 1, S = 1;
  int axis = 0;
  if (n->op == DRK_OP_LAYER_NORMALIZATION) {
    axis = drk_axis_norm(drk_node_attr_int(n, "axis", -1), r);
    if (axis < 0 || axis >= r) return lw_err(c, "axis out of range");
    uint32_t mask = 0;
    for (int i = axis; i < r; i++) mask |= 1u << i;
    rv_init(&v, x, mask);
  } else {
    if (r < 2) return lw_err(c, "input must have rank >= 2");
    for (int i = 2; i < r; i++) S *= x->shape.dims[i].size;
    if (n->op == DRK_OP_INSTANCE_NORMALIZATION) {
      rv_init(&v, x, r > 2 ? ((1u << r) - 1) & ~3u : 0);
      if (r == 2) { v.R = 1; }
    } else {
      G = drk_node_attr_int(n, "num_groups", 1);
      if (G < 1 || C % G) return lw_err(c, "num_groups %lld must divide the %lld channels", (long long)G, (long long)C);
      memset(&v, 0, sizeof v);
      v.x = x;
      v.rows = x->shape.dims[0].size * G;
      v.R = (C / G) * S;
      v.nk = 1; v.kd[0] = v.rows; v.ks[0] = v.R;
      v.nr = 1; v.rd[0] = v.R; v.rs[0] = 1;
      v.contig = true;
    }
  }
  v.may_split = v.contig;
  int part = 0, ws = -1;
  tv_t *ps, *pb, *py, *pmean, *pinv, *mean, *mean2, *rstd, *rstd2;
again:
  lw_kernel_begin(c, lw_index_dtype(n));
  v.px = lw_param_buf(c, x, "x");
  ps = scale ? lw_param_buf(c, scale, "scale") : NULL;
  pb = bias ? lw_param_buf(c, bias, "bias") : NULL;
  py = lw_param_buf(c, y, "y");
  pmean = n->n_outputs > 1 && n->outputs[1] ? lw_param_buf(c, n->outputs[1], "mean") : NULL;
  pinv = n->n_outputs > 2 && n->outputs[2] ? lw_param_buf(c, n->outputs[2], "inv_std") : NULL;
  v.lb = v.ub = NULL;
  rv_begin(c, &v);
  tv_t *pws = NULL;
  if (v.s.split_rows > 1) {
    if (ws < 0) ws = lw_scratch_new(c, (uint64_t)(2 * v.s.split_rows * v.rows) * (uint64_t)drk_dtype_bits(at) / 8);
    pws = lw_param_scratch(c, ws, at, "ws");
  }
  if (part == 1) {
    /* split rows, kernel 2: the row statistics from the partials */
    tv_t *m2;
    norm_combine(c, &v, pws, &mean, &m2);
    rstd = UN(RSQRT, BIN(ADD, BIN(DIV, m2, lw_cf(c, m2, (double)v.R)), lw_cf(c, m2, eps)));
  } else {
    /* pass 1: mean (split rows: of this program's columns) */
    tv_t *init = acc_tile(c, &v, at, 0);
    tv_t *acc;
    rv_pass(c, &v, 1, &init, &acc);
    tv_t *nacc = BIN(ADD, acc, load_chunk(c, &v, 0, at));
    tv_t *fr;
    rv_pass_end(c, &v, 1, &nacc, &fr);
    tv_t *s1 = reduce(c, &v, fr, "sum");
    tv_t *cnt = lw_cf(c, s1, (double)v.R);
    if (pws) /* min(ub, R) - lb columns, never 0 */
      cnt = lw_splat(c, lw_cast(c, BIN(SUB, BIN(MIN, v.ub, lw_sci(c, c->it, v.R)), v.lb), at), &s1->type);
    mean = BIN(DIV, s1, cnt);
    mean2 = lw_bcast_row(c, mean, v.P, v.s.rows, v.s.cols);
    /* pass 2: variance around the mean */
    init = acc_tile(c, &v, at, 0);
    rv_pass(c, &v, 1, &init, &acc);
    tv_t *dv = BIN(SUB, load_chunk(c, &v, 0, at), mean2);
    dv = lw_sel(c, v.mask2, dv, lw_cf(c, dv, 0));
    nacc = BIN(ADD, acc, BIN(MUL, dv, dv));
    rv_pass_end(c, &v, 1, &nacc, &fr);
    tv_t *s2 = reduce(c, &v, fr, "sum");
    if (pws) { /* split rows, kernel 1: the partial mean and M2 of its columns, then kernel 2 */
      lw_store(c, pws, split_off(c, &v, 0, lw_pid(c, 1)), mean, v.rmask);
      lw_store(c, pws, split_off(c, &v, 1, lw_pid(c, 1)), s2, v.rmask);
      rv_end(c, &v);
      part = 1;
      goto again;
    }
    rstd = UN(RSQRT, BIN(ADD, BIN(DIV, s2, lw_cf(c, s2, (double)v.R)), lw_cf(c, s2, eps)));
  }
  mean2 = lw_bcast_row(c, mean, v.P, v.s.rows, v.s.cols);
  rstd2 = lw_bcast_row(c, rstd, v.P, v.s.rows, v.s.cols);
  /* per-row parameter offsets (InstanceNorm, GroupNorm) */
  tv_t *prow = NULL;
  if (n->op == DRK_OP_INSTANCE_NORMALIZATION) prow = BIN(REM, v.row, lw_ci(c, v.row, C));
  if (n->op == DRK_OP_GROUP_NORMALIZATION) {
    prow = BIN(REM, v.row, lw_ci(c, v.row, G));
    if (scale && lw_numel(scale) == C) prow = BIN(MUL, prow, lw_ci(c, prow, C / G));
  }
  tv_t *prow2 = prow ? lw_bcast_row(c, prow, v.P, v.s.rows, v.s.cols) : NULL;
  /* pass 3: write */
  rv_pass(c, &v, 0, NULL, NULL);
  tv_t *xv = load_chunk(c, &v, 0, at);
  tv_t *out = BIN(MUL, BIN(SUB, xv, mean2), rstd2);
  tv_t *poff = NULL;
  if (n->op == DRK_OP_LAYER_NORMALIZATION) {
    int64_t sst[LW_MAX_RANK];
    if (scale) {
      lw_bstrides(scale, v.nr, v.rd, sst);
      poff = lw_bcast_col(c, lw_affine(c, v.col, v.nr, v.rd, sst, 0), v.P, v.s.rows, v.s.cols);
    }
  } else if (n->op == DRK_OP_GROUP_NORMALIZATION && scale && lw_numel(scale) == C) {
    tv_t *cc = S > 1 ? BIN(DIV, v.col, lw_ci(c, v.col, S)) : v.col;
    poff = BIN(ADD, prow2, lw_bcast_col(c, cc, v.P, v.s.rows, v.s.cols));
  } else {
    poff = prow2;
  }
  if (ps) out = BIN(MUL, out, lw_cast(c, lw_load(c, ps, poff, v.mask2, 0), at));
  if (pb) {
    tv_t *boff = poff;
    if (n->op == DRK_OP_LAYER_NORMALIZATION && (!scale || !drk_shape_equal(&bias->shape, &scale->shape))) {
      int64_t bst[LW_MAX_RANK];
      lw_bstrides(bias, v.nr, v.rd, bst);
      boff = lw_bcast_col(c, lw_affine(c, v.col, v.nr, v.rd, bst, 0), v.P, v.s.rows, v.s.cols);
    }
    out = BIN(ADD, out, lw_cast(c, lw_load(c, pb, boff, v.mask2, 0), at));
  }
  lw_store(c, py, v.off2, out, v.mask2);
  rv_pass_end(c, &v, 0, NULL, NULL);
  if (pmean) lw_store(c, pmean, v.row, mean, v.rmask);
  if (pinv) lw_store(c, pinv, v.row, rstd, v.rmask);
  rv_end(c, &v);
  return true;
}

/* Sequential per row (CumSum, ReduceProd): a flat frame over rows, a scalar loop along R. */
static bool lower_seq(drk_lctx_t *c, uint32_t mask) {
  const drk_node_t *n = c->node;
  const drk_value_t *x = n->inputs[0], *y = n->outputs[0];
  drk_dtype_t at = lw_compute_dtype(x->dtype);
  if (n->op == DRK_OP_REDUCE_PROD && !drk_dtype_is_float(at)) at = DRK_DT_I64;
  rv_t v;
  rv_init(&v, x, mask);
  bool cum = n->op == DRK_OP_CUM_SUM;
  bool excl = cum && drk_node_attr_int(n, "exclusive", 0) != 0, rev = cum && drk_node_attr_int(n, "reverse", 0) != 0;
  lw_kernel_begin(c, lw_index_dtype(n));
  tv_t *px = lw_param_buf(c, x, "x");
  tv_t *py = lw_param_buf(c, y, "y");
  drk_schedule_t s = drk_sched_seq(v.rows);
  c->lay = drk_sched_flat_layout(c->m, &s);
  tv_t *ri = lw_cast(c, lw_range(c, s.block_elems, c->lay), c->it);
  tv_t *base = BIN(MUL, lw_pid(c, 0), lw_sci(c, c->it, s.block_elems));
  tv_t *row = BIN(ADD, lw_splat(c, base, &ri->type), ri);
  tv_t *rmask = lw_cmp(c, "lt", row, lw_ci(c, row, v.rows));
  tv_t *rowoff = lw_affine(c, row, v.nk, v.kd, v.ks, 0);
  tv_t *init = lw_cdt(c, row, at, cum ? 0 : 1);
  drk_tile_op_t *f = drk_tile_build_for_begin(&c->b, lw_sci(c, c->it, 0), lw_sci(c, c->it, v.R), lw_sci(c, c->it, 1), 1, &init);
  tv_t *j = f->regions[0]->args[0], *acc = f->regions[0]->args[1];
  if (rev) j = BIN(SUB, lw_sci(c, c->it, v.R - 1), j);
  tv_t *coff = lw_affine(c, j, v.nr, v.rd, v.rs, 0);
  tv_t *off = BIN(ADD, rowoff, lw_splat(c, coff, &rowoff->type));
  tv_t *xv = lw_cast(c, lw_load(c, px, off, rmask, 0), at);
  tv_t *nacc;
  if (cum) {
    nacc = BIN(ADD, acc, xv);
    lw_store(c, py, off, excl ? acc : nacc, rmask);
  } else {
    nacc = BIN(MUL, acc, xv);
  }
  f = drk_tile_build_for_end(&c->b, 1, &nacc);
  if (!cum) lw_store(c, py, row, f->results[0], rmask);
  lw_kernel_end(c, (v.rows + s.block_elems - 1) / s.block_elems, 1, 1, s.warps, 0, &s);
  return true;
}

/* a copy kernel (noop reductions): y = x */
static bool lower_copy(drk_lctx_t *c) {
  lw_alias(c, c->node->outputs[0], c->node->inputs[0]);
  return true;
}

bool drk_lower_reduce(drk_lctx_t *c) {
  const drk_node_t *n = c->node;
  int r = n->inputs[0]->shape.rank;
  switch (n->op) {
  case DRK_OP_BATCH_NORMALIZATION: return drk_lower_ew(c);
  case DRK_OP_ARG_MAX: case DRK_OP_ARG_MIN: return lower_argmax(c);
  case DRK_OP_SOFTMAX: case DRK_OP_LOG_SOFTMAX: return lower_softmax(c);
  case DRK_OP_LAYER_NORMALIZATION: case DRK_OP_INSTANCE_NORMALIZATION: case DRK_OP_GROUP_NORMALIZATION:
    return lower_norm(c);
  case DRK_OP_GLOBAL_AVERAGE_POOL: case DRK_OP_GLOBAL_MAX_POOL:
    if (r < 2) return lw_err(c, "input must have rank >= 2");
    return lower_row_reduce(c, ((1u << r) - 1) & ~3u);
  case DRK_OP_CUM_SUM: {
    int64_t ax[1];
    int na = 0;
    if (!lw_const_ints(c, n->inputs[1], ax, 1, &na)) return false;
    if (na != 1) return lw_err(c, "axis must have one element");
    int a = drk_axis_norm(ax[0], r);
    if (a < 0 || a >= r) return lw_err(c, "axis out of range");
    return lower_seq(c, 1u << a);
  }
  default: break;
  }
  uint32_t mask;
  bool noop;
  if (!reduce_axes(c, &mask, &noop)) return false;
  if (noop) return lower_copy(c);
  if (n->op == DRK_OP_REDUCE_PROD) return lower_seq(c, mask);
  return lower_row_reduce(c, mask);
}
