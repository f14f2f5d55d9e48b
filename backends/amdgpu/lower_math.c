/* Tile IR -> LLVM IR for gfx942: elementwise arithmetic, comparisons, casts, constants and
 * math functions (part of lower.c's lowering; see lower_internal.h). Mirrors
 * backends/nvptx/lower_math.c.
 *
 * f16 and bf16 are computed in f32 and rounded back; f8 values (OCP e4m3fn / e5m2) live in
 * i8 registers and are decoded and encoded in software (exact decode; encode rounds to
 * nearest even, saturating, NaN kept): gfx942's own fp8 conversions use the FNUZ formats.
 * There is no libdevice: only LLVM intrinsics the AMDGPU backend selects for gfx942 are
 * used (checked with llc-22): exp, exp2, log, log2 (accurate f32 expansions around
 * v_exp_f32/v_log_f32), sqrt (correctly rounded), floor, ceil, rint, fabs, and sin/cos
 * (v_sin/v_cos after a two-constant reduction modulo 2 pi done here). tanh (Cephes: an odd
 * polynomial below 0.625, 1 - 2 / (exp(2|x|) + 1) above), erf (fitted here: x P(x^2) below
 * 1, 1 - exp(-Q(|x|)) up to 4, then 1; max relative error 1.7e-7 in a float32 model) and
 * pow (exp2(y log2 |x|) with C's sign and special cases, x*x exact for y = 2) are built from
 * those. Transcendentals on f64 (exp, log, sin, tanh, erf, pow, ...) have no selectable
 * form and are located errors. Comparisons follow C: eq lt le gt ge are false on NaN, ne
 * is true. Float max/min propagate NaN. Integer division and remainder truncate (C). */
#include "backends/amdgpu/lower_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


#include "ir/tensor.h"

static LLVMValueRef call1(am_lc_t *lc, const char *intr, LLVMTypeRef t, LLVMValueRef a) {
  return drk_amdgpu_call_intrinsic(lc->cg, intr, &t, 1, &a, 1);
}
static LLVMValueRef call2(am_lc_t *lc, const char *intr, LLVMTypeRef t, LLVMValueRef a, LLVMValueRef b) {
  LLVMValueRef args[2] = {a, b};
  return drk_amdgpu_call_intrinsic(lc->cg, intr, &t, 1, args, 2);
}

static bool is_f8(drk_dtype_t t) { return t == DRK_DT_F8E4M3 || t == DRK_DT_F8E5M2; }
static bool is_unsigned(drk_dtype_t t) { return t == DRK_DT_U8 || t == DRK_DT_BOOL || t == DRK_DT_U4; }

/* f8 (i8 bits) -> f32, exact. */
static LLVMValueRef f8_decode(am_lc_t *lc, drk_dtype_t t, LLVMValueRef v) {
  LLVMBuilderRef b = lc->b;
  if (t == DRK_DT_F8E5M2) {
    LLVMValueRef h = LLVMBuildShl(b, LLVMBuildZExt(b, v, lc->i16, ""), LLVMConstInt(lc->i16, 8, 0), "");
    return LLVMBuildFPExt(b, LLVMBuildBitCast(b, h, lc->f16, ""), lc->f32, "");
  }
  LLVMValueRef x = LLVMBuildZExt(b, v, lc->i32, "");
  LLVMValueRef s = LLVMBuildShl(b, LLVMBuildAnd(b, x, am_i32(lc, 0x80), ""), am_i32(lc, 24), "");
  LLVMValueRef e = LLVMBuildAnd(b, LLVMBuildLShr(b, x, am_i32(lc, 3), ""), am_i32(lc, 15), "");
  LLVMValueRef m = LLVMBuildAnd(b, x, am_i32(lc, 7), "");
  LLVMValueRef nb = LLVMBuildOr(b, LLVMBuildShl(b, LLVMBuildAdd(b, e, am_i32(lc, 120), ""), am_i32(lc, 23), ""),
                                LLVMBuildShl(b, m, am_i32(lc, 20), ""), "");
  LLVMValueRef norm = LLVMBuildBitCast(b, nb, lc->f32, "");
  LLVMValueRef sub = LLVMBuildFMul(b, LLVMBuildUIToFP(b, m, lc->f32, ""), LLVMConstReal(lc->f32, 1.0 / 512), "");
  LLVMValueRef mag = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntEQ, e, am_i32(lc, 0), ""), sub, norm, "");
  LLVMValueRef isnan = LLVMBuildICmp(b, LLVMIntEQ, LLVMBuildAnd(b, x, am_i32(lc, 0x7f), ""), am_i32(lc, 0x7f), "");
  mag = LLVMBuildSelect(b, isnan, LLVMConstReal(lc->f32, 0.0 / 0.0), mag, "");
  LLVMValueRef mb = LLVMBuildOr(b, LLVMBuildBitCast(b, mag, lc->i32, ""), s, "");
  return LLVMBuildBitCast(b, mb, lc->f32, "");
}

