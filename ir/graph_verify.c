/* Graph IR verifier: structural invariants every pass may rely on.
 *
 * Requires only that the graph's arrays are as the builder made them (it reads, never
 * writes). Checks: op arity per graph_ops.def (required inputs present), SSA links (a
 * result's def/def_index point back at its node), every input defined before use (graph
 * inputs and constants first, then node results in node order; dead nodes define nothing),
 * unique value names, graph outputs defined, constant data size vs dtype x shape when the
 * shape is static, and dtype / rank rules of elementwise ops and a few others where the
 * shapes are known. A node result whose rank is unknown is taken as not yet inferred (the
 * builder's default F32 / unknown rank): its dtype is not checked. Each problem is reported
 * once with the node's (or value's) location; attributes are checked against the op's table
 * (graph_attrs.def: names, kinds, required ones, values); the return value says whether there was none. */
#include <stdlib.h>
#include <string.h>

#include "graph.h"
#include "graph_attrs.h"
#include "w4.h"

typedef struct {
  const drk_graph_t *g;
  drk_diag_t *d;
  const drk_value_t **defined; /* by value id: the value, once defined */
  uint32_t n_ids;
  bool ok;
} vctx_t;

#define VERR(c, loc, ...)              \
  do {                                 \
    drk_diag_error((c)->d, loc, __VA_ARGS__); \
    (c)->ok = false;                   \
  } while (0)

static bool is_defined(const vctx_t *c, const drk_value_t *v) {
  return v->id < c->n_ids && c->defined[v->id] == v;
}

static void define(vctx_t *c, const drk_value_t *v, drk_loc_t loc) {
  if (v->id >= c->n_ids) {
    VERR(c, loc, "value '%%%s' has id %u beyond the graph's %u ids", v->name, v->id, c->n_ids);
    return;
  }
  if (c->defined[v->id]) {
    VERR(c, loc, "value '%%%s' defined twice (id %u)", v->name, v->id);
    return;
  }
  c->defined[v->id] = v;
  /* static dims whose product passes DRK_MAX_NUMEL: every later size computation would wrap */
  int64_t n = 1;
  for (int i = 0; i < v->shape.rank; i++) {
    const drk_dim_t *dd = &v->shape.dims[i];
    if (!dd->sym && dd->size >= 0 && !drk_numel_mul(&n, dd->size)) {
      char buf[200];
      size_t k = 0;
      for (int j = 0; j < v->shape.rank && k + 24 < sizeof buf; j++)
        k += (size_t)snprintf(buf + k, sizeof buf - k, "%s%lld", j ? ", " : "", (long long)v->shape.dims[j].size);
      VERR(c, loc, "value '%%%s' has shape [%s]: more than 2^56 elements, larger than any tensor drkc handles", v->name,
           buf);
      return;
    }
  }
}

static drk_loc_t value_loc(const drk_graph_t *g, const drk_value_t *v) {
  drk_loc_t l = v->loc;
  if (!l.file) l.file = g->source;
  return l;
}

static drk_loc_t node_loc(const drk_graph_t *g, const drk_node_t *n) {
  drk_loc_t l = n->loc;
  if (!l.file) l.file = g->source;
  return l;
}

/* Dtype is meaningful: inputs and constants always; node results once their rank is known. */
static bool dtype_known(const drk_value_t *v) { return v && (v->kind != DRK_VALUE_NODE || v->shape.rank >= 0); }

static void check_same_dtype(vctx_t *c, const drk_node_t *n, const drk_value_t *a, const char *what_a,
                             const drk_value_t *b, const char *what_b) {
  if (!dtype_known(a) || !dtype_known(b) || a->dtype == b->dtype) return;
  VERR(c, node_loc(c->g, n), "%s: %s '%%%s' is %s but %s '%%%s' is %s", drk_op_name(n->op), what_a, a->name,
       drk_dtype_name(a->dtype), what_b, b->name, drk_dtype_name(b->dtype));
}

static void check_dtype_is(vctx_t *c, const drk_node_t *n, const drk_value_t *v, const char *what,
                           drk_dtype_t want) {
  if (!dtype_known(v) || v->dtype == want) return;
  VERR(c, node_loc(c->g, n), "%s: %s '%%%s' must be %s, not %s", drk_op_name(n->op), what, v->name,
       drk_dtype_name(want), drk_dtype_name(v->dtype));
}

/* Multidirectional (numpy) broadcasting of the non-NULL inputs against the output, where all
 * ranks are known; dims are compared only where both are static. */
