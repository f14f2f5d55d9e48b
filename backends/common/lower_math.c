/* Target-independent arithmetic of the GPU tile lowerings: intrinsic calls, f8 decoding and
 * (software) encoding, the f32 compute type of f16/bf16/f8, reduction combiners,
 * comparisons, casts and constants. f16 and bf16 are computed in f32 and rounded back; f8
 * values live in i8 registers. Comparisons follow C: eq lt le gt ge are false on NaN, ne is
 * true. Float max/min propagate NaN. What a target does in hardware (f8 encoding on sm_89+,
 * f32 -> f16/bf16 rounding toward zero) comes through gpu_target_t. */
#include "backends/common/lower.h"

#include <string.h>

#include "ir/tensor.h"

LLVMValueRef gpu_call1(gpu_lc_t *lc, const char *intr, LLVMTypeRef t, LLVMValueRef a) {
  return lc->t->call_intrinsic(lc, intr, &t, 1, &a, 1);
}
LLVMValueRef gpu_call2(gpu_lc_t *lc, const char *intr, LLVMTypeRef t, LLVMValueRef a, LLVMValueRef b) {
  LLVMValueRef args[2] = {a, b};
  return lc->t->call_intrinsic(lc, intr, &t, 1, args, 2);
}

bool gpu_is_f8(drk_dtype_t t) { return t == DRK_DT_F8E4M3 || t == DRK_DT_F8E5M2; }
bool gpu_is_unsigned(drk_dtype_t t) { return t == DRK_DT_U8 || t == DRK_DT_BOOL || t == DRK_DT_U4; }

/* f8 (i8 bits) -> f32, exact. */
LLVMValueRef gpu_f8_decode(gpu_lc_t *lc, drk_dtype_t t, LLVMValueRef v) {
  LLVMBuilderRef b = lc->b;
  if (t == DRK_DT_F8E5M2) {
    LLVMValueRef h = LLVMBuildShl(b, LLVMBuildZExt(b, v, lc->i16, ""), LLVMConstInt(lc->i16, 8, 0), "");
    return LLVMBuildFPExt(b, LLVMBuildBitCast(b, h, lc->f16, ""), lc->f32, "");
  }
  LLVMValueRef x = LLVMBuildZExt(b, v, lc->i32, "");
  LLVMValueRef s = LLVMBuildShl(b, LLVMBuildAnd(b, x, gpu_i32(lc, 0x80), ""), gpu_i32(lc, 24), "");
  LLVMValueRef e = LLVMBuildAnd(b, LLVMBuildLShr(b, x, gpu_i32(lc, 3), ""), gpu_i32(lc, 15), "");
  LLVMValueRef m = LLVMBuildAnd(b, x, gpu_i32(lc, 7), "");
  LLVMValueRef nb = LLVMBuildOr(b, LLVMBuildShl(b, LLVMBuildAdd(b, e, gpu_i32(lc, 120), ""), gpu_i32(lc, 23), ""),
                                LLVMBuildShl(b, m, gpu_i32(lc, 20), ""), "");
  LLVMValueRef norm = LLVMBuildBitCast(b, nb, lc->f32, "");
  LLVMValueRef sub = LLVMBuildFMul(b, LLVMBuildUIToFP(b, m, lc->f32, ""), LLVMConstReal(lc->f32, 1.0 / 512), "");
  LLVMValueRef mag = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntEQ, e, gpu_i32(lc, 0), ""), sub, norm, "");
  LLVMValueRef isnan = LLVMBuildICmp(b, LLVMIntEQ, LLVMBuildAnd(b, x, gpu_i32(lc, 0x7f), ""), gpu_i32(lc, 0x7f), "");
  mag = LLVMBuildSelect(b, isnan, LLVMConstReal(lc->f32, 0.0 / 0.0), mag, "");
  LLVMValueRef mb = LLVMBuildOr(b, LLVMBuildBitCast(b, mag, lc->i32, ""), s, "");
  return LLVMBuildBitCast(b, mb, lc->f32, "");
}