/* f32 -> f8 bits, round to nearest even, saturating finite, NaN -> 0x7f | sign. */
static LLVMValueRef f8_encode(am_lc_t *lc, drk_dtype_t t, LLVMValueRef f) {
  LLVMBuilderRef b = lc->b;
  LLVMValueRef bits = LLVMBuildBitCast(b, f, lc->i32, "");
  LLVMValueRef s = LLVMBuildLShr(b, LLVMBuildAnd(b, bits, am_i32(lc, (int64_t)0x80000000u), ""), am_i32(lc, 24), "");
  LLVMValueRef a = LLVMBuildAnd(b, bits, am_i32(lc, 0x7fffffff), "");
  LLVMValueRef isnan = LLVMBuildICmp(b, LLVMIntUGT, a, am_i32(lc, 0x7f800000), "");
  LLVMValueRef code;
  if (t == DRK_DT_F8E5M2) {
    /* f32 -> f16 (rn), then round the f16 bits to their top 8 */
    LLVMValueRef h = LLVMBuildZExt(b, LLVMBuildBitCast(b, LLVMBuildFPTrunc(b, LLVMBuildBitCast(b, a, lc->f32, ""), lc->f16, ""), lc->i16, ""), lc->i32, "");
    LLVMValueRef r = LLVMBuildAdd(b, LLVMBuildAdd(b, h, am_i32(lc, 0x7f), ""),
                                  LLVMBuildAnd(b, LLVMBuildLShr(b, h, am_i32(lc, 8), ""), am_i32(lc, 1), ""), "");
    code = LLVMBuildLShr(b, r, am_i32(lc, 8), "");
    code = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntUGT, code, am_i32(lc, 0x7b), ""), am_i32(lc, 0x7b), code, "");
  } else {
    LLVMValueRef af = LLVMBuildBitCast(b, a, lc->f32, "");
    LLVMValueRef q = LLVMBuildFMul(b, af, LLVMConstReal(lc->f32, 512.0), "");
    LLVMTypeRef ft = lc->f32;
    q = LLVMBuildFPToUI(b, drk_amdgpu_call_intrinsic(lc->cg, "llvm.roundeven", &ft, 1, &q, 1), lc->i32, "");
    LLVMValueRef r = LLVMBuildAdd(b, LLVMBuildAdd(b, a, am_i32(lc, 0x7ffff), ""),
                                  LLVMBuildAnd(b, LLVMBuildLShr(b, a, am_i32(lc, 20), ""), am_i32(lc, 1), ""), "");
    LLVMValueRef nc = LLVMBuildSub(b, LLVMBuildLShr(b, r, am_i32(lc, 20), ""), am_i32(lc, 960), "");
    LLVMValueRef small = LLVMBuildFCmp(b, LLVMRealOLT, af, LLVMConstReal(lc->f32, 1.0 / 64), "");
    code = LLVMBuildSelect(b, small, q, nc, "");
    code = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntUGT, code, am_i32(lc, 0x7e), ""), am_i32(lc, 0x7e), code, "");
  }
  code = LLVMBuildSelect(b, isnan, am_i32(lc, 0x7f), code, "");
  return LLVMBuildTrunc(b, LLVMBuildOr(b, code, s, ""), lc->i8, "");
}