static void check_broadcast(vctx_t *c, const drk_node_t *n, int first, int count) {
  const drk_value_t *out = n->outputs[0];
  if (out->shape.rank < 0) return;
  int rank = 0;
  for (int i = first; i < first + count && i < n->n_inputs; i++) {
    const drk_value_t *v = n->inputs[i];
    if (!v) continue;
    if (v->shape.rank < 0) return;
    if (v->shape.rank > rank) rank = v->shape.rank;
  }
  if (out->shape.rank != rank) {
    VERR(c, node_loc(c->g, n), "%s: result '%%%s' has rank %d but its broadcast inputs give rank %d",
         drk_op_name(n->op), out->name, out->shape.rank, rank);
    return;
  }
  for (int d = 0; d < rank; d++) {
    int64_t want = 1; /* the broadcast size, if all contributions are static */
    bool known = true;
    for (int i = first; i < first + count && i < n->n_inputs; i++) {
      const drk_value_t *v = n->inputs[i];
      if (!v) continue;
      int k = d - (rank - v->shape.rank);
      if (k < 0) continue;
      const drk_dim_t *dim = &v->shape.dims[k];
      if (dim->sym) {
        known = false;
        continue;
      }
      if (dim->size == 1) continue;
      if (want != 1 && dim->size != want) {
        VERR(c, node_loc(c->g, n), "%s: input '%%%s' dim %d is %lld, which does not broadcast with %lld",
             drk_op_name(n->op), v->name, k, (long long)dim->size, (long long)want);
        return;
      }
      want = dim->size;
    }
    const drk_dim_t *od = &out->shape.dims[d];
    if (known && !od->sym && od->size != want) {
      VERR(c, node_loc(c->g, n), "%s: result '%%%s' dim %d is %lld but the inputs broadcast to %lld",
           drk_op_name(n->op), out->name, d, (long long)od->size, (long long)want);
      return;
    }
  }
}

/* Same shape (rank, and static dims) for shape-preserving ops. */
static void check_same_shape(vctx_t *c, const drk_node_t *n, const drk_value_t *in, const drk_value_t *out) {
  if (!in || in->shape.rank < 0 || out->shape.rank < 0) return;
  if (in->shape.rank != out->shape.rank) {
    VERR(c, node_loc(c->g, n), "%s: result '%%%s' has rank %d but input '%%%s' has rank %d", drk_op_name(n->op),
         out->name, out->shape.rank, in->name, in->shape.rank);
    return;
  }
  for (int d = 0; d < in->shape.rank; d++) {
    const drk_dim_t *a = &in->shape.dims[d], *b = &out->shape.dims[d];
    if (!a->sym && !b->sym && a->size != b->size) {
      VERR(c, node_loc(c->g, n), "%s: result '%%%s' dim %d is %lld but input '%%%s' has %lld", drk_op_name(n->op),
           out->name, d, (long long)b->size, in->name, (long long)a->size);
      return;
    }
  }
}

