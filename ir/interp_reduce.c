/* Interpreter: reductions (Reduce*, ArgMax/ArgMin), CumSum and TopK.
 *
 * Float reductions accumulate in f64, integer ones in int64; the result is rounded to the
 * input dtype once. Axes come from the `axes` input (opset 18+) or, for older forms, the
 * `axes` attribute. */
#include "interp_internal.h"

enum { R_SUM, R_MEAN, R_MAX, R_MIN, R_PROD, R_L2, R_SUMSQ, R_LSE };

/* Computes which axes are reduced; returns false after reporting. *out_noop: identity. */
static bool reduce_axes(drk_ictx_t *c, int rank, bool *red, bool *out_noop) {
  int64_t axes[DRK_MAX_RANK * 2];
  int64_t na = 0;
  const drk_tensor_t *at = drk_iin(c, 1);
  if (at) {
    na = drk_iread_ints(c, at, axes, DRK_MAX_RANK * 2, "axes");
    if (na < 0) return false;
  } else {
    size_t n;
    const int64_t *a = drk_node_attr_ints(c->n, "axes", &n);
    if (a) {
      if (n > DRK_MAX_RANK * 2) return drk_ierr(c, "too many axes");
      for (size_t i = 0; i < n; i++) axes[i] = a[i];
      na = (int64_t)n;
    }
  }
  *out_noop = false;
  for (int k = 0; k < rank; k++) red[k] = na == 0;
  if (na == 0 && drk_node_attr_int(c->n, "noop_with_empty_axes", 0)) {
    *out_noop = true;
    for (int k = 0; k < rank; k++) red[k] = false;
  }
  for (int64_t i = 0; i < na; i++) {
    int a;
    if (!drk_iaxis(c, axes[i], rank, &a)) return false;
    red[a] = true;
  }
  return true;
}

typedef struct reduce_job {
  int k;
  const double *v;
  double *acc;
  int64_t cnt;
  int no;
  int64_t odims[DRK_MAX_RANK], ost[DRK_MAX_RANK]; /* kept dims and their input strides */
  int nr;
  int64_t rdims[DRK_MAX_RANK], rst[DRK_MAX_RANK]; /* reduced dims and their input strides */
} reduce_job_t;

static void reduce_range(void *ctx, int64_t j0, int64_t j1, int tid) {
  const reduce_job_t *j = ctx;
  int k = j->k;
  drk_iiter_t ot, rt;
  int64_t *os[1] = {(int64_t *)j->ost}, *rs[1] = {(int64_t *)j->rst};
  drk_iiter_init(&ot, j->no, j->odims, 1, os);
  drk_iiter_seek(&ot, j0);
  drk_iiter_init(&rt, j->nr, j->rdims, 1, rs);
  for (int64_t o = j0; o < j1; o++, drk_iiter_next(&ot)) {
    const double *base = j->v + ot.off[0];
    double r = k == R_PROD ? 1 : k == R_MAX ? -INFINITY : k == R_MIN ? INFINITY : 0, mx = 0;
    if (k == R_LSE) {
      /* subtract the slice's max so large inputs do not overflow exp */
      mx = -INFINITY;
      drk_iiter_seek(&rt, 0);
      for (int64_t i = 0; i < j->cnt; i++, drk_iiter_next(&rt))
        if (base[rt.off[0]] > mx) mx = base[rt.off[0]];
      if (isinf(mx)) mx = 0;
    }
    drk_iiter_seek(&rt, 0);
    for (int64_t i = 0; i < j->cnt; i++, drk_iiter_next(&rt)) {
      double a = base[rt.off[0]];
      switch (k) {
        case R_SUM: case R_MEAN: r += a; break;
        case R_PROD: r *= a; break;
        case R_MAX: if (a > r || isnan(a)) r = a; break;
        case R_MIN: if (a < r || isnan(a)) r = a; break;
        case R_L2: case R_SUMSQ: r += a * a; break;
        case R_LSE: r += exp(a - mx); break;
      }
    }
    if (k == R_MEAN) r = j->cnt ? r / (double)j->cnt : NAN;
    else if (k == R_L2) r = sqrt(r);
    else if (k == R_LSE) r = log(r) + mx;
    j->acc[o] = r;
  }
}

