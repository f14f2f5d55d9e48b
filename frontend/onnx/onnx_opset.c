/* ONNX nodes -> graph IR nodes, with every op rewritten into its ai.onnx opset-21 form
 * (the semantics of ir/graph_ops.def). The table below lists, per op, the lowest opset whose
 * form drkc can normalize exactly and the rewrite that does it; older forms are rejected
 * ("unsupported op 'X' (domain 'ai.onnx', opset N): ..."), never imported with different
 * semantics. docs/onnx-import.md documents each rewrite.
 *
 * Requires: the import context of onnx_import.c (values defined so far, value_info).
 * Guarantees: each created node carries loc {file, node_name, node_index}; node outputs get
 * the model's value_info type, else a trivially known dtype; nothing else is inferred. */
#include <math.h>
#include <string.h>

#include "ir/graph_attrs.h"
#include "ir/tensor.h"
#include "onnx_internal.h"

#define MAX_PENDING 6

typedef struct pending_attr {
  const char *name;
  drk_attr_kind_t kind;
  int64_t i;
  double f;
  const char *s;
} pending_attr_t;

/* One ONNX node being converted. */
typedef struct nb {
  drk_onnx_ctx_t *c;
  const Onnx__NodeProto *np;
  drk_loc_t loc;
  const char *op_type;
  drk_op_t op;
  int64_t opset;
  drk_value_t **in;
  size_t n_in, cap_in;
  bool *used; /* per ONNX attribute: consumed by a rewrite, not copied */
  const char **out_names;
  int n_out;
  pending_attr_t pend[MAX_PENDING];
  int n_pend;
  drk_value_t *reshape_to; /* set: the result is Reshape(node result, reshape_to) */
} nb_t;

/* ---- helpers ---- */

static bool fail(nb_t *b, const char *fmt, ...) DRK_PRINTF(2, 3);
static bool fail(nb_t *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  drk_diag_verror(b->c->d, b->loc, "error", fmt, ap);
  va_end(ap);
  return false;
}

static bool unsupported_version(nb_t *b, const char *why) {
  return fail(b, "unsupported op '%s' (domain 'ai.onnx', opset %lld): %s", b->op_type, (long long)b->opset, why);
}

static Onnx__AttributeProto__AttributeType attr_type(const Onnx__AttributeProto *a) {
  if (a->has_type && a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED) return a->type;
  /* IR < 3 writers may leave `type` unset: infer it from the field in use. */
  if (a->has_f) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT;
  if (a->has_i) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
  if (a->has_s) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING;
  if (a->t) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR;
  if (a->g) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH;
  if (a->n_floats) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS;
  if (a->n_strings) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS;
  if (a->n_tensors) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSORS;
  if (a->n_graphs) return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPHS;
  return ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS; /* also an empty list */
}

static const Onnx__AttributeProto *find_attr(nb_t *b, const char *name, size_t *out_i) {
  for (size_t i = 0; i < b->np->n_attribute; i++) {
    const Onnx__AttributeProto *a = b->np->attribute[i];
    if (a->name && strcmp(a->name, name) == 0) {
      if (out_i) *out_i = i;
      return a;
    }
  }
  return NULL;
}

/* Finds an attribute and marks it consumed (not copied to the node). */
static const Onnx__AttributeProto *take(nb_t *b, const char *name) {
  size_t i;
  const Onnx__AttributeProto *a = find_attr(b, name, &i);
  if (a) b->used[i] = true;
  return a;
}

static bool want_type(nb_t *b, const Onnx__AttributeProto *a, Onnx__AttributeProto__AttributeType t,
                      const char *tname) {
  if (attr_type(a) == t) return true;
  return fail(b, "attribute '%s' of '%s' must be %s", a->name, b->op_type, tname);
}

static bool take_int(nb_t *b, const char *name, int64_t dflt, int64_t *out, bool *present) {
  const Onnx__AttributeProto *a = take(b, name);
  if (present) *present = a != NULL;
  if (!a) {
    *out = dflt;
    return true;
  }
  if (!want_type(b, a, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT, "INT")) return false;
  *out = a->i;
  return true;
}

static bool take_float(nb_t *b, const char *name, double dflt, double *out, bool *present) {
  const Onnx__AttributeProto *a = take(b, name);
  if (present) *present = a != NULL;
  if (!a) {
    *out = dflt;
    return true;
  }
  if (!want_type(b, a, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT, "FLOAT")) return false;
  *out = a->f;
  return true;
}

/* *out NULL when absent. */
static bool take_ints(nb_t *b, const char *name, const Onnx__AttributeProto **out) {
  const Onnx__AttributeProto *a = take(b, name);
  *out = a;
  return !a || want_type(b, a, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS, "INTS");
}

/* Reads a STRING attribute without consuming it. */
static const char *peek_string(nb_t *b, const char *name, const char *dflt) {
  const Onnx__AttributeProto *a = find_attr(b, name, NULL);
  if (!a || attr_type(a) != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING) return dflt;
  return drk_arena_strndup(b->c->scratch, a->s.data ? (const char *)a->s.data : "", a->s.len);
}

static void pend(nb_t *b, pending_attr_t p) {
  DRK_ASSERT(b->n_pend < MAX_PENDING);
  size_t i;
  if (find_attr(b, p.name, &i)) b->used[i] = true; /* the rewrite's value replaces the model's */
  b->pend[b->n_pend++] = p;
}
static void pend_int(nb_t *b, const char *name, int64_t v) {
  pend(b, (pending_attr_t){name, DRK_ATTR_INT, v, 0, NULL});
}
static void pend_float(nb_t *b, const char *name, double v) {
  pend(b, (pending_attr_t){name, DRK_ATTR_FLOAT, 0, v, NULL});
}
static void pend_string(nb_t *b, const char *name, const char *v) {
  pend(b, (pending_attr_t){name, DRK_ATTR_STRING, 0, 0, v});
}

static void set_input(nb_t *b, size_t k, drk_value_t *v) {
  while (b->n_in <= k) DRK_VEC_PUSH(b->c->scratch, b->in, b->n_in, b->cap_in, NULL);
  b->in[k] = v;
}

static drk_value_t *in_at(nb_t *b, size_t k) { return k < b->n_in ? b->in[k] : NULL; }

/* A decomposition's last node: op(x, y) takes the ONNX node's outputs. */
static bool finish2(nb_t *b, drk_op_t op, drk_value_t *x, drk_value_t *y) {
  b->op = op;
  b->n_in = 0;
  set_input(b, 0, x);
  set_input(b, 1, y);
  return true;
}

/* A decomposition's last node Where(c, x, y); finish_as(x): the node's output #0 is value x (an
 * Identity, which canonicalization removes). */
static bool finish3(nb_t *b, drk_op_t op, drk_value_t *c, drk_value_t *x, drk_value_t *y) {
  finish2(b, op, c, x);
  set_input(b, 2, y);
  return true;
}

static bool finish_as(nb_t *b, drk_value_t *x) {
  b->op = DRK_OP_IDENTITY;
  b->n_in = 0;
  set_input(b, 0, x);
  return true;
}

static const char *hint(nb_t *b, const char *what) {
  const char *base = b->n_out > 0 && b->out_names[0] ? b->out_names[0] : b->op_type;
  return drk_arena_printf(b->c->scratch, "%s_%s", base, what);
}

static drk_value_t *add_const(nb_t *b, const char *what, drk_dtype_t t, int rank, const int64_t *dims,
                              const void *data, size_t nbytes) {
  drk_onnx_ctx_t *c = b->c;
  const char *name = drk_onnx_fresh_name(c, hint(b, what));
  static const uint8_t none[1];
  drk_value_t *v = drk_graph_add_const_copy(c->g, name, t, drk_graph_shape_static(c->g, rank, dims),
                                            nbytes ? data : none, nbytes);
  v->loc = b->loc;
  drk_onnx_set_known(c, v);
  drk_onnx_map_put(&c->values, v->name, v);
  return v;
}

/* A 1-D i64 constant from an INTS attribute (attribute -> input rewrites). */
static drk_value_t *const_ints(nb_t *b, const char *what, const Onnx__AttributeProto *a) {
  int64_t n = (int64_t)a->n_ints;
  return add_const(b, what, DRK_DT_I64, 1, &n, a->ints, a->n_ints * sizeof(int64_t));
}

static drk_node_t *emit(nb_t *b, drk_op_t op, int n_in, drk_value_t *const *ins, const char *what) {
  drk_onnx_ctx_t *c = b->c;
  const char *name = drk_onnx_fresh_name(c, hint(b, what));
  drk_node_t *n = drk_graph_add_node(c->g, op, n_in, ins, 1, &name, b->loc);
  drk_onnx_map_put(&c->values, n->outputs[0]->name, n->outputs[0]);
  return n;
}

/* A scalar with x's dtype: a constant of that dtype when known, else an f32 constant cast
 * with CastLike (old opsets carried such values as float attributes). */
static drk_value_t *const_like(nb_t *b, const char *what, double val, drk_value_t *x) {
  drk_dtype_t t = drk_onnx_is_known(b->c, x) ? x->dtype : DRK_DT_F32;
  if (!drk_dtype_is_float(t) && !(val >= -9.2e18 && val <= 9.2e18)) val = 0; /* invalid model; avoid UB */
  uint8_t buf[8] = {0};
  drk_tensor_t tmp = {.dtype = t, .rank = 0, .data = buf, .nbytes = sizeof buf, .owned = false};
  drk_tensor_set_f64(&tmp, 0, val);
  drk_value_t *k = add_const(b, what, t, 0, NULL, buf, drk_dtype_nbytes(t, 1));
  if (drk_onnx_is_known(b->c, x)) return k;
  drk_value_t *ins[2] = {k, x};
  return emit(b, DRK_OP_CAST_LIKE, 2, ins, what)->outputs[0];
}

/* ---- rewrites into the opset-21 forms ---- */

typedef bool (*rewrite_fn)(nb_t *b);

/* Before opset 7, binary ops broadcast only with broadcast=1, by suffix (numpy-compatible) or
 * from `axis` (not numpy-compatible: rejected). */
static bool rw_legacy_broadcast(nb_t *b) {
  if (b->opset >= 7) return true;
  int64_t bc, axis;
  bool has_axis;
  if (!take_int(b, "broadcast", 0, &bc, NULL) || !take_int(b, "axis", 0, &axis, &has_axis)) return false;
  if (!bc || !has_axis || b->op == DRK_OP_GEMM || b->n_in < 2 || !b->in[1]) return true;
  /* B's dims line up with A's from `axis`: with both ranks known, trailing unit dims on B
   * make that numpy broadcasting. */
  drk_value_t *x = b->in[0], *y = b->in[1];
  int ra = x->shape.rank, rb = y->shape.rank;
  if (ra < 0 || rb < 0)
    return unsupported_version(b, "legacy broadcasting along 'axis' with operands of unknown rank");
  if (axis < 0) axis += ra;
  int64_t trail = ra - axis - rb;
  if (axis < 0 || trail < 0 || trail > DRK_ONNX_MAX_RANK)
    return fail(b, "'%s': broadcast axis %lld does not fit ranks %d and %d", b->op_type, (long long)axis, ra, rb);
  if (trail == 0) return true;
  int64_t axes[DRK_ONNX_MAX_RANK];
  for (int64_t i = 0; i < trail; i++) axes[i] = rb + i;
  drk_value_t *ins[2] = {y, add_const(b, "bcast_axes", DRK_DT_I64, 1, &trail, axes, sizeof(int64_t) * (size_t)trail)};
  drk_node_t *u = emit(b, DRK_OP_UNSQUEEZE, 2, ins, "bcast");
  if (drk_onnx_is_known(b->c, y)) {
    u->outputs[0]->dtype = y->dtype;
    drk_onnx_set_known(b->c, u->outputs[0]);
  }
  b->in[1] = u->outputs[0];
  return true;
}

/* Before opset 7, PRelu's slope applied per channel (axis 1), as PyTorch exported it: a
 * 1-D slope of C elements becomes [C, 1, ..., 1] so opset-7 broadcasting gives the same. */
static bool rw_prelu(nb_t *b) {
  if (b->opset >= 7 || b->n_in < 2 || !b->in[1]) return true;
  drk_value_t *x = b->in[0], *slope = b->in[1];
  int rx = x->shape.rank, rs = slope->shape.rank;
  if (rx < 0 || rs < 0) return unsupported_version(b, "per-channel slope with operands of unknown rank");
  bool single = rs == 1 && slope->shape.dims[0].size == 1 && !slope->shape.dims[0].sym;
  if (rs != 1 || rx <= 2 || single) return true;
  int64_t n = rx - 2, axes[DRK_ONNX_MAX_RANK];
  for (int64_t i = 0; i < n; i++) axes[i] = 1 + i;
  drk_value_t *ins[2] = {slope, add_const(b, "slope_axes", DRK_DT_I64, 1, &n, axes, sizeof(int64_t) * (size_t)n)};
  drk_node_t *u = emit(b, DRK_OP_UNSQUEEZE, 2, ins, "slope");
  if (drk_onnx_is_known(b->c, slope)) {
    u->outputs[0]->dtype = slope->dtype;
    drk_onnx_set_known(b->c, u->outputs[0]);
  }
  b->in[1] = u->outputs[0];
  return true;
}

static bool rw_clip(nb_t *b) {
  if (b->opset >= 11) return true;
  double mn, mx;
  bool has_mn, has_mx;
  if (!take_float(b, "min", 0, &mn, &has_mn) || !take_float(b, "max", 0, &mx, &has_mx)) return false;
  b->n_in = 1;
  if (has_mn) set_input(b, 1, const_like(b, "min", mn, b->in[0]));
  if (has_mx) set_input(b, 2, const_like(b, "max", mx, b->in[0]));
  return true;
}

/* Before opset 13, (Log)Softmax flattened the input to 2-D at `axis` (default 1):
 * Reshape(Softmax(Flatten(x, axis), axis=-1), Shape(x)). */
static bool rw_softmax(nb_t *b) {
  if (b->opset >= 13) return true;
  int64_t axis;
  if (!take_int(b, "axis", 1, &axis, NULL)) return false;
  pend_int(b, "axis", -1);
  if (axis == -1) return true;
  drk_value_t *x = b->in[0];
  drk_node_t *shape = emit(b, DRK_OP_SHAPE, 1, &x, "shape");
  shape->outputs[0]->dtype = DRK_DT_I64;
  drk_onnx_set_known(b->c, shape->outputs[0]);
  drk_node_t *flat = emit(b, DRK_OP_FLATTEN, 1, &x, "flat");
  drk_node_set_int(b->c->g, flat, "axis", axis);
  if (drk_onnx_is_known(b->c, x)) {
    flat->outputs[0]->dtype = x->dtype;
    drk_onnx_set_known(b->c, flat->outputs[0]);
  }
  b->in[0] = flat->outputs[0];
  b->reshape_to = shape->outputs[0];
  return true;
}

/* ReduceSum took `axes` as an attribute before 13, the other reductions before 18. */
static bool rw_reduce(nb_t *b) {
  int64_t since = b->op == DRK_OP_REDUCE_SUM ? 13 : 18;
  if (b->opset >= since) return true;
  const Onnx__AttributeProto *axes;
  if (!take_ints(b, "axes", &axes)) return false;
  if (axes && axes->n_ints) set_input(b, 1, const_ints(b, "axes", axes));
  return true;
}

static bool rw_squeeze(nb_t *b) {
  if (b->opset >= 13) return true;
  const Onnx__AttributeProto *axes;
  if (!take_ints(b, "axes", &axes)) return false;
  if (axes) set_input(b, 1, const_ints(b, "axes", axes));
  else if (b->op == DRK_OP_UNSQUEEZE) return fail(b, "Unsqueeze without 'axes'");
  return true;
}

static bool rw_split(nb_t *b) {
  if (b->opset < 13) {
    const Onnx__AttributeProto *split;
    if (!take_ints(b, "split", &split)) return false;
    if (split && split->n_ints) set_input(b, 1, const_ints(b, "split", split));
  }
  /* Without sizes, the opset-21 form states the number of (equal) parts explicitly. */
  if (!in_at(b, 1) && !find_attr(b, "num_outputs", NULL)) pend_int(b, "num_outputs", b->n_out);
  return true;
}

static bool rw_slice(nb_t *b) {
  if (b->opset >= 10) return true;
  const Onnx__AttributeProto *starts, *ends, *axes;
  if (!take_ints(b, "starts", &starts) || !take_ints(b, "ends", &ends) || !take_ints(b, "axes", &axes))
    return false;
  if (!starts || !ends) return fail(b, "Slice without 'starts' and 'ends'");
  b->n_in = 1;
  set_input(b, 1, const_ints(b, "starts", starts));
  set_input(b, 2, const_ints(b, "ends", ends));
  if (axes) set_input(b, 3, const_ints(b, "axes", axes));
  return true;
}

static bool rw_topk(nb_t *b) {
  if (b->opset >= 10) return true;
  int64_t k, one = 1;
  bool has;
  if (!take_int(b, "k", 0, &k, &has)) return false;
  if (!has) return fail(b, "TopK without 'k'");
  set_input(b, 1, add_const(b, "k", DRK_DT_I64, 1, &one, &k, sizeof k));
  return true;
}

static bool rw_reshape(nb_t *b) {
  if (b->opset >= 5) return true;
  const Onnx__AttributeProto *shape;
  if (!take_ints(b, "shape", &shape)) return false;
  if (!shape) return fail(b, "Reshape without 'shape'");
  b->n_in = 1;
  set_input(b, 1, const_ints(b, "shape", shape));
  return true;
}

static bool rw_pad(nb_t *b) {
  if (b->opset >= 11) return true;
  const Onnx__AttributeProto *pads;
  if (!take_ints(b, b->opset < 2 ? "paddings" : "pads", &pads)) return false;
  if (!pads) return fail(b, "Pad without '%s'", b->opset < 2 ? "paddings" : "pads");
  double value;
  if (!take_float(b, "value", 0.0, &value, NULL)) return false;
  const char *mode = peek_string(b, "mode", "constant");
  b->n_in = 1;
  set_input(b, 1, const_ints(b, "pads", pads));
  if (strcmp(mode, "constant") == 0 && value != 0.0) set_input(b, 2, const_like(b, "value", value, b->in[0]));
  return true;
}

static bool is_empty_const(const drk_value_t *v) {
  return v && v->kind == DRK_VALUE_CONST && drk_shape_numel(&v->shape) == 0;
}

static bool rw_resize(nb_t *b) {
  if (b->opset == 10) {
    /* Resize-10 (X, scales) behaves as Resize-11 with asymmetric coordinates, nearest
     * rounding down (ONNX's version converter does the same). */
    drk_value_t *x = in_at(b, 0), *scales = in_at(b, 1);
    b->n_in = 0;
    set_input(b, 0, x);
    set_input(b, 2, scales);
    pend_string(b, "coordinate_transformation_mode", "asymmetric");
    if (strcmp(peek_string(b, "mode", "nearest"), "nearest") == 0) pend_string(b, "nearest_mode", "floor");
    return true;
  }
  /* Opsets 11-12 required roi and scales; empty tensors stood for "absent". */
  if (is_empty_const(in_at(b, 1))) b->in[1] = NULL;
  if (in_at(b, 3) && is_empty_const(in_at(b, 2))) b->in[2] = NULL;
  return true;
}

