/* W4A16 graph passes (docs/precision.md "W4A16"): MatMul weights as 4-bit codes with per-group
 * scales and zero points, computed by the graph IR's MatMulNBits (ir/graph_ops.def, ir/w4.h).
 *
 * drk_pass_fold_dequant_matmul requires a canonical graph (dtypes and shapes inferred) and
 * rewrites MatMul(A, DequantizeLinear(x, s, zp?)) with constant int4/uint4 x [K, N], blocked
 * along K (axis 0, block_size) or per column (axis 1, 1-D scale), into MatMulNBits (packing
 * 0); the result is the same number (the dequantized weight is exact in f32 for f32 scales).
 * drk_pass_quantize_int4 rewrites MatMul(A, W) with a constant float W [K, N] (K % group == 0)
 * into MatMulNBits: round to nearest, asymmetric uint4 per group of `group` rows of a column.
 * drk_pass_pack_w4 gives every MatMulNBits of K % 64 == 0 the GPU's packing (1).
 * All leave replaced nodes dead (run drk_pass_eliminate_dead, then drk_pass_infer_shapes) and
 * never fail but for out of memory (false). */
#include <math.h>
#include <string.h>

#include "passes/quantize.h"
#include "ir/w4.h"

static bool static2(const drk_value_t *v, int64_t *r, int64_t *c) {
  if (v->shape.rank != 2 || v->shape.dims[0].sym || v->shape.dims[1].sym) return false;
  *r = v->shape.dims[0].size;
  *c = v->shape.dims[1].size;
  return *r >= 1 && *c >= 1;
}

static bool is_const(const drk_value_t *v) { return v && v->kind == DRK_VALUE_CONST && v->data; }

/* MatMulNBits(a, b, s, z) {block_size = G} taking over mm's result. */
static drk_node_t *emit_w4(drk_graph_t *g, drk_node_t *mm, drk_value_t *b, drk_value_t *s, drk_value_t *z, int64_t G) {
  drk_value_t *ins[4] = {mm->inputs[0], b, s, z};
  drk_node_t *n = drk_graph_add_node(g, DRK_OP_MATMUL_NBITS, z ? 4 : 3, ins, 1, NULL, mm->loc);
  drk_node_set_int(g, n, "block_size", G);
  n->outputs[0]->dtype = mm->outputs[0]->dtype;
  n->outputs[0]->shape = mm->outputs[0]->shape;
  drk_node_take_result(mm, n);
  return n;
}

/* ---- DequantizeLinear -> MatMul ---- */

typedef struct fold_ctx {
  size_t n;
} fold_ctx_t;

