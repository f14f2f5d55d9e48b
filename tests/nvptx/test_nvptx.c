/* NVPTX backend test: builds kernels with the LLVM-C builder and the drk_nvptx_* helpers,
 * emits PTX for every supported arch and checks it; in "ptxas" mode also assembles the
 * PTX (sm_80, sm_87, sm_90a) and checks the cubin and the -v report.
 *
 * In "gpu" mode it runs vadd and mma_bf16 on the GPU (CUDA driver through dlopen) and
 * compares with the host.
 *
 * usage: test_nvptx ptx | ptxas [path-to-ptxas] | gpu
 * (ptxas mode exits 77 without ptxas, gpu mode without a GPU) */
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backends/nvptx/nvptx.h"
#include "tests/common/check.h"

typedef struct {
  LLVMContextRef ctx;
  LLVMModuleRef mod;
  drk_nvptx_cg_t cg;
} kmod_t;

static void kmod_open(kmod_t *k, const char *name) {
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  k->ctx = LLVMContextCreate();
  k->mod = drk_nvptx_module_create(k->ctx, name, &d);
  if (!k->mod) exit(1);
  k->cg = (drk_nvptx_cg_t){k->ctx, k->mod, LLVMCreateBuilderInContext(k->ctx), NULL};
}

static void kmod_close(kmod_t *k) {
  LLVMDisposeBuilder(k->cg.b);
  LLVMDisposeModule(k->mod);
  LLVMContextDispose(k->ctx);
}

static LLVMValueRef i32c(kmod_t *k, int v) { return LLVMConstInt(LLVMInt32TypeInContext(k->ctx), (unsigned)v, 1); }

/* c[i] = a[i] + b[i] for i < n. */
static void build_vadd(kmod_t *k) {
  LLVMTypeRef g = LLVMPointerTypeInContext(k->ctx, DRK_NVPTX_AS_GLOBAL);
  LLVMTypeRef i32 = LLVMInt32TypeInContext(k->ctx), f32 = LLVMFloatTypeInContext(k->ctx);
  LLVMTypeRef ps[] = {g, g, g, i32};
  drk_nvptx_cg_t *cg = &k->cg;
  LLVMValueRef fn = drk_nvptx_kernel_add(cg, "vadd", ps, 4);
  drk_nvptx_kernel_set_maxntid(cg, fn, 256, 1, 1);
  LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(k->ctx, fn, "entry");
  LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(k->ctx, fn, "body");
  LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(k->ctx, fn, "done");
  LLVMPositionBuilderAtEnd(cg->b, entry);
  LLVMValueRef i = LLVMBuildAdd(cg->b, LLVMBuildMul(cg->b, drk_nvptx_ctaid(cg, 0), drk_nvptx_ntid(cg, 0), ""),
                                drk_nvptx_tid(cg, 0), "i");
  LLVMBuildCondBr(cg->b, LLVMBuildICmp(cg->b, LLVMIntSLT, i, LLVMGetParam(fn, 3), ""), body, done);
  LLVMPositionBuilderAtEnd(cg->b, body);
  LLVMValueRef pa = LLVMBuildGEP2(cg->b, f32, LLVMGetParam(fn, 0), &i, 1, "");
  LLVMValueRef pb = LLVMBuildGEP2(cg->b, f32, LLVMGetParam(fn, 1), &i, 1, "");
  LLVMValueRef pc = LLVMBuildGEP2(cg->b, f32, LLVMGetParam(fn, 2), &i, 1, "");
  LLVMValueRef s = LLVMBuildFAdd(cg->b, LLVMBuildLoad2(cg->b, f32, pa, ""), LLVMBuildLoad2(cg->b, f32, pb, ""), "");
  LLVMBuildStore(cg->b, s, pc);
  LLVMBuildBr(cg->b, done);
  LLVMPositionBuilderAtEnd(cg->b, done);
  LLVMBuildRetVoid(cg->b);
}

/* One warp: D(16x8 f32) = A(16x16, row-major) * B(16x8, given as B^T 8x16 row-major).
 * A and B^T go global -> shared by cp.async, shared -> registers by ldmatrix. */