static void check_types(vctx_t *c, const drk_node_t *n) {
  const drk_value_t *const *in = (const drk_value_t *const *)n->inputs;
  const drk_value_t *out = n->outputs[0];
  int ni = n->n_inputs;
  switch (n->op) {
    /* same-dtype binary arithmetic, broadcasting */
    case DRK_OP_ADD: case DRK_OP_SUB: case DRK_OP_MUL: case DRK_OP_DIV: case DRK_OP_PRELU:
    case DRK_OP_MIN: case DRK_OP_MAX: case DRK_OP_MEAN: case DRK_OP_SUM:
      for (int i = 1; i < ni; i++) check_same_dtype(c, n, in[0], "input 0", in[i], "input");
      check_same_dtype(c, n, in[0], "input 0", out, "result");
      check_broadcast(c, n, 0, ni);
      break;
    case DRK_OP_POW: /* the exponent may have another dtype */
      check_same_dtype(c, n, in[0], "base", out, "result");
      check_broadcast(c, n, 0, 2);
      break;
    case DRK_OP_AND: case DRK_OP_OR: case DRK_OP_XOR:
      check_dtype_is(c, n, in[0], "input 0", DRK_DT_BOOL);
      check_dtype_is(c, n, in[1], "input 1", DRK_DT_BOOL);
      check_dtype_is(c, n, out, "result", DRK_DT_BOOL);
      check_broadcast(c, n, 0, 2);
      break;
    case DRK_OP_EQUAL: case DRK_OP_LESS: case DRK_OP_LESS_OR_EQUAL: case DRK_OP_GREATER:
    case DRK_OP_GREATER_OR_EQUAL:
      check_same_dtype(c, n, in[0], "input 0", in[1], "input 1");
      check_dtype_is(c, n, out, "result", DRK_DT_BOOL);
      check_broadcast(c, n, 0, 2);
      break;
    case DRK_OP_NOT:
      check_dtype_is(c, n, in[0], "input", DRK_DT_BOOL);
      check_dtype_is(c, n, out, "result", DRK_DT_BOOL);
      check_same_shape(c, n, in[0], out);
      break;
    case DRK_OP_IS_NAN: case DRK_OP_IS_INF:
      check_dtype_is(c, n, out, "result", DRK_DT_BOOL);
      check_same_shape(c, n, in[0], out);
      break;
    case DRK_OP_WHERE: /* the condition is bool; the branches share the result's dtype */
      check_dtype_is(c, n, in[0], "condition", DRK_DT_BOOL);
      check_same_dtype(c, n, in[1], "input 1", in[2], "input 2");
      check_same_dtype(c, n, in[1], "input 1", out, "result");
      check_broadcast(c, n, 0, 3);
      break;
    case DRK_OP_CLIP:
      for (int i = 1; i < ni; i++)
        if (in[i]) check_same_dtype(c, n, in[0], "input", in[i], i == 1 ? "min" : "max");
      check_same_dtype(c, n, in[0], "input", out, "result");
      check_same_shape(c, n, in[0], out);
      break;
    case DRK_OP_CAST: {
      int64_t to = drk_node_attr_int(n, "to", -1);
      drk_dtype_t t;
      if (to >= 0 && to <= 1000 && drk_dtype_from_onnx((int)to, &t)) check_dtype_is(c, n, out, "result", t);
      check_same_shape(c, n, in[0], out);
      break;
    }
    case DRK_OP_CAST_LIKE:
      check_same_dtype(c, n, in[1], "target", out, "result");
      check_same_shape(c, n, in[0], out);
      break;
    case DRK_OP_SHAPE: case DRK_OP_SIZE: case DRK_OP_ARG_MAX: case DRK_OP_ARG_MIN:
      check_dtype_is(c, n, out, "result", DRK_DT_I64);
      break;
    case DRK_OP_NEG: case DRK_OP_ABS: case DRK_OP_RECIPROCAL: case DRK_OP_SQRT: case DRK_OP_EXP:
    case DRK_OP_LOG: case DRK_OP_ERF: case DRK_OP_TANH: case DRK_OP_SIGMOID: case DRK_OP_RELU:
    case DRK_OP_LEAKY_RELU: case DRK_OP_ELU: case DRK_OP_SELU: case DRK_OP_GELU: case DRK_OP_HARD_SIGMOID:
    case DRK_OP_HARD_SWISH: case DRK_OP_SOFTPLUS: case DRK_OP_SOFTSIGN: case DRK_OP_MISH: case DRK_OP_SIN:
    case DRK_OP_COS: case DRK_OP_FLOOR: case DRK_OP_CEIL: case DRK_OP_ROUND: case DRK_OP_SIGN:
    case DRK_OP_SOFTMAX: case DRK_OP_LOG_SOFTMAX: case DRK_OP_IDENTITY:
      check_same_dtype(c, n, in[0], "input", out, "result");
      check_same_shape(c, n, in[0], out);
      break;
    case DRK_OP_TRANSPOSE:
      check_same_dtype(c, n, in[0], "input", out, "result");
      if (in[0] && in[0]->shape.rank >= 0 && out->shape.rank >= 0 && in[0]->shape.rank != out->shape.rank)
        VERR(c, node_loc(c->g, n), "Transpose: result '%%%s' has rank %d but input '%%%s' has rank %d", out->name,
             out->shape.rank, in[0]->name, in[0]->shape.rank);
      break;
    case DRK_OP_MATMUL: {
      const drk_value_t *a = in[0], *b = in[1];
      if (!a || !b || a->shape.rank < 2 || b->shape.rank < 2) break;
      const drk_dim_t *k1 = &a->shape.dims[a->shape.rank - 1], *k2 = &b->shape.dims[b->shape.rank - 2];
      if (!k1->sym && !k2->sym && k1->size != k2->size)
        VERR(c, node_loc(c->g, n), "MatMul: inner dims differ: '%%%s' has %lld, '%%%s' has %lld", a->name,
             (long long)k1->size, b->name, (long long)k2->size);
      int r = a->shape.rank > b->shape.rank ? a->shape.rank : b->shape.rank;
      if (out->shape.rank >= 0 && out->shape.rank != r)
        VERR(c, node_loc(c->g, n), "MatMul: result '%%%s' has rank %d, expected %d", out->name, out->shape.rank, r);
      break;
    }
    case DRK_OP_MATMUL_NBITS: {
      /* once A's K is known: the shapes and dtypes of ir/w4.h */
      const drk_value_t *a = in[0];
      if (!a || a->shape.rank < 1 || a->shape.dims[a->shape.rank - 1].sym || a->shape.dims[a->shape.rank - 1].size < 0) break;
      for (int i = 1; i < n->n_inputs; i++)
        if (in[i] && in[i]->shape.rank < 0) return;
      drk_w4_shape_t ws;
      char msg[256];
      if (!drk_w4_shape(n, &ws, msg, sizeof msg)) VERR(c, node_loc(c->g, n), "MatMulNBits: %s", msg);
      check_same_dtype(c, n, a, "A", out, "result");
      break;
    }
    default: break;
  }
}

