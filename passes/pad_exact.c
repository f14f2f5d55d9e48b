/* Whether zero-padding the dynamic dims is exact (pad_exact.h).
 *
 * Requires: a canonical graph whose only symbolic dims are the dynamic ones (or fresh
 * symbols shape inference made from them). Guarantees: nothing is changed; every node that
 * would let padding change a result inside the actual shape is reported.
 *
 * Each axis of each value carries a mask: bit i when its size is dynamic dim i, FRESH (with
 * every bit) when it is a symbol inference made up (a product of dynamic dims, whose
 * element order padding would scramble). Sizes read as values (Shape, Size) carry a taint
 * mask of their own down the small shape arithmetic to the places that only shape things. */
#include "passes/pad_exact.h"

#include "ir/einsum.h"
#include "ir/tensor.h"
#include "passes/passes.h"

#include <math.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FRESH (1u << 31)

typedef struct pad_ctx {
  const drk_graph_t *g;
  const char *const *dyn;
  int n;
  uint32_t *taint; /* by value id: sizes of these dims read as data */
  uint32_t *itaint; /* by value id: a flattened index computed from these dims' sizes (positions
                     * times sizes: transformers' mask code traced), which only a Gather along
                     * their merged axis may read (rule_gather checks the expression) */
  drk_diag_t *d;
  int errors;
  const drk_node_t *last; /* the node refused last: one message a node */
  drk_value_t *const *lens; /* by dim: the input holding its actual size (drk_pass_pad_mask), or NULL */
  uint8_t *zero;            /* by value id: axes whose padded positions hold exact zeros */
  /* symbols inference (or the exporter: "batch*seq") made up that a Reshape showed to be o
   * static elements outside dims dims[0..nd) (outermost first, adjacent) times k static
   * elements inside them: batch x heads merged, GPT-2's Conv1D rows, WavLM's [time, batch *
   * heads] rows (o = time). Row-wise ops keep every element's place in them, and a Reshape
   * that splits them back into the same dims is exact */
  struct { const char *sym; int nd; uint8_t dims[DRK_PAD_MAX_DIMS]; int64_t o, k; } prod[32];
  int n_prod;
} pad_ctx_t;

static uint32_t all_bits(const pad_ctx_t *c) { return (uint32_t)((1ull << c->n) - 1) | FRESH; }

static int find_prod(const pad_ctx_t *c, const char *sym) {
  for (int j = 0; j < c->n_prod; j++)
    if (!strcmp(c->prod[j].sym, sym)) return j;
  return -1;
}

static uint32_t dim_mask(const pad_ctx_t *c, const drk_dim_t *x) {
  if (!x->sym) return 0;
  for (int i = 0; i < c->n; i++)
    if (strcmp(x->sym, c->dyn[i]) == 0) return 1u << i;
  int j = find_prod(c, x->sym);
  if (j < 0) return all_bits(c);
  uint32_t m = 0;
  for (int i = 0; i < c->prod[j].nd; i++) m |= 1u << c->prod[j].dims[i];
  return m;
}

static uint32_t axis_mask(const pad_ctx_t *c, const drk_value_t *v, int k) {
  if (!v || k < 0 || k >= v->shape.rank) return 0;
  return dim_mask(c, &v->shape.dims[k]);
}

static uint32_t value_mask(const pad_ctx_t *c, const drk_value_t *v) {
  uint32_t m = 0;
  if (!v) return 0;
  if (v->shape.rank < 0) return all_bits(c); /* unknown rank: anything */
  for (int k = 0; k < v->shape.rank; k++) m |= axis_mask(c, v, k);
  return m;
}

static uint32_t node_mask(const pad_ctx_t *c, const drk_node_t *n) {
  uint32_t m = 0;
  for (int i = 0; i < n->n_inputs; i++) m |= value_mask(c, n->inputs[i]);
  for (int i = 0; i < n->n_outputs; i++) m |= value_mask(c, n->outputs[i]);
  return m;
}

static const char *mask_name(const pad_ctx_t *c, uint32_t m) {
  for (int i = 0; i < c->n; i++)
    if (m & (1u << i) && !(m & FRESH)) return c->dyn[i];
  return c->n == 1 ? c->dyn[0] : "a size derived from the dynamic dims (a symbol shape inference made up)";
}

static void refuse(pad_ctx_t *c, const drk_node_t *n, uint32_t m, const char *why) {
  if (c->last == n) return;
  c->last = n;
  const char *out = n->n_outputs && n->outputs[0] ? n->outputs[0]->name : "?";
  drk_diag_error(c->d, n->loc, "not implemented: exact padding of %s through %%%s = %s (%s); bind it with --bind or "
                 "leave it out of --dynamic",
                 mask_name(c, m), out, drk_op_name(n->op), why);
  c->errors++;
}

/* ---- size taint: Shape/Size results down to the places that only shape something ---- */

/* Whether input i of n may be a size read as a value: the node only shapes with it. */
static bool size_sink(const drk_node_t *n, int i) {
  switch (n->op) {
  case DRK_OP_RESHAPE: case DRK_OP_EXPAND: case DRK_OP_TILE: return i == 1; /* Tile: rule_tile checks the axes */
  case DRK_OP_RESIZE: return i == 3; /* sizes: rule_resize keeps the padded axes as they are */
  case DRK_OP_CONSTANT_OF_SHAPE: return i == 0;
  case DRK_OP_SLICE: return i == 2; /* an end; the Slice rule checks its start is 0 */
  case DRK_OP_RANGE: return i == 1; /* the limit: elements start + k*delta do not depend on it */
  default: return false;
  }
}

/* Small shape arithmetic that passes the taint on (its result is a short vector). */
static bool size_arith(const drk_node_t *n) {
  if (drk_op_info(n->op)->flags & DRK_OPF_EW) goto small;
  switch (n->op) {
  case DRK_OP_GATHER: case DRK_OP_CONCAT: case DRK_OP_UNSQUEEZE: case DRK_OP_SQUEEZE: case DRK_OP_SLICE:
  case DRK_OP_RESHAPE: case DRK_OP_IDENTITY: case DRK_OP_FLATTEN: goto small;
  default: return false;
  }
small:
  for (int o = 0; o < n->n_outputs; o++) {
    const drk_value_t *v = n->outputs[o];
    if (!v || v->shape.rank > 1 || drk_shape_numel(&v->shape) < 0 || drk_shape_numel(&v->shape) > 16) return false;
  }
  return true;
}

/* Integer arithmetic and views an index expression is made of. */
static bool index_arith(const drk_node_t *n) {
  const drk_value_t *y = n->n_outputs ? n->outputs[0] : NULL;
  if (!y || !drk_dtype_is_int(y->dtype)) return false;
  switch (n->op) {
  case DRK_OP_ADD: case DRK_OP_MUL: case DRK_OP_UNSQUEEZE: case DRK_OP_CAST: case DRK_OP_EXPAND: case DRK_OP_RESHAPE:
    return true;
  default: return false;
  }
}

static void check_taint(pad_ctx_t *c, const drk_node_t *n) {
  if (n->op == DRK_OP_SHAPE || n->op == DRK_OP_SIZE) {
    uint32_t m = value_mask(c, n->inputs[0]);
    if (m && n->outputs[0]) c->taint[n->outputs[0]->id] |= m;
    return;
  }
  uint32_t t = 0, bad = 0, it = 0;
  for (int i = 0; i < n->n_inputs; i++) {
    const drk_value_t *v = n->inputs[i];
    if (v && c->itaint[v->id] && !(n->op == DRK_OP_GATHER && i == 1)) it |= c->itaint[v->id];
    if (!v || !c->taint[v->id]) continue;
    t |= c->taint[v->id];
    if (!size_sink(n, i)) bad |= c->taint[v->id];
  }
  if (!bad && !it) return;
  if (bad && !it && size_arith(n)) {
    for (int o = 0; o < n->n_outputs; o++)
      if (n->outputs[o]) c->taint[n->outputs[o]->id] |= t;
    return;
  }
  if (index_arith(n)) { /* deferred to the Gather that reads it */
    c->itaint[n->outputs[0]->id] |= bad | it;
    return;
  }
  refuse(c, n, bad | it, "it reads the padded size as a value");
}

/* ---- per-op rules ---- */

/* Splits a shape at its padded axes: the dims' symbols in order, and the static element
 * count of each stretch around them. False when a dim is a product of dynamic dims. */
