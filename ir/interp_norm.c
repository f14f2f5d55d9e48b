/* Interpreter: Softmax/LogSoftmax (opset 13: one axis) and the normalizations
 * (Batch inference, Instance, Layer with optional Mean/InvStdDev, Group with per-channel
 * opset 21 or per-group opset 18 scale/bias, told apart by shape).
 *
 * Means and variances are computed in f64 with two passes; results rounded once. */
#include "interp_internal.h"

/* Softmax over one (outer, inner) pair per index: each pair on its own, in one thread. */
typedef struct softmax_job {
  double *v;
  int64_t len, inner;
  bool logsm;
} softmax_job_t;

static void softmax_range(void *ctx, int64_t t0, int64_t t1, int tid) {
  const softmax_job_t *j = ctx;
  int64_t len = j->len, inner = j->inner;
  for (int64_t t = t0; t < t1; t++) {
    int64_t o = t / inner, in = t % inner;
    double *b = j->v + o * len * inner + in;
    double mx = -INFINITY, s = 0;
    for (int64_t l = 0; l < len; l++)
      if (b[l * inner] > mx) mx = b[l * inner];
    if (isinf(mx)) mx = 0;
    for (int64_t l = 0; l < len; l++) s += exp(b[l * inner] - mx);
    for (int64_t l = 0; l < len; l++)
      b[l * inner] = j->logsm ? b[l * inner] - mx - log(s) : exp(b[l * inner] - mx) / s;
  }
}

static bool softmax(drk_ictx_t *c, bool logsm) {
  if (!drk_ireq(c, 0, DRK_M_FLOAT)) return false;
  const drk_tensor_t *x = c->in[0];
  int axis;
  if (x->rank == 0) return drk_ierr(c, "input must have rank >= 1");
  if (!drk_iaxis(c, drk_node_attr_int(c->n, "axis", -1), x->rank, &axis)) return false;
  if (!drk_iout(c, 0, x->dtype, x->rank, x->dims)) return false;
  int64_t outer = 1, len = x->dims[axis], inner = 1;
  for (int d = 0; d < axis; d++) outer *= x->dims[d];
  for (int d = axis + 1; d < x->rank; d++) inner *= x->dims[d];
  double *v = drk_iload_f64(c, x);
  if (!v) return false;
  softmax_job_t j = {v, len, inner, logsm};
  drk_ipar_for(outer * inner, drk_ipar_grain(outer * inner, 1 + (1 << 14) / (len ? len : 1)), softmax_range, &j);
  drk_istore_f64(&c->out[0], v);
  drk_ifree(v);
  return true;
}

static bool op_softmax(drk_ictx_t *c) { return softmax(c, false); }
static bool op_log_softmax(drk_ictx_t *c) { return softmax(c, true); }

static bool chan_vec(drk_ictx_t *c, int i, int64_t C, const char *what) {
  const drk_tensor_t *t = c->in[i];
  if (!drk_ireq(c, i, DRK_M_FLOAT)) return false;
  if (drk_tensor_numel(t) != C || t->rank != 1) return drk_ierr(c, "%s must be 1-D of size %lld", what, (long long)C);
  return true;
}

/* BatchNormalization of one (image, channel) per index. */
typedef struct bn_job {
  drk_ictx_t *c;
  double *v;
  int64_t C, inner;
  double eps;
} bn_job_t;

static void bn_range(void *ctx, int64_t t0, int64_t t1, int tid) {
  const bn_job_t *j = ctx;
  for (int64_t t = t0; t < t1; t++) {
    int64_t ch = t % j->C;
    double sc = drk_tensor_get_f64(j->c->in[1], ch), bb = drk_tensor_get_f64(j->c->in[2], ch);
    double mu = drk_tensor_get_f64(j->c->in[3], ch), var = drk_tensor_get_f64(j->c->in[4], ch);
    double k = sc / sqrt(var + j->eps);
    double *p = j->v + t * j->inner;
    for (int64_t i = 0; i < j->inner; i++) p[i] = (p[i] - mu) * k + bb;
  }
}

static bool op_batchnorm(drk_ictx_t *c) {
  if (!drk_ireq(c, 0, DRK_M_FLOAT)) return false;
  const drk_tensor_t *x = c->in[0];
  if (drk_node_attr_int(c->n, "training_mode", 0)) return drk_ierr(c, "training_mode=1 is not supported");
  if (x->rank < 2) return drk_ierr(c, "input must have rank >= 2");
  int64_t C = x->dims[1];
  static const char *names[4] = {"scale", "B", "input_mean", "input_var"};
  for (int i = 1; i <= 4; i++)
    if (!chan_vec(c, i, C, names[i - 1])) return false;
  double eps = (float)drk_node_attr_float(c->n, "epsilon", 1e-5);
  if (!drk_iout(c, 0, x->dtype, x->rank, x->dims)) return false;
  int64_t inner = 1;
  for (int d = 2; d < x->rank; d++) inner *= x->dims[d];
  double *v = drk_iload_f64(c, x);
  if (!v) return false;
  bn_job_t j = {c, v, C, inner, eps};
  drk_ipar_for(x->dims[0] * C, drk_ipar_grain(x->dims[0] * C, 1 + (1 << 14) / (inner ? inner : 1)), bn_range, &j);
  drk_istore_f64(&c->out[0], v);
  drk_ifree(v);
  return true;
}