static void check_node(vctx_t *c, const drk_node_t *n) {
  const drk_graph_t *g = c->g;
  drk_loc_t loc = node_loc(g, n);
  if (n->op >= DRK_OP_COUNT) {
    VERR(c, loc, "node #%u has an invalid op code %d", n->id, (int)n->op);
    return;
  }
  const drk_op_info_t *info = drk_op_info(n->op);
  bool arity_ok = true;
  if (n->n_inputs < info->min_inputs || (info->max_inputs >= 0 && n->n_inputs > info->max_inputs)) {
    if (info->max_inputs < 0)
      VERR(c, loc, "%s takes at least %d input(s), got %d", info->name, info->min_inputs, n->n_inputs);
    else if (info->min_inputs == info->max_inputs)
      VERR(c, loc, "%s takes %d input(s), got %d", info->name, info->min_inputs, n->n_inputs);
    else
      VERR(c, loc, "%s takes %d to %d inputs, got %d", info->name, info->min_inputs, info->max_inputs, n->n_inputs);
    arity_ok = false;
  }
  if (n->n_outputs < info->min_outputs || (info->max_outputs >= 0 && n->n_outputs > info->max_outputs)) {
    if (info->max_outputs < 0)
      VERR(c, loc, "%s has at least %d result(s), got %d", info->name, info->min_outputs, n->n_outputs);
    else if (info->min_outputs == info->max_outputs)
      VERR(c, loc, "%s has %d result(s), got %d", info->name, info->min_outputs, n->n_outputs);
    else
      VERR(c, loc, "%s has %d to %d results, got %d", info->name, info->min_outputs, info->max_outputs, n->n_outputs);
    arity_ok = false;
  }
  bool inputs_ok = true;
  for (int i = 0; i < n->n_inputs; i++) {
    const drk_value_t *v = n->inputs[i];
    if (!v) {
      /* Inputs below the minimum are required; a variadic op has no optional inputs. */
      if (i < info->min_inputs || info->max_inputs < 0) {
        VERR(c, loc, "%s: input %d is required but omitted", info->name, i);
        inputs_ok = false;
      }
      continue;
    }
    if (!is_defined(c, v)) {
      if (v->kind == DRK_VALUE_NODE && v->def && v->def->dead)
        VERR(c, loc, "%s: input %d uses '%%%s', a result of a removed node", info->name, i, v->name);
      else
        VERR(c, loc, "%s: input %d uses '%%%s' before its definition", info->name, i, v->name);
      inputs_ok = false;
    }
  }
  for (int i = 0; i < n->n_outputs; i++) {
    const drk_value_t *v = n->outputs[i];
    if (!v) {
      VERR(c, loc, "%s: result %d is missing", info->name, i);
      arity_ok = false;
      continue;
    }
    if (v->kind != DRK_VALUE_NODE || v->def != n || v->def_index != i) {
      VERR(c, loc, "%s: result '%%%s' does not point back at its node (result %d)", info->name, v->name, i);
      arity_ok = false;
    }
  }
  if (arity_ok && inputs_ok) check_types(c, n);
  for (int i = 0; i < n->n_outputs; i++)
    if (n->outputs[i]) define(c, n->outputs[i], loc);
  for (int i = 0; i < n->n_attrs; i++) {
    const drk_attr_t *a = &n->attrs[i];
    if (a->kind == DRK_ATTR_TENSOR && a->tensor) {
      const drk_value_t *t = a->tensor;
      int64_t numel = drk_shape_numel(&t->shape);
      if (numel >= 0 && t->nbytes != drk_dtype_nbytes(t->dtype, numel))
        VERR(c, loc, "%s: tensor attribute '%s' has %zu bytes, %s with %lld elements needs %zu", info->name,
             a->name, t->nbytes, drk_dtype_name(t->dtype), (long long)numel, drk_dtype_nbytes(t->dtype, numel));
    }
    for (int j = 0; j < i; j++)
      if (strcmp(a->name, n->attrs[j].name) == 0) VERR(c, loc, "%s: duplicate attribute '%s'", info->name, a->name);
  }
  if (!drk_node_check_attrs(n, loc, c->d)) c->ok = false;
}

