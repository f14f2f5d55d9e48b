/* BatchNorm folding: Conv(x, W, b) -> BatchNormalization(scale, B, mean, var, epsilon)
 * becomes one Conv(x, W', b') with, per output channel c,
 *   s = scale[c] / sqrt(var[c] + epsilon),  W'[c] = W[c] * s,  b'[c] = (b[c] - mean[c]) * s + B[c]
 * (b = 0 when the Conv has no bias). The new weights are computed in double and rounded once
 * to the weights' dtype. Applies when W, b and the four BN parameters are constants, the BN
 * is the Conv result's only user and the graph does not output the Conv result, and the BN
 * is in inference form (one result). The BN result keeps its name: it becomes the Conv's.
 * A BN left over (no Conv to fold into) becomes x * a + b (to_affine below).
 *
 * Requires: shapes inferred. Guarantees: the graph computes the same function up to one
 * rounding of the folded weights; folded BN nodes are dead (drk_pass_eliminate_dead removes
 * them and the old constants). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "passes.h"
#include "ir/tensor.h"

static int count_uses(const drk_graph_t *g, const drk_value_t *v) {
  int n = 0;
  for (size_t i = 0; i < g->n_nodes; i++) {
    const drk_node_t *u = g->nodes[i];
    if (u->dead) continue;
    for (int j = 0; j < u->n_inputs; j++) n += u->inputs[j] == v;
  }
  for (size_t i = 0; i < g->n_outputs; i++) n += 2 * (g->outputs[i] == v); /* an output can't fold */
  return n;
}

static bool is_const_vec(const drk_value_t *v, int64_t n) {
  return v && v->kind == DRK_VALUE_CONST && v->data && v->shape.rank == 1 && v->shape.dims[0].size == n &&
         drk_dtype_is_float(v->dtype);
}

static double elem(const drk_value_t *v, int64_t i) {
  drk_tensor_t t = {.dtype = v->dtype, .data = (void *)v->data, .nbytes = v->nbytes};
  return drk_tensor_get_f64(&t, i);
}

static void store(drk_dtype_t dt, void *data, size_t nbytes, int64_t i, double x) {
  drk_tensor_t t = {.dtype = dt, .data = data, .nbytes = nbytes};
  drk_tensor_set_f64(&t, i, x);
}

static bool fold_one(drk_graph_t *g, drk_node_t *conv, drk_node_t *bn) {
  drk_value_t *w = conv->inputs[1], *b = conv->n_inputs > 2 ? conv->inputs[2] : NULL;
  if (!w || w->kind != DRK_VALUE_CONST || !w->data || w->shape.rank < 3 || !drk_dtype_is_float(w->dtype)) return false;
  int64_t oc = w->shape.dims[0].size, per = 1;
  for (int i = 1; i < w->shape.rank; i++) per *= w->shape.dims[i].size;
  if (oc <= 0 || per <= 0) return false;
  if (b && !is_const_vec(b, oc)) return false;
  for (int i = 1; i < 5; i++)
    if (!is_const_vec(bn->inputs[i], oc)) return false;
  double eps = drk_node_attr_float(bn, "epsilon", 1e-5);
  bool f32 = w->dtype == DRK_DT_F32;
  double *nw = f32 ? NULL : malloc(sizeof(double) * (size_t)(oc * per)), *nb = malloc(sizeof(double) * (size_t)oc);
  if ((!f32 && !nw) || !nb) {
    free(nw), free(nb);
    return false;
  }
  drk_dtype_t wt = w->dtype, bt = b ? b->dtype : w->dtype;
  size_t wbytes = (size_t)(oc * per) * (size_t)drk_dtype_bits(wt) / 8, bbytes = (size_t)oc * (size_t)drk_dtype_bits(bt) / 8;
  void *wd = drk_arena_alloc(g->arena, wbytes), *bd = drk_arena_alloc(g->arena, bbytes);
  /* f32 weights (the exporters' dtype; the precision pass runs later) directly: the element
   * accessors' dtype switch per element was most of a ResNet-50 compile's front half */
  const float *wf = w->data;
  for (int64_t c = 0; c < oc; c++) {
    double s = elem(bn->inputs[1], c) / sqrt(elem(bn->inputs[4], c) + eps);
    if (f32)
      for (int64_t k = 0; k < per; k++) ((float *)wd)[c * per + k] = (float)((double)wf[c * per + k] * s);
    else
      for (int64_t k = 0; k < per; k++) nw[c * per + k] = elem(w, c * per + k) * s;
    nb[c] = ((b ? elem(b, c) : 0.0) - elem(bn->inputs[3], c)) * s + elem(bn->inputs[2], c);
  }
  for (int64_t i = 0; !f32 && i < oc * per; i++) store(wt, wd, wbytes, i, nw[i]);
  for (int64_t c = 0; c < oc; c++) store(bt, bd, bbytes, c, nb[c]);
  free(nw), free(nb);
  /* a weight two Convs share (an exporter deduplicating identical initializers) is folded
   * once per Conv: unique names */
  const char *wn = drk_graph_unique_namef(g, "%s_bnfold", w->name),
             *bn_name = drk_graph_unique_namef(g, "%s_bnfold_bias", bn->outputs[0]->name);
  drk_value_t *w2 = drk_graph_add_const(g, wn, wt, w->shape, wd, wbytes);
  drk_value_t *b2 = drk_graph_add_const(g, bn_name, bt, drk_graph_shape_static(g, 1, &oc), bd, bbytes);
  w2->loc = w->loc, b2->loc = bn->loc;
  drk_value_t **ins = drk_arena_alloc(g->arena, sizeof *ins * 4);
  ins[0] = conv->inputs[0], ins[1] = w2, ins[2] = b2, ins[3] = NULL;
  conv->inputs = ins;
  conv->n_inputs = 3;
  /* the BN result becomes the Conv's result */
  drk_value_t *y = bn->outputs[0];
  y->def = conv;
  y->def_index = 0;
  conv->outputs[0] = y;
  bn->dead = true;
  return true;
}

