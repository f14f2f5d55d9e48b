/* Builders for NVPTX primitives: kernel attributes, shared memory, special registers,
 * barriers, shuffles, cp.async, ldmatrix/stmatrix, mma.sync, mbarriers, TMA, proxy
 * fences and wgmma.
 *
 * Everything is an LLVM intrinsic call except wgmma.mma_async, which LLVM 22 has no
 * intrinsic for (inline asm with tied accumulators). Callers are responsible for only
 * using what their arch has (cp.async/ldmatrix/mma.sync: sm_80+; stmatrix, mbarrier
 * expect_tx, TMA: sm_90+; wgmma: sm_90a): LLVM aborts on an intrinsic it cannot select,
 * so the lowering checks the arch before it gets here. */
#include "backends/nvptx/nvptx.h"

#include <stdio.h>
#include <string.h>

LLVMValueRef drk_nvptx_call_intrinsic(drk_nvptx_cg_t *cg, const char *name, LLVMTypeRef *over,
                                      unsigned n_over, LLVMValueRef *args, unsigned n_args) {
  unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
  if (!id) drk_fatal_internal(__FILE__, __LINE__, name); /* a typo here is our bug */
  LLVMValueRef fn = LLVMGetIntrinsicDeclaration(cg->mod, id, over, n_over);
  LLVMTypeRef ft = LLVMIntrinsicGetType(cg->ctx, id, over, n_over);
  return LLVMBuildCall2(cg->b, ft, fn, args, n_args, "");
}

static LLVMValueRef drk_i32(drk_nvptx_cg_t *cg, long long v) {
  return LLVMConstInt(LLVMInt32TypeInContext(cg->ctx), (unsigned long long)v, 1);
}

/* ---- kernels ---- */
LLVMValueRef drk_nvptx_kernel_add(drk_nvptx_cg_t *cg, const char *name, LLVMTypeRef *params,
                                  unsigned n_params) {
  LLVMTypeRef ft = LLVMFunctionType(LLVMVoidTypeInContext(cg->ctx), params, n_params, 0);
  LLVMValueRef fn = LLVMAddFunction(cg->mod, name, ft);
  LLVMSetFunctionCallConv(fn, DRK_NVPTX_CC_KERNEL);
  LLVMSetLinkage(fn, LLVMExternalLinkage);
  return fn;
}

static void drk_fn_str_attr(drk_nvptx_cg_t *cg, LLVMValueRef fn, const char *k, const char *v) {
  LLVMAttributeRef a = LLVMCreateStringAttribute(cg->ctx, k, (unsigned)strlen(k), v, (unsigned)strlen(v));
  LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex, a);
}

static void drk_fn_dim3_attr(drk_nvptx_cg_t *cg, LLVMValueRef fn, const char *k, int x, int y, int z) {
  if (x <= 0) return;
  char v[64];
  snprintf(v, sizeof v, "%d,%d,%d", x, y > 0 ? y : 1, z > 0 ? z : 1);
  drk_fn_str_attr(cg, fn, k, v);
}

void drk_nvptx_kernel_set_maxntid(drk_nvptx_cg_t *cg, LLVMValueRef fn, int x, int y, int z) {
  drk_fn_dim3_attr(cg, fn, "nvvm.maxntid", x, y, z);
}
void drk_nvptx_kernel_set_reqntid(drk_nvptx_cg_t *cg, LLVMValueRef fn, int x, int y, int z) {
  drk_fn_dim3_attr(cg, fn, "nvvm.reqntid", x, y, z);
}
void drk_nvptx_kernel_set_cluster_dim(drk_nvptx_cg_t *cg, LLVMValueRef fn, int x, int y, int z) {
  drk_fn_dim3_attr(cg, fn, "nvvm.cluster_dim", x, y, z);
}
void drk_nvptx_kernel_set_minctasm(drk_nvptx_cg_t *cg, LLVMValueRef fn, int n) {
  if (n <= 0) return;
  char v[16];
  snprintf(v, sizeof v, "%d", n);
  drk_fn_str_attr(cg, fn, "nvvm.minctasm", v);
}
void drk_nvptx_kernel_set_maxnreg(drk_nvptx_cg_t *cg, LLVMValueRef fn, int n) {
  if (n <= 0) return;
  char v[16];
  snprintf(v, sizeof v, "%d", n);
  drk_fn_str_attr(cg, fn, "nvvm.maxnreg", v);
}
void drk_nvptx_kernel_set_ftz(drk_nvptx_cg_t *cg, LLVMValueRef fn) {
  drk_fn_str_attr(cg, fn, "denormal-fp-math-f32", "preserve-sign,preserve-sign");
}