static bool rw_dropout(nb_t *b) {
  if (b->opset >= 12) return true;
  double ratio;
  bool has_ratio;
  int64_t is_test;
  if (!take_float(b, "ratio", 0.5, &ratio, &has_ratio) || !take_int(b, "is_test", 0, &is_test, NULL)) return false;
  b->n_in = 1;
  if (has_ratio) {
    float r = (float)ratio;
    set_input(b, 1, add_const(b, "ratio", DRK_DT_F32, 0, NULL, &r, sizeof r));
  }
  if (b->opset < 7 && !is_test) { /* before 7 the mode was an attribute, training by default */
    float r = (float)ratio;
    uint8_t yes = 1;
    if (!has_ratio) set_input(b, 1, add_const(b, "ratio", DRK_DT_F32, 0, NULL, &r, sizeof r));
    set_input(b, 2, add_const(b, "training_mode", DRK_DT_BOOL, 0, NULL, &yes, 1));
  }
  return true;
}

/* BatchNormalization with training_mode=1: normalized by the statistics of this batch (mean
 * and population variance over every axis but 1; outputs #1/#2 the updated running mean and
 * variance, as ONNX defines them), as TorchScript exports
 * F.batch_norm(..., training=True) (timm's NFNets standardize their conv weights so; the
 * input is then a constant and the whole folds at compile time). */
static drk_value_t *emit_like(nb_t *b, drk_op_t op, int n_in, drk_value_t *const *ins, const char *what,
                              const drk_value_t *like);
static drk_value_t *const_i64s(nb_t *b, const char *what, int64_t n, const int64_t *v);
static drk_value_t *reshape_to(nb_t *b, drk_value_t *x, int64_t n, const int64_t *shape, const char *what);
static bool define_output(nb_t *b, int i, drk_value_t *x);
static drk_value_t *reduce_mean_keep(nb_t *b, drk_value_t *x, int64_t na, const int64_t *axes, const char *what);

static bool batchnorm_batch_stats(nb_t *b) {
  double eps, mom;
  if (!take_float(b, "epsilon", 1e-5, &eps, NULL) || !take_float(b, "momentum", 0.9, &mom, NULL)) return false;
  drk_value_t *x = b->in[0], *scale = in_at(b, 1), *bias = in_at(b, 2);
  int r = x->shape.rank;
  if (r < 2 || r > DRK_ONNX_MAX_RANK)
    return fail(b, "unsupported 'BatchNormalization' with training_mode=1 on an input of unknown rank (from value_info)");
  if (!scale || !bias) return fail(b, "'BatchNormalization' is missing required inputs scale and B");
  int64_t axes[DRK_ONNX_MAX_RANK], na = 0, cshape[DRK_ONNX_MAX_RANK], nc = r - 1;
  for (int d = 0; d < r; d++)
    if (d != 1) axes[na++] = d;
  cshape[0] = -1;
  for (int d = 1; d < nc; d++) cshape[d] = 1;
  drk_value_t *mean = reduce_mean_keep(b, x, na, axes, "batch_mean");
  drk_value_t *d = emit_like(b, DRK_OP_SUB, 2, (drk_value_t *[]){x, mean}, "centered", x);
  drk_value_t *sq = emit_like(b, DRK_OP_MUL, 2, (drk_value_t *[]){d, d}, "sq", x);
  drk_value_t *var = reduce_mean_keep(b, sq, na, axes, "batch_var");
  /* outputs #1, #2: the running statistics, input_mean * momentum + mean * (1 - momentum) */
  drk_value_t *stat[2] = {mean, var};
  for (int i = 1; i < b->n_out && i < 3; i++) {
    drk_value_t *run = in_at(b, 2 + i);
    if (!run) return fail(b, "'BatchNormalization' is missing required input #%d", 2 + i);
    int64_t c1 = -1;
    drk_value_t *cur = reshape_to(b, stat[i - 1], 1, &c1, i == 1 ? "mean_c" : "var_c");
    drk_value_t *a = emit_like(b, DRK_OP_MUL, 2, (drk_value_t *[]){run, const_like(b, "momentum", mom, x)}, "run_m", x);
    drk_value_t *c = emit_like(b, DRK_OP_MUL, 2, (drk_value_t *[]){cur, const_like(b, "one_minus_momentum", 1 - mom, x)}, "cur_m", x);
    if (!define_output(b, i, emit_like(b, DRK_OP_ADD, 2, (drk_value_t *[]){a, c}, i == 1 ? "running_mean" : "running_var", x)))
      return false;
  }
  if (b->n_out > 3) return fail(b, "'BatchNormalization' has %d outputs, expected at most 3", b->n_out);
  b->n_out = 1;
  drk_value_t *ve = emit_like(b, DRK_OP_ADD, 2, (drk_value_t *[]){var, const_like(b, "eps", eps, x)}, "var_eps", x);
  drk_value_t *sd = emit_like(b, DRK_OP_SQRT, 1, &ve, "std", x);
  drk_value_t *nrm = emit_like(b, DRK_OP_DIV, 2, (drk_value_t *[]){d, sd}, "norm", x);
  drk_value_t *sc = reshape_to(b, scale, nc, cshape, "scale_c");
  drk_value_t *bc = reshape_to(b, bias, nc, cshape, "bias_c");
  drk_value_t *y = emit_like(b, DRK_OP_MUL, 2, (drk_value_t *[]){nrm, sc}, "scaled", x);
  return finish2(b, DRK_OP_ADD, y, bc);
}

static bool rw_batchnorm(nb_t *b) {
  int64_t v;
  if (!take_int(b, "is_test", 1, &v, NULL)) return false;
  if (b->opset < 9) {
    if (!take_int(b, "spatial", 1, &v, NULL)) return false;
    if (v == 0) return unsupported_version(b, "spatial=0");
  }
  if (!take_int(b, "training_mode", 0, &v, NULL)) return false;
  if (v) return batchnorm_batch_stats(b);
  if (b->n_out > 1) return unsupported_version(b, "training outputs (running mean/var)");
  return true;
}

static bool rw_concat(nb_t *b) {
  if (b->opset < 4 && !find_attr(b, "axis", NULL)) pend_int(b, "axis", 1);
  return true;
}

static bool rw_selu(nb_t *b) {
  if (b->opset >= 6) return true;
  if (!find_attr(b, "alpha", NULL)) pend_float(b, "alpha", 1.6732);
  if (!find_attr(b, "gamma", NULL)) pend_float(b, "gamma", 1.0507);
  return true;
}

/* ---- ops of opsets 22-25 without a graph IR op of their own: imported as the primitive ops
 * their ONNX definitions spell out (the forms the exporters write at opset <= 22) ---- */

/* A helper node of one result whose dtype is like's (when known). */
static drk_value_t *emit_like(nb_t *b, drk_op_t op, int n_in, drk_value_t *const *ins, const char *what,
                              const drk_value_t *like) {
  drk_node_t *n = emit(b, op, n_in, ins, what);
  if (like && drk_onnx_is_known(b->c, like)) {
    n->outputs[0]->dtype = like->dtype;
    drk_onnx_set_known(b->c, n->outputs[0]);
  }
  return n->outputs[0];
}

static drk_value_t *emit_cast(nb_t *b, drk_value_t *x, drk_dtype_t t, const char *what) {
  drk_node_t *n = emit(b, DRK_OP_CAST, 1, &x, what);
  drk_node_set_int(b->c->g, n, "to", drk_dtype_to_onnx(t));
  n->outputs[0]->dtype = t;
  drk_onnx_set_known(b->c, n->outputs[0]);
  return n->outputs[0];
}

/* x as like's dtype: a Cast when like's dtype is known, else CastLike. */
static drk_value_t *cast_like(nb_t *b, drk_value_t *x, drk_value_t *like, const char *what) {
  if (drk_onnx_is_known(b->c, like)) return emit_cast(b, x, like->dtype, what);
  drk_value_t *ins[2] = {x, like};
  return emit(b, DRK_OP_CAST_LIKE, 2, ins, what)->outputs[0];
}

/* A constant tensor of like's dtype (f32 + CastLike when that is not known at import). */
static drk_value_t *tensor_like(nb_t *b, const char *what, int rank, const int64_t *dims, const double *vals,
                                drk_value_t *like) {
  drk_dtype_t t = drk_onnx_is_known(b->c, like) && drk_dtype_is_float(like->dtype) ? like->dtype : DRK_DT_F32;
  int64_t n = 1;
  for (int i = 0; i < rank; i++) n *= dims[i];
  drk_tensor_t tmp = {.dtype = t, .rank = 0, .nbytes = drk_dtype_nbytes(t, n), .owned = false};
  tmp.data = drk_arena_alloc(b->c->scratch, tmp.nbytes + 8);
  for (int64_t i = 0; i < n; i++) drk_tensor_set_f64(&tmp, i, vals[i]);
  drk_value_t *k = add_const(b, what, t, rank, dims, tmp.data, tmp.nbytes);
  if (t == like->dtype && drk_onnx_is_known(b->c, like)) return k;
  return cast_like(b, k, like, what);
}

static bool static_dim(const drk_value_t *v, int i, int64_t *out) {
  if (!v || v->shape.rank <= i || v->shape.dims[i].sym || v->shape.dims[i].size < 0) return false;
  *out = v->shape.dims[i].size;
  return true;
}

/* ReduceMean(x, axes) with keepdims, of x's dtype when that is known. */
static drk_value_t *reduce_mean_keep(nb_t *b, drk_value_t *x, int64_t na, const int64_t *axes, const char *what) {
  drk_node_t *m = emit(b, DRK_OP_REDUCE_MEAN, 2, (drk_value_t *[]){x, const_i64s(b, "axes", na, axes)}, what);
  drk_node_set_int(b->c->g, m, "keepdims", 1);
  if (drk_onnx_is_known(b->c, x)) {
    m->outputs[0]->dtype = x->dtype;
    drk_onnx_set_known(b->c, m->outputs[0]);
  }
  return m->outputs[0];
}

/* x / Sqrt(ReduceMean(x * x, axes) + epsilon): RMSNormalization and ORT's simplified norms. */
static drk_value_t *rms_normalized(nb_t *b, drk_value_t *x, int64_t na, const int64_t *axes, double eps) {
  drk_value_t *sq = emit_like(b, DRK_OP_MUL, 2, (drk_value_t *[]){x, x}, "sq", x);
  drk_value_t *mean = reduce_mean_keep(b, sq, na, axes, "mean");
  drk_value_t *ms = emit_like(b, DRK_OP_ADD, 2, (drk_value_t *[]){mean, const_like(b, "eps", eps, x)}, "ms", x);
  drk_value_t *rms = emit_like(b, DRK_OP_SQRT, 1, &ms, "rms", x);
  return emit_like(b, DRK_OP_DIV, 2, (drk_value_t *[]){x, rms}, "norm", x);
}

/* RMSNormalization (opset 23): Y = Cast(X / Sqrt(ReduceMean(X * X, axes) + epsilon), T) * scale,
 * axes = [axis, rank), computed in stash_type (default f32). */
static bool dc_rms_normalization(nb_t *b) {
  int64_t axis, stash;
  double eps;
  if (!take_int(b, "axis", -1, &axis, NULL) || !take_float(b, "epsilon", 1e-5, &eps, NULL) ||
      !take_int(b, "stash_type", 1, &stash, NULL))
    return false;
  drk_value_t *x = b->in[0], *scale = in_at(b, 1);
  if (!scale) return fail(b, "'RMSNormalization' is missing required input #1 (scale)");
  drk_dtype_t st;
  if (!drk_dtype_from_onnx((int)stash, &st) || !drk_dtype_is_float(st))
    return fail(b, "unsupported 'stash_type' %lld of 'RMSNormalization' (a float dtype is needed)", (long long)stash);
  int r = x->shape.rank;
  int64_t axes[DRK_ONNX_MAX_RANK], na = 0;
  if (axis < 0) {
    if (r >= 0 && axis < -r) return fail(b, "'RMSNormalization': axis %lld out of range for rank %d", (long long)axis, r);
    if (-axis > DRK_ONNX_MAX_RANK) return fail(b, "'RMSNormalization': axis %lld out of range", (long long)axis);
    for (int64_t a = axis; a < 0; a++) axes[na++] = a;
  } else {
    if (r < 0)
      return fail(b, "unsupported 'RMSNormalization' with axis %lld on an input of unknown rank (a negative axis or "
                     "the rank from value_info is needed)", (long long)axis);
    if (axis >= r) return fail(b, "'RMSNormalization': axis %lld out of range for rank %d", (long long)axis, r);
    for (int64_t a = axis; a < r; a++) axes[na++] = a;
  }
  bool need_cast = !drk_onnx_is_known(b->c, x) || x->dtype != st;
  drk_value_t *xs = need_cast ? emit_cast(b, x, st, "stash") : x; /* known: dtype st */
  drk_value_t *nrm = rms_normalized(b, xs, na, axes, eps);
  if (need_cast) nrm = cast_like(b, nrm, x, "unstash");
  return finish2(b, DRK_OP_MUL, nrm, scale);
}

/* Swish (opset 24): Y = X * Sigmoid(alpha * X). */
static bool dc_swish(nb_t *b) {
  double alpha;
  if (!take_float(b, "alpha", 1.0, &alpha, NULL)) return false;
  drk_value_t *x = b->in[0], *ax = x;
  if (alpha != 1.0) ax = emit_like(b, DRK_OP_MUL, 2, (drk_value_t *[]){x, const_like(b, "alpha", alpha, x)}, "ax", x);
  drk_value_t *sg = emit_like(b, DRK_OP_SIGMOID, 1, &ax, "sig", x);
  return finish2(b, DRK_OP_MUL, x, sg);
}

/* ---- Attention (opsets 23-25) and RotaryEmbedding (23) ---- */

static bool bind_output(nb_t *b, drk_node_t *n, int i);

/* Defines the node's ONNX output #i as x (an Identity, which canonicalization removes). */
static bool define_output(nb_t *b, int i, drk_value_t *x) {
  drk_onnx_ctx_t *c = b->c;
  const char *name = b->out_names[i];
  drk_node_t *n = drk_graph_add_node(c->g, DRK_OP_IDENTITY, 1, &x, 1, &name, b->loc);
  if (!drk_onnx_map_put(&c->values, n->outputs[0]->name, n->outputs[0]))
    return fail(b, "value '%s' is defined twice", n->outputs[0]->name);
  return bind_output(b, n, 0);
}

static drk_value_t *const_i64s(nb_t *b, const char *what, int64_t n, const int64_t *v) {
  return add_const(b, what, DRK_DT_I64, 1, &n, v, sizeof(int64_t) * (size_t)n);
}

static drk_value_t *reshape_to(nb_t *b, drk_value_t *x, int64_t n, const int64_t *shape, const char *what) {
  return emit_like(b, DRK_OP_RESHAPE, 2, (drk_value_t *[]){x, const_i64s(b, "shape", n, shape)}, what, x);
}

static drk_value_t *reshape_to_v(nb_t *b, drk_value_t *x, drk_value_t *shape, const char *what) {
  return emit_like(b, DRK_OP_RESHAPE, 2, (drk_value_t *[]){x, shape}, what, x);
}

static drk_value_t *transpose_of(nb_t *b, drk_value_t *x, int n, const int64_t *perm, const char *what) {
  drk_node_t *t = emit(b, DRK_OP_TRANSPOSE, 1, &x, what);
  drk_node_set_ints(b->c->g, t, "perm", (size_t)n, perm);
  if (drk_onnx_is_known(b->c, x)) {
    t->outputs[0]->dtype = x->dtype;
    drk_onnx_set_known(b->c, t->outputs[0]);
  }
  return t->outputs[0];
}

static drk_value_t *bool_op(nb_t *b, drk_op_t op, drk_value_t *x, drk_value_t *y, const char *what) {
  drk_value_t *r = emit(b, op, 2, (drk_value_t *[]){x, y}, what)->outputs[0];
  r->dtype = DRK_DT_BOOL;
  drk_onnx_set_known(b->c, r);
  return r;
}

/* A Slice of x along `axis` [start, end) with step. */
static drk_value_t *slice_axis(nb_t *b, drk_value_t *x, int64_t axis, int64_t start, int64_t end, int64_t step,
                               const char *what) {
  drk_value_t *ins[5] = {x, const_i64s(b, "starts", 1, &start), const_i64s(b, "ends", 1, &end),
                         const_i64s(b, "axes", 1, &axis), const_i64s(b, "steps", 1, &step)};
  return emit_like(b, DRK_OP_SLICE, 5, ins, what, x);
}

static drk_value_t *concat_of(nb_t *b, int n, drk_value_t *const *xs, int64_t axis, const char *what) {
  drk_node_t *cn = emit(b, DRK_OP_CONCAT, n, xs, what);
  drk_node_set_int(b->c->g, cn, "axis", axis);
  if (drk_onnx_is_known(b->c, xs[0])) {
    cn->outputs[0]->dtype = xs[0]->dtype;
    drk_onnx_set_known(b->c, cn->outputs[0]);
  }
  return cn->outputs[0];
}

/* Attention (opsets 23-25), the primitive ops of its definition (the reference's order):
 *   3-D Q/K/V [B, S, H*D] (q_num_heads/kv_num_heads): Reshape [B, S, H, D], Transpose to 4-D;
 *   past_key/past_value: K, V = Concat(past, new) on the sequence axis (present_key/value);
 *   scores = (Q * sqrt(scale)) . Transpose(K * sqrt(scale)), softcap * tanh(scores / softcap);
 *   bias = attn_mask (bool: 0 / -inf, True attends; padded with -inf to the total length) plus
 *     the causal (key j <= i + past length) and sliding-window (opset 25) masks, one constant
 *     [S, L] when the offset is static, per batch from nonpad_kv_seqlen (opset 24) otherwise,
 *     plus nonpad_kv_seqlen's padding mask;
 *   Softmax (in softmax_precision), fully masked rows zero (IsNaN -> 0), . V; grouped-query
 *   heads repeat K and V per head (Unsqueeze, Expand, Reshape: [h0, h0, h1, h1, ...]).
 * qk_matmul_output: mode 0 the scores, 1 after softcap, 2 after the bias, 3 the probabilities.
 * Dims needed at import (value_info gives them) are refused by name when unknown. */