/* f32 -> f8 bits, round to nearest even, saturating finite, NaN -> 0x7f | sign. */
LLVMValueRef gpu_f8_encode(gpu_lc_t *lc, drk_dtype_t t, LLVMValueRef f) {
  LLVMBuilderRef b = lc->b;
  if (lc->t->f8_encode) {
    LLVMValueRef r = lc->t->f8_encode(lc, t, f);
    if (r) return r;
  }
  LLVMValueRef bits = LLVMBuildBitCast(b, f, lc->i32, "");
  LLVMValueRef s = LLVMBuildLShr(b, LLVMBuildAnd(b, bits, gpu_i32(lc, (int64_t)0x80000000u), ""), gpu_i32(lc, 24), "");
  LLVMValueRef a = LLVMBuildAnd(b, bits, gpu_i32(lc, 0x7fffffff), "");
  LLVMValueRef isnan = LLVMBuildICmp(b, LLVMIntUGT, a, gpu_i32(lc, 0x7f800000), "");
  LLVMValueRef code;
  if (t == DRK_DT_F8E5M2) {
    /* f32 -> f16 (rn), then round the f16 bits to their top 8 */
    LLVMValueRef h = LLVMBuildZExt(b, LLVMBuildBitCast(b, LLVMBuildFPTrunc(b, LLVMBuildBitCast(b, a, lc->f32, ""), lc->f16, ""), lc->i16, ""), lc->i32, "");
    LLVMValueRef r = LLVMBuildAdd(b, LLVMBuildAdd(b, h, gpu_i32(lc, 0x7f), ""),
                                  LLVMBuildAnd(b, LLVMBuildLShr(b, h, gpu_i32(lc, 8), ""), gpu_i32(lc, 1), ""), "");
    code = LLVMBuildLShr(b, r, gpu_i32(lc, 8), "");
    code = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntUGT, code, gpu_i32(lc, 0x7b), ""), gpu_i32(lc, 0x7b), code, "");
  } else {
    LLVMValueRef af = LLVMBuildBitCast(b, a, lc->f32, "");
    LLVMValueRef q = LLVMBuildFMul(b, af, LLVMConstReal(lc->f32, 512.0), "");
    LLVMTypeRef ft = lc->f32;
    q = LLVMBuildFPToUI(b, lc->t->call_intrinsic(lc, "llvm.roundeven", &ft, 1, &q, 1), lc->i32, "");
    LLVMValueRef r = LLVMBuildAdd(b, LLVMBuildAdd(b, a, gpu_i32(lc, 0x7ffff), ""),
                                  LLVMBuildAnd(b, LLVMBuildLShr(b, a, gpu_i32(lc, 20), ""), gpu_i32(lc, 1), ""), "");
    LLVMValueRef nc = LLVMBuildSub(b, LLVMBuildLShr(b, r, gpu_i32(lc, 20), ""), gpu_i32(lc, 960), "");
    LLVMValueRef small = LLVMBuildFCmp(b, LLVMRealOLT, af, LLVMConstReal(lc->f32, 1.0 / 64), "");
    code = LLVMBuildSelect(b, small, q, nc, "");
    code = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntUGT, code, gpu_i32(lc, 0x7e), ""), gpu_i32(lc, 0x7e), code, "");
  }
  code = LLVMBuildSelect(b, isnan, gpu_i32(lc, 0x7f), code, "");
  return LLVMBuildTrunc(b, LLVMBuildOr(b, code, s, ""), lc->i8, "");
}

/* value of float dtype t -> its compute type (f32 for f16/bf16/f8) */
LLVMValueRef gpu_to_compute(gpu_lc_t *lc, drk_dtype_t t, LLVMValueRef v) {
  if (gpu_is_f8(t)) return gpu_f8_decode(lc, t, v);
  if (t == DRK_DT_F16 || t == DRK_DT_BF16) return LLVMBuildFPExt(lc->b, v, lc->f32, "");
  return v;
}
LLVMValueRef gpu_from_compute(gpu_lc_t *lc, drk_dtype_t t, LLVMValueRef v) {
  if (gpu_is_f8(t)) return gpu_f8_encode(lc, t, v);
  if (t == DRK_DT_F16) return LLVMBuildFPTrunc(lc->b, v, lc->f16, "");
  if (t == DRK_DT_BF16) return LLVMBuildFPTrunc(lc->b, v, lc->bf16, "");
  return v;
}

