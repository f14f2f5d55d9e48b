/* Builders for AMDGPU primitives: kernel attributes, LDS, work-item/workgroup ids, lane ids,
 * barriers, cross-lane shuffles through ds_bpermute, wave reductions, MFMA, buffer
 * resources and loads, loop metadata.
 *
 * Everything is an LLVM intrinsic call or plain IR; no inline asm. Shuffles use
 * ds_bpermute_b32 rather than DPP so any lane pattern works with one instruction (DPP is
 * faster for row-local patterns; a later pass may pick it). Callers only use what the arch
 * has: LLVM aborts on an intrinsic it cannot select (fp8 MFMA needs gfx940+), so the
 * lowering checks the arch before it gets here. */
#include "backends/amdgpu/amdgpu.h"

#include <stdio.h>
#include <string.h>

#include <llvm-c/DebugInfo.h> /* LLVMTemporaryMDNode: the self-reference of a loop id */

LLVMValueRef drk_amdgpu_call_intrinsic(drk_amdgpu_cg_t *cg, const char *name, LLVMTypeRef *over,
                                       unsigned n_over, LLVMValueRef *args, unsigned n_args) {
  unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
  if (!id) drk_fatal_internal(__FILE__, __LINE__, name); /* a typo here is our bug */
  if (!LLVMIntrinsicIsOverloaded(id)) n_over = 0;
  LLVMValueRef fn = LLVMGetIntrinsicDeclaration(cg->mod, id, over, n_over);
  LLVMTypeRef ft = LLVMIntrinsicGetType(cg->ctx, id, over, n_over);
  return LLVMBuildCall2(cg->b, ft, fn, args, n_args, "");
}

static LLVMValueRef drk_i32(drk_amdgpu_cg_t *cg, long long v) {
  return LLVMConstInt(LLVMInt32TypeInContext(cg->ctx), (unsigned long long)v, 1);
}

/* ---- kernels ---- */
static void drk_fn_str_attr(drk_amdgpu_cg_t *cg, LLVMValueRef fn, const char *k, const char *v) {
  LLVMAttributeRef a = LLVMCreateStringAttribute(cg->ctx, k, (unsigned)strlen(k), v, (unsigned)strlen(v));
  LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex, a);
}

LLVMValueRef drk_amdgpu_kernel_add(drk_amdgpu_cg_t *cg, const char *name, LLVMTypeRef *params,
                                   unsigned n_params) {
  LLVMTypeRef ft = LLVMFunctionType(LLVMVoidTypeInContext(cg->ctx), params, n_params, 0);
  LLVMValueRef fn = LLVMAddFunction(cg->mod, name, ft);
  LLVMSetFunctionCallConv(fn, DRK_AMDGPU_CC_KERNEL);
  LLVMSetLinkage(fn, LLVMExternalLinkage);
  drk_fn_str_attr(cg, fn, "uniform-work-group-size", "true");
  return fn;
}

void drk_amdgpu_kernel_set_workgroup_size(drk_amdgpu_cg_t *cg, LLVMValueRef fn, int min, int max) {
  if (max <= 0) return;
  char v[32];
  snprintf(v, sizeof v, "%d,%d", min > 0 ? min : 1, max);
  drk_fn_str_attr(cg, fn, "amdgpu-flat-work-group-size", v);
}

void drk_amdgpu_kernel_set_waves_per_eu(drk_amdgpu_cg_t *cg, LLVMValueRef fn, int min, int max) {
  if (min <= 0) return;
  char v[32];
  if (max > 0) snprintf(v, sizeof v, "%d,%d", min, max);
  else snprintf(v, sizeof v, "%d", min);
  drk_fn_str_attr(cg, fn, "amdgpu-waves-per-eu", v);
}

void drk_amdgpu_kernel_set_ftz(drk_amdgpu_cg_t *cg, LLVMValueRef fn) {
  drk_fn_str_attr(cg, fn, "denormal-fp-math-f32", "preserve-sign,preserve-sign");
}