/* Normalizes each of `groups` contiguous runs of `len` values in place; returns means
 * and inverse std devs when asked; then, when S is given, v = v * S[i] + B[i] (i: the
 * position in the run). One run per index, in one thread. */
typedef struct runs_job {
  double *v;
  int64_t len;
  double eps;
  double *mean, *inv;
  const double *S, *B;
} runs_job_t;

static void runs_range(void *ctx, int64_t g0, int64_t g1, int tid) {
  const runs_job_t *j = ctx;
  int64_t len = j->len;
  for (int64_t g = g0; g < g1; g++) {
    double *p = j->v + g * len, s = 0, q = 0;
    for (int64_t i = 0; i < len; i++) s += p[i];
    double mu = len ? s / (double)len : 0;
    for (int64_t i = 0; i < len; i++) q += (p[i] - mu) * (p[i] - mu);
    double is = 1.0 / sqrt((len ? q / (double)len : 0) + j->eps);
    for (int64_t i = 0; i < len; i++) p[i] = (p[i] - mu) * is;
    if (j->mean) j->mean[g] = mu;
    if (j->inv) j->inv[g] = is;
    if (j->S)
      for (int64_t i = 0; i < len; i++) p[i] = p[i] * j->S[i] + j->B[i];
  }
}

static void normalize_runs_affine(double *v, int64_t groups, int64_t len, double eps, double *mean, double *inv,
                                  const double *S, const double *B) {
  runs_job_t j = {v, len, eps, mean, inv, S, B};
  drk_ipar_for(groups, drk_ipar_grain(groups, 1 + (1 << 14) / (len ? len : 1)), runs_range, &j);
}

static void normalize_runs(double *v, int64_t groups, int64_t len, double eps, double *mean, double *inv) {
  normalize_runs_affine(v, groups, len, eps, mean, inv, NULL, NULL);
}

static bool op_instnorm(drk_ictx_t *c) {
  if (!drk_ireq(c, 0, DRK_M_FLOAT)) return false;
  const drk_tensor_t *x = c->in[0];
  if (x->rank < 3) return drk_ierr(c, "input must have rank >= 3");
  int64_t C = x->dims[1];
  if (!chan_vec(c, 1, C, "scale") || !chan_vec(c, 2, C, "B")) return false;
  double eps = (float)drk_node_attr_float(c->n, "epsilon", 1e-5);
  if (!drk_iout(c, 0, x->dtype, x->rank, x->dims)) return false;
  int64_t inner = 1;
  for (int d = 2; d < x->rank; d++) inner *= x->dims[d];
  double *v = drk_iload_f64(c, x);
  if (!v) return false;
  normalize_runs(v, x->dims[0] * C, inner, eps, NULL, NULL);
  for (int64_t g = 0; g < x->dims[0] * C; g++) {
    double sc = drk_tensor_get_f64(c->in[1], g % C), bb = drk_tensor_get_f64(c->in[2], g % C);
    for (int64_t i = 0; i < inner; i++) v[g * inner + i] = v[g * inner + i] * sc + bb;
  }
  drk_istore_f64(&c->out[0], v);
  drk_ifree(v);
  return true;
}