void drk_nvptx_param_set_tensormap(drk_nvptx_cg_t *cg, LLVMValueRef fn, unsigned idx) {
  unsigned byval = LLVMGetEnumAttributeKindForName("byval", 5);
  unsigned align = LLVMGetEnumAttributeKindForName("align", 5);
  LLVMTypeRef arr = LLVMArrayType2(LLVMInt8TypeInContext(cg->ctx), 128);
  LLVMAddAttributeAtIndex(fn, idx + 1, LLVMCreateTypeAttribute(cg->ctx, byval, arr));
  LLVMAddAttributeAtIndex(fn, idx + 1, LLVMCreateEnumAttribute(cg->ctx, align, 64));
  LLVMAddAttributeAtIndex(fn, idx + 1,
                          LLVMCreateStringAttribute(cg->ctx, "nvvm.grid_constant", 18, "", 0));
}

/* ---- shared memory ---- */
LLVMValueRef drk_nvptx_smem_static(drk_nvptx_cg_t *cg, const char *name, unsigned bytes,
                                   unsigned align) {
  LLVMTypeRef t = LLVMArrayType2(LLVMInt8TypeInContext(cg->ctx), bytes);
  LLVMValueRef g = LLVMAddGlobalInAddressSpace(cg->mod, t, name, DRK_NVPTX_AS_SHARED);
  LLVMSetInitializer(g, LLVMGetUndef(t)); /* shared memory cannot be initialised */
  LLVMSetLinkage(g, LLVMInternalLinkage);
  LLVMSetAlignment(g, align ? align : 16);
  return g;
}

LLVMValueRef drk_nvptx_smem_dynamic(drk_nvptx_cg_t *cg) {
  LLVMValueRef g = LLVMGetNamedGlobal(cg->mod, "drk_dsmem");
  if (g) return g;
  LLVMTypeRef t = LLVMArrayType2(LLVMInt8TypeInContext(cg->ctx), 0);
  g = LLVMAddGlobalInAddressSpace(cg->mod, t, "drk_dsmem", DRK_NVPTX_AS_SHARED);
  LLVMSetLinkage(g, LLVMExternalLinkage);
  /* 1024: the 128-byte TMA/wgmma swizzle pattern repeats every 1024 bytes. */
  LLVMSetAlignment(g, 1024);
  return g;
}

/* ---- special registers ---- */
static LLVMValueRef drk_sreg(drk_nvptx_cg_t *cg, const char *base, int axis) {
  char name[64];
  DRK_ASSERT(axis >= 0 && axis <= 2);
  snprintf(name, sizeof name, "llvm.nvvm.read.ptx.sreg.%s.%c", base, "xyz"[axis]);
  return drk_nvptx_call_intrinsic(cg, name, NULL, 0, NULL, 0);
}
LLVMValueRef drk_nvptx_tid(drk_nvptx_cg_t *cg, int axis) { return drk_sreg(cg, "tid", axis); }
LLVMValueRef drk_nvptx_ctaid(drk_nvptx_cg_t *cg, int axis) { return drk_sreg(cg, "ctaid", axis); }
LLVMValueRef drk_nvptx_ntid(drk_nvptx_cg_t *cg, int axis) { return drk_sreg(cg, "ntid", axis); }
LLVMValueRef drk_nvptx_nctaid(drk_nvptx_cg_t *cg, int axis) { return drk_sreg(cg, "nctaid", axis); }
LLVMValueRef drk_nvptx_laneid(drk_nvptx_cg_t *cg) {
  return drk_nvptx_call_intrinsic(cg, "llvm.nvvm.read.ptx.sreg.laneid", NULL, 0, NULL, 0);
}
LLVMValueRef drk_nvptx_warp_index(drk_nvptx_cg_t *cg) {
  LLVMValueRef w = LLVMBuildLShr(cg->b, drk_nvptx_tid(cg, 0), drk_i32(cg, 5), "warp");
  /* Broadcasting lane 0's value tells ptxas the index is warp-uniform. */
  return drk_nvptx_shfl(cg, DRK_NVPTX_SHFL_IDX, w, drk_i32(cg, 0));
}

