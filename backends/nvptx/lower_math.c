/* Tile IR -> LLVM IR for NVPTX: elementwise arithmetic, comparisons, casts, constants and
 * math functions (part of lower.c's lowering; see lower_internal.h).
 *
 * f16 and bf16 are computed in f32 and rounded back; f8 values live in i8 registers and are
 * decoded to f32 in software (exact), encoded with cvt.rn.satfinite.{e4m3,e5m2}x2.f32 on
 * sm_89+ and in software (round to nearest even, saturating to the largest finite value,
 * NaN kept) before. exp, exp2, log, tanh and erf call CUDA's libdevice (__nv_expf, ...),
 * linked into the module and internalized by nv_link_libdevice: its f32 functions are
 * within 1-2 ulp, which the f32 tolerance of 1e-5 needs (ex2.approx-based code is not).
 * sqrt is sqrt.rn; rsqrt is 1/sqrt.rn (correctly rounded twice, not rsqrt.approx).
 * Comparisons follow C: eq lt le gt ge are false on NaN, ne is true. Float max/min
 * propagate NaN. Integer division and remainder truncate (C), by zero is undefined. */
#include "backends/nvptx/lower_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/BitReader.h>
#include <llvm-c/Linker.h>

#include "ir/tensor.h"

static LLVMValueRef call1(nv_lc_t *lc, const char *intr, LLVMTypeRef t, LLVMValueRef a) {
  return drk_nvptx_call_intrinsic(lc->cg, intr, &t, 1, &a, 1);
}
static LLVMValueRef call2(nv_lc_t *lc, const char *intr, LLVMTypeRef t, LLVMValueRef a, LLVMValueRef b) {
  LLVMValueRef args[2] = {a, b};
  return drk_nvptx_call_intrinsic(lc->cg, intr, &t, 1, args, 2);
}

static bool is_f8(drk_dtype_t t) { return t == DRK_DT_F8E4M3 || t == DRK_DT_F8E5M2; }
static bool is_unsigned(drk_dtype_t t) { return t == DRK_DT_U8 || t == DRK_DT_BOOL || t == DRK_DT_U4; }

/* f8 (i8 bits) -> f32, exact. */
static LLVMValueRef f8_decode(nv_lc_t *lc, drk_dtype_t t, LLVMValueRef v) {
  LLVMBuilderRef b = lc->b;
  if (t == DRK_DT_F8E5M2) {
    LLVMValueRef h = LLVMBuildShl(b, LLVMBuildZExt(b, v, lc->i16, ""), LLVMConstInt(lc->i16, 8, 0), "");
    return LLVMBuildFPExt(b, LLVMBuildBitCast(b, h, lc->f16, ""), lc->f32, "");
  }
  LLVMValueRef x = LLVMBuildZExt(b, v, lc->i32, "");
  LLVMValueRef s = LLVMBuildShl(b, LLVMBuildAnd(b, x, nv_i32(lc, 0x80), ""), nv_i32(lc, 24), "");
  LLVMValueRef e = LLVMBuildAnd(b, LLVMBuildLShr(b, x, nv_i32(lc, 3), ""), nv_i32(lc, 15), "");
  LLVMValueRef m = LLVMBuildAnd(b, x, nv_i32(lc, 7), "");
  LLVMValueRef nb = LLVMBuildOr(b, LLVMBuildShl(b, LLVMBuildAdd(b, e, nv_i32(lc, 120), ""), nv_i32(lc, 23), ""),
                                LLVMBuildShl(b, m, nv_i32(lc, 20), ""), "");
  LLVMValueRef norm = LLVMBuildBitCast(b, nb, lc->f32, "");
  LLVMValueRef sub = LLVMBuildFMul(b, LLVMBuildUIToFP(b, m, lc->f32, ""), LLVMConstReal(lc->f32, 1.0 / 512), "");
  LLVMValueRef mag = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntEQ, e, nv_i32(lc, 0), ""), sub, norm, "");
  LLVMValueRef isnan = LLVMBuildICmp(b, LLVMIntEQ, LLVMBuildAnd(b, x, nv_i32(lc, 0x7f), ""), nv_i32(lc, 0x7f), "");
  mag = LLVMBuildSelect(b, isnan, LLVMConstReal(lc->f32, 0.0 / 0.0), mag, "");
  LLVMValueRef mb = LLVMBuildOr(b, LLVMBuildBitCast(b, mag, lc->i32, ""), s, "");
  return LLVMBuildBitCast(b, mb, lc->f32, "");
}

