/* AMDGPU backend test: builds kernels with the LLVM-C builder and the drk_amdgpu_* helpers,
 * compiles them for gfx942, links code objects with ld.lld, checks the code object metadata
 * through drk_amdgpu_usage_read, and writes the code objects and an offload bundle (made by
 * backends/package/bundle.c) into OUTDIR for check_amdgpu.sh, which inspects them with
 * llvm-readelf, llvm-objdump and clang-offload-bundler.
 *
 * usage: test_amdgpu build OUTDIR          (exit 77 when ld.lld is missing)
 *        test_amdgpu readbundle FILE HSACO  (our reader on a bundle made by clang)
 *        test_amdgpu lower FILE.drkt OUTDIR (tile IR -> hsaco; usage checked, OUTDIR/NAME.hsaco)
 *        test_amdgpu lower-error FILE.drkt TEXT  (lowering must fail with a located error
 *                                                containing TEXT, without crashing)
 *        test_amdgpu xcd GEMM.drkt VEC.drkt  (the XCD remap of program ids: a bijection that
 *                                             gives each XCD a contiguous range, evaluated by
 *                                             constant folding; applied by default to kernels
 *                                             with a dot only, and as the knob says)
 *        test_amdgpu rolled FILE.drkt N  (the lowered module marks exactly N loops
 *                                        llvm.loop.unroll.disable: those with a barrier) */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backends/amdgpu/amdgpu.h"
#include "backends/package/bundle.h"
#include "tests/common/check.h"

/* lower-spills-ok: big tiles (gemm_sm80's 128x128 per 2 waves) may spill for now */
static bool allow_spills;

typedef struct {
  LLVMContextRef ctx;
  LLVMModuleRef mod;
  drk_amdgpu_cg_t cg;
} kmod_t;

static void kmod_open(kmod_t *k, const char *name) {
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  k->ctx = LLVMContextCreate();
  k->mod = drk_amdgpu_module_create(k->ctx, name, &d);
  if (!k->mod) exit(1);
  k->cg = (drk_amdgpu_cg_t){k->ctx, k->mod, LLVMCreateBuilderInContext(k->ctx),
                            drk_amdgpu_arch_find("gfx942", &d)};
}

static void kmod_close(kmod_t *k) {
  LLVMDisposeBuilder(k->cg.b);
  LLVMDisposeModule(k->mod);
  LLVMContextDispose(k->ctx);
}

static LLVMValueRef i32c(kmod_t *k, int v) { return LLVMConstInt(LLVMInt32TypeInContext(k->ctx), (unsigned)v, 1); }

/* c[i] = a[i] + b[i] for i < n. */
static void build_vadd(kmod_t *k) {
  LLVMTypeRef g = LLVMPointerTypeInContext(k->ctx, DRK_AMDGPU_AS_GLOBAL);
  LLVMTypeRef i32 = LLVMInt32TypeInContext(k->ctx), f32 = LLVMFloatTypeInContext(k->ctx);
  LLVMTypeRef ps[] = {g, g, g, i32};
  drk_amdgpu_cg_t *cg = &k->cg;
  LLVMValueRef fn = drk_amdgpu_kernel_add(cg, "vadd", ps, 4);
  drk_amdgpu_kernel_set_workgroup_size(cg, fn, 256, 256);
  LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(k->ctx, fn, "entry");
  LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(k->ctx, fn, "body");
  LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(k->ctx, fn, "done");
  LLVMPositionBuilderAtEnd(cg->b, entry);
  LLVMValueRef i = LLVMBuildAdd(cg->b, LLVMBuildMul(cg->b, drk_amdgpu_workgroup_id(cg, 0),
                                                    drk_amdgpu_workgroup_size(cg, 0), ""),
                                drk_amdgpu_workitem_id(cg, 0), "i");
  LLVMBuildCondBr(cg->b, LLVMBuildICmp(cg->b, LLVMIntSLT, i, LLVMGetParam(fn, 3), ""), body, done);
  LLVMPositionBuilderAtEnd(cg->b, body);
  LLVMValueRef a = drk_amdgpu_global_load(cg, f32, LLVMGetParam(fn, 0), i, 4);
  LLVMValueRef bv = drk_amdgpu_global_load(cg, f32, LLVMGetParam(fn, 1), i, 4);
  drk_amdgpu_global_store(cg, LLVMBuildFAdd(cg->b, a, bv, ""), LLVMGetParam(fn, 2), i, 4);
  LLVMBuildBr(cg->b, done);
  LLVMPositionBuilderAtEnd(cg->b, done);
  LLVMBuildRetVoid(cg->b);
}

