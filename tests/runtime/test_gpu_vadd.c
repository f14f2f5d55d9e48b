/* On a GPU: a module with two kernels (vadd with a weight operand, then vscale with a
 * scalar and > 48 KiB dynamic shared memory; vadd as a cluster launch on sm_90+) runs
 * through the captured CUDA graph, is replayed with new inputs, bound with host and device
 * memory, and profiled per kernel. The PTX is written by hand here (sm_80, JIT-compiled for
 * the device), so the test needs no tools. Exit 77 when there is no driver or device. */
#include "tests/runtime/test_util.h"

#include <math.h>

#include "drk/drkrt.h"

static int check_out(const float *in, const float *w, const float *out, const char *what) {
  int bad = 0;
  for (unsigned i = 0; i < TEST_N; i++) {
    float want = (in[i] + w[i]) * TEST_SCALE;
    if (!(fabsf(out[i] - want) <= 1e-5f * fabsf(want) + 1e-6f)) {
      if (bad++ < 5) fprintf(stderr, "%s: out[%u] = %g, want %g\n", what, i, out[i], want);
    }
  }
  return bad == 0;
}

#define OK(expr)                                                                                  \
  do {                                                                                            \
    drk_status_t st_ = (expr);                                                                    \
    if (st_) {                                                                                    \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr, drk_status_message(st_));    \
      drk_status_destroy(st_);                                                                    \
      return 1;                                                                                   \
    }                                                                                             \
  } while (0)

/* Runs the module with another fat binary (e.g. test_fatbin's sm_90a/sm_87 cubins + PTX) to
 * exercise the cubin path; skipped when the file is absent. */
static int run_with_fatbin(drk_runtime_t *rt, const char *path, unsigned sm) {
  FILE *f = fopen(path, "rb");
  if (!f) { printf("note: %s absent, cubin path not exercised\n", path); return 0; }
  static unsigned char fb[1 << 20];
  size_t n = fread(fb, 1, sizeof fb, f);
  fclose(f);
  test_module_t t;
  test_module_init(&t, sm >= 90 ? 2 : 0, 0);
  t.img.data = fb, t.img.size = n, t.img.targets = "sm_90a,compute_90a,sm_87";
  void *bytes = NULL;
  size_t nb = 0;
  char err[256];
  if (drk_modfile_write(&t.m, &bytes, &nb, err, sizeof err)) { fprintf(stderr, "write: %s\n", err); return 1; }
  drk_module_t *m = NULL;
  drk_session_t *s = NULL;
  OK(drk_module_load_memory(NULL, bytes, nb, &m));
  drk_status_t st = drk_session_create(rt, m, &s);
  if (st && sm != 90 && sm != 87) {
    printf("cubin fat binary on sm_%u: %s (expected: only sm_90a/sm_87 code)\n", sm, drk_status_message(st));
    drk_status_destroy(st);
  } else {
    OK(st);
    float in[TEST_N], out[TEST_N];
    for (unsigned i = 0; i < TEST_N; i++) in[i] = (float)i, out[i] = NAN;
    OK(drk_session_bind_input(s, 0, in, sizeof in, DRK_MEMORY_HOST));
    OK(drk_session_bind_output(s, 0, out, sizeof out, DRK_MEMORY_HOST));
    OK(drk_session_run(s));
    CHECK(check_out(in, t.weights, out, "cubin fat binary"));
    printf("cubin fat binary %s: ran\n", path);
  }
  drk_session_destroy(s);
  drk_module_destroy(m);
  free(bytes);
  test_module_fini(&t);
  return 0;
}