/* f32 -> f8 bits, round to nearest even, saturating finite, NaN -> 0x7f | sign. */
static LLVMValueRef f8_encode(nv_lc_t *lc, drk_dtype_t t, LLVMValueRef f) {
  LLVMBuilderRef b = lc->b;
  if (lc->cg->arch && lc->cg->arch->sm >= 89) {
    LLVMValueRef args[2] = {f, f};
    LLVMValueRef r = drk_nvptx_call_intrinsic(
        lc->cg, t == DRK_DT_F8E4M3 ? "llvm.nvvm.ff.to.e4m3x2.rn" : "llvm.nvvm.ff.to.e5m2x2.rn", NULL, 0, args, 2);
    return LLVMBuildTrunc(b, r, lc->i8, "");
  }
  LLVMValueRef bits = LLVMBuildBitCast(b, f, lc->i32, "");
  LLVMValueRef s = LLVMBuildLShr(b, LLVMBuildAnd(b, bits, nv_i32(lc, (int64_t)0x80000000u), ""), nv_i32(lc, 24), "");
  LLVMValueRef a = LLVMBuildAnd(b, bits, nv_i32(lc, 0x7fffffff), "");
  LLVMValueRef isnan = LLVMBuildICmp(b, LLVMIntUGT, a, nv_i32(lc, 0x7f800000), "");
  LLVMValueRef code;
  if (t == DRK_DT_F8E5M2) {
    /* f32 -> f16 (rn), then round the f16 bits to their top 8 */
    LLVMValueRef h = LLVMBuildZExt(b, LLVMBuildBitCast(b, LLVMBuildFPTrunc(b, LLVMBuildBitCast(b, a, lc->f32, ""), lc->f16, ""), lc->i16, ""), lc->i32, "");
    LLVMValueRef r = LLVMBuildAdd(b, LLVMBuildAdd(b, h, nv_i32(lc, 0x7f), ""),
                                  LLVMBuildAnd(b, LLVMBuildLShr(b, h, nv_i32(lc, 8), ""), nv_i32(lc, 1), ""), "");
    code = LLVMBuildLShr(b, r, nv_i32(lc, 8), "");
    code = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntUGT, code, nv_i32(lc, 0x7b), ""), nv_i32(lc, 0x7b), code, "");
  } else {
    LLVMValueRef af = LLVMBuildBitCast(b, a, lc->f32, "");
    LLVMValueRef q = LLVMBuildFMul(b, af, LLVMConstReal(lc->f32, 512.0), "");
    LLVMTypeRef ft = lc->f32;
    q = LLVMBuildFPToUI(b, drk_nvptx_call_intrinsic(lc->cg, "llvm.roundeven", &ft, 1, &q, 1), lc->i32, "");
    LLVMValueRef r = LLVMBuildAdd(b, LLVMBuildAdd(b, a, nv_i32(lc, 0x7ffff), ""),
                                  LLVMBuildAnd(b, LLVMBuildLShr(b, a, nv_i32(lc, 20), ""), nv_i32(lc, 1), ""), "");
    LLVMValueRef nc = LLVMBuildSub(b, LLVMBuildLShr(b, r, nv_i32(lc, 20), ""), nv_i32(lc, 960), "");
    LLVMValueRef small = LLVMBuildFCmp(b, LLVMRealOLT, af, LLVMConstReal(lc->f32, 1.0 / 64), "");
    code = LLVMBuildSelect(b, small, q, nc, "");
    code = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntUGT, code, nv_i32(lc, 0x7e), ""), nv_i32(lc, 0x7e), code, "");
  }
  code = LLVMBuildSelect(b, isnan, nv_i32(lc, 0x7f), code, "");
  return LLVMBuildTrunc(b, LLVMBuildOr(b, code, s, ""), lc->i8, "");
}