LLVMValueRef gpu_combine(gpu_lc_t *lc, const char *comb, drk_dtype_t t, LLVMValueRef a, LLVMValueRef b) {
  LLVMTypeRef ty = LLVMTypeOf(a);
  bool fl = LLVMGetTypeKind(ty) == LLVMFloatTypeKind || LLVMGetTypeKind(ty) == LLVMDoubleTypeKind;
  if (strcmp(comb, "sum") == 0) return fl ? LLVMBuildFAdd(lc->b, a, b, "") : LLVMBuildAdd(lc->b, a, b, "");
  bool mx = strcmp(comb, "max") == 0;
  if (!mx && strcmp(comb, "min") != 0) return NULL;
  if (fl) return gpu_call2(lc, mx ? "llvm.maximum" : "llvm.minimum", ty, a, b);
  if (gpu_is_unsigned(t)) return gpu_call2(lc, mx ? "llvm.umax" : "llvm.umin", ty, a, b);
  return gpu_call2(lc, mx ? "llvm.smax" : "llvm.smin", ty, a, b);
}

LLVMValueRef gpu_cmp(gpu_lc_t *lc, const drk_tile_op_t *op, drk_dtype_t t, const char *pred,
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
    return LLVMBuildFCmp(lc->b, fp[p], gpu_to_compute(lc, t, a), gpu_to_compute(lc, t, b), "");
  if (LLVMGetTypeKind(LLVMTypeOf(a)) == LLVMPointerTypeKind) return LLVMBuildICmp(lc->b, up[p], a, b, "");
  return LLVMBuildICmp(lc->b, gpu_is_unsigned(t) ? up[p] : sp[p], a, b, "");
}

LLVMValueRef gpu_cast(gpu_lc_t *lc, const drk_tile_op_t *op, drk_dtype_t from, drk_dtype_t to,
                     LLVMValueRef v, bool rz) {
  LLVMBuilderRef B = lc->b;
  (void)op;
  if (from == to) return v;
  LLVMTypeRef tt = gpu_reg_type(lc, to, false);
  if (!tt || !gpu_reg_type(lc, from, false)) return NULL;
  if (to == DRK_DT_BOOL) {
    if (drk_dtype_is_float(from))
      return LLVMBuildFCmp(B, LLVMRealUNE, gpu_to_compute(lc, from, v), LLVMConstReal(LLVMTypeOf(gpu_to_compute(lc, from, v)), 0), "");
    return LLVMBuildICmp(B, LLVMIntNE, v, LLVMConstNull(LLVMTypeOf(v)), "");
  }
  if (drk_dtype_is_float(from) && drk_dtype_is_float(to)) {
    LLVMValueRef x = gpu_is_f8(from) ? gpu_f8_decode(lc, from, v) : v;
    LLVMTypeRef xt = LLVMTypeOf(x);
    if (gpu_is_f8(to)) {
      if (xt != lc->f32) x = xt == lc->f64 ? LLVMBuildFPTrunc(B, x, lc->f32, "") : LLVMBuildFPExt(B, x, lc->f32, "");
      return gpu_f8_encode(lc, to, x);
    }
    if (xt == tt) return x;
    unsigned bx = LLVMGetTypeKind(xt) == LLVMDoubleTypeKind ? 64 : LLVMGetTypeKind(xt) == LLVMFloatTypeKind ? 32 : 16;
    unsigned bt = drk_dtype_bits(to);
    if (bt > bx || (bt == 32 && bx == 16)) return LLVMBuildFPExt(B, x, tt, "");
    if (bx == 16 && bt == 16) return LLVMBuildFPTrunc(B, LLVMBuildFPExt(B, x, lc->f32, ""), tt, ""); /* f16<->bf16 */
    if (rz && bt == 16) {
      if (xt != lc->f32) x = LLVMBuildFPTrunc(B, x, lc->f32, "");
      return lc->t->fptrunc_rz(lc, x, to);
    }
    if (to == DRK_DT_BF16 && bx == 64) x = LLVMBuildFPTrunc(B, x, lc->f32, "");
    return LLVMBuildFPTrunc(B, x, tt, "");
  }
  if (drk_dtype_is_float(to)) { /* int/bool -> float */
    LLVMTypeRef mid = to == DRK_DT_F64 ? lc->f64 : lc->f32;
    LLVMValueRef x = gpu_is_unsigned(from) ? LLVMBuildUIToFP(B, v, mid, "") : LLVMBuildSIToFP(B, v, mid, "");
    return gpu_from_compute(lc, to, x);
  }
  if (drk_dtype_is_float(from)) { /* float -> int */
    LLVMValueRef x = gpu_to_compute(lc, from, v);
    return gpu_is_unsigned(to) ? LLVMBuildFPToUI(B, x, tt, "") : LLVMBuildFPToSI(B, x, tt, "");
  }
  /* int -> int */
  unsigned bf = LLVMGetIntTypeWidth(LLVMTypeOf(v)), bt = LLVMGetIntTypeWidth(tt);
  if (bt < bf) return LLVMBuildTrunc(B, v, tt, "");
  if (bt == bf) return v;
  return gpu_is_unsigned(from) ? LLVMBuildZExt(B, v, tt, "") : LLVMBuildSExt(B, v, tt, "");
}