/* out[wg] = sum of x[wg*256 .. wg*256+255] (masked by n through a buffer resource):
 * wave reduction through ds_bpermute, then across the 4 waves through LDS. */
static void build_reduce(kmod_t *k) {
  LLVMTypeRef g = LLVMPointerTypeInContext(k->ctx, DRK_AMDGPU_AS_GLOBAL);
  LLVMTypeRef i32 = LLVMInt32TypeInContext(k->ctx), f32 = LLVMFloatTypeInContext(k->ctx);
  LLVMTypeRef ps[] = {g, g, i32};
  drk_amdgpu_cg_t *cg = &k->cg;
  LLVMValueRef fn = drk_amdgpu_kernel_add(cg, "reduce_sum", ps, 3);
  drk_amdgpu_kernel_set_workgroup_size(cg, fn, 256, 256);
  LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(k->ctx, fn, "entry");
  LLVMBasicBlockRef w0 = LLVMAppendBasicBlockInContext(k->ctx, fn, "lane0");
  LLVMBasicBlockRef j1 = LLVMAppendBasicBlockInContext(k->ctx, fn, "join");
  LLVMBasicBlockRef t0 = LLVMAppendBasicBlockInContext(k->ctx, fn, "thread0");
  LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(k->ctx, fn, "done");
  LLVMPositionBuilderAtEnd(cg->b, entry);
  LLVMValueRef lds = drk_amdgpu_lds_static(cg, "partials", 4 * 4, 16);
  LLVMValueRef tid = drk_amdgpu_workitem_id(cg, 0), wg = drk_amdgpu_workgroup_id(cg, 0);
  LLVMValueRef bytes = LLVMBuildMul(cg->b, LLVMGetParam(fn, 2), i32c(k, 4), "");
  LLVMValueRef rsrc = drk_amdgpu_buffer_rsrc(cg, LLVMGetParam(fn, 0), bytes);
  LLVMValueRef idx = LLVMBuildAdd(cg->b, LLVMBuildMul(cg->b, wg, i32c(k, 256), ""), tid, "");
  LLVMValueRef x = drk_amdgpu_buffer_load(cg, f32, rsrc, LLVMBuildMul(cg->b, idx, i32c(k, 4), ""));
  LLVMValueRef s = drk_amdgpu_wave_reduce(cg, DRK_AMDGPU_RED_ADD, x, 64);
  LLVMValueRef lane = drk_amdgpu_lane_id(cg), wave = drk_amdgpu_wave_index(cg);
  LLVMBuildCondBr(cg->b, LLVMBuildICmp(cg->b, LLVMIntEQ, lane, i32c(k, 0), ""), w0, j1);
  LLVMPositionBuilderAtEnd(cg->b, w0);
  drk_amdgpu_global_store(cg, s, lds, wave, 4);
  LLVMBuildBr(cg->b, j1);
  LLVMPositionBuilderAtEnd(cg->b, j1);
  drk_amdgpu_barrier(cg);
  LLVMBuildCondBr(cg->b, LLVMBuildICmp(cg->b, LLVMIntEQ, tid, i32c(k, 0), ""), t0, done);
  LLVMPositionBuilderAtEnd(cg->b, t0);
  LLVMValueRef acc = drk_amdgpu_global_load(cg, f32, lds, i32c(k, 0), 4);
  for (int w = 1; w < 4; w++)
    acc = LLVMBuildFAdd(cg->b, acc, drk_amdgpu_global_load(cg, f32, lds, i32c(k, w), 4), "");
  drk_amdgpu_global_store(cg, acc, LLVMGetParam(fn, 1), wg, 4);
  LLVMBuildBr(cg->b, done);
  LLVMPositionBuilderAtEnd(cg->b, done);
  LLVMBuildRetVoid(cg->b);
}