/* ---- barriers, shuffles ---- */
void drk_nvptx_bar_sync(drk_nvptx_cg_t *cg, unsigned id, unsigned n_threads) {
  if (n_threads == 0) {
    LLVMValueRef a[] = {drk_i32(cg, id)};
    drk_nvptx_call_intrinsic(cg, "llvm.nvvm.barrier.cta.sync.aligned.all", NULL, 0, a, 1);
  } else {
    /* Unaligned `barrier.sync id, n`: the threads of a named barrier come from different warp
     * groups, each at its own static instruction (the consumers of the sm_90a matmul), which
     * the aligned `bar.sync` does not allow (compute-sanitizer synccheck: "Divergent
     * thread(s) in block"; docs/backend-nvptx.md "Barriers"). */
    LLVMValueRef a[] = {drk_i32(cg, id), drk_i32(cg, n_threads)};
    drk_nvptx_call_intrinsic(cg, "llvm.nvvm.barrier.cta.sync.count", NULL, 0, a, 2);
  }
}

LLVMValueRef drk_nvptx_shfl(drk_nvptx_cg_t *cg, drk_nvptx_shfl_t kind, LLVMValueRef v,
                            LLVMValueRef lane_or_delta) {
  static const char *const kinds[] = {"bfly", "down", "up", "idx"};
  bool is_f = LLVMGetTypeKind(LLVMTypeOf(v)) == LLVMFloatTypeKind;
  char name[64];
  snprintf(name, sizeof name, "llvm.nvvm.shfl.sync.%s.%s", kinds[kind], is_f ? "f32" : "i32");
  /* c = clamp | segmask<<8: 31 for bfly/down/idx, 0 for up (whole-warp segments). */
  LLVMValueRef a[] = {drk_i32(cg, -1), v, lane_or_delta,
                      drk_i32(cg, kind == DRK_NVPTX_SHFL_UP ? 0 : 31)};
  return drk_nvptx_call_intrinsic(cg, name, NULL, 0, a, 4);
}

LLVMValueRef drk_nvptx_warp_reduce(drk_nvptx_cg_t *cg, drk_nvptx_red_t op, LLVMValueRef v,
                                   unsigned width) {
  DRK_ASSERT(width >= 2 && width <= 32 && (width & (width - 1)) == 0);
  LLVMTypeRef t = LLVMTypeOf(v);
  bool is_f = LLVMGetTypeKind(t) == LLVMFloatTypeKind;
  for (unsigned off = width / 2; off >= 1; off /= 2) {
    LLVMValueRef o = drk_nvptx_shfl(cg, DRK_NVPTX_SHFL_BFLY, v, drk_i32(cg, off));
    if (op == DRK_NVPTX_RED_ADD) {
      v = is_f ? LLVMBuildFAdd(cg->b, v, o, "") : LLVMBuildAdd(cg->b, v, o, "");
    } else if (is_f) {
      LLVMValueRef a[] = {v, o};
      v = drk_nvptx_call_intrinsic(cg, op == DRK_NVPTX_RED_MAX ? "llvm.maximum" : "llvm.minimum",
                                   &t, 1, a, 2);
    } else {
      LLVMValueRef a[] = {v, o};
      v = drk_nvptx_call_intrinsic(cg, op == DRK_NVPTX_RED_MAX ? "llvm.smax" : "llvm.smin", &t, 1, a, 2);
    }
  }
  return v;
}

/* ---- cp.async ---- */
void drk_nvptx_cp_async(drk_nvptx_cg_t *cg, LLVMValueRef dst_smem, LLVMValueRef src_global,
                        unsigned bytes, LLVMValueRef src_size) {
  DRK_ASSERT(bytes == 4 || bytes == 8 || bytes == 16);
  char name[80];
  /* .cg (bypass L1) only exists for 16 bytes; tiles are streamed, so prefer it. */
  snprintf(name, sizeof name, "llvm.nvvm.cp.async.%s.shared.global.%u%s", bytes == 16 ? "cg" : "ca",
           bytes, src_size ? ".s" : "");
  LLVMValueRef a[] = {dst_smem, src_global, src_size};
  drk_nvptx_call_intrinsic(cg, name, NULL, 0, a, src_size ? 3 : 2);
}
void drk_nvptx_cp_async_commit(drk_nvptx_cg_t *cg) {
  drk_nvptx_call_intrinsic(cg, "llvm.nvvm.cp.async.commit.group", NULL, 0, NULL, 0);
}
void drk_nvptx_cp_async_wait(drk_nvptx_cg_t *cg, unsigned n_pending) {
  LLVMValueRef a[] = {drk_i32(cg, n_pending)};
  drk_nvptx_call_intrinsic(cg, "llvm.nvvm.cp.async.wait.group", NULL, 0, a, 1);
}

