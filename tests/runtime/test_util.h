/* Shared by the runtime tests: a hand-written vector-add/scale PTX (no tools needed), a
 * small module built around it, and the checks (tests/common/check.h). Header-only; each
 * test includes it once. */
#ifndef DRK_TEST_RUNTIME_UTIL_H
#define DRK_TEST_RUNTIME_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/package/fatbin.h"
#include "backends/package/module.h"
#include "tests/common/check.h"

/* vadd(a, b, c, n): c = a + b; vscale(x, y, s, n): y = x * s. f32, one element per thread. */
static const char *const test_ptx_body =
    ".visible .entry vadd(.param .u64 pa, .param .u64 pb, .param .u64 pc, .param .u32 pn)\n"
    "{\n"
    "  .reg .pred %p<2>;\n  .reg .b32 %r<6>;\n  .reg .f32 %f<4>;\n  .reg .b64 %rd<12>;\n"
    "  ld.param.u64 %rd1, [pa];\n  ld.param.u64 %rd2, [pb];\n  ld.param.u64 %rd3, [pc];\n"
    "  ld.param.u32 %r1, [pn];\n"
    "  mov.u32 %r2, %ctaid.x;\n  mov.u32 %r3, %ntid.x;\n  mov.u32 %r4, %tid.x;\n"
    "  mad.lo.s32 %r5, %r2, %r3, %r4;\n"
    "  setp.ge.s32 %p1, %r5, %r1;\n  @%p1 bra DONE;\n"
    "  mul.wide.s32 %rd4, %r5, 4;\n"
    "  cvta.to.global.u64 %rd5, %rd1;\n  add.s64 %rd6, %rd5, %rd4;\n  ld.global.f32 %f1, [%rd6];\n"
    "  cvta.to.global.u64 %rd7, %rd2;\n  add.s64 %rd8, %rd7, %rd4;\n  ld.global.f32 %f2, [%rd8];\n"
    "  add.f32 %f3, %f1, %f2;\n"
    "  cvta.to.global.u64 %rd9, %rd3;\n  add.s64 %rd10, %rd9, %rd4;\n  st.global.f32 [%rd10], %f3;\n"
    "DONE:\n  ret;\n}\n"
    ".visible .entry vscale(.param .u64 px, .param .u64 py, .param .f32 ps, .param .u32 pn)\n"
    "{\n"
    "  .reg .pred %p<2>;\n  .reg .b32 %r<6>;\n  .reg .f32 %f<4>;\n  .reg .b64 %rd<10>;\n"
    "  ld.param.u64 %rd1, [px];\n  ld.param.u64 %rd2, [py];\n  ld.param.f32 %f1, [ps];\n"
    "  ld.param.u32 %r1, [pn];\n"
    "  mov.u32 %r2, %ctaid.x;\n  mov.u32 %r3, %ntid.x;\n  mov.u32 %r4, %tid.x;\n"
    "  mad.lo.s32 %r5, %r2, %r3, %r4;\n"
    "  setp.ge.s32 %p1, %r5, %r1;\n  @%p1 bra DONE2;\n"
    "  mul.wide.s32 %rd3, %r5, 4;\n"
    "  cvta.to.global.u64 %rd4, %rd1;\n  add.s64 %rd5, %rd4, %rd3;\n  ld.global.f32 %f2, [%rd5];\n"
    "  mul.f32 %f3, %f2, %f1;\n"
    "  cvta.to.global.u64 %rd6, %rd2;\n  add.s64 %rd7, %rd6, %rd3;\n  st.global.f32 [%rd7], %f3;\n"
    "DONE2:\n  ret;\n}\n";

/* PTX text for `target` ("sm_80", "sm_90a"); version 7.4 works from sm_87, 8.0 for sm_90a. */
static inline char *test_ptx(const char *target, const char *version) {
  size_t n = strlen(test_ptx_body) + 128;
  char *p = malloc(n);
  snprintf(p, n, "//\n// drkc runtime test kernel\n//\n.version %s\n.target %s\n.address_size 64\n\n%s", version, target, test_ptx_body);
  return p;
}

/* The test module: out = (in + w) * scale with n floats; w is a weight.
 * Arena: [0, 256) unused, weights at 256, in, tmp, out follow (256-aligned). */
typedef struct test_module {
  drk_modfile_t m;
  drk_modfile_kernel_t k[2];
  drk_modfile_param_t p[2][4];
  drk_modfile_tensor_t in, out;
  drk_modfile_weight_t w;
  drk_modfile_image_t img;
  drk_modfile_tma_t tma;
  float *weights;
  void *fatbin;
  char *ptx;
} test_module_t;