/* ---- LDS ---- */
LLVMValueRef drk_amdgpu_lds_static(drk_amdgpu_cg_t *cg, const char *name, unsigned bytes,
                                   unsigned align) {
  LLVMTypeRef t = LLVMArrayType2(LLVMInt8TypeInContext(cg->ctx), bytes);
  LLVMValueRef g = LLVMAddGlobalInAddressSpace(cg->mod, t, name, DRK_AMDGPU_AS_LDS);
  LLVMSetInitializer(g, LLVMGetPoison(t)); /* LDS cannot be initialised */
  LLVMSetLinkage(g, LLVMInternalLinkage);
  LLVMSetAlignment(g, align ? align : 16);
  return g;
}

LLVMValueRef drk_amdgpu_lds_dynamic(drk_amdgpu_cg_t *cg) {
  LLVMValueRef g = LLVMGetNamedGlobal(cg->mod, "drk_dlds");
  if (g) return g;
  LLVMTypeRef t = LLVMArrayType2(LLVMInt8TypeInContext(cg->ctx), 0);
  g = LLVMAddGlobalInAddressSpace(cg->mod, t, "drk_dlds", DRK_AMDGPU_AS_LDS);
  LLVMSetLinkage(g, LLVMExternalLinkage);
  LLVMSetAlignment(g, 16);
  return g;
}

/* ---- ids ---- */
LLVMValueRef drk_amdgpu_workitem_id(drk_amdgpu_cg_t *cg, int axis) {
  char name[40];
  DRK_ASSERT(axis >= 0 && axis <= 2);
  snprintf(name, sizeof name, "llvm.amdgcn.workitem.id.%c", "xyz"[axis]);
  return drk_amdgpu_call_intrinsic(cg, name, NULL, 0, NULL, 0);
}

LLVMValueRef drk_amdgpu_workgroup_id(drk_amdgpu_cg_t *cg, int axis) {
  char name[40];
  DRK_ASSERT(axis >= 0 && axis <= 2);
  snprintf(name, sizeof name, "llvm.amdgcn.workgroup.id.%c", "xyz"[axis]);
  return drk_amdgpu_call_intrinsic(cg, name, NULL, 0, NULL, 0);
}

/* Loads an integer of `bits` at byte `off` of the v5 implicit kernel arguments. */
static LLVMValueRef drk_implicitarg(drk_amdgpu_cg_t *cg, unsigned off, unsigned bits) {
  LLVMValueRef p = drk_amdgpu_call_intrinsic(cg, "llvm.amdgcn.implicitarg.ptr", NULL, 0, NULL, 0);
  LLVMTypeRef i8 = LLVMInt8TypeInContext(cg->ctx), it = LLVMIntTypeInContext(cg->ctx, bits);
  LLVMValueRef idx = LLVMConstInt(LLVMInt64TypeInContext(cg->ctx), off, 0);
  LLVMValueRef q = LLVMBuildInBoundsGEP2(cg->b, i8, p, &idx, 1, "");
  LLVMValueRef v = LLVMBuildLoad2(cg->b, it, q, "");
  LLVMSetAlignment(v, bits / 8);
  LLVMSetMetadata(v, LLVMGetMDKindIDInContext(cg->ctx, "invariant.load", 14),
                  LLVMMetadataAsValue(cg->ctx, LLVMMDNodeInContext2(cg->ctx, NULL, 0)));
  return bits == 32 ? v : LLVMBuildZExt(cg->b, v, LLVMInt32TypeInContext(cg->ctx), "");
}

LLVMValueRef drk_amdgpu_num_workgroups(drk_amdgpu_cg_t *cg, int axis) {
  DRK_ASSERT(axis >= 0 && axis <= 2);
  return drk_implicitarg(cg, 4u * (unsigned)axis, 32); /* hidden_block_count_{x,y,z} */
}