/* C[32x32] (f32, row-major) = A[32x8] * B[8x32] (bf16, row-major), one wavefront, one
 * v_mfma_f32_32x32x8_bf16 with A and B staged through LDS. Operand layout (per lane l):
 * A: row l%32, k = 4*(l/32)+j; B: column l%32, same k; D register r: row
 * 8*(r/4) + 4*(l/32) + r%4, column l%32. */
static void build_mfma(kmod_t *k) {
  LLVMTypeRef g = LLVMPointerTypeInContext(k->ctx, DRK_AMDGPU_AS_GLOBAL);
  LLVMTypeRef i16 = LLVMInt16TypeInContext(k->ctx), f32 = LLVMFloatTypeInContext(k->ctx);
  LLVMTypeRef ps[] = {g, g, g};
  drk_amdgpu_cg_t *cg = &k->cg;
  LLVMValueRef fn = drk_amdgpu_kernel_add(cg, "mfma_bf16", ps, 3);
  drk_amdgpu_kernel_set_workgroup_size(cg, fn, 64, 64);
  LLVMPositionBuilderAtEnd(cg->b, LLVMAppendBasicBlockInContext(k->ctx, fn, "entry"));
  LLVMValueRef as = drk_amdgpu_lds_static(cg, "a_tile", 32 * 8 * 2, 16);
  LLVMValueRef bs = drk_amdgpu_lds_static(cg, "b_tile", 8 * 32 * 2, 16);
  LLVMValueRef t = drk_amdgpu_workitem_id(cg, 0);
  LLVMTypeRef v4 = LLVMVectorType(i16, 4);
  /* Each lane stages 4 consecutive elements of A and of B (8 bytes each). */
  LLVMValueRef va = drk_amdgpu_global_load(cg, v4, LLVMGetParam(fn, 0), t, 8);
  LLVMValueRef vb = drk_amdgpu_global_load(cg, v4, LLVMGetParam(fn, 1), t, 8);
  drk_amdgpu_global_store(cg, va, as, t, 8);
  drk_amdgpu_global_store(cg, vb, bs, t, 8);
  drk_amdgpu_barrier(cg);
  LLVMValueRef col = LLVMBuildAnd(cg->b, t, i32c(k, 31), "");
  LLVMValueRef kb = LLVMBuildMul(cg->b, LLVMBuildLShr(cg->b, t, i32c(k, 5), ""), i32c(k, 4), "");
  /* A row `col`, k = kb..kb+3: contiguous in row-major A. */
  LLVMValueRef a = drk_amdgpu_global_load(
      cg, v4, as, LLVMBuildAdd(cg->b, LLVMBuildMul(cg->b, col, i32c(k, 2), ""),
                               LLVMBuildLShr(cg->b, kb, i32c(k, 2), ""), ""), 8);
  LLVMValueRef bv = LLVMGetPoison(v4);
  for (int j = 0; j < 4; j++) {
    LLVMValueRef e = LLVMBuildAdd(cg->b, LLVMBuildMul(cg->b, LLVMBuildAdd(cg->b, kb, i32c(k, j), ""),
                                                      i32c(k, 32), ""), col, "");
    bv = LLVMBuildInsertElement(cg->b, bv, drk_amdgpu_global_load(cg, i16, bs, e, 2), i32c(k, j), "");
  }
  LLVMValueRef acc = LLVMConstNull(LLVMVectorType(f32, 16));
  LLVMValueRef d = drk_amdgpu_mfma(cg, DRK_AMDGPU_MFMA_F32_32X32X8_BF16, a, bv, acc);
  LLVMValueRef half = LLVMBuildMul(cg->b, LLVMBuildLShr(cg->b, t, i32c(k, 5), ""), i32c(k, 4), "");
  for (int r = 0; r < 16; r++) {
    LLVMValueRef row = LLVMBuildAdd(cg->b, i32c(k, 8 * (r / 4) + r % 4), half, "");
    LLVMValueRef o = LLVMBuildAdd(cg->b, LLVMBuildMul(cg->b, row, i32c(k, 32), ""), col, "");
    drk_amdgpu_global_store(cg, LLVMBuildExtractElement(cg->b, d, i32c(k, r), ""),
                            LLVMGetParam(fn, 2), o, 4);
  }
  LLVMBuildRetVoid(cg->b);
}

