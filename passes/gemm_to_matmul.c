/* Gemm as MatMul (drk_pass_gemm_to_matmul): Y = alpha * A' . B' + beta * C (A' = A or A^T,
 * B' = B or B^T) becomes MatMul(A', B') -> Mul(., alpha) -> Add(., C') with the Mul left out
 * when alpha is 1 and the Add when there is no C or beta is 0 (C' = C, beta * C computed here
 * when C is a constant, else Mul(C, beta)). A
 * transposed operand that is a constant is stored transposed here, once, at compile time
 * (HF Conv1D and nn.Linear weights as torch's exporters write them); one that is computed
 * gets a Transpose node. Why: the sm_90a TMA + wgmma kernel and the sibling merge
 * (merge-matmul) take MatMuls, and the bias/activation epilogue fuses after a MatMul like
 * after any other, so every Gemm of GPT-2/BERT exports runs where their MatMuls do (the
 * Gemm lowering is the general mma.sync kernel: ~45 us per GPT-2 layer GEMM on an H200).
 *
 * Requires: shapes inferred and static on the Gemm (2-D operands, float dtype). Guarantees:
 * the same function (alpha * (A.B) + beta * C, each product and sum the same; where the
 * Gemm's kernel rounded once, the unfused rewrite may round A.B to the dtype before the
 * epilogue, which fuses at --fusion-aggressiveness >= 2 and then does not); the Gemm's result
 * keeps its name and becomes the last node's. Leaves the Gemm nodes dead. */
#include <stdlib.h>
#include <string.h>

#include "passes.h"
#include "ir/tensor.h"

static bool static2(const drk_value_t *v) {
  return v && v->shape.rank == 2 && drk_shape_is_static(&v->shape) && v->shape.dims[0].size > 0 &&
         v->shape.dims[1].size > 0;
}

static bool eligible(const drk_node_t *n) {
  if (n->op != DRK_OP_GEMM || n->dead || n->n_outputs != 1 || n->n_inputs < 2) return false;
  const drk_value_t *a = n->inputs[0], *b = n->inputs[1], *y = n->outputs[0];
  if (!static2(a) || !static2(b) || !static2(y) || !drk_dtype_is_float(a->dtype) || b->dtype != a->dtype ||
      y->dtype != a->dtype)
    return false;
  const drk_value_t *c = n->n_inputs > 2 ? n->inputs[2] : NULL;
  return !c || (drk_shape_is_static(&c->shape) && c->shape.rank <= 2 && c->dtype == a->dtype);
}

static drk_value_t *node1(drk_graph_t *g, drk_op_t op, int nin, drk_value_t **ins, const char *name,
                          drk_dtype_t t, int64_t r0, int64_t r1, drk_loc_t loc) {
  drk_node_t *m = drk_graph_add_node(g, op, nin, ins, 1, &name, loc);
  m->outputs[0]->dtype = t;
  m->outputs[0]->shape = drk_graph_shape_static(g, 2, (int64_t[]){r0, r1});
  return m->outputs[0];
}

static drk_value_t *scalar(drk_graph_t *g, const char *name, drk_dtype_t t, double v) {
  unsigned char buf[8];
  drk_tensor_t x;
  int64_t one = 1;
  if (!drk_tensor_alloc(&x, t, 0, &one)) return NULL;
  drk_tensor_set_f64(&x, 0, v);
  memcpy(buf, x.data, x.nbytes);
  size_t nb = x.nbytes;
  drk_tensor_free(&x);
  return drk_graph_add_const_copy(g, name, t, drk_graph_shape_static(g, 0, NULL), buf, nb);
}

/* Transposed copies made so far: a weight shared by several Gemms (ALBERT's layers, a tied
 * embedding) is transposed and stored once. */
typedef struct tcache {
  const drk_value_t **src;
  drk_value_t **dst;
  size_t n, cap;
} tcache_t;

/* v^T: a transposed copy when v is a constant (one per constant), else a Transpose node. */
static drk_value_t *transposed(drk_graph_t *g, tcache_t *tc, drk_value_t *v, const char *base, drk_loc_t loc) {
  int64_t r = v->shape.dims[0].size, c = v->shape.dims[1].size;
  const char *name = drk_graph_unique_namef(g, "%s_T", base);
  if (v->kind == DRK_VALUE_CONST && v->data) {
    for (size_t i = 0; i < tc->n; i++)
      if (tc->src[i] == v) return tc->dst[i];
    size_t es = (size_t)drk_dtype_bits(v->dtype) / 8;
    unsigned char *t = malloc(es * (size_t)(r * c) + 1);
    if (!t) return NULL;
    const unsigned char *s = v->data;
    for (int64_t i = 0; i < r; i++)
      for (int64_t j = 0; j < c; j++) memcpy(t + es * (size_t)(j * r + i), s + es * (size_t)(i * c + j), es);
    drk_value_t *o = drk_graph_add_const_copy(g, name, v->dtype, drk_graph_shape_static(g, 2, (int64_t[]){c, r}), t,
                                              es * (size_t)(r * c));
    free(t);
    if (tc->n < tc->cap) {
      tc->src[tc->n] = v;
      tc->dst[tc->n++] = o;
    }
    return o;
  }
  drk_value_t *o = node1(g, DRK_OP_TRANSPOSE, 1, (drk_value_t *[]){v}, name, v->dtype, c, r, loc);
  drk_node_set_ints(g, o->def, "perm", 2, (int64_t[]){1, 0});
  return o;
}