static void build_mma(kmod_t *k, drk_nvptx_mma_in_t in, const char *name) {
  LLVMTypeRef g = LLVMPointerTypeInContext(k->ctx, DRK_NVPTX_AS_GLOBAL);
  LLVMTypeRef i8 = LLVMInt8TypeInContext(k->ctx), f32 = LLVMFloatTypeInContext(k->ctx);
  LLVMTypeRef ps[] = {g, g, g};
  drk_nvptx_cg_t *cg = &k->cg;
  LLVMValueRef fn = drk_nvptx_kernel_add(cg, name, ps, 3);
  drk_nvptx_kernel_set_reqntid(cg, fn, 32, 1, 1);
  LLVMPositionBuilderAtEnd(cg->b, LLVMAppendBasicBlockInContext(k->ctx, fn, "entry"));
  LLVMValueRef sa = drk_nvptx_smem_static(cg, "sa", 512, 128);
  LLVMValueRef sb = drk_nvptx_smem_static(cg, "sb", 512, 128);
  LLVMValueRef lane = drk_nvptx_laneid(cg);
  /* A: 512 bytes = 32 x 16; B^T: 256 bytes, lanes 0..15 copy 16 bytes each; lanes >= 16
   * zero-fill a scratch half of sb through src_size 0, exercising the masked form. */
  LLVMValueRef off = LLVMBuildMul(cg->b, lane, i32c(k, 16), "");
  drk_nvptx_cp_async(cg, LLVMBuildGEP2(cg->b, i8, sa, &off, 1, ""),
                     LLVMBuildGEP2(cg->b, i8, LLVMGetParam(fn, 0), &off, 1, ""), 16, NULL);
  LLVMValueRef in_b = LLVMBuildICmp(cg->b, LLVMIntULT, lane, i32c(k, 16), "");
  LLVMValueRef boff = LLVMBuildAnd(cg->b, off, i32c(k, 255), "");
  drk_nvptx_cp_async(cg, LLVMBuildGEP2(cg->b, i8, sb, &off, 1, ""),
                     LLVMBuildGEP2(cg->b, i8, LLVMGetParam(fn, 1), &boff, 1, ""), 16,
                     LLVMBuildSelect(cg->b, in_b, i32c(k, 16), i32c(k, 0), ""));
  drk_nvptx_cp_async_commit(cg);
  drk_nvptx_cp_async_wait(cg, 0);
  drk_nvptx_bar_sync(cg, 0, 0);
  /* ldmatrix x4 over A: lane l gives row (l % 16), column block (l / 16) * 8. */
  LLVMValueRef row = LLVMBuildAnd(cg->b, lane, i32c(k, 15), "");
  LLVMValueRef colb = LLVMBuildLShr(cg->b, lane, i32c(k, 4), "");
  LLVMValueRef aoff = LLVMBuildAdd(cg->b, LLVMBuildMul(cg->b, row, i32c(k, 32), ""),
                                   LLVMBuildMul(cg->b, colb, i32c(k, 16), ""), "");
  LLVMValueRef a[4], b[2], c[4], dd[4];
  drk_nvptx_ldmatrix(cg, LLVMBuildGEP2(cg->b, i8, sa, &aoff, 1, ""), 4, false, a);
  /* ldmatrix x2 over B^T (8 rows x 16 cols): lanes 0..7 rows at col 0, 8..15 at col 8. */
  LLVMValueRef r8 = LLVMBuildAnd(cg->b, lane, i32c(k, 7), "");
  LLVMValueRef c8 = LLVMBuildAnd(cg->b, LLVMBuildLShr(cg->b, lane, i32c(k, 3), ""), i32c(k, 1), "");
  LLVMValueRef bo = LLVMBuildAdd(cg->b, LLVMBuildMul(cg->b, r8, i32c(k, 32), ""),
                                 LLVMBuildMul(cg->b, c8, i32c(k, 16), ""), "");
  drk_nvptx_ldmatrix(cg, LLVMBuildGEP2(cg->b, i8, sb, &bo, 1, ""), 2, false, b);
  for (int i = 0; i < 4; i++) c[i] = LLVMConstReal(f32, 0.0);
  drk_nvptx_mma_m16n8k16(cg, in, a, b, c, dd);
  /* Accumulator layout: d0,d1 at row lane/4, cols 2*(lane%4)+{0,1}; d2,d3 at row +8. */
  LLVMValueRef grp = LLVMBuildLShr(cg->b, lane, i32c(k, 2), "");
  LLVMValueRef col = LLVMBuildMul(cg->b, LLVMBuildAnd(cg->b, lane, i32c(k, 3), ""), i32c(k, 2), "");
  for (int i = 0; i < 4; i++) {
    LLVMValueRef r = LLVMBuildAdd(cg->b, grp, i32c(k, i >= 2 ? 8 : 0), "");
    LLVMValueRef idx = LLVMBuildAdd(cg->b, LLVMBuildMul(cg->b, r, i32c(k, 8), ""),
                                    LLVMBuildAdd(cg->b, col, i32c(k, i & 1), ""), "");
    LLVMBuildStore(cg->b, dd[i], LLVMBuildGEP2(cg->b, f32, LLVMGetParam(fn, 2), &idx, 1, ""));
  }
  LLVMValueRef warp = drk_nvptx_warp_index(cg);
  LLVMValueRef red = drk_nvptx_shfl(cg, DRK_NVPTX_SHFL_BFLY, dd[0], i32c(k, 16));
  LLVMValueRef idx = LLVMBuildAdd(cg->b, i32c(k, 128), warp, "");
  LLVMBuildStore(cg->b, red, LLVMBuildGEP2(cg->b, f32, LLVMGetParam(fn, 2), &idx, 1, ""));
  LLVMBuildRetVoid(cg->b);
}

/* One warp: out[0..2] = sum/max/min of in[lane] (f32), out[3] = sum of (int)in[lane],
 * written by lane 0; out[4 + g] = sum over the 8-lane group g (width 8). */
