/* The first speed bar (issue: NVIDIA end to end), measured side by side in one process:
 *   - bf16 and f16 matmul 4096x4096x4096 compiled by drkc vs cuBLAS (cublasGemmEx, loaded with
 *     dlopen), as a ratio of achieved TFLOP/s;
 *   - an elementwise Add over 2^28 bf16 elements compiled by drkc vs the device-to-device copy
 *     bandwidth (cuMemcpyDtoD), as a ratio of achieved GB/s (bytes read + written).
 * Each drkc kernel's output is checked against cuBLAS (matmul) or the host (add) before it is
 * timed. Times are medians of many runs after warm-up, taken with CUDA events around each
 * kernel (the runtime's profiling mode), so host<->device copies are not counted.
 *
 * The kernels come as modules compiled by drkc (tests/gpu/run.sh makes them from the .drkg
 * files beside this program), so this program needs only libdrkrt:
 *   DIR/add_bf16.drkm      Add of two bf16 vectors
 *   DIR/matmul_bf16.drkm   MatMul of two square bf16 matrices
 *   DIR/matmul_f16.drkm    the same in f16
 *   DIR/matmul_{bf16,f16}_mma.drkm  (optional) the same graphs compiled with --target=sm_90:
 *                          the mma.sync kernel, measured on a Hopper GPU too
 *   DIR/mm_{bf16,f16}_*.drkm  (optional) a shape sweep: any MatMul A[M,K]·B[K,N], each timed
 *                          against cuBLAS on its own shape (tests/bench/mm_shapes.sh makes them:
 *                          the matmuls of the generated models under several schedules)
 *
 * usage: bench_kernels DIR [RESULTS.md]   (exit 77 without a GPU) */
#include <dirent.h>
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "drk/drkrt.h"
#include "ir/tensor.h"

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef void *CUevent;
static CUresult (*cuInit)(unsigned);
static CUresult (*cuDeviceGet)(int *, int);
static CUresult (*cuDevicePrimaryCtxRetain)(void **, int);
static CUresult (*cuCtxSetCurrent)(void *);
static CUresult (*cuMemAlloc)(CUdeviceptr *, size_t);
static CUresult (*cuMemFree)(CUdeviceptr);
static CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void *, size_t);
static CUresult (*cuMemcpyDtoH)(void *, CUdeviceptr, size_t);
static CUresult (*cuMemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, void *);
static CUresult (*cuEventCreate)(CUevent *, unsigned);
static CUresult (*cuEventRecord)(CUevent, void *);
static CUresult (*cuEventSynchronize)(CUevent);
static CUresult (*cuEventElapsedTime)(float *, CUevent, CUevent);
static CUresult (*cuCtxSynchronize)(void);

static int (*cublasCreate)(void **);
static int (*cublasDestroy)(void *);
static int (*cublasGemmEx)(void *, int, int, int, int, int, const void *, const void *, int, int, const void *,
                           int, int, const void *, void *, int, int, int, int);

#define CK(x)                                                        \
  do {                                                               \
    CUresult r_ = (x);                                               \
    if (r_) {                                                        \
      fprintf(stderr, "bench: %s failed: CUresult %d\n", #x, r_);    \
      exit(1);                                                       \
    }                                                                \
  } while (0)

static void *sym(void *lib, const char *name) {
  void *p = dlsym(lib, name);
  if (!p) {
    fprintf(stderr, "bench: missing symbol %s\n", name);
    exit(1);
  }
  return p;
}

static int cmp_float(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return x < y ? -1 : x > y;
}

static float median(float *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_float);
  return v[n / 2];
}