static bool dc_attention(nb_t *b) {
  int64_t causal, qh, kvh, mode, sprec, lw = -1, rw = -1;
  double scale, softcap;
  bool has_scale, has_qh, has_kvh, has_sprec;
  if (!take_int(b, "is_causal", 0, &causal, NULL) || !take_int(b, "q_num_heads", 0, &qh, &has_qh) ||
      !take_int(b, "kv_num_heads", 0, &kvh, &has_kvh) || !take_int(b, "qk_matmul_output_mode", 0, &mode, NULL) ||
      !take_float(b, "scale", 0, &scale, &has_scale) || !take_float(b, "softcap", 0, &softcap, NULL) ||
      !take_int(b, "softmax_precision", 0, &sprec, &has_sprec))
    return false;
  if (b->opset >= 25 && (!take_int(b, "left_window_size", -1, &lw, NULL) || !take_int(b, "right_window_size", -1, &rw, NULL)))
    return false;
  if (lw < -1 || rw < -1)
    return fail(b, "'Attention': left_window_size %lld / right_window_size %lld must be -1 or non-negative", (long long)lw,
                (long long)rw);
  if (mode < 0 || mode > 3) return fail(b, "unsupported 'Attention' qk_matmul_output_mode %lld (0-3)", (long long)mode);
  drk_value_t *q = b->in[0], *k = in_at(b, 1), *v = in_at(b, 2), *mask = in_at(b, 3);
  drk_value_t *pk = in_at(b, 4), *pv = in_at(b, 5), *nonpad = in_at(b, 6);
  if (!k || !v) return fail(b, "'Attention' is missing required inputs K and V");
  if (!pk != !pv) return fail(b, "'Attention': past_key and past_value must be given together");
  if (nonpad && pk) return fail(b, "'Attention': nonpad_kv_seqlen cannot be combined with past_key/past_value");
  int rq = q->shape.rank;
  bool rank3 = rq == 3;
  if (rq != 3 && rq != 4)
    return fail(b, "unsupported 'Attention': Q must be a known 3-D or 4-D tensor at import (rank %d; value_info gives it)", rq);
  if (k->shape.rank != rq || v->shape.rank != rq)
    return fail(b, "'Attention': Q, K and V must have one rank (%d, %d, %d)", rq, k->shape.rank, v->shape.rank);
  int64_t hq, hk;
  /* dims of the inputs as given (the helper nodes' results have no shapes at import) */
  int sax = rank3 ? 1 : 2;
  int64_t s = -1, lk = -1, dk = -1, dv = -1, past = 0;
  if (!static_dim(q, sax, &s)) s = -1;
  if (!static_dim(k, sax, &lk)) lk = -1;
  if (!static_dim(k, rank3 ? 2 : 3, &dk)) dk = -1;
  if (!static_dim(v, rank3 ? 2 : 3, &dv)) dv = -1;
  if (rank3) {
    if (!has_qh || !has_kvh || qh <= 0 || kvh <= 0)
      return fail(b, "'Attention' with 3-D Q/K/V needs positive q_num_heads and kv_num_heads");
    int64_t sq[4] = {0, 0, qh, -1}, skv[4] = {0, 0, kvh, -1}, perm[4] = {0, 2, 1, 3};
    q = transpose_of(b, reshape_to(b, q, 4, sq, "q_heads"), 4, perm, "q_bhsd");
    k = transpose_of(b, reshape_to(b, k, 4, skv, "k_heads"), 4, perm, "k_bhsd");
    v = transpose_of(b, reshape_to(b, v, 4, skv, "v_heads"), 4, perm, "v_bhsd");
    hq = qh;
    hk = kvh;
    if (dk >= 0) dk /= kvh;
    if (dv >= 0) dv /= kvh;
    int64_t hid;
    if (!has_scale) {
      if (!static_dim(b->in[0], 2, &hid) || hid <= 0)
        return fail(b, "unsupported 'Attention' without 'scale' whose hidden size (Q dim 2) is not known at import");
      scale = 1.0 / sqrt((double)(hid / qh));
    }
  } else {
    if (b->opset >= 25 && (has_qh || has_kvh))
      return fail(b, "'Attention': q_num_heads/kv_num_heads must not be given for 4-D inputs (opset 25)");
    if (!has_scale) {
      int64_t d;
      if (!static_dim(q, 3, &d) || d <= 0)
        return fail(b, "unsupported 'Attention' without 'scale' whose head size (Q dim 3) is not known at import");
      scale = 1.0 / sqrt((double)d);
    }
    if (!static_dim(q, 1, &hq) || !static_dim(k, 1, &hk) || !static_dim(v, 1, &hk))
      return fail(b, "unsupported 'Attention': the head counts (dim 1 of Q, K, V) must be known at import");
  }
  if (!(scale > 0)) return fail(b, "unsupported 'Attention' scale %g (must be positive)", scale);
  if (softcap < 0) return fail(b, "'Attention': softcap %g must not be negative", softcap);
  /* the KV cache */
  if (pk) {
    if (pk->shape.rank != 4 || pv->shape.rank != 4)
      return fail(b, "unsupported 'Attention': past_key/past_value must be known 4-D tensors at import");
    if (!static_dim(pk, 2, &past)) past = -1;
    k = concat_of(b, 2, (drk_value_t *[]){pk, k}, 2, "present_k");
    v = concat_of(b, 2, (drk_value_t *[]){pv, v}, 2, "present_v");
  }
  /* present_key/present_value: the (concatenated) K and V before any head repetition */
  if (b->n_out > 1 && !define_output(b, 1, k)) return false;
  if (b->n_out > 2 && !define_output(b, 2, v)) return false;
  /* grouped-query heads: K and V repeated to Q's head count */
  if (hq != hk) {
    if (hk <= 0 || hq % hk)
      return fail(b, "'Attention': %lld query heads are not a multiple of %lld key/value heads", (long long)hq, (long long)hk);
    drk_value_t **kv[2] = {&k, &v};
    for (int t = 0; t < 2; t++) {
      drk_value_t *x = *kv[t];
      int64_t ax[1] = {2};
      drk_value_t *u = emit_like(b, DRK_OP_UNSQUEEZE, 2, (drk_value_t *[]){x, const_i64s(b, "gqa_axes", 1, ax)},
                                 t ? "v_rep" : "k_rep", x);
      int64_t d = t ? dv : dk, es[5] = {1, 1, hq / hk, 1, 1}, rs[4] = {0, hq, -1, d};
      if (d < 0)
        return fail(b, "unsupported 'Attention' with grouped-query heads (%lld / %lld) whose %s head size is not known at "
                       "import", (long long)hq, (long long)hk, t ? "V" : "K");
      /* Expand to [1, 1, r, 1, 1] broadcasts [B, Hkv, 1, L, D] to [B, Hkv, r, L, D] */
      drk_value_t *e = emit_like(b, DRK_OP_EXPAND, 2, (drk_value_t *[]){u, const_i64s(b, "gqa_expand", 5, es)},
                                 t ? "v_exp" : "k_exp", x);
      *kv[t] = reshape_to(b, e, 4, rs, t ? "v_heads" : "k_heads"); /* [B, Hq, L, D]: heads h0 h0 h1 h1 ... */
    }
  }
  double sq = sqrt(scale);
  drk_value_t *qs = emit_like(b, DRK_OP_MUL, 2, (drk_value_t *[]){q, const_like(b, "q_scale", sq, q)}, "q_scaled", q);
  drk_value_t *ks = emit_like(b, DRK_OP_MUL, 2, (drk_value_t *[]){k, const_like(b, "k_scale", sq, k)}, "k_scaled", k);
  drk_value_t *kt = transpose_of(b, ks, 4, (int64_t[]){0, 1, 3, 2}, "k_t");
  drk_value_t *sc = emit_like(b, DRK_OP_MATMUL, 2, (drk_value_t *[]){qs, kt}, "scores", q);
  drk_value_t *qk_out = mode == 0 ? sc : NULL;
  if (softcap > 0) {
    drk_value_t *d = emit_like(b, DRK_OP_MUL, 2, (drk_value_t *[]){sc, const_like(b, "cap_inv", 1.0 / softcap, sc)}, "capped", sc);
    d = emit_like(b, DRK_OP_TANH, 1, &d, "capped_tanh", sc);
    sc = emit_like(b, DRK_OP_MUL, 2, (drk_value_t *[]){d, const_like(b, "cap", softcap, sc)}, "softcapped", sc);
  }
  if (mode == 1) qk_out = sc;
  /* sequence lengths, where the masks need them */
  bool windowed = lw >= 0 || rw >= 0;
  int64_t l = lk >= 0 && past >= 0 ? past + lk : -1;
  if (causal || windowed || nonpad || mask) {
    if (s < 0 || l < 0)
      return fail(b, "unsupported 'Attention' with %s whose sequence lengths (Q, K%s) are not known at import",
                  causal ? "is_causal=1" : windowed ? "a sliding window" : nonpad ? "nonpad_kv_seqlen" : "attn_mask",
                  pk ? ", past_key" : "");
    if (s * l > ((int64_t)1 << 26))
      return fail(b, "unsupported 'Attention' masks of %lld x %lld (too large)", (long long)s, (long long)l);
  }
  /* masked: some row may be masked entirely (its probabilities are then zeros, which needs the
   * IsNaN guard after the Softmax); not so for a constant causal/window mask that leaves every
   * row a key, the form the fusion's flash-attention pattern reads without a guard */
  bool masked = mask || nonpad;
  drk_value_t *bias = NULL;
  drk_value_t *zero = NULL, *ninf = NULL;
  if (mask || causal || windowed || nonpad) {
    zero = const_like(b, "mask_zero", 0.0, sc);
    ninf = const_like(b, "mask_ninf", -INFINITY, sc);
  }
  if (mask) {
    if (!drk_onnx_is_known(b->c, mask))
      return fail(b, "unsupported 'Attention' attn_mask of unknown dtype (bool or float; value_info gives it)");
    drk_value_t *mb = mask;
    if (mask->dtype == DRK_DT_BOOL) mb = emit_like(b, DRK_OP_WHERE, 3, (drk_value_t *[]){mask, zero, ninf}, "mask_bias", sc);
    else if (!drk_dtype_is_float(mask->dtype))
      return fail(b, "'Attention' attn_mask must be bool or float, not %s", drk_dtype_name(mask->dtype));
    else if (drk_onnx_is_known(b->c, sc) && mask->dtype != sc->dtype) mb = emit_cast(b, mask, sc->dtype, "mask_cast");
    int rm = mask->shape.rank;
    int64_t ml;
    if (rm < 1 || !static_dim(mask, rm - 1, &ml))
      return fail(b, "unsupported 'Attention' attn_mask whose last dim is not known at import");
    if (ml > l) return fail(b, "'Attention': attn_mask's last dim %lld exceeds the total sequence length %lld", (long long)ml, (long long)l);
    if (ml < l) { /* padded to the total length with -inf (False) */
      int64_t pads[2 * DRK_ONNX_MAX_RANK] = {0};
      pads[rm + rm - 1] = l - ml;
      int64_t np2 = 2 * rm;
      drk_node_t *pn = emit(b, DRK_OP_PAD, 3, (drk_value_t *[]){mb, const_i64s(b, "mask_pads", np2, pads), ninf}, "mask_padded");
      drk_node_set_string(b->c->g, pn, "mode", "constant");
      if (drk_onnx_is_known(b->c, mb)) {
        pn->outputs[0]->dtype = mb->dtype;
        drk_onnx_set_known(b->c, pn->outputs[0]);
      }
      mb = pn->outputs[0];
    }
    bias = mb;
  }
  if ((causal || windowed) && !nonpad) { /* one constant [S, L]: query i sits at i + past */
    double *vals = drk_arena_alloc(b->c->scratch, sizeof(double) * (size_t)(s * l + 1));
    for (int64_t i = 0; i < s; i++) {
      bool any = false;
      for (int64_t j = 0; j < l; j++) {
        int64_t diff = i + past - j;
        bool ok = (!causal || diff >= 0) && (lw < 0 || diff <= lw) && (rw < 0 || -diff <= rw);
        vals[i * l + j] = ok ? 0.0 : -INFINITY;
        any |= ok;
      }
      if (!any) masked = true;
    }
    int64_t dims[2] = {s, l};
    drk_value_t *cm = tensor_like(b, causal ? "causal" : "window", 2, dims, vals, sc);
    bias = bias ? emit_like(b, DRK_OP_ADD, 2, (drk_value_t *[]){bias, cm}, "bias", sc) : cm;
  }
  if (nonpad) { /* per batch: key j valid iff j < n[b]; query i sits at i + n[b] - S */
    if (!drk_onnx_is_known(b->c, nonpad) || nonpad->dtype != DRK_DT_I64)
      return fail(b, "'Attention' nonpad_kv_seqlen must be int64");
    int64_t *jv = drk_arena_alloc(b->c->scratch, sizeof(int64_t) * (size_t)(l + s + 1)), *iv = jv + l;
    for (int64_t j = 0; j < l; j++) jv[j] = j;
    for (int64_t i = 0; i < s; i++) iv[i] = i;
    int64_t jd[4] = {1, 1, 1, l}, id[4] = {1, 1, s, 1}, nbs[4] = {-1, 1, 1, 1};
    drk_value_t *jj = add_const(b, "key_pos", DRK_DT_I64, 4, jd, jv, sizeof(int64_t) * (size_t)l);
    drk_value_t *nb = reshape_to(b, nonpad, 4, nbs, "nonpad_b");
    drk_value_t *allowed = bool_op(b, DRK_OP_LESS, jj, nb, "key_valid");
    if (causal || windowed) {
      drk_value_t *ii = add_const(b, "query_pos", DRK_DT_I64, 4, id, iv, sizeof(int64_t) * (size_t)s);
      int64_t sv = s;
      drk_value_t *off = emit_like(b, DRK_OP_SUB, 2, (drk_value_t *[]){nb, add_const(b, "q_len", DRK_DT_I64, 0, NULL, &sv, 8)},
                                   "cache_offset", nonpad);
      drk_value_t *pos = emit_like(b, DRK_OP_ADD, 2, (drk_value_t *[]){ii, off}, "query_abs", nonpad);
      drk_value_t *diff = emit_like(b, DRK_OP_SUB, 2, (drk_value_t *[]){pos, jj}, "query_key_diff", nonpad);
      if (causal) {
        int64_t z = 0;
        drk_value_t *c0 = bool_op(b, DRK_OP_GREATER_OR_EQUAL, diff, add_const(b, "zero_i", DRK_DT_I64, 0, NULL, &z, 8), "causal_ok");
        allowed = bool_op(b, DRK_OP_AND, allowed, c0, "allowed");
      }
      if (lw >= 0) {
        drk_value_t *c1 = bool_op(b, DRK_OP_LESS_OR_EQUAL, diff, add_const(b, "left_w", DRK_DT_I64, 0, NULL, &lw, 8), "left_ok");
        allowed = bool_op(b, DRK_OP_AND, allowed, c1, "allowed");
      }
      if (rw >= 0) {
        int64_t nrw = -rw;
        drk_value_t *c2 = bool_op(b, DRK_OP_GREATER_OR_EQUAL, diff, add_const(b, "right_w", DRK_DT_I64, 0, NULL, &nrw, 8), "right_ok");
        allowed = bool_op(b, DRK_OP_AND, allowed, c2, "allowed");
      }
    }
    drk_value_t *pm = emit_like(b, DRK_OP_WHERE, 3, (drk_value_t *[]){allowed, zero, ninf}, "nonpad_bias", sc);
    bias = bias ? emit_like(b, DRK_OP_ADD, 2, (drk_value_t *[]){bias, pm}, "bias", sc) : pm;
  }
  if (bias) sc = emit_like(b, DRK_OP_ADD, 2, (drk_value_t *[]){sc, bias}, "masked_scores", sc);
  if (mode == 2) qk_out = sc;
  drk_value_t *sm_in = sc;
  if (has_sprec && sprec) {
    drk_dtype_t t;
    if (!drk_dtype_from_onnx((int)sprec, &t) || !drk_dtype_is_float(t))
      return fail(b, "unsupported 'softmax_precision' %lld of 'Attention'", (long long)sprec);
    if (!drk_onnx_is_known(b->c, sc) || sc->dtype != t) sm_in = emit_cast(b, sc, t, "softmax_in");
  }
  drk_node_t *sm = emit(b, DRK_OP_SOFTMAX, 1, &sm_in, "probs");
  drk_node_set_int(b->c->g, sm, "axis", -1);
  if (drk_onnx_is_known(b->c, sm_in)) {
    sm->outputs[0]->dtype = sm_in->dtype;
    drk_onnx_set_known(b->c, sm->outputs[0]);
  }
  drk_value_t *p = sm->outputs[0];
  if (masked) {
    drk_value_t *nan = emit(b, DRK_OP_IS_NAN, 1, &p, "probs_nan")->outputs[0];
    nan->dtype = DRK_DT_BOOL;
    drk_onnx_set_known(b->c, nan);
    p = emit_like(b, DRK_OP_WHERE, 3, (drk_value_t *[]){nan, const_like(b, "probs_zero", 0.0, p), p}, "probs_masked", p);
  }
  if (sm_in != sc) p = cast_like(b, p, q, "probs_cast");
  if (mode == 3) qk_out = p;
  if (b->n_out > 3 && !define_output(b, 3, qk_out)) return false;
  b->n_out = 1;
  if (!rank3) {
    b->op = DRK_OP_MATMUL;
    b->n_in = 0;
    set_input(b, 0, p);
    set_input(b, 1, v);
    return true;
  }
  drk_value_t *y = emit_like(b, DRK_OP_MATMUL, 2, (drk_value_t *[]){p, v}, "attn", q);
  y = transpose_of(b, y, 4, (int64_t[]){0, 2, 1, 3}, "attn_bshd");
  int64_t ys[3] = {0, 0, -1};
  return finish2(b, DRK_OP_RESHAPE, y, const_i64s(b, "y_shape", 3, ys));
}

/* RotaryEmbedding (opset 23): X 4-D [B, H, S, D] or 3-D [B, S, H*D] (num_heads); cos/sin
 * [B, S, R/2], or [max_pos, R/2] gathered at position_ids [B, S]; R = rotary_embedding_dim
 * (default D). x1, x2 = the halves of X[..., :R] (interleaved: its even and odd elements);
 * real = cos * x1 - sin * x2, imag = sin * x1 + cos * x2; the result is Concat(real, imag)
 * (interleaved: the pairs (real, imag) in turn) followed by X[..., R:] unchanged. */