static bool split_at_dyn(const pad_ctx_t *c, const drk_shape_t *s, const char **syms, int64_t *seg, int *out_n) {
  int nd = 0;
  seg[0] = 1;
  for (int k = 0; k < s->rank; k++) {
    uint32_t m = dim_mask(c, &s->dims[k]);
    if (m & FRESH) return false;
    if (!m) {
      if (!drk_numel_mul(&seg[nd], s->dims[k].size)) return false;
      continue;
    }
    int j = find_prod(c, s->dims[k].sym); /* a product: static outside, its dims, static inside */
    if (j < 0) {
      syms[nd++] = s->dims[k].sym;
      seg[nd] = 1;
      continue;
    }
    if (!drk_numel_mul(&seg[nd], c->prod[j].o)) return false;
    for (int i = 0; i < c->prod[j].nd; i++) {
      if (nd == DRK_MAX_RANK) return false;
      syms[nd++] = c->dyn[c->prod[j].dims[i]];
      seg[nd] = 1;
    }
    seg[nd] = c->prod[j].k;
  }
  *out_n = nd;
  return true;
}

/* y's one made-up axis read as a product of the dynamic dims x has and y has not (in x's
 * order) times static elements, when the element counts say so; kept when the segments then
 * line up (rule_reshape). */
static void learn_product(pad_ctx_t *c, const drk_value_t *x, const drk_value_t *y) {
  int fresh = -1;
  int64_t sx = 1, sy = 1;
  uint32_t dx = 0, dy = 0;
  for (int k = 0; k < y->shape.rank; k++) {
    uint32_t m = dim_mask(c, &y->shape.dims[k]);
    if (m & FRESH) {
      if (fresh >= 0) return;
      fresh = k;
    } else if (m) {
      if (dy & m) return;
      dy |= m;
    } else if (!drk_numel_mul(&sy, y->shape.dims[k].size)) return;
  }
  for (int k = 0; k < x->shape.rank; k++) {
    uint32_t m = dim_mask(c, &x->shape.dims[k]);
    if (m & FRESH) return;
    if (m) {
      int j = find_prod(c, x->shape.dims[k].sym);
      if ((dx & m) || (j >= 0 && (!drk_numel_mul(&sx, c->prod[j].k) || !drk_numel_mul(&sx, c->prod[j].o)))) return;
      dx |= m;
    } else if (!drk_numel_mul(&sx, x->shape.dims[k].size)) return;
  }
  uint32_t left = dx & ~dy;
  if (fresh < 0 || (dy & ~dx) || !left || sy <= 0 || sx % sy || c->n_prod == 32) return;
  int nd = 0;
  for (int k = 0; k < x->shape.rank; k++) { /* x's order; a product in x gives its dims */
    const char *sym = x->shape.dims[k].sym;
    int j = sym ? find_prod(c, sym) : -1;
    for (int i = 0; i < c->n; i++)
      if (left & (1u << i) && ((sym && !strcmp(sym, c->dyn[i])) || (j >= 0 && memchr(c->prod[j].dims, i, (size_t)c->prod[j].nd))))
        c->prod[c->n_prod].dims[nd++] = (uint8_t)i;
  }
  if (nd != __builtin_popcount(left)) return;
  /* the static elements outside (o) and inside (k) the dims: x's stretches around them over
   * y's around the made-up axis (the Reshape rule then checks that every stretch lines up) */
  const char *xs[DRK_MAX_RANK];
  int64_t gx[DRK_MAX_RANK + 1], a = 1, b = 1;
  int nxs, i0 = 0;
  if (!split_at_dyn(c, &x->shape, xs, gx, &nxs)) return;
  while (i0 < nxs && strcmp(xs[i0], c->dyn[c->prod[c->n_prod].dims[0]])) i0++;
  if (i0 + nd > nxs) return;
  for (int t = 1; t < nd; t++)
    if (strcmp(xs[i0 + t], c->dyn[c->prod[c->n_prod].dims[t]]) || gx[i0 + t] != 1) return;
  for (int k = fresh - 1; k >= 0; k--) { /* y's static stretch before the axis (and a product's k) */
    const drk_dim_t *dd = &y->shape.dims[k];
    int j = dd->sym ? find_prod(c, dd->sym) : -1;
    if (j >= 0 && !drk_numel_mul(&a, c->prod[j].k)) return;
    if (dd->sym) break;
    if (!drk_numel_mul(&a, dd->size)) return;
  }
  for (int k = fresh + 1; k < y->shape.rank; k++) { /* and after it (a product's o) */
    const drk_dim_t *dd = &y->shape.dims[k];
    int j = dd->sym ? find_prod(c, dd->sym) : -1;
    if (j >= 0 && !drk_numel_mul(&b, c->prod[j].o)) return;
    if (dd->sym) break;
    if (!drk_numel_mul(&b, dd->size)) return;
  }
  if (a <= 0 || b <= 0 || gx[i0] % a || gx[i0 + nd] % b) return;
  c->prod[c->n_prod].sym = y->shape.dims[fresh].sym, c->prod[c->n_prod].nd = nd;
  c->prod[c->n_prod].o = gx[i0] / a, c->prod[c->n_prod].k = gx[i0 + nd] / b;
  c->n_prod++;
}

static void rule_reshape(pad_ctx_t *c, const drk_node_t *n) {
  const drk_value_t *x = n->inputs[0], *y = n->outputs[0];
  const char *sx[DRK_MAX_RANK], *sy[DRK_MAX_RANK];
  int64_t gx[DRK_MAX_RANK + 1], gy[DRK_MAX_RANK + 1];
  int nx = 0, ny = 0;
  uint32_t m = value_mask(c, x); /* name the input's dims where it has them */
  if (!m || (m & FRESH)) m |= value_mask(c, y);
  int n_prod = c->n_prod;
  if (x->shape.rank >= 0 && y->shape.rank >= 0) learn_product(c, x, y);
  bool ok = x->shape.rank >= 0 && y->shape.rank >= 0 && split_at_dyn(c, &x->shape, sx, gx, &nx) &&
            split_at_dyn(c, &y->shape, sy, gy, &ny) && nx == ny;
  for (int i = 0; ok && i < nx; i++) ok = strcmp(sx[i], sy[i]) == 0;
  for (int i = 0; ok && i <= nx; i++) ok = gx[i] == gy[i];
  if (!ok) {
    c->n_prod = n_prod; /* not a product after all */
    refuse(c, n, m, "it merges the dim with another or moves it");
  }
}

static void rule_axis(pad_ctx_t *c, const drk_node_t *n, const drk_value_t *v, int64_t axis, const char *why) {
  if (!v || v->shape.rank < 0) return;
  int a = drk_axis_norm(axis, v->shape.rank);
  uint32_t m = axis_mask(c, v, a);
  if (m) refuse(c, n, m, why);
}

/* Axes [from, rank) of v must not be padded. */
static void rule_tail(pad_ctx_t *c, const drk_node_t *n, const drk_value_t *v, int64_t from, const char *why) {
  if (!v || v->shape.rank < 0) return;
  for (int k = drk_axis_norm(from, v->shape.rank); k < v->shape.rank; k++) {
    uint32_t m = axis_mask(c, v, k);
    if (m) {
      refuse(c, n, m, why);
      return;
    }
  }
}

static bool zero_at(const pad_ctx_t *c, const drk_value_t *v, int axis);
static bool masked_with(const pad_ctx_t *c, const drk_value_t *x, int a, double fill);

/* Sums (ReduceSum, ReduceSumSquare, ReduceL2) over an axis whose padded positions hold
 * exact zeros add nothing for them: the masked sums of mean pooling (sum(x * mask) / sum(mask),
 * the mask a zero-padded input). */
static void rule_reduce_axis(pad_ctx_t *c, const drk_node_t *n, const drk_value_t *x, int64_t axis, const char *why) {
  bool sum = n->op == DRK_OP_REDUCE_SUM || n->op == DRK_OP_REDUCE_SUM_SQUARE ||
             n->op == DRK_OP_REDUCE_L2;
  if (sum && x && x->shape.rank > 0 && zero_at(c, x, (int)axis)) return;
  if ((n->op == DRK_OP_REDUCE_MAX || n->op == DRK_OP_REDUCE_MIN) && x && x->shape.rank > 0 &&
      masked_with(c, x, drk_axis_norm(axis, x->shape.rank), n->op == DRK_OP_REDUCE_MAX ? -INFINITY : INFINITY))
    return;
  rule_axis(c, n, x, axis, why);
}

static bool is_len_mask(const pad_ctx_t *c, const drk_value_t *v, int i);