int main(int argc, char **argv) {
  drk_runtime_t *rt = NULL;
  /* CUDA only: the kernels are PTX (on an AMD GPU, DRK_DRIVER_AUTO would pick HIP). */
  drk_runtime_options_t o = {NULL, 0, NULL};
  drk_status_t st = drk_runtime_create_driver(&o, DRK_DRIVER_CUDA, NULL, &rt);
  if (st && (drk_status_code(st) == DRK_STATUS_NO_DRIVER || drk_status_code(st) == DRK_STATUS_NO_DEVICE)) {
    printf("SKIP: no GPU: %s\n", drk_status_message(st));
    drk_status_destroy(st);
    return 77;
  }
  OK(st);
  unsigned sm = drk_runtime_device_sm(rt);
  printf("device: %s\n", drk_runtime_device_name(rt));
  test_module_t t;
  test_module_init(&t, sm >= 90 ? 2 : 0, 64 * 1024);
  void *bytes = NULL;
  size_t n = 0;
  char err[512];
  if (drk_modfile_write(&t.m, &bytes, &n, err, sizeof err)) { fprintf(stderr, "write: %s\n", err); return 1; }
  drk_module_t *m = NULL;
  OK(drk_module_load_memory(NULL, bytes, n, &m));
  drk_session_t *s = NULL;
  OK(drk_session_create(rt, m, &s));
  float in[TEST_N], out[TEST_N];
  for (unsigned i = 0; i < TEST_N; i++) in[i] = (float)((i * 37) % 101) - 50.0f;
  for (unsigned i = 0; i < TEST_N; i++) out[i] = NAN; /* poison */
  OK(drk_session_bind_input(s, 0, in, sizeof in, DRK_MEMORY_HOST));
  OK(drk_session_bind_output(s, 0, out, sizeof out, DRK_MEMORY_HOST));
  st = drk_session_bind_input(s, 0, in, 3, DRK_MEMORY_HOST);
  CHECK(drk_status_code(st) == DRK_STATUS_INVALID_ARGUMENT);
  drk_status_destroy(st);
  OK(drk_session_run(s));
  CHECK(check_out(in, t.weights, out, "first run"));
  /* replay with new inputs */
  for (unsigned i = 0; i < TEST_N; i++) in[i] = 0.25f * (float)i, out[i] = NAN;
  OK(drk_session_run(s));
  CHECK(check_out(in, t.weights, out, "replay"));
  float ms = -1;
  OK(drk_session_last_run_ms(s, &ms));
  CHECK(ms > 0);
  /* profiled: kernels one by one, per-kernel times */
  OK(drk_session_set_profiling(s, 1));
  for (unsigned i = 0; i < TEST_N; i++) in[i] = -1.0f * (float)i, out[i] = NAN;
  OK(drk_session_run(s));
  CHECK(check_out(in, t.weights, out, "profiled"));
  float kt[2] = {-1, -1};
  OK(drk_session_kernel_times(s, kt, 2));
  CHECK(kt[0] > 0 && kt[1] > 0);
  printf("run %.4f ms; vadd %.4f ms, vscale %.4f ms\n", ms, kt[0], kt[1]);
  drk_session_destroy(s);
  drk_module_destroy(m);

  /* a module with code only for an absent arch: a clear error naming both */
  char *ptx = test_ptx("sm_100a", "8.6");
  drk_fatbin_image_t fi = {DRK_FATBIN_PTX, sm == 100 ? 120 : 100, true, false, ptx, strlen(ptx)};
  void *fb = NULL;
  size_t fbn = 0;
  CHECK(drk_fatbin_build(&fi, 1, &fb, &fbn, err, sizeof err) == 0);
  t.img.data = fb, t.img.size = fbn;
  void *b2 = NULL;
  size_t n2 = 0;
  CHECK(drk_modfile_write(&t.m, &b2, &n2, err, sizeof err) == 0);
  OK(drk_module_load_memory(NULL, b2, n2, &m));
  st = drk_session_create(rt, m, &s);
  CHECK(drk_status_code(st) == DRK_STATUS_NO_IMAGE);
  printf("expected error: %s\n", drk_status_message(st));
  CHECK_CONTAINS(drk_status_message(st), "PTX");
  char devarch[32];
  snprintf(devarch, sizeof devarch, "device is sm_%u", sm);
  CHECK_CONTAINS(drk_status_message(st), devarch);
  drk_status_destroy(st);
  drk_module_destroy(m);
  free(b2), free(fb), free(ptx), free(bytes);
  test_module_fini(&t);
  if (argc > 1 && run_with_fatbin(rt, argv[1], sm)) return 1;
  drk_runtime_destroy(rt);
  if (!failures) printf("test_gpu_vadd: ok\n");
  return check_status("test_gpu_vadd");
}
