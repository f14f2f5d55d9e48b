/* Lowering of elementwise graph ops (with multidirectional broadcast), casts, Where, Clip,
 * comparisons, logic, activations, PRelu, Quantize/DequantizeLinear, and inference-mode
 * BatchNormalization, to flat 1-D tile kernels: offs = pid*BLOCK + range, per-input offsets
 * by unravelling offs over the output dims with broadcast strides (0 on broadcast dims),
 * masked loads and stores.
 *
 * Requires: static shapes (checked by the driver). Guarantees: f16/bf16 math happens in
 * f32 and rounds to nearest on the store; scalar constant inputs become immediates. The
 * per-op math (drk_lower_ew_math) works on tile values of any frame, so fused kernels
 * (lower_fused.c) emit exactly the same arithmetic as the one-node kernels. */
#include <math.h>
#include <string.h>

#include "lower/lower_internal.h"

static bool float_only(drk_op_t op) {
  switch (op) {
  case DRK_OP_SQRT: case DRK_OP_EXP: case DRK_OP_LOG: case DRK_OP_ERF: case DRK_OP_TANH: case DRK_OP_SIGMOID:
  case DRK_OP_ELU: case DRK_OP_SELU: case DRK_OP_GELU: case DRK_OP_HARD_SIGMOID: case DRK_OP_HARD_SWISH:
  case DRK_OP_SOFTPLUS: case DRK_OP_SOFTSIGN: case DRK_OP_MISH: case DRK_OP_SIN: case DRK_OP_COS: case DRK_OP_FLOOR:
  case DRK_OP_CEIL: case DRK_OP_ROUND: case DRK_OP_RECIPROCAL: case DRK_OP_IS_NAN: case DRK_OP_IS_INF:
  case DRK_OP_LEAKY_RELU: case DRK_OP_QUANTIZE_LINEAR:
    return true;
  default: return false;
  }
}

static bool bool_only(drk_op_t op) {
  return op == DRK_OP_NOT || op == DRK_OP_AND || op == DRK_OP_OR || op == DRK_OP_XOR;
}

static bool is_f8(drk_dtype_t t) { return t == DRK_DT_F8E4M3 || t == DRK_DT_F8E5M2; }

bool drk_lower_ew_supported(const drk_node_t *n, const char **why) {
  if (n->op == DRK_OP_BATCH_NORMALIZATION) {
    if (n->n_outputs > 1 && (n->outputs[1] || (n->n_outputs > 2 && n->outputs[2]))) { *why = "training mode"; return false; }
    if (!drk_dtype_is_float(n->inputs[0]->dtype) || is_f8(n->inputs[0]->dtype)) { *why = "dtype"; return false; }
    return true;
  }
  const drk_value_t *x = n->op == DRK_OP_WHERE ? n->inputs[1] : n->inputs[0];
  const drk_value_t *y = n->outputs[0];
  if (!x || !lw_dtype_ok(x->dtype) || !lw_dtype_ok(y->dtype)) { *why = "sub-byte dtype"; return false; }
  for (int i = 0; i < n->n_inputs; i++)
    if (n->inputs[i] && !lw_dtype_ok(n->inputs[i]->dtype)) { *why = "sub-byte dtype"; return false; }
  drk_dtype_t t = x->dtype;
  bool f8 = is_f8(t) || is_f8(y->dtype);
  if (f8 && n->op != DRK_OP_CAST && n->op != DRK_OP_CAST_LIKE && n->op != DRK_OP_DEQUANTIZE_LINEAR) { *why = "f8 math"; return false; }
  if (n->op == DRK_OP_QUANTIZE_LINEAR) {
    if (drk_node_attr_int(n, "block_size", 0) != 0) { *why = "blocked quantization"; return false; }
    drk_dtype_t o = y->dtype;
    if (o != DRK_DT_U8 && o != DRK_DT_I8 && o != DRK_DT_I16 && o != DRK_DT_I32) { *why = "output dtype"; return false; }
  }
  if (n->op == DRK_OP_DEQUANTIZE_LINEAR && drk_node_attr_int(n, "block_size", 0) != 0) { *why = "blocked quantization"; return false; }
  if (n->op == DRK_OP_CAST || n->op == DRK_OP_CAST_LIKE || n->op == DRK_OP_DEQUANTIZE_LINEAR) return true;
  if (float_only(n->op) && !drk_dtype_is_float(t)) { *why = "integer input"; return false; }
  if (bool_only(n->op) && t != DRK_DT_BOOL) { *why = "non-bool input"; return false; }
  if (!bool_only(n->op) && t == DRK_DT_BOOL && n->op != DRK_OP_EQUAL && n->op != DRK_OP_WHERE) { *why = "bool input"; return false; }
  if (n->op == DRK_OP_POW && !drk_dtype_is_float(t) && t != DRK_DT_I32 && t != DRK_DT_I64) { *why = "integer dtype"; return false; }
  return true;
}

