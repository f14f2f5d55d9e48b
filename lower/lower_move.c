/* Lowering of data movement: Transpose, Expand, Slice, Tile, Pad (constant/edge/reflect),
 * DepthToSpace, SpaceToDepth, Concat, Split, Gather, GatherElements, Trilu, Range,
 * ConstantOfShape, Dropout (inference: alias, mask = true), Shape/Size (constants). GatherND,
 * ScatterND, OneHot and Resize (nearest, linear, cubic) are dispatched from here to
 * lower_gather.c.
 *
 * Every kernel is flat over the output (Split: over the input): the output offset is
 * unravelled into coordinates by div/rem with constant dims, each op maps coordinates to an
 * input offset (and a validity mask), then a masked load and store.
 *
 * Requires: static shapes; Slice/Pad/Tile/Split/Trilu parameters constant. */
#include <string.h>

#include "lower/lower_internal.h"

#define BIN(op, a, b) lw_bin(c, DRK_TOP_##op, (a), (b))

bool drk_lower_move_supported(const drk_node_t *n, const char **why) {
  switch (n->op) {
  case DRK_OP_TRANSPOSE: case DRK_OP_EXPAND: case DRK_OP_SLICE: case DRK_OP_TILE: case DRK_OP_PAD:
  case DRK_OP_DEPTH_TO_SPACE: case DRK_OP_SPACE_TO_DEPTH: case DRK_OP_CONCAT: case DRK_OP_SPLIT: case DRK_OP_GATHER:
  case DRK_OP_GATHER_ELEMENTS: case DRK_OP_TRILU: case DRK_OP_RANGE: case DRK_OP_CONSTANT_OF_SHAPE:
  case DRK_OP_DROPOUT: case DRK_OP_SHAPE: case DRK_OP_SIZE:
    break;
  case DRK_OP_GATHER_ND: case DRK_OP_SCATTER_ND: case DRK_OP_ONE_HOT: case DRK_OP_RESIZE:
    if (!drk_lower_gather_supported(n, why)) return false;
    break;
  default: *why = "op not lowered"; return false;
  }
  for (int i = 0; i < n->n_inputs; i++)
    if (n->inputs[i] && !lw_dtype_ok(n->inputs[i]->dtype)) { *why = "sub-byte dtype"; return false; }
  for (int i = 0; i < n->n_outputs; i++)
    if (n->outputs[i] && !lw_dtype_ok(n->outputs[i]->dtype)) { *why = "sub-byte dtype"; return false; }
  if (n->op == DRK_OP_RANGE && !drk_dtype_is_float(n->outputs[0]->dtype) && n->outputs[0]->dtype != DRK_DT_I64 &&
      n->outputs[0]->dtype != DRK_DT_I32) { *why = "dtype"; return false; }
  return true;
}

static void dims_of(const drk_value_t *v, int64_t *d) {
  for (int i = 0; i < v->shape.rank; i++) d[i] = v->shape.dims[i].size;
}

/* the output's coordinates (lazily: only the ones asked for) */
typedef struct coords {
  int r;
  int64_t d[LW_MAX_RANK];
  tv_t *c[LW_MAX_RANK];
  tv_t *offs;
} coords_t;

static tv_t *co(drk_lctx_t *c, coords_t *k, int i) {
  if (!k->c[i]) k->c[i] = k->d[i] == 1 ? lw_ci(c, k->offs, 0) : lw_coord(c, k->offs, k->r, k->d, i);
  return k->c[i];
}