static void build_wred(kmod_t *k) {
  LLVMTypeRef g = LLVMPointerTypeInContext(k->ctx, DRK_NVPTX_AS_GLOBAL);
  LLVMTypeRef f32 = LLVMFloatTypeInContext(k->ctx), i32 = LLVMInt32TypeInContext(k->ctx);
  LLVMTypeRef ps[] = {g, g};
  drk_nvptx_cg_t *cg = &k->cg;
  LLVMValueRef fn = drk_nvptx_kernel_add(cg, "wred", ps, 2);
  LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(k->ctx, fn, "entry");
  LLVMBasicBlockRef st = LLVMAppendBasicBlockInContext(k->ctx, fn, "store");
  LLVMBasicBlockRef st8 = LLVMAppendBasicBlockInContext(k->ctx, fn, "store8");
  LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(k->ctx, fn, "done");
  LLVMPositionBuilderAtEnd(cg->b, entry);
  LLVMValueRef lane = drk_nvptx_laneid(cg);
  LLVMValueRef x = LLVMBuildLoad2(cg->b, f32, LLVMBuildGEP2(cg->b, f32, LLVMGetParam(fn, 0), &lane, 1, ""), "");
  LLVMValueRef r[5];
  r[0] = drk_nvptx_warp_reduce(cg, DRK_NVPTX_RED_ADD, x, 32);
  r[1] = drk_nvptx_warp_reduce(cg, DRK_NVPTX_RED_MAX, x, 32);
  r[2] = drk_nvptx_warp_reduce(cg, DRK_NVPTX_RED_MIN, x, 32);
  r[3] = LLVMBuildSIToFP(cg->b, drk_nvptx_warp_reduce(cg, DRK_NVPTX_RED_ADD, LLVMBuildFPToSI(cg->b, x, i32, ""), 32), f32, "");
  r[4] = drk_nvptx_warp_reduce(cg, DRK_NVPTX_RED_ADD, x, 8);
  LLVMBuildCondBr(cg->b, LLVMBuildICmp(cg->b, LLVMIntEQ, lane, i32c(k, 0), ""), st, st8);
  LLVMPositionBuilderAtEnd(cg->b, st);
  for (int i = 0; i < 4; i++) {
    LLVMValueRef idx = i32c(k, i);
    LLVMBuildStore(cg->b, r[i], LLVMBuildGEP2(cg->b, f32, LLVMGetParam(fn, 1), &idx, 1, ""));
  }
  LLVMBuildBr(cg->b, st8);
  LLVMPositionBuilderAtEnd(cg->b, st8);
  LLVMValueRef first = LLVMBuildICmp(cg->b, LLVMIntEQ, LLVMBuildAnd(cg->b, lane, i32c(k, 7), ""), i32c(k, 0), "");
  LLVMBasicBlockRef st8b = LLVMAppendBasicBlockInContext(k->ctx, fn, "store8b");
  LLVMBuildCondBr(cg->b, first, st8b, done);
  LLVMPositionBuilderAtEnd(cg->b, st8b);
  LLVMValueRef idx = LLVMBuildAdd(cg->b, i32c(k, 4), LLVMBuildLShr(cg->b, lane, i32c(k, 3), ""), "");
  LLVMBuildStore(cg->b, r[4], LLVMBuildGEP2(cg->b, f32, LLVMGetParam(fn, 1), &idx, 1, ""));
  LLVMBuildBr(cg->b, done);
  LLVMPositionBuilderAtEnd(cg->b, done);
  LLVMBuildRetVoid(cg->b);
}

/* sm_90a: TMA load of a 64x16 bf16 A tile and a 64x16 B tile behind an mbarrier, then
 * one wgmma m64n64k16 from shared-memory descriptors, accumulators stored to global. */
