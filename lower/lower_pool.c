/* Lowering of MaxPool and AveragePool (1-3 spatial dims, strides, pads, dilations, auto_pad,
 * ceil_mode through the inferred output shape, count_include_pad) and GlobalAverage/MaxPool
 * (row reductions in lower_reduce.c).
 *
 * A flat kernel over the output: each element unravels into (n*c, o...), a loop over the
 * kernel window (scalar index unravelled into kernel coordinates) carries the max or the
 * sum and the count of counted positions; out-of-image positions are masked off.
 *
 * MaxPool's Indices output (int64): the loop then carries the best value and its index as
 * the interpreter (ir/interp_pool.c) picks them: the first window position (row-major over
 * the kernel) holding the maximum, or the first NaN; an index is the flattened position in
 * the input, (n*C + c) * prod(in) + the spatial offset, spatial dims row-major
 * (storage_order 0) or column-major (storage_order 1); a window with no position inside
 * the input gives (n*C + c) * prod(in) and the value -inf (the dtype's lowest for i8/u8).
 *
 * MaxPoolNHWC / AveragePoolNHWC (the layout pass, passes/layout_nhwc.c): the same kernel over
 * [N, spatial..., C]: an output element unravels into (pixel, c) with c innermost, and the
 * window's taps are C elements apart per spatial step (no Indices output).
 *
 * Requires: static shapes. */
#include <math.h>
#include <string.h>

#include "lower/lower_internal.h"

#define BIN(op, a, b) lw_bin(c, DRK_TOP_##op, (a), (b))

bool drk_lower_pool_supported(const drk_node_t *n, const char **why) {
  if (n->op == DRK_OP_GLOBAL_AVERAGE_POOL || n->op == DRK_OP_GLOBAL_MAX_POOL) return drk_lower_reduce_supported(n, why);
  drk_dtype_t t = n->inputs[0]->dtype;
  bool fl = t == DRK_DT_F32 || t == DRK_DT_F16 || t == DRK_DT_BF16 || t == DRK_DT_F64;
  bool mx = n->op == DRK_OP_MAX_POOL || n->op == DRK_OP_MAX_POOL_NHWC;
  if (!fl && !(mx && (t == DRK_DT_I8 || t == DRK_DT_U8))) { *why = "dtype"; return false; }
  return true;
}