static bool rewrite(drk_graph_t *g, tcache_t *tc, drk_node_t *n) {
  drk_value_t *a = n->inputs[0], *b = n->inputs[1], *c = n->n_inputs > 2 ? n->inputs[2] : NULL, *y = n->outputs[0];
  const char *base = y->name;
  bool ta = drk_node_attr_int(n, "transA", 0) != 0, tb = drk_node_attr_int(n, "transB", 0) != 0;
  double alpha = drk_node_attr_float(n, "alpha", 1.0), beta = drk_node_attr_float(n, "beta", 1.0);
  int64_t M = y->shape.dims[0].size, N = y->shape.dims[1].size;
  drk_dtype_t t = y->dtype;
  if (ta && !(a = transposed(g, tc, a, base, n->loc))) return false;
  if (tb && !(b = transposed(g, tc, b, base, n->loc))) return false;
  drk_value_t *r = node1(g, DRK_OP_MATMUL, 2, (drk_value_t *[]){a, b}, drk_graph_unique_namef(g, "%s_mm", base), t, M,
                         N, n->loc);
  if (alpha != 1.0) {
    drk_value_t *s = scalar(g, drk_graph_unique_namef(g, "%s_alpha", base), t, alpha);
    if (!s) return false;
    r = node1(g, DRK_OP_MUL, 2, (drk_value_t *[]){r, s}, drk_graph_unique_namef(g, "%s_scaled", base), t, M, N, n->loc);
  }
  if (c && beta != 0.0) {
    drk_tensor_t cv, ct; /* cv borrows C's bytes; ct is the scaled copy */
    if (beta != 1.0 && c->kind == DRK_VALUE_CONST && c->data && drk_tensor_from_const(&cv, c) &&
        drk_tensor_alloc(&ct, cv.dtype, cv.rank, cv.dims)) {
      /* a constant C (a bias) is scaled here, once, rounded to its dtype once */
      for (int64_t i = 0; i < drk_tensor_numel(&ct); i++) drk_tensor_set_f64(&ct, i, beta * drk_tensor_get_f64(&cv, i));
      c = drk_graph_add_const_copy(g, drk_graph_unique_namef(g, "%s_betaC", base), c->dtype, c->shape, ct.data, ct.nbytes);
      drk_tensor_free(&ct);
    } else if (beta != 1.0) {
      drk_value_t *s = scalar(g, drk_graph_unique_namef(g, "%s_beta", base), t, beta);
      if (!s) return false;
      drk_node_t *m = drk_graph_add_node(g, DRK_OP_MUL, 2, (drk_value_t *[]){c, s}, 1,
                                         (const char *[]){drk_graph_unique_namef(g, "%s_c", base)}, n->loc);
      m->outputs[0]->dtype = t;
      m->outputs[0]->shape = c->shape;
      c = m->outputs[0];
    }
    r = node1(g, DRK_OP_ADD, 2, (drk_value_t *[]){r, c}, drk_graph_unique_namef(g, "%s_bias", base), t, M, N, n->loc);
  }
  /* the Gemm's result (its name, its users, maybe a graph output) becomes the last node's */
  drk_node_take_result(n, r->def);
  return true;
}

static drk_rewrite_t rewrite_node(drk_graph_t *g, drk_node_t *n, void *tc) {
  if (!eligible(n)) return DRK_REWRITE_KEPT;
  return rewrite(g, tc, n) ? DRK_REWRITE_DONE : DRK_REWRITE_FAILED;
}

bool drk_pass_gemm_to_matmul(drk_graph_t *g, size_t *out_n_rewritten) {
  size_t n = g->n_nodes;
  tcache_t tc = {drk_arena_alloc(g->arena, sizeof *tc.src * 2 * n + 1), drk_arena_alloc(g->arena, sizeof *tc.dst * 2 * n + 1), 0,
                 2 * n};
  return drk_graph_rewrite_nodes(g, rewrite_node, &tc, out_n_rewritten);
}