/* value of float dtype t -> its compute type (f32 for f16/bf16/f8) */
static LLVMValueRef to_compute(am_lc_t *lc, drk_dtype_t t, LLVMValueRef v) {
  if (is_f8(t)) return f8_decode(lc, t, v);
  if (t == DRK_DT_F16 || t == DRK_DT_BF16) return LLVMBuildFPExt(lc->b, v, lc->f32, "");
  return v;
}
static LLVMValueRef from_compute(am_lc_t *lc, drk_dtype_t t, LLVMValueRef v) {
  if (is_f8(t)) return f8_encode(lc, t, v);
  if (t == DRK_DT_F16) return LLVMBuildFPTrunc(lc->b, v, lc->f16, "");
  if (t == DRK_DT_BF16) return LLVMBuildFPTrunc(lc->b, v, lc->bf16, "");
  return v;
}

static LLVMValueRef cf(am_lc_t *lc, double v) { return LLVMConstReal(lc->f32, v); }
static LLVMValueRef fma3(am_lc_t *lc, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c) {
  LLVMValueRef args[3] = {a, b, c};
  LLVMTypeRef t = lc->f32;
  return drk_amdgpu_call_intrinsic(lc->cg, "llvm.fma", &t, 1, args, 3);
}
static LLVMValueRef poly(am_lc_t *lc, const double *c, int n, LLVMValueRef x) {
  LLVMValueRef r = cf(lc, c[n - 1]);
  for (int i = n - 2; i >= 0; i--) r = fma3(lc, r, x, cf(lc, c[i]));
  return r;
}
static LLVMValueRef copysign_(am_lc_t *lc, LLVMValueRef mag, LLVMValueRef sgn) {
  return call2(lc, "llvm.copysign", lc->f32, mag, sgn);
}

/* tanh, f32 (Cephes tanhf; max relative error ~1.3e-7 in a float32 model). */
static LLVMValueRef tanh_f32(am_lc_t *lc, LLVMValueRef x) {
  static const double p[] = {-3.33332819422E-1, 1.33314422036E-1, -5.37397155531E-2, 2.06390887954E-2,
                             -5.70498872745E-3};
  LLVMBuilderRef B = lc->b;
  LLVMValueRef ax = call1(lc, "llvm.fabs", lc->f32, x);
  LLVMValueRef z = LLVMBuildFMul(B, x, x, "");
  LLVMValueRef small = fma3(lc, LLVMBuildFMul(B, poly(lc, p, 5, z), z, ""), x, x);
  LLVMValueRef e = call1(lc, "llvm.exp", lc->f32, LLVMBuildFMul(B, ax, cf(lc, 2.0), ""));
  LLVMValueRef big = LLVMBuildFSub(B, cf(lc, 1.0), LLVMBuildFDiv(B, cf(lc, 2.0), LLVMBuildFAdd(B, e, cf(lc, 1.0), ""), ""), "");
  big = LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealOGT, ax, cf(lc, 9.0), ""), cf(lc, 1.0), big, "");
  big = copysign_(lc, big, x);
  return LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealOLT, ax, cf(lc, 0.625), ""), small, big, "");
}

/* erf, f32: |x| < 1: x P(x^2); 1 <= |x| < 4: 1 - exp(-Q(|x|)); beyond: 1 (erfc(4) is below
 * half an ulp of 1). Coefficients fitted by least squares (max relative error 1.7e-7). */