bool lw_read_move_params(drk_lctx_t *c, const drk_node_t *n, int r, const int64_t *xd, lw_move_params_t *p) {
  memset(p, 0, sizeof *p);
  for (int k = 0; k < r; k++) p->step[k] = 1;
  switch (n->op) {
  case DRK_OP_TRANSPOSE: {
    size_t cnt = 0;
    const int64_t *pm = drk_node_attr_ints(n, "perm", &cnt);
    for (int k = 0; k < r; k++) {
      p->perm[k] = pm && cnt == (size_t)r ? pm[k] : r - 1 - k;
      if (p->perm[k] < 0 || p->perm[k] >= r) return lw_err(c, "bad Transpose perm");
    }
    return true;
  }
  case DRK_OP_SLICE: {
    int64_t st[LW_MAX_RANK], en[LW_MAX_RANK], ax[LW_MAX_RANK], sp[LW_MAX_RANK];
    int ns, ne, na = 0, nsp = 0;
    if (!lw_const_ints(c, n->inputs[1], st, LW_MAX_RANK, &ns) || !lw_const_ints(c, n->inputs[2], en, LW_MAX_RANK, &ne) ||
        (n->n_inputs > 3 && n->inputs[3] && !lw_const_ints(c, n->inputs[3], ax, LW_MAX_RANK, &na)) ||
        (n->n_inputs > 4 && n->inputs[4] && !lw_const_ints(c, n->inputs[4], sp, LW_MAX_RANK, &nsp)))
      return false;
    for (int i = 0; i < ns; i++) {
      int a = na ? drk_axis_norm(ax[i], r) : i;
      int64_t s = nsp ? sp[i] : 1;
      if (s == 0 || a < 0 || a >= r || (na && na != ns) || (nsp && nsp != ns)) return lw_err(c, "bad Slice parameters");
      int64_t d = xd[a], b = st[i];
      if (b < 0) b += d;
      if (s > 0) b = b < 0 ? 0 : b > d ? d : b;
      else b = b < 0 ? -1 : b > d - 1 ? d - 1 : b;
      p->start[a] = b;
      p->step[a] = s;
    }
    return true;
  }
  case DRK_OP_PAD: {
    int64_t pads[2 * LW_MAX_RANK] = {0};
    int np;
    if (!lw_const_ints(c, n->inputs[1], pads, 2 * LW_MAX_RANK, &np)) return false;
    if (n->n_inputs > 3 && n->inputs[3]) {
      int64_t ax[LW_MAX_RANK];
      int na;
      if (!lw_const_ints(c, n->inputs[3], ax, LW_MAX_RANK, &na)) return false;
      if (np != 2 * na) return lw_err(c, "pads must have 2 * len(axes) elements");
      for (int i = 0; i < na; i++) {
        int a = drk_axis_norm(ax[i], r);
        if (a < 0 || a >= r) return lw_err(c, "axis out of range");
        p->pb[a] = pads[i];
      }
    } else {
      if (np != 2 * r) return lw_err(c, "pads must have 2 * rank elements");
      for (int k = 0; k < r; k++) p->pb[k] = pads[k];
    }
    if (n->n_inputs > 2 && n->inputs[2]) {
      const drk_value_t *cv = n->inputs[2];
      if (cv->kind != DRK_VALUE_CONST || !cv->data) return lw_err(c, "constant_value must be a constant");
      p->padv = drk_value_const_f64(cv, 0);
    }
    p->mode = drk_node_attr_string(n, "mode", "constant");
    if (strcmp(p->mode, "constant") && strcmp(p->mode, "edge") && strcmp(p->mode, "reflect"))
      return lw_err(c, "Pad mode '%s' is not lowered for GPU yet", p->mode);
    return true;
  }
  default:
    return true;
  }
}