/* Every MFMA kind once (operands read from global memory), so each intrinsic is selected. */
static void build_mfma_all(kmod_t *k) {
  LLVMTypeRef g = LLVMPointerTypeInContext(k->ctx, DRK_AMDGPU_AS_GLOBAL);
  LLVMTypeRef f32 = LLVMFloatTypeInContext(k->ctx);
  LLVMTypeRef ps[] = {g, g};
  drk_amdgpu_cg_t *cg = &k->cg;
  LLVMValueRef fn = drk_amdgpu_kernel_add(cg, "mfma_all", ps, 2);
  drk_amdgpu_kernel_set_workgroup_size(cg, fn, 64, 64);
  LLVMPositionBuilderAtEnd(cg->b, LLVMAppendBasicBlockInContext(k->ctx, fn, "entry"));
  LLVMValueRef t = drk_amdgpu_workitem_id(cg, 0);
  for (int kind = 0; kind < DRK_AMDGPU_MFMA_COUNT; kind++) {
    const drk_amdgpu_mfma_info_t *in = drk_amdgpu_mfma_info((drk_amdgpu_mfma_t)kind);
    LLVMTypeRef ab = drk_amdgpu_mfma_ab_type(cg, (drk_amdgpu_mfma_t)kind);
    LLVMValueRef a = drk_amdgpu_global_load(cg, ab, LLVMGetParam(fn, 0), t, 8);
    LLVMValueRef bv = drk_amdgpu_global_load(cg, ab, LLVMGetParam(fn, 0),
                                             LLVMBuildAdd(cg->b, t, i32c(k, 64), ""), 8);
    LLVMValueRef d = drk_amdgpu_mfma(cg, (drk_amdgpu_mfma_t)kind, a, bv,
                                     LLVMConstNull(LLVMVectorType(f32, in->acc_elems)));
    LLVMValueRef o = LLVMBuildAdd(cg->b, LLVMBuildMul(cg->b, t, i32c(k, DRK_AMDGPU_MFMA_COUNT), ""),
                                  i32c(k, kind), "");
    drk_amdgpu_global_store(cg, LLVMBuildExtractElement(cg->b, d, i32c(k, 0), ""), LLVMGetParam(fn, 1), o, 4);
  }
  /* Shuffle kinds, too: each goes through ds_bpermute. */
  LLVMValueRef x = drk_amdgpu_global_load(cg, f32, LLVMGetParam(fn, 1), t, 4);
  for (int s = 0; s < 4; s++) x = drk_amdgpu_shfl(cg, (drk_amdgpu_shfl_t)s, x, i32c(k, 3));
  drk_amdgpu_global_store(cg, x, LLVMGetParam(fn, 1), t, 4);
  LLVMBuildRetVoid(cg->b);
}

static bool write_file(const char *dir, const char *name, const void *p, size_t n) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(p, 1, n, f) != n) {
    fprintf(stderr, "cannot write %s\n", path);
    if (f) fclose(f);
    return false;
  }
  return fclose(f) == 0;
}

/* Compiles + links the module of k; returns the code object (free()) or NULL. */
static void *make_hsaco(kmod_t *k, size_t *out_n) {
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  void *obj = NULL, *hsaco = NULL;
  size_t on = 0;
  if (!drk_amdgpu_compile_module(k->mod, "gfx942", &obj, &on, &d)) return NULL;
  CHECK(on > 4 && memcmp(obj, "\177ELF", 4) == 0);
  char *log = NULL;
  bool ok = drk_amdgpu_link(obj, on, &hsaco, out_n, &log, &d);
  free(obj);
  free(log);
  return ok ? hsaco : NULL;
}