static LLVMValueRef erf_f32(am_lc_t *lc, LLVMValueRef x) {
  static const double p[] = {1.128379225730896, -0.3761262893676758, 0.11283612251281738, -0.026854807510972023,
                             0.005190051626414061, -0.0008024335256777704, 7.898139301687479e-05};
  static const double q[] = {-0.00026398946647532284, 1.1299219131469727, 0.6325819492340088,
                             0.10902510583400726, -0.025483964011073112, 0.004206032492220402,
                             -0.00037654739571735263, -1.2282828720344696e-05, 8.219294613809325e-06,
                             -9.60424472395971e-07, 4.104991546682868e-08};
  LLVMBuilderRef B = lc->b;
  LLVMValueRef ax = call1(lc, "llvm.fabs", lc->f32, x);
  LLVMValueRef small = LLVMBuildFMul(B, ax, poly(lc, p, 7, LLVMBuildFMul(B, ax, ax, "")), "");
  LLVMValueRef qa = poly(lc, q, 11, call2(lc, "llvm.minnum", lc->f32, ax, cf(lc, 4.0)));
  LLVMValueRef big = LLVMBuildFSub(B, cf(lc, 1.0), call1(lc, "llvm.exp", lc->f32, LLVMBuildFNeg(B, qa, "")), "");
  big = LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealOGE, ax, cf(lc, 4.0), ""), cf(lc, 1.0), big, "");
  LLVMValueRef r = LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealOLT, ax, cf(lc, 1.0), ""), small, big, "");
  r = copysign_(lc, r, x);
  /* NaN in, NaN out (the compares above are false on NaN and pick 1) */
  return LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealUNO, x, x, ""), x, r, "");
}

/* sin/cos, f32: x - k 2pi (two-constant Cody-Waite), then the hardware's v_sin/v_cos. */
static LLVMValueRef sincos_f32(am_lc_t *lc, LLVMValueRef x, bool cosine) {
  LLVMBuilderRef B = lc->b;
  LLVMValueRef k = call1(lc, "llvm.rint", lc->f32, LLVMBuildFMul(B, x, cf(lc, 0.15915494309189535), ""));
  LLVMValueRef nk = LLVMBuildFNeg(B, k, "");
  LLVMValueRef r = fma3(lc, nk, cf(lc, 6.28318548202514648), x);
  r = fma3(lc, nk, cf(lc, -1.7484556000744487e-07), r);
  return call1(lc, cosine ? "llvm.cos" : "llvm.sin", lc->f32, r);
}

/* pow, f32, with C's special cases: y = 0 or x = 1 -> 1; x < 0: finite integer y keeps
 * the sign of x^y, other y give NaN; y = 2 is x*x exactly. */
static LLVMValueRef pow_f32(am_lc_t *lc, LLVMValueRef x, LLVMValueRef y) {
  LLVMBuilderRef B = lc->b;
  LLVMValueRef ax = call1(lc, "llvm.fabs", lc->f32, x);
  LLVMValueRef r = call1(lc, "llvm.exp2", lc->f32, LLVMBuildFMul(B, y, call1(lc, "llvm.log2", lc->f32, ax), ""));
  LLVMValueRef yint = LLVMBuildFCmp(B, LLVMRealOEQ, call1(lc, "llvm.trunc", lc->f32, y), y, "");
  LLVMValueRef yhalf = LLVMBuildFMul(B, y, cf(lc, 0.5), "");
  LLVMValueRef yodd = LLVMBuildAnd(B, yint, LLVMBuildFCmp(B, LLVMRealUNE, call1(lc, "llvm.trunc", lc->f32, yhalf), yhalf, ""), "");
  LLVMValueRef neg = LLVMBuildFCmp(B, LLVMRealOLT, x, cf(lc, 0.0), "");
  r = LLVMBuildSelect(B, LLVMBuildAnd(B, neg, yodd, ""), LLVMBuildFNeg(B, r, ""), r, "");
  r = LLVMBuildSelect(B, LLVMBuildAnd(B, neg, LLVMBuildNot(B, yint, ""), ""), cf(lc, 0.0 / 0.0), r, "");
  r = LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealOEQ, y, cf(lc, 2.0), ""), LLVMBuildFMul(B, x, x, ""), r, "");
  LLVMValueRef one = LLVMBuildOr(B, LLVMBuildFCmp(B, LLVMRealOEQ, y, cf(lc, 0.0), ""),
                                 LLVMBuildFCmp(B, LLVMRealOEQ, x, cf(lc, 1.0), ""), "");
  return LLVMBuildSelect(B, one, cf(lc, 1.0), r, "");
}

