/* Interpreter: the f64 GEMM under MatMul, Gemm, Conv and ConvTranspose.
 *
 * GotoBLAS-shaped: C is cut into tiles (one task of the worker pool each); a task walks K in
 * blocks of KC, packs its A rows into MR-row panels and its B columns into NR-column panels
 * (zero-padded at the edges), and runs an MR x NR register-blocked micro-kernel over them.
 *
 * The numbers: every C[m,n] is a single running sum over k = 0, 1, ..., K-1 in that order,
 * each product rounded to f64 and then added (the files are built with -ffp-contract=off, so
 * no FMA), starting from +0 (or from C when accumulating). The k blocks continue the same
 * sum through C. Neither the tile sizes, nor the SIMD width of the micro-kernel (AVX-512,
 * AVX2 or the baseline, the widest the CPU has, picked at run time; DRK_INTERP_SIMD=avx2 or
 * =generic forces a narrower one for tests), nor the thread count change a bit of the result. */
#include <pthread.h>

#include "interp_internal.h"

#if defined(__GNUC__) && !defined(__clang__)
#define HOT __attribute__((optimize("O3")))
#else
#define HOT
#endif

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define DRK_X86_SIMD 1
#endif

/* KC x NC of B and MC x KC of A are packed at a time; a task's tile is up to MT x NC of C. */
enum { KC = 256, MC = 96, NC = 256, MT = 4 * MC, MAX_MR = 8, MAX_NR = 16 };

typedef void (*kern_fn)(int64_t kc, const double *Ap, const double *Bp, double *C, int64_t ldc, bool zero);

/* C[0..MR) x [0..NR) (row stride ldc) = (zero ? 0 : C) + sum_k Ap[k*MR + r] * Bp[k*NR + s]. */
#define DEF_KERNEL(NAME, ATTR, VT, VL, MR, NV)                                                                 \
  ATTR HOT static void NAME(int64_t kc, const double *restrict Ap, const double *restrict Bp,                 \
                            double *restrict C, int64_t ldc, bool zero) {                                     \
    VT acc[MR][NV];                                                                                            \
    _Pragma("GCC unroll 16") for (int r = 0; r < MR; r++) _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) { \
      if (zero) acc[r][v] = (VT){0};                                                                           \
      else memcpy(&acc[r][v], C + r * ldc + v * VL, sizeof(VT));                                               \
    }                                                                                                          \
    for (int64_t k = 0; k < kc; k++) {                                                                         \
      VT b[NV];                                                                                                \
      _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) memcpy(&b[v], Bp + k * (NV * VL) + v * VL, sizeof(VT)); \
      _Pragma("GCC unroll 16") for (int r = 0; r < MR; r++) {                                                  \
        double a = Ap[k * MR + r];                                                                             \
        _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) {                                                 \
          VT p = b[v] * a;                                                                                     \
          acc[r][v] += p;                                                                                      \
        }                                                                                                      \
      }                                                                                                        \
    }                                                                                                          \
    _Pragma("GCC unroll 16") for (int r = 0; r < MR; r++) _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) \
      memcpy(C + r * ldc + v * VL, &acc[r][v], sizeof(VT));                                                   \
  }

typedef double v2d __attribute__((vector_size(16)));
DEF_KERNEL(kern_generic, , v2d, 2, 4, 2)
#ifdef DRK_X86_SIMD
typedef double v4d __attribute__((vector_size(32)));
typedef double v8d __attribute__((vector_size(64)));
DEF_KERNEL(kern_avx2, __attribute__((target("avx2"))), v4d, 4, 4, 2)
DEF_KERNEL(kern_avx512, __attribute__((target("avx512f"))), v8d, 8, 8, 2)
#endif

static struct {
  kern_fn fn;
  int mr, nr;
  const char *name;
} kern;
static pthread_once_t kern_once = PTHREAD_ONCE_INIT;

static void pick_kernel(void) {
  const char *e = getenv("DRK_INTERP_SIMD");
  kern.fn = kern_generic, kern.mr = 4, kern.nr = 4, kern.name = "generic";
#ifdef DRK_X86_SIMD
  __builtin_cpu_init();
  bool a512 = __builtin_cpu_supports("avx512f"), a2 = __builtin_cpu_supports("avx2");
  if (e && !strcmp(e, "generic")) a512 = a2 = false;
  if (e && !strcmp(e, "avx2")) a512 = false;
  if (a512) kern.fn = kern_avx512, kern.mr = 8, kern.nr = 16, kern.name = "avx512";
  else if (a2) kern.fn = kern_avx2, kern.mr = 4, kern.nr = 8, kern.name = "avx2";
#else
  (void)e;
#endif
}