/* out[i] = in[map(i)] over the output, map given per op */
static bool lower_gatherlike(drk_lctx_t *c) {
  const drk_node_t *n = c->node;
  const drk_value_t *x = n->inputs[0], *y = n->outputs[0];
  int r = y->shape.rank, rx = x->shape.rank;
  int64_t xd[LW_MAX_RANK], xs[LW_MAX_RANK];
  dims_of(x, xd);
  lw_strides(x, xs);
  /* constant parameters, read before building */
  lw_move_params_t mp;
  if (!lw_read_move_params(c, n, rx, xd, &mp)) return false;
  const int64_t *perm = mp.perm, *starts = mp.start, *steps = mp.step, *pads = mp.pb;
  double padv = mp.padv;
  const char *mode = mp.mode;
  int64_t bs = drk_node_attr_int(n, "blocksize", 1);
  const char *d2s = drk_node_attr_string(n, "mode", "DCR");
  int64_t tk = 0;
  if (n->op == DRK_OP_TRILU && n->n_inputs > 1 && n->inputs[1]) {
    int nk;
    if (!lw_const_ints(c, n->inputs[1], &tk, 1, &nk)) return false;
  }

  lw_kernel_begin(c, lw_index_dtype(n));
  tv_t *px = lw_param_buf(c, x, "x");
  tv_t *py = lw_param_buf(c, y, "y");
  lw_flat_t f;
  lw_flat_begin(c, lw_numel(y), &f);
  coords_t k = {.r = r, .offs = f.offs};
  dims_of(y, k.d);
  tv_t *off = NULL, *valid = NULL;
  tv_t *fill = NULL; /* Trilu: value where not kept */
  switch (n->op) {
  case DRK_OP_TRANSPOSE: {
    int64_t st[LW_MAX_RANK];
    for (int i = 0; i < r; i++) st[i] = xs[perm[i]];
    off = lw_affine(c, f.offs, r, k.d, st, 0);
    break;
  }
  case DRK_OP_EXPAND: {
    int64_t st[LW_MAX_RANK];
    lw_bstrides(x, r, k.d, st);
    off = lw_affine(c, f.offs, r, k.d, st, 0);
    break;
  }
  case DRK_OP_SLICE: {
    int64_t st[LW_MAX_RANK], base = 0;
    for (int i = 0; i < r; i++) {
      st[i] = steps[i] * xs[i];
      base += starts[i] * xs[i];
    }
    off = lw_affine(c, f.offs, r, k.d, st, base);
    break;
  }
  case DRK_OP_TILE:
    for (int i = 0; i < r; i++) {
      if (xd[i] == 1) continue;
      tv_t *ci = co(c, &k, i);
      if (k.d[i] != xd[i]) ci = BIN(REM, ci, lw_ci(c, ci, xd[i]));
      off = lw_addmul(c, off, ci, xs[i]);
    }
    break;
  case DRK_OP_PAD:
    for (int i = 0; i < r; i++) {
      if (xd[i] == k.d[i] && pads[i] == 0) {
        if (xd[i] > 1) off = lw_addmul(c, off, co(c, &k, i), xs[i]);
        continue;
      }
      tv_t *ci = BIN(SUB, co(c, &k, i), lw_ci(c, f.offs, pads[i]));
      if (strcmp(mode, "constant") == 0) {
        tv_t *ok = BIN(AND, lw_cmp(c, "ge", ci, lw_ci(c, ci, 0)), lw_cmp(c, "lt", ci, lw_ci(c, ci, xd[i])));
        valid = valid ? BIN(AND, valid, ok) : ok;
      } else if (strcmp(mode, "edge") == 0) {
        ci = BIN(MIN, BIN(MAX, ci, lw_ci(c, ci, 0)), lw_ci(c, ci, xd[i] - 1));
      } else { /* reflect: |ci|, then mirror at d-1 (pads < d) */
        ci = BIN(MAX, ci, BIN(SUB, lw_ci(c, ci, 0), ci));
        tv_t *over = BIN(SUB, ci, lw_ci(c, ci, xd[i] - 1));
        ci = BIN(SUB, ci, BIN(MUL, BIN(MAX, over, lw_ci(c, ci, 0)), lw_ci(c, ci, 2)));
      }
      off = lw_addmul(c, off, ci, xs[i]);
    }
    break;
  case DRK_OP_DEPTH_TO_SPACE: case DRK_OP_SPACE_TO_DEPTH: {
    if (r != 4) return lw_err(c, "input must be 4-D");
    tv_t *nn = co(c, &k, 0), *ch = co(c, &k, 1), *h = co(c, &k, 2), *w = co(c, &k, 3);
    tv_t *icn, *ih, *iw;
    if (n->op == DRK_OP_DEPTH_TO_SPACE) {
      tv_t *bh = BIN(REM, h, lw_ci(c, h, bs)), *bw = BIN(REM, w, lw_ci(c, w, bs));
      tv_t *blk = BIN(ADD, BIN(MUL, bh, lw_ci(c, bh, bs)), bw);
      int64_t Co = k.d[1];
      icn = strcmp(d2s, "CRD") == 0 ? BIN(ADD, BIN(MUL, ch, lw_ci(c, ch, bs * bs)), blk) : BIN(ADD, BIN(MUL, blk, lw_ci(c, blk, Co)), ch);
      ih = BIN(DIV, h, lw_ci(c, h, bs));
      iw = BIN(DIV, w, lw_ci(c, w, bs));
    } else {
      int64_t Ci = xd[1];
      tv_t *blk = BIN(DIV, ch, lw_ci(c, ch, Ci));
      icn = BIN(REM, ch, lw_ci(c, ch, Ci));
      ih = BIN(ADD, BIN(MUL, h, lw_ci(c, h, bs)), BIN(DIV, blk, lw_ci(c, blk, bs)));
      iw = BIN(ADD, BIN(MUL, w, lw_ci(c, w, bs)), BIN(REM, blk, lw_ci(c, blk, bs)));
    }
    off = lw_addmul(c, lw_addmul(c, lw_addmul(c, lw_addmul(c, NULL, nn, xs[0]), icn, xs[1]), ih, xs[2]), iw, xs[3]);
    break;
  }
  case DRK_OP_TRILU: {
    if (r < 2) return lw_err(c, "input must have rank >= 2");
    off = f.offs;
    tv_t *diff = BIN(SUB, co(c, &k, r - 1), co(c, &k, r - 2));
    bool upper = drk_node_attr_int(n, "upper", 1) != 0;
    valid = lw_cmp(c, upper ? "ge" : "le", diff, lw_ci(c, diff, tk));
    fill = lw_cdt(c, f.offs, x->dtype, 0);
    break;
  }
  default: drk_unreachable();
  }
  (void)rx;
  if (!off) off = lw_ci(c, f.offs, 0);
  tv_t *m = valid ? BIN(AND, f.mask, valid) : f.mask;
  tv_t *v = lw_load(c, px, off, m, padv);
  if (fill) v = lw_sel(c, valid, v, fill);
  lw_store(c, py, f.offs, v, f.mask);
  lw_flat_end(c, &f);
  return true;
}