static drk_rewrite_t fold_one(drk_graph_t *g, drk_node_t *mm, void *vctx) {
  fold_ctx_t *fc = vctx;
  if (mm->op != DRK_OP_MATMUL || mm->n_inputs != 2 || drk_node_attr_int(mm, "result_n", 0)) return DRK_REWRITE_KEPT;
  drk_node_t *dq = drk_node_input_def(mm, 1);
  if (!dq || dq->dead || dq->op != DRK_OP_DEQUANTIZE_LINEAR) return DRK_REWRITE_KEPT;
  drk_value_t *x = dq->inputs[0], *s = dq->inputs[1], *zq = dq->n_inputs > 2 ? dq->inputs[2] : NULL;
  int64_t K, N, sr, sc;
  if (!is_const(x) || (x->dtype != DRK_DT_I4 && x->dtype != DRK_DT_U4) || !static2(x, &K, &N)) return DRK_REWRITE_KEPT;
  if (!is_const(s) || !drk_dtype_is_float(s->dtype) || (zq && (!is_const(zq) || zq->dtype != x->dtype)))
    return DRK_REWRITE_KEPT;
  if (mm->inputs[0]->dtype != s->dtype) return DRK_REWRITE_KEPT;
  int64_t bs = drk_node_attr_int(dq, "block_size", 0), axis = drk_node_attr_int(dq, "axis", 1), G;
  if (bs > 0 && (axis == 0 || axis == -2) && static2(s, &sr, &sc) && sc == N && K % bs == 0 && sr == K / bs) {
    G = bs;
  } else if (bs == 0 && (axis == 1 || axis == -1) && s->shape.rank == 1 && !s->shape.dims[0].sym &&
             s->shape.dims[0].size == N) {
    G = K; /* one group per column */
  } else {
    return DRK_REWRITE_KEPT;
  }
  if (zq && drk_shape_numel(&zq->shape) != drk_shape_numel(&s->shape)) return DRK_REWRITE_KEPT;
  if (G % 16 || K % 2) return DRK_REWRITE_KEPT;
  int64_t groups = K / G;
  bool sgn = x->dtype == DRK_DT_I4;
  /* codes u8 [N, K/2]: code = q + 8 for int4 (zero points likewise), q for uint4 */
  uint8_t *b = drk_arena_alloc(g->arena, (size_t)(N * K / 2));
  if (!b) return DRK_REWRITE_FAILED;
  memset(b, 0, (size_t)(N * K / 2));
  const uint8_t *xd = x->data;
  for (int64_t k = 0; k < K; k++)
    for (int64_t n = 0; n < N; n++) {
      int64_t i = k * N + n;
      unsigned q = (xd[i / 2] >> (4 * (i & 1))) & 15u;
      if (sgn) q ^= 8u; /* two's complement nibble + 8 */
      b[n * (K / 2) + k / 2] |= (uint8_t)(q << (4 * (k & 1)));
    }
  drk_value_t *bv = drk_graph_add_const(g, drk_graph_unique_namef(g, "%s.w4", x->name), DRK_DT_U8,
                                        drk_graph_shape_static(g, 2, (int64_t[]){N, K / 2}), b, (size_t)(N * K / 2));
  drk_value_t *sv = s;
  if (s->shape.rank == 1)
    sv = drk_graph_add_const(g, drk_graph_unique_namef(g, "%s.w4_scale", s->name), s->dtype,
                             drk_graph_shape_static(g, 2, (int64_t[]){1, N}), s->data, s->nbytes);
  drk_value_t *zv = NULL;
  if (zq || !sgn) { /* uint4 without zero points: zero is code 0, not the op's default 8 */
    uint8_t *z = drk_arena_alloc(g->arena, (size_t)(groups * N));
    if (!z) return DRK_REWRITE_FAILED;
    for (int64_t i = 0; i < groups * N; i++) {
      unsigned q = zq ? (((const uint8_t *)zq->data)[i / 2] >> (4 * (i & 1))) & 15u : 0;
      z[i] = (uint8_t)(sgn ? q ^ 8u : q);
    }
    zv = drk_graph_add_const(g, drk_graph_unique_namef(g, "%s.w4_zero", zq ? zq->name : x->name), DRK_DT_U8,
                             drk_graph_shape_static(g, 2, (int64_t[]){groups, N}), z, (size_t)(groups * N));
  }
  emit_w4(g, mm, bv, sv, zv, G);
  fc->n++;
  return DRK_REWRITE_DONE;
}

bool drk_pass_fold_dequant_matmul(drk_graph_t *g, size_t *out_n) {
  fold_ctx_t fc = {0};
  bool ok = drk_graph_rewrite_nodes(g, fold_one, &fc, NULL);
  if (out_n) *out_n = fc.n;
  return ok;
}

/* ---- --quantize=int4-weight ---- */

typedef struct quant_ctx {
  int64_t group;
  drk_quantize_stats_t st;
} quant_ctx_t;

/* One group of column n (rows k0 .. k0+G): the scale and zero point of the smallest range
 * [lo, hi] holding 0 and the group's values, then codes = clamp(round(w / s) + z, 0, 15). */
static void quant_group(const drk_value_t *w, int64_t N, int64_t k0, int64_t G, int64_t n, uint8_t *b, int64_t K,
                        float *out_s, uint8_t *out_z) {
  double lo = 0, hi = 0;
  for (int64_t k = k0; k < k0 + G; k++) {
    double v = drk_value_const_f64(w, k * N + n);
    if (isfinite(v)) {
      if (v < lo) lo = v;
      if (v > hi) hi = v;
    }
  }
  float s = (float)((hi - lo) / 15.0);
  if (!(s > 0) || !isfinite(s)) s = 1.0f; /* an all-zero group */
  double z = nearbyint(-lo / s);
  if (z < 0) z = 0;
  if (z > 15) z = 15;
  for (int64_t k = k0; k < k0 + G; k++) {
    double v = drk_value_const_f64(w, k * N + n);
    double q = isfinite(v) ? nearbyint(v / s) + z : (v > 0 ? 15 : 0);
    if (!(q >= 0)) q = 0;
    if (q > 15) q = 15;
    b[n * (K / 2) + k / 2] |= (uint8_t)((unsigned)q << (4 * (k & 1)));
  }
  *out_s = s;
  *out_z = (uint8_t)z;
}