typedef struct gemm {
  int64_t M, N, K;
  const void *A; /* double, or float when a_f32 */
  int64_t lda_m, lda_k;
  const void *B; /* double, or float when b_f32 */
  int64_t ldb_k, ldb_n;
  double *C;
  int64_t ldc;
  bool accumulate;
  int64_t mc, nc, n_mt, n_nt; /* tile sizes and counts */
  bool a_f32, b_f32;
} gemm_t;

/* Per-thread packing buffers (A: MC x KC, B: KC x NC), kept for the thread's life. */
static _Thread_local double *tls_buf;

/* Packing reads A and B as f64 or f32 (T); f32 -> f64 is exact, so the packed values (and the
 * results) are the same as from an f64 copy of the operand. */
#define DEF_PACK_A(NAME, T)                                                                        \
  HOT static void NAME(const gemm_t *g, int64_t m0, int64_t m1, int64_t k0, int64_t kc, double *Ap) { \
    int mr = kern.mr;                                                                              \
    for (int64_t i = m0; i < m1; i += mr, Ap += mr * kc) {                                         \
      int64_t h = m1 - i < mr ? m1 - i : mr;                                                       \
      for (int64_t r = 0; r < h; r++) {                                                            \
        const T *a = (const T *)g->A + (i + r) * g->lda_m + k0 * g->lda_k;                         \
        if (g->lda_k == 1)                                                                         \
          for (int64_t k = 0; k < kc; k++) Ap[k * mr + r] = a[k];                                  \
        else                                                                                       \
          for (int64_t k = 0; k < kc; k++) Ap[k * mr + r] = a[k * g->lda_k];                       \
      }                                                                                            \
      for (int64_t r = h; r < mr; r++)                                                             \
        for (int64_t k = 0; k < kc; k++) Ap[k * mr + r] = 0;                                       \
    }                                                                                              \
  }
#define DEF_PACK_B(NAME, T)                                                                        \
  HOT static void NAME(const gemm_t *g, int64_t n0, int64_t n1, int64_t k0, int64_t kc, double *Bp) { \
    int nr = kern.nr;                                                                              \
    for (int64_t j = n0; j < n1; j += nr, Bp += nr * kc) {                                         \
      int64_t w = n1 - j < nr ? n1 - j : nr;                                                       \
      for (int64_t k = 0; k < kc; k++) {                                                           \
        const T *b = (const T *)g->B + (k0 + k) * g->ldb_k + j * g->ldb_n;                         \
        double *d = Bp + k * nr;                                                                   \
        if (g->ldb_n == 1 && w == nr)                                                              \
          for (int s = 0; s < nr; s++) d[s] = b[s]; /* inline: a memcpy call per row costs more */ \
        else if (g->ldb_n == 1)                                                                    \
          for (int64_t s = 0; s < w; s++) d[s] = b[s];                                             \
        else                                                                                       \
          for (int64_t s = 0; s < w; s++) d[s] = b[s * g->ldb_n];                                  \
        for (int64_t s = w; s < nr; s++) d[s] = 0;                                                 \
      }                                                                                            \
    }                                                                                              \
  }
DEF_PACK_A(pack_a_f64, double)
DEF_PACK_A(pack_a_f32, float)
DEF_PACK_B(pack_b_f64, double)
DEF_PACK_B(pack_b_f32, float)

static void pack_a(const gemm_t *g, int64_t m0, int64_t m1, int64_t k0, int64_t kc, double *Ap) {
  if (g->a_f32) pack_a_f32(g, m0, m1, k0, kc, Ap);
  else pack_a_f64(g, m0, m1, k0, kc, Ap);
}

static void pack_b(const gemm_t *g, int64_t n0, int64_t n1, int64_t k0, int64_t kc, double *Bp) {
  if (g->b_f32) pack_b_f32(g, n0, n1, k0, kc, Bp);
  else pack_b_f64(g, n0, n1, k0, kc, Bp);
}