static bool dc_rotary_embedding(nb_t *b) {
  int64_t inter, rdim, nh;
  bool has_nh;
  if (!take_int(b, "interleaved", 0, &inter, NULL) || !take_int(b, "rotary_embedding_dim", 0, &rdim, NULL) ||
      !take_int(b, "num_heads", 0, &nh, &has_nh))
    return false;
  drk_value_t *x = b->in[0], *cosc = in_at(b, 1), *sinc = in_at(b, 2), *pos = in_at(b, 3);
  if (!cosc || !sinc) return fail(b, "'RotaryEmbedding' is missing required inputs cos_cache and sin_cache");
  int r = x->shape.rank;
  if (r != 3 && r != 4)
    return fail(b, "unsupported 'RotaryEmbedding': X must be a known 3-D or 4-D tensor at import (rank %d; value_info gives it)", r);
  drk_value_t *xi = x;
  int64_t d;
  if (r == 3) {
    if (!has_nh || nh <= 0) return fail(b, "'RotaryEmbedding' with 3-D X needs a positive num_heads");
    int64_t hid;
    if (!static_dim(x, 2, &hid))
      return fail(b, "unsupported 'RotaryEmbedding': the hidden size (X dim 2) must be known at import");
    if (hid % nh) return fail(b, "'RotaryEmbedding': hidden size %lld is not a multiple of num_heads %lld", (long long)hid, (long long)nh);
    d = hid / nh;
    int64_t shp[4] = {0, 0, nh, d};
    xi = reshape_to(b, x, 4, shp, "x_heads"); /* [B, S, H, D] */
  } else if (!static_dim(x, 3, &d)) {
    return fail(b, "unsupported 'RotaryEmbedding': the head size (X dim 3) must be known at import");
  }
  if (rdim == 0) rdim = d;
  if (rdim <= 0 || rdim > d || rdim % 2)
    return fail(b, "'RotaryEmbedding': rotary_embedding_dim %lld must be even and at most the head size %lld", (long long)rdim,
                (long long)d);
  int64_t half = rdim / 2;
  if (pos) {
    cosc = emit_like(b, DRK_OP_GATHER, 2, (drk_value_t *[]){cosc, pos}, "cos_at", cosc);
    sinc = emit_like(b, DRK_OP_GATHER, 2, (drk_value_t *[]){sinc, pos}, "sin_at", sinc);
  }
  /* [B, S, R/2] -> [B, 1, S, R/2] against [B, H, S, .], [B, S, 1, R/2] against [B, S, H, .] */
  int64_t ax = r == 4 ? 1 : 2;
  cosc = emit_like(b, DRK_OP_UNSQUEEZE, 2, (drk_value_t *[]){cosc, const_i64s(b, "cos_axes", 1, &ax)}, "cos_b", cosc);
  sinc = emit_like(b, DRK_OP_UNSQUEEZE, 2, (drk_value_t *[]){sinc, const_i64s(b, "sin_axes", 1, &ax)}, "sin_b", sinc);
  drk_value_t *xr = rdim < d ? slice_axis(b, xi, 3, 0, rdim, 1, "x_rot") : xi;
  drk_value_t *x1, *x2;
  if (inter) {
    x1 = slice_axis(b, xr, 3, 0, rdim, 2, "x_even");
    x2 = slice_axis(b, xr, 3, 1, rdim, 2, "x_odd");
  } else {
    x1 = slice_axis(b, xr, 3, 0, half, 1, "x_lo");
    x2 = slice_axis(b, xr, 3, half, rdim, 1, "x_hi");
  }
  drk_value_t *c1 = emit_like(b, DRK_OP_MUL, 2, (drk_value_t *[]){cosc, x1}, "cos_x1", x);
  drk_value_t *s2 = emit_like(b, DRK_OP_MUL, 2, (drk_value_t *[]){sinc, x2}, "sin_x2", x);
  drk_value_t *s1 = emit_like(b, DRK_OP_MUL, 2, (drk_value_t *[]){sinc, x1}, "sin_x1", x);
  drk_value_t *c2 = emit_like(b, DRK_OP_MUL, 2, (drk_value_t *[]){cosc, x2}, "cos_x2", x);
  drk_value_t *re = emit_like(b, DRK_OP_SUB, 2, (drk_value_t *[]){c1, s2}, "real", x);
  drk_value_t *im = emit_like(b, DRK_OP_ADD, 2, (drk_value_t *[]){s1, c2}, "imag", x);
  drk_value_t *rot;
  if (inter) {
    int64_t la = 4;
    drk_value_t *ru = emit_like(b, DRK_OP_UNSQUEEZE, 2, (drk_value_t *[]){re, const_i64s(b, "pair_axes", 1, &la)}, "real_p", x);
    drk_value_t *iu = emit_like(b, DRK_OP_UNSQUEEZE, 2, (drk_value_t *[]){im, const_i64s(b, "pair_axes", 1, &la)}, "imag_p", x);
    drk_value_t *pr = concat_of(b, 2, (drk_value_t *[]){ru, iu}, 4, "pairs");
    int64_t shp[4] = {0, 0, 0, rdim};
    rot = reshape_to(b, pr, 4, shp, "rotated");
  } else {
    rot = concat_of(b, 2, (drk_value_t *[]){re, im}, 3, "rotated");
  }
  drk_value_t *y = rot;
  if (rdim < d) y = concat_of(b, 2, (drk_value_t *[]){rot, slice_axis(b, xi, 3, rdim, d, 1, "x_pass")}, 3, "rope");
  if (r == 3) {
    int64_t shp[3] = {0, 0, -1};
    b->op = DRK_OP_RESHAPE;
    b->n_in = 0;
    set_input(b, 0, y);
    set_input(b, 1, const_i64s(b, "y_shape", 3, shp));
    return true;
  }
  return finish_as(b, y);
}

/* Mod (opset 10): the TorchScript exporter writes it in shape arithmetic of dynamic-shape
 * exports (ViT, Swin: sizes modulo the patch or window size), which constant folding removes
 * once the dims are bound. Integers: the remainder of the truncating Div, moved into the
 * divisor's sign unless fmod=1; floats (fmod=1, as ONNX requires): a - trunc(a / b) * b. */
static bool dc_mod(nb_t *b) {
  int64_t fm;
  if (!take_int(b, "fmod", 0, &fm, NULL)) return false;
  drk_value_t *x = b->in[0], *y = in_at(b, 1);
  if (!y) return fail(b, "'Mod' is missing required input #1");
  if (!drk_onnx_is_known(b->c, x) || !drk_onnx_is_known(b->c, y))
    return fail(b, "unsupported 'Mod' on operands whose dtypes are not known at import (value_info gives them)");
  if (x->dtype != y->dtype)
    return fail(b, "'Mod' operands have different dtypes (%s, %s)", drk_dtype_name(x->dtype), drk_dtype_name(y->dtype));
  bool flt = drk_dtype_is_float(x->dtype);
  if (!flt && !drk_dtype_is_int(x->dtype)) return fail(b, "'Mod' of %s is not defined", drk_dtype_name(x->dtype));
  if (flt && !fm) return fail(b, "'Mod' of %s needs fmod=1 (ONNX)", drk_dtype_name(x->dtype));
  drk_value_t *q = emit_like(b, DRK_OP_DIV, 2, (drk_value_t *[]){x, y}, "quot", x);
  if (flt) {
    drk_value_t *neg = emit(b, DRK_OP_LESS, 2, (drk_value_t *[]){q, const_like(b, "zero", 0.0, x)}, "quot_neg")->outputs[0];
    neg->dtype = DRK_DT_BOOL;
    drk_onnx_set_known(b->c, neg);
    drk_value_t *up = emit_like(b, DRK_OP_CEIL, 1, &q, "quot_ceil", x), *dn = emit_like(b, DRK_OP_FLOOR, 1, &q, "quot_floor", x);
    q = emit_like(b, DRK_OP_WHERE, 3, (drk_value_t *[]){neg, up, dn}, "quot_trunc", x);
  }
  drk_value_t *qy = emit_like(b, DRK_OP_MUL, 2, (drk_value_t *[]){q, y}, "quot_mul", x);
  if (flt || fm) {
    b->op = DRK_OP_SUB;
    b->n_in = 0;
    set_input(b, 0, x);
    set_input(b, 1, qy);
    return true;
  }
  /* the truncated remainder r has the dividend's sign; where it is non-zero and of the other
   * sign than the divisor, r + y is the remainder in the divisor's sign */
  drk_value_t *r = emit_like(b, DRK_OP_SUB, 2, (drk_value_t *[]){x, qy}, "rem", x);
  drk_value_t *zero = const_like(b, "zero", 0.0, x);
  drk_value_t *ry = emit_like(b, DRK_OP_MUL, 2, (drk_value_t *[]){r, y}, "rem_sign", x);
  drk_value_t *opp = emit(b, DRK_OP_LESS, 2, (drk_value_t *[]){ry, zero}, "rem_opposite")->outputs[0];
  opp->dtype = DRK_DT_BOOL;
  drk_onnx_set_known(b->c, opp);
  drk_value_t *fix = emit_like(b, DRK_OP_ADD, 2, (drk_value_t *[]){r, y}, "rem_fixed", x);
  return finish3(b, DRK_OP_WHERE, opp, fix, r);
}

/* ---- ONNX Runtime's fused ops (com.microsoft; SimplifiedLayerNormalization, which ORT
 * registers in the ONNX domain, too), as its transformer optimizer writes them into models
 * (docs/onnx-import.md "ONNX Runtime's fused ops"): imported as the primitive ops they fuse.
 * Optional outputs that hold statistics (mean, inverse std) are refused when a model uses them. */

static bool no_stat_outputs(nb_t *b, int first, int last) {
  for (int i = first; i <= last && i < b->n_out; i++)
    if (b->np->output[i] && *b->np->output[i])
      return fail(b, "not implemented: output #%d of '%s' (a normalization statistic)", i, b->op_type);
  return true;
}

/* SkipLayerNormalization(input, skip, gamma, beta?, bias?) / SkipSimplifiedLayerNormalization(
 * input, skip, gamma, bias?) {epsilon}: s = input + skip (+ bias); Y = LayerNorm(s) (last axis)
 * or s / sqrt(mean(s^2) + epsilon) * gamma; output #3 is s (the residual the next one takes). */
static bool dc_ms_skip_layer_norm(nb_t *b) {
  bool simplified = strcmp(b->op_type, "SkipSimplifiedLayerNormalization") == 0;
  double eps;
  if (!take_float(b, "epsilon", 1e-12, &eps, NULL) || !no_stat_outputs(b, 1, 2)) return false;
  if (b->n_out > 4) return fail(b, "'%s' has %d outputs, expected at most 4", b->op_type, b->n_out);
  drk_value_t *x = b->in[0], *skip = in_at(b, 1), *gamma = in_at(b, 2);
  drk_value_t *beta = simplified ? NULL : in_at(b, 3), *bias = in_at(b, simplified ? 3 : 4);
  if (!skip || !gamma) return fail(b, "'%s' is missing required inputs skip and gamma", b->op_type);
  if (b->n_in > (simplified ? 4u : 5u)) return fail(b, "'%s' has %zu inputs, expected at most %d", b->op_type, b->n_in, simplified ? 4 : 5);
  drk_value_t *sum = emit_like(b, DRK_OP_ADD, 2, (drk_value_t *[]){x, skip}, "skip_sum", x);
  if (bias) sum = emit_like(b, DRK_OP_ADD, 2, (drk_value_t *[]){sum, bias}, "skip_bias_sum", x);
  if (b->n_out > 3 && b->np->output[3] && *b->np->output[3] && !define_output(b, 3, sum)) return false;
  b->n_out = 1;
  b->n_in = 0;
  if (simplified) {
    int64_t last = -1;
    drk_value_t *nrm = rms_normalized(b, sum, 1, &last, eps);
    return finish2(b, DRK_OP_MUL, nrm, gamma);
  }
  b->op = DRK_OP_LAYER_NORMALIZATION;
  set_input(b, 0, sum);
  set_input(b, 1, gamma);
  if (beta) set_input(b, 2, beta);
  pend_int(b, "axis", -1);
  pend_float(b, "epsilon", eps);
  return true;
}

/* SimplifiedLayerNormalization(X, scale) {axis, epsilon, stash_type}: RMSNormalization. */
static bool dc_ms_simplified_layer_norm(nb_t *b) {
  if (!no_stat_outputs(b, 1, 1)) return false;
  b->n_out = 1;
  return dc_rms_normalization(b);
}

/* FastGelu(X, bias?): Gelu(X + bias) in its tanh form; BiasGelu(A, B): Gelu(A + B); Gelu: Gelu. */
static bool dc_ms_gelu(nb_t *b) {
  bool fast = strcmp(b->op_type, "FastGelu") == 0;
  drk_value_t *x = b->in[0], *bias = in_at(b, 1);
  if (strcmp(b->op_type, "BiasGelu") == 0 && !bias) return fail(b, "'BiasGelu' is missing required input #1 (bias)");
  if (b->n_in > (strcmp(b->op_type, "Gelu") == 0 ? 1u : 2u)) return fail(b, "'%s' has %zu inputs", b->op_type, b->n_in);
  if (bias) x = emit_like(b, DRK_OP_ADD, 2, (drk_value_t *[]){x, bias}, "biased", x);
  b->op = DRK_OP_GELU;
  b->n_in = 0;
  set_input(b, 0, x);
  if (fast) pend_string(b, "approximate", "tanh");
  return true;
}

/* QuickGelu(X) {alpha = 1.702}: X * Sigmoid(alpha * X). */
static bool dc_ms_quick_gelu(nb_t *b) {
  double alpha;
  if (!take_float(b, "alpha", 1.702, &alpha, NULL)) return false;
  drk_value_t *x = b->in[0];
  drk_value_t *ax = emit_like(b, DRK_OP_MUL, 2, (drk_value_t *[]){x, const_like(b, "alpha", alpha, x)}, "ax", x);
  drk_value_t *sg = emit_like(b, DRK_OP_SIGMOID, 1, &ax, "sig", x);
  return finish2(b, DRK_OP_MUL, x, sg);
}

/* BiasAdd(X, bias, skip): X + bias + skip. */
static bool dc_ms_bias_add(nb_t *b) {
  drk_value_t *x = b->in[0], *bias = in_at(b, 1), *skip = in_at(b, 2);
  if (!bias || !skip || b->n_in != 3) return fail(b, "'BiasAdd' needs inputs X, bias and skip");
  drk_value_t *xb = emit_like(b, DRK_OP_ADD, 2, (drk_value_t *[]){x, bias}, "biased", x);
  return finish2(b, DRK_OP_ADD, xb, skip);
}

/* FusedMatMul(A, B) {alpha, transA, transB, transBatchA = 0, transBatchB = 0}: alpha * A' B',
 * A' / B' with their last two axes swapped where asked. */
static bool dc_ms_fused_matmul(nb_t *b) {
  int64_t ta, tb, tba, tbb;
  double alpha;
  if (!take_float(b, "alpha", 1.0, &alpha, NULL) || !take_int(b, "transA", 0, &ta, NULL) ||
      !take_int(b, "transB", 0, &tb, NULL) || !take_int(b, "transBatchA", 0, &tba, NULL) ||
      !take_int(b, "transBatchB", 0, &tbb, NULL))
    return false;
  if (tba || tbb) return fail(b, "not implemented: 'FusedMatMul' with transBatchA/transBatchB");
  drk_value_t *m[2] = {b->in[0], in_at(b, 1)};
  if (!m[1] || b->n_in != 2) return fail(b, "'FusedMatMul' needs inputs A and B");
  int64_t tr[2] = {ta, tb};
  for (int i = 0; i < 2; i++) {
    if (!tr[i]) continue;
    int r = m[i]->shape.rank;
    if (r < 2 || r > DRK_ONNX_MAX_RANK)
      return fail(b, "'FusedMatMul' with trans%c needs input %c of known rank >= 2 (from value_info)", "AB"[i], "AB"[i]);
    int64_t perm[DRK_ONNX_MAX_RANK];
    for (int d = 0; d < r; d++) perm[d] = d;
    perm[r - 2] = r - 1, perm[r - 1] = r - 2;
    m[i] = transpose_of(b, m[i], r, perm, i ? "bt" : "at");
  }
  if (alpha == 1.0) return finish2(b, DRK_OP_MATMUL, m[0], m[1]);
  drk_value_t *y = emit_like(b, DRK_OP_MATMUL, 2, m, "mm", m[0]);
  return finish2(b, DRK_OP_MUL, y, const_like(b, "alpha", alpha, y));
}

/* ---- recurrent layers: LSTM, GRU, RNN (opset 7-22 forms), unrolled over a sequence whose
 * length is known at import ----
 * Per direction: one MatMul of every step's input by W^T plus both biases (X W^T + Wb + Rb), then
 * per step the recurrence as the ONNX definitions give it (gate orders iofc for LSTM, zrh for GRU;
 * default activations; GRU's linear_before_reset either way); without initial_h / initial_c the
 * first step drops the terms that multiply zeros. Y is [seq, dirs, batch, hidden] (layout 1:
 * [batch, seq, dirs, hidden]), Y_h / Y_c the last step of each direction. Refused by name: a
 * sequence length not known at import (the unrolling needs it), more than 4096 steps,
 * sequence_lens that are not all the full length, peepholes, clip, input_forget, activations
 * other than the defaults (RNN: Tanh, Relu or Sigmoid). */
typedef enum { RNN_LSTM, RNN_GRU, RNN_PLAIN } rnn_kind_t;

static drk_value_t *scalar_i64(nb_t *b, const char *what, int64_t v) { return add_const(b, what, DRK_DT_I64, 0, NULL, &v, 8); }

/* x[i] along axis 0 (the axis dropped) */
static drk_value_t *take0(nb_t *b, drk_value_t *x, int64_t i, const char *what) {
  return emit_like(b, DRK_OP_GATHER, 2, (drk_value_t *[]){x, scalar_i64(b, "idx", i)}, what, x);
}

static drk_value_t *unsq(nb_t *b, drk_value_t *x, int64_t axis, const char *what) {
  return emit_like(b, DRK_OP_UNSQUEEZE, 2, (drk_value_t *[]){x, const_i64s(b, "axes", 1, &axis)}, what, x);
}

static drk_value_t *act(nb_t *b, drk_op_t op, drk_value_t *x, const char *what) { return emit_like(b, op, 1, &x, what, x); }
static drk_value_t *bin(nb_t *b, drk_op_t op, drk_value_t *x, drk_value_t *y, const char *what) {
  return emit_like(b, op, 2, (drk_value_t *[]){x, y}, what, x);
}

/* The activations attribute: the defaults (or, RNN, one of Tanh/Relu/Sigmoid per direction). */
static bool rnn_activations(nb_t *b, rnn_kind_t k, int dirs, drk_op_t *rnn_act) {
  static const char *const lstm[] = {"Sigmoid", "Tanh", "Tanh"}, *const gru[] = {"Sigmoid", "Tanh"};
  const Onnx__AttributeProto *a = take(b, "activations");
  *rnn_act = DRK_OP_TANH;
  if (!a) return true;
  int per = k == RNN_LSTM ? 3 : k == RNN_GRU ? 2 : 1;
  if (attr_type(a) != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS || a->n_strings != (size_t)(per * dirs))
    return fail(b, "'%s': attribute 'activations' must list %d activation names", b->op_type, per * dirs);
  for (size_t i = 0; i < a->n_strings; i++) {
    char nm[32];
    snprintf(nm, sizeof nm, "%.*s", (int)(a->strings[i].len < 31 ? a->strings[i].len : 31), (const char *)a->strings[i].data);
    const char *want = k == RNN_LSTM ? lstm[i % 3] : k == RNN_GRU ? gru[i % 2] : NULL;
    bool known = !strcmp(nm, "Tanh") || !strcmp(nm, "Relu") || !strcmp(nm, "Sigmoid");
    drk_op_t op = !strcmp(nm, "Relu") ? DRK_OP_RELU : !strcmp(nm, "Sigmoid") ? DRK_OP_SIGMOID : DRK_OP_TANH;
    if (want ? strcmp(nm, want) != 0 : !known || (i && op != *rnn_act))
      return fail(b, "unsupported '%s' with activation '%s' (drkc takes %s)", b->op_type, nm,
                  want ? "the default activations" : "Tanh, Relu or Sigmoid, the same for both directions");
    if (!want) *rnn_act = op;
  }
  return true;
}

