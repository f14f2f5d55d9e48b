/* Interpreter: elementwise ops (arithmetic with multidirectional broadcasting, activations,
 * comparisons, logic, Where, Clip, Cast/CastLike, IsNaN/IsInf) and Quantize/DequantizeLinear.
 *
 * Floats are computed in f64 and rounded to the output dtype once; integer arithmetic is
 * done in int64 and wraps to the output type as ONNX/numpy do; integer Div truncates toward
 * zero (division by zero is reported). */
#include "interp_internal.h"

enum { K_ADD, K_SUB, K_MUL, K_DIV, K_MIN, K_MAX, K_SUM, K_MEAN, K_AND, K_OR, K_XOR, K_EQ, K_LT, K_LE, K_GT, K_GE };

static double fbin(int k, double a, double b) {
  switch (k) {
    case K_ADD: case K_SUM: case K_MEAN: return a + b;
    case K_SUB: return a - b;
    case K_MUL: return a * b;
    case K_DIV: return a / b;
    case K_MIN: return (isnan(a) || isnan(b)) ? NAN : (a < b ? a : b);
    case K_MAX: return (isnan(a) || isnan(b)) ? NAN : (a > b ? a : b);
    case K_EQ: return a == b;
    case K_LT: return a < b;
    case K_LE: return a <= b;
    case K_GT: return a > b;
    case K_GE: return a >= b;
    case K_AND: return (a != 0) && (b != 0);
    case K_OR: return (a != 0) || (b != 0);
    case K_XOR: return (a != 0) != (b != 0);
  }
  return 0;
}

static bool ibin(drk_ictx_t *c, int k, int64_t a, int64_t b, int64_t *r) {
  uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
  switch (k) {
    case K_ADD: case K_SUM: case K_MEAN: *r = (int64_t)(ua + ub); return true;
    case K_SUB: *r = (int64_t)(ua - ub); return true;
    case K_MUL: *r = (int64_t)(ua * ub); return true;
    case K_DIV:
      if (b == 0) return drk_ierr(c, "integer division by zero");
      *r = (a == INT64_MIN && b == -1) ? INT64_MIN : a / b;
      return true;
    case K_MIN: *r = a < b ? a : b; return true;
    case K_MAX: *r = a > b ? a : b; return true;
    case K_EQ: *r = a == b; return true;
    case K_LT: *r = a < b; return true;
    case K_LE: *r = a <= b; return true;
    case K_GT: *r = a > b; return true;
    case K_GE: *r = a >= b; return true;
    case K_AND: *r = a && b; return true;
    case K_OR: *r = a || b; return true;
    case K_XOR: *r = (a != 0) != (b != 0); return true;
  }
  return true;
}

/* One input of a float nary over output positions [j0, j1): acc = x (input 0) or
 * fbin(k, acc, x); mean: acc /= i. Each position on its own: any split gives the same bits. */
typedef struct nary_job {
  int k, i;
  const double *x;
  double *acc;
  int rank;
  const int64_t *dims, *ist;
  bool same, mean;
} nary_job_t;

static void nary_range(void *ctx, int64_t j0, int64_t j1, int tid) {
  const nary_job_t *nj = ctx;
  double *acc = nj->acc;
  const double *x = nj->x;
  if (nj->mean) {
    for (int64_t j = j0; j < j1; j++) acc[j] /= nj->i;
    return;
  }
  if (nj->same) {
    if (nj->i == 0) memcpy(acc + j0, x + j0, sizeof(double) * (size_t)(j1 - j0));
    else if (nj->k == K_ADD || nj->k == K_SUM || nj->k == K_MEAN)
      for (int64_t j = j0; j < j1; j++) acc[j] = acc[j] + x[j];
    else if (nj->k == K_MUL)
      for (int64_t j = j0; j < j1; j++) acc[j] = acc[j] * x[j];
    else
      for (int64_t j = j0; j < j1; j++) acc[j] = fbin(nj->k, acc[j], x[j]);
    return;
  }
  int64_t *sts[1] = {(int64_t *)nj->ist};
  drk_iiter_t it;
  drk_iiter_init(&it, nj->rank, nj->dims, 1, sts);
  drk_iiter_seek(&it, j0);
  for (int64_t j = j0; j < j1; j++) {
    double v = x[it.off[0]];
    acc[j] = nj->i == 0 ? v : fbin(nj->k, acc[j], v);
    drk_iiter_next(&it);
  }
}

/* The float nary in chunks of NCHUNK output elements: each input's values for the chunk (read
 * from the tensor, or gathered from its f64 copy when it broadcasts), folded in input order,
 * stored. Each element on its own: the same bits as a whole-tensor pass. */
enum { NARY_MAX = 8, NCHUNK = 2048 };
typedef struct nary_chunk_job {
  int k, n;
  const drk_tensor_t *in[NARY_MAX];
  double *full[NARY_MAX];
  int64_t ist[NARY_MAX][DRK_MAX_RANK];
  bool same[NARY_MAX];
  int rank;
  const int64_t *dims;
  drk_tensor_t *out;
} nary_chunk_job_t;