/* C[m0..m1) x [n0..n1): per k block, B's columns packed once, then A in MC-row blocks. */
static void gemm_tile(const gemm_t *g, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  if (!tls_buf) {
    tls_buf = aligned_alloc(64, sizeof(double) * (size_t)(MC * KC + KC * NC));
    DRK_ASSERT(tls_buf != NULL);
  }
  double *Ap = tls_buf, *Bp = tls_buf + MC * KC;
  int mr = kern.mr, nr = kern.nr;
  double edge[MAX_MR * MAX_NR];
  for (int64_t k0 = 0; k0 < g->K; k0 += KC) {
    int64_t kc = g->K - k0 < KC ? g->K - k0 : KC;
    bool zero = k0 == 0 && !g->accumulate;
    pack_b(g, n0, n1, k0, kc, Bp);
    for (int64_t ma = m0; ma < m1; ma += MC) {
      int64_t mb = ma + MC < m1 ? ma + MC : m1;
      pack_a(g, ma, mb, k0, kc, Ap);
      for (int64_t j = n0; j < n1; j += nr) {
        const double *bp = Bp + ((j - n0) / nr) * nr * kc;
        int64_t w = n1 - j < nr ? n1 - j : nr;
        for (int64_t i = ma; i < mb; i += mr) {
          const double *ap = Ap + ((i - ma) / mr) * mr * kc;
          int64_t h = mb - i < mr ? mb - i : mr;
          double *c = g->C + i * g->ldc + j;
          if (h == mr && w == nr) {
            kern.fn(kc, ap, bp, c, g->ldc, zero);
            continue;
          }
          if (!zero)
            for (int64_t r = 0; r < h; r++) memcpy(edge + r * nr, c + r * g->ldc, sizeof(double) * (size_t)w);
          kern.fn(kc, ap, bp, edge, nr, zero);
          for (int64_t r = 0; r < h; r++) memcpy(c + r * g->ldc, edge + r * nr, sizeof(double) * (size_t)w);
        }
      }
    }
  }
}

static void gemm_task(void *ctx, int64_t t0, int64_t t1, int tid) {
  const gemm_t *g = ctx;
  for (int64_t t = t0; t < t1; t++) {
    int64_t mi = t / g->n_nt, ni = t % g->n_nt;
    int64_t m0 = mi * g->mc, n0 = ni * g->nc;
    int64_t m1 = m0 + g->mc < g->M ? m0 + g->mc : g->M, n1 = n0 + g->nc < g->N ? n0 + g->nc : g->N;
    gemm_tile(g, m0, m1, n0, n1);
  }
}

void drk_igemm_mixed(int64_t M, int64_t N, int64_t K, const void *A, bool a_f32, int64_t lda_m, int64_t lda_k,
                     const void *B, bool b_f32, int64_t ldb_k, int64_t ldb_n, double *C, int64_t ldc, bool accumulate,
                     bool parallel) {
  pthread_once(&kern_once, pick_kernel);
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {
    if (!accumulate)
      for (int64_t i = 0; i < M; i++) memset(C + i * ldc, 0, sizeof(double) * (size_t)N);
    return;
  }
  gemm_t g = {M, N, K, A, lda_m, lda_k, B, ldb_k, ldb_n, C, ldc, accumulate, parallel ? MT : M, NC, 0, 0, a_f32, b_f32};
  int nt = parallel && (double)M * N * K >= 1e6 ? drk_interp_threads() : 1;
  /* Smaller tiles when there are too few for the threads (any size gives the same bits). */
  for (;;) {
    g.n_mt = (M + g.mc - 1) / g.mc;
    g.n_nt = (N + g.nc - 1) / g.nc;
    if (nt <= 1 || g.n_mt * g.n_nt >= 3 * nt) break;
    if (g.nc >= 4 * kern.nr && g.nc >= g.mc) g.nc /= 2;
    else if (g.mc >= 2 * MC) g.mc /= 2;
    else if (g.mc >= 4 * kern.mr) g.mc /= 2;
    else break;
  }
  if (nt <= 1) gemm_task(&g, 0, g.n_mt * g.n_nt, 0);
  else drk_ipar_for(g.n_mt * g.n_nt, 1, gemm_task, &g);
}

void drk_igemm_f64(int64_t M, int64_t N, int64_t K, const double *A, int64_t lda_m, int64_t lda_k,
                   const double *B, int64_t ldb_k, int64_t ldb_n, double *C, int64_t ldc, bool accumulate) {
  drk_igemm_mixed(M, N, K, A, false, lda_m, lda_k, B, false, ldb_k, ldb_n, C, ldc, accumulate, true);
}

void drk_igemm_f64_serial(int64_t M, int64_t N, int64_t K, const double *A, int64_t lda_m, int64_t lda_k,
                          const double *B, int64_t ldb_k, int64_t ldb_n, double *C, int64_t ldc, bool accumulate) {
  drk_igemm_mixed(M, N, K, A, false, lda_m, lda_k, B, false, ldb_k, ldb_n, C, ldc, accumulate, false);
}

const char *drk_igemm_kernel_name(void) {
  pthread_once(&kern_once, pick_kernel);
  return kern.name;
}