/* value of float dtype t -> its compute type (f32 for f16/bf16/f8) */
static LLVMValueRef to_compute(nv_lc_t *lc, drk_dtype_t t, LLVMValueRef v) {
  if (is_f8(t)) return f8_decode(lc, t, v);
  if (t == DRK_DT_F16 || t == DRK_DT_BF16) return LLVMBuildFPExt(lc->b, v, lc->f32, "");
  return v;
}
static LLVMValueRef from_compute(nv_lc_t *lc, drk_dtype_t t, LLVMValueRef v) {
  if (is_f8(t)) return f8_encode(lc, t, v);
  if (t == DRK_DT_F16) return LLVMBuildFPTrunc(lc->b, v, lc->f16, "");
  if (t == DRK_DT_BF16) return LLVMBuildFPTrunc(lc->b, v, lc->bf16, "");
  return v;
}

static LLVMValueRef libdevice_call(nv_lc_t *lc, const char *name, LLVMTypeRef t, LLVMValueRef a) {
  LLVMValueRef f = LLVMGetNamedFunction(lc->cg->mod, name);
  LLVMTypeRef ft = LLVMFunctionType(t, &t, 1, 0);
  if (!f) f = LLVMAddFunction(lc->cg->mod, name, ft);
  return LLVMBuildCall2(lc->b, ft, f, &a, 1, "");
}

static LLVMValueRef libdevice_call2(nv_lc_t *lc, const char *name, LLVMTypeRef t, LLVMValueRef a, LLVMValueRef b) {
  LLVMValueRef f = LLVMGetNamedFunction(lc->cg->mod, name);
  LLVMTypeRef ps[2] = {t, t};
  LLVMTypeRef ft = LLVMFunctionType(t, ps, 2, 0);
  if (!f) f = LLVMAddFunction(lc->cg->mod, name, ft);
  LLVMValueRef args[2] = {a, b};
  return LLVMBuildCall2(lc->b, ft, f, args, 2, "");
}

LLVMValueRef nv_combine(nv_lc_t *lc, const char *comb, drk_dtype_t t, LLVMValueRef a, LLVMValueRef b) {
  LLVMTypeRef ty = LLVMTypeOf(a);
  bool fl = LLVMGetTypeKind(ty) == LLVMFloatTypeKind || LLVMGetTypeKind(ty) == LLVMDoubleTypeKind;
  if (strcmp(comb, "sum") == 0) return fl ? LLVMBuildFAdd(lc->b, a, b, "") : LLVMBuildAdd(lc->b, a, b, "");
  bool mx = strcmp(comb, "max") == 0;
  if (!mx && strcmp(comb, "min") != 0) return NULL;
  if (fl) return call2(lc, mx ? "llvm.maximum" : "llvm.minimum", ty, a, b);
  if (is_unsigned(t)) return call2(lc, mx ? "llvm.umax" : "llvm.umin", ty, a, b);
  return call2(lc, mx ? "llvm.smax" : "llvm.smin", ty, a, b);
}

LLVMValueRef nv_ew_binary(nv_lc_t *lc, const drk_tile_op_t *op, drk_dtype_t t, LLVMValueRef a,
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
    case DRK_TOP_MAX: r = nv_combine(lc, "max", t, x, y); break;
    case DRK_TOP_MIN: r = nv_combine(lc, "min", t, x, y); break;
    case DRK_TOP_POW: r = libdevice_call2(lc, LLVMTypeOf(x) == lc->f64 ? "__nv_pow" : "__nv_powf", LLVMTypeOf(x), x, y); break;
    default: return NULL;
    }
    return from_compute(lc, t, r);
  }
  if (op->code == DRK_TOP_POW && drk_dtype_is_int(t) && t != DRK_DT_I4 && t != DRK_DT_U4) {
    /* Integer Pow through f64 pow: exact while the result fits in 53 bits (ONNX's integer
     * Pow overflows past that anyway); truncation as ONNX's reference does. */
    LLVMValueRef x = is_unsigned(t) ? LLVMBuildUIToFP(B, a, lc->f64, "") : LLVMBuildSIToFP(B, a, lc->f64, "");
    LLVMValueRef y = is_unsigned(t) ? LLVMBuildUIToFP(B, b, lc->f64, "") : LLVMBuildSIToFP(B, b, lc->f64, "");
    LLVMValueRef r = libdevice_call2(lc, "__nv_pow", lc->f64, x, y);
    return is_unsigned(t) ? LLVMBuildFPToUI(B, r, LLVMTypeOf(a), "") : LLVMBuildFPToSI(B, r, LLVMTypeOf(a), "");
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
  case DRK_TOP_MAX: return nv_combine(lc, "max", t, a, b);
  case DRK_TOP_MIN: return nv_combine(lc, "min", t, a, b);
  case DRK_TOP_AND: return LLVMBuildAnd(B, a, b, "");
  case DRK_TOP_OR: return LLVMBuildOr(B, a, b, "");
  default: return NULL;
  }
}