static void nary_chunk_range(void *ctx, int64_t j0, int64_t j1, int tid) {
  const nary_chunk_job_t *nj = ctx;
  double acc[NCHUNK], x[NCHUNK];
  for (int64_t a = j0; a < j1; a += NCHUNK) {
    int64_t b = a + NCHUNK < j1 ? a + NCHUNK : j1, w = b - a;
    for (int i = 0; i < nj->n; i++) {
      double *dst = i == 0 ? acc : x;
      if (nj->same[i]) {
        drk_iload_f64_range(nj->in[i], a, b, dst);
      } else {
        int64_t *sts[1] = {(int64_t *)nj->ist[i]};
        drk_iiter_t it;
        drk_iiter_init(&it, nj->rank, nj->dims, 1, sts);
        drk_iiter_seek(&it, a);
        for (int64_t e = 0; e < w; e++, drk_iiter_next(&it)) dst[e] = nj->full[i][it.off[0]];
      }
      if (i == 0) continue;
      switch (nj->k) {
        case K_ADD: case K_SUM: case K_MEAN: for (int64_t e = 0; e < w; e++) acc[e] = acc[e] + x[e]; break;
        case K_MUL: for (int64_t e = 0; e < w; e++) acc[e] = acc[e] * x[e]; break;
        case K_SUB: for (int64_t e = 0; e < w; e++) acc[e] = acc[e] - x[e]; break;
        case K_DIV: for (int64_t e = 0; e < w; e++) acc[e] = acc[e] / x[e]; break;
        default: for (int64_t e = 0; e < w; e++) acc[e] = fbin(nj->k, acc[e], x[e]); break;
      }
    }
    if (nj->k == K_MEAN)
      for (int64_t e = 0; e < w; e++) acc[e] /= nj->n;
    drk_istore_f64_range(nj->out, a, b, acc);
  }
}

/* Folds n broadcast inputs with op k into output 0 of dtype odt. */
static bool nary(drk_ictx_t *c, int k, drk_dtype_t odt, unsigned mask) {
  int n = c->n_in;
  for (int i = 0; i < n; i++) {
    if (!drk_ireq(c, i, mask)) return false;
    if (c->in[i]->dtype != c->in[0]->dtype)
      return drk_ierr(c, "input %d has dtype %s, input 0 has %s", i, drk_dtype_name(c->in[i]->dtype),
                      drk_dtype_name(c->in[0]->dtype));
  }
  int rank;
  int64_t dims[DRK_MAX_RANK];
  if (!drk_ibroadcast(c, n, c->in, &rank, dims)) return false;
  if (!drk_iout(c, 0, odt, rank, dims)) return false;
  drk_tensor_t *o = &c->out[0];
  int64_t total = drk_tensor_numel(o);
  bool isf = drk_dtype_is_float(c->in[0]->dtype);
  int64_t ost[DRK_MAX_RANK], ist[DRK_MAX_RANK];
  drk_istrides(rank, dims, ost);
  bool ok = true;
  if (isf && n <= NARY_MAX && drk_dtype_bits(odt) >= 8) {
    /* chunks from the inputs straight to the output; broadcast inputs through f64 copies */
    nary_chunk_job_t j = {k, n, {NULL}, {NULL}, {{0}}, {false}, rank, dims, o};
    for (int i = 0; i < n && ok; i++) {
      j.in[i] = c->in[i];
      j.same[i] = drk_tensor_numel(c->in[i]) == total;
      drk_ibstrides(c->in[i], rank, dims, j.ist[i]);
      if (!j.same[i]) ok = (j.full[i] = drk_iload_f64(c, c->in[i])) != NULL;
    }
    if (ok) drk_ipar_for(total, drk_ipar_grain(total, 4 * NCHUNK), nary_chunk_range, &j);
    for (int i = 0; i < n; i++) drk_ifree(j.full[i]);
  } else if (isf) {
    double *acc = drk_imalloc(c, (size_t)total, sizeof(double));
    if (!acc) return false;
    for (int i = 0; i < n && ok; i++) {
      double *x = drk_iload_f64(c, c->in[i]);
      if (!x) { ok = false; break; }
      drk_ibstrides(c->in[i], rank, dims, ist);
      nary_job_t j = {k, i, x, acc, rank, dims, ist, drk_tensor_numel(c->in[i]) == total, false};
      drk_ipar_for(total, drk_ipar_grain(total, 1 << 14), nary_range, &j);
      drk_ifree(x);
    }
    if (ok && k == K_MEAN) {
      nary_job_t j = {k, n, NULL, acc, rank, dims, ist, true, true};
      drk_ipar_for(total, drk_ipar_grain(total, 1 << 14), nary_range, &j);
    }
    if (ok) drk_istore_f64(o, acc);
    drk_ifree(acc);
  } else {
    int64_t *acc = drk_imalloc(c, (size_t)total, sizeof(int64_t));
    if (!acc) return false;
    for (int i = 0; i < n && ok; i++) {
      int64_t *x = drk_iload_i64(c, c->in[i]);
      if (!x) { ok = false; break; }
      drk_ibstrides(c->in[i], rank, dims, ist);
      int64_t *sts[1] = {ist};
      drk_iiter_t it;
      drk_iiter_init(&it, rank, dims, 1, sts);
      for (int64_t j = 0; j < total && ok; j++) {
        int64_t v = x[it.off[0]];
        if (i == 0) acc[j] = v;
        else ok = ibin(c, k, acc[j], v, &acc[j]);
        drk_iiter_next(&it);
      }
      drk_ifree(x);
    }
    if (ok && k == K_MEAN)
      for (int64_t j = 0; j < total; j++) acc[j] /= n;
    if (ok) drk_istore_i64(o, acc);
    drk_ifree(acc);
  }
  return ok;
}