/* A Concat of many inputs: one copy kernel per input, each reading its input contiguously and
 * writing rows of len*inner elements at their place in y. The one-kernel form below loads from
 * every input for every element (masked) and selects: with DenseNet's 17-24-input concats at
 * batch 32 on the H200 that took 0.4-0.8 ms per concat (16-33 GB/s), 63% of the model. */
#define CONCAT_COPY_MIN_INPUTS 5
static bool lower_concat_copies(drk_lctx_t *c, int axis) {
  const drk_node_t *n = c->node;
  const drk_value_t *y = n->outputs[0];
  int r = y->shape.rank;
  int64_t inner = 1, outer = 1, total = y->shape.dims[axis].size, start = 0;
  for (int i = axis + 1; i < r; i++) inner *= y->shape.dims[i].size;
  for (int i = 0; i < axis; i++) outer *= y->shape.dims[i].size;
  for (int i = 0; i < n->n_inputs; i++) {
    const drk_value_t *x = n->inputs[i];
    int64_t row = x->shape.dims[axis].size * inner;
    if (!row || !outer) continue;
    lw_kernel_begin(c, lw_index_dtype(n));
    tv_t *px = lw_param_buf(c, x, "x"), *py = lw_param_buf(c, y, "y");
    lw_flat_t f;
    lw_flat_begin(c, lw_numel(x), &f);
    tv_t *v = lw_load(c, px, f.offs, f.mask, 0);
    int64_t dd[2] = {outer, row};
    tv_t *off = outer > 1 ? lw_addmul(c, lw_addmul(c, NULL, lw_coord(c, f.offs, 2, dd, 0), total * inner),
                                      lw_coord(c, f.offs, 2, dd, 1), 1)
                          : f.offs;
    if (start) off = BIN(ADD, off, lw_ci(c, off, start * inner));
    lw_store(c, py, off, v, f.mask);
    lw_flat_end(c, &f);
    start += x->shape.dims[axis].size;
  }
  return true;
}