/* Whether x is Where(keep, v, fill) with the keep mask of axis a's dim, shaped against axis a. */
static bool masked_with(const pad_ctx_t *c, const drk_value_t *x, int a, double fill) {
  const drk_node_t *w = x->kind == DRK_VALUE_NODE ? x->def : NULL;
  if (!w || w->op != DRK_OP_WHERE || w->n_inputs != 3 || !w->inputs[0] || !w->inputs[2]) return false;
  const drk_value_t *f = w->inputs[2];
  if (f->kind != DRK_VALUE_CONST || drk_shape_numel(&f->shape) != 1 || drk_value_const_f64(f, 0) != fill) return false;
  if (w->inputs[0]->shape.rank != x->shape.rank - a) return false;
  uint32_t m = axis_mask(c, x, a);
  for (int i = 0; i < c->n; i++)
    if (m == 1u << i && is_len_mask(c, w->inputs[0], i)) return true;
  return false;
}

static void rule_reduce(pad_ctx_t *c, const drk_node_t *n) {
  const drk_value_t *x = n->inputs[0];
  size_t na = 0;
  const int64_t *axes = drk_node_attr_ints(n, "axes", &na);
  char why[96];
  snprintf(why, sizeof why, "%s over it", drk_op_name(n->op));
  if (!axes && n->n_inputs > 1 && n->inputs[1]) {
    const drk_value_t *av = n->inputs[1];
    if (av->kind != DRK_VALUE_CONST) {
      refuse(c, n, value_mask(c, x), "its axes are not constant");
      return;
    }
    for (int64_t i = 0; i < drk_shape_numel(&av->shape); i++)
      rule_reduce_axis(c, n, x, (int64_t)drk_value_const_f64(av, i), why);
    return;
  }
  if (axes) {
    for (size_t i = 0; i < na; i++) rule_reduce_axis(c, n, x, axes[i], why);
    return;
  }
  if (drk_node_attr_int(n, "noop_with_empty_axes", 0)) return;
  for (int k = 0; x && k < x->shape.rank; k++) rule_reduce_axis(c, n, x, k, why);
}

static void rule_slice(pad_ctx_t *c, const drk_node_t *n) {
  const drk_value_t *x = n->inputs[0], *y = n->outputs[0];
  const drk_value_t *starts = n->inputs[1], *axes = n->n_inputs > 3 ? n->inputs[3] : NULL;
  const drk_value_t *steps = n->n_inputs > 4 ? n->inputs[4] : NULL;
  if (x->shape.rank < 0 || (axes && axes->kind != DRK_VALUE_CONST)) {
    refuse(c, n, value_mask(c, x) | value_mask(c, y), "its axes are not constant");
    return;
  }
  /* without axes, starts lists the first axes in order */
  int64_t na = axes ? drk_shape_numel(&axes->shape) : starts ? drk_shape_numel(&starts->shape) : -1;
  if (na < 0 || na > x->shape.rank) na = x->shape.rank;
  for (int64_t j = 0; j < na; j++) {
    int a = drk_axis_norm(axes ? (int64_t)drk_value_const_f64(axes, j) : j, x->shape.rank);
    uint32_t mi = axis_mask(c, x, a), mo = axis_mask(c, y, a);
    if (mi) {
      refuse(c, n, mi, "Slice along it");
      return;
    }
    if (!mo) continue;
    /* a static axis cut to a dynamic size: exact from 0 with step 1 */
    bool from0 = starts && starts->kind == DRK_VALUE_CONST && j < drk_shape_numel(&starts->shape) &&
                 (int64_t)drk_value_const_f64(starts, j) == 0;
    bool step1 = !steps || (steps->kind == DRK_VALUE_CONST && j < drk_shape_numel(&steps->shape) &&
                            (int64_t)drk_value_const_f64(steps, j) == 1);
    if (!from0 || !step1) {
      refuse(c, n, mo, "Slice to a dynamic size not starting at 0 with step 1");
      return;
    }
  }
}

static int64_t axis_size(const drk_value_t *v, int a) {
  return v && a >= 0 && a < v->shape.rank && !v->shape.dims[a].sym ? v->shape.dims[a].size : -1;
}

static bool all_zero_const(const drk_value_t *v) { /* index 0 everywhere */
  if (!v || v->kind != DRK_VALUE_CONST) return false;
  for (int64_t i = 0; i < drk_shape_numel(&v->shape); i++)
    if (drk_value_const_f64(v, i) != 0) return false;
  return true;
}

/* Gathers: an index at a real position is computed from real values only (the other rules
 * see to it), so it is the exact shape's index; along a static axis it reads the same element
 * (and a padded position's index, whatever it is, reads 0 if out of range: the GPU gathers
 * mask their loads, lower_move.c / lower_gather.c). Along a padded axis a negative index would
 * count from the padded end, so only index 0 (BERT's pooler reads token 0) or the dim's own
 * positions (iota_sym) are taken there. */
static const char *iota_sym(const drk_value_t *v);

/* v through views, casts and expands (at most 16) */
static const drk_value_t *skip_views(const drk_value_t *v) {
  for (int guard = 0; v && v->kind == DRK_VALUE_NODE && v->def && guard < 16; guard++) {
    drk_op_t op = v->def->op;
    if (op != DRK_OP_CAST && op != DRK_OP_EXPAND && !drk_op_aliases_input(op)) break;
    v = v->def->inputs[0];
  }
  return v;
}

/* The dim whose size v is: Gather(Shape(t), k) (through views), t's axis k a single symbol. */
static const char *size_of(const drk_value_t *v) {
  v = skip_views(v);
  const drk_node_t *g = v && v->kind == DRK_VALUE_NODE ? v->def : NULL;
  if (!g || g->op != DRK_OP_GATHER || drk_node_attr_int(g, "axis", 0) != 0 || !g->inputs[1] ||
      g->inputs[1]->kind != DRK_VALUE_CONST || drk_shape_numel(&g->inputs[1]->shape) != 1)
    return NULL;
  const drk_value_t *sh = g->inputs[0];
  const drk_node_t *s = sh && sh->kind == DRK_VALUE_NODE ? sh->def : NULL;
  if (!s || s->op != DRK_OP_SHAPE || drk_node_attr_int(s, "start", 0) != 0 || !s->inputs[0]) return NULL;
  const drk_value_t *t = s->inputs[0];
  int64_t k = (int64_t)drk_value_const_f64(g->inputs[1], 0);
  if (k < 0) k += t->shape.rank;
  return k >= 0 && k < t->shape.rank ? t->shape.dims[k].sym : NULL;
}

/* The dim whose size element i of the 1-D vector v is: Concat of pieces (sizes, constants),
 * each piece Shape(t) sliced to one axis (start/end) or Gather(Shape(t), k). */
static const char *size_elem(const drk_value_t *v, int64_t i) {
  v = skip_views(v);
  const drk_node_t *d = v && v->kind == DRK_VALUE_NODE ? v->def : NULL;
  if (d && d->op == DRK_OP_CONCAT) {
    for (int p = 0; p < d->n_inputs; p++) {
      const drk_value_t *q = d->inputs[p];
      int64_t len = q && q->shape.rank == 1 ? q->shape.dims[0].size : q && q->shape.rank == 0 ? 1 : -1;
      if (len < 0 || q->shape.dims[0].sym) return NULL;
      if (i < len) return size_elem(q, i);
      i -= len;
    }
    return NULL;
  }
  if (d && d->op == DRK_OP_SHAPE && d->inputs[0]) { /* Shape(t, start, end) */
    const drk_value_t *t = d->inputs[0];
    int64_t st = drk_node_attr_int(d, "start", 0);
    if (st < 0) st += t->shape.rank;
    return st + i >= 0 && st + i < t->shape.rank ? t->shape.dims[st + i].sym : NULL;
  }
  return i == 0 ? size_of(v) : NULL;
}

/* One term of an index expression: the positions along dim `iota` ("" and len: positions 0..len-1
 * of a static stretch, a constant once the graph is folded) times the sizes of dims and a static
 * scale. */
typedef struct {
  const char *iota;
  int64_t len;
  bool data; /* iota "": an index in [0, len) computed from data (arg_range), not positions */
  const char *sizes[DRK_PAD_MAX_DIMS];
  int n_sizes;
  int64_t scale;
} term_t;

/* len when v is an ArgMax/ArgMin over a static axis of len elements (through views): a value in
 * [0, len) that pad_exact's other rules prove exact at real positions (CLIP's pooled token,
 * `(ids == eos).argmax(-1)`), else 0. */