LLVMValueRef am_combine(am_lc_t *lc, const char *comb, drk_dtype_t t, LLVMValueRef a, LLVMValueRef b) {
  LLVMTypeRef ty = LLVMTypeOf(a);
  bool fl = LLVMGetTypeKind(ty) == LLVMFloatTypeKind || LLVMGetTypeKind(ty) == LLVMDoubleTypeKind;
  if (strcmp(comb, "sum") == 0) return fl ? LLVMBuildFAdd(lc->b, a, b, "") : LLVMBuildAdd(lc->b, a, b, "");
  bool mx = strcmp(comb, "max") == 0;
  if (!mx && strcmp(comb, "min") != 0) return NULL;
  if (fl) return call2(lc, mx ? "llvm.maximum" : "llvm.minimum", ty, a, b);
  if (is_unsigned(t)) return call2(lc, mx ? "llvm.umax" : "llvm.umin", ty, a, b);
  return call2(lc, mx ? "llvm.smax" : "llvm.smin", ty, a, b);
}

LLVMValueRef am_ew_binary(am_lc_t *lc, const drk_tile_op_t *op, drk_dtype_t t, LLVMValueRef a,
                          LLVMValueRef b) {
  LLVMBuilderRef B = lc->b;
  if (drk_dtype_is_float(t)) {
    LLVMValueRef x = to_compute(lc, t, a), y = to_compute(lc, t, b), r;
    switch (op->code) {
    case DRK_TOP_ADD: r = LLVMBuildFAdd(B, x, y, ""); break;
    case DRK_TOP_SUB: r = LLVMBuildFSub(B, x, y, ""); break;
    case DRK_TOP_MUL: r = LLVMBuildFMul(B, x, y, ""); break;
    case DRK_TOP_DIV: r = LLVMBuildFDiv(B, x, y, ""); break;
    case DRK_TOP_REM: r = LLVMBuildFRem(B, x, y, ""); break;
    case DRK_TOP_MAX: r = am_combine(lc, "max", t, x, y); break;
    case DRK_TOP_MIN: r = am_combine(lc, "min", t, x, y); break;
    case DRK_TOP_POW:
      if (LLVMTypeOf(x) == lc->f64) return NULL;
      r = pow_f32(lc, x, y);
      break;
    default: return NULL;
    }
    return from_compute(lc, t, r);
  }
  if (!drk_dtype_is_int(t) && t != DRK_DT_BOOL) return NULL;
  if (t == DRK_DT_I4 || t == DRK_DT_U4) return NULL;
  bool u = is_unsigned(t);
  switch (op->code) {
  case DRK_TOP_ADD: return LLVMBuildAdd(B, a, b, "");
  case DRK_TOP_SUB: return LLVMBuildSub(B, a, b, "");
  case DRK_TOP_MUL: return LLVMBuildMul(B, a, b, "");
  case DRK_TOP_DIV: return u ? LLVMBuildUDiv(B, a, b, "") : LLVMBuildSDiv(B, a, b, "");
  case DRK_TOP_REM: return u ? LLVMBuildURem(B, a, b, "") : LLVMBuildSRem(B, a, b, "");
  case DRK_TOP_MAX: return am_combine(lc, "max", t, a, b);
  case DRK_TOP_MIN: return am_combine(lc, "min", t, a, b);
  case DRK_TOP_AND: return LLVMBuildAnd(B, a, b, "");
  case DRK_TOP_OR: return LLVMBuildOr(B, a, b, "");
  default: return NULL;
  }
}