/* The constant axes of a Squeeze/Unsqueeze (input #1 from opset 13, else the attribute),
 * normalized to rank r; false when not constant. */
static bool squeeze_axes(const drk_node_t *d, int r, bool *axes) {
  size_t na = 0;
  const int64_t *a = drk_node_attr_ints(d, "axes", &na);
  const drk_value_t *av = d->n_inputs > 1 ? d->inputs[1] : NULL;
  if (!a && !(av && av->kind == DRK_VALUE_CONST && av->data)) return false;
  size_t n = a ? na : (size_t)drk_shape_numel(&av->shape);
  for (size_t i = 0; i < n; i++) {
    int64_t x = a ? a[i] : (int64_t)drk_value_const_f64(av, (int64_t)i);
    if (x < 0) x += r;
    if (x < 0 || x >= r || x >= DRK_ONNX_MAX_RANK) return false;
    axes[x] = true;
  }
  return true;
}

/* Dim `axis` of v at import, where shape inference has not run: v's own (an input, an
 * initializer, value_info), else through the node that made it: Transpose, Cast, unary
 * elementwise ops, Squeeze/Unsqueeze of constant axes, Concat (an exporter's batch_first
 * Transpose before a recurrence, the Squeeze between two stacked LSTMs, this file's own
 * unrolled outputs). */
static bool import_dim(const drk_onnx_ctx_t *c, const drk_value_t *v, int axis, int64_t *out, int depth) {
  if (!v || depth > 24) return false;
  if (static_dim(v, axis, out)) return true;
  if (v->shape.rank > axis && axis >= 0 && v->shape.dims[axis].sym && (*out = drk_onnx_bound_size(c, v->shape.dims[axis].sym)) >= 0)
    return true; /* a symbol the caller binds (--bind) */
  const drk_node_t *d = v->kind == DRK_VALUE_NODE ? v->def : NULL;
  if (!d || d->n_inputs < 1 || axis < 0 || axis >= DRK_ONNX_MAX_RANK) return false;
  const drk_value_t *x = d->inputs[0];
  if (d->op == DRK_OP_TRANSPOSE) {
    size_t np = 0;
    const int64_t *perm = drk_node_attr_ints(d, "perm", &np);
    return perm && axis < (int)np && import_dim(c, x, (int)perm[axis], out, depth + 1);
  }
  if (d->op == DRK_OP_CAST || d->op == DRK_OP_IDENTITY || ((drk_op_info(d->op)->flags & DRK_OPF_EW) && d->n_inputs == 1))
    return import_dim(c, x, axis, out, depth + 1);
  if (d->op == DRK_OP_SQUEEZE || d->op == DRK_OP_UNSQUEEZE) {
    /* Unsqueeze: axes of the result (an inserted one is 1; another is the input's axis less
     * the inserted ones before it); Squeeze: axes of the input (the result's axis k is the
     * input's k-th kept one). Negative axes need a rank: the result's for Unsqueeze. */
    bool un = d->op == DRK_OP_UNSQUEEZE, ax[DRK_ONNX_MAX_RANK] = {false};
    if (!squeeze_axes(d, un && v->shape.rank > 0 ? v->shape.rank : DRK_ONNX_MAX_RANK, ax)) return false;
    int in_axis = -1;
    if (un) {
      if (ax[axis]) return *out = 1, true;
      in_axis = axis;
      for (int i = 0; i < axis; i++) in_axis -= ax[i];
    } else {
      for (int i = 0, k = 0; i < DRK_ONNX_MAX_RANK && in_axis < 0; i++)
        if (!ax[i] && k++ == axis) in_axis = i;
    }
    return in_axis >= 0 && import_dim(c, x, in_axis, out, depth + 1);
  }
  if (d->op == DRK_OP_CONCAT) {
    int64_t ca = drk_node_attr_int(d, "axis", 0);
    if (ca < 0) return false; /* a negative axis needs the rank */
    if (ca != axis) return import_dim(c, x, axis, out, depth + 1);
    int64_t sum = 0, e;
    for (int i = 0; i < d->n_inputs; i++)
      if (!import_dim(c, d->inputs[i], axis, &e, depth + 1) || (sum += e) > ((int64_t)1 << 40)) return false;
    return *out = sum, true;
  }
  return false;
}

static bool dc_rnn(nb_t *b, rnn_kind_t k) {
  int64_t hidden, layout, lbr = 0, input_forget = 0;
  bool has_hidden, has_clip;
  double clip;
  if (!take_int(b, "hidden_size", 0, &hidden, &has_hidden) || !take_int(b, "layout", 0, &layout, NULL) ||
      !take_float(b, "clip", 0, &clip, &has_clip))
    return false;
  if (k == RNN_GRU && !take_int(b, "linear_before_reset", 0, &lbr, NULL)) return false;
  if (k == RNN_LSTM && !take_int(b, "input_forget", 0, &input_forget, NULL)) return false;
  const char *dir = peek_string(b, "direction", "forward");
  take(b, "direction");
  int dirs = !strcmp(dir, "bidirectional") ? 2 : 1;
  bool reverse = !strcmp(dir, "reverse");
  if (strcmp(dir, "forward") && strcmp(dir, "reverse") && dirs == 1) return fail(b, "'%s': unknown direction '%s'", b->op_type, dir);
  drk_op_t ract;
  if (!rnn_activations(b, k, dirs, &ract)) return false;
  if (take(b, "activation_alpha") || take(b, "activation_beta"))
    return fail(b, "unsupported '%s' with activation_alpha/activation_beta", b->op_type);
  if (has_clip) return fail(b, "unsupported '%s' with 'clip'", b->op_type);
  if (input_forget) return fail(b, "unsupported 'LSTM' with input_forget=1");
  int G = k == RNN_LSTM ? 4 : k == RNN_GRU ? 3 : 1;
  drk_value_t *x = b->in[0], *W = in_at(b, 1), *R = in_at(b, 2), *B = in_at(b, 3), *sl = in_at(b, 4);
  drk_value_t *h0 = in_at(b, 5), *c0 = k == RNN_LSTM ? in_at(b, 6) : NULL;
  if (!W || !R) return fail(b, "'%s' is missing its inputs W and R", b->op_type);
  if (k == RNN_LSTM && in_at(b, 7)) return fail(b, "unsupported 'LSTM' with peephole weights P");
  if (layout != 0 && layout != 1) return fail(b, "'%s': layout must be 0 or 1", b->op_type);
  int64_t T, Hw;
  if (!import_dim(b->c, x, layout ? 1 : 0, &T, 0))
    return fail(b, "unsupported '%s' over a sequence whose length is not known at import (drkc unrolls the "
                   "recurrence: give it with --bind=NAME=SIZE, or export with a fixed sequence length)", b->op_type);
  if (!static_dim(W, 1, &Hw) || (has_hidden ? Hw != G * hidden : Hw % G)) return fail(b, "'%s': W must be [dirs, %d * hidden_size, input]", b->op_type, G);
  int64_t H = has_hidden ? hidden : Hw / G;
  if (T < 1 || T > 4096) return fail(b, "unsupported '%s' over %lld steps (drkc unrolls up to 4096)", b->op_type, (long long)T);
  if (sl) { /* only the full length everywhere */
    bool full = sl->kind == DRK_VALUE_CONST && sl->data;
    for (int64_t i = 0; full && i < drk_shape_numel(&sl->shape); i++) full = drk_value_const_f64(sl, i) == (double)T;
    if (!full) return fail(b, "unsupported '%s' with sequence_lens (sequences of several lengths)", b->op_type);
  }
  if (layout) x = transpose_of(b, x, 3, (int64_t[]){1, 0, 2}, "x_tbi");
  if (layout && h0) h0 = transpose_of(b, h0, 3, (int64_t[]){1, 0, 2}, "h0_dbh");
  if (layout && c0) c0 = transpose_of(b, c0, 3, (int64_t[]){1, 0, 2}, "c0_dbh");
  drk_value_t *ys[2], *hl[2], *cl[2] = {NULL, NULL};
  drk_value_t **steps = drk_arena_alloc(b->c->scratch, sizeof *steps * (size_t)T);
  for (int d = 0; d < dirs; d++) {
    drk_value_t *Wt = transpose_of(b, take0(b, W, d, "w_d"), 2, (int64_t[]){1, 0}, "w_t");
    drk_value_t *Rt = transpose_of(b, take0(b, R, d, "r_d"), 2, (int64_t[]){1, 0}, "r_t");
    drk_value_t *xw = emit_like(b, DRK_OP_MATMUL, 2, (drk_value_t *[]){x, Wt}, "xw", x); /* [T, B, G*H] */
    drk_value_t *rb = NULL;
    if (B) {
      drk_value_t *bd = take0(b, B, d, "b_d");
      drk_value_t *wb = slice_axis(b, bd, 0, 0, G * H, 1, "wb");
      rb = slice_axis(b, bd, 0, G * H, 2 * G * H, 1, "rb");
      /* GRU with linear_before_reset keeps Rb_h inside the reset product (r * (h Rh^T + Rb_h)):
       * only Rb_z and Rb_r fold into the inputs' bias */
      drk_value_t *fold = rb;
      if (k == RNN_GRU && lbr) {
        double *zeros = drk_arena_alloc(b->c->scratch, sizeof(double) * (size_t)H);
        memset(zeros, 0, sizeof(double) * (size_t)H);
        fold = concat_of(b, 2, (drk_value_t *[]){slice_axis(b, rb, 0, 0, 2 * H, 1, "rb_zr"), tensor_like(b, "zeros_h", 1, &H, zeros, x)},
                         0, "rb_fold");
      }
      xw = bin(b, DRK_OP_ADD, xw, bin(b, DRK_OP_ADD, wb, fold, "bias"), "xwb");
    }
    drk_value_t *h = h0 ? take0(b, h0, d, "h0") : NULL, *c = c0 ? take0(b, c0, d, "c0") : NULL;
    bool back = reverse || d == 1;
    for (int64_t s = 0; s < T; s++) {
      int64_t t = back ? T - 1 - s : s;
      drk_value_t *xt = take0(b, xw, t, "x_t"); /* [B, G*H] */
      drk_value_t *hr = h ? emit_like(b, DRK_OP_MATMUL, 2, (drk_value_t *[]){h, Rt}, "h_r", x) : NULL;
      if (k == RNN_LSTM) {
        drk_value_t *gt = hr ? bin(b, DRK_OP_ADD, xt, hr, "gates") : xt;
        drk_value_t *i = act(b, DRK_OP_SIGMOID, slice_axis(b, gt, 1, 0, H, 1, "gi"), "i");
        drk_value_t *o = act(b, DRK_OP_SIGMOID, slice_axis(b, gt, 1, H, 2 * H, 1, "go"), "o");
        drk_value_t *f = act(b, DRK_OP_SIGMOID, slice_axis(b, gt, 1, 2 * H, 3 * H, 1, "gf"), "f");
        drk_value_t *g = act(b, DRK_OP_TANH, slice_axis(b, gt, 1, 3 * H, 4 * H, 1, "gc"), "g");
        drk_value_t *ig = bin(b, DRK_OP_MUL, i, g, "ig");
        c = c ? bin(b, DRK_OP_ADD, bin(b, DRK_OP_MUL, f, c, "fc"), ig, "c") : ig;
        h = bin(b, DRK_OP_MUL, o, act(b, DRK_OP_TANH, c, "tc"), "h");
      } else if (k == RNN_GRU) {
        drk_value_t *zx = slice_axis(b, xt, 1, 0, H, 1, "zx"), *rx = slice_axis(b, xt, 1, H, 2 * H, 1, "rx");
        drk_value_t *hx = slice_axis(b, xt, 1, 2 * H, 3 * H, 1, "hx");
        drk_value_t *z = act(b, DRK_OP_SIGMOID, hr ? bin(b, DRK_OP_ADD, zx, slice_axis(b, hr, 1, 0, H, 1, "zh"), "zs") : zx, "z");
        drk_value_t *r = act(b, DRK_OP_SIGMOID, hr ? bin(b, DRK_OP_ADD, rx, slice_axis(b, hr, 1, H, 2 * H, 1, "rh"), "rs") : rx, "r");
        drk_value_t *rbh = rb ? slice_axis(b, rb, 0, 2 * H, 3 * H, 1, "rbh") : NULL, *hh;
        if (lbr) { /* h~ = tanh(hx + r * (h Rh^T + Rbh)) */
          drk_value_t *lin = hr ? slice_axis(b, hr, 1, 2 * H, 3 * H, 1, "hh") : NULL;
          if (lin && rbh) lin = bin(b, DRK_OP_ADD, lin, rbh, "hh_b");
          else if (!lin) lin = rbh;
          hh = lin ? bin(b, DRK_OP_ADD, hx, bin(b, DRK_OP_MUL, r, lin, "r_hh"), "hs") : hx;
        } else { /* h~ = tanh(hx + (r * h) Rh^T + Rbh); Rbh is already in hx */
          drk_value_t *Rh = slice_axis(b, Rt, 1, 2 * H, 3 * H, 1, "r_h");
          hh = h ? bin(b, DRK_OP_ADD, hx, emit_like(b, DRK_OP_MATMUL, 2, (drk_value_t *[]){bin(b, DRK_OP_MUL, r, h, "rh_"), Rh}, "rhr", x), "hs")
                 : hx;
        }
        drk_value_t *n = act(b, DRK_OP_TANH, hh, "n");
        drk_value_t *zn = bin(b, DRK_OP_SUB, n, bin(b, DRK_OP_MUL, z, n, "zn"), "nzn"); /* (1 - z) n */
        h = h ? bin(b, DRK_OP_ADD, zn, bin(b, DRK_OP_MUL, z, h, "zh_"), "h") : zn;
      } else {
        h = act(b, ract, hr ? bin(b, DRK_OP_ADD, xt, hr, "s") : xt, "h");
      }
      steps[t] = unsq(b, h, 0, "y_t");
    }
    ys[d] = unsq(b, T > 1 ? concat_of(b, (int)T, steps, 0, "y_d") : steps[0], 1, "y_dir"); /* [T, 1, B, H] */
    hl[d] = unsq(b, h, 0, "h_last");
    if (k == RNN_LSTM) cl[d] = unsq(b, c, 0, "c_last");
  }
  drk_value_t *y = dirs > 1 ? concat_of(b, 2, ys, 1, "y") : ys[0];
  drk_value_t *yh = dirs > 1 ? concat_of(b, 2, hl, 0, "y_h") : hl[0];
  drk_value_t *yc = k == RNN_LSTM ? (dirs > 1 ? concat_of(b, 2, cl, 0, "y_c") : cl[0]) : NULL;
  if (layout) {
    y = transpose_of(b, y, 4, (int64_t[]){2, 0, 1, 3}, "y_btdh");
    yh = transpose_of(b, yh, 3, (int64_t[]){1, 0, 2}, "yh_bdh");
    if (yc) yc = transpose_of(b, yc, 3, (int64_t[]){1, 0, 2}, "yc_bdh");
  }
  if (b->n_out > (k == RNN_LSTM ? 3 : 2)) return fail(b, "'%s' has %d outputs, expected at most %d", b->op_type, b->n_out, k == RNN_LSTM ? 3 : 2);
  if (b->n_out > 1 && !define_output(b, 1, yh)) return false;
  if (b->n_out > 2 && !define_output(b, 2, yc)) return false;
  b->n_out = 1;
  return finish_as(b, y);
}

static bool dc_lstm(nb_t *b) { return dc_rnn(b, RNN_LSTM); }
static bool dc_gru(nb_t *b) { return dc_rnn(b, RNN_GRU); }
static bool dc_plain_rnn(nb_t *b) { return dc_rnn(b, RNN_PLAIN); }

/* ScatterElements (11-18; Scatter 9-10, its old name): ScatterND over index tuples built from
 * every position p of `indices`: (p0, ..., indices[p] (a negative one plus the dim), ..., p_r-1),
 * with the same reduction. The positions come from Range/Expand of Shape(indices), so the
 * sizes may be symbolic; the rank must be known at import (of indices or data). */
static bool dc_scatter_elements(nb_t *b) {
  int64_t axis;
  if (!take_int(b, "axis", 0, &axis, NULL)) return false;
  const char *red = peek_string(b, "reduction", "none");
  take(b, "reduction");
  drk_value_t *data = b->in[0], *idx = in_at(b, 1), *upd = in_at(b, 2);
  if (!idx || !upd) return fail(b, "'%s' is missing its inputs indices and updates", b->op_type);
  int r = idx->shape.rank >= 0 ? idx->shape.rank : data->shape.rank;
  if (r < 1 || r > 16) return fail(b, "unsupported '%s' whose rank is not known at import (value_info gives it)", b->op_type);
  if (axis < -r || axis >= r) return fail(b, "'%s': axis %lld is out of range for rank %d", b->op_type, (long long)axis, r);
  if (axis < 0) axis += r;
  drk_value_t *ix = idx;
  if (!drk_onnx_is_known(b->c, idx) || idx->dtype != DRK_DT_I64) ix = emit_cast(b, idx, DRK_DT_I64, "idx64");
  drk_value_t *shp = emit(b, DRK_OP_SHAPE, 1, &ix, "idx_shape")->outputs[0];
  shp->dtype = DRK_DT_I64, drk_onnx_set_known(b->c, shp);
  drk_value_t *dshp = emit(b, DRK_OP_SHAPE, 1, &data, "data_shape")->outputs[0];
  dshp->dtype = DRK_DT_I64, drk_onnx_set_known(b->c, dshp);
  drk_value_t *zero = scalar_i64(b, "zero", 0), *one = scalar_i64(b, "one", 1), *comps[16];
  for (int k = 0; k < r; k++) {
    drk_value_t *comp;
    if (k == axis) { /* the indices, negative ones counted from the end of data's axis */
      drk_value_t *dim = take0(b, emit_like(b, DRK_OP_GATHER, 2, (drk_value_t *[]){dshp, const_i64s(b, "axis", 1, &axis)}, "dim1", dshp), 0, "dim");
      drk_value_t *neg = bool_op(b, DRK_OP_LESS, ix, zero, "neg");
      comp = emit_like(b, DRK_OP_WHERE, 3, (drk_value_t *[]){neg, bin(b, DRK_OP_ADD, ix, dim, "wrapped"), ix}, "idx_k", ix);
    } else { /* position k, broadcast over the other axes */
      drk_value_t *n = take0(b, emit_like(b, DRK_OP_GATHER, 2, (drk_value_t *[]){shp, const_i64s(b, "k", 1, (int64_t[]){k})}, "n1", shp), 0, "n");
      drk_value_t *rk = emit_like(b, DRK_OP_RANGE, 3, (drk_value_t *[]){zero, n, one}, "pos", shp);
      int64_t sh[16];
      for (int q = 0; q < r; q++) sh[q] = q == k ? -1 : 1;
      comp = emit_like(b, DRK_OP_EXPAND, 2, (drk_value_t *[]){reshape_to(b, rk, r, sh, "pos_k"), shp}, "pos_b", shp);
    }
    comps[k] = unsq(b, comp, r, "comp");
  }
  drk_value_t *nd = r > 1 ? concat_of(b, r, comps, r, "nd_idx") : comps[0];
  b->op = DRK_OP_SCATTER_ND;
  b->n_in = 0;
  set_input(b, 0, data);
  set_input(b, 1, nd);
  set_input(b, 2, upd);
  if (strcmp(red, "none")) pend_string(b, "reduction", red);
  return true;
}

