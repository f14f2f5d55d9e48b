/* Interpreter: Resize (opset 19+ semantics): nearest/linear/cubic, every
 * coordinate_transformation_mode (and opset 11's tf_half_pixel_for_nn), nearest_mode, scales or sizes, axes,
 * keep_aspect_ratio_policy, exclude_outside, cubic_coeff_a, extrapolation_value.
 * antialias=1 is reported as unsupported.
 *
 * Interpolation is separable: per axis and output coordinate we compute up to four
 * (index, weight) taps with the ONNX reference's conventions (edge clamping of taps), then
 * each output element sums the products of taps over all axes in f64. */
#include "interp_internal.h"

enum { TAPS = 4 };

typedef struct axis_taps {
  int n;             /* taps per output coordinate */
  int64_t *idx;      /* [out][n] */
  double *w;         /* [out][n] */
  unsigned char *ex; /* [out]: extrapolate (tf_crop_and_resize outside the input) */
} axis_taps_t;

static void cubic_coeffs(double t, double A, double *c) {
  double r1 = t + 1, r2 = 1 - t, r3 = 2 - t;
  c[0] = ((A * r1 - 5 * A) * r1 + 8 * A) * r1 - 4 * A;
  c[1] = ((A + 2) * t - (A + 3)) * t * t + 1;
  c[2] = ((A + 2) * r2 - (A + 3)) * r2 * r2 + 1;
  c[3] = ((A * r3 - 5 * A) * r3 + 8 * A) * r3 - 4 * A;
}