LLVMValueRef am_ew_unary(am_lc_t *lc, const drk_tile_op_t *op, drk_dtype_t t, LLVMValueRef a) {
  LLVMBuilderRef B = lc->b;
  if (!drk_dtype_is_float(t)) {
    if (!drk_dtype_is_int(t) || t == DRK_DT_I4 || t == DRK_DT_U4) return NULL;
    if (op->code == DRK_TOP_NEG) return LLVMBuildNeg(B, a, "");
    if (op->code == DRK_TOP_ABS) {
      if (is_unsigned(t)) return a;
      LLVMTypeRef ty = LLVMTypeOf(a);
      LLVMValueRef args[2] = {a, LLVMConstInt(lc->i1, 0, 0)};
      return drk_amdgpu_call_intrinsic(lc->cg, "llvm.abs", &ty, 1, args, 2);
    }
    return NULL;
  }
  LLVMValueRef x = to_compute(lc, t, a), r;
  LLVMTypeRef ct = LLVMTypeOf(x);
  bool d = ct == lc->f64;
  switch (op->code) {
  case DRK_TOP_NEG: r = LLVMBuildFNeg(B, x, ""); break;
  case DRK_TOP_ABS: r = call1(lc, "llvm.fabs", ct, x); break;
  case DRK_TOP_SQRT: r = call1(lc, "llvm.sqrt", ct, x); break;
  case DRK_TOP_RSQRT: r = LLVMBuildFDiv(B, LLVMConstReal(ct, 1.0), call1(lc, "llvm.sqrt", ct, x), ""); break;
  case DRK_TOP_FLOOR: r = call1(lc, "llvm.floor", ct, x); break;
  case DRK_TOP_CEIL: r = call1(lc, "llvm.ceil", ct, x); break;
  case DRK_TOP_RINT: r = call1(lc, "llvm.rint", ct, x); break;
  default:
    if (d) return NULL; /* no selectable f64 transcendental on AMDGPU */
    switch (op->code) {
    case DRK_TOP_EXP: r = call1(lc, "llvm.exp", ct, x); break;
    case DRK_TOP_EXP2: r = call1(lc, "llvm.exp2", ct, x); break;
    case DRK_TOP_LOG: r = call1(lc, "llvm.log", ct, x); break;
    case DRK_TOP_TANH: r = tanh_f32(lc, x); break;
    case DRK_TOP_ERF: r = erf_f32(lc, x); break;
    case DRK_TOP_SIN: r = sincos_f32(lc, x, false); break;
    case DRK_TOP_COS: r = sincos_f32(lc, x, true); break;
    default: return NULL;
    }
  }
  return from_compute(lc, t, r);
}

LLVMValueRef am_cmp(am_lc_t *lc, const drk_tile_op_t *op, drk_dtype_t t, const char *pred,
                    LLVMValueRef a, LLVMValueRef b) {
  static const char *const names[] = {"eq", "ne", "lt", "le", "gt", "ge"};
  static const LLVMRealPredicate fp[] = {LLVMRealOEQ, LLVMRealUNE, LLVMRealOLT, LLVMRealOLE, LLVMRealOGT, LLVMRealOGE};
  static const LLVMIntPredicate sp[] = {LLVMIntEQ, LLVMIntNE, LLVMIntSLT, LLVMIntSLE, LLVMIntSGT, LLVMIntSGE};
  static const LLVMIntPredicate up[] = {LLVMIntEQ, LLVMIntNE, LLVMIntULT, LLVMIntULE, LLVMIntUGT, LLVMIntUGE};
  (void)op;
  int p = -1;
  for (int i = 0; i < 6; i++)
    if (strcmp(pred, names[i]) == 0) p = i;
  if (p < 0) return NULL;
  if (drk_dtype_is_float(t))
    return LLVMBuildFCmp(lc->b, fp[p], to_compute(lc, t, a), to_compute(lc, t, b), "");
  if (LLVMGetTypeKind(LLVMTypeOf(a)) == LLVMPointerTypeKind) return LLVMBuildICmp(lc->b, up[p], a, b, "");
  return LLVMBuildICmp(lc->b, is_unsigned(t) ? up[p] : sp[p], a, b, "");
}