static double copy_bandwidth(size_t bytes, int iters) {
  CUdeviceptr a, b;
  CK(cuMemAlloc(&a, bytes));
  CK(cuMemAlloc(&b, bytes));
  CUevent e0, e1;
  CK(cuEventCreate(&e0, 0));
  CK(cuEventCreate(&e1, 0));
  float *t = calloc((size_t)iters, sizeof *t);
  for (int i = -3; i < iters; i++) {
    CK(cuEventRecord(e0, NULL));
    CK(cuMemcpyDtoDAsync(b, a, bytes, NULL));
    CK(cuEventRecord(e1, NULL));
    CK(cuEventSynchronize(e1));
    if (i >= 0) CK(cuEventElapsedTime(&t[i], e0, e1));
  }
  double gbs = 2.0 * (double)bytes / (median(t, iters) * 1e-3) / 1e9;
  free(t);
  CK(cuMemFree(a));
  CK(cuMemFree(b));
  return gbs;
}

/* cuBLAS C[M,N] = A[M,K]·B[K,N], row-major bf16/f16 with f32 accumulation; returns median ms.
 * bt: B is stored transposed, [N,K] (a PyTorch Linear's weight: the TN problem cuBLAS's fastest
 * kernels are tuned for), else [K,N] like the module's input. */
static float cublas_gemm(void *h, int cuda_type, int M, int N, int K, CUdeviceptr A, CUdeviceptr B, CUdeviceptr C,
                         int iters, bool bt) {
  float alpha = 1, beta = 0;
  CUevent e0, e1;
  CK(cuEventCreate(&e0, 0));
  CK(cuEventCreate(&e1, 0));
  float *t = calloc((size_t)iters, sizeof *t);
  for (int i = -3; i < iters; i++) {
    CK(cuEventRecord(e0, NULL));
    /* Row-major C = A B is column-major Cᵀ = Bᵀ Aᵀ. CUBLAS_COMPUTE_32F = 68, default algo -1. */
    int st = cublasGemmEx(h, bt ? 1 : 0, 0, N, M, K, &alpha, (void *)B, cuda_type, bt ? K : N, (void *)A, cuda_type, K, &beta,
                          (void *)C, cuda_type, N, 68, -1);
    if (st) {
      fprintf(stderr, "bench: cublasGemmEx failed: %d\n", st);
      exit(1);
    }
    CK(cuEventRecord(e1, NULL));
    CK(cuEventSynchronize(e1));
    if (i >= 0) CK(cuEventElapsedTime(&t[i], e0, e1));
  }
  float m = median(t, iters);
  free(t);
  return m;
}

typedef struct compiled {
  drk_module_t *m;
  drk_session_t *s;
} compiled_t;

static bool load(const char *dir, const char *name, drk_runtime_t *rt, compiled_t *c) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  drk_status_t st = drk_module_load_file(NULL, path, &c->m);
  if (!st) st = drk_session_create(rt, c->m, &c->s);
  if (!st) st = drk_session_set_profiling(c->s, 1);
  if (st) {
    fprintf(stderr, "bench: %s: %s\n", path, drk_status_message(st));
    drk_status_destroy(st);
    return false;
  }
  return true;
}

/* Binds host buffers to the two inputs and the output of a benchmark module. */
static void bind2(compiled_t *c, void *x0, size_t n0, void *x1, size_t n1, void *y, size_t ny) {
  drk_session_bind_input(c->s, 0, x0, n0, DRK_MEMORY_HOST);
  drk_session_bind_input(c->s, 1, x1, n1, DRK_MEMORY_HOST);
  drk_session_bind_output(c->s, 0, y, ny, DRK_MEMORY_HOST);
}

static void unload(compiled_t *c) {
  drk_session_destroy(c->s);
  drk_module_destroy(c->m);
}

static int64_t input_dim(const compiled_t *c, int input, int which) {
  drk_tensor_info_t ti;
  drk_status_t st = drk_module_input_info(c->m, (size_t)input, &ti);
  if (st || (uint32_t)which >= ti.rank) {
    drk_status_destroy(st);
    return -1;
  }
  return ti.dims[which];
}