static bool lower_concat(drk_lctx_t *c) {
  const drk_node_t *n = c->node;
  const drk_value_t *y = n->outputs[0];
  int r = y->shape.rank;
  int axis = drk_axis_norm(drk_node_attr_int(n, "axis", 0), r);
  if (axis < 0 || axis >= r) return lw_err(c, "axis out of range");
  int live = 0;
  for (int i = 0; i < n->n_inputs; i++) live += n->inputs[i]->shape.dims[axis].size > 0;
  if (live >= CONCAT_COPY_MIN_INPUTS && lw_numel(y) > 0) return lower_concat_copies(c, axis);
  lw_kernel_begin(c, lw_index_dtype(n));
  tv_t *p[64];
  if (n->n_inputs > 64) return lw_err(c, "more than 64 inputs");
  for (int i = 0; i < n->n_inputs; i++) p[i] = lw_param_buf(c, n->inputs[i], drk_arena_printf(c->m->arena, "x%d", i));
  tv_t *py = lw_param_buf(c, y, "y");
  lw_flat_t f;
  lw_flat_begin(c, lw_numel(y), &f);
  coords_t k = {.r = r, .offs = f.offs};
  dims_of(y, k.d);
  /* output = (outer, a, inner) with a the concat coordinate */
  int64_t inner = 1, outer = 1;
  for (int i = axis + 1; i < r; i++) inner *= k.d[i];
  for (int i = 0; i < axis; i++) outer *= k.d[i];
  int64_t dd[3] = {outer, k.d[axis], inner};
  tv_t *oc = outer > 1 ? lw_coord(c, f.offs, 3, dd, 0) : NULL;
  tv_t *ac = lw_coord(c, f.offs, 3, dd, 1);
  tv_t *ic = inner > 1 ? lw_coord(c, f.offs, 3, dd, 2) : NULL;
  tv_t *res = NULL;
  int64_t start = 0;
  for (int i = 0; i < n->n_inputs; i++) {
    int64_t len = n->inputs[i]->shape.dims[axis].size;
    if (len == 0) continue;
    tv_t *a = BIN(SUB, ac, lw_ci(c, ac, start));
    tv_t *in = BIN(AND, lw_cmp(c, "ge", a, lw_ci(c, a, 0)), lw_cmp(c, "lt", a, lw_ci(c, a, len)));
    tv_t *off = lw_addmul(c, lw_addmul(c, oc ? BIN(MUL, oc, lw_ci(c, oc, len * inner)) : NULL, a, inner), ic, 1);
    tv_t *v = lw_load(c, p[i], off, BIN(AND, in, f.mask), 0);
    res = res ? lw_sel(c, in, v, res) : v;
    start += len;
  }
  if (res) lw_store(c, py, f.offs, res, f.mask);
  lw_flat_end(c, &f);
  return true;
}

static bool lower_split(drk_lctx_t *c) {
  const drk_node_t *n = c->node;
  const drk_value_t *x = n->inputs[0];
  int r = x->shape.rank;
  int axis = drk_axis_norm(drk_node_attr_int(n, "axis", 0), r);
  if (axis < 0 || axis >= r) return lw_err(c, "axis out of range");
  lw_kernel_begin(c, lw_index_dtype(n));
  tv_t *px = lw_param_buf(c, x, "x");
  tv_t *p[64];
  if (n->n_outputs > 64) return lw_err(c, "more than 64 outputs");
  for (int i = 0; i < n->n_outputs; i++)
    p[i] = n->outputs[i] ? lw_param_buf(c, n->outputs[i], drk_arena_printf(c->m->arena, "y%d", i)) : NULL;
  lw_flat_t f;
  lw_flat_begin(c, lw_numel(x), &f);
  int64_t inner = 1, outer = 1;
  for (int i = axis + 1; i < r; i++) inner *= x->shape.dims[i].size;
  for (int i = 0; i < axis; i++) outer *= x->shape.dims[i].size;
  int64_t dd[3] = {outer, x->shape.dims[axis].size, inner};
  tv_t *oc = outer > 1 ? lw_coord(c, f.offs, 3, dd, 0) : NULL;
  tv_t *ac = lw_coord(c, f.offs, 3, dd, 1);
  tv_t *ic = inner > 1 ? lw_coord(c, f.offs, 3, dd, 2) : NULL;
  tv_t *v = lw_load(c, px, f.offs, f.mask, 0);
  int64_t start = 0;
  for (int i = 0; i < n->n_outputs; i++) {
    if (!n->outputs[i]) continue;
    int64_t len = n->outputs[i]->shape.dims[axis].size;
    if (p[i] && len > 0) {
      tv_t *a = BIN(SUB, ac, lw_ci(c, ac, start));
      tv_t *in = BIN(AND, lw_cmp(c, "ge", a, lw_ci(c, a, 0)), lw_cmp(c, "lt", a, lw_ci(c, a, len)));
      tv_t *off = lw_addmul(c, lw_addmul(c, oc ? BIN(MUL, oc, lw_ci(c, oc, len * inner)) : NULL, a, inner), ic, 1);
      lw_store(c, p[i], off, v, BIN(AND, in, f.mask));
    }
    start += len;
  }
  lw_flat_end(c, &f);
  return true;
}