/* The dim of the output that a per-channel (1-D) operand runs along, or -1. */
static int vec_axis(const drk_node_t *n, int i, int r) {
  const drk_value_t *v = n->inputs[i];
  if (n->op == DRK_OP_BATCH_NORMALIZATION && i >= 1) return r >= 2 ? 1 : -1;
  if ((n->op == DRK_OP_QUANTIZE_LINEAR || n->op == DRK_OP_DEQUANTIZE_LINEAR) && i >= 1 && v->shape.rank == 1 &&
      lw_numel(v) > 1)
    return drk_axis_norm(drk_node_attr_int(n, "axis", 1), r);
  return -1;
}

/* Loads input i (as its own dtype) in the output's flat frame. */
static tv_t *load_input(drk_lctx_t *c, lw_flat_t *f, tv_t *p, int i, tv_t **coords_cache) {
  const drk_node_t *n = c->node;
  const drk_value_t *v = n->inputs[i], *y = n->outputs[0];
  (void)coords_cache;
  if (!p) { /* immediate scalar constant */
    drk_tile_type_t ty = lw_retype(&f->fr, v->dtype);
    if (drk_dtype_is_float(v->dtype)) return drk_tile_build_const_float(&c->b, drk_value_const_f64(v, 0), ty);
    int64_t iv;
    if (v->dtype == DRK_DT_I64) memcpy(&iv, v->data, 8);
    else iv = (int64_t)drk_value_const_f64(v, 0);
    return drk_tile_build_const_int(&c->b, iv, ty);
  }
  int r = y->shape.rank;
  int64_t od[LW_MAX_RANK], st[LW_MAX_RANK];
  for (int k = 0; k < r; k++) od[k] = y->shape.dims[k].size;
  tv_t *off;
  int va = vec_axis(n, i, r);
  if (va >= 0) {
    for (int k = 0; k < r; k++) st[k] = k == va ? 1 : 0;
    off = lw_affine(c, f->offs, r, od, st, 0);
  } else if (drk_shape_equal(&v->shape, &y->shape)) {
    off = f->offs;
  } else {
    lw_bstrides(v, r, od, st);
    off = lw_affine(c, f->offs, r, od, st, 0);
  }
  return lw_load(c, p, off, f->mask, 0);
}

static tv_t *k(drk_lctx_t *c, tv_t *like, double v) { return lw_cf(c, like, v); }
#define BIN(op, a, b) lw_bin(c, DRK_TOP_##op, (a), (b))
#define UN(op, a) lw_un(c, DRK_TOP_##op, (a))

static tv_t *softplus(drk_lctx_t *c, tv_t *x) {
  /* max(x, 0) + log(1 + exp(-|x|)): no overflow for large x */
  tv_t *e = UN(EXP, UN(NEG, UN(ABS, x)));
  return BIN(ADD, BIN(MAX, x, k(c, x, 0)), UN(LOG, BIN(ADD, k(c, x, 1), e)));
}

static tv_t *expm1ish(drk_lctx_t *c, tv_t *x) { return BIN(SUB, UN(EXP, x), k(c, x, 1)); }

drk_dtype_t drk_lower_ew_compute_dtype(const drk_node_t *n, bool *out_raw) {
  *out_raw = n->op == DRK_OP_CAST || n->op == DRK_OP_CAST_LIKE || n->op == DRK_OP_DEQUANTIZE_LINEAR ||
             n->op == DRK_OP_QUANTIZE_LINEAR;
  return lw_compute_dtype((n->op == DRK_OP_WHERE ? n->inputs[1] : n->inputs[0])->dtype);
}