static drk_rewrite_t quant_one(drk_graph_t *g, drk_node_t *mm, void *vctx) {
  quant_ctx_t *qc = vctx;
  if (mm->op != DRK_OP_MATMUL || mm->n_inputs != 2) return DRK_REWRITE_KEPT;
  if (drk_node_attr_int(mm, "result_n", 0)) {
    qc->st.padded += is_const(mm->inputs[1]);
    return DRK_REWRITE_KEPT;
  }
  drk_value_t *a = mm->inputs[0], *w = mm->inputs[1];
  int64_t K, N, G = qc->group;
  if (!is_const(w) || !static2(w, &K, &N) || a->shape.rank < 1) return DRK_REWRITE_KEPT;
  if (w->dtype != DRK_DT_F32 && w->dtype != DRK_DT_F16 && w->dtype != DRK_DT_BF16) return DRK_REWRITE_KEPT;
  if (K % G) {
    qc->st.skipped++;
    return DRK_REWRITE_KEPT;
  }
  int64_t groups = K / G;
  uint8_t *b = drk_arena_alloc(g->arena, (size_t)(N * K / 2));
  float *s = drk_arena_alloc(g->arena, sizeof(float) * (size_t)(groups * N));
  uint8_t *z = drk_arena_alloc(g->arena, (size_t)(groups * N));
  if (!b || !s || !z) return DRK_REWRITE_FAILED;
  memset(b, 0, (size_t)(N * K / 2));
  for (int64_t j = 0; j < groups; j++)
    for (int64_t n = 0; n < N; n++) quant_group(w, N, j * G, G, n, b, K, &s[j * N + n], &z[j * N + n]);
  drk_value_t *bv = drk_graph_add_const(g, drk_graph_unique_namef(g, "%s.w4", w->name), DRK_DT_U8,
                                        drk_graph_shape_static(g, 2, (int64_t[]){N, K / 2}), b, (size_t)(N * K / 2));
  drk_value_t *sv = drk_graph_add_const(g, drk_graph_unique_namef(g, "%s.w4_scale", w->name), DRK_DT_F32,
                                        drk_graph_shape_static(g, 2, (int64_t[]){groups, N}), s,
                                        sizeof(float) * (size_t)(groups * N));
  drk_value_t *zv = drk_graph_add_const(g, drk_graph_unique_namef(g, "%s.w4_zero", w->name), DRK_DT_U8,
                                        drk_graph_shape_static(g, 2, (int64_t[]){groups, N}), z, (size_t)(groups * N));
  emit_w4(g, mm, bv, sv, zv, G);
  qc->st.quantized++;
  qc->st.bytes_before += w->nbytes;
  qc->st.bytes_after += bv->nbytes + sv->nbytes + zv->nbytes;
  return DRK_REWRITE_DONE;
}

bool drk_pass_quantize_int4(drk_graph_t *g, int64_t group, drk_quantize_stats_t *out_stats) {
  quant_ctx_t qc = {.group = group};
  bool ok = group >= 16 && group % 16 == 0 && drk_graph_rewrite_nodes(g, quant_one, &qc, NULL);
  if (out_stats) *out_stats = qc.st;
  return ok;
}

/* ---- the GPU's packing ---- */

bool drk_pass_pack_w4(drk_graph_t *g, size_t *out_n) {
  size_t cnt = 0;
  for (size_t i = 0; i < g->n_nodes; i++) {
    drk_node_t *n = g->nodes[i];
    drk_w4_shape_t s;
    char msg[200];
    if (n->dead || n->op != DRK_OP_MATMUL_NBITS || !drk_w4_shape(n, &s, msg, sizeof msg)) continue;
    if (s.packing != 0 || s.K % DRK_W4_BK || !is_const(n->inputs[1])) continue;
    uint16_t *p = drk_arena_alloc(g->arena, (size_t)(s.K * s.N / 2));
    if (!p) return false;
    drk_w4_pack_gpu(n->inputs[1]->data, s.K, s.N, p);
    n->inputs[1] = drk_graph_add_const(g, drk_graph_unique_namef(g, "%s.gpu", n->inputs[1]->name), DRK_DT_I16,
                                       drk_graph_shape_static(g, 3, (int64_t[]){s.K / DRK_W4_BK, s.N, DRK_W4_H}), p,
                                       (size_t)(s.K * s.N / 2));
    drk_node_set_int(g, n, "packing", 1);
    cnt++;
  }
  if (out_n) *out_n = cnt;
  return true;
}