/* ---- ldmatrix / stmatrix / mma.sync ---- */
void drk_nvptx_ldmatrix(drk_nvptx_cg_t *cg, LLVMValueRef smem, unsigned n, bool trans,
                        LLVMValueRef *out) {
  DRK_ASSERT(n == 1 || n == 2 || n == 4);
  char name[96];
  snprintf(name, sizeof name, "llvm.nvvm.ldmatrix.sync.aligned.m8n8.x%u%s.b16", n, trans ? ".trans" : "");
  LLVMTypeRef pt = LLVMTypeOf(smem);
  LLVMValueRef r = drk_nvptx_call_intrinsic(cg, name, &pt, 1, &smem, 1);
  if (LLVMGetTypeKind(LLVMTypeOf(r)) != LLVMStructTypeKind) {
    out[0] = r;
    return;
  }
  for (unsigned i = 0; i < n; i++) out[i] = LLVMBuildExtractValue(cg->b, r, i, "");
}

void drk_nvptx_stmatrix(drk_nvptx_cg_t *cg, LLVMValueRef smem, unsigned n, bool trans,
                        LLVMValueRef *regs) {
  DRK_ASSERT(n == 1 || n == 2 || n == 4);
  char name[96];
  snprintf(name, sizeof name, "llvm.nvvm.stmatrix.sync.aligned.m8n8.x%u%s.b16", n, trans ? ".trans" : "");
  LLVMTypeRef pt = LLVMTypeOf(smem);
  LLVMValueRef a[5] = {smem};
  for (unsigned i = 0; i < n; i++) a[1 + i] = regs[i];
  drk_nvptx_call_intrinsic(cg, name, &pt, 1, a, 1 + n);
}

void drk_nvptx_mma_m16n8k16(drk_nvptx_cg_t *cg, drk_nvptx_mma_in_t in, LLVMValueRef a[4],
                            LLVMValueRef bm[2], LLVMValueRef c[4], LLVMValueRef d[4]) {
  LLVMValueRef args[10];
  const char *name;
  if (in == DRK_NVPTX_MMA_BF16) {
    name = "llvm.nvvm.mma.m16n8k16.row.col.bf16";
    for (int i = 0; i < 4; i++) args[i] = a[i];
    for (int i = 0; i < 2; i++) args[4 + i] = bm[i];
  } else {
    /* The f16 form takes <2 x half> where the bf16 form takes i32. */
    name = "llvm.nvvm.mma.m16n8k16.row.col.f32.f32";
    LLVMTypeRef h2 = LLVMVectorType(LLVMHalfTypeInContext(cg->ctx), 2);
    for (int i = 0; i < 4; i++) args[i] = LLVMBuildBitCast(cg->b, a[i], h2, "");
    for (int i = 0; i < 2; i++) args[4 + i] = LLVMBuildBitCast(cg->b, bm[i], h2, "");
  }
  for (int i = 0; i < 4; i++) args[6 + i] = c[i];
  LLVMValueRef r = drk_nvptx_call_intrinsic(cg, name, NULL, 0, args, 10);
  for (unsigned i = 0; i < 4; i++) d[i] = LLVMBuildExtractValue(cg->b, r, i, "");
}

void drk_nvptx_mma_m16n8k8_tf32(drk_nvptx_cg_t *cg, LLVMValueRef a[4], LLVMValueRef bm[2], LLVMValueRef c[4],
                                LLVMValueRef d[4]) {
  LLVMValueRef args[10];
  for (int i = 0; i < 4; i++) args[i] = a[i];
  for (int i = 0; i < 2; i++) args[4 + i] = bm[i];
  for (int i = 0; i < 4; i++) args[6 + i] = c[i];
  LLVMValueRef r = drk_nvptx_call_intrinsic(cg, "llvm.nvvm.mma.m16n8k8.row.col.tf32", NULL, 0, args, 10);
  for (unsigned i = 0; i < 4; i++) d[i] = LLVMBuildExtractValue(cg->b, r, i, "");
}