void drk_amdgpu_xcd_remap(drk_amdgpu_cg_t *cg, int n_xcd, LLVMValueRef n[3], LLVMValueRef ids[3], LLVMValueRef out[3]) {
  LLVMBuilderRef B = cg->b;
  LLVMValueRef X = drk_i32(cg, n_xcd);
  LLVMValueRef n01 = LLVMBuildMul(B, n[0], n[1], "");
  LLVMValueRef G = LLVMBuildMul(B, n01, n[2], "");
  LLVMValueRef p = LLVMBuildAdd(B, LLVMBuildMul(B, ids[2], n[1], ""), ids[1], "");
  p = LLVMBuildAdd(B, LLVMBuildMul(B, p, n[0], ""), ids[0], "");
  LLVMValueRef q = LLVMBuildUDiv(B, G, X, "");
  LLVMValueRef r = LLVMBuildAdd(B, LLVMBuildMul(B, LLVMBuildURem(B, p, X, ""), q, ""), LLVMBuildUDiv(B, p, X, ""), "");
  LLVMValueRef in = LLVMBuildICmp(B, LLVMIntULT, p, LLVMBuildMul(B, q, X, ""), "");
  p = LLVMBuildSelect(B, in, r, p, "xcd.pid");
  out[0] = LLVMBuildURem(B, p, n[0], "");
  out[1] = LLVMBuildURem(B, LLVMBuildUDiv(B, p, n[0], ""), n[1], "");
  out[2] = LLVMBuildUDiv(B, p, n01, "");
}

LLVMValueRef drk_amdgpu_workgroup_size(drk_amdgpu_cg_t *cg, int axis) {
  DRK_ASSERT(axis >= 0 && axis <= 2);
  return drk_implicitarg(cg, 12u + 2u * (unsigned)axis, 16); /* hidden_group_size_{x,y,z} */
}

LLVMValueRef drk_amdgpu_lane_id(drk_amdgpu_cg_t *cg) {
  LLVMValueRef a[] = {drk_i32(cg, -1), drk_i32(cg, 0)};
  LLVMValueRef lo = drk_amdgpu_call_intrinsic(cg, "llvm.amdgcn.mbcnt.lo", NULL, 0, a, 2);
  LLVMValueRef b[] = {drk_i32(cg, -1), lo};
  return drk_amdgpu_call_intrinsic(cg, "llvm.amdgcn.mbcnt.hi", NULL, 0, b, 2);
}

LLVMValueRef drk_amdgpu_readfirstlane(drk_amdgpu_cg_t *cg, LLVMValueRef v) {
  LLVMTypeRef t = LLVMTypeOf(v);
  return drk_amdgpu_call_intrinsic(cg, "llvm.amdgcn.readfirstlane", &t, 1, &v, 1);
}

LLVMValueRef drk_amdgpu_wave_index(drk_amdgpu_cg_t *cg) {
  LLVMValueRef w = LLVMBuildLShr(cg->b, drk_amdgpu_workitem_id(cg, 0), drk_i32(cg, 6), "wave");
  return drk_amdgpu_readfirstlane(cg, w);
}

/* ---- barriers ---- */
void drk_amdgpu_s_barrier(drk_amdgpu_cg_t *cg) {
  drk_amdgpu_call_intrinsic(cg, "llvm.amdgcn.s.barrier", NULL, 0, NULL, 0);
}

void drk_amdgpu_barrier(drk_amdgpu_cg_t *cg) {
  unsigned wg = LLVMGetSyncScopeID(cg->ctx, "workgroup", 9);
  LLVMBuildFenceSyncScope(cg->b, LLVMAtomicOrderingRelease, wg, "");
  drk_amdgpu_s_barrier(cg);
  LLVMBuildFenceSyncScope(cg->b, LLVMAtomicOrderingAcquire, wg, "");
}

/* ---- loop metadata ---- */
void drk_amdgpu_loop_no_unroll(drk_amdgpu_cg_t *cg, LLVMValueRef latch_br) {
  /* the loop id: a node whose first operand is itself, made through a temporary */
  LLVMMetadataRef tmp = LLVMTemporaryMDNode(cg->ctx, NULL, 0);
  LLVMMetadataRef s = LLVMMDStringInContext2(cg->ctx, "llvm.loop.unroll.disable", 24);
  LLVMMetadataRef ops[2] = {tmp, LLVMMDNodeInContext2(cg->ctx, &s, 1)};
  LLVMMetadataRef id = LLVMMDNodeInContext2(cg->ctx, ops, 2);
  LLVMMetadataReplaceAllUsesWith(tmp, id);
  LLVMSetMetadata(latch_br, LLVMGetMDKindIDInContext(cg->ctx, "llvm.loop", 9), LLVMMetadataAsValue(cg->ctx, id));
}

