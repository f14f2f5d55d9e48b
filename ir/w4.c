/* MatMulNBits shape rules and the GPU packing (w4.h). */
#include "w4.h"

#include <stdio.h>
#include <string.h>

static bool dims_are(const drk_value_t *v, int rank, const int64_t *d) {
  if (v->shape.rank != rank) return false;
  for (int i = 0; i < rank; i++)
    if (v->shape.dims[i].sym || v->shape.dims[i].size != d[i]) return false;
  return true;
}

static void shape_str(const drk_value_t *v, char *buf, size_t cap) {
  size_t n = (size_t)snprintf(buf, cap, "[");
  for (int i = 0; i < v->shape.rank && n < cap; i++) {
    const drk_dim_t *d = &v->shape.dims[i];
    if (d->sym) n += (size_t)snprintf(buf + n, cap - n, "%s%s", i ? ", " : "", d->sym);
    else n += (size_t)snprintf(buf + n, cap - n, "%s%lld", i ? ", " : "", (long long)d->size);
  }
  if (n < cap) snprintf(buf + n, cap - n, "]");
}

bool drk_w4_shape(const drk_node_t *n, drk_w4_shape_t *out, char *msg, size_t cap) {
  const drk_value_t *a = n->inputs[0], *b = n->inputs[1], *s = n->inputs[2];
  const drk_value_t *z = n->n_inputs > 3 ? n->inputs[3] : NULL;
  drk_w4_shape_t r = {0};
  r.G = drk_node_attr_int(n, "block_size", 0);
  r.packing = (int)drk_node_attr_int(n, "packing", 0);
  r.has_zp = z != NULL;
  char sh[96];
  if (!a || !b || !s) { snprintf(msg, cap, "needs A, B and scales"); return false; }
  if (a->shape.rank < 1 || a->shape.dims[a->shape.rank - 1].sym || a->shape.dims[a->shape.rank - 1].size < 0) {
    snprintf(msg, cap, "A needs a static last dim (K)");
    return false;
  }
  r.K = a->shape.dims[a->shape.rank - 1].size;
  if (r.G < 16 || r.G % 16 || r.K % r.G) {
    snprintf(msg, cap, "block_size %lld must be a multiple of 16 that divides K = %lld", (long long)r.G, (long long)r.K);
    return false;
  }
  r.groups = r.K / r.G;
  if (!drk_dtype_is_float(a->dtype) || a->dtype == DRK_DT_F8E4M3 || a->dtype == DRK_DT_F8E5M2) {
    snprintf(msg, cap, "A must be f64, f32, f16 or bf16, not %s", drk_dtype_name(a->dtype));
    return false;
  }
  if (!drk_dtype_is_float(s->dtype) || s->shape.rank != 2 || s->shape.dims[1].sym || s->shape.dims[1].size < 1) {
    shape_str(s, sh, sizeof sh);
    snprintf(msg, cap, "scales must be a float [K/block_size, N] with static N, not %s%s", drk_dtype_name(s->dtype), sh);
    return false;
  }
  r.N = s->shape.dims[1].size;
  if (!dims_are(s, 2, (int64_t[]){r.groups, r.N})) {
    shape_str(s, sh, sizeof sh);
    snprintf(msg, cap, "scales are %s, expected [%lld, %lld]", sh, (long long)r.groups, (long long)r.N);
    return false;
  }
  if (z && (z->dtype != DRK_DT_U8 || !dims_are(z, 2, (int64_t[]){r.groups, r.N}))) {
    shape_str(z, sh, sizeof sh);
    snprintf(msg, cap, "zero_points are %s%s, expected u8[%lld, %lld]", drk_dtype_name(z->dtype), sh, (long long)r.groups,
             (long long)r.N);
    return false;
  }
  if (r.packing == 0 ? (b->dtype != DRK_DT_U8 || r.K % 2 || !dims_are(b, 2, (int64_t[]){r.N, r.K / 2}))
                     : (b->dtype != DRK_DT_I16 || r.K % DRK_W4_BK ||
                        !dims_are(b, 3, (int64_t[]){r.K / DRK_W4_BK, r.N, DRK_W4_H}))) {
    shape_str(b, sh, sizeof sh);
    if (r.packing == 0)
      snprintf(msg, cap, "B (packing 0) is %s%s, expected u8[%lld, %lld]", drk_dtype_name(b->dtype), sh, (long long)r.N,
               (long long)(r.K / 2));
    else
      snprintf(msg, cap, "B (packing 1) is %s%s, expected i16[%lld, %lld, %d] (K a multiple of %d)", drk_dtype_name(b->dtype),
               sh, (long long)(r.K / DRK_W4_BK), (long long)r.N, DRK_W4_H, DRK_W4_BK);
    return false;
  }
  *out = r;
  return true;
}

void drk_w4_pack_gpu(const uint8_t *src, int64_t K, int64_t N, uint16_t *out) {
  drk_w4_shape_t s0 = {.K = K, .N = N, .packing = 0};
  memset(out, 0, (size_t)(K * N / 2));
  for (int64_t n = 0; n < N; n++)
    for (int64_t k = 0; k < K; k++) {
      int64_t kt = k / DRK_W4_BK, kk = k % DRK_W4_BK;
      out[(kt * N + n) * DRK_W4_H + kk % DRK_W4_H] |= (uint16_t)(drk_w4_code(src, &s0, k, n) << (4 * (kk / DRK_W4_H)));
    }
}