void drk_nvptx_mma_m16n8k32_f8(drk_nvptx_cg_t *cg, bool a_e5m2, bool b_e5m2, LLVMValueRef a[4], LLVMValueRef bm[2],
                               LLVMValueRef c[4], LLVMValueRef d[4]) {
  char name[96];
  snprintf(name, sizeof name, "llvm.nvvm.mma.m16n8k32.row.col.f32.%s.%s.f32", a_e5m2 ? "e5m2" : "e4m3",
           b_e5m2 ? "e5m2" : "e4m3");
  LLVMValueRef args[10];
  for (int i = 0; i < 4; i++) args[i] = a[i];
  for (int i = 0; i < 2; i++) args[4 + i] = bm[i];
  for (int i = 0; i < 4; i++) args[6 + i] = c[i];
  LLVMValueRef r = drk_nvptx_call_intrinsic(cg, name, NULL, 0, args, 10);
  for (unsigned i = 0; i < 4; i++) d[i] = LLVMBuildExtractValue(cg->b, r, i, "");
}

LLVMValueRef drk_nvptx_cvt_tf32(drk_nvptx_cg_t *cg, LLVMValueRef f) {
  return drk_nvptx_call_intrinsic(cg, "llvm.nvvm.f2tf32.rna", NULL, 0, &f, 1);
}

/* ---- mbarriers ---- */
void drk_nvptx_mbarrier_init(drk_nvptx_cg_t *cg, LLVMValueRef bar, LLVMValueRef count) {
  LLVMValueRef a[] = {bar, count};
  drk_nvptx_call_intrinsic(cg, "llvm.nvvm.mbarrier.init.shared", NULL, 0, a, 2);
}
LLVMValueRef drk_nvptx_mbarrier_arrive_expect_tx(drk_nvptx_cg_t *cg, LLVMValueRef bar,
                                                 LLVMValueRef bytes) {
  LLVMValueRef a[] = {bar, bytes};
  return drk_nvptx_call_intrinsic(cg, "llvm.nvvm.mbarrier.arrive.expect.tx.scope.cta.space.cta",
                                  NULL, 0, a, 2);
}
LLVMValueRef drk_nvptx_mbarrier_arrive(drk_nvptx_cg_t *cg, LLVMValueRef bar) {
  return drk_nvptx_call_intrinsic(cg, "llvm.nvvm.mbarrier.arrive.shared", NULL, 0, &bar, 1);
}
void drk_nvptx_mbarrier_wait_parity(drk_nvptx_cg_t *cg, LLVMValueRef bar, LLVMValueRef parity) {
  LLVMValueRef fn = LLVMGetBasicBlockParent(LLVMGetInsertBlock(cg->b));
  LLVMBasicBlockRef loop = LLVMAppendBasicBlockInContext(cg->ctx, fn, "mbar.wait");
  LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(cg->ctx, fn, "mbar.done");
  LLVMBuildBr(cg->b, loop);
  LLVMPositionBuilderAtEnd(cg->b, loop);
  LLVMValueRef a[] = {bar, parity};
  LLVMValueRef ok = drk_nvptx_call_intrinsic(
      cg, "llvm.nvvm.mbarrier.try.wait.parity.scope.cta.space.cta", NULL, 0, a, 2);
  LLVMBuildCondBr(cg->b, ok, done, loop);
  LLVMPositionBuilderAtEnd(cg->b, done);
}
void drk_nvptx_fence_mbarrier_init(drk_nvptx_cg_t *cg) {
  drk_nvptx_call_intrinsic(cg, "llvm.nvvm.fence.mbarrier_init.release.cluster", NULL, 0, NULL, 0);
}

