/* Tile IR -> LLVM IR for gfx942: its math functions and rounding toward zero (part of
 * lower.c's lowering; see lower_internal.h); the rest of the arithmetic is
 * backends/common/lower_math.c's.
 *
 * f16 and bf16 are computed in f32 and rounded back; f8 values (OCP e4m3fn / e5m2) live in
 * i8 registers and are decoded in software (exact), encoded with gfx942's
 * v_cvt_pk_{fp8,bf8}_f32, which write the FNUZ formats: the OCP bits of x are the FNUZ bits
 * of x / 2 (am_f8_encode_hw).
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

static LLVMValueRef cf(am_lc_t *lc, double v) { return LLVMConstReal(lc->g.f32, v); }
static LLVMValueRef fma3(am_lc_t *lc, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c) {
  LLVMValueRef args[3] = {a, b, c};
  LLVMTypeRef t = lc->g.f32;
  return drk_amdgpu_call_intrinsic(lc->cg, "llvm.fma", &t, 1, args, 3);
}
static LLVMValueRef poly(am_lc_t *lc, const double *c, int n, LLVMValueRef x) {
  LLVMValueRef r = cf(lc, c[n - 1]);
  for (int i = n - 2; i >= 0; i--) r = fma3(lc, r, x, cf(lc, c[i]));
  return r;
}
static LLVMValueRef copysign_(am_lc_t *lc, LLVMValueRef mag, LLVMValueRef sgn) {
  return gpu_call2(&lc->g, "llvm.copysign", lc->g.f32, mag, sgn);
}

/* tanh, f32 (Cephes tanhf; max relative error ~1.3e-7 in a float32 model). */
static LLVMValueRef tanh_f32(am_lc_t *lc, LLVMValueRef x) {
  static const double p[] = {-3.33332819422E-1, 1.33314422036E-1, -5.37397155531E-2, 2.06390887954E-2,
                             -5.70498872745E-3};
  LLVMBuilderRef B = lc->g.b;
  LLVMValueRef ax = gpu_call1(&lc->g, "llvm.fabs", lc->g.f32, x);
  LLVMValueRef z = LLVMBuildFMul(B, x, x, "");
  LLVMValueRef small = fma3(lc, LLVMBuildFMul(B, poly(lc, p, 5, z), z, ""), x, x);
  LLVMValueRef e = gpu_call1(&lc->g, "llvm.exp", lc->g.f32, LLVMBuildFMul(B, ax, cf(lc, 2.0), ""));
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
  LLVMBuilderRef B = lc->g.b;
  LLVMValueRef ax = gpu_call1(&lc->g, "llvm.fabs", lc->g.f32, x);
  LLVMValueRef small = LLVMBuildFMul(B, ax, poly(lc, p, 7, LLVMBuildFMul(B, ax, ax, "")), "");
  LLVMValueRef qa = poly(lc, q, 11, gpu_call2(&lc->g, "llvm.minnum", lc->g.f32, ax, cf(lc, 4.0)));
  LLVMValueRef big = LLVMBuildFSub(B, cf(lc, 1.0), gpu_call1(&lc->g, "llvm.exp", lc->g.f32, LLVMBuildFNeg(B, qa, "")), "");
  big = LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealOGE, ax, cf(lc, 4.0), ""), cf(lc, 1.0), big, "");
  LLVMValueRef r = LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealOLT, ax, cf(lc, 1.0), ""), small, big, "");
  r = copysign_(lc, r, x);
  /* NaN in, NaN out (the compares above are false on NaN and pick 1) */
  return LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealUNO, x, x, ""), x, r, "");
}

/* sin/cos, f32: x - k 2pi (two-constant Cody-Waite), then the hardware's v_sin/v_cos. */
static LLVMValueRef sincos_f32(am_lc_t *lc, LLVMValueRef x, bool cosine) {
  LLVMBuilderRef B = lc->g.b;
  LLVMValueRef k = gpu_call1(&lc->g, "llvm.rint", lc->g.f32, LLVMBuildFMul(B, x, cf(lc, 0.15915494309189535), ""));
  LLVMValueRef nk = LLVMBuildFNeg(B, k, "");
  LLVMValueRef r = fma3(lc, nk, cf(lc, 6.28318548202514648), x);
  r = fma3(lc, nk, cf(lc, -1.7484556000744487e-07), r);
  return gpu_call1(&lc->g, cosine ? "llvm.cos" : "llvm.sin", lc->g.f32, r);
}

/* pow, f32, with C's special cases: y = 0 or x = 1 -> 1; x < 0: finite integer y keeps
 * the sign of x^y, other y give NaN; y = 2 is x*x exactly. */
