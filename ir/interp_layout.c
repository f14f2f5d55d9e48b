/* Interpreter: drkc's channels-last ops, made by the layout pass (passes/layout_nhwc.c):
 * ConvNHWC, MaxPoolNHWC, AveragePoolNHWC.
 *
 * Each is defined as its ONNX counterpart on the channels-first transposes of its operands:
 * X [N, s..., C] is read as [N, C, s...], ConvNHWC's W [OC, k..., C/group] as
 * [OC, C/group, k...], and the result [N, C', o...] is written as [N, o..., C']. The
 * counterpart runs the very reference code of Conv / MaxPool / AveragePool (interp_mm.c,
 * interp_pool.c), so a rewrite NCHW -> NHWC changes no bit of the math; only the order of
 * the elements in memory differs. The bias of ConvNHWC is [OC], as Conv's. */
#include "interp_internal.h"

/* dst (allocated, x's dtype, dims x.dims[perm[i]]) = Transpose(x, perm) */
static void permute_into(const drk_tensor_t *x, const int *perm, drk_tensor_t *dst) {
  int64_t xs[DRK_MAX_RANK], st[DRK_MAX_RANK];
  drk_istrides(x->rank, x->dims, xs);
  for (int i = 0; i < x->rank; i++) st[i] = xs[perm[i]];
  drk_iiter_t it;
  int64_t *sp[1] = {st};
  drk_iiter_init(&it, dst->rank, dst->dims, 1, sp);
  int64_t n = drk_tensor_numel(dst);
  for (int64_t i = 0; i < n; i++, drk_iiter_next(&it)) drk_icopy_elem(dst, i, x, it.off[0]);
}

/* perm moving the last dim to position 1 (channels first) or dim 1 to the end (last) */
static void perm_cf(int r, int *p) {
  p[0] = 0, p[1] = r - 1;
  for (int i = 2; i < r; i++) p[i] = i - 1;
}
static void perm_cl(int r, int *p) {
  p[0] = 0, p[r - 1] = 1;
  for (int i = 1; i < r - 1; i++) p[i] = i + 1;
}

static bool channels_first(drk_ictx_t *c, const drk_tensor_t *x, drk_tensor_t *out) {
  int p[DRK_MAX_RANK];
  int64_t d[DRK_MAX_RANK];
  perm_cf(x->rank, p);
  for (int i = 0; i < x->rank; i++) d[i] = x->dims[p[i]];
  if (!drk_tensor_alloc(out, x->dtype, x->rank, d)) return drk_ierr(c, "out of memory");
  permute_into(x, p, out);
  return true;
}

/* Runs `op` (the channels-first counterpart) with inputs 0..n_cf-1 transposed to channels
 * first, then writes its result channels last into output 0. */
static bool run_channels_first(drk_ictx_t *c, drk_iop_fn f, int n_cf) {
  drk_tensor_t cf[2];
  memset(cf, 0, sizeof cf);
  const drk_tensor_t *in[3] = {NULL, NULL, NULL};
  if (c->n_in > 3) return drk_ierr(c, "%d inputs given, expected at most 3", c->n_in);
  for (int i = 0; i < c->n_in; i++) in[i] = c->in[i];
  for (int i = 0; i < n_cf; i++) {
    const drk_tensor_t *t = drk_iin(c, i);
    if (!t) return drk_ierr(c, "input %d is required", i);
    if (t->rank < 3) return drk_ierr(c, "input %d must have rank >= 3 (N, spatial..., C), got %d", i, t->rank);
  }
  bool ok = true;
  for (int i = 0; i < n_cf && ok; i++) {
    ok = channels_first(c, c->in[i], &cf[i]);
    if (ok) in[i] = &cf[i];
  }
  drk_tensor_t res[1];
  memset(res, 0, sizeof res);
  if (ok) {
    drk_ictx_t c2 = *c;
    c2.in = in;
    c2.out = res;
    c2.n_out = 1;
    ok = f(&c2);
  }
  if (ok) {
    int p[DRK_MAX_RANK];
    int64_t d[DRK_MAX_RANK];
    perm_cl(res[0].rank, p);
    for (int i = 0; i < res[0].rank; i++) d[i] = res[0].dims[p[i]];
    ok = drk_iout(c, 0, res[0].dtype, res[0].rank, d);
    if (ok) permute_into(&res[0], p, &c->out[0]);
  }
  drk_tensor_free(&res[0]);
  for (int i = 0; i < 2; i++) drk_tensor_free(&cf[i]);
  return ok;
}

static bool op_conv_nhwc(drk_ictx_t *c) { return run_channels_first(c, drk_interp_lookup_mm(DRK_OP_CONV), 2); }
static bool op_maxpool_nhwc(drk_ictx_t *c) { return run_channels_first(c, drk_interp_lookup_pool(DRK_OP_MAX_POOL), 1); }
static bool op_avgpool_nhwc(drk_ictx_t *c) {
  return run_channels_first(c, drk_interp_lookup_pool(DRK_OP_AVERAGE_POOL), 1);
}

drk_iop_fn drk_interp_lookup_layout(drk_op_t op) {
  switch (op) {
    case DRK_OP_CONV_NHWC: return op_conv_nhwc;
    case DRK_OP_MAX_POOL_NHWC: return op_maxpool_nhwc;
    case DRK_OP_AVERAGE_POOL_NHWC: return op_avgpool_nhwc;
    default: return NULL;
  }
}