#define NUMERIC_MASK (DRK_M_NUM)
static bool op_add(drk_ictx_t *c) { return nary(c, K_ADD, c->in[0]->dtype, NUMERIC_MASK); }
static bool op_sub(drk_ictx_t *c) { return nary(c, K_SUB, c->in[0]->dtype, NUMERIC_MASK); }
static bool op_mul(drk_ictx_t *c) { return nary(c, K_MUL, c->in[0]->dtype, NUMERIC_MASK); }
static bool op_div(drk_ictx_t *c) { return nary(c, K_DIV, c->in[0]->dtype, NUMERIC_MASK); }
static bool op_min(drk_ictx_t *c) { return nary(c, K_MIN, c->in[0]->dtype, NUMERIC_MASK); }
static bool op_max(drk_ictx_t *c) { return nary(c, K_MAX, c->in[0]->dtype, NUMERIC_MASK); }
static bool op_sum(drk_ictx_t *c) { return nary(c, K_SUM, c->in[0]->dtype, DRK_M_FLOAT); }
static bool op_mean(drk_ictx_t *c) { return nary(c, K_MEAN, c->in[0]->dtype, DRK_M_FLOAT); }
static bool op_and(drk_ictx_t *c) { return nary(c, K_AND, DRK_DT_BOOL, DRK_DTM(BOOL)); }
static bool op_or(drk_ictx_t *c) { return nary(c, K_OR, DRK_DT_BOOL, DRK_DTM(BOOL)); }
static bool op_xor(drk_ictx_t *c) { return nary(c, K_XOR, DRK_DT_BOOL, DRK_DTM(BOOL)); }
static bool op_eq(drk_ictx_t *c) { return nary(c, K_EQ, DRK_DT_BOOL, DRK_M_ALL); }
static bool op_lt(drk_ictx_t *c) { return nary(c, K_LT, DRK_DT_BOOL, DRK_M_NUM); }
static bool op_le(drk_ictx_t *c) { return nary(c, K_LE, DRK_DT_BOOL, DRK_M_NUM); }
static bool op_gt(drk_ictx_t *c) { return nary(c, K_GT, DRK_DT_BOOL, DRK_M_NUM); }
static bool op_ge(drk_ictx_t *c) { return nary(c, K_GE, DRK_DT_BOOL, DRK_M_NUM); }

static int64_t ipow(int64_t b, int64_t e) {
  if (e < 0) return b == 1 ? 1 : b == -1 ? ((e & 1) ? -1 : 1) : 0;
  uint64_t r = 1, x = (uint64_t)b;
  while (e) {
    if (e & 1) r *= x;
    x *= x;
    e >>= 1;
  }
  return (int64_t)r;
}

static bool op_pow(drk_ictx_t *c) {
  if (!drk_ireq(c, 0, DRK_M_NUM) || !drk_ireq(c, 1, DRK_M_NUM)) return false;
  const drk_tensor_t *a = c->in[0], *b = c->in[1];
  int rank;
  int64_t dims[DRK_MAX_RANK], sa[DRK_MAX_RANK], sb[DRK_MAX_RANK];
  if (!drk_ibroadcast(c, 2, c->in, &rank, dims)) return false;
  if (!drk_iout(c, 0, a->dtype, rank, dims)) return false;
  drk_ibstrides(a, rank, dims, sa);
  drk_ibstrides(b, rank, dims, sb);
  int64_t *sts[2] = {sa, sb};
  drk_iiter_t it;
  drk_iiter_init(&it, rank, dims, 2, sts);
  int64_t total = drk_tensor_numel(&c->out[0]);
  bool fa = drk_dtype_is_float(a->dtype), fb = drk_dtype_is_float(b->dtype);
  for (int64_t j = 0; j < total; j++) {
    if (!fa && !fb) {
      drk_tensor_set_i64(&c->out[0], j, ipow(drk_tensor_get_i64(a, it.off[0]), drk_tensor_get_i64(b, it.off[1])));
    } else {
      drk_tensor_set_f64(&c->out[0], j, pow(drk_tensor_get_f64(a, it.off[0]), drk_tensor_get_f64(b, it.off[1])));
    }
    drk_iiter_next(&it);
  }
  return true;
}

enum { U_NEG, U_ABS, U_RECIP, U_SQRT, U_EXP, U_LOG, U_ERF, U_TANH, U_SIGMOID, U_RELU, U_LEAKY, U_ELU, U_SELU,
       U_GELU, U_HSIG, U_HSWISH, U_SOFTPLUS, U_SOFTSIGN, U_MISH, U_SIN, U_COS, U_FLOOR, U_CEIL, U_ROUND, U_SIGN,
       U_GELU_TANH };

static double softplus(double x) { return x > 30 ? x : log1p(exp(x)); }