/* Whether node n may use the hardware's approximations (ex2/tanh.approx, fast division,
 * each within a few f32 ulp or 2^-11 for tanh): its result is stored as f16/bf16, whose
 * rounding (2^-9 relative or coarser) dominates, and computed in f32. */
static bool approx_ok(const drk_node_t *n, drk_dtype_t ct) {
  drk_dtype_t t = n->n_outputs ? n->outputs[0]->dtype : ct;
  return ct == DRK_DT_F32 && (t == DRK_DT_F16 || t == DRK_DT_BF16);
}

tv_t *drk_lower_ew_math(drk_lctx_t *c, const drk_node_t *n, tv_t **x, int nx, drk_dtype_t ct) {
  tv_t *a = x[0];
  switch (n->op) {
  case DRK_OP_ADD: return BIN(ADD, a, x[1]);
  case DRK_OP_SUB: return BIN(SUB, a, x[1]);
  case DRK_OP_MUL: return BIN(MUL, a, x[1]);
  case DRK_OP_DIV: return BIN(DIV, a, x[1]);
  case DRK_OP_POW: {
    /* a constant small integer exponent (GELU's x^3, x^2 of variances) is a product: no
     * exp/log, no branches for the signs */
    const drk_value_t *e = n->n_inputs > 1 ? n->inputs[1] : NULL;
    if (drk_dtype_is_float(ct) && e && e->kind == DRK_VALUE_CONST && e->data && lw_numel(e) == 1) {
      double p = drk_value_const_f64(e, 0);
      if (p == 1) return a;
      if (p == 2) return BIN(MUL, a, a);
      if (p == 3) return BIN(MUL, BIN(MUL, a, a), a);
      if (p == 4) {
        tv_t *a2 = BIN(MUL, a, a);
        return BIN(MUL, a2, a2);
      }
    }
    if (drk_dtype_is_float(ct)) return BIN(POW, a, x[1]);
    tv_t *r = BIN(POW, lw_cast(c, a, DRK_DT_F64), lw_cast(c, x[1], DRK_DT_F64));
    return lw_cast(c, r, ct);
  }
  case DRK_OP_NEG: return drk_dtype_is_float(ct) || drk_dtype_is_signed_int(ct) ? UN(NEG, a) : BIN(SUB, k(c, a, 0), a);
  case DRK_OP_ABS: return drk_dtype_is_float(ct) || drk_dtype_is_signed_int(ct) ? UN(ABS, a) : a;
  case DRK_OP_RECIPROCAL: return BIN(DIV, k(c, a, 1), a);
  case DRK_OP_SQRT: return UN(SQRT, a);
  case DRK_OP_EXP: return UN(EXP, a);
  case DRK_OP_LOG: return UN(LOG, a);
  case DRK_OP_ERF: return UN(ERF, a);
  case DRK_OP_TANH: return approx_ok(n, ct) ? lw_approx(c, UN(TANH, a)) : UN(TANH, a);
  case DRK_OP_SIN: return UN(SIN, a);
  case DRK_OP_COS: return UN(COS, a);
  case DRK_OP_FLOOR: return UN(FLOOR, a);
  case DRK_OP_CEIL: return UN(CEIL, a);
  case DRK_OP_ROUND: return UN(RINT, a);
  case DRK_OP_SIGMOID:
    if (approx_ok(n, ct)) { /* 1 / (1 + 2^(-x log2 e)) with ex2.approx and a fast division */
      tv_t *e = lw_approx(c, UN(EXP2, BIN(MUL, a, k(c, a, -1.4426950408889634))));
      return lw_approx(c, BIN(DIV, k(c, a, 1), BIN(ADD, k(c, a, 1), e)));
    }
    return BIN(DIV, k(c, a, 1), BIN(ADD, k(c, a, 1), UN(EXP, UN(NEG, a))));
  case DRK_OP_RELU: return BIN(MAX, a, k(c, a, 0));
  case DRK_OP_LEAKY_RELU: {
    double al = drk_node_attr_float(n, "alpha", 0.01);
    return lw_sel(c, lw_cmp(c, "lt", a, k(c, a, 0)), BIN(MUL, a, k(c, a, al)), a);
  }
  case DRK_OP_PRELU: return lw_sel(c, lw_cmp(c, "lt", a, k(c, a, 0)), BIN(MUL, a, x[1]), a);
  case DRK_OP_ELU: {
    double al = drk_node_attr_float(n, "alpha", 1.0);
    return lw_sel(c, lw_cmp(c, "lt", a, k(c, a, 0)), BIN(MUL, k(c, a, al), expm1ish(c, a)), a);
  }
  case DRK_OP_SELU: {
    double al = drk_node_attr_float(n, "alpha", 1.67326319217681884765625);
    double ga = drk_node_attr_float(n, "gamma", 1.05070102214813232421875);
    tv_t *neg = BIN(MUL, k(c, a, al), expm1ish(c, a));
    return BIN(MUL, k(c, a, ga), lw_sel(c, lw_cmp(c, "le", a, k(c, a, 0)), neg, a));
  }
  case DRK_OP_GELU: {
    const char *ap = drk_node_attr_string(n, "approximate", "none");
    tv_t *inner;
    if (strcmp(ap, "tanh") == 0) {
      tv_t *x3 = BIN(MUL, BIN(MUL, a, a), a);
      tv_t *u = BIN(MUL, k(c, a, 0.7978845608028654), BIN(ADD, a, BIN(MUL, k(c, a, 0.044715), x3)));
      inner = UN(TANH, u);
    } else {
      inner = UN(ERF, BIN(MUL, a, k(c, a, 0.7071067811865476)));
    }
    return BIN(MUL, BIN(MUL, k(c, a, 0.5), a), BIN(ADD, k(c, a, 1), inner));
  }
  case DRK_OP_HARD_SIGMOID: {
    double al = drk_node_attr_float(n, "alpha", 0.2), be = drk_node_attr_float(n, "beta", 0.5);
    tv_t *v = BIN(ADD, BIN(MUL, a, k(c, a, al)), k(c, a, be));
    return BIN(MAX, k(c, a, 0), BIN(MIN, k(c, a, 1), v));
  }
  case DRK_OP_HARD_SWISH: {
    tv_t *v = BIN(ADD, BIN(MUL, a, k(c, a, 1.0 / 6.0)), k(c, a, 0.5));
    return BIN(MUL, a, BIN(MAX, k(c, a, 0), BIN(MIN, k(c, a, 1), v)));
  }
  case DRK_OP_SOFTPLUS: return softplus(c, a);
  case DRK_OP_SOFTSIGN: return BIN(DIV, a, BIN(ADD, k(c, a, 1), UN(ABS, a)));
  case DRK_OP_MISH: return BIN(MUL, a, UN(TANH, softplus(c, a)));
  case DRK_OP_CLIP: {
    tv_t *r = a;
    if (nx > 1 && x[1]) r = BIN(MAX, r, x[1]);
    if (nx > 2 && x[2]) r = BIN(MIN, r, x[2]);
    return r;
  }
  case DRK_OP_MIN: case DRK_OP_MAX: case DRK_OP_SUM: case DRK_OP_MEAN: {
    drk_tile_opcode_t code = n->op == DRK_OP_MIN ? DRK_TOP_MIN : n->op == DRK_OP_MAX ? DRK_TOP_MAX : DRK_TOP_ADD;
    tv_t *r = a;
    for (int i = 1; i < nx; i++) r = lw_bin(c, code, r, x[i]);
    if (n->op == DRK_OP_MEAN && nx > 1) r = BIN(DIV, r, k(c, r, nx));
    return r;
  }
  case DRK_OP_SIGN: {
    tv_t *one = k(c, a, 1), *zero = k(c, a, 0);
    tv_t *neg = drk_dtype_is_float(ct) || drk_dtype_is_signed_int(ct) ? k(c, a, -1) : zero;
    return lw_sel(c, lw_cmp(c, "gt", a, zero), one, lw_sel(c, lw_cmp(c, "lt", a, zero), neg, zero));
  }
  case DRK_OP_NOT: return lw_cmp(c, "eq", a, lw_ci(c, a, 0));
  case DRK_OP_AND: return BIN(AND, a, x[1]);
  case DRK_OP_OR: return BIN(OR, a, x[1]);
  case DRK_OP_XOR: return lw_cmp(c, "ne", a, x[1]);
  case DRK_OP_EQUAL: return lw_cmp(c, "eq", a, x[1]);
  case DRK_OP_LESS: return lw_cmp(c, "lt", a, x[1]);
  case DRK_OP_LESS_OR_EQUAL: return lw_cmp(c, "le", a, x[1]);
  case DRK_OP_GREATER: return lw_cmp(c, "gt", a, x[1]);
  case DRK_OP_GREATER_OR_EQUAL: return lw_cmp(c, "ge", a, x[1]);
  case DRK_OP_WHERE: return lw_sel(c, a, x[1], x[2]);
  case DRK_OP_IS_NAN: return lw_cmp(c, "ne", a, a);
  case DRK_OP_IS_INF: {
    bool pos = drk_node_attr_int(n, "detect_positive", 1) != 0, neg = drk_node_attr_int(n, "detect_negative", 1) != 0;
    tv_t *p = lw_cmp(c, "eq", a, k(c, a, INFINITY)), *q = lw_cmp(c, "eq", a, k(c, a, -INFINITY));
    if (pos && neg) return BIN(OR, p, q);
    if (pos) return p;
    if (neg) return q;
    return lw_cdt(c, a, DRK_DT_BOOL, 0);
  }
  case DRK_OP_CAST: case DRK_OP_CAST_LIKE: {
    drk_dtype_t to = n->outputs[0]->dtype;
    if (to == a->type.dtype) return a;
    if (to == DRK_DT_BOOL) return lw_cmp(c, "ne", a, lw_ci(c, a, 0));
    if (is_f8(to) && a->type.dtype != DRK_DT_F32 && a->type.dtype != DRK_DT_F16 && a->type.dtype != DRK_DT_BF16)
      a = lw_cast(c, a, DRK_DT_F32);
    if (is_f8(a->type.dtype) && !drk_dtype_is_float(to)) a = lw_cast(c, a, DRK_DT_F32);
    return lw_cast(c, a, to);
  }
  case DRK_OP_DEQUANTIZE_LINEAR: {
    tv_t *v = lw_cast(c, a, DRK_DT_F32);
    if (nx > 2 && x[2]) v = BIN(SUB, v, lw_cast(c, x[2], DRK_DT_F32));
    return BIN(MUL, v, lw_cast(c, x[1], DRK_DT_F32));
  }
  case DRK_OP_QUANTIZE_LINEAR: {
    drk_dtype_t to = n->outputs[0]->dtype;
    tv_t *v = UN(RINT, BIN(DIV, lw_cast(c, a, DRK_DT_F32), lw_cast(c, x[1], DRK_DT_F32)));
    if (nx > 2 && x[2]) v = BIN(ADD, v, lw_cast(c, x[2], DRK_DT_F32));
    double lo = to == DRK_DT_U8 ? 0 : to == DRK_DT_I8 ? -128 : to == DRK_DT_I16 ? -32768 : -2147483648.0;
    double hi = to == DRK_DT_U8 ? 255 : to == DRK_DT_I8 ? 127 : to == DRK_DT_I16 ? 32767 : 2147483520.0;
    v = BIN(MIN, BIN(MAX, v, k(c, v, lo)), k(c, v, hi));
    return lw_cast(c, v, to);
  }
  case DRK_OP_BATCH_NORMALIZATION: {
    double eps = drk_node_attr_float(n, "epsilon", 1e-5);
    tv_t *inv = UN(RSQRT, BIN(ADD, x[4], k(c, x[4], eps)));
    return BIN(ADD, BIN(MUL, BIN(MUL, BIN(SUB, a, x[3]), inv), x[1]), x[2]);
  }
  default: break;
  }
  drk_unreachable();
}

