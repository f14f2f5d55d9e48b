/* BatchNorm folding: Conv(x, W, b) -> BatchNormalization(scale, B, mean, var, epsilon)
 * becomes one Conv(x, W', b') with, per output channel c,
 *   s = scale[c] / sqrt(var[c] + epsilon),  W'[c] = W[c] * s,  b'[c] = (b[c] - mean[c]) * s + B[c]
 * (b = 0 when the Conv has no bias). The new weights are computed in double and rounded once
 * to the weights' dtype. Applies when W, b and the four BN parameters are constants, the BN
 * is the Conv result's only user and the graph does not output the Conv result, and the BN
 * is in inference form (one result). The BN result keeps its name: it becomes the Conv's.
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
  if (out_n_folded) *out_n_folded = folded;
  if (folded) drk_pass_eliminate_dead(g);
  return true;
}