static double funary(int k, double x, double alpha, double beta, double gamma) {
  switch (k) {
    case U_NEG: return -x;
    case U_ABS: return fabs(x);
    case U_RECIP: return 1.0 / x;
    case U_SQRT: return sqrt(x);
    case U_EXP: return exp(x);
    case U_LOG: return log(x);
    case U_ERF: return erf(x);
    case U_TANH: return tanh(x);
    case U_SIGMOID: return x >= 0 ? 1.0 / (1.0 + exp(-x)) : exp(x) / (1.0 + exp(x));
    case U_RELU: return x > 0 ? x : (x == 0 || isnan(x) ? x : 0.0);
    case U_LEAKY: return x >= 0 ? x : alpha * x;
    case U_ELU: return x >= 0 ? x : alpha * (exp(x) - 1.0);
    case U_SELU: return x > 0 ? gamma * x : gamma * (alpha * exp(x) - alpha);
    case U_GELU: return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
    case U_GELU_TANH: return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    case U_HSIG: { double v = alpha * x + beta; return v < 0 ? 0 : v > 1 ? 1 : v; }
    case U_HSWISH: { double v = x / 6.0 + 0.5; return x * (v < 0 ? 0 : v > 1 ? 1 : v); }
    case U_SOFTPLUS: return softplus(x);
    case U_SOFTSIGN: return x / (1.0 + fabs(x));
    case U_MISH: return x * tanh(softplus(x));
    case U_SIN: return sin(x);
    case U_COS: return cos(x);
    case U_FLOOR: return floor(x);
    case U_CEIL: return ceil(x);
    case U_ROUND: return nearbyint(x);
    case U_SIGN: return x > 0 ? 1.0 : x < 0 ? -1.0 : x;
  }
  return x;
}

/* Chunks of UCHUNK elements: read x, apply, write the output, through a small f64 buffer. */
enum { UCHUNK = 2048 };
typedef struct unary_job {
  int k;
  const drk_tensor_t *x;
  drk_tensor_t *out;
  double alpha, beta, gamma;
} unary_job_t;

static void unary_range(void *ctx, int64_t i0, int64_t i1, int tid) {
  const unary_job_t *j = ctx;
  double buf[UCHUNK];
  for (int64_t a = i0; a < i1; a += UCHUNK) {
    int64_t b = a + UCHUNK < i1 ? a + UCHUNK : i1;
    drk_iload_f64_range(j->x, a, b, buf);
    for (int64_t i = 0; i < b - a; i++) buf[i] = funary(j->k, buf[i], j->alpha, j->beta, j->gamma);
    drk_istore_f64_range(j->out, a, b, buf);
  }
}

static bool unary(drk_ictx_t *c, int k, unsigned mask) {
  if (!drk_ireq(c, 0, mask)) return false;
  const drk_tensor_t *x = c->in[0];
  if (!drk_iout(c, 0, x->dtype, x->rank, x->dims)) return false;
  int64_t n = drk_tensor_numel(x);
  if (!drk_dtype_is_float(x->dtype)) {
    int64_t *v = drk_iload_i64(c, x);
    if (!v) return false;
    for (int64_t i = 0; i < n; i++) {
      int64_t a = v[i];
      switch (k) {
        case U_NEG: a = (int64_t)(0 - (uint64_t)a); break;
        case U_ABS: a = a < 0 ? (int64_t)(0 - (uint64_t)a) : a; break;
        case U_RELU: a = a > 0 ? a : 0; break;
        case U_SIGN: a = a > 0 ? 1 : a < 0 ? -1 : 0; break;
        case U_FLOOR: case U_CEIL: case U_ROUND: break;
        default: a = (int64_t)funary(k, (double)a, 0, 0, 0); break;
      }
      v[i] = a;
    }
    drk_istore_i64(&c->out[0], v);
    drk_ifree(v);
    return true;
  }
  double alpha = 0, beta = 0, gamma = 0;
  switch (k) {
    case U_LEAKY: alpha = drk_node_attr_float(c->n, "alpha", 0.01); break;
    case U_ELU: alpha = drk_node_attr_float(c->n, "alpha", 1.0); break;
    case U_SELU:
      alpha = drk_node_attr_float(c->n, "alpha", 1.67326319217681884765625);
      gamma = drk_node_attr_float(c->n, "gamma", 1.05070102214813232421875);
      break;
    case U_HSIG:
      alpha = drk_node_attr_float(c->n, "alpha", 0.2);
      beta = drk_node_attr_float(c->n, "beta", 0.5);
      break;
    case U_GELU: {
      const char *ap = drk_node_attr_string(c->n, "approximate", "none");
      if (!strcmp(ap, "tanh")) k = U_GELU_TANH;
      else if (strcmp(ap, "none")) return drk_ierr(c, "approximate='%s' not supported (none or tanh)", ap);
      break;
    }
    default: break;
  }
  /* Attributes are stored as f32 in ONNX; use their f32 values as the reference does. */
  alpha = (float)alpha;
  beta = (float)beta;
  gamma = (float)gamma;
  unary_job_t j = {k, x, &c->out[0], alpha, beta, gamma};
  if (drk_dtype_bits(x->dtype) < 8) unary_range(&j, 0, n, 0); /* two elements a byte: one thread */
  else drk_ipar_for(n, drk_ipar_grain(n, 4 * UCHUNK), unary_range, &j);
  return true;
}