/* GridSample (16-22; 4-D): X [N, C, H, W] sampled at grid [N, Ho, Wo, 2] (x, y in [-1, 1]).
 * The grid is unnormalized as align_corners says, clamped for padding_mode=border; bilinear
 * ("linear" from opset 20) reads the four neighbours through GatherElements on X flattened to
 * [N, C, H*W] (an index per output pixel, expanded over C), each weighted and zero outside the
 * image (padding_mode=zeros); nearest rounds half to even. Refused by name: bicubic/cubic,
 * reflection padding, other ranks. H and W are read with Shape, so they may be symbolic. */
static drk_value_t *gs_scalar_dim(nb_t *b, drk_value_t *shp, int64_t k, drk_value_t *like, const char *what) {
  drk_value_t *d = take0(b, emit_like(b, DRK_OP_GATHER, 2, (drk_value_t *[]){shp, const_i64s(b, "k", 1, &k)}, "dim1", shp), 0, what);
  return cast_like(b, d, like, "dimf");
}

static bool dc_grid_sample(nb_t *b) {
  int64_t align;
  if (!take_int(b, "align_corners", 0, &align, NULL)) return false;
  const char *mode = peek_string(b, "mode", b->c->opset >= 20 ? "linear" : "bilinear");
  const char *pad = peek_string(b, "padding_mode", "zeros");
  take(b, "mode");
  take(b, "padding_mode");
  bool nearest = !strcmp(mode, "nearest"), linear = !strcmp(mode, "bilinear") || !strcmp(mode, "linear");
  if (!nearest && !linear) return fail(b, "unsupported 'GridSample' with mode '%s' (drkc takes bilinear/linear and nearest)", mode);
  if (strcmp(pad, "zeros") && strcmp(pad, "border"))
    return fail(b, "unsupported 'GridSample' with padding_mode '%s' (drkc takes zeros and border)", pad);
  drk_value_t *x = b->in[0], *grid = in_at(b, 1);
  if (!grid) return fail(b, "'GridSample' is missing its input grid");
  if ((x->shape.rank >= 0 && x->shape.rank != 4) || (grid->shape.rank >= 0 && grid->shape.rank != 4))
    return fail(b, "unsupported 'GridSample' of rank %d (drkc takes 4-D inputs)", x->shape.rank);
  drk_value_t *xs = emit(b, DRK_OP_SHAPE, 1, &x, "x_shape")->outputs[0];
  xs->dtype = DRK_DT_I64, drk_onnx_set_known(b->c, xs);
  drk_value_t *gsh = emit(b, DRK_OP_SHAPE, 1, &grid, "g_shape")->outputs[0];
  gsh->dtype = DRK_DT_I64, drk_onnx_set_known(b->c, gsh);
  drk_value_t *Hf = gs_scalar_dim(b, xs, 2, grid, "h"), *Wf = gs_scalar_dim(b, xs, 3, grid, "w");
  drk_value_t *one = const_like(b, "one", 1.0, grid), *half = const_like(b, "half", 0.5, grid), *zf = const_like(b, "zero", 0.0, grid);
  drk_value_t *coord[2];
  for (int k = 0; k < 2; k++) { /* x from grid[..., 0] over W, y from grid[..., 1] over H */
    drk_value_t *g = take0(b, transpose_of(b, grid, 4, (int64_t[]){3, 0, 1, 2}, "g_t"), k, k ? "gy" : "gx"); /* [N, Ho, Wo] */
    drk_value_t *size = k ? Hf : Wf, *c;
    if (align) /* (g + 1) / 2 * (size - 1) */
      c = bin(b, DRK_OP_MUL, bin(b, DRK_OP_MUL, bin(b, DRK_OP_ADD, g, one, "g1"), half, "g1h"), bin(b, DRK_OP_SUB, size, one, "sm1"), "c");
    else /* ((g + 1) * size - 1) / 2 */
      c = bin(b, DRK_OP_MUL, bin(b, DRK_OP_SUB, bin(b, DRK_OP_MUL, bin(b, DRK_OP_ADD, g, one, "g1"), size, "g1s"), one, "g1s1"), half, "c");
    if (!strcmp(pad, "border"))
      c = emit_like(b, DRK_OP_MIN, 2, (drk_value_t *[]){emit_like(b, DRK_OP_MAX, 2, (drk_value_t *[]){c, zf}, "cmax", c),
                                                         bin(b, DRK_OP_SUB, size, one, "lim")}, "clamped", c);
    coord[k] = c;
  }
  /* X as [N, C, H*W] */
  drk_value_t *xf = reshape_to(b, x, 3, (int64_t[]){0, 0, -1}, "x_flat");
  /* the result [N, C, Ho, Wo]: Shape(x)[:2] ++ Shape(grid)[1:3] */
  drk_value_t *oshape = concat_of(b, 2, (drk_value_t *[]){slice_axis(b, xs, 0, 0, 2, 1, "nc"), slice_axis(b, gsh, 0, 1, 3, 1, "howo")}, 0, "out_shape");
  drk_value_t *ishape = concat_of(b, 3, (drk_value_t *[]){const_i64s(b, "one1", 1, (int64_t[]){1}), slice_axis(b, xs, 0, 1, 2, 1, "c1"),
                                                        const_i64s(b, "one2", 1, (int64_t[]){1})}, 0, "idx_shape"); /* [1, C, 1] */
  int ncorner = nearest ? 1 : 4;
  drk_value_t *acc = NULL, *base[2], *frac[2];
  for (int k = 0; k < 2; k++) {
    base[k] = act(b, nearest ? DRK_OP_ROUND : DRK_OP_FLOOR, coord[k], k ? "y0" : "x0");
    frac[k] = nearest ? NULL : bin(b, DRK_OP_SUB, coord[k], base[k], k ? "fy" : "fx");
  }
  for (int q = 0; q < ncorner; q++) {
    int dx = q & 1, dy = q >> 1;
    drk_value_t *cx = dx ? bin(b, DRK_OP_ADD, base[0], one, "x1") : base[0], *cy = dy ? bin(b, DRK_OP_ADD, base[1], one, "y1") : base[1];
    /* inside the image: 0 <= cx <= W-1 and 0 <= cy <= H-1 */
    drk_value_t *in = NULL;
    drk_value_t *cs[2] = {cx, cy}, *sz[2] = {Wf, Hf};
    for (int k = 0; k < 2; k++) {
      drk_value_t *lo = bool_op(b, DRK_OP_GREATER_OR_EQUAL, cs[k], zf, "ge0");
      drk_value_t *hi = bool_op(b, DRK_OP_LESS, cs[k], sz[k], "lt");
      drk_value_t *both = bool_op(b, DRK_OP_AND, lo, hi, "inside");
      in = in ? bool_op(b, DRK_OP_AND, in, both, "inside2") : both;
    }
    drk_value_t *w = nearest ? one
                             : bin(b, DRK_OP_MUL, dx ? frac[0] : bin(b, DRK_OP_SUB, one, frac[0], "wx0"),
                                   dy ? frac[1] : bin(b, DRK_OP_SUB, one, frac[1], "wy0"), "w");
    w = emit_like(b, DRK_OP_WHERE, 3, (drk_value_t *[]){in, w, zf}, "w_in", grid); /* [N, Ho, Wo] (the mask's shape) */
    /* flat index cy * W + cx, 0 outside (weight 0 there), as i64 [N, 1, Ho*Wo] expanded over C */
    drk_value_t *fi = bin(b, DRK_OP_ADD, bin(b, DRK_OP_MUL, cy, Wf, "row"), cx, "flat");
    fi = emit_like(b, DRK_OP_WHERE, 3, (drk_value_t *[]){in, fi, zf}, "flat_in", fi);
    drk_value_t *ii = emit_cast(b, fi, DRK_DT_I64, "flat_i");
    ii = reshape_to(b, ii, 3, (int64_t[]){0, 1, -1}, "flat_r");
    ii = emit_like(b, DRK_OP_EXPAND, 2, (drk_value_t *[]){ii, ishape}, "flat_e", ii);
    drk_value_t *v = emit_like(b, DRK_OP_GATHER_ELEMENTS, 2, (drk_value_t *[]){xf, ii}, "corner", x);
    drk_node_set_int(b->c->g, v->def, "axis", 2);
    v = reshape_to_v(b, v, oshape, "corner_r");
    drk_value_t *term = bin(b, DRK_OP_MUL, v, cast_like(b, unsq(b, w, 1, "w_b"), x, "w_x"), "term");
    acc = acc ? bin(b, DRK_OP_ADD, acc, term, "acc") : term;
  }
  return finish_as(b, acc);
}

/* Atan (7) with Cephes' atanf: |x| reduced to [0, tan(pi/8)] (x > tan(3pi/8): pi/2 + atan(-1/x);
 * x > tan(pi/8): pi/4 + atan((x-1)/(x+1))), then a degree-9 odd polynomial, the sign put back
 * (about 1e-7 relative in f32). Asin (7) = atan(x / sqrt(1 - x^2)), Acos (7) = pi/2 - asin(x). */
static drk_value_t *atan_of(nb_t *b, drk_value_t *x) {
  drk_value_t *ax = act(b, DRK_OP_ABS, x, "ax");
  drk_value_t *big = bool_op(b, DRK_OP_GREATER, ax, const_like(b, "t3pi8", 2.414213562373095, x), "big");
  drk_value_t *mid = bool_op(b, DRK_OP_GREATER, ax, const_like(b, "tpi8", 0.4142135623730950, x), "mid");
  drk_value_t *one = const_like(b, "one", 1.0, x);
  /* -1/ax where big (ax > 2.4 there), (ax-1)/(ax+1) where mid, else ax */
  drk_value_t *safe = emit_like(b, DRK_OP_WHERE, 3, (drk_value_t *[]){big, ax, one}, "safe", x);
  drk_value_t *rb = act(b, DRK_OP_NEG, act(b, DRK_OP_RECIPROCAL, safe, "inv"), "rb");
  drk_value_t *rm = bin(b, DRK_OP_DIV, bin(b, DRK_OP_SUB, ax, one, "am1"), bin(b, DRK_OP_ADD, ax, one, "ap1"), "rm");
  drk_value_t *r = emit_like(b, DRK_OP_WHERE, 3, (drk_value_t *[]){big, rb, emit_like(b, DRK_OP_WHERE, 3, (drk_value_t *[]){mid, rm, ax}, "r1", x)}, "r", x);
  drk_value_t *off = emit_like(b, DRK_OP_WHERE, 3, (drk_value_t *[]){big, const_like(b, "pi2", 1.5707963267948966, x),
                                                   emit_like(b, DRK_OP_WHERE, 3, (drk_value_t *[]){mid, const_like(b, "pi4", 0.7853981633974483, x),
                                                                                               const_like(b, "zero", 0.0, x)}, "off1", x)}, "off", x);
  static const double c[4] = {8.05374449538e-2, -1.38776856032e-1, 1.99777106478e-1, -3.33329491539e-1};
  drk_value_t *z = bin(b, DRK_OP_MUL, r, r, "z"), *p = const_like(b, "c0", c[0], x);
  for (int i = 1; i < 4; i++) p = bin(b, DRK_OP_ADD, bin(b, DRK_OP_MUL, p, z, "pz"), const_like(b, "ci", c[i], x), "p");
  drk_value_t *y = bin(b, DRK_OP_ADD, bin(b, DRK_OP_ADD, bin(b, DRK_OP_MUL, bin(b, DRK_OP_MUL, p, z, "pz2"), r, "pzr"), r, "poly"), off, "aty");
  return bin(b, DRK_OP_MUL, y, act(b, DRK_OP_SIGN, x, "sgn"), "atan");
}

static bool dc_atan(nb_t *b) { return finish_as(b, atan_of(b, b->in[0])); }

static bool dc_asin_acos(nb_t *b, bool acos) {
  drk_value_t *x = b->in[0], *one = const_like(b, "one", 1.0, x);
  drk_value_t *den = act(b, DRK_OP_SQRT, bin(b, DRK_OP_SUB, one, bin(b, DRK_OP_MUL, x, x, "xx"), "omx"), "den");
  drk_value_t *as = atan_of(b, bin(b, DRK_OP_DIV, x, den, "t"));
  if (acos) as = bin(b, DRK_OP_SUB, const_like(b, "pi2", 1.5707963267948966, x), as, "acos");
  return finish_as(b, as);
}
/* Asinh = sign(x) log(|x| + sqrt(x^2 + 1)), Acosh = log(x + sqrt(x^2 - 1)), Atanh = log((1 + x) /
 * (1 - x)) / 2 (9). */
static bool dc_inv_hyperbolic(nb_t *b, int which) {
  drk_value_t *x = b->in[0], *one = const_like(b, "one", 1.0, x), *y;
  if (which == 2) {
    y = bin(b, DRK_OP_MUL, act(b, DRK_OP_LOG, bin(b, DRK_OP_DIV, bin(b, DRK_OP_ADD, one, x, "opx"), bin(b, DRK_OP_SUB, one, x, "omx"), "q"), "lq"),
            const_like(b, "half", 0.5, x), "atanh");
  } else {
    drk_value_t *ax = which == 0 ? act(b, DRK_OP_ABS, x, "ax") : x;
    drk_value_t *r = act(b, DRK_OP_SQRT, bin(b, which == 0 ? DRK_OP_ADD : DRK_OP_SUB, bin(b, DRK_OP_MUL, x, x, "xx"), one, "xx1"), "r");
    y = act(b, DRK_OP_LOG, bin(b, DRK_OP_ADD, ax, r, "s"), "l");
    if (which == 0) y = bin(b, DRK_OP_MUL, y, act(b, DRK_OP_SIGN, x, "sgn"), "asinh");
  }
  return finish_as(b, y);
}
static bool dc_asinh(nb_t *b) { return dc_inv_hyperbolic(b, 0); }
static bool dc_acosh(nb_t *b) { return dc_inv_hyperbolic(b, 1); }
static bool dc_atanh(nb_t *b) { return dc_inv_hyperbolic(b, 2); }
static bool dc_asin(nb_t *b) { return dc_asin_acos(b, false); }
static bool dc_acos(nb_t *b) { return dc_asin_acos(b, true); }

/* LRN (1-13; the classic CNNs of the ONNX model zoo, AlexNet/GoogLeNet/CaffeNet, use it):
 * y = x / (bias + alpha / size * sum of x^2 over the channel window)^beta, the window
 * [c - floor((size-1)/2), c + ceil((size-1)/2)]. The window sum is an AveragePool (count_include_pad,
 * so sum / size) of x^2 seen as [N, 1, C, rest], shaped back with Shape(x). */
static bool dc_lrn(nb_t *b) {
  double alpha, beta, bias;
  int64_t size;
  bool has_size;
  if (!take_float(b, "alpha", 1e-4, &alpha, NULL) || !take_float(b, "beta", 0.75, &beta, NULL) ||
      !take_float(b, "bias", 1.0, &bias, NULL) || !take_int(b, "size", 0, &size, &has_size))
    return false;
  if (!has_size || size < 1) return fail(b, "'LRN' needs a positive 'size'");
  drk_value_t *x = b->in[0];
  drk_value_t *sq = bin(b, DRK_OP_MUL, x, x, "sq");
  drk_value_t *xs = emit(b, DRK_OP_SHAPE, 1, &x, "x_shape")->outputs[0];
  xs->dtype = DRK_DT_I64, drk_onnx_set_known(b->c, xs);
  drk_value_t *s4 = concat_of(b, 4, (drk_value_t *[]){slice_axis(b, xs, 0, 0, 1, 1, "n"), const_i64s(b, "one", 1, (int64_t[]){1}),
                                                      slice_axis(b, xs, 0, 1, 2, 1, "c"), const_i64s(b, "rest", 1, (int64_t[]){-1})},
                              0, "shape_4d");
  drk_value_t *v = reshape_to_v(b, sq, s4, "sq_4d"); /* [N, 1, C, rest] */
  drk_node_t *ap = emit(b, DRK_OP_AVERAGE_POOL, 1, &v, "win");
  int64_t pb = (size - 1) / 2, pe = size - 1 - pb;
  drk_node_set_ints(b->c->g, ap, "kernel_shape", 2, (int64_t[]){size, 1});
  drk_node_set_ints(b->c->g, ap, "pads", 4, (int64_t[]){pb, 0, pe, 0});
  drk_node_set_int(b->c->g, ap, "count_include_pad", 1);
  if (drk_onnx_is_known(b->c, x)) ap->outputs[0]->dtype = x->dtype, drk_onnx_set_known(b->c, ap->outputs[0]);
  drk_value_t *mean = reshape_to_v(b, ap->outputs[0], xs, "win_mean");
  drk_value_t *den = bin(b, DRK_OP_ADD, const_like(b, "bias", bias, x), bin(b, DRK_OP_MUL, mean, const_like(b, "alpha", alpha, x), "am"), "den");
  den = bin(b, DRK_OP_POW, den, const_like(b, "beta", beta, x), "den_b");
  return finish2(b, DRK_OP_DIV, x, den);
}

/* Upsample (7-9; the ONNX model zoo's older detection and super-resolution models): Resize with
 * asymmetric coordinates and nearest rounding down, as Resize-10 (rw_resize), the scales from the
 * attribute (7-8) or input #1 (9); mode nearest or linear ("bilinear" in some writers). */
static bool dc_upsample(nb_t *b) {
  const char *mode = peek_string(b, "mode", "nearest");
  take(b, "mode");
  bool nearest = !strcmp(mode, "nearest");
  if (!nearest && strcmp(mode, "linear") && strcmp(mode, "bilinear"))
    return fail(b, "unsupported 'Upsample' with mode '%s' (nearest or linear)", mode);
  drk_value_t *x = b->in[0], *scales = in_at(b, 1);
  if (b->c->opset < 9) {
    const Onnx__AttributeProto *a = take(b, "scales");
    if (!a || attr_type(a) != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS || !a->n_floats)
      return fail(b, "'Upsample' (opset %lld) needs the attribute 'scales'", (long long)b->c->opset);
    int64_t n = (int64_t)a->n_floats;
    scales = add_const(b, "scales", DRK_DT_F32, 1, &n, a->floats, sizeof(float) * a->n_floats);
  }
  if (!scales) return fail(b, "'Upsample' is missing its scales");
  b->op = DRK_OP_RESIZE;
  b->n_in = 0;
  set_input(b, 0, x);
  set_input(b, 2, scales);
  pend_string(b, "mode", nearest ? "nearest" : "linear");
  pend_string(b, "coordinate_transformation_mode", "asymmetric");
  if (nearest) pend_string(b, "nearest_mode", "floor");
  return true;
}