static void check_usage(const void *h, size_t n, const char *kernel, int lds, int max_wg) {
  drk_amdgpu_usage_t u;
  memset(&u, 0x55, sizeof u);
  bool ok = drk_amdgpu_usage_read(h, n, kernel, &u);
  CHECK(ok);
  if (!ok) return;
  printf("%s: sgpr %d vgpr %d agpr %d lds %d scratch %d wave %d wg %d kernarg %d spills %d/%d\n",
         kernel, u.sgpr_count, u.vgpr_count, u.agpr_count, u.group_segment, u.private_segment,
         u.wavefront_size, u.max_flat_workgroup_size, u.kernarg_segment_size, u.sgpr_spill_count,
         u.vgpr_spill_count);
  CHECK(u.wavefront_size == 64);
  CHECK(allow_spills || u.private_segment == 0);
  CHECK(u.sgpr_count > 0 && u.sgpr_count <= 112);
  CHECK(u.vgpr_count > 0 && u.vgpr_count <= 512);
  if (lds >= 0) CHECK(u.group_segment == lds);
  CHECK(u.max_flat_workgroup_size == max_wg);
  CHECK(allow_spills || (u.sgpr_spill_count == 0 && u.vgpr_spill_count == 0));
}

static int mode_build(const char *dir) {
  drk_diag_t d;
  drk_diag_init(&d, NULL);
  char *lld = drk_amdgpu_lld_find(&d);
  if (!lld) {
    printf("SKIP: %s\n", d.first);
    return 77;
  }
  free(lld);

  /* Errors are reported, not crashes. */
  drk_diag_init(&d, NULL);
  CHECK(!drk_amdgpu_arch_find("gfx1100", &d) && d.n_errors == 1 && strstr(d.first, "gfx942"));
  void *junk = NULL;
  size_t jn = 0;
  drk_diag_init(&d, NULL);
  CHECK(!drk_amdgpu_link("nope", 4, &junk, &jn, NULL, &d) && d.n_errors == 1);
  drk_amdgpu_usage_t u;
  CHECK(!drk_amdgpu_usage_read("nope", 4, NULL, &u));

  kmod_t k;
  kmod_open(&k, "kernels");
  build_vadd(&k);
  build_reduce(&k);
  size_t n1 = 0;
  void *h1 = make_hsaco(&k, &n1);
  CHECK(h1 != NULL);
  char *asm_text = NULL;
  size_t asm_n = 0;
  drk_diag_init(&d, stderr);
  CHECK(drk_amdgpu_compile_module_asm(k.mod, "gfx942", NULL, &asm_text, &asm_n, &d));
  if (asm_text) {
    CHECK(strstr(asm_text, "ds_bpermute_b32") != NULL);
    CHECK(strstr(asm_text, "buffer_load_dword") != NULL);
    CHECK(strstr(asm_text, "s_barrier") != NULL);
    CHECK(strstr(asm_text, ".amdhsa_code_object_version 5") != NULL ||
          strstr(asm_text, "amdhsa_code_object_version 5") != NULL);
    write_file(dir, "kernels.s", asm_text, asm_n);
    free(asm_text);
  }
  kmod_close(&k);

  kmod_open(&k, "mfma");
  build_mfma(&k);
  build_mfma_all(&k);
  size_t n2 = 0;
  void *h2 = make_hsaco(&k, &n2);
  CHECK(h2 != NULL);
  kmod_close(&k);
  if (!h1 || !h2) return 1;

  check_usage(h1, n1, "vadd", 0, 256);
  check_usage(h1, n1, "reduce_sum", 16, 256);
  check_usage(h2, n2, "mfma_bf16", 1024, 64);
  check_usage(h2, n2, "mfma_all", 0, 64);
  CHECK(!drk_amdgpu_usage_read(h1, n1, "no_such_kernel", &u));
  /* Truncations of a real code object: the reader must refuse or succeed, never crash. */
  for (size_t cut = 0; cut < n1; cut += 7) (void)drk_amdgpu_usage_read(h1, cut, NULL, &u);

  CHECK(write_file(dir, "kernels.hsaco", h1, n1));
  CHECK(write_file(dir, "mfma.hsaco", h2, n2));

  /* Offload bundle: empty host entry + the gfx942 code object, HIP alignment. */
  drk_bundle_entry_t es[] = {{DRK_BUNDLE_HOST_X86_64, 0, NULL, 0},
                             {"hipv4-amdgcn-amd-amdhsa--gfx942", 0, h2, n2}};
  void *bun = NULL;
  size_t bn = 0;
  char err[256];
  CHECK(drk_bundle_build(es, 2, DRK_BUNDLE_ALIGN_HIP, &bun, &bn, err, sizeof err) == 0);
  if (bun) {
    drk_bundle_entry_t got;
    CHECK(drk_bundle_find(bun, bn, "hipv4-amdgcn-amd-amdhsa--gfx942", &got, err, sizeof err) == 0);
    CHECK(got.size == n2 && memcmp(got.data, h2, n2) == 0);
    CHECK(((const char *)got.data - (const char *)bun) % 4096 == 0);
    CHECK(drk_bundle_find(bun, bn, "hipv4-amdgcn-amd-amdhsa--gfx90a", &got, err, sizeof err) == 1);
    CHECK(strstr(err, "gfx942") != NULL);
    size_t ne = 0;
    for (size_t cut = 0; cut < 200; cut++)
      CHECK(drk_bundle_parse(bun, cut, NULL, 0, &ne, err, sizeof err) == -1);
    CHECK(drk_bundle_parse(bun, bn - 1, NULL, 0, &ne, err, sizeof err) == -1);
    CHECK(drk_bundle_parse("CCOB....", 8, NULL, 0, &ne, err, sizeof err) == -1 && strstr(err, "compressed"));
    CHECK(write_file(dir, "mfma.hipfb", bun, bn));
    free(bun);
  }
  CHECK(drk_bundle_build(es, 2, 3, &bun, &bn, err, sizeof err) == -1);
  free(h1);
  free(h2);
  return check_status("test_amdgpu");
}