#define FL DRK_M_FLOAT
#define SN (DRK_M_FLOAT | DRK_M_SINT)
static bool op_neg(drk_ictx_t *c) { return unary(c, U_NEG, SN); }
static bool op_abs(drk_ictx_t *c) { return unary(c, U_ABS, DRK_M_NUM); }
static bool op_recip(drk_ictx_t *c) { return unary(c, U_RECIP, FL); }
static bool op_sqrt(drk_ictx_t *c) { return unary(c, U_SQRT, FL); }
static bool op_exp(drk_ictx_t *c) { return unary(c, U_EXP, FL); }
static bool op_log(drk_ictx_t *c) { return unary(c, U_LOG, FL); }
static bool op_erf(drk_ictx_t *c) { return unary(c, U_ERF, DRK_M_NUM); }
static bool op_tanh(drk_ictx_t *c) { return unary(c, U_TANH, FL); }
static bool op_sigmoid(drk_ictx_t *c) { return unary(c, U_SIGMOID, FL); }
static bool op_relu(drk_ictx_t *c) { return unary(c, U_RELU, SN); }
static bool op_leaky(drk_ictx_t *c) { return unary(c, U_LEAKY, FL); }
static bool op_elu(drk_ictx_t *c) { return unary(c, U_ELU, FL); }
static bool op_selu(drk_ictx_t *c) { return unary(c, U_SELU, FL); }
static bool op_gelu(drk_ictx_t *c) { return unary(c, U_GELU, FL); }
static bool op_hsig(drk_ictx_t *c) { return unary(c, U_HSIG, FL); }
static bool op_hswish(drk_ictx_t *c) { return unary(c, U_HSWISH, FL); }
static bool op_softplus(drk_ictx_t *c) { return unary(c, U_SOFTPLUS, FL); }
static bool op_softsign(drk_ictx_t *c) { return unary(c, U_SOFTSIGN, FL); }
static bool op_mish(drk_ictx_t *c) { return unary(c, U_MISH, FL); }
static bool op_sin(drk_ictx_t *c) { return unary(c, U_SIN, FL); }
static bool op_cos(drk_ictx_t *c) { return unary(c, U_COS, FL); }
static bool op_floor(drk_ictx_t *c) { return unary(c, U_FLOOR, FL); }
static bool op_ceil(drk_ictx_t *c) { return unary(c, U_CEIL, FL); }
static bool op_round(drk_ictx_t *c) { return unary(c, U_ROUND, FL); }
static bool op_sign(drk_ictx_t *c) { return unary(c, U_SIGN, DRK_M_NUM); }

static bool op_not(drk_ictx_t *c) {
  if (!drk_ireq(c, 0, DRK_DTM(BOOL))) return false;
  const drk_tensor_t *x = c->in[0];
  if (!drk_iout(c, 0, DRK_DT_BOOL, x->rank, x->dims)) return false;
  const uint8_t *s = x->data;
  uint8_t *d = c->out[0].data;
  for (int64_t i = 0, n = drk_tensor_numel(x); i < n; i++) d[i] = !s[i];
  return true;
}

static bool op_isnan(drk_ictx_t *c) {
  if (!drk_ireq(c, 0, DRK_M_FLOAT)) return false;
  const drk_tensor_t *x = c->in[0];
  if (!drk_iout(c, 0, DRK_DT_BOOL, x->rank, x->dims)) return false;
  uint8_t *d = c->out[0].data;
  for (int64_t i = 0, n = drk_tensor_numel(x); i < n; i++) d[i] = isnan(drk_tensor_get_f64(x, i));
  return true;
}

static bool op_isinf(drk_ictx_t *c) {
  if (!drk_ireq(c, 0, DRK_M_FLOAT)) return false;
  const drk_tensor_t *x = c->in[0];
  bool pos = drk_node_attr_int(c->n, "detect_positive", 1) != 0;
  bool neg = drk_node_attr_int(c->n, "detect_negative", 1) != 0;
  if (!drk_iout(c, 0, DRK_DT_BOOL, x->rank, x->dims)) return false;
  uint8_t *d = c->out[0].data;
  for (int64_t i = 0, n = drk_tensor_numel(x); i < n; i++) {
    double v = drk_tensor_get_f64(x, i);
    d[i] = isinf(v) && ((v > 0 && pos) || (v < 0 && neg));
  }
  return true;
}

static bool op_clip(drk_ictx_t *c) {
  if (!drk_ireq(c, 0, DRK_M_NUM)) return false;
  const drk_tensor_t *x = c->in[0];
  const drk_tensor_t *lo = drk_iin(c, 1), *hi = drk_iin(c, 2);
  for (int i = 1; i <= 2; i++) {
    const drk_tensor_t *t = drk_iin(c, i);
    if (!t) continue;
    if (t->dtype != x->dtype) return drk_ierr(c, "input %d dtype %s differs from input's %s", i, drk_dtype_name(t->dtype), drk_dtype_name(x->dtype));
    if (drk_tensor_numel(t) != 1) return drk_ierr(c, "input %d (min/max) must be a scalar", i);
  }
  if (!drk_iout(c, 0, x->dtype, x->rank, x->dims)) return false;
  int64_t n = drk_tensor_numel(x);
  if (drk_dtype_is_float(x->dtype)) {
    double l = lo ? drk_tensor_get_f64(lo, 0) : -INFINITY, h = hi ? drk_tensor_get_f64(hi, 0) : INFINITY;
    double *v = drk_iload_f64(c, x);
    if (!v) return false;
    for (int64_t i = 0; i < n; i++) {
      double a = v[i];
      if (a < l) a = l;
      if (a > h) a = h;
      v[i] = a;
    }
    drk_istore_f64(&c->out[0], v);
    drk_ifree(v);
  } else {
    int64_t l = lo ? drk_tensor_get_i64(lo, 0) : INT64_MIN, h = hi ? drk_tensor_get_i64(hi, 0) : INT64_MAX;
    int64_t *v = drk_iload_i64(c, x);
    if (!v) return false;
    for (int64_t i = 0; i < n; i++) {
      int64_t a = v[i];
      if (a < l) a = l;
      if (a > h) a = h;
      v[i] = a;
    }
    drk_istore_i64(&c->out[0], v);
    drk_ifree(v);
  }
  return true;
}

