/* Pointwise convolutions as matrix products: a Conv with 1x1 kernels, unit strides, no
 * padding and one group computes, per image n, Y[n] (OC x S) = W (OC x C) . X[n] (C x S)
 * with S the spatial size; in NCHW both X[n] and Y[n] are those row-major matrices. It
 * becomes Reshape(x, [N, C, S]) -> MatMul(W as [OC, C], .) -> Add(., bias as [OC, 1]) ->
 * Reshape(., y's shape), which the matmul lowering runs on its best kernel (the sm_90a
 * TMA + wgmma one where the sizes allow; Conv's implicit GEMM gathers its A operand
 * element by element), and whose bias/activation/residual epilogue fuses like any MatMul's.
 * The reshapes are views (no copies); the weights are the same bytes.
 *
 * Requires: shapes inferred and static on the Conv. Guarantees: the same function (the
 * products and sums are the same; the summation order is the matmul kernel's); the Conv's
 * result value keeps its name and becomes the last Reshape's. */
#include <stdlib.h>
#include <string.h>

#include "passes.h"

static bool ints_all(const drk_node_t *n, const char *name, int64_t want, int count) {
  size_t cnt = 0;
  const int64_t *v = drk_node_attr_ints(n, name, &cnt);
  if (!v) return true; /* absent: the default (1 for strides/dilations, 0 for pads) */
  if ((int)cnt != count) return false;
  for (size_t i = 0; i < cnt; i++)
    if (v[i] != want) return false;
  return true;
}

static bool pointwise(const drk_node_t *n) {
  if (n->op != DRK_OP_CONV || n->dead || n->n_outputs != 1) return false;
  const drk_value_t *x = n->inputs[0], *w = n->inputs[1], *b = n->n_inputs > 2 ? n->inputs[2] : NULL;
  const drk_value_t *y = n->outputs[0];
  if (!x || !w || w->kind != DRK_VALUE_CONST || !w->data || (b && (b->kind != DRK_VALUE_CONST || !b->data))) return false;
  int r = x->shape.rank;
  if (r < 3 || w->shape.rank != r || y->shape.rank != r || !drk_dtype_is_float(x->dtype)) return false;
  for (int i = 0; i < r; i++)
    if (x->shape.dims[i].sym || x->shape.dims[i].size < 1 || y->shape.dims[i].sym || y->shape.dims[i].size < 1 ||
        w->shape.dims[i].sym)
      return false;
  for (int i = 2; i < r; i++)
    if (w->shape.dims[i].size != 1 || x->shape.dims[i].size != y->shape.dims[i].size) return false;
  if (w->shape.dims[1].size != x->shape.dims[1].size || drk_node_attr_int(n, "group", 1) != 1) return false;
  const char *ap = drk_node_attr_string(n, "auto_pad", "NOTSET");
  if (strcmp(ap, "NOTSET") != 0 && strcmp(ap, "VALID") != 0) return false;
  return ints_all(n, "strides", 1, r - 2) && ints_all(n, "pads", 0, 2 * (r - 2));
}

static drk_value_t *shape_const(drk_graph_t *g, const char *name, int n, const int64_t *dims) {
  int64_t len = n;
  return drk_graph_add_const_copy(g, name, DRK_DT_I64, drk_graph_shape_static(g, 1, &len), dims,
                                  sizeof(int64_t) * (size_t)n);
}

static drk_value_t *add1(drk_graph_t *g, drk_op_t op, drk_value_t *a, drk_value_t *b, const char *name,
                         const drk_value_t *like, int rank, const int64_t *dims, drk_loc_t loc) {
  drk_node_t *m = drk_graph_add_node(g, op, 2, (drk_value_t *[]){a, b}, 1, &name, loc);
  m->outputs[0]->dtype = like->dtype;
  m->outputs[0]->shape = drk_graph_shape_static(g, rank, dims);
  return m->outputs[0];
}

static void rewrite(drk_graph_t *g, drk_node_t *n) {
  drk_value_t *x = n->inputs[0], *w = n->inputs[1], *b = n->n_inputs > 2 ? n->inputs[2] : NULL, *y = n->outputs[0];
  int r = x->shape.rank;
  int64_t N = x->shape.dims[0].size, C = x->shape.dims[1].size, OC = w->shape.dims[0].size, S = 1;
  for (int i = 2; i < r; i++) S *= x->shape.dims[i].size;
  const char *base = y->name;
  drk_value_t *w2 = drk_graph_add_const(g, drk_graph_unique_namef(g, "%s_w2d", base), w->dtype,
                                        drk_graph_shape_static(g, 2, (int64_t[]){OC, C}), w->data, w->nbytes);
  drk_value_t *xs = add1(g, DRK_OP_RESHAPE, x, shape_const(g, drk_graph_unique_namef(g, "%s_xshape", base), 3, (int64_t[]){N, C, S}),
                         drk_graph_unique_namef(g, "%s_x3d", base), x, 3, (int64_t[]){N, C, S}, n->loc);
  drk_value_t *mm = add1(g, DRK_OP_MATMUL, w2, xs, drk_graph_unique_namef(g, "%s_mm", base), y, 3,
                         (int64_t[]){N, OC, S}, n->loc);
  if (b) {
    drk_value_t *b2 = drk_graph_add_const(g, drk_graph_unique_namef(g, "%s_b2d", base), b->dtype,
                                          drk_graph_shape_static(g, 2, (int64_t[]){OC, 1}), b->data, b->nbytes);
    mm = add1(g, DRK_OP_ADD, mm, b2, drk_graph_unique_namef(g, "%s_bias", base), y, 3, (int64_t[]){N, OC, S}, n->loc);
  }
  int64_t yd[8];
  for (int i = 0; i < r; i++) yd[i] = y->shape.dims[i].size;
  drk_value_t *ys = shape_const(g, drk_graph_unique_namef(g, "%s_yshape", base), r, yd);
  const char *tmp = drk_graph_unique_namef(g, "%s_y", base);
  drk_node_t *rs = drk_graph_add_node(g, DRK_OP_RESHAPE, 2, (drk_value_t *[]){mm, ys}, 1, &tmp, n->loc);
  /* the Conv's result (its name, its users, maybe a graph output) becomes the Reshape's */
  rs->outputs[0] = y;
  y->def = rs;
  y->def_index = 0;
  n->dead = true;
}

bool drk_pass_conv_to_matmul(drk_graph_t *g, size_t *out_n_rewritten) {
  size_t done = 0, n_orig = g->n_nodes;
  if (out_n_rewritten) *out_n_rewritten = 0;
  if (!n_orig) return true;
  drk_node_t **orig = malloc(sizeof *orig * (n_orig + 1));
  if (!orig) return false;
  memcpy(orig, g->nodes, sizeof *orig * n_orig);
  g->n_nodes = 0; /* nodes are pushed again in order, the new ones in place of their Conv */
  for (size_t i = 0; i < n_orig; i++) {
    drk_node_t *n = orig[i];
    if (pointwise(n) && n->outputs[0]->shape.rank <= 8) {
      rewrite(g, n);
      done++;
      continue;
    }
    DRK_VEC_PUSH(g->arena, g->nodes, g->n_nodes, g->cap_nodes, n);
  }
  free(orig);
  if (out_n_rewritten) *out_n_rewritten = done;
  return true;
}