/* ImageScaler (1-9, experimental; the ONNX model zoo's Tiny YOLOv2): x * scale + bias[c], the
 * per-channel bias [C, 1, 1] against [N, C, H, W]. */
static bool dc_image_scaler(nb_t *b) {
  double scale;
  if (!take_float(b, "scale", 1.0, &scale, NULL)) return false;
  const Onnx__AttributeProto *bias = take(b, "bias");
  if (bias && (attr_type(bias) != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS || bias->n_floats > 65536))
    return fail(b, "'ImageScaler': attribute 'bias' must be FLOATS (one per channel)");
  drk_value_t *x = b->in[0], *y = bin(b, DRK_OP_MUL, x, const_like(b, "scale", scale, x), "scaled");
  if (!bias || !bias->n_floats) return finish2(b, DRK_OP_ADD, y, const_like(b, "zero", 0.0, x));
  int64_t C = (int64_t)bias->n_floats;
  double *bv = drk_arena_alloc(b->c->scratch, sizeof(double) * (size_t)C);
  for (int64_t i = 0; i < C; i++) bv[i] = bias->floats[i];
  return finish2(b, DRK_OP_ADD, y, tensor_like(b, "bias", 3, (int64_t[]){C, 1, 1}, bv, x));
}

/* ThresholdedRelu (10): x where x > alpha, else 0. Shrink (9): x - bias where x > lambd, x + bias
 * where x < -lambd, else 0. MeanVarianceNormalization (9-13): (x - mean) / sqrt(mean(x^2) - mean^2
 * ) over `axes` (default 0, 2, 3), as the ONNX function defines it (no epsilon). */
static bool dc_thresholded_relu(nb_t *b) {
  double alpha;
  if (!take_float(b, "alpha", 1.0, &alpha, NULL)) return false;
  drk_value_t *x = b->in[0], *zero = const_like(b, "zero", 0.0, x);
  drk_value_t *keep = bool_op(b, DRK_OP_GREATER, x, const_like(b, "alpha", alpha, x), "keep");
  return finish3(b, DRK_OP_WHERE, keep, x, zero);
}

static bool dc_shrink(nb_t *b) {
  double lambd, bias;
  if (!take_float(b, "lambd", 0.5, &lambd, NULL) || !take_float(b, "bias", 0.0, &bias, NULL)) return false;
  drk_value_t *x = b->in[0], *zero = const_like(b, "zero", 0.0, x), *bv = const_like(b, "bias", bias, x);
  drk_value_t *hi = bool_op(b, DRK_OP_GREATER, x, const_like(b, "lambd", lambd, x), "hi");
  drk_value_t *lo = bool_op(b, DRK_OP_LESS, x, const_like(b, "nlambd", -lambd, x), "lo");
  drk_value_t *neg = emit_like(b, DRK_OP_WHERE, 3, (drk_value_t *[]){lo, bin(b, DRK_OP_ADD, x, bv, "xpb"), zero}, "neg", x);
  return finish3(b, DRK_OP_WHERE, hi, bin(b, DRK_OP_SUB, x, bv, "xmb"), neg);
}

static bool dc_mvn(nb_t *b) {
  const Onnx__AttributeProto *axes;
  if (!take_ints(b, "axes", &axes)) return false;
  int64_t def[3] = {0, 2, 3}, na = axes ? (int64_t)axes->n_ints : 3;
  const int64_t *ax = axes ? axes->ints : def;
  if (na < 1 || na > DRK_ONNX_MAX_RANK) return fail(b, "'MeanVarianceNormalization' needs 1 to %d axes", DRK_ONNX_MAX_RANK);
  drk_value_t *x = b->in[0];
  drk_value_t *mean = reduce_mean_keep(b, x, na, ax, "mean");
  drk_value_t *msq = reduce_mean_keep(b, bin(b, DRK_OP_MUL, x, x, "sq"), na, ax, "mean_sq");
  drk_value_t *var = bin(b, DRK_OP_SUB, msq, bin(b, DRK_OP_MUL, mean, mean, "mean2"), "var");
  return finish2(b, DRK_OP_DIV, bin(b, DRK_OP_SUB, x, mean, "centered"), act(b, DRK_OP_SQRT, var, "std"));
}

/* Hardmax (1-13): 1 at the first maximum along `axis`, 0 elsewhere: Equal(positions along the
 * axis, ArgMax(keepdims)), the positions a CumSum of ones of x's shape. Before opset 13 the input
 * is seen as 2-D [prod(dims before axis), prod(the rest)] (Flatten, then back with Shape(x)). */
static bool dc_hardmax(nb_t *b) {
  int64_t axis;
  bool legacy = b->c->opset < 13;
  if (!take_int(b, "axis", legacy ? 1 : -1, &axis, NULL)) return false;
  drk_value_t *x = b->in[0], *v = x;
  if (legacy) {
    drk_node_t *f = emit(b, DRK_OP_FLATTEN, 1, &x, "flat");
    drk_node_set_int(b->c->g, f, "axis", axis);
    if (drk_onnx_is_known(b->c, x)) f->outputs[0]->dtype = x->dtype, drk_onnx_set_known(b->c, f->outputs[0]);
    v = f->outputs[0];
    axis = 1;
  }
  drk_node_t *am = emit(b, DRK_OP_ARG_MAX, 1, &v, "argmax");
  drk_node_set_int(b->c->g, am, "axis", axis);
  drk_node_set_int(b->c->g, am, "keepdims", 1);
  am->outputs[0]->dtype = DRK_DT_I64, drk_onnx_set_known(b->c, am->outputs[0]);
  drk_value_t *vs = emit(b, DRK_OP_SHAPE, 1, &v, "shape")->outputs[0];
  vs->dtype = DRK_DT_I64, drk_onnx_set_known(b->c, vs);
  drk_value_t *ones = emit_like(b, DRK_OP_EXPAND, 2, (drk_value_t *[]){scalar_i64(b, "one", 1), vs}, "ones", vs);
  drk_value_t *cs = emit_like(b, DRK_OP_CUM_SUM, 2, (drk_value_t *[]){ones, scalar_i64(b, "axis", axis)}, "count", ones);
  drk_value_t *pos = bin(b, DRK_OP_SUB, cs, scalar_i64(b, "one2", 1), "pos");
  drk_value_t *y = cast_like(b, bool_op(b, DRK_OP_EQUAL, pos, am->outputs[0], "is_max"), x, "onehot");
  if (legacy) {
    drk_value_t *xs = emit(b, DRK_OP_SHAPE, 1, &x, "x_shape")->outputs[0];
    xs->dtype = DRK_DT_I64, drk_onnx_set_known(b->c, xs);
    y = reshape_to_v(b, y, xs, "back");
  }
  return finish_as(b, y);
}

/* Celu (12): max(0, x) + min(0, alpha * (exp(x / alpha) - 1)). */
static bool dc_celu(nb_t *b) {
  double alpha;
  if (!take_float(b, "alpha", 1.0, &alpha, NULL)) return false;
  if (alpha == 0) return fail(b, "'Celu' with alpha = 0");
  drk_value_t *x = b->in[0], *zero = const_like(b, "zero", 0.0, x);
  drk_value_t *e = act(b, DRK_OP_EXP, bin(b, DRK_OP_DIV, x, const_like(b, "alpha", alpha, x), "xa"), "e");
  drk_value_t *neg = bin(b, DRK_OP_MUL, bin(b, DRK_OP_SUB, e, const_like(b, "one", 1.0, x), "em1"), const_like(b, "alpha2", alpha, x), "neg");
  drk_value_t *lo = emit_like(b, DRK_OP_MIN, 2, (drk_value_t *[]){neg, zero}, "lo", x);
  drk_value_t *hi = emit_like(b, DRK_OP_MAX, 2, (drk_value_t *[]){x, zero}, "hi", x);
  return finish2(b, DRK_OP_ADD, hi, lo);
}

/* ReduceL1 (axes an attribute before 18): ReduceSum(Abs(x)) with the same axes and keepdims. */
static bool dc_reduce_l1(nb_t *b) {
  drk_value_t *ax = in_at(b, 1);
  if (b->c->opset < 18) {
    const Onnx__AttributeProto *axes;
    if (!take_ints(b, "axes", &axes)) return false;
    ax = axes && axes->n_ints ? const_ints(b, "axes", axes) : NULL;
  }
  int64_t keep, noop;
  if (!take_int(b, "keepdims", 1, &keep, NULL) || !take_int(b, "noop_with_empty_axes", 0, &noop, NULL)) return false;
  drk_value_t *a = act(b, DRK_OP_ABS, b->in[0], "abs");
  drk_node_t *r = emit(b, DRK_OP_REDUCE_SUM, ax ? 2 : 1, (drk_value_t *[]){a, ax}, "l1");
  drk_node_set_int(b->c->g, r, "keepdims", keep);
  if (noop) drk_node_set_int(b->c->g, r, "noop_with_empty_axes", noop);
  if (drk_onnx_is_known(b->c, a)) r->outputs[0]->dtype = a->dtype, drk_onnx_set_known(b->c, r->outputs[0]);
  return finish_as(b, r->outputs[0]);
}

/* Tan = Sin / Cos; Sinh, Cosh = (e^x -+ e^-x) / 2. */
static bool dc_tan(nb_t *b) {
  drk_value_t *x = b->in[0];
  return finish2(b, DRK_OP_DIV, act(b, DRK_OP_SIN, x, "sin"), act(b, DRK_OP_COS, x, "cos"));
}
static bool dc_hyperbolic(nb_t *b, bool sinh) {
  drk_value_t *x = b->in[0];
  drk_value_t *ep = act(b, DRK_OP_EXP, x, "ep"), *en = act(b, DRK_OP_EXP, act(b, DRK_OP_NEG, x, "nx"), "en");
  return finish2(b, DRK_OP_MUL, bin(b, sinh ? DRK_OP_SUB : DRK_OP_ADD, ep, en, "pm"), const_like(b, "half", 0.5, x));
}
static bool dc_sinh(nb_t *b) { return dc_hyperbolic(b, true); }
static bool dc_cosh(nb_t *b) { return dc_hyperbolic(b, false); }

typedef struct decomp_entry {
  const char *name;
  int min_opset;
  rewrite_fn fn; /* sets b->op and b->in to the last node; every attribute must be taken */
} decomp_entry_t;

static const decomp_entry_t decomp_table[] = {
    {"RMSNormalization", 23, dc_rms_normalization},
    {"Attention", 23, dc_attention},
    {"RotaryEmbedding", 23, dc_rotary_embedding},
    {"Swish", 24, dc_swish},
    {"Mod", 10, dc_mod},
    {"LSTM", 7, dc_lstm},
    {"GRU", 7, dc_gru},
    {"RNN", 7, dc_plain_rnn},
    {"Celu", 12, dc_celu},
    {"Hardmax", 1, dc_hardmax},
    {"ThresholdedRelu", 10, dc_thresholded_relu},
    {"Shrink", 9, dc_shrink},
    {"MeanVarianceNormalization", 9, dc_mvn},
    {"ImageScaler", 1, dc_image_scaler},
    {"Upsample", 7, dc_upsample},
    {"LRN", 1, dc_lrn},
    {"Atan", 7, dc_atan},
    {"Asin", 7, dc_asin},
    {"Acos", 7, dc_acos},
    {"Asinh", 9, dc_asinh},
    {"Acosh", 9, dc_acosh},
    {"Atanh", 9, dc_atanh},
    {"GridSample", 16, dc_grid_sample},
    {"ScatterElements", 11, dc_scatter_elements},
    {"Scatter", 9, dc_scatter_elements},
    {"ReduceL1", 1, dc_reduce_l1},
    {"Tan", 7, dc_tan},
    {"Sinh", 9, dc_sinh},
    {"Cosh", 9, dc_cosh},
    {"SimplifiedLayerNormalization", 1, dc_ms_simplified_layer_norm}, /* ORT registers it in this domain */
};

/* com.microsoft ops imported as primitive ops (the rest: onnx_contrib.c). */
static const decomp_entry_t ms_decomp_table[] = {
    {"SkipLayerNormalization", 1, dc_ms_skip_layer_norm},
    {"SkipSimplifiedLayerNormalization", 1, dc_ms_skip_layer_norm},
    {"SimplifiedLayerNormalization", 1, dc_ms_simplified_layer_norm},
    {"FastGelu", 1, dc_ms_gelu},
    {"BiasGelu", 1, dc_ms_gelu},
    {"Gelu", 1, dc_ms_gelu},
    {"QuickGelu", 1, dc_ms_quick_gelu},
    {"BiasAdd", 1, dc_ms_bias_add},
    {"FusedMatMul", 1, dc_ms_fused_matmul},
};

static const decomp_entry_t *find_in(const decomp_entry_t *t, size_t n, const char *name) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(t[i].name, name) == 0) return &t[i];
  return NULL;
}

static const decomp_entry_t *find_decomp(const char *name) { return find_in(decomp_table, DRK_ARRAY_LEN(decomp_table), name); }

static const decomp_entry_t *find_ms_decomp(const char *name) {
  return find_in(ms_decomp_table, DRK_ARRAY_LEN(ms_decomp_table), name);
}

/* QuantizeLinear's `precision` (opset 23) and DequantizeLinear's `output_dtype` (opset 23):
 * the defaults (0: the scale's dtype) are the opset-21 forms. */
static bool rw_quantize(nb_t *b) {
  int64_t v;
  bool has;
  const char *an = b->op == DRK_OP_QUANTIZE_LINEAR ? "precision" : "output_dtype";
  if (b->opset < 23) return true;
  if (!take_int(b, an, 0, &v, &has)) return false;
  if (!v) return true;
  drk_value_t *s = in_at(b, 1);
  drk_dtype_t t;
  if (s && drk_onnx_is_known(b->c, s) && drk_dtype_from_onnx((int)v, &t) && t == s->dtype) return true;
  return fail(b, "unsupported attribute '%s' = %lld of '%s' (opset %lld): only the scale's own dtype", an, (long long)v,
              b->op_type, (long long)b->opset);
}

/* ---- the table ---- */

typedef struct op_entry {
  const char *name;
  int min_opset; /* lowest opset whose form is normalized exactly */
  rewrite_fn rw;
  const char *why; /* why older opsets are refused */
} op_entry_t;

static const op_entry_t op_table[] = {
    {"Add", 1, rw_legacy_broadcast, NULL}, {"Sub", 1, rw_legacy_broadcast, NULL},
    {"Mul", 1, rw_legacy_broadcast, NULL}, {"Div", 1, rw_legacy_broadcast, NULL},
    {"Pow", 1, rw_legacy_broadcast, NULL}, {"And", 1, rw_legacy_broadcast, NULL},
    {"Or", 1, rw_legacy_broadcast, NULL}, {"Xor", 1, rw_legacy_broadcast, NULL},
    {"Equal", 1, rw_legacy_broadcast, NULL}, {"Less", 1, rw_legacy_broadcast, NULL},
    {"Greater", 1, rw_legacy_broadcast, NULL}, {"LessOrEqual", 12, NULL, NULL},
    {"GreaterOrEqual", 12, NULL, NULL}, {"Neg", 1, NULL, NULL}, {"Abs", 1, NULL, NULL},
    {"Reciprocal", 1, NULL, NULL}, {"Sqrt", 1, NULL, NULL}, {"Exp", 1, NULL, NULL},
    {"Log", 1, NULL, NULL}, {"Erf", 9, NULL, NULL}, {"Tanh", 1, NULL, NULL},
    {"Sigmoid", 1, NULL, NULL}, {"Relu", 1, NULL, NULL}, {"LeakyRelu", 1, NULL, NULL},
    {"Elu", 1, NULL, NULL}, {"Selu", 1, rw_selu, NULL}, {"Gelu", 20, NULL, NULL},
    {"HardSigmoid", 1, NULL, NULL}, {"HardSwish", 14, NULL, NULL}, {"Softplus", 1, NULL, NULL},
    {"Softsign", 1, NULL, NULL}, {"Mish", 18, NULL, NULL}, {"Clip", 1, rw_clip, NULL},
    {"Min", 1, NULL, NULL}, {"Max", 1, NULL, NULL}, {"Mean", 1, NULL, NULL}, {"Sum", 1, NULL, NULL},
    {"Sin", 7, NULL, NULL}, {"Cos", 7, NULL, NULL}, {"Floor", 1, NULL, NULL}, {"Ceil", 1, NULL, NULL},
    {"Round", 11, NULL, NULL}, {"Sign", 9, NULL, NULL}, {"Not", 1, NULL, NULL},
    {"Where", 9, NULL, NULL}, {"IsNaN", 9, NULL, NULL}, {"IsInf", 10, NULL, NULL},
    {"Cast", 6, NULL, "'to' was a string"}, {"CastLike", 15, NULL, NULL},
    {"PRelu", 1, rw_prelu, NULL}, {"QuantizeLinear", 10, rw_quantize, NULL},
    {"DequantizeLinear", 10, rw_quantize, NULL}, {"MatMul", 1, NULL, NULL}, {"Gemm", 1, rw_legacy_broadcast, NULL},
    {"Conv", 1, NULL, NULL}, {"ConvTranspose", 1, NULL, NULL}, {"Einsum", 12, NULL, NULL},
    {"BatchNormalization", 1, rw_batchnorm, NULL}, {"InstanceNormalization", 1, NULL, NULL},
    {"LayerNormalization", 17, NULL, NULL},
    {"GroupNormalization", 21, NULL, "scale and bias were per group"},
    {"Softmax", 1, rw_softmax, NULL}, {"LogSoftmax", 1, rw_softmax, NULL},
    {"ReduceSum", 1, rw_reduce, NULL}, {"ReduceMean", 1, rw_reduce, NULL},
    {"ReduceMax", 1, rw_reduce, NULL}, {"ReduceMin", 1, rw_reduce, NULL},
    {"ReduceProd", 1, rw_reduce, NULL}, {"ReduceL2", 1, rw_reduce, NULL},
    {"ReduceSumSquare", 1, rw_reduce, NULL}, {"ReduceLogSumExp", 1, rw_reduce, NULL},
    {"ArgMax", 1, NULL, NULL}, {"ArgMin", 1, NULL, NULL}, {"CumSum", 11, NULL, NULL},
    {"TopK", 1, rw_topk, NULL}, {"MaxPool", 1, NULL, NULL}, {"AveragePool", 1, NULL, NULL},
    {"GlobalAveragePool", 1, NULL, NULL}, {"GlobalMaxPool", 1, NULL, NULL},
    {"Reshape", 1, rw_reshape, NULL}, {"Flatten", 1, NULL, NULL}, {"Squeeze", 1, rw_squeeze, NULL},
    {"Unsqueeze", 1, rw_squeeze, NULL}, {"Transpose", 1, NULL, NULL}, {"Concat", 1, rw_concat, NULL},
    {"Split", 1, rw_split, NULL}, {"Slice", 1, rw_slice, NULL}, {"Gather", 1, NULL, NULL},
    {"GatherElements", 11, NULL, NULL}, {"GatherND", 11, NULL, NULL}, {"ScatterND", 11, NULL, NULL},
    {"Expand", 8, NULL, NULL}, {"Tile", 6, NULL, "inputs were (input, tiles, axis)"},
    {"Pad", 1, rw_pad, NULL}, {"Resize", 10, rw_resize, NULL}, {"DepthToSpace", 1, NULL, NULL},
    {"SpaceToDepth", 1, NULL, NULL}, {"Trilu", 14, NULL, NULL}, {"OneHot", 9, NULL, NULL},
    {"Shape", 1, NULL, NULL}, {"Size", 1, NULL, NULL}, {"ConstantOfShape", 9, NULL, NULL},
    {"Range", 11, NULL, NULL}, {"Identity", 1, NULL, NULL}, {"Dropout", 1, rw_dropout, NULL},
};