/* A BatchNormalization no Conv takes (DenseNet's pre-activation BN of every concatenation,
 * a BN after a pool or an Add) becomes y = x * a + b with a = scale / sqrt(var + eps) and
 * b = B - mean * a per channel (computed in double, stored in x's dtype as [C, 1, ...]
 * constants): two elementwise ops that fuse with their neighbours and, unlike the BN node,
 * follow a channels-last region through the layout pass (whose elementwise rule re-lays the
 * constants), so a DenseNet's concatenations stay NHWC instead of being transposed back to
 * NCHW for every BN. Applies to the inference form with four constant [C] parameters and a
 * float input of static rank >= 2 with C at axis 1. */
static bool to_affine(drk_graph_t *g, drk_node_t *bn) {
  drk_value_t *x = bn->inputs[0], *y = bn->outputs[0];
  if (!x || x->shape.rank < 2 || x->shape.dims[1].sym || !drk_dtype_is_float(x->dtype) || x->dtype != y->dtype) return false;
  int64_t C = x->shape.dims[1].size;
  if (C < 1) return false;
  for (int i = 1; i < 5; i++)
    if (bn->n_inputs <= i || !is_const_vec(bn->inputs[i], C)) return false;
  double eps = drk_node_attr_float(bn, "epsilon", 1e-5);
  drk_dtype_t dt = x->dtype;
  size_t bytes = (size_t)C * (size_t)drk_dtype_bits(dt) / 8;
  void *ad = drk_arena_alloc(g->arena, bytes), *bd = drk_arena_alloc(g->arena, bytes);
  for (int64_t c = 0; c < C; c++) {
    double a = elem(bn->inputs[1], c) / sqrt(elem(bn->inputs[4], c) + eps);
    store(dt, ad, bytes, c, a);
    store(dt, bd, bytes, c, elem(bn->inputs[2], c) - elem(bn->inputs[3], c) * a);
  }
  int r = x->shape.rank;
  int64_t cd[8] = {C, 1, 1, 1, 1, 1, 1, 1};
  if (r - 1 > 8) return false;
  drk_shape_t cs = drk_graph_shape_static(g, r - 1, cd);
  drk_value_t *a = drk_graph_add_const(g, drk_graph_unique_namef(g, "%s_bn_scale", y->name), dt, cs, ad, bytes);
  drk_value_t *b = drk_graph_add_const(g, drk_graph_unique_namef(g, "%s_bn_shift", y->name), dt, cs, bd, bytes);
  a->loc = b->loc = bn->loc;
  const char *mn = drk_graph_unique_namef(g, "%s_bn_mul", y->name), *an = drk_graph_unique_namef(g, "%s_bn_add", y->name);
  drk_node_t *mul = drk_graph_add_node(g, DRK_OP_MUL, 2, (drk_value_t *[]){x, a}, 1, &mn, bn->loc);
  mul->outputs[0]->dtype = dt, mul->outputs[0]->shape = x->shape;
  drk_node_t *add = drk_graph_add_node(g, DRK_OP_ADD, 2, (drk_value_t *[]){mul->outputs[0], b}, 1, &an, bn->loc);
  add->outputs[0]->dtype = dt, add->outputs[0]->shape = y->shape;
  drk_node_take_result(bn, add);
  return true;
}

static drk_rewrite_t affine_rewrite(drk_graph_t *g, drk_node_t *n, void *ctx) {
  (void)ctx;
  if (n->dead || n->op != DRK_OP_BATCH_NORMALIZATION || n->n_outputs != 1) return DRK_REWRITE_KEPT;
  return to_affine(g, n) ? DRK_REWRITE_DONE : DRK_REWRITE_KEPT;
}

bool drk_pass_fold_batchnorm(drk_graph_t *g, size_t *out_n_folded) {
  size_t folded = 0;
  for (size_t i = 0; i < g->n_nodes; i++) {
    drk_node_t *bn = g->nodes[i];
    if (bn->dead || bn->op != DRK_OP_BATCH_NORMALIZATION || bn->n_outputs != 1) continue;
    drk_value_t *x = bn->inputs[0];
    if (!x || x->kind != DRK_VALUE_NODE || !x->def || x->def->op != DRK_OP_CONV || x->def->dead) continue;
    if (count_uses(g, x) != 1 || x->dtype != bn->outputs[0]->dtype) continue;
    folded += fold_one(g, x->def, bn);
  }
  /* the BNs left (no Conv to fold into) as x * a + b (the new nodes land right after each) */
  size_t affine = 0;
  if (!drk_graph_rewrite_nodes(g, affine_rewrite, NULL, &affine)) return false;
  if (out_n_folded) *out_n_folded = folded;
  if (folded || affine) drk_pass_eliminate_dead(g);
  return true;
}