static int64_t arg_range(const drk_value_t *v) {
  v = skip_views(v);
  const drk_node_t *d = v && v->kind == DRK_VALUE_NODE ? v->def : NULL;
  if (!d || (d->op != DRK_OP_ARG_MAX && d->op != DRK_OP_ARG_MIN) || !d->inputs[0] || d->inputs[0]->shape.rank <= 0) return 0;
  const drk_value_t *x = d->inputs[0];
  int a = drk_axis_norm(drk_node_attr_int(d, "axis", 0), x->shape.rank);
  if (a < 0 || a >= x->shape.rank || x->shape.dims[a].sym) return 0;
  return x->shape.dims[a].size;
}

/* The value of a one-element integer constant (through views), or -1. */
static int64_t const_scalar(const drk_value_t *v) {
  v = skip_views(v);
  if (!v || v->kind != DRK_VALUE_CONST || !drk_dtype_is_int(v->dtype) || drk_shape_numel(&v->shape) != 1) return -1;
  return (int64_t)drk_value_const_f64(v, 0);
}

/* len when v is the constant 0, 1, ..., len-1 along its one axis longer than 1 (a folded
 * Range(0, len, 1), unsqueezed), else 0. */
static int64_t const_iota(const drk_value_t *v) {
  v = skip_views(v);
  if (!v || v->kind != DRK_VALUE_CONST || !drk_dtype_is_int(v->dtype) || v->shape.rank < 1) return 0;
  int64_t n = drk_shape_numel(&v->shape);
  int longer = 0;
  for (int k = 0; k < v->shape.rank; k++) longer += v->shape.dims[k].size > 1;
  if (n < 2 || longer != 1) return 0;
  for (int64_t i = 0; i < n; i++)
    if (drk_value_const_f64(v, i) != (double)i) return 0;
  return n;
}

/* Splits an index expression into terms positions(dim) x sizes...; false when it is not one. */
static bool index_terms(const drk_value_t *v, term_t *terms, int *n, int max) {
  v = skip_views(v);
  const drk_node_t *d = v && v->kind == DRK_VALUE_NODE ? v->def : NULL;
  if (d && d->op == DRK_OP_ADD) return index_terms(d->inputs[0], terms, n, max) && index_terms(d->inputs[1], terms, n, max);
  if (*n == max) return false;
  term_t t = {.scale = 1};
  while (d && d->op == DRK_OP_MUL) { /* positions x size x size ... (x static sizes) */
    const char *s0 = size_of(d->inputs[0]), *s1 = size_of(d->inputs[1]);
    int64_t k0 = const_scalar(d->inputs[0]), k1 = const_scalar(d->inputs[1]);
    const drk_value_t *rest = s1 || k1 > 0 ? d->inputs[0] : s0 || k0 > 0 ? d->inputs[1] : NULL;
    if (!rest || t.n_sizes == DRK_PAD_MAX_DIMS) return false;
    if (s1 || s0) t.sizes[t.n_sizes++] = s1 ? s1 : s0;
    else if (!drk_numel_mul(&t.scale, k1 > 0 ? k1 : k0)) return false;
    v = skip_views(rest);
    d = v && v->kind == DRK_VALUE_NODE ? v->def : NULL;
  }
  if (!(t.iota = iota_sym(v)) && (t.len = const_iota(v)) > 0) t.iota = "";
  if (!t.iota && (t.len = arg_range(v)) > 0) t.iota = "", t.data = true;
  if (!t.iota) return false;
  terms[(*n)++] = t;
  return true;
}

/* Gather along an axis merging dims d0..dm (row-major) and K static elements inside them at
 * indices positions(d0) x size(d1) x ... x size(dm) x K + ... + positions(dm) x K + 0..K-1:
 * the row-major offset of a position in the padded layout, so a real position reads its own
 * real element (K > 1: the TorchScript mask code with the sequence bound, its size folded; the
 * last term may also be an index in [0, K) from data: CLIP's pooled token,
 * `x[arange(batch), ids.argmax(-1)]`, reads a real row's own element). */
static bool flat_index_gather(const pad_ctx_t *c, const drk_value_t *x, int a, const drk_value_t *idx) {
  int j = x->shape.dims[a].sym ? find_prod(c, x->shape.dims[a].sym) : -1;
  if (j < 0 || c->prod[j].o != 1) return false;
  for (int k = a + 1; k < x->shape.rank; k++) /* static dims after the merged axis, carried along */
    if (x->shape.dims[k].sym || x->shape.dims[k].size < 0) return false;
  term_t terms[DRK_PAD_MAX_DIMS];
  int nt = 0, m = c->prod[j].nd;
  int64_t K = c->prod[j].k;
  if (!index_terms(idx, terms, &nt, DRK_PAD_MAX_DIMS) || nt != m + (K > 1)) return false;
  bool used[DRK_PAD_MAX_DIMS] = {false};
  if (K > 1) { /* the static stretch's own positions, or an index into it computed from data */
    int t = 0;
    while (t < nt && !(!terms[t].iota[0] && terms[t].len == K && terms[t].scale == 1 && !terms[t].n_sizes)) t++;
    if (t == nt) return false;
    used[t] = true;
  }
  for (int i = 0; i < m; i++) {
    const char *di = c->dyn[c->prod[j].dims[i]];
    int t = 0;
    while (t < nt && (used[t] || strcmp(terms[t].iota, di))) t++;
    if (t == nt || terms[t].n_sizes != m - 1 - i || terms[t].scale != K) return false;
    used[t] = true;
    for (int l = i + 1; l < m; l++) { /* the sizes of the dims after it, in any order */
      const char *dl = c->dyn[c->prod[j].dims[l]];
      bool found = false;
      for (int q = 0; q < terms[t].n_sizes && !found; q++) found = terms[t].sizes[q] && !strcmp(terms[t].sizes[q], dl);
      if (!found) return false;
    }
  }
  return true;
}

static void rule_gather(pad_ctx_t *c, const drk_node_t *n) {
  const drk_value_t *x = n->inputs[0], *idx = n->inputs[1];
  if (!x || x->shape.rank <= 0) return;
  int a = drk_axis_norm(drk_node_attr_int(n, "axis", 0), x->shape.rank);
  const char *why = n->op == DRK_OP_GATHER ? "Gather along it" : "GatherElements along it";
  bool flat = n->op == DRK_OP_GATHER && idx && flat_index_gather(c, x, a, idx);
  if (idx && c->itaint[idx->id] && !flat) refuse(c, n, c->itaint[idx->id], "it reads the padded size as a value");
  if (!all_zero_const(idx) && !flat) rule_axis(c, n, x, a, why);
}

/* The dim symbol v counts along when it is Range(0, dim, 1) (through views, casts, expands). */
static const char *iota_sym(const drk_value_t *v) {
  v = skip_views(v);
  const drk_node_t *d = v && v->kind == DRK_VALUE_NODE ? v->def : NULL;
  if (!d || d->op != DRK_OP_RANGE) return NULL;
  bool from0 = d->inputs[0] && d->inputs[0]->kind == DRK_VALUE_CONST && drk_value_const_f64(d->inputs[0], 0) == 0;
  bool step1 = d->inputs[2] && d->inputs[2]->kind == DRK_VALUE_CONST && drk_value_const_f64(d->inputs[2], 0) == 1;
  return from0 && step1 && v->shape.rank == 1 ? v->shape.dims[0].sym : NULL;
}

/* GatherND(data, Concat(i0, i1, ...)) with each padded axis k of data indexed by the positions
 * of that dim (Range(0, dim, 1) broadcast: the attention-mask lookup of transformers' mask
 * code): a real result position reads the same real element at every size. */
static void rule_gather_nd(pad_ctx_t *c, const drk_node_t *n) {
  const drk_value_t *x = n->inputs[0], *idx = n->inputs[1];
  const drk_node_t *cat = idx && idx->kind == DRK_VALUE_NODE ? idx->def : NULL;
  int r = idx && idx->shape.rank > 0 ? (int)axis_size(idx, idx->shape.rank - 1) : -1;
  /* indexing only unpadded axes of the data (an adaptive pool's, a head pick), with indices of
   * no padded dim: the padded axes after them are carried along like a batch */
  bool indexed_padded = r < 0 || !x || x->shape.rank < r;
  for (int k = 0; !indexed_padded && k < r; k++) indexed_padded = axis_mask(c, x, k) != 0;
  if (!indexed_padded && !drk_node_attr_int(n, "batch_dims", 0) && !value_mask(c, idx)) return;
  bool ok = x && x->shape.rank >= r && r > 0 && !drk_node_attr_int(n, "batch_dims", 0) && cat &&
            cat->op == DRK_OP_CONCAT && cat->n_inputs == r &&
            drk_axis_norm(drk_node_attr_int(cat, "axis", 0), idx->shape.rank) == idx->shape.rank - 1;
  for (int k = 0; ok && k < r; k++) {
    const drk_value_t *comp = cat->inputs[k];
    ok = comp && axis_size(comp, comp->shape.rank - 1) == 1;
    if (!ok) break;
    if (axis_mask(c, x, k)) {
      const char *sym = iota_sym(comp);
      ok = sym && x->shape.dims[k].sym && !strcmp(sym, x->shape.dims[k].sym);
    }
  }
  if (!ok) refuse(c, n, node_mask(c, n), "GatherND whose indices are not the padded dims' own positions");
}