LLVMValueRef nv_ew_unary(nv_lc_t *lc, const drk_tile_op_t *op, drk_dtype_t t, LLVMValueRef a) {
  LLVMBuilderRef B = lc->b;
  if (!drk_dtype_is_float(t)) {
    if (!drk_dtype_is_int(t) || t == DRK_DT_I4 || t == DRK_DT_U4) return NULL;
    if (op->code == DRK_TOP_NEG) return LLVMBuildNeg(B, a, "");
    if (op->code == DRK_TOP_ABS) {
      if (is_unsigned(t)) return a;
      LLVMTypeRef ty = LLVMTypeOf(a);
      LLVMValueRef args[2] = {a, LLVMConstInt(lc->i1, 0, 0)};
      return drk_nvptx_call_intrinsic(lc->cg, "llvm.abs", &ty, 1, args, 2);
    }
    return NULL;
  }
  LLVMValueRef x = to_compute(lc, t, a), r;
  LLVMTypeRef ct = LLVMTypeOf(x);
  bool d = ct == lc->f64;
  const char *ld = NULL;
  switch (op->code) {
  case DRK_TOP_NEG: r = LLVMBuildFNeg(B, x, ""); break;
  case DRK_TOP_ABS: r = call1(lc, "llvm.fabs", ct, x); break;
  case DRK_TOP_SQRT: r = call1(lc, "llvm.sqrt", ct, x); break;
  case DRK_TOP_RSQRT: r = LLVMBuildFDiv(B, LLVMConstReal(ct, 1.0), call1(lc, "llvm.sqrt", ct, x), ""); break;
  case DRK_TOP_EXP: ld = d ? "__nv_exp" : "__nv_expf"; break;
  case DRK_TOP_EXP2: ld = d ? "__nv_exp2" : "__nv_exp2f"; break;
  case DRK_TOP_LOG: ld = d ? "__nv_log" : "__nv_logf"; break;
  case DRK_TOP_TANH: ld = d ? "__nv_tanh" : "__nv_tanhf"; break;
  case DRK_TOP_ERF: ld = d ? "__nv_erf" : "__nv_erff"; break;
  default: {
    /* rows added to tile_ops.def later: map by name to libdevice when there is one */
    static const char *const known[] = {"sin", "cos", "tan", "floor", "ceil", "round", "trunc",
                                        "sigmoid", "rint", "log2", "log1p", "expm1", "atan", "asin",
                                        "acos", "sinh", "cosh", "asinh", "acosh", "atanh", NULL};
    const char *nm = drk_tile_op_name(op->code);
    for (int i = 0; known[i]; i++) {
      if (strcmp(nm, known[i]) != 0) continue;
      if (strcmp(nm, "sigmoid") == 0) {
        /* 1 / (1 + exp(-x)) */
        LLVMValueRef e = libdevice_call(lc, d ? "__nv_exp" : "__nv_expf", ct, LLVMBuildFNeg(B, x, ""));
        r = LLVMBuildFDiv(B, LLVMConstReal(ct, 1.0), LLVMBuildFAdd(B, LLVMConstReal(ct, 1.0), e, ""), "");
        return from_compute(lc, t, r);
      }
      if (strcmp(nm, "round") == 0) return from_compute(lc, t, call1(lc, "llvm.roundeven", ct, x));
      char buf[32];
      snprintf(buf, sizeof buf, "__nv_%s%s", nm, d ? "" : "f");
      return from_compute(lc, t, libdevice_call(lc, buf, ct, x));
    }
    return NULL;
  }
  }
  if (ld) r = libdevice_call(lc, ld, ct, x);
  return from_compute(lc, t, r);
}