static bool op_where(drk_ictx_t *c) {
  if (!drk_ireq(c, 0, DRK_DTM(BOOL)) || !drk_ireq(c, 1, DRK_M_ALL) || !drk_ireq(c, 2, DRK_M_ALL)) return false;
  if (c->in[1]->dtype != c->in[2]->dtype) return drk_ierr(c, "X and Y dtypes differ");
  int rank;
  int64_t dims[DRK_MAX_RANK], s0[DRK_MAX_RANK], s1[DRK_MAX_RANK], s2[DRK_MAX_RANK];
  if (!drk_ibroadcast(c, 3, c->in, &rank, dims)) return false;
  if (!drk_iout(c, 0, c->in[1]->dtype, rank, dims)) return false;
  drk_ibstrides(c->in[0], rank, dims, s0);
  drk_ibstrides(c->in[1], rank, dims, s1);
  drk_ibstrides(c->in[2], rank, dims, s2);
  int64_t *sts[3] = {s0, s1, s2};
  drk_iiter_t it;
  drk_iiter_init(&it, rank, dims, 3, sts);
  const uint8_t *cond = c->in[0]->data;
  for (int64_t j = 0, n = drk_tensor_numel(&c->out[0]); j < n; j++) {
    if (cond[it.off[0]]) drk_icopy_elem(&c->out[0], j, c->in[1], it.off[1]);
    else drk_icopy_elem(&c->out[0], j, c->in[2], it.off[2]);
    drk_iiter_next(&it);
  }
  return true;
}

static bool op_prelu(drk_ictx_t *c) {
  if (!drk_ireq(c, 0, SN) || !drk_ireq(c, 1, SN)) return false;
  const drk_tensor_t *x = c->in[0], *s = c->in[1];
  if (x->dtype != s->dtype) return drk_ierr(c, "slope dtype differs from X");
  int rank;
  int64_t dims[DRK_MAX_RANK], sx[DRK_MAX_RANK], ss[DRK_MAX_RANK];
  if (!drk_ibroadcast(c, 2, c->in, &rank, dims)) return false;
  if (rank != x->rank) return drk_ierr(c, "slope does not broadcast to X's shape");
  for (int k = 0; k < rank; k++)
    if (dims[k] != x->dims[k]) return drk_ierr(c, "slope does not broadcast to X's shape");
  if (!drk_iout(c, 0, x->dtype, rank, dims)) return false;
  drk_ibstrides(x, rank, dims, sx);
  drk_ibstrides(s, rank, dims, ss);
  int64_t *sts[2] = {sx, ss};
  drk_iiter_t it;
  drk_iiter_init(&it, rank, dims, 2, sts);
  for (int64_t j = 0, n = drk_tensor_numel(&c->out[0]); j < n; j++) {
    double a = drk_tensor_get_f64(x, it.off[0]);
    drk_tensor_set_f64(&c->out[0], j, a < 0 ? a * drk_tensor_get_f64(s, it.off[1]) : a);
    drk_iiter_next(&it);
  }
  return true;
}

static bool cast_to(drk_ictx_t *c, drk_dtype_t to) {
  const drk_tensor_t *x = c->in[0];
  bool sat = drk_node_attr_int(c->n, "saturate", 1) != 0;
  if (!drk_iout(c, 0, to, x->rank, x->dims)) return false;
  drk_tensor_t *o = &c->out[0];
  int64_t n = drk_tensor_numel(x);
  if (x->dtype == to) {
    if (x->nbytes) memcpy(o->data, x->data, o->nbytes);
    return true;
  }
  bool ffrom = drk_dtype_is_float(x->dtype);
  for (int64_t i = 0; i < n; i++) {
    if (to == DRK_DT_F8E4M3 || to == DRK_DT_F8E5M2) {
      float v = (float)drk_tensor_get_f64(x, i);
      ((uint8_t *)o->data)[i] = to == DRK_DT_F8E4M3 ? drk_f32_to_f8e4m3(v, sat) : drk_f32_to_f8e5m2(v, sat);
    } else if (ffrom || drk_dtype_is_float(to)) {
      if (!ffrom && x->dtype == DRK_DT_I64 && to == DRK_DT_F32)
        ((float *)o->data)[i] = (float)drk_tensor_get_i64(x, i);
      else
        drk_tensor_set_f64(o, i, drk_tensor_get_f64(x, i));
    } else {
      drk_tensor_set_i64(o, i, drk_tensor_get_i64(x, i));
    }
  }
  return true;
}