/* Tile repeating only unpadded axes, broadcasting a size-1 axis to a padded dim (x.repeat(
 * batch, 1, 1)), or repeating a static block along dims merged outside it: every result element
 * at a real position is a copy of an input element. */
static void rule_tile(pad_ctx_t *c, const drk_node_t *n) {
  const drk_value_t *x = n->inputs[0], *y = n->outputs[0];
  if (!x || !y || x->shape.rank < 0 || x->shape.rank != y->shape.rank) {
    refuse(c, n, node_mask(c, n), "Tile of an unknown rank");
    return;
  }
  for (int k = 0; k < x->shape.rank; k++) {
    uint32_t xm = axis_mask(c, x, k), ym = axis_mask(c, y, k);
    const drk_dim_t *xd = &x->shape.dims[k], *yd = &y->shape.dims[k];
    /* a static block tiled along dims merged outside it ([4, ...] repeated batch times into the
     * rows of "4*batch": row b*4+h is block row h) */
    int j = yd->sym ? find_prod(c, yd->sym) : -1;
    if (j < 0 && !xm && !xd->sym && xd->size > 1 && (ym & FRESH) && c->n_prod < 32) {
      /* a made-up dim the repeat of a dynamic dim's size makes (bloom's alibi: [4, 1, 16]
       * tiled batch times into "4*batch" rows): that dim outside, the block inside */
      const char *d = size_elem(n->inputs[1], k);
      for (int i = 0; d && i < c->n; i++)
        if (!strcmp(d, c->dyn[i])) {
          c->prod[c->n_prod].sym = yd->sym, c->prod[c->n_prod].nd = 1, c->prod[c->n_prod].dims[0] = (uint8_t)i;
          c->prod[c->n_prod].k = xd->size, c->prod[c->n_prod].o = 1;
          j = c->n_prod++;
          ym = axis_mask(c, y, k);
        }
    }
    bool block = !xm && !xd->sym && j >= 0 && c->prod[j].k == xd->size && c->prod[j].o == 1;
    if (xm && !(yd->sym && xd->sym && !strcmp(xd->sym, yd->sym))) refuse(c, n, xm, "Tile along it");
    else if (!xm && ym && (xd->sym || xd->size != 1) && !block) refuse(c, n, ym, "Tile along it");
  }
}

/* Pad (any mode) that pads no padded axis. */
static void rule_pad(pad_ctx_t *c, const drk_node_t *n) {
  const drk_value_t *x = n->inputs[0], *pads = n->n_inputs > 1 ? n->inputs[1] : NULL;
  const drk_value_t *axes = n->n_inputs > 3 ? n->inputs[3] : NULL;
  if (!x || x->shape.rank < 0) return;
  int r = x->shape.rank;
  if (!pads || pads->kind != DRK_VALUE_CONST || (axes && axes->kind != DRK_VALUE_CONST)) {
    refuse(c, n, value_mask(c, x), "its pads are not constant");
    return;
  }
  int na = axes ? (int)drk_shape_numel(&axes->shape) : r;
  if (na < 0 || drk_shape_numel(&pads->shape) != 2 * na) return; /* the verifier's */
  for (int i = 0; i < na; i++) {
    int k = axes ? drk_axis_norm((int64_t)drk_value_const_f64(axes, i), r) : i;
    uint32_t m = axis_mask(c, x, k);
    if (m && (drk_value_const_f64(pads, i) != 0 || drk_value_const_f64(pads, na + i) != 0))
      refuse(c, n, m, "Pad along it");
  }
}

/* Einsum keeping every padded axis of its operands in the result (no sum over one). */
static void rule_einsum(pad_ctx_t *c, const drk_node_t *n) {
  const char *eq = drk_node_attr_string(n, "equation", NULL);
  if (!eq) {
    refuse(c, n, node_mask(c, n), "Einsum without an equation");
    return;
  }
  const char *arrow = strstr(eq, "->"), *end = arrow ? arrow : eq + strlen(eq);
  bool keep[64] = {false}, keep_ell = false;
  int count[64] = {0};
  const char *p = eq;
  int lab[DRK_MAX_RANK + 8];
  for (int i = 0; i < n->n_inputs; i++) { /* label counts, for the implicit result */
    const char *q = p;
    while (q < end && *q != ',') q++;
    bool ell = false;
    int nl = drk_einsum_parse_term(p, q, lab, DRK_MAX_RANK + 8, &ell);
    for (int k = 0; k < nl; k++)
      if (lab[k] >= 0 && lab[k] < 64) count[lab[k]]++;
    keep_ell |= ell;
    p = q < end ? q + 1 : q;
  }
  if (arrow) {
    bool ell = false;
    int nl = drk_einsum_parse_term(arrow + 2, arrow + 2 + strlen(arrow + 2), lab, DRK_MAX_RANK + 8, &ell);
    keep_ell = ell;
    for (int k = 0; k < nl; k++)
      if (lab[k] >= 0 && lab[k] < 64) keep[lab[k]] = true;
  } else
    for (int l = 0; l < 64; l++) keep[l] = count[l] == 1;
  p = eq;
  for (int i = 0; i < n->n_inputs; i++) {
    const char *q = p;
    while (q < end && *q != ',') q++;
    const drk_value_t *x = n->inputs[i];
    bool ell = false;
    int nl = drk_einsum_parse_term(p, q, lab, DRK_MAX_RANK + 8, &ell);
    if (!x || x->shape.rank < 0 || nl < 0) {
      refuse(c, n, node_mask(c, n), "an Einsum term drkc cannot read");
      return;
    }
    int span = x->shape.rank - (nl - (ell ? 1 : 0)), ax = 0; /* axes under the ellipsis */
    for (int k = 0; k < nl; k++) {
      int width = lab[k] == -2 ? span : 1;
      for (int w = 0; w < width; w++, ax++) {
        uint32_t m = axis_mask(c, x, ax);
        bool kept = lab[k] == -2 ? keep_ell : lab[k] >= 0 && lab[k] < 64 && keep[lab[k]];
        if (m && !kept) refuse(c, n, m, "Einsum sums over it");
      }
    }
    p = q < end ? q + 1 : q;
  }
}

static bool zero_at(const pad_ctx_t *c, const drk_value_t *v, int axis) {
  return v && v->shape.rank > 0 && v->shape.rank <= 8 && c->zero[v->id] >> drk_axis_norm(axis, v->shape.rank) & 1;
}

static void rule_matmul(pad_ctx_t *c, const drk_node_t *n) {
  const drk_value_t *a = n->inputs[0], *b = n->inputs[1];
  /* attention's P x V over padded keys: P is exactly 0 there (a masked Softmax), V finite */
  if (n->op == DRK_OP_MATMUL && a && b && a->shape.rank >= 2 && b->shape.rank >= 2 &&
      (zero_at(c, a, -1) || zero_at(c, b, -2)))
    return;
  bool ta = false, tb = false;
  if (n->op == DRK_OP_GEMM) ta = drk_node_attr_int(n, "transA", 0), tb = drk_node_attr_int(n, "transB", 0);
  const char *why = n->op == DRK_OP_GEMM ? "Gemm contracts over it" : "MatMul contracts over it";
  if (a && a->shape.rank >= 1) rule_axis(c, n, a, n->op == DRK_OP_GEMM ? (ta ? 0 : 1) : -1, why);
  if (b && b->shape.rank >= 1)
    rule_axis(c, n, b, n->op == DRK_OP_GEMM ? (tb ? 1 : 0) : (b->shape.rank >= 2 ? -2 : 0), why);
}

/* Ops that keep batch items apart but mix along every other axis. */
static void rule_batch_only(pad_ctx_t *c, const drk_node_t *n) {
  char why[96];
  snprintf(why, sizeof why, "%s mixes values along every axis but the first", drk_op_name(n->op));
  for (int i = 0; i < n->n_inputs; i++) {
    const drk_value_t *v = n->inputs[i];
    if (!v || v->shape.rank < 0) continue;
    if (i > 0 && value_mask(c, v)) { /* weights, scales, sizes */
      refuse(c, n, value_mask(c, v), why);
      return;
    }
    rule_tail(c, n, v, 1, why);
  }
  for (int o = 0; o < n->n_outputs; o++) rule_tail(c, n, n->outputs[o], 1, why);
}