static bool reduce(drk_ictx_t *c, int k) {
  unsigned mask = DRK_M_NUM | (k == R_MAX || k == R_MIN ? DRK_DTM(BOOL) : 0);
  if (!drk_ireq(c, 0, mask)) return false;
  const drk_tensor_t *x = c->in[0];
  bool red[DRK_MAX_RANK], noop;
  if (!reduce_axes(c, x->rank, red, &noop)) return false;
  bool keep = drk_node_attr_int(c->n, "keepdims", 1) != 0;
  int64_t odims[DRK_MAX_RANK], kdims[DRK_MAX_RANK];
  int orank = 0;
  for (int d = 0; d < x->rank; d++) {
    kdims[d] = red[d] ? 1 : x->dims[d];
    if (!red[d] || keep) odims[orank++] = kdims[d];
  }
  if (!drk_iout(c, 0, x->dtype, orank, odims)) return false;
  drk_tensor_t *o = &c->out[0];
  int64_t on = drk_tensor_numel(o), n = drk_tensor_numel(x);
  int64_t ks[DRK_MAX_RANK], xs[DRK_MAX_RANK];
  drk_istrides(x->rank, kdims, ks);
  for (int d = 0; d < x->rank; d++) xs[d] = red[d] ? 0 : ks[d];
  int64_t *sts[1] = {xs};
  drk_iiter_t it;
  drk_iiter_init(&it, x->rank, x->dims, 1, sts);
  int64_t cnt = on ? n / on : 0;
  if (noop) {
    if (x->nbytes) memcpy(o->data, x->data, o->nbytes);
    return true;
  }
  bool isint = !drk_dtype_is_float(x->dtype) && (k == R_SUM || k == R_MAX || k == R_MIN || k == R_PROD || k == R_SUMSQ);
  if (isint) {
    int64_t *acc = drk_imalloc(c, (size_t)on, sizeof(int64_t));
    int64_t *v = acc ? drk_iload_i64(c, x) : NULL;
    if (!v) { drk_ifree(acc); return false; }
    int64_t init = k == R_PROD ? 1 : k == R_MAX ? INT64_MIN : k == R_MIN ? INT64_MAX : 0;
    if (x->dtype == DRK_DT_BOOL) init = k == R_MIN; /* empty sets: max false, min true */
    for (int64_t j = 0; j < on; j++) acc[j] = init;
    for (int64_t i = 0; i < n; i++) {
      int64_t a = v[i], *r = &acc[it.off[0]];
      switch (k) {
        case R_SUM: *r = (int64_t)((uint64_t)*r + (uint64_t)a); break;
        case R_PROD: *r = (int64_t)((uint64_t)*r * (uint64_t)a); break;
        case R_MAX: if (a > *r) *r = a; break;
        case R_MIN: if (a < *r) *r = a; break;
        case R_SUMSQ: *r = (int64_t)((uint64_t)*r + (uint64_t)a * (uint64_t)a); break;
      }
      drk_iiter_next(&it);
    }
    drk_istore_i64(o, acc);
    drk_ifree(acc);
    drk_ifree(v);
    return true;
  }
  double *acc = drk_imalloc(c, (size_t)on, sizeof(double));
  double *v = acc ? drk_iload_f64(c, x) : NULL;
  if (!v) { drk_ifree(acc); return false; }
  /* One output per index: its inputs in increasing input order (the reduced dims row-major),
   * the order of a single pass over the input, whatever the split. */
  reduce_job_t j = {k, v, acc, cnt, 0, {0}, {0}, 0, {0}, {0}};
  int64_t xst[DRK_MAX_RANK];
  drk_istrides(x->rank, x->dims, xst);
  for (int d = 0; d < x->rank; d++) {
    if (red[d]) j.rdims[j.nr] = x->dims[d], j.rst[j.nr++] = xst[d];
    else j.odims[j.no] = x->dims[d], j.ost[j.no++] = xst[d];
  }
  drk_ipar_for(on, drk_ipar_grain(on, 1 + (1 << 14) / (cnt ? cnt : 1)), reduce_range, &j);
  drk_istore_f64(o, acc);
  drk_ifree(acc);
  drk_ifree(v);
  return true;
}