static LLVMValueRef pow_f32(am_lc_t *lc, LLVMValueRef x, LLVMValueRef y) {
  LLVMBuilderRef B = lc->g.b;
  LLVMValueRef ax = gpu_call1(&lc->g, "llvm.fabs", lc->g.f32, x);
  LLVMValueRef r = gpu_call1(&lc->g, "llvm.exp2", lc->g.f32, LLVMBuildFMul(B, y, gpu_call1(&lc->g, "llvm.log2", lc->g.f32, ax), ""));
  LLVMValueRef yint = LLVMBuildFCmp(B, LLVMRealOEQ, gpu_call1(&lc->g, "llvm.trunc", lc->g.f32, y), y, "");
  LLVMValueRef yhalf = LLVMBuildFMul(B, y, cf(lc, 0.5), "");
  LLVMValueRef yodd = LLVMBuildAnd(B, yint, LLVMBuildFCmp(B, LLVMRealUNE, gpu_call1(&lc->g, "llvm.trunc", lc->g.f32, yhalf), yhalf, ""), "");
  LLVMValueRef neg = LLVMBuildFCmp(B, LLVMRealOLT, x, cf(lc, 0.0), "");
  r = LLVMBuildSelect(B, LLVMBuildAnd(B, neg, yodd, ""), LLVMBuildFNeg(B, r, ""), r, "");
  r = LLVMBuildSelect(B, LLVMBuildAnd(B, neg, LLVMBuildNot(B, yint, ""), ""), cf(lc, 0.0 / 0.0), r, "");
  r = LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealOEQ, y, cf(lc, 2.0), ""), LLVMBuildFMul(B, x, x, ""), r, "");
  LLVMValueRef one = LLVMBuildOr(B, LLVMBuildFCmp(B, LLVMRealOEQ, y, cf(lc, 0.0), ""),
                                 LLVMBuildFCmp(B, LLVMRealOEQ, x, cf(lc, 1.0), ""), "");
  return LLVMBuildSelect(B, one, cf(lc, 1.0), r, "");
}

/* gpu_target_t.pow: f32 only (pow_f32); no selectable f64 pow. */
LLVMValueRef am_pow(gpu_lc_t *g, LLVMValueRef x, LLVMValueRef y) {
  am_lc_t *lc = (am_lc_t *)g;
  if (LLVMTypeOf(x) == lc->g.f64) return NULL;
  return pow_f32(lc, x, y);
}

/* gpu_target_t.math1: rounding on any float type, transcendentals on f32 only. */
LLVMValueRef am_math1(gpu_lc_t *g, const drk_tile_op_t *op, LLVMTypeRef ct, LLVMValueRef x) {
  am_lc_t *lc = (am_lc_t *)g;
  bool d = ct == lc->g.f64;
  switch (op->code) {
  case DRK_TOP_FLOOR: return gpu_call1(&lc->g, "llvm.floor", ct, x);
  case DRK_TOP_CEIL: return gpu_call1(&lc->g, "llvm.ceil", ct, x);
  case DRK_TOP_RINT: return gpu_call1(&lc->g, "llvm.rint", ct, x);
  default:
    if (d) return NULL; /* no selectable f64 transcendental on AMDGPU */
    switch (op->code) {
    case DRK_TOP_EXP: return gpu_call1(&lc->g, "llvm.exp", ct, x);
    case DRK_TOP_EXP2: return gpu_call1(&lc->g, "llvm.exp2", ct, x);
    case DRK_TOP_LOG: return gpu_call1(&lc->g, "llvm.log", ct, x);
    case DRK_TOP_TANH: return tanh_f32(lc, x);
    case DRK_TOP_ERF: return erf_f32(lc, x);
    case DRK_TOP_SIN: return sincos_f32(lc, x, false);
    case DRK_TOP_COS: return sincos_f32(lc, x, true);
    default: return NULL;
    }
  }
}

/* gpu_target_t.f8_encode: f32 -> e4m3fn (e5m2) bits through v_cvt_pk_fp8_f32
 * (v_cvt_pk_bf8_f32), which write e4m3fnuz (e5m2fnuz): exponent bias one larger. Every OCP
 * byte but 0x80 (-0) and the NaN (and e5m2 inf) bytes means twice what it means in FNUZ, so
 * fnuz(x / 2) is ocp(x): halving is exact and keeps the rounding (to nearest even,
 * subnormals included). x is first clamped to the OCP format's largest finite value (its
 * saturation: 448, 57344; x / 2 then stays below the FNUZ bytes OCP reads as NaN or inf);
 * NaN gives 0x7f. Zero is always 0x00, never 0x80 (NaN in FNUZ), so the result is also a
 * valid MFMA operand (lower_mem.c). */