static void build_hopper(kmod_t *k) {
  LLVMTypeRef p0 = LLVMPointerTypeInContext(k->ctx, 0);
  LLVMTypeRef g = LLVMPointerTypeInContext(k->ctx, DRK_NVPTX_AS_GLOBAL);
  LLVMTypeRef i8 = LLVMInt8TypeInContext(k->ctx), f32 = LLVMFloatTypeInContext(k->ctx);
  LLVMTypeRef i32 = LLVMInt32TypeInContext(k->ctx);
  LLVMTypeRef ps[] = {p0, p0, g};
  drk_nvptx_cg_t *cg = &k->cg;
  LLVMValueRef fn = drk_nvptx_kernel_add(cg, "hopper", ps, 3);
  drk_nvptx_param_set_tensormap(cg, fn, 0);
  drk_nvptx_param_set_tensormap(cg, fn, 1);
  drk_nvptx_kernel_set_reqntid(cg, fn, 128, 1, 1);
  drk_nvptx_kernel_set_cluster_dim(cg, fn, 1, 1, 1);
  LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(k->ctx, fn, "entry");
  LLVMBasicBlockRef issue = LLVMAppendBasicBlockInContext(k->ctx, fn, "issue");
  LLVMBasicBlockRef join = LLVMAppendBasicBlockInContext(k->ctx, fn, "join");
  LLVMPositionBuilderAtEnd(cg->b, entry);
  LLVMValueRef dsm = drk_nvptx_smem_dynamic(cg);
  LLVMValueRef bar = drk_nvptx_smem_static(cg, "bar", 8, 8);
  LLVMValueRef tid = drk_nvptx_tid(cg, 0);
  LLVMBuildCondBr(cg->b, LLVMBuildICmp(cg->b, LLVMIntEQ, tid, i32c(k, 0), ""), issue, join);
  LLVMPositionBuilderAtEnd(cg->b, issue);
  drk_nvptx_mbarrier_init(cg, bar, i32c(k, 1));
  drk_nvptx_fence_mbarrier_init(cg);
  drk_nvptx_mbarrier_arrive_expect_tx(cg, bar, i32c(k, 4096));
  LLVMValueRef coords[2] = {i32c(k, 0), LLVMBuildMul(cg->b, drk_nvptx_ctaid(cg, 0), i32c(k, 64), "")};
  LLVMValueRef boff = i32c(k, 2048);
  drk_nvptx_tma_load(cg, dsm, bar, LLVMGetParam(fn, 0), coords, 2, 0);
  drk_nvptx_tma_load(cg, LLVMBuildGEP2(cg->b, i8, dsm, &boff, 1, ""), bar, LLVMGetParam(fn, 1), coords, 2, 0);
  LLVMBuildBr(cg->b, join);
  LLVMPositionBuilderAtEnd(cg->b, join);
  drk_nvptx_bar_sync(cg, 0, 0);
  drk_nvptx_mbarrier_wait_parity(cg, bar, i32c(k, 0));
  LLVMValueRef acc[32];
  for (int i = 0; i < 32; i++) acc[i] = LLVMConstReal(f32, 0.0);
  LLVMValueRef da = drk_nvptx_wgmma_desc(cg, dsm, 16, 256, 3);
  LLVMValueRef db = drk_nvptx_wgmma_desc(cg, LLVMBuildGEP2(cg->b, i8, dsm, &boff, 1, ""), 16, 256, 3);
  drk_nvptx_fence_proxy_async(cg);
  drk_nvptx_wgmma_fence(cg);
  drk_nvptx_wgmma_mma_async(cg, DRK_NVPTX_MMA_BF16, 64, da, db, i32c(k, 0), false, false, acc);
  drk_nvptx_wgmma_commit(cg);
  drk_nvptx_wgmma_wait(cg, 0);
  for (int i = 0; i < 32; i++) {
    LLVMValueRef idx = LLVMBuildAdd(cg->b, LLVMBuildMul(cg->b, tid, i32c(k, 32), ""), i32c(k, i), "");
    LLVMBuildStore(cg->b, acc[i], LLVMBuildGEP2(cg->b, f32, LLVMGetParam(fn, 2), &idx, 1, ""));
  }
  (void)i32;
  drk_nvptx_bulk_commit(cg);
  drk_nvptx_bulk_wait(cg, 0, true);
  LLVMBuildRetVoid(cg->b);
}