/* f32 -> f16/bf16 rounding toward zero: round to nearest, then step one ulp toward zero
 * when that rounded away from zero (|rounded| > |x|). */
static LLVMValueRef fptrunc_rz16(am_lc_t *lc, LLVMValueRef x, drk_dtype_t to) {
  LLVMBuilderRef B = lc->b;
  LLVMTypeRef ht = to == DRK_DT_F16 ? lc->f16 : lc->bf16;
  LLVMValueRef h = LLVMBuildFPTrunc(B, x, ht, "");
  LLVMValueRef back = call1(lc, "llvm.fabs", lc->f32, LLVMBuildFPExt(B, h, lc->f32, ""));
  LLVMValueRef ax = call1(lc, "llvm.fabs", lc->f32, x);
  LLVMValueRef away = LLVMBuildFCmp(B, LLVMRealOGT, back, ax, "");
  LLVMValueRef bits = LLVMBuildBitCast(B, h, lc->i16, "");
  LLVMValueRef dec = LLVMBuildBitCast(B, LLVMBuildSub(B, bits, LLVMConstInt(lc->i16, 1, 0), ""), ht, "");
  return LLVMBuildSelect(B, away, dec, h, "");
}

LLVMValueRef am_cast(am_lc_t *lc, const drk_tile_op_t *op, drk_dtype_t from, drk_dtype_t to,
                     LLVMValueRef v, bool rz) {
  LLVMBuilderRef B = lc->b;
  (void)op;
  if (from == to) return v;
  LLVMTypeRef tt = am_reg_type(lc, to, false);
  if (!tt || !am_reg_type(lc, from, false)) return NULL;
  if (to == DRK_DT_BOOL) {
    if (drk_dtype_is_float(from))
      return LLVMBuildFCmp(B, LLVMRealUNE, to_compute(lc, from, v), LLVMConstReal(LLVMTypeOf(to_compute(lc, from, v)), 0), "");
    return LLVMBuildICmp(B, LLVMIntNE, v, LLVMConstNull(LLVMTypeOf(v)), "");
  }
  if (drk_dtype_is_float(from) && drk_dtype_is_float(to)) {
    LLVMValueRef x = is_f8(from) ? f8_decode(lc, from, v) : v;
    LLVMTypeRef xt = LLVMTypeOf(x);
    if (is_f8(to)) {
      if (xt != lc->f32) x = xt == lc->f64 ? LLVMBuildFPTrunc(B, x, lc->f32, "") : LLVMBuildFPExt(B, x, lc->f32, "");
      return f8_encode(lc, to, x);
    }
    if (xt == tt) return x;
    unsigned bx = LLVMGetTypeKind(xt) == LLVMDoubleTypeKind ? 64 : LLVMGetTypeKind(xt) == LLVMFloatTypeKind ? 32 : 16;
    unsigned bt = drk_dtype_bits(to);
    if (bt > bx || (bt == 32 && bx == 16)) return LLVMBuildFPExt(B, x, tt, "");
    if (bx == 16 && bt == 16) return LLVMBuildFPTrunc(B, LLVMBuildFPExt(B, x, lc->f32, ""), tt, ""); /* f16<->bf16 */
    if (rz && bt == 16) {
      if (xt != lc->f32) x = LLVMBuildFPTrunc(B, x, lc->f32, "");
      return fptrunc_rz16(lc, x, to);
    }
    if (to == DRK_DT_BF16 && bx == 64) x = LLVMBuildFPTrunc(B, x, lc->f32, "");
    return LLVMBuildFPTrunc(B, x, tt, "");
  }
  if (drk_dtype_is_float(to)) { /* int/bool -> float */
    LLVMTypeRef mid = to == DRK_DT_F64 ? lc->f64 : lc->f32;
    LLVMValueRef x = is_unsigned(from) ? LLVMBuildUIToFP(B, v, mid, "") : LLVMBuildSIToFP(B, v, mid, "");
    return from_compute(lc, to, x);
  }
  if (drk_dtype_is_float(from)) { /* float -> int */
    LLVMValueRef x = to_compute(lc, from, v);
    return is_unsigned(to) ? LLVMBuildFPToUI(B, x, tt, "") : LLVMBuildFPToSI(B, x, tt, "");
  }
  /* int -> int */
  unsigned bf = LLVMGetIntTypeWidth(LLVMTypeOf(v)), bt = LLVMGetIntTypeWidth(tt);
  if (bt < bf) return LLVMBuildTrunc(B, v, tt, "");
  if (bt == bf) return v;
  return is_unsigned(from) ? LLVMBuildZExt(B, v, tt, "") : LLVMBuildSExt(B, v, tt, "");
}