/* ---- TMA ---- */
void drk_nvptx_tma_load(drk_nvptx_cg_t *cg, LLVMValueRef dst_smem, LLVMValueRef bar,
                        LLVMValueRef tmap, LLVMValueRef *coords, unsigned rank, unsigned multicast) {
  DRK_ASSERT(rank >= 1 && rank <= 5 && multicast < 65536);
  char name[80];
  snprintf(name, sizeof name, "llvm.nvvm.cp.async.bulk.tensor.g2s.tile.%ud", rank);
  LLVMValueRef a[16];
  unsigned n = 0;
  a[n++] = LLVMBuildAddrSpaceCast(
      cg->b, dst_smem, LLVMPointerTypeInContext(cg->ctx, DRK_NVPTX_AS_SHARED_CLUSTER), "");
  a[n++] = bar;
  a[n++] = tmap;
  for (unsigned i = 0; i < rank; i++) a[n++] = coords[i];
  a[n++] = LLVMConstInt(LLVMInt16TypeInContext(cg->ctx), multicast, 0); /* multicast mask */
  a[n++] = LLVMConstInt(LLVMInt64TypeInContext(cg->ctx), 0, 0);         /* cache hint */
  a[n++] = LLVMConstInt(LLVMInt1TypeInContext(cg->ctx), multicast != 0, 0); /* use mask */
  a[n++] = LLVMConstInt(LLVMInt1TypeInContext(cg->ctx), 0, 0);  /* use hint */
  a[n++] = drk_i32(cg, 0);                                      /* cta_group */
  drk_nvptx_call_intrinsic(cg, name, NULL, 0, a, n);
}
void drk_nvptx_cluster_sync(drk_nvptx_cg_t *cg) {
  drk_nvptx_call_intrinsic(cg, "llvm.nvvm.barrier.cluster.arrive", NULL, 0, NULL, 0);
  drk_nvptx_call_intrinsic(cg, "llvm.nvvm.barrier.cluster.wait", NULL, 0, NULL, 0);
}
void drk_nvptx_tma_store(drk_nvptx_cg_t *cg, LLVMValueRef src_smem, LLVMValueRef tmap,
                         LLVMValueRef *coords, unsigned rank) {
  DRK_ASSERT(rank >= 1 && rank <= 5);
  char name[80];
  snprintf(name, sizeof name, "llvm.nvvm.cp.async.bulk.tensor.s2g.tile.%ud", rank);
  LLVMValueRef a[16];
  unsigned n = 0;
  a[n++] = src_smem;
  a[n++] = tmap;
  for (unsigned i = 0; i < rank; i++) a[n++] = coords[i];
  a[n++] = LLVMConstInt(LLVMInt64TypeInContext(cg->ctx), 0, 0);
  a[n++] = LLVMConstInt(LLVMInt1TypeInContext(cg->ctx), 0, 0);
  drk_nvptx_call_intrinsic(cg, name, NULL, 0, a, n);
}
void drk_nvptx_bulk_commit(drk_nvptx_cg_t *cg) {
  drk_nvptx_call_intrinsic(cg, "llvm.nvvm.cp.async.bulk.commit.group", NULL, 0, NULL, 0);
}
void drk_nvptx_bulk_wait(drk_nvptx_cg_t *cg, unsigned n_pending, bool read_only) {
  LLVMValueRef a[] = {drk_i32(cg, n_pending)};
  drk_nvptx_call_intrinsic(cg, read_only ? "llvm.nvvm.cp.async.bulk.wait.group.read"
                                         : "llvm.nvvm.cp.async.bulk.wait.group",
                           NULL, 0, a, 1);
}
void drk_nvptx_fence_proxy_async(drk_nvptx_cg_t *cg) {
  drk_nvptx_call_intrinsic(cg, "llvm.nvvm.fence.proxy.async.shared_cta", NULL, 0, NULL, 0);
}

/* ---- wgmma ---- */
void drk_nvptx_wgmma_fence(drk_nvptx_cg_t *cg) {
  drk_nvptx_call_intrinsic(cg, "llvm.nvvm.wgmma.fence.sync.aligned", NULL, 0, NULL, 0);
}
void drk_nvptx_wgmma_commit(drk_nvptx_cg_t *cg) {
  drk_nvptx_call_intrinsic(cg, "llvm.nvvm.wgmma.commit_group.sync.aligned", NULL, 0, NULL, 0);
}
void drk_nvptx_wgmma_wait(drk_nvptx_cg_t *cg, unsigned n_pending) {
  LLVMValueRef a[] = {LLVMConstInt(LLVMInt64TypeInContext(cg->ctx), n_pending, 0)};
  drk_nvptx_call_intrinsic(cg, "llvm.nvvm.wgmma.wait_group.sync.aligned", NULL, 0, a, 1);
}