/* Whether drk_lower_ew reads input i of n at the output's own flat offsets (load_input's
 * identity case) with whole-byte elements of the output's size (sub-byte elements would
 * share bytes between threads): y may then take x's bytes. */
static bool inplace_ok(const drk_node_t *n, int i) {
  const drk_value_t *x = n->inputs[i], *y = n->outputs[0];
  return x->kind == DRK_VALUE_NODE && vec_axis(n, i, y->shape.rank) < 0 && drk_shape_equal(&x->shape, &y->shape) &&
         drk_dtype_bits(x->dtype) == drk_dtype_bits(y->dtype) && drk_dtype_bits(y->dtype) >= 8 && n->n_outputs == 1;
}

bool drk_lower_ew(drk_lctx_t *c) {
  const drk_node_t *n = c->node;
  const drk_value_t *y = n->outputs[0];
  int64_t big = lw_numel(y);
  for (int i = 0; i < n->n_inputs; i++)
    if (n->inputs[i] && lw_numel(n->inputs[i]) > big) big = lw_numel(n->inputs[i]);
  if (n->op == DRK_OP_PRELU || n->op == DRK_OP_CLIP || n->op == DRK_OP_BATCH_NORMALIZATION) {
    for (int i = 1; i < n->n_inputs; i++)
      if (n->inputs[i] && lw_numel(n->inputs[i]) > lw_numel(y)) return lw_err(c, "input %d is larger than the output", i);
  }
  lw_kernel_begin(c, big < ((int64_t)1 << 31) ? DRK_DT_I32 : DRK_DT_I64);
  int nin = n->n_inputs;
  tv_t *p[16] = {0};
  if (nin > 16) return lw_err(c, "more than 16 inputs");
  for (int i = 0; i < nin; i++) {
    const drk_value_t *v = n->inputs[i];
    if (!v) continue;
    if (n->op == DRK_OP_CAST_LIKE && i == 1) continue; /* only its dtype matters */
    if (v->kind == DRK_VALUE_CONST && v->data && lw_numel(v) == 1 && v->dtype != DRK_DT_F8E4M3 && v->dtype != DRK_DT_F8E5M2)
      continue; /* immediate */
    p[i] = lw_param_buf(c, v, drk_arena_printf(c->m->arena, "x%d", i));
  }
  tv_t *py = lw_param_buf(c, y, "y");
  lw_flat_t f;
  lw_flat_begin(c, lw_numel(y), &f);
  bool raw;
  drk_dtype_t ct = drk_lower_ew_compute_dtype(n, &raw);
  tv_t *x[16] = {0};
  for (int i = 0; i < nin; i++) {
    if (!n->inputs[i] || (n->op == DRK_OP_CAST_LIKE && i == 1)) continue;
    tv_t *v = load_input(c, &f, p[i], i, NULL);
    if (!raw && !(n->op == DRK_OP_WHERE && i == 0)) v = lw_cast(c, v, ct);
    x[i] = v;
  }
  tv_t *r = drk_lower_ew_math(c, n, x, nin, ct);
  lw_store(c, py, f.offs, r, f.mask);
  lw_flat_end(c, &f);
  for (int i = 0; i < nin; i++)
    if (p[i] && inplace_ok(n, i)) lw_inplace(c, y, n->inputs[i]);
  return true;
}