LLVMValueRef am_const(am_lc_t *lc, drk_dtype_t t, const drk_tile_attr_t *a) {
  if (!a) return NULL;
  double f = a->kind == DRK_TA_FLOAT ? a->f : (double)a->i;
  int64_t i = a->kind == DRK_TA_INT ? a->i : drk_f64_to_i64_sat(a->f);
  LLVMTypeRef ty = am_reg_type(lc, t, false);
  if (!ty) return NULL;
  if (t == DRK_DT_F8E4M3) return LLVMConstInt(lc->i8, drk_f32_to_f8e4m3((float)f, true), 0);
  if (t == DRK_DT_F8E5M2) return LLVMConstInt(lc->i8, drk_f32_to_f8e5m2((float)f, true), 0);
  if (drk_dtype_is_float(t)) return LLVMConstReal(ty, f);
  if (t == DRK_DT_BOOL) return LLVMConstInt(lc->i1, i != 0, 0);
  return LLVMConstInt(ty, (unsigned long long)i, 1);
}

LLVMValueRef am_shfl_xor(am_lc_t *lc, LLVMValueRef v, unsigned mask) {
  LLVMBuilderRef B = lc->b;
  LLVMTypeRef t = LLVMTypeOf(v);
  LLVMTypeKind k = LLVMGetTypeKind(t);
  LLVMValueRef m = am_i32(lc, mask);
  if (k == LLVMFloatTypeKind || t == lc->i32) return drk_amdgpu_shfl(lc->cg, DRK_AMDGPU_SHFL_BFLY, v, m);
  if (k == LLVMDoubleTypeKind || t == lc->i64 || k == LLVMPointerTypeKind) {
    LLVMValueRef x = k == LLVMPointerTypeKind ? LLVMBuildPtrToInt(B, v, lc->i64, "") : LLVMBuildBitCast(B, v, lc->i64, "");
    LLVMValueRef lo = LLVMBuildTrunc(B, x, lc->i32, "");
    LLVMValueRef hi = LLVMBuildTrunc(B, LLVMBuildLShr(B, x, am_i64(lc, 32), ""), lc->i32, "");
    lo = drk_amdgpu_shfl(lc->cg, DRK_AMDGPU_SHFL_BFLY, lo, m);
    hi = drk_amdgpu_shfl(lc->cg, DRK_AMDGPU_SHFL_BFLY, hi, m);
    LLVMValueRef r = LLVMBuildOr(B, LLVMBuildZExt(B, lo, lc->i64, ""),
                                 LLVMBuildShl(B, LLVMBuildZExt(B, hi, lc->i64, ""), am_i64(lc, 32), ""), "");
    return k == LLVMPointerTypeKind ? LLVMBuildIntToPtr(B, r, t, "") : LLVMBuildBitCast(B, r, t, "");
  }
  /* 1, 8, 16-bit integers and halves */
  LLVMTypeRef it = k == LLVMIntegerTypeKind ? t : lc->i16;
  LLVMValueRef x = it == t ? v : LLVMBuildBitCast(B, v, it, "");
  x = drk_amdgpu_shfl(lc->cg, DRK_AMDGPU_SHFL_BFLY, LLVMBuildZExt(B, x, lc->i32, ""), m);
  x = LLVMBuildTrunc(B, x, it, "");
  return it == t ? x : LLVMBuildBitCast(B, x, t, "");
}