LLVMValueRef gpu_const(gpu_lc_t *lc, drk_dtype_t t, const drk_tile_attr_t *a) {
  if (!a) return NULL;
  double f = a->kind == DRK_TA_FLOAT ? a->f : (double)a->i;
  int64_t i = a->kind == DRK_TA_INT ? a->i : drk_f64_to_i64_sat(a->f);
  LLVMTypeRef ty = gpu_reg_type(lc, t, false);
  if (!ty) return NULL;
  if (t == DRK_DT_F8E4M3) return LLVMConstInt(lc->i8, drk_f32_to_f8e4m3((float)f, true), 0);
  if (t == DRK_DT_F8E5M2) return LLVMConstInt(lc->i8, drk_f32_to_f8e5m2((float)f, true), 0);
  if (drk_dtype_is_float(t)) return LLVMConstReal(ty, f);
  if (t == DRK_DT_BOOL) return LLVMConstInt(lc->i1, i != 0, 0);
  return LLVMConstInt(ty, (unsigned long long)i, 1);
}

LLVMValueRef gpu_ew_binary(gpu_lc_t *lc, const drk_tile_op_t *op, drk_dtype_t t, LLVMValueRef a,
                           LLVMValueRef b) {
  LLVMBuilderRef B = lc->b;
  if (drk_dtype_is_float(t)) {
    LLVMValueRef x = gpu_to_compute(lc, t, a), y = gpu_to_compute(lc, t, b), r;
    switch (op->code) {
    case DRK_TOP_ADD: r = LLVMBuildFAdd(B, x, y, ""); break;
    case DRK_TOP_SUB: r = LLVMBuildFSub(B, x, y, ""); break;
    case DRK_TOP_MUL: r = LLVMBuildFMul(B, x, y, ""); break;
    case DRK_TOP_DIV:
      r = LLVMBuildFDiv(B, x, y, "");
      /* div {approx}: the target's fast division (NVPTX div.approx, AMDGPU rcp + mul) */
      if (drk_tile_op_attr_int(op, "approx", 0)) LLVMSetFastMathFlags(r, LLVMFastMathApproxFunc | LLVMFastMathAllowReciprocal);
      break;
    case DRK_TOP_REM: r = LLVMBuildFRem(B, x, y, ""); break;
    case DRK_TOP_MAX: r = gpu_combine(lc, "max", t, x, y); break;
    case DRK_TOP_MIN: r = gpu_combine(lc, "min", t, x, y); break;
    case DRK_TOP_POW:
      r = lc->t->pow(lc, x, y);
      if (!r) return NULL;
      break;
    default: return NULL;
    }
    return gpu_from_compute(lc, t, r);
  }
  if (op->code == DRK_TOP_POW && lc->t->int_pow && drk_dtype_is_int(t) && t != DRK_DT_I4 && t != DRK_DT_U4) {
    /* Integer Pow through f64 pow: exact while the result fits in 53 bits (ONNX's integer
     * Pow overflows past that anyway); truncation as ONNX's reference does. */
    LLVMValueRef x = gpu_is_unsigned(t) ? LLVMBuildUIToFP(B, a, lc->f64, "") : LLVMBuildSIToFP(B, a, lc->f64, "");
    LLVMValueRef y = gpu_is_unsigned(t) ? LLVMBuildUIToFP(B, b, lc->f64, "") : LLVMBuildSIToFP(B, b, lc->f64, "");
    LLVMValueRef r = lc->t->pow(lc, x, y);
    return gpu_is_unsigned(t) ? LLVMBuildFPToUI(B, r, LLVMTypeOf(a), "") : LLVMBuildFPToSI(B, r, LLVMTypeOf(a), "");
  }
  if (!drk_dtype_is_int(t) && t != DRK_DT_BOOL) return NULL;
  if (t == DRK_DT_I4 || t == DRK_DT_U4) return NULL;
  bool u = gpu_is_unsigned(t);
  switch (op->code) {
  case DRK_TOP_ADD: return LLVMBuildAdd(B, a, b, "");
  case DRK_TOP_SUB: return LLVMBuildSub(B, a, b, "");
  case DRK_TOP_MUL: return LLVMBuildMul(B, a, b, "");
  case DRK_TOP_DIV: return u ? LLVMBuildUDiv(B, a, b, "") : LLVMBuildSDiv(B, a, b, "");
  case DRK_TOP_REM: return u ? LLVMBuildURem(B, a, b, "") : LLVMBuildSRem(B, a, b, "");
  case DRK_TOP_MAX: return gpu_combine(lc, "max", t, a, b);
  case DRK_TOP_MIN: return gpu_combine(lc, "min", t, a, b);
  case DRK_TOP_AND: return LLVMBuildAnd(B, a, b, "");
  case DRK_TOP_OR: return LLVMBuildOr(B, a, b, "");
  default: return NULL;
  }
}

