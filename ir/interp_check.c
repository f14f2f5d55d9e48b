/* `drkc run --check`'s comparison of an output against the interpreter's reference, and the
 * line it prints. A reference that is ~0 everywhere (every finite |ref| below
 * DRK_CHECK_TINY_REF) makes ‖out − ref‖ / ‖ref‖ meaningless (0/0, or noise over noise): the
 * check then says so and judges the absolute error max |out − ref| against the tolerance. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "interp.h"

void drk_interp_check(const drk_tensor_t *out, const drk_tensor_t *ref, double tol, drk_check_t *r) {
  memset(r, 0, sizeof *r);
  r->rel = drk_tensor_rel_error(out, ref);
  bool same_shape = out->rank == ref->rank;
  for (int i = 0; same_shape && i < ref->rank; i++) same_shape = out->dims[i] == ref->dims[i];
  bool nonfinite_ref = false;
  if (same_shape) {
    int64_t n = drk_tensor_numel(ref);
    for (int64_t i = 0; i < n; i++) {
      double x = drk_tensor_get_f64(out, i), y = drk_tensor_get_f64(ref, i);
      if (!isfinite(y)) {
        nonfinite_ref = true;
        continue;
      }
      if (fabs(y) > r->ref_max) r->ref_max = fabs(y);
      double e = fabs(x - y);
      if (isnan(e) || e > r->abs_max) r->abs_max = isnan(e) ? INFINITY : e;
    }
  }
  r->ref_zero = same_shape && !nonfinite_ref && drk_tensor_numel(ref) > 0 && r->ref_max < DRK_CHECK_TINY_REF;
  if (r->ref_zero) r->pass = !isnan(r->rel) && r->abs_max <= tol; /* NaN never passes */
  else r->pass = r->rel <= tol;
}

void drk_interp_check_line(const drk_check_t *r, size_t i, const char *name, double tol, char *buf, size_t n) {
  if (r->ref_zero)
    snprintf(buf, n,
             "check output %zu '%s': reference is ~0 everywhere (max |ref| = %.3g): relative error not meaningful; "
             "absolute error %.3g (tolerance %.0e, absolute) %s",
             i, name, r->ref_max, r->abs_max, tol, r->pass ? "PASS" : "FAIL");
  else
    snprintf(buf, n, "check output %zu '%s': rel error %.3g (tolerance %.0e) %s", i, name, r->rel, tol,
             r->pass ? "PASS" : "FAIL");
}
