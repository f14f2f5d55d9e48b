/* Pointwise and patch convolutions as matrix products: a Conv with 1x1 kernels, unit strides, no
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

/* A 2-D Conv over non-overlapping patches (ViT's patch embedding: kernel 16, stride 16):
 * kernel == strides, no padding, unit dilations, one group, constant weights, the input's H
 * and W whole multiples of the kernel (so every pixel is in exactly one patch), kernel > 1x1
 * (1x1 is pointwise's). Its im2col is a pure permutation of the input. */
static bool patches(const drk_node_t *n) {
  if (n->op != DRK_OP_CONV || n->dead || n->n_outputs != 1) return false;
  const drk_value_t *x = n->inputs[0], *w = n->inputs[1], *b = n->n_inputs > 2 ? n->inputs[2] : NULL;
  const drk_value_t *y = n->outputs[0];
  if (!x || !w || w->kind != DRK_VALUE_CONST || !w->data || (b && (b->kind != DRK_VALUE_CONST || !b->data))) return false;
  if (x->shape.rank != 4 || w->shape.rank != 4 || y->shape.rank != 4 || !drk_dtype_is_float(x->dtype)) return false;
  for (int i = 0; i < 4; i++)
    if (x->shape.dims[i].sym || x->shape.dims[i].size < 1 || y->shape.dims[i].sym || y->shape.dims[i].size < 1 ||
        w->shape.dims[i].sym || w->shape.dims[i].size < 1)
      return false;
  int64_t kh = w->shape.dims[2].size, kw = w->shape.dims[3].size;
  if (kh * kw == 1 || w->shape.dims[1].size != x->shape.dims[1].size || drk_node_attr_int(n, "group", 1) != 1) return false;
  if (x->shape.dims[2].size != kh * y->shape.dims[2].size || x->shape.dims[3].size != kw * y->shape.dims[3].size) return false;
  const char *ap = drk_node_attr_string(n, "auto_pad", "NOTSET");
  if (strcmp(ap, "NOTSET") != 0 && strcmp(ap, "VALID") != 0) return false;
  size_t cnt = 0;
  const int64_t *st = drk_node_attr_ints(n, "strides", &cnt);
  if (!st || cnt != 2 || st[0] != kh || st[1] != kw) return false;
  const int64_t *ks = drk_node_attr_ints(n, "kernel_shape", &cnt);
  if (ks && (cnt != 2 || ks[0] != kh || ks[1] != kw)) return false;
  return ints_all(n, "dilations", 1, 2) && ints_all(n, "pads", 0, 4);
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
  drk_node_take_result(n, rs);
}

/* Non-overlapping patches: Reshape(x, [N, C, OH, KH, OW, KW]) -> Transpose(0, 2, 4, 1, 3, 5)
 * -> Reshape([N, S, K]) (the im2col, one copy of the input) -> MatMul(., W^T [K, OC], stored
 * transposed at compile time) -> Add(bias [OC]) -> Reshape([N, OH, OW, OC]) (a view: the
 * product is channels-last) -> Transpose(0, 3, 1, 2). The rank-4 NHWC -> NCHW Transpose is
 * one the layout pass tracks, so a channels-last consumer (ConvNeXt's depthwise conv after its
 * downsampling patch conv) reads the product directly.
 * The weight is the B operand, [K, OC] with OC the N dimension, so the sm_90a TMA + wgmma
 * kernel takes it (OC and K multiples of 8; the patch count S, 196 in ViT-B/16, is M, which
 * needs no alignment); ViT's flatten(2).transpose(1, 2) after the Conv then undoes the last
 * Transpose as data movement. */