static void *slurp(const char *path, size_t *n) {
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  return drk_read_file(path, n, &d);
}

static int mode_readbundle(const char *bundle, const char *hsaco) {
  size_t bn = 0, hn = 0;
  void *b = slurp(bundle, &bn), *h = slurp(hsaco, &hn);
  if (!b || !h) return 1;
  drk_bundle_entry_t es[4];
  size_t n = 0;
  char err[256];
  CHECK(drk_bundle_parse(b, bn, es, 4, &n, err, sizeof err) == 0);
  CHECK(n == 2);
  drk_bundle_entry_t got;
  CHECK(drk_bundle_find(b, bn, "hipv4-amdgcn-amd-amdhsa--gfx942", &got, err, sizeof err) == 0);
  CHECK(got.size == hn && memcmp(got.data, h, hn) == 0);
  CHECK(drk_bundle_find(b, bn, DRK_BUNDLE_HOST_X86_64, &got, err, sizeof err) == 0 && got.size == 0);
  free(b);
  free(h);
  return check_status("test_amdgpu");
}

static drk_tile_module_t *parse_tile(const char *path, drk_diag_t *d) {
  size_t n = 0;
  char *text = drk_read_file(path, &n, d);
  if (!text) return NULL;
  drk_tile_module_t *m = drk_tile_parse(text, n, path, d);
  free(text);
  if (m && !drk_tile_verify(m, d)) {
    drk_tile_module_destroy(m);
    return NULL;
  }
  return m;
}