/* Whether v (through Unsqueeze/Reshape/Cast) is Less(positions, len) with len dim i's size
 * input: the keep mask drk_pass_pad_mask builds. */
static bool is_len_mask(const pad_ctx_t *c, const drk_value_t *v, int i) {
  for (int guard = 0; v && v->kind == DRK_VALUE_NODE && v->def && guard < 8; guard++) {
    const drk_node_t *n = v->def;
    if (n->op == DRK_OP_LESS) return c->lens && c->lens[i] && n->n_inputs == 2 && n->inputs[1] == c->lens[i];
    if (n->op != DRK_OP_UNSQUEEZE && n->op != DRK_OP_RESHAPE && n->op != DRK_OP_CAST) return false;
    v = n->inputs[0];
  }
  return false;
}

/* Softmax over a padded axis: exact when its input is Where(keep, x, -inf) with the keep mask
 * of that dim (drk_pass_pad_mask): the padded positions then get probability 0 exactly. */
static void rule_softmax(pad_ctx_t *c, const drk_node_t *n) {
  const drk_value_t *x = n->inputs[0];
  if (!x || x->shape.rank < 0) return;
  int a = drk_axis_norm(drk_node_attr_int(n, "axis", -1), x->shape.rank);
  uint32_t m = axis_mask(c, x, a);
  if (!m) return;
  const drk_node_t *w = x->kind == DRK_VALUE_NODE ? x->def : NULL;
  for (int i = 0; i < c->n && w && w->op == DRK_OP_WHERE && w->n_inputs == 3 && w->inputs[1] && !(m & FRESH); i++)
    if (m == 1u << i && is_len_mask(c, w->inputs[0], i)) {
      if (n->op == DRK_OP_SOFTMAX && x->shape.rank <= 8) c->zero[n->outputs[0]->id] |= (uint8_t)(1u << a);
      return;
    }
  refuse(c, n, m, n->op == DRK_OP_SOFTMAX ? "Softmax over it" : "LogSoftmax over it");
}

static bool is_const_zero(const drk_value_t *v) {
  return v && v->kind == DRK_VALUE_CONST && drk_shape_numel(&v->shape) == 1 && drk_value_const_f64(v, 0) == 0;
}

static bool same_dim(const drk_dim_t *a, const drk_dim_t *b) {
  return a->sym ? b->sym && !strcmp(a->sym, b->sym) : !b->sym && a->size == b->size;
}

/* Unsqueeze's inserted axes of its rank-r result (attribute or constant input), into ins. */
static bool unsqueeze_axes(const drk_node_t *n, int r, bool *ins) {
  size_t na = 0;
  const int64_t *axes = drk_node_attr_ints(n, "axes", &na);
  const drk_value_t *av = n->n_inputs > 1 ? n->inputs[1] : NULL;
  int64_t cnt = axes ? (int64_t)na : av && av->kind == DRK_VALUE_CONST ? drk_shape_numel(&av->shape) : -1;
  if (cnt < 0 || r > 8) return false;
  for (int64_t i = 0; i < cnt; i++) {
    int64_t a = axes ? axes[i] : (int64_t)drk_value_const_f64(av, i);
    if (a < 0) a += r;
    if (a < 0 || a >= r) return false;
    ins[a] = true;
  }
  return true;
}

/* Axes of n's result whose padded positions are exact zeros, from its inputs' (Cast, views,
 * Where(c, 0, p), products: what lies between a masked Softmax and its MatMul). */
static void propagate_zero(pad_ctx_t *c, const drk_node_t *n) {
  const drk_value_t *y = n->n_outputs ? n->outputs[0] : NULL;
  if (!y || y->shape.rank <= 0 || y->shape.rank > 8) return;
  uint8_t z = 0;
  const drk_value_t *x0 = n->n_inputs ? n->inputs[0] : NULL;
  bool same = x0 && x0->shape.rank == y->shape.rank;
  switch (n->op) {
  case DRK_OP_CAST: case DRK_OP_IDENTITY: case DRK_OP_DROPOUT:
    if (same) z = c->zero[x0->id];
    break;
  case DRK_OP_MUL: case DRK_OP_DIV:
    for (int i = 0; i < n->n_inputs && i < (n->op == DRK_OP_DIV ? 1 : 2); i++)
      if (n->inputs[i] && n->inputs[i]->shape.rank == y->shape.rank) z |= c->zero[n->inputs[i]->id];
    break;
  case DRK_OP_WHERE: /* Where(isnan(p), 0, p): the guard of fully masked rows */
    /* Where(keep, x, 0) with dim i's keep mask (drk_pass_pad_mask: a masked mean), shaped
     * [size, 1, ...] against its axis */
    if (n->n_inputs == 3 && n->inputs[0] && is_const_zero(n->inputs[2]) && n->inputs[0]->shape.rank > 0 &&
        n->inputs[0]->shape.rank <= y->shape.rank) {
      int k = y->shape.rank - n->inputs[0]->shape.rank;
      uint32_t m = axis_mask(c, y, k);
      for (int i = 0; i < c->n; i++)
        if (m == 1u << i && is_len_mask(c, n->inputs[0], i)) z |= (uint8_t)(1u << k);
    }
    if (n->n_inputs == 3 && n->inputs[2] && n->inputs[2]->shape.rank == y->shape.rank && is_const_zero(n->inputs[1]))
      z |= c->zero[n->inputs[2]->id];
    if (n->n_inputs == 3 && n->inputs[1] && n->inputs[1]->shape.rank == y->shape.rank && is_const_zero(n->inputs[2]))
      z |= c->zero[n->inputs[1]->id];
    break;
  case DRK_OP_EXPAND: /* an axis keeps its zeros where it is not broadcast */
    for (int k = 0; same && k < y->shape.rank; k++)
      if (c->zero[x0->id] >> k & 1 && same_dim(&x0->shape.dims[k], &y->shape.dims[k])) z |= (uint8_t)(1u << k);
    break;
  case DRK_OP_UNSQUEEZE: {
    bool ins[8] = {false};
    if (!x0 || x0->shape.rank < 0 || !unsqueeze_axes(n, y->shape.rank, ins)) break;
    for (int k = 0, i = 0; k < y->shape.rank; k++)
      if (!ins[k] && i < x0->shape.rank && (c->zero[x0->id] >> i++ & 1)) z |= (uint8_t)(1u << k);
    break;
  }
  case DRK_OP_RESHAPE: case DRK_OP_FLATTEN:
    /* an axis whose dim and the dims after it are the same on both sides: every element keeps
     * its coordinate along it (what is before may merge or split: BLOOM's batch x heads) */
    for (int k = 0; x0 && k < y->shape.rank; k++) {
      int i = x0->shape.rank - (y->shape.rank - k);
      bool keep = i >= 0 && i < 8 && (c->zero[x0->id] >> i & 1);
      for (int t = 0; keep && k + t < y->shape.rank; t++) keep = same_dim(&x0->shape.dims[i + t], &y->shape.dims[k + t]);
      if (keep) z |= (uint8_t)(1u << k);
    }
    break;
  case DRK_OP_TRANSPOSE: {
    size_t np = 0;
    const int64_t *perm = drk_node_attr_ints(n, "perm", &np);
    if (same && perm && np == (size_t)y->shape.rank)
      for (size_t k = 0; k < np; k++)
        if (perm[k] >= 0 && perm[k] < 8 && c->zero[x0->id] >> perm[k] & 1) z |= (uint8_t)(1u << k);
    break;
  }
  default: break;
  }
  c->zero[y->id] |= z;
}