#define TEST_N 1000u
#define TEST_SCALE 2.5f

static inline size_t test_align(size_t x) { return (x + 255) & ~(size_t)255; }

/* Builds the description around a fat binary holding PTX (JIT-able on sm_80 and newer). */
static inline void test_module_init(test_module_t *t, unsigned cluster_x, unsigned dyn_smem) {
  memset(t, 0, sizeof *t);
  size_t bytes = TEST_N * 4, wofs = 256, in = test_align(wofs + bytes), tmp = test_align(in + bytes), out = test_align(tmp + bytes);
  t->weights = malloc(bytes);
  for (unsigned i = 0; i < TEST_N; i++) t->weights[i] = (float)i * 0.5f;
  t->ptx = test_ptx("sm_80", "7.0");
  drk_fatbin_image_t fi = {DRK_FATBIN_PTX, 80, false, false, t->ptx, strlen(t->ptx)};
  size_t fsize = 0;
  char err[256];
  if (drk_fatbin_build(&fi, 1, &t->fatbin, &fsize, err, sizeof err)) { fprintf(stderr, "fatbin: %s\n", err); exit(1); }
  t->img = (drk_modfile_image_t){DRK_MODFILE_IMAGE_FATBIN, 0, "compute_80", t->fatbin, fsize};
  uint32_t n = TEST_N, grid = (TEST_N + 127) / 128;
  if (cluster_x && grid % cluster_x) grid += cluster_x - grid % cluster_x;
  t->p[0][0] = (drk_modfile_param_t){DRK_MODFILE_PARAM_BUFFER, in, bytes, 0, {0}, 0};
  t->p[0][1] = (drk_modfile_param_t){DRK_MODFILE_PARAM_BUFFER, wofs, bytes, 0, {0}, 0};
  t->p[0][2] = (drk_modfile_param_t){DRK_MODFILE_PARAM_BUFFER, tmp, bytes, 0, {0}, 0};
  t->p[0][3] = (drk_modfile_param_t){DRK_MODFILE_PARAM_SCALAR, 0, 0, 4, {0}, 0};
  memcpy(t->p[0][3].scalar, &n, 4);
  float s = TEST_SCALE;
  t->p[1][0] = (drk_modfile_param_t){DRK_MODFILE_PARAM_BUFFER, tmp, bytes, 0, {0}, 0};
  t->p[1][1] = (drk_modfile_param_t){DRK_MODFILE_PARAM_BUFFER, out, bytes, 0, {0}, 0};
  t->p[1][2] = (drk_modfile_param_t){DRK_MODFILE_PARAM_SCALAR, 0, 0, 4, {0}, 0};
  memcpy(t->p[1][2].scalar, &s, 4);
  t->p[1][3] = t->p[0][3];
  t->k[0] = (drk_modfile_kernel_t){"vadd", 0, {grid, 1, 1}, {128, 1, 1}, {cluster_x, cluster_x ? 1 : 0, cluster_x ? 1 : 0}, 0, t->p[0], 4};
  t->k[1] = (drk_modfile_kernel_t){"vscale", 0, {grid, 1, 1}, {128, 1, 1}, {0, 0, 0}, dyn_smem, t->p[1], 4};
  t->in = (drk_modfile_tensor_t){"x", 1, 2, {1, TEST_N}, in, bytes};
  t->out = (drk_modfile_tensor_t){"y", 1, 2, {1, TEST_N}, out, bytes};
  t->w = (drk_modfile_weight_t){"w", 0, bytes, NULL, 0};
  t->tma = (drk_modfile_tma_t){7, 2, in, {100, 10}, {400}, {32, 2}, {1, 1}, 0, 1, 2, 0};
  drk_modfile_t *m = &t->m;
  m->prov = (drk_modfile_provenance_t){"0.1.0", "drkc test.onnx --target=sm_80", "sha256:00", "compute_80"};
  m->arena_size = out + bytes;
  m->weights_offset = wofs;
  m->weights = t->weights;
  m->weights_size = bytes;
  m->weight_entries = &t->w, m->n_weight_entries = 1;
  m->kernels = t->k, m->n_kernels = 2;
  m->inputs = &t->in, m->n_inputs = 1;
  m->outputs = &t->out, m->n_outputs = 1;
  m->images = &t->img, m->n_images = 1;
}

static inline void test_module_fini(test_module_t *t) {
  free(t->weights);
  free(t->fatbin);
  free(t->ptx);
}

#endif