static int mode_lower(const char *path, const char *dir) {
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  char *lld = drk_amdgpu_lld_find(&d);
  if (!lld) return 77;
  free(lld);
  drk_tile_module_t *tm = parse_tile(path, &d);
  if (!tm) return 1;
  LLVMContextRef ctx = LLVMContextCreate();
  LLVMModuleRef m = drk_amdgpu_lower_module(tm, ctx, "gfx942", &d);
  CHECK(m != NULL);
  if (m) {
    void *obj = NULL, *h = NULL;
    size_t on = 0, hn = 0;
    CHECK(drk_amdgpu_compile_module(m, "gfx942", &obj, &on, &d));
    if (obj) CHECK(drk_amdgpu_link(obj, on, &h, &hn, NULL, &d));
    for (size_t i = 0; h && i < tm->n_kernels; i++) {
      const drk_tile_kernel_t *k = tm->kernels[i];
      check_usage(h, hn, k->name, -1, (int)k->block);
      char name[512];
      snprintf(name, sizeof name, "%s.hsaco", k->name);
      CHECK(write_file(dir, name, h, hn));
    }
    free(obj);
    free(h);
    LLVMDisposeModule(m);
  }
  LLVMContextDispose(ctx);
  drk_tile_module_destroy(tm);
  return check_status("test_amdgpu");
}

static int mode_lower_error(const char *path, const char *text) {
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  drk_tile_module_t *tm = parse_tile(path, &d);
  if (!tm) return 1;
  LLVMContextRef ctx = LLVMContextCreate();
  LLVMModuleRef m = drk_amdgpu_lower_module(tm, ctx, "gfx942", &d);
  CHECK(m == NULL);
  CHECK(d.n_errors == 1);
  /* Located: "FILE:LINE:COL: error: ..." */
  CHECK(strncmp(d.first, path, strlen(path)) == 0 && strstr(d.first, ": error: ") != NULL);
  CHECK(strstr(d.first, text) != NULL);
  if (m) LLVMDisposeModule(m);
  LLVMContextDispose(ctx);
  drk_tile_module_destroy(tm);
  return check_status("test_amdgpu");
}

/* drk_amdgpu_xcd_remap on constants for every workgroup of an n0 x n1 x n2 grid: a
 * bijection; hardware id p < X (G / X) runs logical id (p % X) (G / X) + p / X, so XCD p % X
 * holds a contiguous range; the rest stay in place. */
static void check_xcd_grid(drk_amdgpu_cg_t *cg, int X, int n0, int n1, int n2) {
  int G = n0 * n1 * n2, q = G / X, bad = 0;
  unsigned char *seen = calloc((size_t)G, 1);
  LLVMTypeRef i32 = LLVMInt32TypeInContext(cg->ctx);
  for (int p = 0; p < G; p++) {
    LLVMValueRef n[3] = {LLVMConstInt(i32, (unsigned)n0, 0), LLVMConstInt(i32, (unsigned)n1, 0), LLVMConstInt(i32, (unsigned)n2, 0)};
    LLVMValueRef ids[3] = {LLVMConstInt(i32, (unsigned)(p % n0), 0), LLVMConstInt(i32, (unsigned)(p / n0 % n1), 0),
                           LLVMConstInt(i32, (unsigned)(p / (n0 * n1)), 0)};
    LLVMValueRef out[3];
    drk_amdgpu_xcd_remap(cg, X, n, ids, out);
    long v[3];
    for (int i = 0; i < 3; i++) {
      if (!LLVMIsAConstantInt(out[i])) {
        bad++;
        v[i] = -1;
      } else {
        v[i] = (long)LLVMConstIntGetZExtValue(out[i]);
      }
    }
    if (bad || v[0] >= n0 || v[1] >= n1 || v[2] >= n2) {
      bad++;
      break;
    }
    long l = v[0] + (long)n0 * (v[1] + (long)n1 * v[2]);
    long want = p < X * q ? (long)(p % X) * q + p / X : p;
    bad += l != want || seen[l];
    seen[l] = 1;
  }
  if (bad) fprintf(stderr, "xcd remap wrong for grid %dx%dx%d on %d XCDs\n", n0, n1, n2, X);
  CHECK(bad == 0);
  free(seen);
}

static char *lower_ir(const drk_tile_module_t *tm, drk_amdgpu_xcd_remap_t mode) {
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  LLVMContextRef ctx = LLVMContextCreate();
  drk_amdgpu_lower_opts_t o = {mode};
  LLVMModuleRef m = drk_amdgpu_lower_module_opts(tm, ctx, "gfx942", &o, &d);
  CHECK(m != NULL);
  char *ir = NULL;
  if (m) {
    char *t = LLVMPrintModuleToString(m);
    ir = strdup(t);
    LLVMDisposeMessage(t);
    LLVMDisposeModule(m);
  }
  LLVMContextDispose(ctx);
  return ir ? ir : strdup("");
}