/* Unique names: sort pointers by name and compare neighbours. */
static int cmp_name(const void *a, const void *b) {
  const drk_value_t *x = *(const drk_value_t *const *)a, *y = *(const drk_value_t *const *)b;
  int r = strcmp(x->name ? x->name : "", y->name ? y->name : "");
  if (r) return r;
  return x->id < y->id ? -1 : x->id > y->id;
}

bool drk_graph_verify(const drk_graph_t *g, drk_diag_t *d) {
  vctx_t c = {g, d, NULL, g->next_value_id, true};
  c.defined = calloc(c.n_ids ? c.n_ids : 1, sizeof *c.defined);
  size_t n_vals = g->n_inputs + g->n_consts;
  for (size_t k = 0; k < g->n_nodes; k++)
    if (!g->nodes[k]->dead) n_vals += (size_t)g->nodes[k]->n_outputs;
  const drk_value_t **all = calloc(n_vals ? n_vals : 1, sizeof *all);
  if (!c.defined || !all) drk_fatal_internal(__FILE__, __LINE__, "out of memory");
  size_t m = 0;

  for (size_t i = 0; i < g->n_inputs; i++) {
    const drk_value_t *v = g->inputs[i];
    if (v->kind != DRK_VALUE_INPUT) VERR(&c, value_loc(g, v), "graph input '%%%s' is not an input value", v->name);
    define(&c, v, value_loc(g, v));
    all[m++] = v;
  }
  for (size_t i = 0; i < g->n_consts; i++) {
    const drk_value_t *v = g->consts[i];
    drk_loc_t loc = value_loc(g, v);
    if (v->kind != DRK_VALUE_CONST) VERR(&c, loc, "constant '%%%s' is not a constant value", v->name);
    int64_t numel = drk_shape_numel(&v->shape);
    if (numel >= 0 && v->nbytes != drk_dtype_nbytes(v->dtype, numel))
      VERR(&c, loc, "constant '%%%s' has %zu bytes, %s with %lld elements needs %zu", v->name, v->nbytes,
           drk_dtype_name(v->dtype), (long long)numel, drk_dtype_nbytes(v->dtype, numel));
    if (v->nbytes && !v->data) VERR(&c, loc, "constant '%%%s' has no data", v->name);
    define(&c, v, loc);
    all[m++] = v;
  }
  for (size_t k = 0; k < g->n_nodes; k++) {
    const drk_node_t *n = g->nodes[k];
    if (n->dead) continue;
    check_node(&c, n);
    for (int i = 0; i < n->n_outputs; i++)
      if (n->outputs[i]) all[m++] = n->outputs[i];
  }
  for (size_t i = 0; i < g->n_outputs; i++) {
    const drk_value_t *v = g->outputs[i];
    if (!v) {
      drk_loc_t l = drk_loc_none;
      l.file = g->source;
      VERR(&c, l, "graph output %zu is missing", i);
    } else if (!is_defined(&c, v)) {
      VERR(&c, value_loc(g, v), "graph output '%%%s' is not defined in the graph", v->name);
    }
  }
  qsort(all, m, sizeof *all, cmp_name);
  /* one message per name, however many values share it (a pass that named a value after a
   * weight several groups share would otherwise repeat it once per group) */
  for (size_t i = 1; i < m;) {
    size_t j = i, dup = 1;
    for (; j < m && strcmp(all[j]->name ? all[j]->name : "", all[i - 1]->name ? all[i - 1]->name : "") == 0; j++)
      if (all[j] != all[j - 1]) dup++;
    if (dup > 1)
      VERR(&c, value_loc(g, all[i]), "duplicate value name '%%%s' (%zu values have it)", all[i]->name, dup);
    i = j + 1;
  }
  free(all);
  free(c.defined);
  return c.ok;
}