static bool op_cast(drk_ictx_t *c) {
  if (!drk_ireq(c, 0, DRK_M_ALL)) return false;
  const drk_attr_t *a = drk_node_attr(c->n, "to");
  drk_dtype_t to;
  if (!a || a->kind != DRK_ATTR_INT) return drk_ierr(c, "attribute 'to' is required");
  if (!drk_dtype_from_onnx((int)a->i, &to)) return drk_ierr(c, "target type %lld not supported", (long long)a->i);
  return cast_to(c, to);
}

static bool op_cast_like(drk_ictx_t *c) {
  if (!drk_ireq(c, 0, DRK_M_ALL) || !drk_ireq(c, 1, DRK_M_ALL)) return false;
  return cast_to(c, c->in[1]->dtype);
}

/* ---- QuantizeLinear / DequantizeLinear ---- */

/* Index into the scale/zero-point tensor for element i of x: per-tensor, per-axis or
 * blocked along axis. */
typedef struct qmap {
  int kind; /* 0 tensor, 1 axis, 2 block */
  int64_t inner, A, SA, bs;
} qmap_t;

static bool qmap_init(drk_ictx_t *c, const drk_tensor_t *x, const drk_tensor_t *s, qmap_t *m) {
  memset(m, 0, sizeof *m);
  int64_t bs = drk_node_attr_int(c->n, "block_size", 0);
  if (drk_tensor_numel(s) == 1 && s->rank <= 1 && bs == 0) return true;
  int axis;
  if (!drk_iaxis(c, drk_node_attr_int(c->n, "axis", 1), x->rank, &axis)) return false;
  m->inner = 1;
  for (int k = axis + 1; k < x->rank; k++) m->inner *= x->dims[k];
  m->A = x->dims[axis];
  if (bs <= 0) {
    if (s->rank != 1 || s->dims[0] != m->A) return drk_ierr(c, "scale must be a scalar or 1-D of size %lld", (long long)m->A);
    m->kind = 1;
    return true;
  }
  if (s->rank != x->rank) return drk_ierr(c, "blocked scale must have the input's rank");
  for (int k = 0; k < x->rank; k++) {
    int64_t want = k == axis ? (x->dims[k] + bs - 1) / bs : x->dims[k];
    if (s->dims[k] != want) return drk_ierr(c, "blocked scale dimension %d is %lld, expected %lld", k, (long long)s->dims[k], (long long)want);
  }
  m->kind = 2;
  m->bs = bs;
  m->SA = s->dims[axis];
  return true;
}

static int64_t qmap_idx(const qmap_t *m, int64_t i) {
  if (m->kind == 0) return 0;
  int64_t a = (i / m->inner) % m->A;
  if (m->kind == 1) return a;
  int64_t o = i / (m->inner * m->A), in = i % m->inner;
  return (o * m->SA + a / m->bs) * m->inner + in;
}

static bool same_shape(const drk_tensor_t *a, const drk_tensor_t *b) {
  if (drk_tensor_numel(a) == 1 && drk_tensor_numel(b) == 1) return true; /* [] vs [1] */
  if (a->rank != b->rank) return false;
  for (int k = 0; k < a->rank; k++)
    if (a->dims[k] != b->dims[k]) return false;
  return true;
}

static bool op_quantize(drk_ictx_t *c) {
  if (!drk_ireq(c, 0, DRK_M_FLOAT | DRK_DTM(I32)) || !drk_ireq(c, 1, DRK_M_FLOAT | DRK_DTM(I32))) return false;
  const drk_tensor_t *x = c->in[0], *s = c->in[1], *zp = drk_iin(c, 2);
  drk_dtype_t odt = DRK_DT_U8;
  int64_t od = drk_node_attr_int(c->n, "output_dtype", 0);
  if (zp) odt = zp->dtype;
  if (od) {
    drk_dtype_t t;
    if (!drk_dtype_from_onnx((int)od, &t)) return drk_ierr(c, "output_dtype %lld not supported", (long long)od);
    if (zp && t != zp->dtype) return drk_ierr(c, "output_dtype differs from the zero point's dtype");
    odt = t;
  }
  unsigned okm = DRK_DTM(U8) | DRK_DTM(I8) | DRK_DTM(U4) | DRK_DTM(I4) | DRK_DTM(I16) | DRK_DTM(F8E4M3) | DRK_DTM(F8E5M2);
  if (!((okm >> odt) & 1u)) return drk_ierr(c, "output dtype %s not supported", drk_dtype_name(odt));
  qmap_t m;
  if (!qmap_init(c, x, s, &m)) return false;
  if (zp && !same_shape(zp, s)) return drk_ierr(c, "zero point shape differs from scale shape");
  bool sat = drk_node_attr_int(c->n, "saturate", 1) != 0;
  if (!drk_iout(c, 0, odt, x->rank, x->dims)) return false;
  double lo = 0, hi = 0;
  switch (odt) {
    case DRK_DT_U8: lo = 0; hi = 255; break;
    case DRK_DT_I8: lo = -128; hi = 127; break;
    case DRK_DT_U4: lo = 0; hi = 15; break;
    case DRK_DT_I4: lo = -8; hi = 7; break;
    case DRK_DT_I16: lo = -32768; hi = 32767; break;
    default: break;
  }
  bool f8 = odt == DRK_DT_F8E4M3 || odt == DRK_DT_F8E5M2;
  for (int64_t i = 0, n = drk_tensor_numel(x); i < n; i++) {
    int64_t si = qmap_idx(&m, i);
    double sc = drk_tensor_get_f64(s, si);
    double z = zp ? drk_tensor_get_f64(zp, si) : 0;
    double v = drk_tensor_get_f64(x, i) / sc;
    if (x->dtype == DRK_DT_F32 || s->dtype == DRK_DT_F32) v = (float)v;
    if (f8) {
      float fv = (float)(v + z);
      ((uint8_t *)c->out[0].data)[i] = odt == DRK_DT_F8E4M3 ? drk_f32_to_f8e4m3(fv, sat) : drk_f32_to_f8e5m2(fv, sat);
    } else {
      v = nearbyint(v) + z;
      if (isnan(v)) v = 0;
      if (v < lo) v = lo;
      if (v > hi) v = hi;
      drk_tensor_set_i64(&c->out[0], i, (int64_t)v);
    }
  }
  return true;
}

