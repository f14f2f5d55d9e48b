/* Operators of the com.microsoft domain (ONNX Runtime's contrib ops) that drkc imports:
 * MatMulNBits with 4-bit codes, as the graph IR's MatMulNBits (ir/graph_ops.def, packing 0); the fused
 * elementwise and normalization ops of ORT's optimizer are decomposed in onnx_opset.c.
 * Everything else of the domain is refused by name.
 *
 * com.microsoft::MatMulNBits(A [..., K], B u8 [N, ceil(K/bs), bs/2], scales [N * blocks] or
 * [N, blocks], zero_points?, g_idx?, bias?) {K, N, bits, block_size, accuracy_level}:
 * Y = A x W^T with W[n, k] = (code - zp) * scale, codes packed low nibble first along k, zero
 * points (u8) packed two per byte, low nibble first, ceil(blocks/2) bytes per row n; 8 when
 * absent. B, scales and zero points must be initializers: drkc transposes them at import
 * (scales and zero points to [blocks, N]) and repacks B for the GPU later. bias [N] becomes
 * an Add. Refused (naming the node): bits != 4, g_idx, float zero points, K not a multiple of
 * block_size, block_size not a multiple of 16. accuracy_level is a hint for ONNX Runtime's
 * CPU kernels and is ignored. */
#include <string.h>

#include "onnx_internal.h"

#define FAIL(...) (drk_diag_error(c->d, loc, __VA_ARGS__), false)

static drk_value_t *input(drk_onnx_ctx_t *c, const Onnx__NodeProto *np, size_t i) {
  if (i >= np->n_input || !np->input[i] || !*np->input[i]) return NULL;
  return drk_onnx_map_get(&c->values, np->input[i]);
}

static bool is_const(const drk_value_t *v) { return v && v->kind == DRK_VALUE_CONST && v->data; }