/* Gather / GatherElements: indices loaded per output element, negatives wrapped. */
static bool lower_gather(drk_lctx_t *c) {
  const drk_node_t *n = c->node;
  const drk_value_t *x = n->inputs[0], *iv = n->inputs[1], *y = n->outputs[0];
  int rx = x->shape.rank, r = y->shape.rank, ri = iv->shape.rank;
  int axis = drk_axis_norm(drk_node_attr_int(n, "axis", 0), rx);
  if (axis < 0 || axis >= rx) return lw_err(c, "axis out of range");
  if (iv->dtype != DRK_DT_I64 && iv->dtype != DRK_DT_I32) return lw_err(c, "indices must be i32 or i64");
  int64_t xs[LW_MAX_RANK], is[LW_MAX_RANK];
  lw_strides(x, xs);
  lw_strides(iv, is);
  lw_kernel_begin(c, lw_index_dtype(n));
  tv_t *px = lw_param_buf(c, x, "x");
  tv_t *pi = lw_param_buf(c, iv, "indices");
  tv_t *py = lw_param_buf(c, y, "y");
  lw_flat_t f;
  lw_flat_begin(c, lw_numel(y), &f);
  /* offsets as strides over y's coordinates (lw_affine: runs of dims merged, so the sizes of
   * y's outer dims, an embedding's batch and sequence, appear nowhere in the code) */
  int64_t yd[LW_MAX_RANK], si[LW_MAX_RANK] = {0}, sx[LW_MAX_RANK] = {0};
  dims_of(y, yd);
  tv_t *ioff = f.offs, *xoff = NULL;
  bool any_x = false;
  if (n->op == DRK_OP_GATHER) { /* y coords: x[:axis], idx[...], x[axis+1:] */
    for (int j = 0; j < ri; j++) si[axis + j] = is[j];
    for (int j = 0; j < rx; j++)
      if (j != axis) sx[j < axis ? j : j - 1 + ri] = xs[j], any_x |= xs[j] != 0;
    ioff = lw_affine(c, f.offs, r, yd, si, 0);
  } else {
    for (int j = 0; j < rx; j++)
      if (j != axis) sx[j] = xs[j], any_x = true;
  }
  if (any_x) xoff = lw_affine(c, f.offs, r, yd, sx, 0);
  tv_t *idx = lw_cast(c, lw_load(c, pi, ioff, f.mask, 0), c->it);
  int64_t D = x->shape.dims[axis].size;
  idx = lw_sel(c, lw_cmp(c, "lt", idx, lw_ci(c, idx, 0)), BIN(ADD, idx, lw_ci(c, idx, D)), idx);
  tv_t *ok = BIN(AND, f.mask, BIN(AND, lw_cmp(c, "ge", idx, lw_ci(c, idx, 0)), lw_cmp(c, "lt", idx, lw_ci(c, idx, D))));
  xoff = lw_addmul(c, xoff, idx, xs[axis]);
  tv_t *v = lw_load(c, px, xoff, ok, 0);
  lw_store(c, py, f.offs, v, f.mask);
  lw_flat_end(c, &f);
  return true;
}

