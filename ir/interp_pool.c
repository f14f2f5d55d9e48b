/* Interpreter: MaxPool (with Indices, storage_order), AveragePool (count_include_pad),
 * GlobalAveragePool, GlobalMaxPool; N-D, with strides, pads, dilations, auto_pad and
 * ceil_mode (a window must start inside the input or its leading pad). */
#include "interp_internal.h"

typedef struct poolgeo {
  int r;
  int64_t in[DRK_MAX_RANK], k[DRK_MAX_RANK], out[DRK_MAX_RANK], s[DRK_MAX_RANK], d[DRK_MAX_RANK];
  int64_t pb[DRK_MAX_RANK], pe[DRK_MAX_RANK];
} poolgeo_t;

static bool ints_attr(drk_ictx_t *c, const char *name, int n, int64_t *out, int64_t dflt) {
  size_t cnt;
  const int64_t *v = drk_node_attr_ints(c->n, name, &cnt);
  for (int i = 0; i < n; i++) out[i] = dflt;
  if (!v) return true;
  if ((int)cnt != n) return drk_ierr(c, "attribute '%s' has %zu values, expected %d", name, cnt, n);
  for (int i = 0; i < n; i++) out[i] = v[i];
  return true;
}

static bool pool_geo(drk_ictx_t *c, const drk_tensor_t *x, poolgeo_t *g) {
  memset(g, 0, sizeof *g);
  if (x->rank < 3) return drk_ierr(c, "input must have rank >= 3");
  int r = g->r = x->rank - 2;
  size_t nk;
  const int64_t *ks = drk_node_attr_ints(c->n, "kernel_shape", &nk);
  if (!ks || (int)nk != r) return drk_ierr(c, "kernel_shape must have %d values", r);
  int64_t pads[2 * DRK_MAX_RANK];
  if (!ints_attr(c, "strides", r, g->s, 1) || !ints_attr(c, "dilations", r, g->d, 1) || !ints_attr(c, "pads", 2 * r, pads, 0))
    return false;
  bool ceil_mode = drk_node_attr_int(c->n, "ceil_mode", 0) != 0;
  const char *ap = drk_node_attr_string(c->n, "auto_pad", "NOTSET");
  bool upper = !strcmp(ap, "SAME_UPPER"), lower = !strcmp(ap, "SAME_LOWER"), valid = !strcmp(ap, "VALID");
  if (!upper && !lower && !valid && strcmp(ap, "NOTSET")) return drk_ierr(c, "auto_pad '%s' not supported", ap);
  for (int i = 0; i < r; i++) {
    g->in[i] = x->dims[2 + i];
    g->k[i] = ks[i];
    if (g->k[i] <= 0 || g->s[i] <= 0 || g->d[i] <= 0) return drk_ierr(c, "kernel, strides and dilations must be positive");
    g->pb[i] = pads[i];
    g->pe[i] = pads[r + i];
    int64_t ek = (g->k[i] - 1) * g->d[i] + 1;
    if (upper || lower) {
      g->out[i] = (g->in[i] + g->s[i] - 1) / g->s[i];
      int64_t tot = (g->out[i] - 1) * g->s[i] + ek - g->in[i];
      if (tot < 0) tot = 0;
      g->pb[i] = upper ? tot / 2 : tot - tot / 2;
      g->pe[i] = tot - g->pb[i];
      continue;
    }
    if (valid) g->pb[i] = g->pe[i] = 0;
    int64_t span = g->in[i] + g->pb[i] + g->pe[i] - ek;
    if (span < 0) return drk_ierr(c, "kernel larger than padded input");
    g->out[i] = (ceil_mode ? (span + g->s[i] - 1) / g->s[i] : span / g->s[i]) + 1;
    if (ceil_mode && (g->out[i] - 1) * g->s[i] >= g->in[i] + g->pb[i]) g->out[i]--;
  }
  return true;
}

/* One (image, channel) plane per index. */
typedef struct pool_job {
  const poolgeo_t *g;
  const double *v;
  double *res;
  int64_t *idx; /* Indices output or NULL */
  const int64_t *ist;
  int64_t IS, OS, KS;
  bool is_max, incl;
} pool_job_t;

static void pool_range(void *ctx, int64_t p0, int64_t p1, int tid) {
  const pool_job_t *j = ctx;
  const poolgeo_t *gp = j->g;
  const poolgeo_t g = *gp;
  int r = g.r;
  const double *v = j->v;
  double *res = j->res;
  const int64_t *ist = j->ist;
  int64_t IS = j->IS, OS = j->OS, KS = j->KS;
  bool is_max = j->is_max, incl = j->incl, want_idx = j->idx != NULL;
  for (int64_t pl = p0; pl < p1; pl++) {
    const double *xp = v + pl * IS;
    int64_t oidx[DRK_MAX_RANK] = {0};
    for (int64_t oo = 0; oo < OS; oo++) {
      double best = -INFINITY, sum = 0;
      int64_t bidx = -1, cnt = 0, cnt_pad = 0;
      int64_t kidx[DRK_MAX_RANK] = {0};
      for (int64_t kk = 0; kk < KS; kk++) {
        bool inside = true, inpad = true;
        int64_t off = 0, ioff = 0;
        for (int i = 0; i < r; i++) {
          int64_t p = oidx[i] * g.s[i] - g.pb[i] + kidx[i] * g.d[i];
          if (p < 0 || p >= g.in[i]) inside = false;
          if (p < -g.pb[i] || p >= g.in[i] + g.pe[i]) inpad = false;
          off = off * g.in[i] + p;
          ioff += p * ist[i];
        }
        if (inpad) cnt_pad++;
        if (inside) {
          double a = xp[off];
          cnt++;
          sum += a;
          if (a > best || bidx < 0 || isnan(a)) {
            if (!(isnan(best) && bidx >= 0)) {
              best = a;
              bidx = ioff;
            }
          }
        }
        for (int i = r - 1; i >= 0; i--) {
          if (++kidx[i] < g.k[i]) break;
          kidx[i] = 0;
        }
      }
      double outv;
      if (is_max) outv = bidx < 0 ? -INFINITY : best;
      else outv = sum / (double)(incl ? cnt_pad : cnt);
      res[pl * OS + oo] = outv;
      if (want_idx) j->idx[pl * OS + oo] = pl * IS + (bidx < 0 ? 0 : bidx);
      for (int i = r - 1; i >= 0; i--) {
        if (++oidx[i] < g.out[i]) break;
        oidx[i] = 0;
      }
    }
  }
}