static void check_node(pad_ctx_t *c, const drk_node_t *n) {
  check_taint(c, n);
  propagate_zero(c, n);
  if (!node_mask(c, n) || n->op == DRK_OP_SHAPE || n->op == DRK_OP_SIZE) return;
  if (drk_op_info(n->op)->flags & DRK_OPF_EW) return;
  switch (n->op) {
  case DRK_OP_TRANSPOSE: case DRK_OP_SQUEEZE: case DRK_OP_UNSQUEEZE: case DRK_OP_EXPAND: case DRK_OP_IDENTITY:
  case DRK_OP_DROPOUT: case DRK_OP_BATCH_NORMALIZATION: case DRK_OP_CONSTANT_OF_SHAPE:
    return;
  case DRK_OP_RANGE: /* start and delta must not be sizes (the taint check refuses them) */
    return;
  case DRK_OP_RESHAPE: case DRK_OP_FLATTEN: rule_reshape(c, n); return;
  case DRK_OP_MATMUL: case DRK_OP_GEMM: rule_matmul(c, n); return;
  case DRK_OP_SOFTMAX: case DRK_OP_LOG_SOFTMAX: rule_softmax(c, n); return;
  case DRK_OP_LAYER_NORMALIZATION:
    rule_tail(c, n, n->inputs[0], drk_node_attr_int(n, "axis", -1), "LayerNormalization over it");
    return;
  case DRK_OP_ARG_MAX: case DRK_OP_ARG_MIN:
    rule_axis(c, n, n->inputs[0], drk_node_attr_int(n, "axis", 0), "ArgMax/ArgMin over it");
    return;
  case DRK_OP_TOP_K: rule_axis(c, n, n->inputs[0], drk_node_attr_int(n, "axis", -1), "TopK over it"); return;
  case DRK_OP_CUM_SUM: /* forward: position j sums positions <= j, all real where j is (RoBERTa's positions) */
    if (n->inputs[1] && n->inputs[1]->kind == DRK_VALUE_CONST) {
      if (drk_node_attr_int(n, "reverse", 0))
        rule_axis(c, n, n->inputs[0], (int64_t)drk_value_const_f64(n->inputs[1], 0), "reverse CumSum along it");
    } else
      refuse(c, n, node_mask(c, n), "its axis is not constant");
    return;
  case DRK_OP_CONCAT: rule_axis(c, n, n->outputs[0], drk_node_attr_int(n, "axis", 0), "Concat along it"); return;
  case DRK_OP_SPLIT: rule_axis(c, n, n->inputs[0], drk_node_attr_int(n, "axis", 0), "Split along it"); return;
  case DRK_OP_SLICE: rule_slice(c, n); return;
  case DRK_OP_TILE: rule_tile(c, n); return;
  case DRK_OP_PAD: rule_pad(c, n); return;
  case DRK_OP_EINSUM: rule_einsum(c, n); return;
  case DRK_OP_GATHER: rule_gather(c, n); return;
  case DRK_OP_GATHER_ELEMENTS: rule_gather(c, n); return;
  case DRK_OP_GATHER_ND: rule_gather_nd(c, n); return;
  case DRK_OP_CONV: case DRK_OP_CONV_TRANSPOSE: case DRK_OP_CONV_NHWC: case DRK_OP_MAX_POOL: case DRK_OP_AVERAGE_POOL:
  case DRK_OP_GLOBAL_AVERAGE_POOL: case DRK_OP_GLOBAL_MAX_POOL: case DRK_OP_MAX_POOL_NHWC: case DRK_OP_AVERAGE_POOL_NHWC:
  case DRK_OP_INSTANCE_NORMALIZATION: case DRK_OP_GROUP_NORMALIZATION: case DRK_OP_RESIZE: case DRK_OP_DEPTH_TO_SPACE:
  case DRK_OP_SPACE_TO_DEPTH: case DRK_OP_TRILU:
    rule_batch_only(c, n);
    if (n->op == DRK_OP_RESIZE && n->outputs[0] && n->inputs[0] && axis_mask(c, n->inputs[0], 0) &&
        !same_dim(&n->inputs[0]->shape.dims[0], &n->outputs[0]->shape.dims[0]))
      refuse(c, n, axis_mask(c, n->inputs[0], 0), "Resize along it");
    return;
  default:
    if (drk_op_info(n->op)->flags & DRK_OPF_RED) {
      rule_reduce(c, n);
      return;
    }
    refuse(c, n, node_mask(c, n), "no rule says padding through this op is exact");
    return;
  }
}

static void check_outputs(pad_ctx_t *c) {
  for (size_t i = 0; i < c->g->n_outputs; i++) {
    const drk_value_t *v = c->g->outputs[i];
    if (c->taint[v->id]) {
      drk_diag_error(c->d, v->loc, "not implemented: exact padding of %s: output %%%s is computed from the padded size",
                     mask_name(c, c->taint[v->id]), v->name);
      c->errors++;
    }
    for (int k = 0; k < v->shape.rank; k++) {
      uint32_t m = axis_mask(c, v, k);
      if (m && ((m & FRESH) || (m & (m - 1)) || find_prod(c, v->shape.dims[k].sym) >= 0)) {
        drk_diag_error(c->d, v->loc, "not implemented: exact padding: output %%%s axis %d has size '%s', derived from "
                       "dynamic dims but none of them, which cannot be sliced back", v->name, k, v->shape.dims[k].sym);
        c->errors++;
      }
    }
  }
}

bool drk_pass_check_padding(const drk_graph_t *g, const char *const *dyn, int n, drk_diag_t *d) {
  return drk_pass_check_padding_masked(g, dyn, n, NULL, d);
}

bool drk_pass_check_padding_masked(const drk_graph_t *g, const char *const *dyn, int n, drk_value_t *const *lens,
                                   drk_diag_t *d) {
  if (n <= 0) return true;
  if (n > DRK_PAD_MAX_DIMS) {
    drk_diag_error(d, drk_loc_none, "--dynamic: at most %d dynamic dims, got %d", DRK_PAD_MAX_DIMS, n);
    return false;
  }
  pad_ctx_t c = {.g = g, .dyn = dyn, .n = n, .d = d, .lens = lens};
  c.taint = calloc((size_t)g->next_value_id + 1, sizeof *c.taint);
  c.itaint = calloc((size_t)g->next_value_id + 1, sizeof *c.itaint);
  c.zero = calloc((size_t)g->next_value_id + 1, sizeof *c.zero);
  if (!c.taint || !c.zero || !c.itaint) {
    free(c.taint), free(c.zero), free(c.itaint);
    drk_diag_error(d, drk_loc_none, "out of memory checking --dynamic padding");
    return false;
  }
  /* the runtime zero-fills every input's padded positions (and the tests pad with zeros) */
  for (size_t i = 0; i < g->n_inputs; i++) {
    const drk_value_t *v = g->inputs[i];
    for (int k = 0; k < v->shape.rank && k < 8; k++) {
      uint32_t m = axis_mask(&c, v, k);
      if (m && !(m & FRESH) && !(m & (m - 1))) c.zero[v->id] |= (uint8_t)(1u << k);
    }
  }
  for (size_t k = 0; k < g->n_nodes; k++)
    if (!g->nodes[k]->dead) check_node(&c, g->nodes[k]);
  check_outputs(&c);
  free(c.taint), free(c.zero), free(c.itaint);
  return c.errors == 0;
}

/* ---- drk_pass_pad_mask ---- */

typedef struct mask_ctx {
  const char *const *dyn;
  int n;
  drk_value_t **lens;
  drk_value_t *keep[DRK_PAD_MAX_DIMS][DRK_MAX_RANK]; /* by dim and axes after it: one mask each */
} mask_ctx_t;

static drk_value_t *const_i64(drk_graph_t *g, const char *base, int rank, int64_t n, const int64_t *v) {
  return drk_graph_add_const_copy(g, drk_graph_unique_name(g, base), DRK_DT_I64,
                                  drk_graph_shape_static(g, rank, rank ? &n : NULL), v, (size_t)n * sizeof *v);
}

static drk_value_t *node1(drk_graph_t *g, drk_op_t op, int ni, drk_value_t *const *in, const char *base, drk_loc_t loc) {
  const char *nm = drk_graph_unique_name(g, base);
  return drk_graph_add_node(g, op, ni, in, 1, &nm, loc)->outputs[0];
}

/* keep = Range(0, size of axis a of x, 1) < len, shaped [size, 1, ...] against the axis */
static drk_value_t *keep_mask(drk_graph_t *g, drk_value_t *x, int a, drk_value_t *len, const char *base, drk_loc_t loc) {
  char nm[256];
  int r = x->shape.rank;
  int64_t zero = 0, one = 1, ax = a;
  drk_value_t *shape = node1(g, DRK_OP_SHAPE, 1, &x, (snprintf(nm, sizeof nm, "%s_padshape", base), nm), loc);
  drk_value_t *axc = const_i64(g, (snprintf(nm, sizeof nm, "%s_padaxis", base), nm), 0, 1, &ax);
  drk_value_t *size = node1(g, DRK_OP_GATHER, 2, (drk_value_t *[]){shape, axc}, (snprintf(nm, sizeof nm, "%s_padsize", base), nm), loc);
  drk_value_t *c0 = const_i64(g, (snprintf(nm, sizeof nm, "%s_pad0", base), nm), 0, 1, &zero);
  drk_value_t *c1 = const_i64(g, (snprintf(nm, sizeof nm, "%s_pad1", base), nm), 0, 1, &one);
  drk_value_t *pos = node1(g, DRK_OP_RANGE, 3, (drk_value_t *[]){c0, size, c1}, (snprintf(nm, sizeof nm, "%s_padpos", base), nm), loc);
  drk_value_t *keep = node1(g, DRK_OP_LESS, 2, (drk_value_t *[]){pos, len}, (snprintf(nm, sizeof nm, "%s_padkeep", base), nm), loc);
  if (a == r - 1) return keep;
  int64_t axes[DRK_MAX_RANK];
  for (int k = 0; k < r - 1 - a; k++) axes[k] = k + 1;
  drk_value_t *axv = const_i64(g, (snprintf(nm, sizeof nm, "%s_padaxes", base), nm), 1, r - 1 - a, axes);
  return node1(g, DRK_OP_UNSQUEEZE, 2, (drk_value_t *[]){keep, axv}, (snprintf(nm, sizeof nm, "%s_padkeep_u", base), nm), loc);
}