bool drk_lower_pool(drk_lctx_t *c) {
  const drk_node_t *n = c->node;
  if (n->op == DRK_OP_GLOBAL_AVERAGE_POOL || n->op == DRK_OP_GLOBAL_MAX_POOL) return drk_lower_reduce(c);
  const drk_value_t *x = n->inputs[0], *y = n->outputs[0];
  int r = x->shape.rank, ns = r - 2;
  if (ns < 1 || ns > 3) return lw_err(c, "pooling over %d spatial dims is not lowered for GPU yet", ns);
  bool mx = n->op == DRK_OP_MAX_POOL || n->op == DRK_OP_MAX_POOL_NHWC;
  bool cl = n->op == DRK_OP_MAX_POOL_NHWC || n->op == DRK_OP_AVERAGE_POOL_NHWC; /* channels last */
  int sp0 = cl ? 1 : 2;                                                          /* first spatial dim */
  int64_t CH = cl ? x->shape.dims[r - 1].size : 1; /* elements between spatial neighbours */
  size_t cnt;
  const int64_t *ks = drk_node_attr_ints(n, "kernel_shape", &cnt);
  if (!ks || (int)cnt != ns) return lw_err(c, "kernel_shape must have %d elements", ns);
  const int64_t *strides = drk_node_attr_ints(n, "strides", &cnt);
  const int64_t *dils = drk_node_attr_ints(n, "dilations", &cnt);
  const int64_t *pads = drk_node_attr_ints(n, "pads", &cnt);
  const char *ap = drk_node_attr_string(n, "auto_pad", "NOTSET");
  bool incl = drk_node_attr_int(n, "count_include_pad", 0) != 0;
  int64_t I[3], O[3], K[3], S[3], D[3], PB[3], PE[3], KS = 1, PO = 1, PI = 1;
  for (int d = 0; d < ns; d++) {
    I[d] = x->shape.dims[sp0 + d].size;
    O[d] = y->shape.dims[sp0 + d].size;
    K[d] = ks[d];
    S[d] = strides ? strides[d] : 1;
    D[d] = dils ? dils[d] : 1;
    PB[d] = pads ? pads[d] : 0;
    PE[d] = pads ? pads[d + ns] : 0;
    if (strcmp(ap, "SAME_UPPER") == 0 || strcmp(ap, "SAME_LOWER") == 0) {
      int64_t tot = (O[d] - 1) * S[d] + (K[d] - 1) * D[d] + 1 - I[d];
      if (tot < 0) tot = 0;
      PB[d] = strcmp(ap, "SAME_UPPER") == 0 ? tot / 2 : tot - tot / 2;
      PE[d] = tot - PB[d];
    } else if (strcmp(ap, "VALID") == 0) {
      PB[d] = PE[d] = 0;
    }
    KS *= K[d];
    PO *= O[d];
    PI *= I[d];
  }
  const drk_value_t *yi = mx && n->n_outputs > 1 ? n->outputs[1] : NULL;
  if (yi && yi->dtype != DRK_DT_I64) return lw_err(c, "Indices must be i64, not %s", drk_dtype_name(yi->dtype));
  /* spatial strides of the Indices output: row-major, or column-major for storage_order 1 */
  int64_t ist[3], sp = 1;
  bool colmajor = drk_node_attr_int(n, "storage_order", 0) != 0;
  for (int j = 0; j < ns; j++) {
    int d = colmajor ? j : ns - 1 - j;
    ist[d] = sp;
    sp *= I[d];
  }
  int64_t big = lw_numel(x) > lw_numel(y) ? lw_numel(x) : lw_numel(y);
  lw_kernel_begin(c, lw_index_dtype_for(big));
  tv_t *px = lw_param_buf(c, x, "x");
  tv_t *py = lw_param_buf(c, y, "y");
  tv_t *pi = yi ? lw_param_buf(c, yi, "indices") : NULL;
  lw_flat_t f;
  lw_flat_begin(c, lw_numel(y), &f);
  f.s.kind = "pool";
  drk_dtype_t at = lw_compute_dtype(x->dtype);
  if (!drk_dtype_is_float(at)) at = DRK_DT_I32;
  int64_t od[4] = {1, O[0], ns > 1 ? O[1] : 1, ns > 2 ? O[2] : 1};
  od[0] = lw_numel(y) / (PO * CH);
  /* NCHW: offs = (n*C + c)*PO + pixel; NHWC: offs = (n*PO + pixel)*C + c */
  tv_t *pix = CH > 1 ? BIN(DIV, f.offs, lw_ci(c, f.offs, CH)) : f.offs;
  tv_t *nc = PO > 1 ? BIN(DIV, pix, lw_ci(c, pix, PO)) : pix;
  tv_t *base = BIN(MUL, nc, lw_ci(c, nc, PI * CH));
  if (CH > 1) base = BIN(ADD, base, BIN(REM, f.offs, lw_ci(c, f.offs, CH)));
  tv_t *org[3];
  for (int d = 0; d < ns; d++) {
    tv_t *o = lw_coord(c, pix, ns + 1, od, d + 1);
    org[d] = BIN(SUB, BIN(MUL, o, lw_ci(c, o, S[d])), lw_ci(c, o, PB[d]));
  }
  double lo = drk_dtype_is_float(at) ? -INFINITY : x->dtype == DRK_DT_U8 ? 0 : -128;
  /* carried: max or sum, count, and with Indices the best's spatial offset (-1: none yet) */
  tv_t *init[3] = {lw_cdt(c, f.offs, at, mx ? lo : 0), lw_cdt(c, f.offs, at, 0), lw_ci(c, f.offs, -1)};
  int ncar = yi ? 3 : 2;
  drk_tile_op_t *loop = drk_tile_build_for_begin(&c->b, lw_sci(c, c->it, 0), lw_sci(c, c->it, KS), lw_sci(c, c->it, 1), ncar, init);
  tv_t *kk = loop->regions[0]->args[0], *acc = loop->regions[0]->args[1], *count = loop->regions[0]->args[2];
  tv_t *bidx = yi ? loop->regions[0]->args[3] : NULL, *ioff = NULL;
  int64_t kd[3] = {K[0], ns > 1 ? K[1] : 1, ns > 2 ? K[2] : 1};
  tv_t *off = base, *ok = f.mask, *inpad = f.mask;
  int64_t istr = 1;
  for (int d = ns - 1; d >= 0; d--) {
    tv_t *kc = lw_coord(c, kk, ns, kd, d);
    tv_t *ih = BIN(ADD, org[d], lw_splat(c, BIN(MUL, kc, lw_sci(c, c->it, D[d])), &f.fr));
    ok = BIN(AND, ok, BIN(AND, lw_cmp(c, "ge", ih, lw_ci(c, ih, 0)), lw_cmp(c, "lt", ih, lw_ci(c, ih, I[d]))));
    if (incl)
      inpad = BIN(AND, inpad, BIN(AND, lw_cmp(c, "ge", ih, lw_ci(c, ih, -PB[d])), lw_cmp(c, "lt", ih, lw_ci(c, ih, I[d] + PE[d]))));
    off = BIN(ADD, off, istr * CH == 1 ? ih : BIN(MUL, ih, lw_ci(c, ih, istr * CH)));
    if (yi) {
      tv_t *t = ist[d] == 1 ? ih : BIN(MUL, ih, lw_ci(c, ih, ist[d]));
      ioff = ioff ? BIN(ADD, ioff, t) : t;
    }
    istr *= I[d];
  }
  tv_t *v = lw_cast(c, lw_load(c, px, off, ok, mx ? lo : 0), at);
  tv_t *y2[3];
  if (yi) {
    /* the interpreter's pick: the first inside position, then a greater value, or a NaN
     * while the best is not NaN */
    tv_t *better = BIN(OR, lw_cmp(c, "lt", bidx, lw_ci(c, bidx, 0)), lw_cmp(c, "gt", v, acc));
    if (drk_dtype_is_float(at))
      better = BIN(OR, better, BIN(AND, lw_cmp(c, "ne", v, v), lw_cmp(c, "eq", acc, acc)));
    tv_t *take = BIN(AND, ok, better);
    y2[0] = lw_sel(c, take, v, acc);
    y2[1] = count;
    y2[2] = lw_sel(c, take, ioff, bidx);
  } else if (mx) {
    y2[0] = BIN(MAX, acc, v);
    y2[1] = count;
  } else {
    y2[0] = BIN(ADD, acc, v);
    y2[1] = BIN(ADD, count, lw_sel(c, incl ? inpad : ok, lw_cf(c, count, 1), lw_cf(c, count, 0)));
  }
  loop = drk_tile_build_for_end(&c->b, ncar, y2);
  tv_t *res = loop->results[0];
  if (!mx) res = BIN(DIV, res, BIN(MAX, loop->results[1], lw_cf(c, res, 1)));
  lw_store(c, py, f.offs, res, f.mask);
  if (pi) {
    tv_t *bi = loop->results[2];
    bi = lw_sel(c, lw_cmp(c, "lt", bi, lw_ci(c, bi, 0)), lw_ci(c, bi, 0), bi);
    lw_store(c, pi, f.offs, lw_cast(c, BIN(ADD, base, bi), DRK_DT_I64), f.mask);
  }
  lw_flat_end(c, &f);
  return true;
}