/* ---- gpu mode: run vadd and mma_bf16 through the CUDA driver (dlopen'ed) ---- */
typedef int (*cu_fn)();
static void *cu_lib;
static cu_fn cu(const char *name) {
  cu_fn f = (cu_fn)dlsym(cu_lib, name);
  if (!f) {
    fprintf(stderr, "libcuda lacks %s\n", name);
    exit(1);
  }
  return f;
}
#define CU_OK(call)                                                   \
  do {                                                                \
    int _r = (call);                                                  \
    if (_r != 0) {                                                    \
      fprintf(stderr, "%s:%d: %s -> CUresult %d\n", __FILE__, __LINE__, #call, _r); \
      return false;                                                   \
    }                                                                 \
  } while (0)

static uint16_t to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}
static float from_bf16(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* Loads `image` (cubin or PTX), runs vadd and mma_bf16, compares with the host. */
static bool gpu_check(const void *image, const char *what) {
  typedef unsigned long long dptr;
  void *mod = NULL, *fv = NULL, *fm = NULL;
  CU_OK(cu("cuModuleLoadData")(&mod, image));
  CU_OK(cu("cuModuleGetFunction")(&fv, mod, "vadd"));
  CU_OK(cu("cuModuleGetFunction")(&fm, mod, "mma_bf16"));
  enum { N = 1000 };
  float ha[N], hb[N], hc[N];
  for (int i = 0; i < N; i++) {
    ha[i] = (float)(i * 7 % 13) - 6.5f;
    hb[i] = (float)i * 0.25f;
    hc[i] = -12345.0f;
  }
  dptr da, db, dc;
  CU_OK(cu("cuMemAlloc_v2")(&da, sizeof ha));
  CU_OK(cu("cuMemAlloc_v2")(&db, sizeof hb));
  CU_OK(cu("cuMemAlloc_v2")(&dc, sizeof hc + 64));
  CU_OK(cu("cuMemcpyHtoD_v2")(da, ha, sizeof ha));
  CU_OK(cu("cuMemcpyHtoD_v2")(db, hb, sizeof hb));
  CU_OK(cu("cuMemcpyHtoD_v2")(dc, hc, sizeof hc + 0));
  int n = N;
  void *args[] = {&da, &db, &dc, &n};
  CU_OK(cu("cuLaunchKernel")(fv, (N + 255) / 256, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
  CU_OK(cu("cuCtxSynchronize")());
  CU_OK(cu("cuMemcpyDtoH_v2")(hc, dc, sizeof hc));
  int bad = 0;
  for (int i = 0; i < N; i++) bad += hc[i] != ha[i] + hb[i];
  CHECK(bad == 0);

  uint16_t A[16 * 16], BT[8 * 16];
  float fa[16 * 16], fbt[8 * 16], out[129];
  for (int i = 0; i < 256; i++) fa[i] = from_bf16(A[i] = to_bf16((float)((i * 37) % 17 - 8) / 4.0f));
  for (int i = 0; i < 128; i++) fbt[i] = from_bf16(BT[i] = to_bf16((float)((i * 11) % 9 - 4) / 2.0f));
  for (int i = 0; i < 129; i++) out[i] = -12345.0f;
  CU_OK(cu("cuMemcpyHtoD_v2")(da, A, sizeof A));
  CU_OK(cu("cuMemcpyHtoD_v2")(db, BT, sizeof BT));
  CU_OK(cu("cuMemcpyHtoD_v2")(dc, out, sizeof out));
  void *margs[] = {&da, &db, &dc};
  CU_OK(cu("cuLaunchKernel")(fm, 1, 1, 1, 32, 1, 1, 0, NULL, margs, NULL));
  CU_OK(cu("cuCtxSynchronize")());
  CU_OK(cu("cuMemcpyDtoH_v2")(out, dc, sizeof out));
  bad = 0;
  for (int r = 0; r < 16; r++)
    for (int c = 0; c < 8; c++) {
      double ref = 0;
      for (int kk = 0; kk < 16; kk++) ref += (double)fa[r * 16 + kk] * fbt[c * 16 + kk];
      if (out[r * 8 + c] != (float)ref) {
        if (bad++ < 5) fprintf(stderr, "%s mma D[%d][%d] = %g, want %g\n", what, r, c, out[r * 8 + c], ref);
      }
    }
  CHECK(bad == 0);
  /* out[128] = lane 0's d0 after a butterfly with lane 16: D[4][0]. */
  CHECK(out[128] == out[4 * 8 + 0]);

  void *fr = NULL;
  CU_OK(cu("cuModuleGetFunction")(&fr, mod, "wred"));
  float x[32], red[8], want[8] = {0, -1e30f, 1e30f, 0, 0, 0, 0, 0};
  for (int i = 0; i < 32; i++) {
    x[i] = (float)((i * 13) % 29) - 11.0f;
    want[0] += x[i];
    want[1] = x[i] > want[1] ? x[i] : want[1];
    want[2] = x[i] < want[2] ? x[i] : want[2];
    want[3] += (float)(int)x[i];
    want[4 + i / 8] += x[i];
  }
  CU_OK(cu("cuMemcpyHtoD_v2")(da, x, sizeof x));
  void *rargs[] = {&da, &dc};
  CU_OK(cu("cuLaunchKernel")(fr, 1, 1, 1, 32, 1, 1, 0, NULL, rargs, NULL));
  CU_OK(cu("cuCtxSynchronize")());
  CU_OK(cu("cuMemcpyDtoH_v2")(red, dc, sizeof red));
  for (int i = 0; i < 8; i++) {
    if (red[i] != want[i]) fprintf(stderr, "%s wred[%d] = %g, want %g\n", what, i, red[i], want[i]);
    CHECK(red[i] == want[i]);
  }
  cu("cuMemFree_v2")(da);
  cu("cuMemFree_v2")(db);
  cu("cuMemFree_v2")(dc);
  cu("cuModuleUnload")(mod);
  printf("gpu: %s: vadd, mma_bf16, wred correct\n", what);
  return true;
}

/* sm_90: per block, TMA-load a 16x8 f32 box into shared memory (mbarrier expect_tx),
 * double it with plain stores, fence.proxy.async, TMA-store it to the output tensor. */
static void build_tma_copy(kmod_t *k) {
  LLVMTypeRef p0 = LLVMPointerTypeInContext(k->ctx, 0);
  LLVMTypeRef f32 = LLVMFloatTypeInContext(k->ctx);
  LLVMTypeRef ps[] = {p0, p0};
  drk_nvptx_cg_t *cg = &k->cg;
  LLVMValueRef fn = drk_nvptx_kernel_add(cg, "tma_copy", ps, 2);
  drk_nvptx_param_set_tensormap(cg, fn, 0);
  drk_nvptx_param_set_tensormap(cg, fn, 1);
  drk_nvptx_kernel_set_reqntid(cg, fn, 128, 1, 1);
  LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(k->ctx, fn, "entry");
  LLVMBasicBlockRef issue = LLVMAppendBasicBlockInContext(k->ctx, fn, "issue");
  LLVMBasicBlockRef join = LLVMAppendBasicBlockInContext(k->ctx, fn, "join");
  LLVMBasicBlockRef store = LLVMAppendBasicBlockInContext(k->ctx, fn, "store");
  LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(k->ctx, fn, "done");
  LLVMPositionBuilderAtEnd(cg->b, entry);
  LLVMValueRef sm = drk_nvptx_smem_static(cg, "tile", 512, 128);
  LLVMValueRef bar = drk_nvptx_smem_static(cg, "tbar", 8, 8);
  LLVMValueRef tid = drk_nvptx_tid(cg, 0);
  LLVMValueRef coords[2] = {i32c(k, 0), LLVMBuildMul(cg->b, drk_nvptx_ctaid(cg, 0), i32c(k, 8), "")};
  LLVMValueRef t0 = LLVMBuildICmp(cg->b, LLVMIntEQ, tid, i32c(k, 0), "");
  LLVMBuildCondBr(cg->b, t0, issue, join);
  LLVMPositionBuilderAtEnd(cg->b, issue);
  drk_nvptx_mbarrier_init(cg, bar, i32c(k, 1));
  drk_nvptx_fence_mbarrier_init(cg);
  drk_nvptx_mbarrier_arrive_expect_tx(cg, bar, i32c(k, 512));
  drk_nvptx_tma_load(cg, sm, bar, LLVMGetParam(fn, 0), coords, 2, 0);
  LLVMBuildBr(cg->b, join);
  LLVMPositionBuilderAtEnd(cg->b, join);
  drk_nvptx_bar_sync(cg, 0, 0);
  drk_nvptx_mbarrier_wait_parity(cg, bar, i32c(k, 0));
  LLVMValueRef p = LLVMBuildGEP2(cg->b, f32, sm, &tid, 1, "");
  LLVMValueRef v = LLVMBuildLoad2(cg->b, f32, p, "");
  LLVMBuildStore(cg->b, LLVMBuildFMul(cg->b, v, LLVMConstReal(f32, 2.0), ""), p);
  drk_nvptx_fence_proxy_async(cg);
  drk_nvptx_bar_sync(cg, 0, 0);
  LLVMBuildCondBr(cg->b, t0, store, done);
  LLVMPositionBuilderAtEnd(cg->b, store);
  drk_nvptx_tma_store(cg, sm, LLVMGetParam(fn, 1), coords, 2);
  drk_nvptx_bulk_commit(cg);
  drk_nvptx_bulk_wait(cg, 0, false);
  LLVMBuildBr(cg->b, done);
  LLVMPositionBuilderAtEnd(cg->b, done);
  LLVMBuildRetVoid(cg->b);
}

typedef struct {
  _Alignas(64) unsigned char b[128];
} tmap_t;

static bool gpu_check_tma(const void *image, const char *what) {
  typedef unsigned long long dptr;
  void *mod = NULL, *fn = NULL;
  CU_OK(cu("cuModuleLoadData")(&mod, image));
  CU_OK(cu("cuModuleGetFunction")(&fn, mod, "tma_copy"));
  enum { W = 16, H = 64 };
  float in[W * H], out[W * H];
  for (int i = 0; i < W * H; i++) {
    in[i] = (float)(i % 97) - 40.0f;
    out[i] = -12345.0f;
  }
  dptr di, dout;
  CU_OK(cu("cuMemAlloc_v2")(&di, sizeof in));
  CU_OK(cu("cuMemAlloc_v2")(&dout, sizeof out));
  CU_OK(cu("cuMemcpyHtoD_v2")(di, in, sizeof in));
  CU_OK(cu("cuMemcpyHtoD_v2")(dout, out, sizeof out));
  tmap_t ti, to;
  unsigned long long dims[2] = {W, H}, strides[1] = {W * 4};
  unsigned box[2] = {16, 8}, estr[2] = {1, 1};
  /* CU_TENSOR_MAP_DATA_TYPE_FLOAT32 = 7; interleave, swizzle, L2 promotion, OOB fill: none. */
  CU_OK(cu("cuTensorMapEncodeTiled")(&ti, 7, 2, (void *)di, dims, strides, box, estr, 0, 0, 0, 0));
  CU_OK(cu("cuTensorMapEncodeTiled")(&to, 7, 2, (void *)dout, dims, strides, box, estr, 0, 0, 0, 0));
  void *args[] = {&ti, &to};
  CU_OK(cu("cuLaunchKernel")(fn, H / 8, 1, 1, 128, 1, 1, 0, NULL, args, NULL));
  CU_OK(cu("cuCtxSynchronize")());
  CU_OK(cu("cuMemcpyDtoH_v2")(out, dout, sizeof out));
  int bad = 0;
  for (int i = 0; i < W * H; i++)
    if (out[i] != 2.0f * in[i] && bad++ < 5) fprintf(stderr, "%s tma out[%d] = %g, want %g\n", what, i, out[i], 2 * in[i]);
  CHECK(bad == 0);
  cu("cuMemFree_v2")(di);
  cu("cuMemFree_v2")(dout);
  cu("cuModuleUnload")(mod);
  printf("gpu: %s: TMA load/store + mbarrier correct\n", what);
  return true;
}

static int run_gpu(kmod_t *k, drk_diag_t *d) {
  cu_lib = dlopen("libcuda.so.1", RTLD_NOW);
  int ndev = 0;
  if (!cu_lib || cu("cuInit")(0) != 0 || cu("cuDeviceGetCount")(&ndev) != 0 || ndev == 0) {
    printf("SKIP: no CUDA driver or GPU (%s)\n", cu_lib ? "no device" : dlerror());
    return 77;
  }
  int dev = 0, major = 0, minor = 0;
  void *ctx = NULL;
  cu("cuDeviceGet")(&dev, 0);
  cu("cuDeviceGetAttribute")(&major, 75, dev); /* CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR */
  cu("cuDeviceGetAttribute")(&minor, 76, dev);
  if (cu("cuDevicePrimaryCtxRetain")(&ctx, dev) != 0 || cu("cuCtxSetCurrent")(ctx) != 0) {
    fprintf(stderr, "cannot make a CUDA context\n");
    return 1;
  }
  char arch[16];
  snprintf(arch, sizeof arch, "sm_%d%d%s", major, minor, major == 9 ? "a" : "");
  drk_diag_t q;
  drk_diag_init(&q, NULL);
  if (!drk_nvptx_arch_find(arch, &q)) {
    printf("SKIP: device is %s, not a supported arch\n", arch);
    return 77;
  }
  char *ptx = NULL;
  size_t len = 0;
  /* The device's own arch as a cubin (when ptxas is there), and sm_80 PTX JIT-compiled
   * by the driver. */
  if (drk_nvptx_compile_module(k->mod, arch, &ptx, &len, d)) {
    void *cubin = NULL;
    size_t size = 0;
    if (drk_nvptx_ptxas(ptx, arch, &cubin, &size, NULL, d)) {
      CHECK(gpu_check(cubin, arch));
      free(cubin);
    } else {
      CHECK(gpu_check(ptx, arch));
    }
    free(ptx);
  }
  if (drk_nvptx_compile_module(k->mod, "sm_80", &ptx, &len, d)) {
    CHECK(gpu_check(ptx, "sm_80 PTX (JIT)"));
    free(ptx);
  }
  if (major >= 9) {
    kmod_t t;
    kmod_open(&t, "tma");
    build_tma_copy(&t);
    if (drk_nvptx_compile_module(t.mod, arch, &ptx, &len, d)) {
      void *cubin = NULL;
      size_t size = 0;
      if (drk_nvptx_ptxas(ptx, arch, &cubin, &size, NULL, d)) {
        CHECK(gpu_check_tma(cubin, arch));
        free(cubin);
      } else {
        CHECK(gpu_check_tma(ptx, arch));
      }
      free(ptx);
    } else {
      CHECK(!"tma compile failed");
    }
    kmod_close(&t);
  }
  return 0;
}

static bool has(const char *ptx, const char *s) { return strstr(ptx, s) != NULL; }

/* With DRK_NVPTX_DUMP=dir, the PTX is also written there for inspection. */
static void dump(const char *name, const char *arch, const char *ptx) {
  const char *dir = getenv("DRK_NVPTX_DUMP");
  if (!dir) return;
  char path[1024];
  snprintf(path, sizeof path, "%s/%s_%s.ptx", dir, name, arch);
  FILE *f = fopen(path, "w");
  if (f) {
    fputs(ptx, f);
    fclose(f);
  }
}

int main(int argc, char **argv) {
  bool asm_mode = argc > 1 && strcmp(argv[1], "ptxas") == 0;
  if (asm_mode) {
    if (argc < 3 || !*argv[2] || strstr(argv[2], "NOTFOUND")) {
      printf("SKIP: ptxas not available (DRK_PTXAS not found at configure time)\n");
      return 77;
    }
    setenv("DRK_PTXAS", argv[2], 1);
  }
  drk_diag_t d;
  drk_diag_init(&d, stderr);

  /* Unknown arch: a clear error, no crash. */
  drk_diag_t q;
  drk_diag_init(&q, NULL);
  CHECK(drk_nvptx_arch_find("sm_75", &q) == NULL);
  CHECK(q.n_errors == 1 && strstr(q.first, "sm_90a") && strstr(q.first, "sm_75"));

  size_t n_arch;
  const drk_nvptx_arch_t *archs = drk_nvptx_arch_all(&n_arch);
  CHECK(n_arch == 6);

  kmod_t k;
  kmod_open(&k, "t");
  build_vadd(&k);
  build_mma(&k, DRK_NVPTX_MMA_BF16, "mma_bf16");
  build_mma(&k, DRK_NVPTX_MMA_F16, "mma_f16");
  build_wred(&k);
  if (argc > 1 && strcmp(argv[1], "gpu") == 0) {
    int rc = run_gpu(&k, &d);
    kmod_close(&k);
    if (rc == 0 && failures) {
      fprintf(stderr, "%d check(s) failed\n", failures);
      return 1;
    }
    if (rc == 0) printf("ok\n");
    return rc;
  }
  kmod_t h;
  kmod_open(&h, "hopper");
  build_hopper(&h);

  for (size_t ai = 0; ai < n_arch; ai++) {
    const char *arch = archs[ai].name;
    char *ptx = NULL;
    size_t len = 0;
    if (!drk_nvptx_compile_module(k.mod, arch, &ptx, &len, &d)) {
      CHECK(!"compile failed");
      continue;
    }
    dump("kernels", arch, ptx);
    char want[64];
    snprintf(want, sizeof want, ".target %s", arch);
    CHECK(has(ptx, want));
    snprintf(want, sizeof want, ".version %d.%d", archs[ai].ptx_version / 10, archs[ai].ptx_version % 10);
    CHECK(has(ptx, want));
    CHECK(has(ptx, ".entry vadd"));
    CHECK(has(ptx, ".entry mma_bf16"));
    CHECK(has(ptx, ".entry mma_f16"));
    CHECK(has(ptx, ".maxntid 256, 1, 1"));
    CHECK(has(ptx, ".reqntid 32, 1, 1"));
    CHECK(has(ptx, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"));
    CHECK(has(ptx, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"));
    CHECK(has(ptx, "ldmatrix.sync.aligned.m8n8.x4.shared.b16"));
    CHECK(has(ptx, "ldmatrix.sync.aligned.m8n8.x2.shared.b16"));
    CHECK(has(ptx, "cp.async.cg.shared.global"));
    CHECK(has(ptx, "cp.async.commit_group"));
    CHECK(has(ptx, "cp.async.wait_group"));
    CHECK(has(ptx, "bar.sync"));
    CHECK(has(ptx, "shfl.sync.bfly.b32"));
    CHECK(has(ptx, ".entry wred"));
    CHECK(has(ptx, "max.NaN.f32") && has(ptx, "min.NaN.f32"));
    CHECK(has(ptx, "ld.global") && has(ptx, "st.global"));
    CHECK(len == strlen(ptx));
    if (asm_mode && (strcmp(arch, "sm_80") == 0 || strcmp(arch, "sm_87") == 0 || strcmp(arch, "sm_90a") == 0)) {
      void *cubin = NULL;
      size_t size = 0;
      char *log = NULL;
      bool ok = drk_nvptx_ptxas(ptx, arch, &cubin, &size, &log, &d);
      CHECK(ok);
      if (ok) {
        CHECK(size > 64 && memcmp(cubin, "\177ELF", 4) == 0);
        drk_nvptx_usage_t u = {0};
        CHECK(drk_nvptx_usage_parse(log, "mma_bf16", &u));
        CHECK(u.registers > 0 && u.smem == 1024 && u.spill_stores == 0);
        CHECK(drk_nvptx_usage_parse(log, NULL, &u));
        CHECK(!drk_nvptx_usage_parse(log, "nosuchkernel", &u));
        printf("%s: cubin %zu bytes, mma_bf16 uses %d registers\n", arch, size, u.registers);
        free(cubin);
        free(log);
      }
    }
    free(ptx);
  }

  char *ptx = NULL;
  size_t len = 0;
  if (drk_nvptx_compile_module(h.mod, "sm_90a", &ptx, &len, &d)) {
    dump("hopper", "sm_90a", ptx);
    CHECK(has(ptx, ".target sm_90a"));
    CHECK(has(ptx, ".version 8.6"));
    CHECK(has(ptx, ".entry hopper"));
    CHECK(has(ptx, ".param .align 64 .b8 hopper_param_0[128]"));
    CHECK(has(ptx, "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"));
    CHECK(has(ptx, "mbarrier.init.shared.b64"));
    CHECK(has(ptx, "mbarrier.arrive.expect_tx"));
    CHECK(has(ptx, "mbarrier.try_wait.parity"));
    CHECK(has(ptx, "fence.mbarrier_init.release.cluster"));
    CHECK(has(ptx, "fence.proxy.async.shared::cta"));
    CHECK(has(ptx, "wgmma.fence.sync.aligned"));
    CHECK(has(ptx, "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16"));
    CHECK(has(ptx, "wgmma.commit_group.sync.aligned"));
    CHECK(has(ptx, "wgmma.wait_group.sync.aligned"));
    CHECK(has(ptx, ".extern .shared .align 1024 .b8 drk_dsmem[]"));
    /* The tensor map must be read in place, never copied to a local depot. */
    CHECK(!has(ptx, "__local_depot"));
    if (asm_mode) {
      void *cubin = NULL;
      size_t size = 0;
      char *log = NULL;
      CHECK(drk_nvptx_ptxas(ptx, "sm_90a", &cubin, &size, &log, &d));
      free(cubin);
      free(log);
    }
    free(ptx);
  } else {
    CHECK(!"hopper compile failed");
  }

  if (asm_mode) {
    /* Bad PTX: an error quoting ptxas's log, outputs untouched. */
    drk_diag_init(&q, NULL);
    void *cubin = (void *)&q;
    size_t size = 12345;
    CHECK(!drk_nvptx_ptxas(".version 8.0\n.target sm_90\nthis is not ptx\n", "sm_90", &cubin, &size, NULL, &q));
    CHECK(q.n_errors == 1 && strstr(q.first, "ptxas") && strstr(q.first, "error"));
    CHECK(cubin == (void *)&q && size == 12345);
  }

  kmod_close(&k);
  kmod_close(&h);
  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("ok\n");
  return 0;
}