static bool op_rsum(drk_ictx_t *c) { return reduce(c, R_SUM); }
static bool op_rmean(drk_ictx_t *c) { return reduce(c, R_MEAN); }
static bool op_rmax(drk_ictx_t *c) { return reduce(c, R_MAX); }
static bool op_rmin(drk_ictx_t *c) { return reduce(c, R_MIN); }
static bool op_rprod(drk_ictx_t *c) { return reduce(c, R_PROD); }
static bool op_rl2(drk_ictx_t *c) { return reduce(c, R_L2); }
static bool op_rsumsq(drk_ictx_t *c) { return reduce(c, R_SUMSQ); }
static bool op_rlse(drk_ictx_t *c) { return reduce(c, R_LSE); }

/* Splits x's shape around axis into outer, len, inner. */
static void split3(const drk_tensor_t *x, int axis, int64_t *outer, int64_t *len, int64_t *inner) {
  *outer = 1;
  *inner = 1;
  for (int d = 0; d < axis; d++) *outer *= x->dims[d];
  for (int d = axis + 1; d < x->rank; d++) *inner *= x->dims[d];
  *len = x->dims[axis];
}

static bool argext(drk_ictx_t *c, bool is_max) {
  if (!drk_ireq(c, 0, DRK_M_NUM)) return false;
  const drk_tensor_t *x = c->in[0];
  int axis;
  if (!drk_iaxis(c, drk_node_attr_int(c->n, "axis", 0), x->rank, &axis)) return false;
  bool keep = drk_node_attr_int(c->n, "keepdims", 1) != 0;
  bool last = drk_node_attr_int(c->n, "select_last_index", 0) != 0;
  int64_t outer, len, inner;
  split3(x, axis, &outer, &len, &inner);
  if (len == 0) return drk_ierr(c, "cannot reduce an empty axis");
  int64_t od[DRK_MAX_RANK];
  int orank = 0;
  for (int d = 0; d < x->rank; d++) {
    if (d == axis) {
      if (keep) od[orank++] = 1;
    } else {
      od[orank++] = x->dims[d];
    }
  }
  if (!drk_iout(c, 0, DRK_DT_I64, orank, od)) return false;
  int64_t *res = c->out[0].data;
  bool isf = drk_dtype_is_float(x->dtype);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t in = 0; in < inner; in++) {
      int64_t best = 0;
      int64_t base = o * len * inner + in;
      double bf = isf ? drk_tensor_get_f64(x, base) : 0;
      int64_t bi = isf ? 0 : drk_tensor_get_i64(x, base);
      for (int64_t l = 1; l < len; l++) {
        int64_t e = base + l * inner;
        bool better, equal;
        if (isf) {
          double v = drk_tensor_get_f64(x, e);
          better = is_max ? v > bf : v < bf;
          equal = v == bf;
          if (better || (equal && last)) bf = v;
        } else {
          int64_t v = drk_tensor_get_i64(x, e);
          better = is_max ? v > bi : v < bi;
          equal = v == bi;
          if (better || (equal && last)) bi = v;
        }
        if (better || (equal && last)) best = l;
      }
      res[o * inner + in] = best;
    }
  return true;
}

static bool op_argmax(drk_ictx_t *c) { return argext(c, true); }
static bool op_argmin(drk_ictx_t *c) { return argext(c, false); }

static bool op_cumsum(drk_ictx_t *c) {
  if (!drk_ireq(c, 0, DRK_M_NUM) || !drk_ireq(c, 1, DRK_M_IDX)) return false;
  const drk_tensor_t *x = c->in[0];
  if (drk_tensor_numel(c->in[1]) != 1) return drk_ierr(c, "axis must be a scalar");
  int axis;
  if (!drk_iaxis(c, drk_tensor_get_i64(c->in[1], 0), x->rank, &axis)) return false;
  bool excl = drk_node_attr_int(c->n, "exclusive", 0) != 0;
  bool rev = drk_node_attr_int(c->n, "reverse", 0) != 0;
  if (!drk_iout(c, 0, x->dtype, x->rank, x->dims)) return false;
  int64_t outer, len, inner;
  split3(x, axis, &outer, &len, &inner);
  bool isf = drk_dtype_is_float(x->dtype);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t in = 0; in < inner; in++) {
      double sf = 0;
      int64_t si = 0;
      for (int64_t l0 = 0; l0 < len; l0++) {
        int64_t l = rev ? len - 1 - l0 : l0;
        int64_t e = (o * len + l) * inner + in;
        if (isf) {
          double v = drk_tensor_get_f64(x, e);
          if (!excl) sf += v;
          drk_tensor_set_f64(&c->out[0], e, sf);
          if (excl) sf += v;
        } else {
          int64_t v = drk_tensor_get_i64(x, e);
          if (!excl) si = (int64_t)((uint64_t)si + (uint64_t)v);
          drk_tensor_set_i64(&c->out[0], e, si);
          if (excl) si = (int64_t)((uint64_t)si + (uint64_t)v);
        }
      }
    }
  return true;
}

