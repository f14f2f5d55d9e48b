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

#include "ir/tensor.h"

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
  drk_diag_t *d;
  int errors;
  const drk_node_t *last; /* the node refused last: one message a node */
} pad_ctx_t;

static uint32_t all_bits(const pad_ctx_t *c) { return (uint32_t)((1ull << c->n) - 1) | FRESH; }

static uint32_t dim_mask(const pad_ctx_t *c, const drk_dim_t *x) {
  if (!x->sym) return 0;
  for (int i = 0; i < c->n; i++)
    if (strcmp(x->sym, c->dyn[i]) == 0) return 1u << i;
  return all_bits(c);
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
  case DRK_OP_RESHAPE: case DRK_OP_EXPAND: return i == 1;
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

static void check_taint(pad_ctx_t *c, const drk_node_t *n) {
  if (n->op == DRK_OP_SHAPE || n->op == DRK_OP_SIZE) {
    uint32_t m = value_mask(c, n->inputs[0]);
    if (m && n->outputs[0]) c->taint[n->outputs[0]->id] |= m;
    return;
  }
  uint32_t t = 0, bad = 0;
  for (int i = 0; i < n->n_inputs; i++) {
    const drk_value_t *v = n->inputs[i];
    if (!v || !c->taint[v->id]) continue;
    t |= c->taint[v->id];
    if (!size_sink(n, i)) bad |= c->taint[v->id];
  }
  if (!bad) return;
  if (size_arith(n)) {
    for (int o = 0; o < n->n_outputs; o++)
      if (n->outputs[o]) c->taint[n->outputs[o]->id] |= t;
    return;
  }
  refuse(c, n, bad, "it reads the padded size as a value");
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
    syms[nd++] = s->dims[k].sym;
    seg[nd] = 1;
  }
  *out_n = nd;
  return true;
}

static void rule_reshape(pad_ctx_t *c, const drk_node_t *n) {
  const drk_value_t *x = n->inputs[0], *y = n->outputs[0];
  const char *sx[DRK_MAX_RANK], *sy[DRK_MAX_RANK];
  int64_t gx[DRK_MAX_RANK + 1], gy[DRK_MAX_RANK + 1];
  int nx = 0, ny = 0;
  uint32_t m = value_mask(c, x); /* name the input's dims where it has them */
  if (!m || (m & FRESH)) m |= value_mask(c, y);
  bool ok = x->shape.rank >= 0 && y->shape.rank >= 0 && split_at_dyn(c, &x->shape, sx, gx, &nx) &&
            split_at_dyn(c, &y->shape, sy, gy, &ny) && nx == ny;
  for (int i = 0; ok && i < nx; i++) ok = strcmp(sx[i], sy[i]) == 0;
  for (int i = 0; ok && i <= nx; i++) ok = gx[i] == gy[i];
  if (!ok) refuse(c, n, m, "it merges the dim with another or moves it");
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
    for (int64_t i = 0; i < drk_shape_numel(&av->shape); i++) rule_axis(c, n, x, (int64_t)drk_value_const_f64(av, i), why);
    return;
  }
  if (axes) {
    for (size_t i = 0; i < na; i++) rule_axis(c, n, x, axes[i], why);
    return;
  }
  if (drk_node_attr_int(n, "noop_with_empty_axes", 0)) return;
  rule_tail(c, n, x, 0, why);
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

/* Whether v is a graph input, or a cast or view of one: padded with zeros, a valid index. */
static bool from_input(const drk_value_t *v) {
  for (int guard = 0; v && guard < 32; guard++) {
    if (v->kind == DRK_VALUE_INPUT) return true;
    if (v->kind != DRK_VALUE_NODE || !v->def) return false;
    drk_op_t op = v->def->op;
    if (op != DRK_OP_CAST && !drk_op_aliases_input(op)) return false;
    v = v->def->inputs[0];
  }
  return false;
}

static void rule_gather(pad_ctx_t *c, const drk_node_t *n) {
  rule_axis(c, n, n->inputs[0], drk_node_attr_int(n, "axis", 0), "Gather along it");
  uint32_t mi = value_mask(c, n->inputs[1]);
  if (mi && !from_input(n->inputs[1])) refuse(c, n, mi, "its padded indices are computed, so they may be out of range");
}