LLVMValueRef am_f8_encode_hw(gpu_lc_t *g, drk_dtype_t t, LLVMValueRef f) {
  am_lc_t *lc = (am_lc_t *)g;
  if (!lc->cg->arch->has_fp8 || (t != DRK_DT_F8E4M3 && t != DRK_DT_F8E5M2)) return NULL;
  LLVMBuilderRef B = lc->g.b;
  double mx = t == DRK_DT_F8E4M3 ? 448.0 : 57344.0;
  LLVMValueRef cl = gpu_call2(g, "llvm.maxnum", lc->g.f32, f, cf(lc, -mx));
  cl = gpu_call2(g, "llvm.minnum", lc->g.f32, cl, cf(lc, mx));
  LLVMValueRef args[4] = {LLVMBuildFMul(B, cl, cf(lc, 0.5), ""), cf(lc, 0.0), gpu_i32(g, 0),
                          LLVMConstInt(lc->g.i1, 0, 0)};
  LLVMValueRef w = drk_amdgpu_call_intrinsic(
      lc->cg, t == DRK_DT_F8E4M3 ? "llvm.amdgcn.cvt.pk.fp8.f32" : "llvm.amdgcn.cvt.pk.bf8.f32", NULL, 0, args, 4);
  LLVMValueRef q = LLVMBuildTrunc(B, w, lc->g.i8, "");
  LLVMValueRef i80 = LLVMConstInt(lc->g.i8, 0x80, 0);
  q = LLVMBuildSelect(B, LLVMBuildICmp(B, LLVMIntEQ, q, i80, ""), LLVMConstInt(lc->g.i8, 0, 0), q, "");
  return LLVMBuildSelect(B, LLVMBuildFCmp(B, LLVMRealUNO, f, f, ""), LLVMConstInt(lc->g.i8, 0x7f, 0), q, "");
}

/* f32 -> f16/bf16 rounding toward zero: round to nearest, then step one ulp toward zero
 * when that rounded away from zero (|rounded| > |x|). */
LLVMValueRef am_fptrunc_rz16(gpu_lc_t *g, LLVMValueRef x, drk_dtype_t to) {
  am_lc_t *lc = (am_lc_t *)g;
  LLVMBuilderRef B = lc->g.b;
  LLVMTypeRef ht = to == DRK_DT_F16 ? lc->g.f16 : lc->g.bf16;
  LLVMValueRef h = LLVMBuildFPTrunc(B, x, ht, "");
  LLVMValueRef back = gpu_call1(&lc->g, "llvm.fabs", lc->g.f32, LLVMBuildFPExt(B, h, lc->g.f32, ""));
  LLVMValueRef ax = gpu_call1(&lc->g, "llvm.fabs", lc->g.f32, x);
  LLVMValueRef away = LLVMBuildFCmp(B, LLVMRealOGT, back, ax, "");
  LLVMValueRef bits = LLVMBuildBitCast(B, h, lc->g.i16, "");
  LLVMValueRef dec = LLVMBuildBitCast(B, LLVMBuildSub(B, bits, LLVMConstInt(lc->g.i16, 1, 0), ""), ht, "");
  return LLVMBuildSelect(B, away, dec, h, "");
}

LLVMValueRef am_shfl_xor(am_lc_t *lc, LLVMValueRef v, unsigned mask) {
  LLVMBuilderRef B = lc->g.b;
  LLVMTypeRef t = LLVMTypeOf(v);
  LLVMTypeKind k = LLVMGetTypeKind(t);
  LLVMValueRef m = gpu_i32(&lc->g, mask);
  if (k == LLVMFloatTypeKind || t == lc->g.i32) return drk_amdgpu_shfl(lc->cg, DRK_AMDGPU_SHFL_BFLY, v, m);
  if (k == LLVMDoubleTypeKind || t == lc->g.i64 || k == LLVMPointerTypeKind) {
    LLVMValueRef x = k == LLVMPointerTypeKind ? LLVMBuildPtrToInt(B, v, lc->g.i64, "") : LLVMBuildBitCast(B, v, lc->g.i64, "");
    LLVMValueRef lo = LLVMBuildTrunc(B, x, lc->g.i32, "");
    LLVMValueRef hi = LLVMBuildTrunc(B, LLVMBuildLShr(B, x, gpu_i64(&lc->g, 32), ""), lc->g.i32, "");
    lo = drk_amdgpu_shfl(lc->cg, DRK_AMDGPU_SHFL_BFLY, lo, m);
    hi = drk_amdgpu_shfl(lc->cg, DRK_AMDGPU_SHFL_BFLY, hi, m);
    LLVMValueRef r = LLVMBuildOr(B, LLVMBuildZExt(B, lo, lc->g.i64, ""),
                                 LLVMBuildShl(B, LLVMBuildZExt(B, hi, lc->g.i64, ""), gpu_i64(&lc->g, 32), ""), "");
    return k == LLVMPointerTypeKind ? LLVMBuildIntToPtr(B, r, t, "") : LLVMBuildBitCast(B, r, t, "");
  }
  /* 1, 8, 16-bit integers and halves */
  LLVMTypeRef it = k == LLVMIntegerTypeKind ? t : lc->g.i16;
  LLVMValueRef x = it == t ? v : LLVMBuildBitCast(B, v, it, "");
  x = drk_amdgpu_shfl(lc->cg, DRK_AMDGPU_SHFL_BFLY, LLVMBuildZExt(B, x, lc->g.i32, ""), m);
  x = LLVMBuildTrunc(B, x, it, "");
  return it == t ? x : LLVMBuildBitCast(B, x, t, "");
}