static bool op_resize(drk_ictx_t *c) {
  if (!drk_ireq(c, 0, DRK_M_NUM)) return false;
  const drk_tensor_t *x = c->in[0], *roi = drk_iin(c, 1), *sc = drk_iin(c, 2), *sz = drk_iin(c, 3);
  if (roi && drk_tensor_numel(roi) == 0) roi = NULL;
  if (sc && drk_tensor_numel(sc) == 0) sc = NULL;
  if (sz && drk_tensor_numel(sz) == 0) sz = NULL;
  if (!sc == !sz) return drk_ierr(c, "exactly one of scales and sizes must be given");
  if (drk_node_attr_int(c->n, "antialias", 0)) return drk_ierr(c, "antialias=1 is not supported");
  const char *mode = drk_node_attr_string(c->n, "mode", "nearest");
  const char *ctm = drk_node_attr_string(c->n, "coordinate_transformation_mode", "half_pixel");
  const char *nm = drk_node_attr_string(c->n, "nearest_mode", "round_prefer_floor");
  const char *kar = drk_node_attr_string(c->n, "keep_aspect_ratio_policy", "stretch");
  double A = (float)drk_node_attr_float(c->n, "cubic_coeff_a", -0.75);
  bool excl = drk_node_attr_int(c->n, "exclude_outside", 0) != 0;
  double extra = (float)drk_node_attr_float(c->n, "extrapolation_value", 0.0);
  int m = !strcmp(mode, "nearest") ? 0 : !strcmp(mode, "linear") ? 1 : !strcmp(mode, "cubic") ? 2 : -1;
  if (m < 0) return drk_ierr(c, "mode '%s' not supported", mode);
  int ct = !strcmp(ctm, "half_pixel") ? 0 : !strcmp(ctm, "half_pixel_symmetric") ? 1 : !strcmp(ctm, "pytorch_half_pixel") ? 2
         : !strcmp(ctm, "align_corners") ? 3 : !strcmp(ctm, "asymmetric") ? 4 : !strcmp(ctm, "tf_crop_and_resize") ? 5
         : !strcmp(ctm, "tf_half_pixel_for_nn") ? 6 : -1;
  if (ct < 0) return drk_ierr(c, "coordinate_transformation_mode '%s' not supported", ctm);
  int nmode = !strcmp(nm, "round_prefer_floor") ? 0 : !strcmp(nm, "round_prefer_ceil") ? 1 : !strcmp(nm, "floor") ? 2 : !strcmp(nm, "ceil") ? 3 : -1;
  if (nmode < 0) return drk_ierr(c, "nearest_mode '%s' not supported", nm);
  int kp = !strcmp(kar, "stretch") ? 0 : !strcmp(kar, "not_larger") ? 1 : !strcmp(kar, "not_smaller") ? 2 : -1;
  if (kp < 0) return drk_ierr(c, "keep_aspect_ratio_policy '%s' not supported", kar);
  int r = x->rank;
  size_t nax;
  const int64_t *axattr = drk_node_attr_ints(c->n, "axes", &nax);
  int axes[DRK_MAX_RANK];
  bool seen[DRK_MAX_RANK] = {false};
  if (axattr) {
    if ((int)nax > r) return drk_ierr(c, "too many axes");
    for (size_t i = 0; i < nax; i++) {
      if (!drk_iaxis(c, axattr[i], r, &axes[i])) return false;
      if (seen[axes[i]]) return drk_ierr(c, "axis repeated");
      seen[axes[i]] = true;
    }
  } else {
    nax = (size_t)r;
    for (int i = 0; i < r; i++) axes[i] = i;
  }
  double scale[DRK_MAX_RANK];
  int64_t od[DRK_MAX_RANK];
  double rs[DRK_MAX_RANK], re[DRK_MAX_RANK];
  for (int i = 0; i < r; i++) {
    scale[i] = 1;
    od[i] = x->dims[i];
    rs[i] = 0;
    re[i] = 1;
  }
  if (sc) {
    if (!drk_dtype_is_float(sc->dtype) || drk_tensor_numel(sc) != (int64_t)nax) return drk_ierr(c, "scales must hold %zu floats", nax);
    for (size_t i = 0; i < nax; i++) {
      double s = drk_tensor_get_f64(sc, (int64_t)i);
      if (!(s > 0)) return drk_ierr(c, "scales must be positive");
      scale[axes[i]] = s;
      double o = floor((double)x->dims[axes[i]] * s);
      od[axes[i]] = (int64_t)o;
    }
  } else {
    if (sz->dtype != DRK_DT_I64 || drk_tensor_numel(sz) != (int64_t)nax) return drk_ierr(c, "sizes must hold %zu int64s", nax);
    if (kp == 0) {
      for (size_t i = 0; i < nax; i++) {
        int a = axes[i];
        od[a] = drk_tensor_get_i64(sz, (int64_t)i);
        if (od[a] < 0) return drk_ierr(c, "negative size");
        scale[a] = x->dims[a] ? (double)od[a] / (double)x->dims[a] : 1;
      }
    } else {
      double s = kp == 1 ? INFINITY : 0;
      for (size_t i = 0; i < nax; i++) {
        int a = axes[i];
        double v = x->dims[a] ? (double)drk_tensor_get_i64(sz, (int64_t)i) / (double)x->dims[a] : 1;
        s = kp == 1 ? (v < s ? v : s) : (v > s ? v : s);
      }
      for (size_t i = 0; i < nax; i++) {
        int a = axes[i];
        scale[a] = s;
        od[a] = (int64_t)nearbyint(s * (double)x->dims[a]);
      }
    }
  }
  if (ct == 5) {
    if (!roi || !drk_dtype_is_float(roi->dtype) || drk_tensor_numel(roi) != 2 * (int64_t)nax)
      return drk_ierr(c, "tf_crop_and_resize needs roi with %zu values", 2 * nax);
    for (size_t i = 0; i < nax; i++) {
      rs[axes[i]] = drk_tensor_get_f64(roi, (int64_t)i);
      re[axes[i]] = drk_tensor_get_f64(roi, (int64_t)(nax + i));
    }
  }
  if (!drk_iout(c, 0, x->dtype, r, od)) return false;
  axis_taps_t tp[DRK_MAX_RANK];
  memset(tp, 0, sizeof tp);
  bool ok = true;
  for (int d = 0; d < r && ok; d++) {
    int64_t L = x->dims[d], O = od[d];
    int n = m == 0 ? 1 : m == 1 ? 2 : 4;
    tp[d].n = n;
    tp[d].idx = drk_imalloc(c, (size_t)(O * n), sizeof(int64_t));
    tp[d].w = drk_imalloc(c, (size_t)(O * n), sizeof(double));
    tp[d].ex = drk_imalloc(c, (size_t)O, 1);
    if (!tp[d].idx || !tp[d].w || !tp[d].ex) { ok = false; break; }
    if (L == 0 && O > 0) { ok = drk_ierr(c, "cannot resize an empty axis"); break; }
    double s = scale[d];
    for (int64_t o = 0; o < O; o++) {
      /* The reference uses the unrounded output length scale * L for the modes that need it. */
      double xo = (double)o, xi, ow = s * (double)L;
      switch (ct) {
        case 0: xi = (xo + 0.5) / s - 0.5; break;
        case 1: {
          double adj = (double)O / ow, center = (double)L / 2;
          xi = center * (1 - adj) + (xo + 0.5) / s - 0.5;
          break;
        }
        case 2: xi = ow > 1 ? (xo + 0.5) / s - 0.5 : -0.5; break;
        case 3: xi = ow == 1 ? 0 : xo * (double)(L - 1) / (ow - 1); break;
        case 4: xi = xo / s; break;
        case 6: xi = (xo + 0.5) / s; break;
        default:
          xi = ow > 1 ? rs[d] * (double)(L - 1) + xo * (re[d] - rs[d]) * (double)(L - 1) / (ow - 1)
                      : 0.5 * (rs[d] + re[d]) * (double)(L - 1);
          break;
      }
      tp[d].ex[o] = ct == 5 && (xi < 0 || xi > (double)(L - 1));
      int64_t *ix = tp[d].idx + o * n;
      double *w = tp[d].w + o * n;
      if (m == 0) {
        double f = floor(xi), fr = xi - f;
        int64_t k;
        if (xi == f) k = (int64_t)f;
        else switch (nmode) {
          case 0: k = fr <= 0.5 ? (int64_t)f : (int64_t)f + 1; break;
          case 1: k = fr < 0.5 ? (int64_t)f : (int64_t)f + 1; break;
          case 2: k = (int64_t)f; break;
          default: k = (int64_t)f + 1; break;
        }
        ix[0] = k < 0 ? 0 : k >= L ? L - 1 : k;
        w[0] = 1;
        continue;
      }
      double f = floor(xi), t = xi - f;
      int64_t base = (int64_t)f;
      if (m == 1) {
        ix[0] = base;
        ix[1] = base + 1;
        w[0] = 1 - t;
        w[1] = t;
      } else {
        for (int k = 0; k < 4; k++) ix[k] = base - 1 + k;
        cubic_coeffs(t, A, w);
      }
      if (excl) {
        double sum = 0;
        for (int k = 0; k < n; k++) {
          if (ix[k] < 0 || ix[k] >= L) w[k] = 0;
          sum += w[k];
        }
        if (sum != 0)
          for (int k = 0; k < n; k++) w[k] /= sum;
      }
      for (int k = 0; k < n; k++) ix[k] = ix[k] < 0 ? 0 : ix[k] >= L ? L - 1 : ix[k];
    }
  }
  double *X = ok ? drk_iload_f64(c, x) : NULL;
  double *Y = X ? drk_imalloc(c, (size_t)drk_tensor_numel(&c->out[0]), sizeof(double)) : NULL;
  if (Y) {
    int64_t xs[DRK_MAX_RANK];
    drk_istrides(r, x->dims, xs);
    int64_t oidx[DRK_MAX_RANK] = {0};
    for (int64_t j = 0, tot = drk_tensor_numel(&c->out[0]); j < tot; j++) {
      bool ex = false;
      int ntap = 1;
      for (int d = 0; d < r; d++) {
        if (tp[d].ex[oidx[d]]) ex = true;
        ntap *= tp[d].n;
      }
      double acc = 0;
      if (ex) {
        acc = extra;
      } else {
        for (int t = 0; t < ntap; t++) {
          int rem = t;
          double w = 1;
          int64_t off = 0;
          for (int d = r - 1; d >= 0; d--) {
            int k = rem % tp[d].n;
            rem /= tp[d].n;
            w *= tp[d].w[oidx[d] * tp[d].n + k];
            off += tp[d].idx[oidx[d] * tp[d].n + k] * xs[d];
          }
          if (w != 0) acc += w * X[off];
        }
      }
      Y[j] = acc;
      for (int d = r - 1; d >= 0; d--) {
        if (++oidx[d] < od[d]) break;
        oidx[d] = 0;
      }
    }
    if (!drk_dtype_is_float(x->dtype))
      for (int64_t j = 0, tot = drk_tensor_numel(&c->out[0]); j < tot; j++) Y[j] = nearbyint(Y[j]);
    drk_istore_f64(&c->out[0], Y);
  }
  bool done = Y != NULL;
  drk_ifree(X);
  drk_ifree(Y);
  for (int d = 0; d < r; d++) {
    drk_ifree(tp[d].idx);
    drk_ifree(tp[d].w);
    drk_ifree(tp[d].ex);
  }
  return done;
}

drk_iop_fn drk_interp_lookup_resize(drk_op_t op) { return op == DRK_OP_RESIZE ? op_resize : NULL; }