static bool import_matmul_nbits(drk_onnx_ctx_t *c, const Onnx__NodeProto *np, drk_loc_t loc) {
  const char *nm = np->name && *np->name ? np->name : "MatMulNBits";
  int64_t K = -1, N = -1, bits = 4, bs = -1;
  for (size_t i = 0; i < np->n_attribute; i++) {
    const Onnx__AttributeProto *a = np->attribute[i];
    const char *an = a->name ? a->name : "";
    int64_t *dst = !strcmp(an, "K") ? &K : !strcmp(an, "N") ? &N : !strcmp(an, "bits") ? &bits
                 : !strcmp(an, "block_size") ? &bs : NULL;
    if (!dst && strcmp(an, "accuracy_level") != 0)
      return FAIL("MatMulNBits '%s': unsupported attribute '%s'", nm, an);
    if (dst) *dst = a->i;
  }
  if (bits != 4) return FAIL("MatMulNBits '%s': not implemented: bits = %lld (drkc imports 4-bit codes only)", nm, (long long)bits);
  if (K < 1 || N < 1 || bs < 1 || K > ((int64_t)1 << 31) || N > ((int64_t)1 << 31))
    return FAIL("MatMulNBits '%s': attributes K, N and block_size must be given, positive and below 2^31", nm);
  if (bs % 16 || K % bs)
    return FAIL("MatMulNBits '%s': not implemented: block_size %lld with K = %lld (drkc needs a multiple of 16 that divides K)",
                nm, (long long)bs, (long long)K);
  for (size_t i = 0; i < np->n_input; i++)
    if (np->input[i] && *np->input[i] && !drk_onnx_map_get(&c->values, np->input[i]))
      return FAIL("MatMulNBits '%s': input '%s' is not defined by an earlier node, input or initializer", nm, np->input[i]);
  if (input(c, np, 4)) return FAIL("MatMulNBits '%s': not implemented: g_idx (act-order) input", nm);
  drk_value_t *a = input(c, np, 0), *b = input(c, np, 1), *s = input(c, np, 2), *z = input(c, np, 3), *bias = input(c, np, 5);
  if (!a || !b || !s) return FAIL("MatMulNBits '%s': needs inputs A, B and scales", nm);
  if (np->n_input > 6) return FAIL("MatMulNBits '%s': has %zu inputs, expected at most 6", nm, np->n_input);
  if (!is_const(b) || !is_const(s) || (z && !is_const(z)))
    return FAIL("MatMulNBits '%s': B, scales and zero_points must be initializers (drkc repacks them at compile time)", nm);
  int64_t blocks = K / bs;
  if (b->dtype != DRK_DT_U8 || (int64_t)b->nbytes != N * K / 2)
    return FAIL("MatMulNBits '%s': B must be uint8 [%lld, %lld, %lld]", nm, (long long)N, (long long)blocks, (long long)(bs / 2));
  if (!drk_dtype_is_float(s->dtype) || drk_shape_numel(&s->shape) != N * blocks)
    return FAIL("MatMulNBits '%s': scales must be float with N * K / block_size = %lld elements", nm, (long long)(N * blocks));
  int64_t zrow = (blocks + 1) / 2;
  if (z && drk_dtype_is_float(z->dtype)) return FAIL("MatMulNBits '%s': not implemented: float zero points", nm);
  if (z && (z->dtype != DRK_DT_U8 || drk_shape_numel(&z->shape) != N * zrow))
    return FAIL("MatMulNBits '%s': zero_points must be uint8 with N * ceil(blocks / 2) = %lld elements", nm, (long long)(N * zrow));
  if (bias && (bias->dtype != a->dtype || drk_shape_numel(&bias->shape) != N))
    return FAIL("MatMulNBits '%s': bias must have A's dtype and N = %lld elements", nm, (long long)N);

  drk_graph_t *g = c->g;
  /* B: the same bytes as u8 [N, K/2] */
  drk_value_t *bv = drk_graph_add_const(g, drk_graph_unique_namef(g, "%s.w4", b->name), DRK_DT_U8,
                                        drk_graph_shape_static(g, 2, (int64_t[]){N, K / 2}), b->data, b->nbytes);
  /* scales [N, blocks] -> [blocks, N] */
  size_t es = (size_t)drk_dtype_bits(s->dtype) / 8;
  uint8_t *st = drk_arena_alloc(g->arena, es * (size_t)(N * blocks));
  for (int64_t n = 0; n < N; n++)
    for (int64_t j = 0; j < blocks; j++)
      memcpy(st + es * (size_t)(j * N + n), (const uint8_t *)s->data + es * (size_t)(n * blocks + j), es);
  drk_value_t *sv = drk_graph_add_const(g, drk_graph_unique_namef(g, "%s.w4_scale", s->name), s->dtype,
                                        drk_graph_shape_static(g, 2, (int64_t[]){blocks, N}), st, es * (size_t)(N * blocks));
  drk_value_t *ins[4] = {a, bv, sv, NULL};
  if (z) { /* packed nibbles [N, ceil(blocks/2)] -> one code per byte [blocks, N] */
    uint8_t *zt = drk_arena_alloc(g->arena, (size_t)(N * blocks));
    const uint8_t *zp = z->data;
    for (int64_t n = 0; n < N; n++)
      for (int64_t j = 0; j < blocks; j++) {
        uint8_t byte = zp[n * zrow + j / 2];
        zt[j * N + n] = (j & 1) ? byte >> 4 : byte & 15;
      }
    ins[3] = drk_graph_add_const(g, drk_graph_unique_namef(g, "%s.w4_zero", z->name), DRK_DT_U8,
                                 drk_graph_shape_static(g, 2, (int64_t[]){blocks, N}), zt, (size_t)(N * blocks));
  }
  const char *out = np->n_output >= 1 && np->output[0] && *np->output[0] ? np->output[0] : NULL;
  if (!out || np->n_output != 1) return FAIL("MatMulNBits '%s': needs exactly one output", nm);
  if (drk_onnx_map_get(&c->values, out)) return FAIL("MatMulNBits '%s': value '%s' is defined twice", nm, out);
  const char *mm_name = bias ? drk_onnx_fresh_name(c, "MatMulNBits_nobias") : out;
  drk_node_t *n = drk_graph_add_node(g, DRK_OP_MATMUL_NBITS, z ? 4 : 3, ins, 1, &mm_name, loc);
  drk_node_set_int(g, n, "block_size", bs);
  drk_value_t *y = n->outputs[0];
  if (drk_onnx_is_known(c, a)) {
    y->dtype = a->dtype;
    drk_onnx_set_known(c, y);
  }
  if (bias) {
    drk_onnx_map_put(&c->values, y->name, y);
    drk_node_t *add = drk_graph_add_node(g, DRK_OP_ADD, 2, (drk_value_t *[]){y, bias}, 1, &out, loc);
    add->outputs[0]->dtype = y->dtype;
    if (drk_onnx_is_known(c, y)) drk_onnx_set_known(c, add->outputs[0]);
    y = add->outputs[0];
  }
  drk_onnx_map_put(&c->values, y->name, y);
  const Onnx__ValueInfoProto *vi = drk_onnx_map_get(&c->infos, y->name);
  return !vi || drk_onnx_apply_type(c, y, vi, loc);
}

bool drk_onnx_import_contrib(drk_onnx_ctx_t *c, const Onnx__NodeProto *np, drk_loc_t loc) {
  const char *op = np->op_type ? np->op_type : "";
  if (strcmp(op, "MatMulNBits") == 0) return import_matmul_nbits(c, np, loc);
  return FAIL("unsupported op '%s' (domain 'com.microsoft', opset %lld): drkc imports MatMulNBits, SkipLayerNormalization, SkipSimplifiedLayerNormalization, SimplifiedLayerNormalization, FastGelu, BiasGelu, Gelu, QuickGelu, BiasAdd and FusedMatMul of this domain", op,
              (long long)drk_onnx_domain_opset(c, "com.microsoft"));
}