/* ---- cross-lane ---- */
LLVMValueRef drk_amdgpu_bpermute(drk_amdgpu_cg_t *cg, LLVMValueRef v, LLVMValueRef src_lane) {
  LLVMTypeRef t = LLVMTypeOf(v), i32 = LLVMInt32TypeInContext(cg->ctx);
  bool is_f = LLVMGetTypeKind(t) == LLVMFloatTypeKind;
  DRK_ASSERT(is_f || t == i32);
  /* The address is in bytes: lane * 4. */
  LLVMValueRef addr = LLVMBuildShl(cg->b, src_lane, drk_i32(cg, 2), "");
  LLVMValueRef a[] = {addr, is_f ? LLVMBuildBitCast(cg->b, v, i32, "") : v};
  LLVMValueRef r = drk_amdgpu_call_intrinsic(cg, "llvm.amdgcn.ds.bpermute", NULL, 0, a, 2);
  return is_f ? LLVMBuildBitCast(cg->b, r, t, "") : r;
}

LLVMValueRef drk_amdgpu_shfl(drk_amdgpu_cg_t *cg, drk_amdgpu_shfl_t kind, LLVMValueRef v,
                             LLVMValueRef lane_or_delta) {
  LLVMValueRef lane = drk_amdgpu_lane_id(cg), src;
  switch (kind) {
  case DRK_AMDGPU_SHFL_BFLY: src = LLVMBuildXor(cg->b, lane, lane_or_delta, ""); break;
  case DRK_AMDGPU_SHFL_DOWN: {
    LLVMValueRef s = LLVMBuildAdd(cg->b, lane, lane_or_delta, "");
    LLVMValueRef in = LLVMBuildICmp(cg->b, LLVMIntULT, s, drk_i32(cg, DRK_AMDGPU_WAVE), "");
    src = LLVMBuildSelect(cg->b, in, s, lane, "");
    break;
  }
  case DRK_AMDGPU_SHFL_UP: {
    LLVMValueRef in = LLVMBuildICmp(cg->b, LLVMIntUGE, lane, lane_or_delta, "");
    src = LLVMBuildSelect(cg->b, in, LLVMBuildSub(cg->b, lane, lane_or_delta, ""), lane, "");
    break;
  }
  case DRK_AMDGPU_SHFL_IDX: src = LLVMBuildAnd(cg->b, lane_or_delta, drk_i32(cg, 63), ""); break;
  default: drk_unreachable();
  }
  return drk_amdgpu_bpermute(cg, v, src);
}

LLVMValueRef drk_amdgpu_wave_reduce(drk_amdgpu_cg_t *cg, drk_amdgpu_red_t op, LLVMValueRef v,
                                    unsigned width) {
  DRK_ASSERT(width >= 2 && width <= 64 && (width & (width - 1)) == 0);
  LLVMTypeRef t = LLVMTypeOf(v);
  bool is_f = LLVMGetTypeKind(t) == LLVMFloatTypeKind;
  for (unsigned off = width / 2; off >= 1; off /= 2) {
    LLVMValueRef o = drk_amdgpu_shfl(cg, DRK_AMDGPU_SHFL_BFLY, v, drk_i32(cg, off));
    LLVMValueRef a[] = {v, o};
    if (op == DRK_AMDGPU_RED_ADD)
      v = is_f ? LLVMBuildFAdd(cg->b, v, o, "") : LLVMBuildAdd(cg->b, v, o, "");
    else if (is_f)
      v = drk_amdgpu_call_intrinsic(cg, op == DRK_AMDGPU_RED_MAX ? "llvm.maximum" : "llvm.minimum",
                                    &t, 1, a, 2);
    else
      v = drk_amdgpu_call_intrinsic(cg, op == DRK_AMDGPU_RED_MAX ? "llvm.smax" : "llvm.smin", &t,
                                    1, a, 2);
  }
  return v;
}

