/* Matmul widths padded for the sm_90a kernel (drk_pass_pad_matmul_n): MatMul(A, B) with B a
 * 2-D constant [K, N], N not a multiple of 8 (K one, N >= 64) becomes
 *   MatMul(A, B padded with zero columns to [K, N8]) {result_n = N}
 * with N8 = N rounded up to 8: the result is the first N columns (the attribute is drkc's:
 * infer_shapes, the interpreter and lower_matmul.c read B's rows as N8 wide and the result
 * as N wide). Why: the TMA + wgmma kernel needs 16-byte row strides in B (N and K multiples
 * of 8 in 16-bit types); GPT-2's LM head (N = 50257) otherwise runs on the general mma.sync
 * kernel (0.99 ms of a 3.48 ms b1 s1024 run on an H200). The weight is padded once here
 * (N8 - N < 8 columns). The kernel's epilogue stores the N columns masked, straight into the
 * result (with the Cast to f32 of a logits output fused: f32 stores), so there is no wider
 * f16 intermediate and no Slice copy (GPT-2 s1024: 2 x 103 MB of traffic less than the
 * earlier Slice form).
 *
 * Requires: shapes inferred and static on the MatMul. Guarantees: the same function (the
 * padded columns are zero and never stored; the kept ones are the same sums); the MatMul's
 * result keeps its name and becomes the new MatMul's. Leaves the MatMul nodes dead. */
#include <stdlib.h>
#include <string.h>

#include "passes.h"

static bool eligible(const drk_node_t *n) {
  if (n->op != DRK_OP_MATMUL || n->dead || n->n_outputs != 1 || n->n_inputs != 2) return false;
  const drk_value_t *a = n->inputs[0], *b = n->inputs[1], *y = n->outputs[0];
  if (!a || !b || b->kind != DRK_VALUE_CONST || !b->data || b->shape.rank != 2 || !drk_shape_is_static(&b->shape) ||
      !drk_shape_is_static(&y->shape) || a->shape.rank < 2 || y->shape.rank < 2 || y->shape.rank > 8 ||
      !drk_dtype_is_float(b->dtype) || drk_dtype_bits(b->dtype) < 8)
    return false;
  int64_t K = b->shape.dims[0].size, N = b->shape.dims[1].size;
  return N >= 64 && N % 8 != 0 && K % 8 == 0 && y->shape.dims[y->shape.rank - 1].size == N;
}

static bool rewrite(drk_graph_t *g, drk_node_t *n) {
  drk_value_t *a = n->inputs[0], *b = n->inputs[1], *y = n->outputs[0];
  const char *base = y->name;
  int64_t K = b->shape.dims[0].size, N = b->shape.dims[1].size, N8 = (N + 7) / 8 * 8;
  size_t es = (size_t)drk_dtype_bits(b->dtype) / 8;
  unsigned char *p = calloc((size_t)(K * N8), es);
  if (!p) return false;
  for (int64_t k = 0; k < K; k++) memcpy(p + es * (size_t)(k * N8), (const unsigned char *)b->data + es * (size_t)(k * N), es * (size_t)N);
  drk_value_t *bp = drk_graph_add_const_copy(g, drk_graph_unique_namef(g, "%s_wpad", b->name), b->dtype,
                                             drk_graph_shape_static(g, 2, (int64_t[]){K, N8}), p, es * (size_t)(K * N8));
  free(p);
  /* MatMul(A, B padded) {result_n = N}: the result is the first N columns, stored by the
   * kernel's masked epilogue straight into y (no wider intermediate, no Slice copy) */
  const char *mn = drk_graph_unique_namef(g, "%s_padded", base);
  drk_node_t *mm = drk_graph_add_node(g, DRK_OP_MATMUL, 2, (drk_value_t *[]){a, bp}, 1, &mn, n->loc);
  drk_node_set_int(g, mm, "result_n", N);
  /* the MatMul's result (its name, its users, maybe a graph output) becomes the new one's */
  drk_node_take_result(n, mm);
  return true;
}

static drk_rewrite_t rewrite_node(drk_graph_t *g, drk_node_t *n, void *ctx) {
  (void)ctx;
  if (!eligible(n)) return DRK_REWRITE_KEPT;
  return rewrite(g, n) ? DRK_REWRITE_DONE : DRK_REWRITE_FAILED;
}

bool drk_pass_pad_matmul_n(drk_graph_t *g, size_t *out_n_rewritten) {
  return drk_graph_rewrite_nodes(g, rewrite_node, NULL, out_n_rewritten);
}