static bool pool(drk_ictx_t *c, bool is_max) {
  if (!drk_ireq(c, 0, DRK_M_FLOAT | (is_max ? DRK_DTM(I8) | DRK_DTM(U8) : 0))) return false;
  const drk_tensor_t *x = c->in[0];
  poolgeo_t g;
  if (!pool_geo(c, x, &g)) return false;
  int r = g.r;
  int64_t od[DRK_MAX_RANK];
  od[0] = x->dims[0];
  od[1] = x->dims[1];
  for (int i = 0; i < r; i++) od[2 + i] = g.out[i];
  if (!drk_iout(c, 0, x->dtype, x->rank, od)) return false;
  bool want_idx = is_max && c->n_out > 1;
  if (want_idx && !drk_iout(c, 1, DRK_DT_I64, x->rank, od)) return false;
  bool incl = drk_node_attr_int(c->n, "count_include_pad", 0) != 0;
  bool colmajor = drk_node_attr_int(c->n, "storage_order", 0) != 0;
  int64_t IS = 1, OS = 1, KS = 1;
  for (int i = 0; i < r; i++) {
    IS *= g.in[i];
    OS *= g.out[i];
    KS *= g.k[i];
  }
  int64_t ist[DRK_MAX_RANK]; /* spatial strides used for Indices */
  if (colmajor) {
    int64_t s = 1;
    for (int i = 0; i < r; i++) { ist[i] = s; s *= g.in[i]; }
  } else {
    drk_istrides(r, g.in, ist);
  }
  double *v = drk_iload_f64(c, x);
  double *res = v ? drk_imalloc(c, (size_t)drk_tensor_numel(&c->out[0]), sizeof(double)) : NULL;
  if (!res) { drk_ifree(v); return false; }
  int64_t planes = x->dims[0] * x->dims[1];
  pool_job_t j = {&g, v, res, want_idx ? (int64_t *)c->out[1].data : NULL, ist, IS, OS, KS, is_max, incl};
  drk_ipar_for(planes, drk_ipar_grain(planes, 1 + (1 << 13) / (OS * KS > 0 ? OS * KS : 1)), pool_range, &j);
  drk_istore_f64(&c->out[0], res);
  drk_ifree(v);
  drk_ifree(res);
  return true;
}

static bool op_maxpool(drk_ictx_t *c) { return pool(c, true); }
static bool op_avgpool(drk_ictx_t *c) { return pool(c, false); }

static bool global_pool(drk_ictx_t *c, bool is_max) {
  if (!drk_ireq(c, 0, DRK_M_FLOAT)) return false;
  const drk_tensor_t *x = c->in[0];
  if (x->rank < 2) return drk_ierr(c, "input must have rank >= 2");
  int64_t od[DRK_MAX_RANK];
  for (int i = 0; i < x->rank; i++) od[i] = i < 2 ? x->dims[i] : 1;
  if (!drk_iout(c, 0, x->dtype, x->rank, od)) return false;
  int64_t planes = x->dims[0] * x->dims[1], IS = 1;
  for (int i = 2; i < x->rank; i++) IS *= x->dims[i];
  double *v = drk_iload_f64(c, x);
  if (!v) return false;
  for (int64_t p = 0; p < planes; p++) {
    double acc = is_max ? -INFINITY : 0;
    for (int64_t i = 0; i < IS; i++) {
      double a = v[p * IS + i];
      if (is_max) acc = (a > acc || isnan(a)) ? a : acc;
      else acc += a;
    }
    v[p] = is_max ? acc : acc / (double)IS;
  }
  drk_istore_f64(&c->out[0], v);
  drk_ifree(v);
  return true;
}

static bool op_gavg(drk_ictx_t *c) { return global_pool(c, false); }
static bool op_gmax(drk_ictx_t *c) { return global_pool(c, true); }

drk_iop_fn drk_interp_lookup_pool(drk_op_t op) {
  switch (op) {
    case DRK_OP_MAX_POOL: return op_maxpool;
    case DRK_OP_AVERAGE_POOL: return op_avgpool;
    case DRK_OP_GLOBAL_AVERAGE_POOL: return op_gavg;
    case DRK_OP_GLOBAL_MAX_POOL: return op_gmax;
    default: return NULL;
  }
}