/* ---- MFMA ---- */
static const drk_amdgpu_mfma_info_t drk_mfma_table[DRK_AMDGPU_MFMA_COUNT] = {
    [DRK_AMDGPU_MFMA_F32_32X32X8_BF16] = {"llvm.amdgcn.mfma.f32.32x32x8bf16.1k", 32, 32, 8, 4, 16, false},
    [DRK_AMDGPU_MFMA_F32_16X16X16_BF16] = {"llvm.amdgcn.mfma.f32.16x16x16bf16.1k", 16, 16, 16, 4, 4, false},
    [DRK_AMDGPU_MFMA_F32_32X32X8_F16] = {"llvm.amdgcn.mfma.f32.32x32x8f16", 32, 32, 8, 4, 16, false},
    [DRK_AMDGPU_MFMA_F32_16X16X16_F16] = {"llvm.amdgcn.mfma.f32.16x16x16f16", 16, 16, 16, 4, 4, false},
    [DRK_AMDGPU_MFMA_F32_16X16X32_FP8] = {"llvm.amdgcn.mfma.f32.16x16x32.fp8.fp8", 16, 16, 32, 8, 4, true},
    [DRK_AMDGPU_MFMA_F32_32X32X16_FP8] = {"llvm.amdgcn.mfma.f32.32x32x16.fp8.fp8", 32, 32, 16, 8, 16, true},
    [DRK_AMDGPU_MFMA_F32_16X16X32_BF8] = {"llvm.amdgcn.mfma.f32.16x16x32.bf8.bf8", 16, 16, 32, 8, 4, true},
    [DRK_AMDGPU_MFMA_F32_32X32X16_BF8] = {"llvm.amdgcn.mfma.f32.32x32x16.bf8.bf8", 32, 32, 16, 8, 16, true},
    [DRK_AMDGPU_MFMA_F32_16X16X4_F32] = {"llvm.amdgcn.mfma.f32.16x16x4f32", 16, 16, 4, 1, 4, false},
    [DRK_AMDGPU_MFMA_F32_32X32X2_F32] = {"llvm.amdgcn.mfma.f32.32x32x2f32", 32, 32, 2, 1, 16, false},
};

const drk_amdgpu_mfma_info_t *drk_amdgpu_mfma_info(drk_amdgpu_mfma_t kind) {
  DRK_ASSERT((unsigned)kind < DRK_AMDGPU_MFMA_COUNT);
  return &drk_mfma_table[kind];
}

LLVMTypeRef drk_amdgpu_mfma_ab_type(drk_amdgpu_cg_t *cg, drk_amdgpu_mfma_t kind) {
  switch (kind) {
  case DRK_AMDGPU_MFMA_F32_32X32X8_BF16:
  case DRK_AMDGPU_MFMA_F32_16X16X16_BF16: return LLVMVectorType(LLVMInt16TypeInContext(cg->ctx), 4);
  case DRK_AMDGPU_MFMA_F32_32X32X8_F16:
  case DRK_AMDGPU_MFMA_F32_16X16X16_F16: return LLVMVectorType(LLVMHalfTypeInContext(cg->ctx), 4);
  case DRK_AMDGPU_MFMA_F32_16X16X4_F32:
  case DRK_AMDGPU_MFMA_F32_32X32X2_F32: return LLVMFloatTypeInContext(cg->ctx);
  default: return LLVMInt64TypeInContext(cg->ctx); /* 8 packed fp8/bf8 bytes */
  }
}

LLVMValueRef drk_amdgpu_mfma(drk_amdgpu_cg_t *cg, drk_amdgpu_mfma_t kind, LLVMValueRef a,
                             LLVMValueRef bm, LLVMValueRef c) {
  const drk_amdgpu_mfma_info_t *in = drk_amdgpu_mfma_info(kind);
  LLVMTypeRef ab = drk_amdgpu_mfma_ab_type(cg, kind);
  DRK_ASSERT(LLVMTypeOf(a) == ab && LLVMTypeOf(bm) == ab);
  DRK_ASSERT(LLVMTypeOf(c) == LLVMVectorType(LLVMFloatTypeInContext(cg->ctx), in->acc_elems));
  LLVMValueRef args[] = {a, bm, c, drk_i32(cg, 0), drk_i32(cg, 0), drk_i32(cg, 0)};
  return drk_amdgpu_call_intrinsic(cg, in->intrinsic, NULL, 0, args, 6);
}