static bool rewrite_patches(drk_graph_t *g, drk_node_t *n) {
  drk_value_t *x = n->inputs[0], *w = n->inputs[1], *b = n->n_inputs > 2 ? n->inputs[2] : NULL, *y = n->outputs[0];
  int64_t N = x->shape.dims[0].size, C = x->shape.dims[1].size, OC = w->shape.dims[0].size;
  int64_t KH = w->shape.dims[2].size, KW = w->shape.dims[3].size, OH = y->shape.dims[2].size, OW = y->shape.dims[3].size;
  int64_t K = C * KH * KW, S = OH * OW;
  const char *base = y->name;
  size_t es = (size_t)drk_dtype_bits(w->dtype) / 8;
  unsigned char *t = malloc(es * (size_t)(K * OC) + 1);
  if (!t) return false;
  const unsigned char *src = w->data; /* [OC, K] row-major */
  for (int64_t o = 0; o < OC; o++)
    for (int64_t k = 0; k < K; k++) memcpy(t + es * (size_t)(k * OC + o), src + es * (size_t)(o * K + k), es);
  drk_value_t *wt = drk_graph_add_const_copy(g, drk_graph_unique_namef(g, "%s_wT", base), w->dtype,
                                             drk_graph_shape_static(g, 2, (int64_t[]){K, OC}), t, es * (size_t)(K * OC));
  free(t);
  int64_t d6[6] = {N, C, OH, KH, OW, KW}, p6[6] = {N, OH, OW, C, KH, KW};
  drk_value_t *x6 = add1(g, DRK_OP_RESHAPE, x, shape_const(g, drk_graph_unique_namef(g, "%s_x6shape", base), 6, d6),
                         drk_graph_unique_namef(g, "%s_x6d", base), x, 6, d6, n->loc);
  const char *pn = drk_graph_unique_namef(g, "%s_patches6", base);
  drk_node_t *tp = drk_graph_add_node(g, DRK_OP_TRANSPOSE, 1, (drk_value_t *[]){x6}, 1, &pn, n->loc);
  tp->outputs[0]->dtype = x->dtype;
  tp->outputs[0]->shape = drk_graph_shape_static(g, 6, p6);
  drk_node_set_ints(g, tp, "perm", 6, (int64_t[]){0, 2, 4, 1, 3, 5});
  drk_value_t *xp = add1(g, DRK_OP_RESHAPE, tp->outputs[0],
                         shape_const(g, drk_graph_unique_namef(g, "%s_pshape", base), 3, (int64_t[]){N, S, K}),
                         drk_graph_unique_namef(g, "%s_patches", base), x, 3, (int64_t[]){N, S, K}, n->loc);
  drk_value_t *mm = add1(g, DRK_OP_MATMUL, xp, wt, drk_graph_unique_namef(g, "%s_mm", base), y, 3,
                         (int64_t[]){N, S, OC}, n->loc);
  if (b) {
    drk_value_t *b1 = drk_graph_add_const(g, drk_graph_unique_namef(g, "%s_b1d", base), b->dtype,
                                          drk_graph_shape_static(g, 1, (int64_t[]){OC}), b->data, b->nbytes);
    mm = add1(g, DRK_OP_ADD, mm, b1, drk_graph_unique_namef(g, "%s_bias", base), y, 3, (int64_t[]){N, S, OC}, n->loc);
  }
  int64_t dl[4] = {N, OH, OW, OC};
  drk_value_t *yl = add1(g, DRK_OP_RESHAPE, mm, shape_const(g, drk_graph_unique_namef(g, "%s_nhwc_shape", base), 4, dl),
                         drk_graph_unique_namef(g, "%s_nhwc", base), y, 4, dl, n->loc);
  const char *tmp = drk_graph_unique_namef(g, "%s_y", base);
  drk_node_t *tb = drk_graph_add_node(g, DRK_OP_TRANSPOSE, 1, (drk_value_t *[]){yl}, 1, &tmp, n->loc);
  drk_node_set_ints(g, tb, "perm", 4, (int64_t[]){0, 3, 1, 2});
  drk_node_take_result(n, tb);
  return true;
}

static drk_rewrite_t rewrite_node(drk_graph_t *g, drk_node_t *n, void *ctx) {
  (void)ctx;
  if (pointwise(n) && n->outputs[0]->shape.rank <= 8) {
    rewrite(g, n);
    return DRK_REWRITE_DONE;
  }
  /* out of memory in rewrite_patches: the Conv stays as it is */
  return patches(n) && rewrite_patches(g, n) ? DRK_REWRITE_DONE : DRK_REWRITE_KEPT;
}

bool drk_pass_conv_to_matmul(drk_graph_t *g, size_t *out_n_rewritten) {
  return drk_graph_rewrite_nodes(g, rewrite_node, NULL, out_n_rewritten);
}