/* Median of the first kernel's time over iters profiled runs (after warm-up). */
static float time_kernel(compiled_t *c, int iters) {
  float *t = calloc((size_t)iters, sizeof *t);
  for (int i = -2; i < iters; i++) {
    drk_status_t st = drk_session_run(c->s);
    if (st) {
      fprintf(stderr, "bench: run: %s\n", drk_status_message(st));
      exit(1);
    }
    float k[16];
    size_t nk = drk_module_num_kernels(c->m);
    if (nk > 16) nk = 16;
    st = drk_session_kernel_times(c->s, k, drk_module_num_kernels(c->m));
    if (st) {
      fprintf(stderr, "bench: kernel times: %s\n", drk_status_message(st));
      exit(1);
    }
    float sum = 0;
    for (size_t j = 0; j < nk; j++) sum += k[j];
    if (i >= 0) t[i] = sum;
  }
  float m = median(t, iters);
  free(t);
  return m;
}

static void fill_random(uint16_t *p, size_t n, bool bf16, uint64_t seed) {
  for (size_t i = 0; i < n; i++) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    float v = (float)((seed >> 40) & 0xffff) / 32768.0f - 1.0f;
    p[i] = bf16 ? drk_f32_to_bf16(v) : drk_f32_to_f16(v);
  }
}

static float h2f(uint16_t v, bool bf16) { return bf16 ? drk_bf16_to_f32(v) : drk_f16_to_f32(v); }

/* Times module `file` (one MatMul A[M,K]·B[K,N], 16-bit) against cuBLAS on the same inputs,
 * after checking its result against cuBLAS's; appends a row to report. `bar`: NULL for the
 * speed bar (>= 0.50 of cuBLAS), else the text of an information row. Returns 1 on a
 * failure (wrong results, or the module does not load). */