typedef struct kv {
  double v;
  int64_t i;
} kv_t;

static int cmp_desc(const void *pa, const void *pb) {
  const kv_t *a = pa, *b = pb;
  bool an = isnan(a->v), bn = isnan(b->v);
  if (an != bn) return an ? -1 : 1;
  if (a->v > b->v) return -1;
  if (a->v < b->v) return 1;
  return a->i < b->i ? -1 : a->i > b->i;
}

static int cmp_asc(const void *pa, const void *pb) {
  const kv_t *a = pa, *b = pb;
  bool an = isnan(a->v), bn = isnan(b->v);
  if (an != bn) return an ? 1 : -1;
  if (a->v < b->v) return -1;
  if (a->v > b->v) return 1;
  return a->i < b->i ? -1 : a->i > b->i;
}

static bool op_topk(drk_ictx_t *c) {
  if (!drk_ireq(c, 0, DRK_M_NUM) || !drk_ireq(c, 1, DRK_DTM(I64))) return false;
  const drk_tensor_t *x = c->in[0];
  if (drk_tensor_numel(c->in[1]) != 1) return drk_ierr(c, "K must have one element");
  int64_t K = drk_tensor_get_i64(c->in[1], 0);
  int axis;
  if (!drk_iaxis(c, drk_node_attr_int(c->n, "axis", -1), x->rank, &axis)) return false;
  bool largest = drk_node_attr_int(c->n, "largest", 1) != 0;
  int64_t outer, len, inner;
  split3(x, axis, &outer, &len, &inner);
  if (K < 0 || K > len) return drk_ierr(c, "K=%lld out of range for axis length %lld", (long long)K, (long long)len);
  int64_t od[DRK_MAX_RANK];
  for (int d = 0; d < x->rank; d++) od[d] = d == axis ? K : x->dims[d];
  if (!drk_iout(c, 0, x->dtype, x->rank, od) || !drk_iout(c, 1, DRK_DT_I64, x->rank, od)) return false;
  kv_t *buf = drk_imalloc(c, (size_t)len, sizeof(kv_t));
  if (!buf) return false;
  bool isint = !drk_dtype_is_float(x->dtype);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t in = 0; in < inner; in++) {
      for (int64_t l = 0; l < len; l++) {
        buf[l].v = drk_tensor_get_f64(x, (o * len + l) * inner + in);
        buf[l].i = l;
      }
      qsort(buf, (size_t)len, sizeof(kv_t), largest ? cmp_desc : cmp_asc);
      for (int64_t l = 0; l < K; l++) {
        int64_t e = (o * K + l) * inner + in;
        int64_t src = (o * len + buf[l].i) * inner + in;
        if (isint) drk_tensor_set_i64(&c->out[0], e, drk_tensor_get_i64(x, src));
        else drk_icopy_elem(&c->out[0], e, x, src);
        ((int64_t *)c->out[1].data)[e] = buf[l].i;
      }
    }
  drk_ifree(buf);
  return true;
}

drk_iop_fn drk_interp_lookup_reduce(drk_op_t op) {
  switch (op) {
    case DRK_OP_REDUCE_SUM: return op_rsum;
    case DRK_OP_REDUCE_MEAN: return op_rmean;
    case DRK_OP_REDUCE_MAX: return op_rmax;
    case DRK_OP_REDUCE_MIN: return op_rmin;
    case DRK_OP_REDUCE_PROD: return op_rprod;
    case DRK_OP_REDUCE_L2: return op_rl2;
    case DRK_OP_REDUCE_SUM_SQUARE: return op_rsumsq;
    case DRK_OP_REDUCE_LOG_SUM_EXP: return op_rlse;
    case DRK_OP_ARG_MAX: return op_argmax;
    case DRK_OP_ARG_MIN: return op_argmin;
    case DRK_OP_CUM_SUM: return op_cumsum;
    case DRK_OP_TOP_K: return op_topk;
    default: return NULL;
  }
}