void drk_nvptx_wgmma_mma_async(drk_nvptx_cg_t *cg, drk_nvptx_mma_in_t in, unsigned n,
                               LLVMValueRef desc_a, LLVMValueRef desc_b, LLVMValueRef scale_d,
                               bool tnsp_a, bool tnsp_b, LLVMValueRef *acc) {
  DRK_ASSERT(n >= 8 && n <= 256 && n % 8 == 0);
  unsigned k = n / 2; /* f32 accumulators per thread */
  const char *ty = in == DRK_NVPTX_MMA_BF16 ? "bf16" : "f16";
  /* Sized for n = 256: 128 operands of "$nnn," in the text, "=f,"/"nnn," in constraints. */
  char asm_s[2048], cons[1536];
  size_t p = 0, c = 0;
  p += (size_t)snprintf(asm_s + p, sizeof asm_s - p,
                        "{\n.reg .pred p;\nsetp.ne.b32 p, $%u, 0;\n"
                        "wgmma.mma_async.sync.aligned.m64n%uk16.f32.%s.%s {",
                        k + 2, n, ty, ty);
  for (unsigned i = 0; i < k; i++) {
    p += (size_t)snprintf(asm_s + p, sizeof asm_s - p, "%s$%u", i ? ", " : "", i);
    c += (size_t)snprintf(cons + c, sizeof cons - c, "=f,");
  }
  p += (size_t)snprintf(asm_s + p, sizeof asm_s - p, "}, $%u, $%u, p, 1, 1, %d, %d;\n}", k, k + 1,
                        tnsp_a, tnsp_b);
  c += (size_t)snprintf(cons + c, sizeof cons - c, "l,l,r");
  for (unsigned i = 0; i < k; i++) c += (size_t)snprintf(cons + c, sizeof cons - c, ",%u", i);
  DRK_ASSERT(p < sizeof asm_s && c < sizeof cons);

  LLVMTypeRef f32 = LLVMFloatTypeInContext(cg->ctx);
  LLVMTypeRef outs[128], ins[3 + 128];
  for (unsigned i = 0; i < k; i++) outs[i] = f32;
  LLVMTypeRef rt = LLVMStructTypeInContext(cg->ctx, outs, k, 0);
  LLVMValueRef args[3 + 128] = {desc_a, desc_b, scale_d};
  ins[0] = ins[1] = LLVMInt64TypeInContext(cg->ctx);
  ins[2] = LLVMInt32TypeInContext(cg->ctx);
  for (unsigned i = 0; i < k; i++) {
    ins[3 + i] = f32;
    args[3 + i] = acc[i];
  }
  LLVMTypeRef ft = LLVMFunctionType(rt, ins, 3 + k, 0);
  LLVMValueRef ia = LLVMGetInlineAsm(ft, asm_s, p, cons, c, /*side effects*/ 1, 0,
                                     LLVMInlineAsmDialectATT, 0);
  LLVMValueRef r = LLVMBuildCall2(cg->b, ft, ia, args, 3 + k, "");
  for (unsigned i = 0; i < k; i++) acc[i] = LLVMBuildExtractValue(cg->b, r, i, "");
}

LLVMValueRef drk_nvptx_wgmma_desc(drk_nvptx_cg_t *cg, LLVMValueRef smem, unsigned lead_bytes,
                                  unsigned stride_bytes, unsigned swizzle) {
  LLVMTypeRef i64 = LLVMInt64TypeInContext(cg->ctx);
  LLVMValueRef addr = LLVMBuildPtrToInt(cg->b, smem, i64, "");
  /* Bits 0-13: (address & 0x3ffff) >> 4; 16-29: leading byte offset >> 4; 32-45: stride
   * byte offset >> 4; 62-63: swizzle (1 = 128B, 2 = 64B, 3 = 32B). */
  LLVMValueRef lo = LLVMBuildLShr(cg->b, LLVMBuildAnd(cg->b, addr, LLVMConstInt(i64, 0x3ffff, 0), ""),
                                  LLVMConstInt(i64, 4, 0), "");
  unsigned long long k = ((unsigned long long)((lead_bytes >> 4) & 0x3fff) << 16) |
                         ((unsigned long long)((stride_bytes >> 4) & 0x3fff) << 32) |
                         ((unsigned long long)(swizzle & 3) << 62);
  return LLVMBuildOr(cg->b, lo, LLVMConstInt(i64, k, 0), "wgmma.desc");
}