static int mode_xcd(const char *gemm, const char *vec) {
  kmod_t k;
  kmod_open(&k, "xcd");
  const int grids[][3] = {{16, 4, 1}, {10, 3, 1}, {7, 1, 1}, {5, 5, 5}, {3, 8, 2}, {64, 1, 1}, {1, 1, 9}};
  for (size_t i = 0; i < sizeof grids / sizeof grids[0]; i++) {
    check_xcd_grid(&k.cg, 8, grids[i][0], grids[i][1], grids[i][2]);
    check_xcd_grid(&k.cg, 6, grids[i][0], grids[i][1], grids[i][2]);
  }
  kmod_close(&k);
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  drk_tile_module_t *tg = parse_tile(gemm, &d), *tv = parse_tile(vec, &d);
  if (!tg || !tv) return 1;
  char *g_def = lower_ir(tg, DRK_AMDGPU_XCD_REMAP_DEFAULT), *g_off = lower_ir(tg, DRK_AMDGPU_XCD_REMAP_OFF);
  char *v_def = lower_ir(tv, DRK_AMDGPU_XCD_REMAP_DEFAULT), *v_all = lower_ir(tv, DRK_AMDGPU_XCD_REMAP_ALL);
  CHECK(strstr(g_def, "%xcd.pid") != NULL); /* a GEMM (dot) kernel: remapped by default */
  CHECK(strstr(g_off, "%xcd.pid") == NULL);
  CHECK(strstr(v_def, "%xcd.pid") == NULL); /* no dot: left alone unless asked */
  CHECK(strstr(v_all, "%xcd.pid") != NULL);
  free(g_def), free(g_off), free(v_def), free(v_all);
  drk_tile_module_destroy(tg);
  drk_tile_module_destroy(tv);
  if (!failures) printf("OK\n");
  return check_status("test_amdgpu");
}

/* Loops kept rolled: latches carrying a loop id, and loop ids saying unroll.disable. */
static int mode_rolled(const char *path, const char *n_text) {
  drk_diag_t d;
  drk_diag_init(&d, stderr);
  drk_tile_module_t *tm = parse_tile(path, &d);
  if (!tm) return 1;
  char *ir = lower_ir(tm, DRK_AMDGPU_XCD_REMAP_DEFAULT);
  int latches = 0, ids = 0, want = atoi(n_text);
  for (const char *q = ir; (q = strstr(q, ", !llvm.loop !")); q++) latches++;
  for (const char *q = ir; (q = strstr(q, "!{!\"llvm.loop.unroll.disable\"}")); q++) ids++;
  printf("%s: %d rolled loop(s)\n", path, latches);
  CHECK(latches == want);
  CHECK(ids == (want > 0)); /* one metadata node for the flag, shared by the loop ids */
  free(ir);
  drk_tile_module_destroy(tm);
  return check_status("test_amdgpu");
}

int main(int argc, char **argv) {
  if (argc == 4 && strcmp(argv[1], "xcd") == 0) return mode_xcd(argv[2], argv[3]);
  if (argc == 4 && strcmp(argv[1], "rolled") == 0) return mode_rolled(argv[2], argv[3]);
  if (argc == 4 && strcmp(argv[1], "lower") == 0) return mode_lower(argv[2], argv[3]);
  if (argc == 4 && strcmp(argv[1], "lower-spills-ok") == 0) {
    allow_spills = true;
    return mode_lower(argv[2], argv[3]);
  }
  if (argc == 4 && strcmp(argv[1], "lower-error") == 0) return mode_lower_error(argv[2], argv[3]);
  if (argc == 3 && strcmp(argv[1], "build") == 0) return mode_build(argv[2]);
  if (argc == 4 && strcmp(argv[1], "readbundle") == 0) return mode_readbundle(argv[2], argv[3]);
  fprintf(stderr, "usage: test_amdgpu build OUTDIR | readbundle BUNDLE HSACO\n");
  return 2;
}