/* Range (start + i * delta; inputs loaded as scalars-by-tile) and constant fills. */
static bool lower_fill(drk_lctx_t *c, int out_index) {
  const drk_node_t *n = c->node;
  const drk_value_t *y = n->outputs[out_index];
  lw_kernel_begin(c, lw_index_dtype(n));
  tv_t *pst = NULL, *pdl = NULL;
  if (n->op == DRK_OP_RANGE) {
    pst = lw_param_buf(c, n->inputs[0], "start");
    pdl = lw_param_buf(c, n->inputs[2], "delta");
  }
  tv_t *py = lw_param_buf(c, y, "y");
  lw_flat_t f;
  lw_flat_begin(c, lw_numel(y), &f);
  tv_t *v;
  drk_dtype_t t = y->dtype;
  if (n->op == DRK_OP_RANGE) {
    drk_dtype_t ct = lw_compute_dtype(t);
    tv_t *z = lw_ci(c, f.offs, 0);
    tv_t *s = lw_cast(c, lw_load(c, pst, z, NULL, 0), ct), *d = lw_cast(c, lw_load(c, pdl, z, NULL, 0), ct);
    v = BIN(ADD, s, BIN(MUL, lw_cast(c, f.offs, ct), d));
  } else if (n->op == DRK_OP_CONSTANT_OF_SHAPE) {
    const drk_attr_t *a = drk_node_attr(n, "value");
    double val = a && a->kind == DRK_ATTR_TENSOR && a->tensor && a->tensor->data ? drk_value_const_f64(a->tensor, 0) : 0;
    v = lw_cdt(c, f.offs, t, val);
  } else if (n->op == DRK_OP_DROPOUT) {
    v = lw_cdt(c, f.offs, t, 1);
  } else { /* Shape, Size: a few constants, selected by position */
    const drk_value_t *x = n->inputs[0];
    int64_t vals[LW_MAX_RANK + 1];
    int nv = 0;
    if (n->op == DRK_OP_SIZE) vals[nv++] = lw_numel(x);
    else
      for (int i = 0; i < x->shape.rank; i++) vals[nv++] = x->shape.dims[i].size;
    int64_t st = drk_node_attr_int(n, "start", 0), en = drk_node_attr_int(n, "end", nv);
    if (n->op == DRK_OP_SIZE) st = 0, en = 1;
    if (st < 0) st += nv;
    if (en < 0) en += nv;
    if (st < 0) st = 0;
    if (en > nv) en = nv;
    v = lw_cdt(c, f.offs, t, 0);
    for (int64_t i = st; i < en; i++)
      v = lw_sel(c, lw_cmp(c, "eq", f.offs, lw_ci(c, f.offs, i - st)), lw_cdt(c, f.offs, t, (double)vals[i]), v);
  }
  lw_store(c, py, f.offs, v, f.mask);
  lw_flat_end(c, &f);
  return true;
}

bool drk_lower_move(drk_lctx_t *c) {
  const drk_node_t *n = c->node;
  switch (n->op) {
  case DRK_OP_CONCAT: return lower_concat(c);
  case DRK_OP_SPLIT: return lower_split(c);
  case DRK_OP_GATHER: case DRK_OP_GATHER_ELEMENTS: return lower_gather(c);
  case DRK_OP_GATHER_ND: case DRK_OP_SCATTER_ND: case DRK_OP_ONE_HOT: case DRK_OP_RESIZE: return drk_lower_gather(c);
  case DRK_OP_RANGE: case DRK_OP_CONSTANT_OF_SHAPE: case DRK_OP_SHAPE: case DRK_OP_SIZE: return lower_fill(c, 0);
  case DRK_OP_DROPOUT:
    lw_alias(c, n->outputs[0], n->inputs[0]);
    if (n->n_outputs > 1 && n->outputs[1]) return lower_fill(c, 1);
    return true;
  default: return lower_gatherlike(c);
  }
}