static bool op_layernorm(drk_ictx_t *c) {
  if (!drk_ireq(c, 0, DRK_M_FLOAT) || !drk_ireq(c, 1, DRK_M_FLOAT)) return false;
  const drk_tensor_t *x = c->in[0], *sc = c->in[1], *b = drk_iin(c, 2);
  if (b && !drk_ireq(c, 2, DRK_M_FLOAT)) return false;
  int axis;
  if (!drk_iaxis(c, drk_node_attr_int(c->n, "axis", -1), x->rank, &axis)) return false;
  double eps = (float)drk_node_attr_float(c->n, "epsilon", 1e-5);
  int64_t stash = drk_node_attr_int(c->n, "stash_type", 1);
  drk_dtype_t sdt;
  if (!drk_dtype_from_onnx((int)stash, &sdt) || !drk_dtype_is_float(sdt)) return drk_ierr(c, "stash_type %lld not supported", (long long)stash);
  int64_t outer = 1, len = 1;
  for (int d = 0; d < axis; d++) outer *= x->dims[d];
  for (int d = axis; d < x->rank; d++) len *= x->dims[d];
  /* Scale and B broadcast to the normalized shape x.shape[axis:]. */
  drk_tensor_t nshape = {0};
  nshape.rank = x->rank - axis;
  for (int d = axis; d < x->rank; d++) nshape.dims[d - axis] = x->dims[d];
  const drk_tensor_t *bt[3] = {&nshape, sc, b};
  int brank;
  int64_t bd[DRK_MAX_RANK], ss[DRK_MAX_RANK], bs[DRK_MAX_RANK];
  if (!drk_ibroadcast(c, b ? 3 : 2, bt, &brank, bd)) return false;
  if (brank != nshape.rank) return drk_ierr(c, "Scale/B do not broadcast to the normalized shape");
  for (int d = 0; d < brank; d++)
    if (bd[d] != nshape.dims[d]) return drk_ierr(c, "Scale/B do not broadcast to the normalized shape");
  drk_ibstrides(sc, brank, bd, ss);
  if (b) drk_ibstrides(b, brank, bd, bs);
  if (!drk_iout(c, 0, x->dtype, x->rank, x->dims)) return false;
  int64_t sd[DRK_MAX_RANK];
  for (int d = 0; d < x->rank; d++) sd[d] = d < axis ? x->dims[d] : 1;
  for (int i = 1; i < c->n_out && i < 3; i++)
    if (!drk_iout(c, i, sdt, x->rank, sd)) return false;
  double *v = drk_iload_f64(c, x);
  double *mean = v ? drk_imalloc(c, (size_t)outer, sizeof(double)) : NULL;
  double *inv = mean ? drk_imalloc(c, (size_t)outer, sizeof(double)) : NULL;
  double *S = inv ? drk_iload_f64(c, sc) : NULL;
  double *B = (S && b) ? drk_iload_f64(c, b) : NULL;
  if (!S || (b && !B)) { drk_ifree(v); drk_ifree(mean); drk_ifree(inv); drk_ifree(S); return false; }
  /* Scale and B per position of the normalized shape, then one row at a time */
  double *Sv = drk_imalloc(c, (size_t)len, sizeof(double)), *Bv = Sv ? drk_imalloc(c, (size_t)len, sizeof(double)) : NULL;
  if (!Bv) { drk_ifree(v); drk_ifree(mean); drk_ifree(inv); drk_ifree(S); drk_ifree(B); drk_ifree(Sv); return false; }
  int64_t *sts[2] = {ss, bs};
  drk_iiter_t it;
  drk_iiter_init(&it, brank, bd, b ? 2 : 1, sts);
  for (int64_t i = 0; i < len; i++) {
    Sv[i] = S[it.off[0]], Bv[i] = B ? B[it.off[1]] : 0;
    drk_iiter_next(&it);
  }
  normalize_runs_affine(v, outer, len, eps, mean, inv, Sv, Bv);
  drk_ifree(Sv); drk_ifree(Bv);
  drk_istore_f64(&c->out[0], v);
  if (c->n_out > 1) drk_istore_f64(&c->out[1], mean);
  if (c->n_out > 2) drk_istore_f64(&c->out[2], inv);
  drk_ifree(v); drk_ifree(mean); drk_ifree(inv); drk_ifree(S); drk_ifree(B);
  return true;
}

static bool op_groupnorm(drk_ictx_t *c) {
  if (!drk_ireq(c, 0, DRK_M_FLOAT) || !drk_ireq(c, 1, DRK_M_FLOAT) || !drk_ireq(c, 2, DRK_M_FLOAT)) return false;
  const drk_tensor_t *x = c->in[0], *sc = c->in[1], *b = c->in[2];
  if (x->rank < 2) return drk_ierr(c, "input must have rank >= 2");
  int64_t G = drk_node_attr_int(c->n, "num_groups", 0), C = x->dims[1];
  if (G <= 0 || C % G) return drk_ierr(c, "num_groups=%lld must divide the %lld channels", (long long)G, (long long)C);
  double eps = (float)drk_node_attr_float(c->n, "epsilon", 1e-5);
  int64_t ns = drk_tensor_numel(sc);
  if (ns != drk_tensor_numel(b) || (ns != C && ns != G)) return drk_ierr(c, "scale and bias must have C or num_groups elements");
  bool per_group = ns != C;
  if (!drk_iout(c, 0, x->dtype, x->rank, x->dims)) return false;
  int64_t inner = 1;
  for (int d = 2; d < x->rank; d++) inner *= x->dims[d];
  double *v = drk_iload_f64(c, x);
  if (!v) return false;
  normalize_runs(v, x->dims[0] * G, C / G * inner, eps, NULL, NULL);
  for (int64_t n = 0; n < x->dims[0]; n++)
    for (int64_t ch = 0; ch < C; ch++) {
      int64_t si = per_group ? ch / (C / G) : ch;
      double s = drk_tensor_get_f64(sc, si), bb = drk_tensor_get_f64(b, si);
      double *p = v + (n * C + ch) * inner;
      for (int64_t i = 0; i < inner; i++) p[i] = p[i] * s + bb;
    }
  drk_istore_f64(&c->out[0], v);
  drk_ifree(v);
  return true;
}

drk_iop_fn drk_interp_lookup_norm(drk_op_t op) {
  switch (op) {
    case DRK_OP_SOFTMAX: return op_softmax;
    case DRK_OP_LOG_SOFTMAX: return op_log_softmax;
    case DRK_OP_BATCH_NORMALIZATION: return op_batchnorm;
    case DRK_OP_INSTANCE_NORMALIZATION: return op_instnorm;
    case DRK_OP_LAYER_NORMALIZATION: return op_layernorm;
    case DRK_OP_GROUP_NORMALIZATION: return op_groupnorm;
    default: return NULL;
  }
}