static bool op_dequantize(drk_ictx_t *c) {
  if (!drk_ireq(c, 0, DRK_M_INT | DRK_DTM(F8E4M3) | DRK_DTM(F8E5M2)) || !drk_ireq(c, 1, DRK_M_FLOAT)) return false;
  const drk_tensor_t *x = c->in[0], *s = c->in[1], *zp = drk_iin(c, 2);
  if (zp && zp->dtype != x->dtype) return drk_ierr(c, "zero point dtype differs from input");
  qmap_t m;
  if (!qmap_init(c, x, s, &m)) return false;
  if (zp && !same_shape(zp, s)) return drk_ierr(c, "zero point shape differs from scale shape");
  if (!drk_iout(c, 0, s->dtype, x->rank, x->dims)) return false;
  for (int64_t i = 0, n = drk_tensor_numel(x); i < n; i++) {
    int64_t si = qmap_idx(&m, i);
    double z = zp ? drk_tensor_get_f64(zp, si) : 0;
    double v = (drk_tensor_get_f64(x, i) - z) * drk_tensor_get_f64(s, si);
    drk_tensor_set_f64(&c->out[0], i, v);
  }
  return true;
}

drk_iop_fn drk_interp_lookup_ew(drk_op_t op) {
  switch (op) {
    case DRK_OP_ADD: return op_add;
    case DRK_OP_SUB: return op_sub;
    case DRK_OP_MUL: return op_mul;
    case DRK_OP_DIV: return op_div;
    case DRK_OP_POW: return op_pow;
    case DRK_OP_NEG: return op_neg;
    case DRK_OP_ABS: return op_abs;
    case DRK_OP_RECIPROCAL: return op_recip;
    case DRK_OP_SQRT: return op_sqrt;
    case DRK_OP_EXP: return op_exp;
    case DRK_OP_LOG: return op_log;
    case DRK_OP_ERF: return op_erf;
    case DRK_OP_TANH: return op_tanh;
    case DRK_OP_SIGMOID: return op_sigmoid;
    case DRK_OP_RELU: return op_relu;
    case DRK_OP_LEAKY_RELU: return op_leaky;
    case DRK_OP_ELU: return op_elu;
    case DRK_OP_SELU: return op_selu;
    case DRK_OP_GELU: return op_gelu;
    case DRK_OP_HARD_SIGMOID: return op_hsig;
    case DRK_OP_HARD_SWISH: return op_hswish;
    case DRK_OP_SOFTPLUS: return op_softplus;
    case DRK_OP_SOFTSIGN: return op_softsign;
    case DRK_OP_MISH: return op_mish;
    case DRK_OP_CLIP: return op_clip;
    case DRK_OP_MIN: return op_min;
    case DRK_OP_MAX: return op_max;
    case DRK_OP_MEAN: return op_mean;
    case DRK_OP_SUM: return op_sum;
    case DRK_OP_SIN: return op_sin;
    case DRK_OP_COS: return op_cos;
    case DRK_OP_FLOOR: return op_floor;
    case DRK_OP_CEIL: return op_ceil;
    case DRK_OP_ROUND: return op_round;
    case DRK_OP_SIGN: return op_sign;
    case DRK_OP_NOT: return op_not;
    case DRK_OP_AND: return op_and;
    case DRK_OP_OR: return op_or;
    case DRK_OP_XOR: return op_xor;
    case DRK_OP_EQUAL: return op_eq;
    case DRK_OP_LESS: return op_lt;
    case DRK_OP_LESS_OR_EQUAL: return op_le;
    case DRK_OP_GREATER: return op_gt;
    case DRK_OP_GREATER_OR_EQUAL: return op_ge;
    case DRK_OP_WHERE: return op_where;
    case DRK_OP_IS_NAN: return op_isnan;
    case DRK_OP_IS_INF: return op_isinf;
    case DRK_OP_CAST: return op_cast;
    case DRK_OP_CAST_LIKE: return op_cast_like;
    case DRK_OP_PRELU: return op_prelu;
    case DRK_OP_QUANTIZE_LINEAR: return op_quantize;
    case DRK_OP_DEQUANTIZE_LINEAR: return op_dequantize;
    default: return NULL;
  }
}