LLVMValueRef gpu_ew_unary(gpu_lc_t *lc, const drk_tile_op_t *op, drk_dtype_t t, LLVMValueRef a) {
  LLVMBuilderRef B = lc->b;
  if (!drk_dtype_is_float(t)) {
    if (!drk_dtype_is_int(t) || t == DRK_DT_I4 || t == DRK_DT_U4) return NULL;
    if (op->code == DRK_TOP_NEG) return LLVMBuildNeg(B, a, "");
    if (op->code == DRK_TOP_ABS) {
      if (gpu_is_unsigned(t)) return a;
      LLVMTypeRef ty = LLVMTypeOf(a);
      LLVMValueRef args[2] = {a, LLVMConstInt(lc->i1, 0, 0)};
      return lc->t->call_intrinsic(lc, "llvm.abs", &ty, 1, args, 2);
    }
    return NULL;
  }
  LLVMValueRef x = gpu_to_compute(lc, t, a), r;
  LLVMTypeRef ct = LLVMTypeOf(x);
  switch (op->code) {
  case DRK_TOP_NEG: r = LLVMBuildFNeg(B, x, ""); break;
  case DRK_TOP_ABS: r = gpu_call1(lc, "llvm.fabs", ct, x); break;
  case DRK_TOP_SQRT: r = gpu_call1(lc, "llvm.sqrt", ct, x); break;
  case DRK_TOP_RSQRT: r = LLVMBuildFDiv(B, LLVMConstReal(ct, 1.0), gpu_call1(lc, "llvm.sqrt", ct, x), ""); break;
  default:
    r = lc->t->math1(lc, op, ct, x);
    if (!r) return NULL;
  }
  return gpu_from_compute(lc, t, r);
}