/* The index of dynamic dim sym in mc, or -1. */
static int dyn_index(const mask_ctx_t *mc, const char *sym) {
  for (int i = 0; sym && i < mc->n; i++)
    if (!strcmp(sym, mc->dyn[i])) return i;
  return -1;
}

/* dim di's length input, made at its first use */
static drk_value_t *len_input(drk_graph_t *g, mask_ctx_t *mc, int di) {
  if (!mc->lens[di])
    mc->lens[di] = drk_graph_add_input(g, drk_graph_unique_namef(g, "drk_len_%s", mc->dyn[di]), DRK_DT_I64,
                                       drk_graph_shape_static(g, 0, NULL));
  return mc->lens[di];
}

static drk_value_t *scalar_const(drk_graph_t *g, drk_dtype_t t, double v, const char *name) {
  drk_tensor_t x;
  if (!drk_tensor_alloc(&x, t, 0, NULL)) return NULL;
  drk_tensor_set_f64(&x, 0, v);
  drk_value_t *c = drk_graph_add_const_copy(g, name, t, drk_graph_shape_static(g, 0, NULL), x.data, x.nbytes);
  drk_tensor_free(&x);
  return c;
}

/* A reduction over one axis of a dynamic dim (pooling of tokens): ReduceMean becomes ReduceSum
 * of Where(keep, x, 0) along it divided by the actual size (the length input); ReduceMax and
 * ReduceMin reduce Where(keep, x, -inf / +inf). */
static drk_rewrite_t mask_reduce(drk_graph_t *g, drk_node_t *n, mask_ctx_t *mc) {
  drk_value_t *x = n->inputs[0];
  if (!x || x->shape.rank <= 0 || !drk_dtype_is_float(x->dtype) || drk_dtype_bits(x->dtype) < 16) return DRK_REWRITE_KEPT;
  size_t na = 0;
  const int64_t *axes = drk_node_attr_ints(n, "axes", &na);
  const drk_value_t *av = n->n_inputs > 1 ? n->inputs[1] : NULL;
  int64_t a;
  if (axes && na == 1) a = axes[0];
  else if (!axes && av && av->kind == DRK_VALUE_CONST && drk_shape_numel(&av->shape) == 1) a = (int64_t)drk_value_const_f64(av, 0);
  else return DRK_REWRITE_KEPT; /* several axes, or none (all): pad_exact refuses the padded ones */
  int r = x->shape.rank;
  if (a < -r || a >= r) return DRK_REWRITE_KEPT;
  a = drk_axis_norm(a, r);
  int di = dyn_index(mc, x->shape.dims[a].sym);
  if (di < 0) return DRK_REWRITE_KEPT;
  drk_value_t *len = len_input(g, mc, di);
  const char *base = n->outputs[0]->name;
  char nm[256];
  drk_value_t **cached = &mc->keep[di][r - 1 - a];
  if (!*cached) *cached = keep_mask(g, x, (int)a, len, base, n->loc);
  bool mean = n->op == DRK_OP_REDUCE_MEAN;
  double fill = mean ? 0 : n->op == DRK_OP_REDUCE_MAX ? -INFINITY : INFINITY;
  drk_value_t *fv = scalar_const(g, x->dtype, fill, drk_graph_unique_namef(g, "%s_padfill", base));
  if (!fv) return DRK_REWRITE_FAILED;
  drk_value_t *xm = node1(g, DRK_OP_WHERE, 3, (drk_value_t *[]){*cached, x, fv}, (snprintf(nm, sizeof nm, "%s_padmasked", base), nm), n->loc);
  drk_value_t *axv = const_i64(g, (snprintf(nm, sizeof nm, "%s_padaxes", base), nm), 1, 1, &a);
  const char *rn = drk_graph_unique_namef(g, mean ? "%s_padsum" : "%s_masked", base);
  drk_node_t *red = drk_graph_add_node(g, mean ? DRK_OP_REDUCE_SUM : n->op, 2, (drk_value_t *[]){xm, axv}, 1, &rn, n->loc);
  drk_node_set_int(g, red, "keepdims", drk_node_attr_int(n, "keepdims", 1));
  if (!mean) {
    drk_node_take_result(n, red);
    return DRK_REWRITE_DONE;
  }
  drk_value_t *sum = red->outputs[0];
  drk_value_t *cnt = node1(g, DRK_OP_CAST, 1, &len, (snprintf(nm, sizeof nm, "%s_padcount", base), nm), n->loc);
  drk_node_set_int(g, cnt->def, "to", drk_dtype_to_onnx(x->dtype));
  const char *dn = drk_graph_unique_namef(g, "%s_masked", base);
  drk_node_t *dv = drk_graph_add_node(g, DRK_OP_DIV, 2, (drk_value_t *[]){sum, cnt}, 1, &dn, n->loc);
  drk_node_take_result(n, dv);
  return DRK_REWRITE_DONE;
}

static drk_rewrite_t mask_node(drk_graph_t *g, drk_node_t *n, void *ctx) {
  mask_ctx_t *mc = ctx;
  if ((n->op == DRK_OP_REDUCE_MEAN || n->op == DRK_OP_REDUCE_MAX || n->op == DRK_OP_REDUCE_MIN) && !n->dead)
    return mask_reduce(g, n, mc);
  if ((n->op != DRK_OP_SOFTMAX && n->op != DRK_OP_LOG_SOFTMAX) || n->dead) return DRK_REWRITE_KEPT;
  drk_value_t *x = n->inputs[0];
  if (!x || x->shape.rank <= 0 || !drk_dtype_is_float(x->dtype) || drk_dtype_bits(x->dtype) < 16) return DRK_REWRITE_KEPT;
  int r = x->shape.rank, a = drk_axis_norm(drk_node_attr_int(n, "axis", -1), r), di = -1;
  if ((di = dyn_index(mc, x->shape.dims[a].sym)) < 0) return DRK_REWRITE_KEPT;
  len_input(g, mc, di);
  const char *base = n->outputs[0]->name;
  char nm[256];
  drk_value_t **cached = &mc->keep[di][r - 1 - a];
  if (!*cached) *cached = keep_mask(g, x, a, mc->lens[di], base, n->loc);
  drk_value_t *ninf = scalar_const(g, x->dtype, -INFINITY, drk_graph_unique_namef(g, "%s_padninf", base));
  if (!ninf) return DRK_REWRITE_FAILED;
  drk_value_t *xm = node1(g, DRK_OP_WHERE, 3, (drk_value_t *[]){*cached, x, ninf}, (snprintf(nm, sizeof nm, "%s_padmasked", base), nm), n->loc);
  const char *sn = drk_graph_unique_namef(g, "%s_masked", base);
  drk_node_t *sm = drk_graph_add_node(g, n->op, 1, &xm, 1, &sn, n->loc);
  drk_node_set_int(g, sm, "axis", a);
  drk_node_take_result(n, sm);
  return DRK_REWRITE_DONE;
}

bool drk_pass_pad_mask(drk_graph_t *g, const char *const *dyn, int n, drk_value_t **lens, drk_diag_t *d) {
  for (int i = 0; i < n; i++) lens[i] = NULL;
  mask_ctx_t mc = {.dyn = dyn, .n = n, .lens = lens};
  size_t done = 0;
  if (!drk_graph_rewrite_nodes(g, mask_node, &mc, &done)) {
    drk_diag_error(d, drk_loc_none, "out of memory masking the padded positions of --dynamic dims");
    return false;
  }
  if (!done) return true;
  drk_pass_eliminate_dead(g);
  return drk_pass_pipeline_canonicalize(g, d);
}