/* ---- memory ---- */
LLVMValueRef drk_amdgpu_buffer_rsrc(drk_amdgpu_cg_t *cg, LLVMValueRef base, LLVMValueRef num_bytes) {
  LLVMTypeRef i64 = LLVMInt64TypeInContext(cg->ctx);
  LLVMTypeRef over[] = {LLVMPointerTypeInContext(cg->ctx, DRK_AMDGPU_AS_BUFFER_RSRC), LLVMTypeOf(base)};
  unsigned id = LLVMLookupIntrinsicID("llvm.amdgcn.make.buffer.rsrc", 28);
  DRK_ASSERT(id);
  /* The num_records operand is i64 in LLVM 22 (i32 before); follow the declaration. */
  LLVMTypeRef ft = LLVMIntrinsicGetType(cg->ctx, id, over, 2);
  LLVMTypeRef nt = LLVMTypeOf(num_bytes), want = i64;
  LLVMTypeRef ps[4];
  if (LLVMCountParamTypes(ft) == 4) {
    LLVMGetParamTypes(ft, ps);
    want = ps[2];
  }
  if (nt != want)
    num_bytes = LLVMGetIntTypeWidth(nt) < LLVMGetIntTypeWidth(want)
                    ? LLVMBuildZExt(cg->b, num_bytes, want, "")
                    : LLVMBuildTrunc(cg->b, num_bytes, want, "");
  /* Word 3 = 0x00020000: DATA_FORMAT 32 bits, the value gfx9 needs for raw (untyped)
   * buffer accesses to be range-checked (as composable_kernel uses on gfx90a/gfx942). */
  LLVMValueRef args[] = {base, LLVMConstInt(LLVMInt16TypeInContext(cg->ctx), 0, 0), num_bytes,
                         drk_i32(cg, 0x00020000)};
  LLVMValueRef fn = LLVMGetIntrinsicDeclaration(cg->mod, id, over, 2);
  return LLVMBuildCall2(cg->b, ft, fn, args, 4, "");
}

LLVMValueRef drk_amdgpu_buffer_load(drk_amdgpu_cg_t *cg, LLVMTypeRef t, LLVMValueRef rsrc,
                                    LLVMValueRef voffset) {
  LLVMValueRef a[] = {rsrc, voffset, drk_i32(cg, 0), drk_i32(cg, 0)};
  return drk_amdgpu_call_intrinsic(cg, "llvm.amdgcn.raw.ptr.buffer.load", &t, 1, a, 4);
}

void drk_amdgpu_buffer_store(drk_amdgpu_cg_t *cg, LLVMValueRef v, LLVMValueRef rsrc,
                             LLVMValueRef voffset) {
  LLVMTypeRef t = LLVMTypeOf(v);
  LLVMValueRef a[] = {v, rsrc, voffset, drk_i32(cg, 0), drk_i32(cg, 0)};
  drk_amdgpu_call_intrinsic(cg, "llvm.amdgcn.raw.ptr.buffer.store", &t, 1, a, 5);
}

LLVMValueRef drk_amdgpu_global_load(drk_amdgpu_cg_t *cg, LLVMTypeRef t, LLVMValueRef ptr,
                                    LLVMValueRef index, unsigned align) {
  LLVMValueRef p = LLVMBuildInBoundsGEP2(cg->b, t, ptr, &index, 1, "");
  LLVMValueRef v = LLVMBuildLoad2(cg->b, t, p, "");
  if (align) LLVMSetAlignment(v, align);
  return v;
}

void drk_amdgpu_global_store(drk_amdgpu_cg_t *cg, LLVMValueRef v, LLVMValueRef ptr,
                             LLVMValueRef index, unsigned align) {
  LLVMValueRef p = LLVMBuildInBoundsGEP2(cg->b, LLVMTypeOf(v), ptr, &index, 1, "");
  LLVMValueRef s = LLVMBuildStore(cg->b, v, p);
  if (align) LLVMSetAlignment(s, align);
}