static const op_entry_t *find_op(const char *name) {
  for (size_t i = 0; i < DRK_ARRAY_LEN(op_table); i++)
    if (strcmp(op_table[i].name, name) == 0) return &op_table[i];
  return NULL;
}

/* ---- attributes ---- */

static bool copy_attr(nb_t *b, drk_node_t *n, const Onnx__AttributeProto *a) {
  drk_graph_t *g = b->c->g;
  if (!a->name || !*a->name) return fail(b, "attribute without a name");
  /* names unknown to the op are the verifier's to report (graph_attrs.def); one the model's
   * opset does not have yet is refused here, where the opset is known */
  const drk_attr_spec_t *spec = drk_attr_spec_find(n->op, a->name);
  if (spec && spec->since >= DRK_ATTR_INTERNAL)
    return fail(b, "attribute '%s' of '%s' is drkc's own (written by its passes), not an ONNX attribute", a->name,
                b->op_type);
  if (spec && spec->since > b->opset)
    return fail(b, "attribute '%s' of '%s' exists from opset %d; the model imports opset %lld", a->name, b->op_type,
                spec->since, (long long)b->opset);
  if (a->ref_attr_name && *a->ref_attr_name)
    return fail(b, "unsupported attribute reference '%s' (function bodies)", a->name);
  Onnx__AttributeProto__AttributeType t = attr_type(a);
  drk_attr_t *x;
  switch (t) {
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT:
    drk_node_add_attr(g, n, a->name, DRK_ATTR_INT)->i = a->i;
    return true;
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT:
    drk_node_add_attr(g, n, a->name, DRK_ATTR_FLOAT)->f = a->f;
    return true;
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING:
    x = drk_node_add_attr(g, n, a->name, DRK_ATTR_STRING);
    x->s = drk_arena_strndup(g->arena, a->s.data ? (const char *)a->s.data : "", a->s.len);
    return true;
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS:
    x = drk_node_add_attr(g, n, a->name, DRK_ATTR_INTS);
    x->n = a->n_ints;
    x->ints = drk_arena_alloc(g->arena, sizeof(int64_t) * (a->n_ints + 1));
    if (a->n_ints) memcpy(x->ints, a->ints, sizeof(int64_t) * a->n_ints);
    return true;
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS:
    x = drk_node_add_attr(g, n, a->name, DRK_ATTR_FLOATS);
    x->n = a->n_floats;
    x->floats = drk_arena_alloc(g->arena, sizeof(double) * (a->n_floats + 1));
    for (size_t i = 0; i < a->n_floats; i++) x->floats[i] = a->floats[i];
    return true;
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS:
    x = drk_node_add_attr(g, n, a->name, DRK_ATTR_STRINGS);
    x->n = a->n_strings;
    x->strings = drk_arena_alloc(g->arena, sizeof(char *) * (a->n_strings + 1));
    for (size_t i = 0; i < a->n_strings; i++)
      x->strings[i] = drk_arena_strndup(g->arena, a->strings[i].data ? (const char *)a->strings[i].data : "",
                                        a->strings[i].len);
    return true;
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR: {
    if (!a->t) return fail(b, "attribute '%s' of '%s' has no tensor", a->name, b->op_type);
    drk_value_t *v = drk_onnx_tensor_value(b->c, a->t, hint(b, a->name), false, b->loc);
    if (!v) return false;
    drk_node_add_attr(g, n, a->name, DRK_ATTR_TENSOR)->tensor = v;
    return true;
  }
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH:
  case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPHS:
    return fail(b, "unsupported GRAPH attribute '%s' of '%s' (subgraphs: If/Loop/Scan)", a->name, b->op_type);
  default:
    return fail(b, "unsupported attribute '%s' of '%s' (type %d)", a->name, b->op_type, (int)t);
  }
}

/* ---- output dtypes that follow trivially from the op ---- */

static bool known_dtype(nb_t *b, drk_node_t *n, int i, drk_dtype_t *out) {
  drk_onnx_ctx_t *c = b->c;
  drk_value_t *x = n->n_inputs > 0 ? n->inputs[0] : NULL;
#define FROM(V)                                                    \
  do {                                                             \
    if (!drk_onnx_is_known(c, (V))) return false;                  \
    *out = (V)->dtype;                                             \
    return true;                                                   \
  } while (0)
  switch (n->op) {
  case DRK_OP_CAST: {
    int64_t to = drk_node_attr_int(n, "to", 0);
    return drk_dtype_from_onnx((int)to, out);
  }
  case DRK_OP_CAST_LIKE: FROM(n->inputs[1]);
  case DRK_OP_EQUAL: case DRK_OP_LESS: case DRK_OP_LESS_OR_EQUAL: case DRK_OP_GREATER:
  case DRK_OP_GREATER_OR_EQUAL: case DRK_OP_NOT: case DRK_OP_AND: case DRK_OP_OR: case DRK_OP_XOR:
  case DRK_OP_IS_NAN: case DRK_OP_IS_INF:
    *out = DRK_DT_BOOL;
    return true;
  case DRK_OP_ARG_MAX: case DRK_OP_ARG_MIN: case DRK_OP_SHAPE: case DRK_OP_SIZE:
    *out = DRK_DT_I64;
    return true;
  case DRK_OP_TOP_K: case DRK_OP_MAX_POOL:
    if (i == 1) {
      *out = DRK_DT_I64;
      return true;
    }
    FROM(x);
  case DRK_OP_DROPOUT:
    if (i == 1) {
      *out = DRK_DT_BOOL;
      return true;
    }
    FROM(x);
  case DRK_OP_LAYER_NORMALIZATION:
    if (i > 0) return drk_dtype_from_onnx((int)drk_node_attr_int(n, "stash_type", 1), out);
    FROM(x);
  case DRK_OP_QUANTIZE_LINEAR: {
    int64_t od = drk_node_attr_int(n, "output_dtype", 0);
    if (od) return drk_dtype_from_onnx((int)od, out);
    if (n->n_inputs > 2 && n->inputs[2]) FROM(n->inputs[2]);
    *out = DRK_DT_U8;
    return true;
  }
  case DRK_OP_DEQUANTIZE_LINEAR: FROM(n->inputs[1]);
  case DRK_OP_CONSTANT_OF_SHAPE: {
    const drk_attr_t *v = drk_node_attr(n, "value");
    *out = v && v->kind == DRK_ATTR_TENSOR ? v->tensor->dtype : DRK_DT_F32;
    return true;
  }
  case DRK_OP_ONE_HOT: FROM(n->inputs[2]);
  case DRK_OP_WHERE: FROM(n->inputs[1]);
  default:
    if (!x) return false;
    FROM(x);
  }
#undef FROM
}

static bool bind_output(nb_t *b, drk_node_t *n, int i) {
  drk_onnx_ctx_t *c = b->c;
  drk_value_t *v = n->outputs[i];
  const Onnx__ValueInfoProto *vi = drk_onnx_map_get(&c->infos, v->name);
  drk_dtype_t t;
  if (known_dtype(b, n, i, &t)) {
    v->dtype = t;
    drk_onnx_set_known(c, v);
  }
  if (vi && !drk_onnx_apply_type(c, v, vi, b->loc)) return false;
  return true;
}

/* ---- Constant ---- */

static bool import_constant(nb_t *b) {
  drk_onnx_ctx_t *c = b->c;
  if (b->np->n_output != 1 || !b->out_names[0]) return fail(b, "Constant must have one output");
  const char *name = b->out_names[0];
  drk_value_t *v = NULL;
  for (size_t i = 0; i < b->np->n_attribute && !v; i++) {
    const Onnx__AttributeProto *a = b->np->attribute[i];
    const char *an = a->name ? a->name : "";
    Onnx__AttributeProto__AttributeType t = attr_type(a);
    if (strcmp(an, "value") == 0) {
      if (t != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR || !a->t) return fail(b, "Constant 'value' is not a tensor");
      if (!(v = drk_onnx_tensor_value(c, a->t, name, true, b->loc))) return false;
    } else if (strcmp(an, "value_float") == 0 || strcmp(an, "value_floats") == 0) {
      bool one = an[11] == 0;
      if (t != (one ? ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT : ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS))
        return fail(b, "Constant '%s' has the wrong type", an);
      int64_t n = one ? 1 : (int64_t)a->n_floats;
      float *f = drk_arena_alloc(c->g->arena, sizeof(float) * (size_t)(n + 1));
      if (one) f[0] = a->f;
      else if (n) memcpy(f, a->floats, sizeof(float) * (size_t)n);
      v = drk_graph_add_const(c->g, name, DRK_DT_F32, drk_graph_shape_static(c->g, one ? 0 : 1, &n), f,
                              sizeof(float) * (size_t)n);
    } else if (strcmp(an, "value_int") == 0 || strcmp(an, "value_ints") == 0) {
      bool one = an[9] == 0;
      if (t != (one ? ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT : ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS))
        return fail(b, "Constant '%s' has the wrong type", an);
      int64_t n = one ? 1 : (int64_t)a->n_ints;
      int64_t *p = drk_arena_alloc(c->g->arena, sizeof(int64_t) * (size_t)(n + 1));
      if (one) p[0] = a->i;
      else if (n) memcpy(p, a->ints, sizeof(int64_t) * (size_t)n);
      v = drk_graph_add_const(c->g, name, DRK_DT_I64, drk_graph_shape_static(c->g, one ? 0 : 1, &n), p,
                              sizeof(int64_t) * (size_t)n);
    } else if (strncmp(an, "value_string", 12) == 0) {
      return fail(b, "unsupported Constant attribute '%s' (string tensors)", an);
    } else if (strcmp(an, "sparse_value") == 0) {
      return fail(b, "unsupported Constant attribute 'sparse_value' (sparse tensors)");
    }
  }
  if (!v) return fail(b, "Constant without a value");
  v->loc = b->loc;
  drk_onnx_set_known(c, v);
  if (!drk_onnx_map_put(&c->values, v->name, v)) return fail(b, "value '%s' is defined twice", name);
  return true;
}

/* ---- nodes ---- */

bool drk_onnx_import_node(drk_onnx_ctx_t *c, const Onnx__NodeProto *np, int index) {
  nb_t b;
  memset(&b, 0, sizeof b);
  b.c = c;
  b.np = np;
  b.loc = drk_loc_none;
  b.loc.file = c->file;
  b.loc.node_name = drk_graph_str(c->g, np->name ? np->name : "");
  b.loc.node_index = index;
  b.op_type = np->op_type ? np->op_type : "";
  b.opset = c->opset;
  const char *domain = np->domain && *np->domain ? np->domain : "ai.onnx";
  const decomp_entry_t *ms = NULL;
  if (strcmp(domain, "com.microsoft") == 0 && drk_onnx_domain_opset(c, domain) >= 0) {
    if (!(ms = find_ms_decomp(b.op_type))) return drk_onnx_import_contrib(c, np, b.loc);
    domain = "ai.onnx"; /* imported as ai.onnx ops below */
  }
  if (strcmp(domain, "ai.onnx") != 0) {
    int64_t dv = drk_onnx_domain_opset(c, domain);
    if (dv < 0) return fail(&b, "unsupported op '%s' (domain '%s', not imported by the model)", b.op_type, domain);
    return fail(&b, "unsupported op '%s' (domain '%s', opset %lld)", b.op_type, domain, (long long)dv);
  }
  if (!*b.op_type) return fail(&b, "node without an op_type");
  if (np->n_input > 4096 || np->n_output > 4096) return fail(&b, "node has too many inputs or outputs");

  /* Outputs: trailing empty names are omitted optional outputs; inner ones get fresh names. */
  b.n_out = (int)np->n_output;
  while (b.n_out > 0 && (!np->output[b.n_out - 1] || !*np->output[b.n_out - 1])) b.n_out--;
  if (b.n_out == 0) return fail(&b, "node '%s' has no outputs", b.op_type);
  b.out_names = drk_arena_alloc(c->scratch, sizeof(char *) * (size_t)b.n_out);
  for (int i = 0; i < b.n_out; i++) {
    const char *o = np->output[i];
    b.out_names[i] = o && *o ? o : drk_onnx_fresh_name(c, b.op_type);
    if (drk_onnx_map_get(&c->values, b.out_names[i]))
      return fail(&b, "value '%s' is defined twice", b.out_names[i]);
  }

  b.used = drk_arena_alloc(c->scratch, sizeof(bool) * (np->n_attribute + 1));
  for (size_t i = 0; i < np->n_attribute; i++) /* ONNX Runtime refuses these; the last one would win here */
    for (size_t j = 0; j < i; j++)
      if (np->attribute[i]->name && np->attribute[j]->name && strcmp(np->attribute[i]->name, np->attribute[j]->name) == 0)
        return fail(&b, "duplicate attribute '%s' of '%s'", np->attribute[i]->name, b.op_type);
  if (strcmp(b.op_type, "Constant") == 0) return import_constant(&b);

  const op_entry_t *e = ms ? NULL : find_op(b.op_type);
  const decomp_entry_t *dc = ms ? ms : e ? NULL : find_decomp(b.op_type);
  if (dc && !ms && c->opset < dc->min_opset) dc = NULL; /* not an op of that opset */
  if (!dc && (!e || !drk_op_from_name(b.op_type, strlen(b.op_type), &b.op)))
    return fail(&b, "unsupported op '%s' (domain 'ai.onnx', opset %lld)", b.op_type, (long long)c->opset);
  if (e && c->opset < e->min_opset) {
    char why[160];
    snprintf(why, sizeof why, "drkc reads its form from opset %d%s%s", e->min_opset, e->why ? "; before, " : "",
             e->why ? e->why : "");
    return unsupported_version(&b, why);
  }

  size_t n_in = np->n_input;
  while (n_in > 0 && (!np->input[n_in - 1] || !*np->input[n_in - 1])) n_in--;
  for (size_t i = 0; i < n_in; i++) {
    const char *nm = np->input[i];
    drk_value_t *v = NULL;
    if (nm && *nm && !(v = drk_onnx_map_get(&c->values, nm)))
      return fail(&b, "input '%s' of '%s' is not defined by an earlier node, input or initializer", nm, b.op_type);
    DRK_VEC_PUSH(c->scratch, b.in, b.n_in, b.cap_in, v);
  }
  if (b.n_in == 0 || !b.in[0]) return fail(&b, "'%s' is missing its first input", b.op_type);
  take(&b, "consumed_inputs"); /* a pre-opset-6 memory hint without semantics */
  for (size_t i = 0; i < np->n_attribute; i++) {
    Onnx__AttributeProto__AttributeType t = attr_type(np->attribute[i]);
    if (t == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH || t == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPHS)
      return fail(&b, "unsupported GRAPH attribute '%s' of '%s' (subgraphs: If/Loop/Scan)",
                  np->attribute[i]->name ? np->attribute[i]->name : "", b.op_type);
  }
  if (dc) {
    if (!dc->fn(&b)) return false;
    for (size_t i = 0; i < np->n_attribute; i++)
      if (!b.used[i])
        return fail(&b, "unsupported attribute '%s' of '%s' (opset %lld)", np->attribute[i]->name ? np->attribute[i]->name : "",
                    b.op_type, (long long)c->opset);
  } else if (e->rw && !e->rw(&b)) {
    return false;
  }

  const drk_op_info_t *info = drk_op_info(b.op);
  while (b.n_in > 0 && !b.in[b.n_in - 1]) b.n_in--;
  if ((int)b.n_in < info->min_inputs || (info->max_inputs >= 0 && (int)b.n_in > info->max_inputs))
    return fail(&b, "'%s' has %zu inputs, expected %d to %d", b.op_type, b.n_in, info->min_inputs,
                info->max_inputs);
  for (int i = 0; i < info->min_inputs; i++)
    if (!b.in[i]) return fail(&b, "'%s' is missing required input #%d", b.op_type, i);
  if (b.n_out < info->min_outputs || (info->max_outputs >= 0 && b.n_out > info->max_outputs)) {
    if (b.n_out > info->max_outputs)
      return fail(&b, "unsupported op '%s' (domain 'ai.onnx', opset %lld) with %d outputs (drkc supports %d)",
                  b.op_type, (long long)c->opset, b.n_out, info->max_outputs);
    return fail(&b, "'%s' has %d outputs, expected at least %d", b.op_type, b.n_out, info->min_outputs);
  }

  const char **names = b.out_names;
  if (b.reshape_to) {
    names = drk_arena_alloc(c->scratch, sizeof(char *));
    names[0] = drk_onnx_fresh_name(c, hint(&b, "2d"));
  }
  drk_node_t *n = drk_graph_add_node(c->g, b.op, (int)b.n_in, b.in, b.n_out, names, b.loc);
  for (size_t i = 0; i < np->n_attribute; i++)
    if (!b.used[i] && !copy_attr(&b, n, np->attribute[i])) return false;
  for (int i = 0; i < b.n_pend; i++) {
    const pending_attr_t *p = &b.pend[i];
    drk_attr_t *a = drk_node_add_attr(c->g, n, p->name, p->kind);
    a->i = p->i;
    a->f = p->f;
    a->s = p->s ? drk_graph_str(c->g, p->s) : NULL;
  }
  if (n->op == DRK_OP_CAST) {
    int64_t to = drk_node_attr_int(n, "to", 0);
    drk_dtype_t t;
    if (!drk_dtype_from_onnx((int)to, &t))
      return fail(&b, "unsupported dtype %s as 'to' of Cast", drk_onnx_dtype_name((int)to));
  }
  if (b.reshape_to) {
    drk_onnx_map_put(&c->values, n->outputs[0]->name, n->outputs[0]);
    if (!bind_output(&b, n, 0)) return false;
    drk_value_t *ins[2] = {n->outputs[0], b.reshape_to};
    n = drk_graph_add_node(c->g, DRK_OP_RESHAPE, 2, ins, 1, b.out_names, b.loc);
  }
  for (int i = 0; i < n->n_outputs; i++) {
    if (!drk_onnx_map_put(&c->values, n->outputs[i]->name, n->outputs[i]))
      return fail(&b, "value '%s' is defined twice", n->outputs[i]->name);
    if (!bind_output(&b, n, i)) return false;
  }
  return true;
}