static int bench_mm(void *h, drk_runtime_t *rt, const char *dir, const char *file, bool bf16, const char *what,
                    const char *bar, int iters, char *report, int *rl, size_t cap) {
  compiled_t c = {0};
  if (!load(dir, file, rt, &c)) return 1;
  int M = (int)input_dim(&c, 0, 0), K = (int)input_dim(&c, 0, 1), N = (int)input_dim(&c, 1, 1);
  size_t ea = (size_t)M * K, eb = (size_t)K * N, ec = (size_t)M * N;
  uint16_t *a = malloc(ea * 2), *b = malloc(eb * 2), *z = malloc(ec * 2), *ref = malloc(ec * 2);
  fill_random(a, ea, bf16, 3);
  fill_random(b, eb, bf16, 4);
  memset(z, 0xff, ec * 2);
  bind2(&c, a, ea * 2, b, eb * 2, z, ec * 2);
  float ms = time_kernel(&c, iters);
  CUdeviceptr A, B, C;
  CK(cuMemAlloc(&A, ea * 2));
  CK(cuMemAlloc(&B, eb * 2));
  CK(cuMemAlloc(&C, ec * 2));
  CK(cuMemcpyHtoD(A, a, ea * 2));
  CK(cuMemcpyHtoD(B, b, eb * 2));
  float ms_ref = cublas_gemm(h, bf16 ? 14 : 2, M, N, K, A, B, C, iters, false);
  CK(cuMemcpyDtoH(ref, C, ec * 2));
  float ms_tn = cublas_gemm(h, bf16 ? 14 : 2, M, N, K, A, B, C, iters, true); /* time only */
  double num = 0, den = 0;
  for (size_t i = 0; i < ec; i++) {
    double x = h2f(z[i], bf16), y = h2f(ref[i], bf16);
    num += (x - y) * (x - y);
    den += y * y;
  }
  double err = den > 0 ? sqrt(num / den) : INFINITY;
  bool ok = err <= 1e-2; /* NaN fails too */
  double flops = 2.0 * M * (double)N * K;
  double tf = flops / (ms * 1e-3) / 1e12, tf_ref = flops / (ms_ref * 1e-3) / 1e12;
  const char *ty = bf16 ? "bf16" : "f16";
  printf("matmul %s %dx%dx%d%s: drkc %.4f ms %.0f TFLOP/s, cuBLAS %.4f ms %.0f TFLOP/s, ratio %.2f, rel err vs cuBLAS %.2g; "
         "cuBLAS with B stored [N,K] %.4f ms, ratio %.2f\n",
         ty, M, N, K, what, ms, tf, ms_ref, tf_ref, tf / tf_ref, err, ms_tn, ms_tn / ms);
  *rl += snprintf(report + *rl, cap - (size_t)*rl, "| MatMul %s %dx%dx%d%s | %.0f TFLOP/s (%.1f us) | cuBLAS %.0f TFLOP/s (%.1f us) | %.2f | %s%s |\n",
                  ty, M, N, K, what, tf, ms * 1e3, tf_ref, ms_ref * 1e3, tf / tf_ref, bar ? bar : ">= 0.50 ",
                  !ok ? " (WRONG RESULTS)" : bar ? "" : tf / tf_ref >= 0.5 ? "met" : "NOT met");
  CK(cuMemFree(A));
  CK(cuMemFree(B));
  CK(cuMemFree(C));
  free(a);
  free(b);
  free(z);
  free(ref);
  unload(&c);
  return !ok;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: bench_kernels DIR [RESULTS.md]\n");
    return 2;
  }
  const char *dir = argv[1], *results = argc > 2 ? argv[2] : NULL;
  void *cu = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (!cu) {
    printf("SKIP: no CUDA driver (%s)\n", dlerror());
    return 77;
  }
  void *blas = NULL;
  const char *blas_names[] = {"libcublas.so", "libcublas.so.13", "libcublas.so.12", NULL};
  for (const char **n = blas_names; *n && !blas; n++) blas = dlopen(*n, RTLD_NOW | RTLD_GLOBAL);
  if (!blas) {
    fprintf(stderr, "bench: cuBLAS not found (%s)\n", dlerror());
    return 1;
  }
  cuInit = sym(cu, "cuInit");
  cuDeviceGet = sym(cu, "cuDeviceGet");
  cuDevicePrimaryCtxRetain = sym(cu, "cuDevicePrimaryCtxRetain");
  cuCtxSetCurrent = sym(cu, "cuCtxSetCurrent");
  cuMemAlloc = sym(cu, "cuMemAlloc_v2");
  cuMemFree = sym(cu, "cuMemFree_v2");
  cuMemcpyHtoD = sym(cu, "cuMemcpyHtoD_v2");
  cuMemcpyDtoH = sym(cu, "cuMemcpyDtoH_v2");
  cuMemcpyDtoDAsync = sym(cu, "cuMemcpyDtoDAsync_v2");
  cuEventCreate = sym(cu, "cuEventCreate");
  cuEventRecord = sym(cu, "cuEventRecord");
  cuEventSynchronize = sym(cu, "cuEventSynchronize");
  cuEventElapsedTime = sym(cu, "cuEventElapsedTime_v2");
  cuCtxSynchronize = sym(cu, "cuCtxSynchronize");
  cublasCreate = sym(blas, "cublasCreate_v2");
  cublasDestroy = sym(blas, "cublasDestroy_v2");
  cublasGemmEx = sym(blas, "cublasGemmEx");

  drk_runtime_t *rt;
  drk_runtime_options_t ro = {0};
  drk_status_t st = drk_runtime_create(&ro, &rt);
  if (st) {
    printf("SKIP: %s\n", drk_status_message(st));
    return 77;
  }
  int dev;
  void *ctx;
  CK(cuInit(0));
  CK(cuDeviceGet(&dev, 0));
  CK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CK(cuCtxSetCurrent(ctx));
  void *h;
  if (cublasCreate(&h)) {
    fprintf(stderr, "bench: cublasCreate failed\n");
    return 1;
  }
  int iters = 30;
  static char report[65536];
  int rl = 0, failures = 0;
  time_t now = time(NULL);
  char date[64];
  strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", gmtime(&now));
  rl += snprintf(report + rl, sizeof report - (size_t)rl,
                 "# drkc kernel benchmarks\n\n%s, %s, one process; medians of %d runs after warm-up.\n\n"
                 "| kernel | drkc | reference | ratio | bar |\n|---|---|---|---|---|\n",
                 date, drk_runtime_device_name(rt), iters);

  /* ---- copy bandwidth and elementwise add ---- */
  compiled_t c = {0};
  if (!load(dir, "add_bf16.drkm", rt, &c)) return 1;
  size_t n_add = (size_t)input_dim(&c, 0, 0);
  double bw = copy_bandwidth(n_add * 2, iters);
  {
    uint16_t *x = malloc(n_add * 2), *y = malloc(n_add * 2), *z = malloc(n_add * 2);
    fill_random(x, n_add, true, 1);
    fill_random(y, n_add, true, 2);
    memset(z, 0xff, n_add * 2);
    bind2(&c, x, n_add * 2, y, n_add * 2, z, n_add * 2);
    float ms = time_kernel(&c, iters);
    size_t bad = 0;
    for (size_t i = 0; i < n_add; i++) {
      float want = drk_bf16_to_f32(drk_f32_to_bf16(drk_bf16_to_f32(x[i]) + drk_bf16_to_f32(y[i])));
      if (drk_bf16_to_f32(z[i]) != want) bad++;
    }
    double gbs = 3.0 * (double)n_add * 2 / (ms * 1e-3) / 1e9;
    double ratio = gbs / bw;
    printf("add bf16 n=%zu: %.3f ms, %.0f GB/s; copy %.0f GB/s; ratio %.2f; %zu wrong elements\n", n_add, ms, gbs,
           bw, ratio, bad);
    failures += bad != 0;
    rl += snprintf(report + rl, sizeof report - (size_t)rl,
                   "| Add bf16, %zu elements | %.0f GB/s | D2D copy %.0f GB/s | %.2f | >= 0.80 %s |\n", n_add, gbs, bw,
                   ratio, bad ? "(WRONG RESULTS)" : ratio >= 0.8 ? "met" : "NOT met");
    free(x);
    free(y);
    free(z);
    unload(&c);
  }

  /* ---- matmuls: the modules for the benchmark's target, then (when present) the same
   * graphs compiled for sm_90, which run the mma.sync kernel (cp.async ring, ldmatrix) on
   * a Hopper GPU instead of the wgmma one, then the shape sweep DIR/mm_*.drkm ---- */
  static const char *const mm_files[] = {"matmul_bf16.drkm", "matmul_f16.drkm", "matmul_bf16_mma.drkm",
                                         "matmul_f16_mma.drkm"};
  for (int pass = 0; pass < 4; pass++) {
    bool mma = pass >= 2;
    char probe[4096];
    snprintf(probe, sizeof probe, "%s/%s", dir, mm_files[pass]);
    FILE *pf = mma ? fopen(probe, "rb") : NULL;
    if (mma && !pf) continue;
    if (pf) fclose(pf);
    failures += bench_mm(h, rt, dir, mm_files[pass], pass % 2 == 0, mma ? ", mma.sync kernel" : "",
                         mma ? "information (the sm_80-class kernel on Hopper, without wgmma)" : NULL, iters, report,
                         &rl, sizeof report);
  }
  struct dirent **ents;
  int ne = scandir(dir, &ents, NULL, alphasort);
  for (int i = 0; i < ne; i++) {
    const char *f = ents[i]->d_name;
    size_t fl = strlen(f);
    if (strncmp(f, "mm_", 3) == 0 && fl > 8 && strcmp(f + fl - 5, ".drkm") == 0) {
      char label[256];
      snprintf(label, sizeof label, " (%.*s)", (int)(fl - 8), f + 3);
      failures += bench_mm(h, rt, dir, f, strncmp(f, "mm_bf16", 7) == 0, label, "information (shape sweep)", iters,
                           report, &rl, sizeof report);
    }
    free(ents[i]);
  }
  if (ne > 0) free(ents);
  cublasDestroy(h);
  drk_runtime_destroy(rt);
  fputs(report, stdout);
  if (results) {
    FILE *f = fopen(results, "w");
    if (f) {
      fputs(report, f);
      fclose(f);
    }
  }
  return failures ? 1 : 0;
}