/* A fused kernel's evaluation of elementwise node n, its operand i got from operand(ctx, i)
 * (values made in the group stay f32; casts and ops with discrete results, e.g. comparisons,
 * see their operands rounded to their declared dtype, as the one-node kernels do). */
tv_t *drk_lower_ew_node(drk_lctx_t *c, const drk_node_t *n, tv_t *(*operand)(void *ctx, int i), void *ctx) {
  bool raw;
  drk_dtype_t ct = drk_lower_ew_compute_dtype(n, &raw);
  bool exact = raw || !drk_dtype_is_float(n->outputs[0]->dtype);
  tv_t *x[16] = {0};
  for (int i = 0; i < n->n_inputs && i < 16; i++) {
    if (!n->inputs[i]) continue;
    tv_t *t = operand(ctx, i);
    drk_dtype_t vt = n->inputs[i]->dtype;
    if (exact && drk_dtype_is_float(vt) && t->type.dtype != vt) t = lw_cast(c, t, vt);
    if (!raw && !(n->op == DRK_OP_WHERE && i == 0)) t = lw_cast(c, t, ct);
    x[i] = t;
  }
  drk_loc_t keep = c->b.loc;
  c->b.loc = n->loc;
  tv_t *r = drk_lower_ew_math(c, n, x, n->n_inputs, ct);
  c->b.loc = keep;
  return r;
}