LLVMValueRef nv_cmp(nv_lc_t *lc, const drk_tile_op_t *op, drk_dtype_t t, const char *pred,
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

LLVMValueRef nv_cast(nv_lc_t *lc, const drk_tile_op_t *op, drk_dtype_t from, drk_dtype_t to,
                     LLVMValueRef v, bool rz) {
  LLVMBuilderRef B = lc->b;
  (void)op;
  if (from == to) return v;
  LLVMTypeRef tt = nv_reg_type(lc, to, false);
  if (!tt || !nv_reg_type(lc, from, false)) return NULL;
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
      return drk_nvptx_call_intrinsic(lc->cg, to == DRK_DT_F16 ? "llvm.nvvm.f2f16.rz" : "llvm.nvvm.f2bf16.rz",
                                      NULL, 0, &x, 1);
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

LLVMValueRef nv_const(nv_lc_t *lc, drk_dtype_t t, const drk_tile_attr_t *a) {
  if (!a) return NULL;
  double f = a->kind == DRK_TA_FLOAT ? a->f : (double)a->i;
  int64_t i = a->kind == DRK_TA_INT ? a->i : drk_f64_to_i64_sat(a->f);
  LLVMTypeRef ty = nv_reg_type(lc, t, false);
  if (!ty) return NULL;
  if (t == DRK_DT_F8E4M3) return LLVMConstInt(lc->i8, drk_f32_to_f8e4m3((float)f, true), 0);
  if (t == DRK_DT_F8E5M2) return LLVMConstInt(lc->i8, drk_f32_to_f8e5m2((float)f, true), 0);
  if (drk_dtype_is_float(t)) return LLVMConstReal(ty, f);
  if (t == DRK_DT_BOOL) return LLVMConstInt(lc->i1, i != 0, 0);
  return LLVMConstInt(ty, (unsigned long long)i, 1);
}

LLVMValueRef nv_shfl_xor(nv_lc_t *lc, LLVMValueRef v, unsigned mask) {
  LLVMBuilderRef B = lc->b;
  LLVMTypeRef t = LLVMTypeOf(v);
  LLVMTypeKind k = LLVMGetTypeKind(t);
  LLVMValueRef m = nv_i32(lc, mask);
  if (k == LLVMFloatTypeKind || t == lc->i32) return drk_nvptx_shfl(lc->cg, DRK_NVPTX_SHFL_BFLY, v, m);
  if (k == LLVMDoubleTypeKind || t == lc->i64 || k == LLVMPointerTypeKind) {
    LLVMValueRef x = k == LLVMPointerTypeKind ? LLVMBuildPtrToInt(B, v, lc->i64, "") : LLVMBuildBitCast(B, v, lc->i64, "");
    LLVMValueRef lo = LLVMBuildTrunc(B, x, lc->i32, "");
    LLVMValueRef hi = LLVMBuildTrunc(B, LLVMBuildLShr(B, x, nv_i64(lc, 32), ""), lc->i32, "");
    lo = drk_nvptx_shfl(lc->cg, DRK_NVPTX_SHFL_BFLY, lo, m);
    hi = drk_nvptx_shfl(lc->cg, DRK_NVPTX_SHFL_BFLY, hi, m);
    LLVMValueRef r = LLVMBuildOr(B, LLVMBuildZExt(B, lo, lc->i64, ""),
                                 LLVMBuildShl(B, LLVMBuildZExt(B, hi, lc->i64, ""), nv_i64(lc, 32), ""), "");
    return k == LLVMPointerTypeKind ? LLVMBuildIntToPtr(B, r, t, "") : LLVMBuildBitCast(B, r, t, "");
  }
  /* 1, 8, 16-bit integers and halves */
  LLVMTypeRef it = k == LLVMIntegerTypeKind ? t : lc->i16;
  LLVMValueRef x = it == t ? v : LLVMBuildBitCast(B, v, it, "");
  x = drk_nvptx_shfl(lc->cg, DRK_NVPTX_SHFL_BFLY, LLVMBuildZExt(B, x, lc->i32, ""), m);
  x = LLVMBuildTrunc(B, x, it, "");
  return it == t ? x : LLVMBuildBitCast(B, x, t, "");
}

/* ---- libdevice ---- */
static char *dupstr(const char *s) {
  size_t n = strlen(s) + 1;
  char *p = malloc(n);
  if (!p) drk_fatal_internal(__FILE__, __LINE__, "out of memory");
  return memcpy(p, s, n);
}

static char *libdevice_path(void) {
  const char *env = getenv("DRK_LIBDEVICE");
  char buf[1024];
  if (env && *env) return dupstr(env);
  const char *ch = getenv("CUDA_HOME");
  if (ch && *ch) {
    snprintf(buf, sizeof buf, "%s/nvvm/libdevice/libdevice.10.bc", ch);
    FILE *f = fopen(buf, "rb");
    if (f) {
      fclose(f);
      return dupstr(buf);
    }
  }
  FILE *f = fopen("/usr/local/cuda/nvvm/libdevice/libdevice.10.bc", "rb");
  if (f) {
    fclose(f);
    return dupstr("/usr/local/cuda/nvvm/libdevice/libdevice.10.bc");
  }
  return NULL;
}

bool nv_link_libdevice(LLVMModuleRef mod, drk_diag_t *d) {
  bool need = false;
  for (LLVMValueRef f = LLVMGetFirstFunction(mod); f; f = LLVMGetNextFunction(f)) {
    size_t n;
    const char *nm = LLVMGetValueName2(f, &n);
    if (LLVMIsDeclaration(f) && n > 5 && strncmp(nm, "__nv_", 5) == 0) need = true;
  }
  if (!need) return true;
  char *path = libdevice_path();
  if (!path) {
    drk_diag_error(d, drk_loc_none,
                   "nvptx: math functions need CUDA's libdevice, not found (set DRK_LIBDEVICE or "
                   "CUDA_HOME; looked in /usr/local/cuda/nvvm/libdevice/libdevice.10.bc)");
    return false;
  }
  LLVMMemoryBufferRef buf = NULL;
  char *msg = NULL;
  if (LLVMCreateMemoryBufferWithContentsOfFile(path, &buf, &msg)) {
    drk_diag_error(d, drk_loc_none, "nvptx: cannot read libdevice %s: %s", path, msg ? msg : "?");
    LLVMDisposeMessage(msg);
    free(path);
    return false;
  }
  LLVMModuleRef lib = NULL;
  if (LLVMParseBitcodeInContext2(LLVMGetModuleContext(mod), buf, &lib)) {
    drk_diag_error(d, drk_loc_none, "nvptx: cannot parse libdevice %s", path);
    LLVMDisposeMemoryBuffer(buf);
    free(path);
    return false;
  }
  LLVMDisposeMemoryBuffer(buf);
  LLVMSetTarget(lib, LLVMGetTarget(mod));
  LLVMSetDataLayout(lib, LLVMGetDataLayoutStr(mod));
  if (LLVMLinkModules2(mod, lib)) {
    drk_diag_error(d, drk_loc_none, "nvptx: linking libdevice %s failed", path);
    free(path);
    return false;
  }
  free(path);
  /* Only kernels stay visible: the optimizer then drops the unused libdevice functions. */
  for (LLVMValueRef f = LLVMGetFirstFunction(mod); f; f = LLVMGetNextFunction(f))
    if (!LLVMIsDeclaration(f) && LLVMGetFunctionCallConv(f) != DRK_NVPTX_CC_KERNEL)
      LLVMSetLinkage(f, LLVMInternalLinkage);
  for (LLVMValueRef g = LLVMGetFirstGlobal(mod); g; g = LLVMGetNextGlobal(g))
    if (!LLVMIsDeclaration(g) && LLVMGetLinkage(g) != LLVMInternalLinkage &&
        LLVMGetLinkage(g) != LLVMPrivateLinkage && LLVMGetLinkage(g) != LLVMExternalLinkage)
      LLVMSetLinkage(g, LLVMInternalLinkage);
  return true;
}