static void rule_matmul(pad_ctx_t *c, const drk_node_t *n) {
  const drk_value_t *a = n->inputs[0], *b = n->inputs[1];
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

static void check_node(pad_ctx_t *c, const drk_node_t *n) {
  check_taint(c, n);
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
  case DRK_OP_SOFTMAX: case DRK_OP_LOG_SOFTMAX:
    rule_axis(c, n, n->inputs[0], drk_node_attr_int(n, "axis", -1),
              n->op == DRK_OP_SOFTMAX ? "Softmax over it" : "LogSoftmax over it");
    return;
  case DRK_OP_LAYER_NORMALIZATION:
    rule_tail(c, n, n->inputs[0], drk_node_attr_int(n, "axis", -1), "LayerNormalization over it");
    return;
  case DRK_OP_ARG_MAX: case DRK_OP_ARG_MIN:
    rule_axis(c, n, n->inputs[0], drk_node_attr_int(n, "axis", 0), "ArgMax/ArgMin over it");
    return;
  case DRK_OP_TOP_K: rule_axis(c, n, n->inputs[0], drk_node_attr_int(n, "axis", -1), "TopK over it"); return;
  case DRK_OP_CUM_SUM:
    if (n->inputs[1] && n->inputs[1]->kind == DRK_VALUE_CONST)
      rule_axis(c, n, n->inputs[0], (int64_t)drk_value_const_f64(n->inputs[1], 0), "CumSum along it");
    else
      refuse(c, n, node_mask(c, n), "its axis is not constant");
    return;
  case DRK_OP_CONCAT: rule_axis(c, n, n->outputs[0], drk_node_attr_int(n, "axis", 0), "Concat along it"); return;
  case DRK_OP_SPLIT: rule_axis(c, n, n->inputs[0], drk_node_attr_int(n, "axis", 0), "Split along it"); return;
  case DRK_OP_SLICE: rule_slice(c, n); return;
  case DRK_OP_GATHER: rule_gather(c, n); return;
  case DRK_OP_CONV: case DRK_OP_CONV_TRANSPOSE: case DRK_OP_CONV_NHWC: case DRK_OP_MAX_POOL: case DRK_OP_AVERAGE_POOL:
  case DRK_OP_GLOBAL_AVERAGE_POOL: case DRK_OP_GLOBAL_MAX_POOL: case DRK_OP_MAX_POOL_NHWC: case DRK_OP_AVERAGE_POOL_NHWC:
  case DRK_OP_INSTANCE_NORMALIZATION: case DRK_OP_GROUP_NORMALIZATION: case DRK_OP_RESIZE: case DRK_OP_DEPTH_TO_SPACE:
  case DRK_OP_SPACE_TO_DEPTH: case DRK_OP_TRILU:
    rule_batch_only(c, n);
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
      if (m && ((m & FRESH) || (m & (m - 1)))) {
        drk_diag_error(c->d, v->loc, "not implemented: exact padding: output %%%s axis %d has size '%s', derived from "
                       "dynamic dims but none of them, which cannot be sliced back", v->name, k, v->shape.dims[k].sym);
        c->errors++;
      }
    }
  }
}

bool drk_pass_check_padding(const drk_graph_t *g, const char *const *dyn, int n, drk_diag_t *d) {
  if (n <= 0) return true;
  if (n > DRK_PAD_MAX_DIMS) {
    drk_diag_error(d, drk_loc_none, "--dynamic: at most %d dynamic dims, got %d", DRK_PAD_MAX_DIMS, n);
    return false;
  }
  pad_ctx_t c = {.g = g, .dyn = dyn, .n = n, .d = d};
  c.taint = calloc((size_t)g->next_value_id + 1, sizeof *c.taint);
  if (!c.taint) {
    drk_diag_error(d, drk_loc_none, "out of memory checking --dynamic padding");
    return false;
  }
  for (size_t k = 0; k < g->n_nodes; k++)
    if (!g->nodes[k]->dead) check_node(&c, g->nodes[k]);
  check_outputs(&c);
  free(c.taint);
  return c.errors == 0;
}
