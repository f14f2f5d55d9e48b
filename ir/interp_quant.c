/* Interpreter: MatMulNBits (W4A16; ir/graph_ops.def, ir/w4.h). The weight is dequantized to
 * f32 as the GPU kernels do ((code - z) * s, one f32 rounding), then A x W runs in f64 and the
 * result is rounded to A's dtype once. */
#include "interp_internal.h"
#include "tensor.h"
#include "w4.h"

/* W [K, N] as f64 (values of f32 dequantization). */
static double *dequant(drk_ictx_t *c, const drk_w4_shape_t *s, const drk_tensor_t *b, const drk_tensor_t *sc,
                       const drk_tensor_t *zp) {
  double *w = drk_imalloc(c, (size_t)(s->K * s->N), sizeof(double));
  if (!w) return NULL;
  for (int64_t k = 0; k < s->K; k++) {
    int64_t gi = (k / s->G) * s->N;
    for (int64_t n = 0; n < s->N; n++) {
      float scale = (float)drk_tensor_get_f64(sc, gi + n);
      int z = zp ? ((const uint8_t *)zp->data)[gi + n] : 8;
      w[k * s->N + n] = (double)((float)((int)drk_w4_code(b->data, s, k, n) - z) * scale);
    }
  }
  return w;
}

static bool op_matmul_nbits(drk_ictx_t *c) {
  char msg[256];
  drk_w4_shape_t s;
  if (!drk_w4_shape(c->n, &s, msg, sizeof msg)) return drk_ierr(c, "%s", msg);
  const drk_tensor_t *a = c->in[0], *b = c->in[1], *sc = c->in[2], *zp = drk_iin(c, 3);
  if (!drk_ireq(c, 0, DRK_DTM(F64) | DRK_DTM(F32) | DRK_DTM(F16) | DRK_DTM(BF16)) || !drk_ireq(c, 2, DRK_M_FLOAT))
    return false;
  if (a->rank < 1 || a->dims[a->rank - 1] != s.K)
    return drk_ierr(c, "A's last dim must be K = %lld", (long long)s.K);
  if ((int64_t)b->nbytes != s.K * s.N / 2 || drk_tensor_numel(sc) != s.groups * s.N ||
      (zp && (zp->dtype != DRK_DT_U8 || drk_tensor_numel(zp) != s.groups * s.N)))
    return drk_ierr(c, "B, scales or zero_points do not match the node's shapes");
  if (zp)
    for (int64_t i = 0; i < s.groups * s.N; i++)
      if (((const uint8_t *)zp->data)[i] > 15)
        return drk_ierr(c, "zero point %u at %lld is not a 4-bit code (0..15)", ((const uint8_t *)zp->data)[i], (long long)i);
  int64_t M = s.K ? drk_tensor_numel(a) / s.K : 0, od[DRK_MAX_RANK];
  memcpy(od, a->dims, sizeof(int64_t) * (size_t)a->rank);
  od[a->rank - 1] = s.N;
  if (!drk_iout(c, 0, a->dtype, a->rank, od)) return false;
  double *w = dequant(c, &s, b, sc, zp), *av = w ? drk_iload_f64(c, a) : NULL;
  double *y = av ? drk_imalloc(c, (size_t)(M * s.N) + 1, sizeof(double)) : NULL;
  if (y) {
    drk_igemm_f64(M, s.N, s.K, av, s.K, 1, w, s.N, 1, y, s.N, false);
    drk_istore_f64(&c->out[0], y);
  }
  drk_ifree(w);
  drk_ifree(av);
  drk_ifree(y);
  return y != NULL;
}

drk_iop_fn drk_interp_lookup_quant(drk_op_t op) { return op == DRK_OP_MATMUL_NBITS ? op_matmul_nbits : NULL; }
