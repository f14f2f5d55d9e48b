/* Interpreter: MatMul, Gemm, Conv, ConvTranspose, Einsum.
 *
 * All products accumulate in f64 (int64 for integer MatMul) through one blocked GEMM kernel
 * (interp_gemm.c); Conv lowers to im2col + GEMM per image and group, ConvTranspose to GEMM +
 * col2im. Threads: batched MatMul and Conv run one (batch, group) GEMM per task when there
 * are enough of them, else each GEMM splits its output tiles over the pool; either way every
 * output is one sum in k order, so the bits do not depend on the thread count. Einsum is a generic loop over the index
 * space of all labels. f8 operands (--precision=fp8: MatMul, Gemm, Conv) give an f32 result,
 * as on the GPU where their products accumulate in f32; Gemm's C and Conv's bias then have
 * the result's dtype. */
#include "interp_internal.h"
#include "einsum.h"

static bool is_f8(drk_dtype_t t) { return t == DRK_DT_F8E4M3 || t == DRK_DT_F8E5M2; }

/* The result dtype of a MatMul/Gemm/Conv on operands of dtype t. */
static drk_dtype_t mm_result(drk_dtype_t t) { return is_f8(t) ? DRK_DT_F32 : t; }

#if defined(__GNUC__) && !defined(__clang__)
#define HOT __attribute__((optimize("O3")))
#else
#define HOT
#endif

/* Batched MatMul, one batch per index: offs[2*i], offs[2*i+1]: the A and B batch of C's i.
 * A and B: double arrays, or float ones when f32. */
typedef struct batched_mm {
  int64_t M, N, K;
  const void *A, *B;
  bool f32;
  double *C;
  const int64_t *offs;
} batched_mm_t;

static const void *elem_at(const void *p, bool f32, int64_t i) {
  return f32 ? (const void *)((const float *)p + i) : (const void *)((const double *)p + i);
}

static void batched_mm_one(const batched_mm_t *m, int64_t i, bool parallel) {
  drk_igemm_mixed(m->M, m->N, m->K, elem_at(m->A, m->f32, m->offs[2 * i] * m->M * m->K), m->f32, m->K, 1,
                  elem_at(m->B, m->f32, m->offs[2 * i + 1] * m->K * m->N), m->f32, m->N, 1, m->C + i * m->M * m->N,
                  m->N, false, parallel);
}

static void batched_mm_task(void *ctx, int64_t i0, int64_t i1, int tid) {
  for (int64_t i = i0; i < i1; i++) batched_mm_one(ctx, i, false);
}

static bool op_matmul(drk_ictx_t *c) {
  unsigned mask = DRK_M_FLOAT | DRK_DTM(I64) | DRK_DTM(I32) | DRK_DTM(U8) | DRK_DTM(I8);
  if (!drk_ireq(c, 0, mask) || !drk_ireq(c, 1, mask)) return false;
  const drk_tensor_t *a = c->in[0], *b = c->in[1];
  if (a->dtype != b->dtype) return drk_ierr(c, "A and B dtypes differ");
  if (a->rank < 1 || b->rank < 1) return drk_ierr(c, "operands must have rank >= 1");
  drk_tensor_t av = *a, bv = *b; /* views with the 1-D operands promoted */
  if (a->rank == 1) {
    av.rank = 2;
    av.dims[0] = 1;
    av.dims[1] = a->dims[0];
  }
  if (b->rank == 1) {
    bv.rank = 2;
    bv.dims[0] = b->dims[0];
    bv.dims[1] = 1;
  }
  int64_t M = av.dims[av.rank - 2], K = av.dims[av.rank - 1], N = bv.dims[bv.rank - 1];
  if (bv.dims[bv.rank - 2] != K) return drk_ierr(c, "inner dimensions differ (%lld vs %lld)", (long long)K, (long long)bv.dims[bv.rank - 2]);
  drk_tensor_t ab = av, bb = bv;
  ab.rank -= 2;
  bb.rank -= 2;
  const drk_tensor_t *bt[2] = {&ab, &bb};
  int brank;
  int64_t bd[DRK_MAX_RANK], sa[DRK_MAX_RANK], sb[DRK_MAX_RANK];
  if (!drk_ibroadcast(c, 2, bt, &brank, bd)) return false;
  if (brank + 2 > DRK_MAX_RANK) return drk_ierr(c, "rank too large");
  drk_ibstrides(&ab, brank, bd, sa);
  drk_ibstrides(&bb, brank, bd, sb);
  int64_t od[DRK_MAX_RANK];
  int orank = 0;
  for (int k = 0; k < brank; k++) od[orank++] = bd[k];
  if (a->rank > 1) od[orank++] = M;
  if (b->rank > 1) od[orank++] = N;
  /* result_n (pad-matmul-n: B padded with zero columns to a multiple of 8): the result keeps
   * B's first result_n columns; computed over all N, then each row cut to them */
  int64_t RN = drk_node_attr_int(c->n, "result_n", 0);
  if (RN) {
    if (b->rank != 2 || RN < 0 || RN > N || !drk_dtype_is_float(a->dtype))
      return drk_ierr(c, "result_n %lld needs a float 2-D B at least that wide", (long long)RN);
    od[orank - 1] = RN;
  }
  if (!drk_iout(c, 0, mm_result(a->dtype), orank, od)) return false;
  int64_t nb = 1;
  for (int k = 0; k < brank; k++) nb *= bd[k];
  int64_t *sts[2] = {sa, sb};
  drk_iiter_t it;
  drk_iiter_init(&it, brank, bd, 2, sts);
  if (drk_dtype_is_float(a->dtype)) {
    /* f32 operands are packed straight from the tensors (exact), others through f64 copies */
    bool f32 = a->dtype == DRK_DT_F32;
    double *A = f32 ? NULL : drk_iload_f64(c, a), *B = f32 || !A ? NULL : drk_iload_f64(c, b);
    double *C = (f32 || B) ? drk_imalloc(c, (size_t)(nb * M * N), sizeof(double)) : NULL;
    int64_t *offs = C ? drk_imalloc(c, (size_t)nb * 2, sizeof(int64_t)) : NULL;
    if (!offs) { drk_ifree(A); drk_ifree(B); drk_ifree(C); return false; }
    const void *Ab = f32 ? a->data : (const void *)A, *Bb = f32 ? b->data : (const void *)B;
    bool fold = true; /* B shared by every batch, A's batches contiguous: one GEMM of nb*M rows */
    for (int64_t i = 0; i < nb; i++) {
      offs[2 * i] = it.off[0], offs[2 * i + 1] = it.off[1];
      fold &= it.off[0] == i && it.off[1] == 0;
      drk_iiter_next(&it);
    }
    batched_mm_t bm = {M, N, K, Ab, Bb, f32, C, offs};
    if (fold) {
      drk_igemm_mixed(nb * M, N, K, Ab, f32, K, 1, Bb, f32, N, 1, C, N, false, true);
    } else if (nb >= drk_interp_threads()) {
      drk_ipar_for(nb, drk_ipar_grain(nb, 1), batched_mm_task, &bm);
    } else {
      for (int64_t i = 0; i < nb; i++) batched_mm_one(&bm, i, true);
    }
    if (RN)
      for (int64_t r = 0; r < nb * M; r++) memmove(C + r * RN, C + r * N, sizeof(double) * (size_t)RN);
    drk_istore_f64(&c->out[0], C);
    drk_ifree(A); drk_ifree(B); drk_ifree(C); drk_ifree(offs);
  } else {
    int64_t *A = drk_iload_i64(c, a), *B = A ? drk_iload_i64(c, b) : NULL;
    int64_t *C = B ? drk_imalloc(c, (size_t)(nb * M * N), sizeof(int64_t)) : NULL;
    if (!C) { drk_ifree(A); drk_ifree(B); return false; }
    for (int64_t i = 0; i < nb; i++) {
      const int64_t *ap = A + it.off[0] * M * K, *bp = B + it.off[1] * K * N;
      for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
          uint64_t s = 0;
          for (int64_t k = 0; k < K; k++) s += (uint64_t)ap[m * K + k] * (uint64_t)bp[k * N + n];
          C[i * M * N + m * N + n] = (int64_t)s;
        }
      drk_iiter_next(&it);
    }
    drk_istore_i64(&c->out[0], C);
    drk_ifree(A); drk_ifree(B); drk_ifree(C);
  }
  return true;
}

static bool op_gemm(drk_ictx_t *c) {
  unsigned mask = DRK_M_FLOAT | DRK_DTM(I64) | DRK_DTM(I32);
  if (!drk_ireq(c, 0, mask) || !drk_ireq(c, 1, mask)) return false;
  const drk_tensor_t *a = c->in[0], *b = c->in[1], *cc = drk_iin(c, 2);
  if (a->rank != 2 || b->rank != 2) return drk_ierr(c, "A and B must be 2-D");
  if (a->dtype != b->dtype || (cc && cc->dtype != mm_result(a->dtype))) return drk_ierr(c, "operand dtypes differ");
  bool ta = drk_node_attr_int(c->n, "transA", 0) != 0, tb = drk_node_attr_int(c->n, "transB", 0) != 0;
  double alpha = (float)drk_node_attr_float(c->n, "alpha", 1.0), beta = (float)drk_node_attr_float(c->n, "beta", 1.0);
  int64_t M = ta ? a->dims[1] : a->dims[0], K = ta ? a->dims[0] : a->dims[1];
  int64_t K2 = tb ? b->dims[1] : b->dims[0], N = tb ? b->dims[0] : b->dims[1];
  if (K != K2) return drk_ierr(c, "inner dimensions differ (%lld vs %lld)", (long long)K, (long long)K2);
  int64_t od[2] = {M, N}, cs[2] = {0, 0};
  if (cc) {
    if (cc->rank > 2) return drk_ierr(c, "C must have rank <= 2");
    for (int k = 0; k < cc->rank; k++) {
      int64_t want = od[2 - cc->rank + k];
      if (cc->dims[k] != want && cc->dims[k] != 1) return drk_ierr(c, "C does not broadcast to (%lld, %lld)", (long long)M, (long long)N);
    }
    drk_ibstrides(cc, 2, od, cs);
  }
  if (!drk_iout(c, 0, mm_result(a->dtype), 2, od)) return false;
  bool f32 = a->dtype == DRK_DT_F32; /* packed straight from the tensors (exact) */
  double *A = f32 ? NULL : drk_iload_f64(c, a), *B = f32 || !A ? NULL : drk_iload_f64(c, b);
  double *C = (f32 || B) ? drk_imalloc(c, (size_t)(M * N), sizeof(double)) : NULL;
  double *Cin = (C && cc) ? drk_iload_f64(c, cc) : NULL;
  if (!C || (cc && !Cin)) { drk_ifree(A); drk_ifree(B); drk_ifree(C); return false; }
  drk_igemm_mixed(M, N, K, f32 ? a->data : (const void *)A, f32, ta ? 1 : K, ta ? M : 1, f32 ? b->data : (const void *)B,
                  f32, tb ? 1 : N, tb ? K : 1, C, N, false, true);
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < N; n++) {
      double v = alpha * C[m * N + n];
      if (Cin) v += beta * Cin[m * cs[0] + n * cs[1]];
      C[m * N + n] = v;
    }
  drk_istore_f64(&c->out[0], C);
  drk_ifree(A); drk_ifree(B); drk_ifree(C); drk_ifree(Cin);
  return true;
}

/* ---- convolution geometry ---- */
typedef struct convgeo {
  int r; /* spatial rank */
  int64_t in[DRK_MAX_RANK], k[DRK_MAX_RANK], out[DRK_MAX_RANK];
  int64_t s[DRK_MAX_RANK], d[DRK_MAX_RANK], pb[DRK_MAX_RANK], pe[DRK_MAX_RANK], op[DRK_MAX_RANK];
  int64_t group;
} convgeo_t;

static bool attr_vec(drk_ictx_t *c, const char *name, int r, int64_t *out, int64_t dflt) {
  size_t n;
  const int64_t *v = drk_node_attr_ints(c->n, name, &n);
  for (int i = 0; i < r; i++) out[i] = dflt;
  if (!v) return true;
  if ((int)n != r) return drk_ierr(c, "attribute '%s' has %zu values, expected %d", name, n, r);
  for (int i = 0; i < r; i++) out[i] = v[i];
  return true;
}

/* transposed: ConvTranspose geometry (W is [C, M/g, k...]). */
static bool conv_geo(drk_ictx_t *c, const drk_tensor_t *x, const drk_tensor_t *w, bool transposed, convgeo_t *g) {
  memset(g, 0, sizeof *g);
  if (x->rank < 3 || w->rank != x->rank) return drk_ierr(c, "X and W must have the same rank >= 3 (got %d and %d)", x->rank, w->rank);
  int r = g->r = x->rank - 2;
  g->group = drk_node_attr_int(c->n, "group", 1);
  if (g->group <= 0) return drk_ierr(c, "group must be positive");
  for (int i = 0; i < r; i++) {
    g->in[i] = x->dims[2 + i];
    g->k[i] = w->dims[2 + i];
  }
  size_t nks;
  const int64_t *ks = drk_node_attr_ints(c->n, "kernel_shape", &nks);
  if (ks) {
    if ((int)nks != r) return drk_ierr(c, "kernel_shape has %zu values, expected %d", nks, r);
    for (int i = 0; i < r; i++)
      if (ks[i] != g->k[i]) return drk_ierr(c, "kernel_shape disagrees with W");
  }
  int64_t pads[2 * DRK_MAX_RANK];
  if (!attr_vec(c, "strides", r, g->s, 1) || !attr_vec(c, "dilations", r, g->d, 1) ||
      !attr_vec(c, "pads", 2 * r, pads, 0) || !attr_vec(c, "output_padding", r, g->op, 0))
    return false;
  for (int i = 0; i < r; i++) {
    if (g->s[i] <= 0 || g->d[i] <= 0) return drk_ierr(c, "strides and dilations must be positive");
    g->pb[i] = pads[i];
    g->pe[i] = pads[r + i];
    if (g->pb[i] < 0 || g->pe[i] < 0) return drk_ierr(c, "pads must be non-negative");
  }
  const char *ap = drk_node_attr_string(c->n, "auto_pad", "NOTSET");
  bool upper = !strcmp(ap, "SAME_UPPER"), lower = !strcmp(ap, "SAME_LOWER"), valid = !strcmp(ap, "VALID");
  if (!upper && !lower && !valid && strcmp(ap, "NOTSET")) return drk_ierr(c, "auto_pad '%s' not supported", ap);
  if (!transposed) {
    for (int i = 0; i < r; i++) {
      int64_t ek = g->d[i] * (g->k[i] - 1) + 1;
      if (upper || lower) {
        g->out[i] = (g->in[i] + g->s[i] - 1) / g->s[i];
        int64_t tot = (g->out[i] - 1) * g->s[i] + ek - g->in[i];
        if (tot < 0) tot = 0;
        g->pb[i] = upper ? tot / 2 : tot - tot / 2;
        g->pe[i] = tot - g->pb[i];
      } else {
        if (valid) g->pb[i] = g->pe[i] = 0;
        int64_t span = g->in[i] + g->pb[i] + g->pe[i] - ek;
        if (span < 0) return drk_ierr(c, "kernel larger than padded input");
        g->out[i] = span / g->s[i] + 1;
      }
    }
  } else {
    size_t nos;
    const int64_t *os = drk_node_attr_ints(c->n, "output_shape", &nos);
    if (os && (int)nos != r && (int)nos != r + 2) return drk_ierr(c, "output_shape has %zu values, expected %d", nos, r);
    if (os && (int)nos == r + 2) os += 2;
    for (int i = 0; i < r; i++) {
      int64_t ek = g->d[i] * (g->k[i] - 1) + 1;
      if (os || upper || lower) {
        int64_t want = os ? os[i] : g->in[i] * g->s[i];
        int64_t tot = g->s[i] * (g->in[i] - 1) + g->op[i] + ek - want;
        if (tot < 0) tot = 0;
        if (lower) {
          g->pb[i] = tot - tot / 2;
          g->pe[i] = tot / 2;
        } else {
          g->pb[i] = tot / 2;
          g->pe[i] = tot - tot / 2;
        }
        g->out[i] = want;
      } else {
        if (valid) g->pb[i] = g->pe[i] = 0;
        g->out[i] = g->s[i] * (g->in[i] - 1) + g->op[i] + ek - g->pb[i] - g->pe[i];
        if (g->out[i] < 0) return drk_ierr(c, "negative output size");
      }
    }
  }
  return true;
}

static int64_t prod(const int64_t *v, int n) {
  int64_t p = 1;
  for (int i = 0; i < n; i++) p *= v[i];
  return p;
}

/* cols[(ci*KS + kk) * OS + oo] = x[ci, in position] (0 outside); x of type T (f64 or f32). */
#define DEF_IM2COL(NAME, T) \
HOT static void NAME(const convgeo_t *g, const T *x, int64_t Cg, double *cols) { \
  int r = g->r; \
  int64_t KS = prod(g->k, r), OS = prod(g->out, r), IS = prod(g->in, r); \
  int64_t last_o = g->out[r - 1]; \
  for (int64_t ci = 0; ci < Cg; ci++) { \
    const T *xc = x + ci * IS; \
    for (int64_t kk = 0; kk < KS; kk++) { \
      int64_t kidx[DRK_MAX_RANK], rem = kk; \
      for (int i = r - 1; i >= 0; i--) { \
        kidx[i] = rem % g->k[i]; \
        rem /= g->k[i]; \
      } \
      double *dst = cols + (ci * KS + kk) * OS; \
      int64_t oidx[DRK_MAX_RANK] = {0}; \
      for (int64_t oo = 0; oo < OS; oo += last_o) { \
        /* position in all but the last spatial dim */ \
        int64_t base = 0; \
        bool inside = true; \
        for (int i = 0; i < r - 1; i++) { \
          int64_t p = oidx[i] * g->s[i] - g->pb[i] + kidx[i] * g->d[i]; \
          if (p < 0 || p >= g->in[i]) inside = false; \
          base = base * g->in[i] + p; \
        } \
        int L = r - 1; \
        if (!inside) { \
          memset(dst + oo, 0, sizeof(double) * (size_t)last_o); \
        } else { \
          const T *row = xc + base * g->in[L]; \
          int64_t off = kidx[L] * g->d[L] - g->pb[L]; \
          for (int64_t o = 0; o < last_o; o++) { \
            int64_t p = o * g->s[L] + off; \
            dst[oo + o] = (p >= 0 && p < g->in[L]) ? row[p] : 0.0; \
          } \
        } \
        for (int i = r - 2; i >= 0; i--) { \
          if (++oidx[i] < g->out[i]) break; \
          oidx[i] = 0; \
        } \
      } \
    } \
  } \
}
DEF_IM2COL(im2col_f64, double)
DEF_IM2COL(im2col_f32, float)

/* Conv over (image, group) pairs: index i is image i / group, group i % group. X and W: f32
 * tensors' own data (x_f32) or f64 copies. Each pair's Mg x OS block goes through a per-thread
 * f64 buffer (+ bias) into the output tensor: no whole-output f64 copy. */
typedef struct conv_job {
  const convgeo_t *g;
  const void *X, *W;
  bool x_f32;
  const double *bias;
  drk_tensor_t *out;
  int64_t C, M, Cg, Mg, KS, OS, IS;
  bool direct;
  double **cols; /* im2col buffer per thread id, allocated on first use */
  double **ybuf; /* Mg x OS result buffer per thread id, allocated on first use */
  bool serial;   /* tasks run in the pool: serial GEMMs */
  bool oom;
} conv_job_t;

static void conv_task(void *ctx, int64_t i0, int64_t i1, int tid) {
  conv_job_t *j = ctx;
  const convgeo_t *g = j->g;
  for (int64_t i = i0; i < i1; i++) {
    int64_t n = i / g->group, gi = i % g->group;
    int64_t xo = (n * j->C + gi * j->Cg) * j->IS;
    const void *B = j->x_f32 ? (const void *)((const float *)j->X + xo) : (const void *)((const double *)j->X + xo);
    bool b_f32 = j->x_f32;
    if (!j->ybuf[tid]) j->ybuf[tid] = drk_iscratch(sizeof(double) * (size_t)(j->Mg * j->OS));
    if (!j->direct && !j->cols[tid]) j->cols[tid] = drk_iscratch(sizeof(double) * (size_t)(j->Cg * j->KS * j->OS));
    if (!j->ybuf[tid] || (!j->direct && !j->cols[tid])) {
      j->oom = true; /* benign race: only ever set to true */
      return;
    }
    if (!j->direct) {
      if (j->x_f32) im2col_f32(g, B, j->Cg, j->cols[tid]);
      else im2col_f64(g, B, j->Cg, j->cols[tid]);
      B = j->cols[tid];
      b_f32 = false;
    }
    double *yg = j->ybuf[tid];
    int64_t K = j->Cg * j->KS, wo = gi * j->Mg * K;
    const void *W = j->x_f32 ? (const void *)((const float *)j->W + wo) : (const void *)((const double *)j->W + wo);
    drk_igemm_mixed(j->Mg, j->OS, K, W, j->x_f32, K, 1, B, b_f32, j->OS, 1, yg, j->OS, false, !j->serial);
    if (j->bias)
      for (int64_t m = 0; m < j->Mg; m++) {
        double bv = j->bias[gi * j->Mg + m];
        for (int64_t o = 0; o < j->OS; o++) yg[m * j->OS + o] += bv;
      }
    int64_t yo = (n * j->M + gi * j->Mg) * j->OS;
    drk_istore_f64_range(j->out, yo, yo + j->Mg * j->OS, yg);
  }
}

static bool op_conv(drk_ictx_t *c) {
  if (!drk_ireq(c, 0, DRK_M_FLOAT) || !drk_ireq(c, 1, DRK_M_FLOAT)) return false;
  const drk_tensor_t *x = c->in[0], *w = c->in[1], *b = drk_iin(c, 2);
  if (w->dtype != x->dtype || (b && b->dtype != mm_result(x->dtype))) return drk_ierr(c, "operand dtypes differ");
  convgeo_t g;
  if (!conv_geo(c, x, w, false, &g)) return false;
  int64_t N = x->dims[0], C = x->dims[1], M = w->dims[0];
  if (C % g.group || M % g.group || w->dims[1] != C / g.group)
    return drk_ierr(c, "channels (%lld in, %lld out, W has %lld per group) do not fit group=%lld", (long long)C,
                    (long long)M, (long long)w->dims[1], (long long)g.group);
  if (b && (b->rank != 1 || b->dims[0] != M)) return drk_ierr(c, "B must be 1-D of size %lld", (long long)M);
  int64_t od[DRK_MAX_RANK];
  od[0] = N;
  od[1] = M;
  for (int i = 0; i < g.r; i++) od[2 + i] = g.out[i];
  if (!drk_iout(c, 0, mm_result(x->dtype), x->rank, od)) return false;
  int64_t Cg = C / g.group, Mg = M / g.group, KS = prod(g.k, g.r), OS = prod(g.out, g.r), IS = prod(g.in, g.r);
  bool direct = true; /* 1x1, stride 1, no pads: X is its own im2col */
  for (int i = 0; i < g.r; i++)
    if (g.k[i] != 1 || g.s[i] != 1 || g.pb[i] || g.pe[i]) direct = false;
  bool f32 = x->dtype == DRK_DT_F32; /* read straight from the tensors (exact) */
  double *X = f32 ? NULL : drk_iload_f64(c, x), *W = f32 || !X ? NULL : drk_iload_f64(c, w);
  double *bias = (f32 || W) && b ? drk_iload_f64(c, b) : NULL;
  if ((!f32 && !W) || (b && !bias)) { drk_ifree(X); drk_ifree(W); return false; }
  conv_job_t j = {&g, f32 ? x->data : (const void *)X, f32 ? w->data : (const void *)W, f32, bias, &c->out[0],
                  C, M, Cg, Mg, KS, OS, IS, direct, NULL, NULL, false, false};
  int nt = drk_interp_threads();
  /* one (image, group) per task with a serial GEMM when there are enough of them, else the
   * pairs in turn, each GEMM spread over the pool */
  j.serial = nt > 1 && N * g.group >= nt;
  int nb = j.serial ? nt : 1;
  j.cols = calloc((size_t)nb, sizeof(double *));
  j.ybuf = calloc((size_t)nb, sizeof(double *));
  bool ok = j.cols && j.ybuf;
  if (ok && j.serial) drk_ipar_for(N * g.group, drk_ipar_grain(N * g.group, 1), conv_task, &j);
  else if (ok) conv_task(&j, 0, N * g.group, 0);
  for (int t = 0; t < nb; t++) {
    if (j.cols) drk_ifree(j.cols[t]);
    if (j.ybuf) drk_ifree(j.ybuf[t]);
  }
  free(j.cols);
  free(j.ybuf);
  ok = ok && !j.oom;
  if (!ok) drk_ierr(c, "out of memory");
  drk_ifree(X); drk_ifree(W); drk_ifree(bias);
  return ok;
}

static bool op_conv_transpose(drk_ictx_t *c) {
  if (!drk_ireq(c, 0, DRK_M_FLOAT) || !drk_ireq(c, 1, DRK_M_FLOAT)) return false;
  const drk_tensor_t *x = c->in[0], *w = c->in[1], *b = drk_iin(c, 2);
  if (w->dtype != x->dtype || (b && b->dtype != x->dtype)) return drk_ierr(c, "operand dtypes differ");
  convgeo_t g;
  if (!conv_geo(c, x, w, true, &g)) return false;
  int64_t N = x->dims[0], C = x->dims[1];
  if (w->dims[0] != C || C % g.group) return drk_ierr(c, "W's first dimension must equal X's channels, divisible by group");
  int64_t Mg = w->dims[1], M = Mg * g.group, Cg = C / g.group;
  if (b && (b->rank != 1 || b->dims[0] != M)) return drk_ierr(c, "B must be 1-D of size %lld", (long long)M);
  int64_t od[DRK_MAX_RANK];
  od[0] = N;
  od[1] = M;
  for (int i = 0; i < g.r; i++) od[2 + i] = g.out[i];
  if (!drk_iout(c, 0, x->dtype, x->rank, od)) return false;
  int r = g.r;
  int64_t KS = prod(g.k, r), OS = prod(g.out, r), IS = prod(g.in, r);
  double *X = drk_iload_f64(c, x), *W = X ? drk_iload_f64(c, w) : NULL;
  double *Y = W ? drk_imalloc(c, (size_t)(N * M * OS), sizeof(double)) : NULL;
  double *cols = Y ? drk_imalloc(c, (size_t)(Mg * KS * IS), sizeof(double)) : NULL;
  if (!cols) { drk_ifree(X); drk_ifree(W); drk_ifree(Y); return false; }
  for (int64_t i = 0; i < N * M * OS; i++) Y[i] = 0;
  for (int64_t n = 0; n < N; n++)
    for (int64_t gi = 0; gi < g.group; gi++) {
      /* cols[(m*KS+kk), ii] = sum_c W[gi*Cg + c, m, kk] * X[n, gi*Cg + c, ii] */
      drk_igemm_f64(Mg * KS, IS, Cg, W + gi * Cg * Mg * KS, 1, Mg * KS, X + (n * C + gi * Cg) * IS, IS, 1, cols, IS,
                    false);
      for (int64_t m = 0; m < Mg; m++) {
        double *ym = Y + (n * M + gi * Mg + m) * OS;
        for (int64_t kk = 0; kk < KS; kk++) {
          int64_t kidx[DRK_MAX_RANK], rem = kk;
          for (int i = r - 1; i >= 0; i--) {
            kidx[i] = rem % g.k[i];
            rem /= g.k[i];
          }
          const double *src = cols + (m * KS + kk) * IS;
          int64_t iidx[DRK_MAX_RANK] = {0};
          for (int64_t ii = 0; ii < IS; ii++) {
            int64_t o = 0;
            bool inside = true;
            for (int i = 0; i < r; i++) {
              int64_t p = iidx[i] * g.s[i] - g.pb[i] + kidx[i] * g.d[i];
              if (p < 0 || p >= g.out[i]) {
                inside = false;
                break;
              }
              o = o * g.out[i] + p;
            }
            if (inside) ym[o] += src[ii];
            for (int i = r - 1; i >= 0; i--) {
              if (++iidx[i] < g.in[i]) break;
              iidx[i] = 0;
            }
          }
        }
        if (b) {
          double bv = drk_tensor_get_f64(b, gi * Mg + m);
          for (int64_t o = 0; o < OS; o++) ym[o] += bv;
        }
      }
    }
  drk_istore_f64(&c->out[0], Y);
  drk_ifree(X); drk_ifree(W); drk_ifree(Y); drk_ifree(cols);
  return true;
}

/* ---- Einsum ---- */
enum { EMAX = 64 };


static bool op_einsum(drk_ictx_t *c) {
  const char *eq = drk_node_attr_string(c->n, "equation", NULL);
  if (!eq) return drk_ierr(c, "attribute 'equation' is required");
  int nin = c->n_in;
  if (nin > 16) return drk_ierr(c, "too many operands");
  for (int i = 0; i < nin; i++) {
    if (!drk_ireq(c, i, DRK_M_NUM)) return false;
    if (c->in[i]->dtype != c->in[0]->dtype) return drk_ierr(c, "operand dtypes differ");
  }
  const char *arrow = strstr(eq, "->");
  const char *lhs_end = arrow ? arrow : eq + strlen(eq);
  int lab[16][EMAX], nl[16];
  bool ell[16];
  const char *p = eq;
  int t = 0;
  for (;;) {
    const char *comma = memchr(p, ',', (size_t)(lhs_end - p));
    const char *e = comma ? comma : lhs_end;
    if (t >= nin) return drk_ierr(c, "equation has more terms than inputs");
    nl[t] = drk_einsum_parse_term(p, e, lab[t], EMAX, &ell[t]);
    if (nl[t] < 0) return drk_ierr(c, "bad term in equation '%s'", eq);
    t++;
    if (!comma) break;
    p = comma + 1;
  }
  if (t != nin) return drk_ierr(c, "equation has %d terms, %d inputs given", t, nin);
  /* Ellipsis rank: the largest any operand covers. Ellipsis dims get ids 52.. */
  int erank = 0;
  int64_t size[EMAX];
  for (int i = 0; i < EMAX; i++) size[i] = -1;
  for (int i = 0; i < nin; i++) {
    int named = nl[i] - (ell[i] ? 1 : 0);
    if (named > c->in[i]->rank || (!ell[i] && named != c->in[i]->rank))
      return drk_ierr(c, "operand %d has rank %d, the equation says %d", i, c->in[i]->rank, named);
    int er = c->in[i]->rank - named;
    if (er > erank) erank = er;
  }
  if (52 + erank > EMAX) return drk_ierr(c, "ellipsis too large");
  /* stride of each label in each operand */
  int64_t st[17][EMAX];
  memset(st, 0, sizeof st);
  int cnt[EMAX] = {0};
  for (int i = 0; i < nin; i++) {
    const drk_tensor_t *x = c->in[i];
    int64_t xs[DRK_MAX_RANK];
    drk_istrides(x->rank, x->dims, xs);
    int er = x->rank - (nl[i] - (ell[i] ? 1 : 0));
    int ax = 0;
    for (int j = 0; j < nl[i]; j++) {
      if (lab[i][j] == -2) {
        for (int q = 0; q < er; q++, ax++) {
          int id = 52 + (erank - er) + q;
          int64_t dsz = x->dims[ax];
          if (size[id] < 0 || size[id] == 1) size[id] = dsz;
          else if (dsz != 1 && dsz != size[id]) return drk_ierr(c, "ellipsis dimensions do not broadcast");
          if (dsz != 1) st[i][id] += xs[ax];
          cnt[id]++;
        }
        continue;
      }
      int id = lab[i][j];
      int64_t dsz = x->dims[ax];
      if (size[id] >= 0 && size[id] != dsz) return drk_ierr(c, "label '%c' has sizes %lld and %lld", eq[0], (long long)size[id], (long long)dsz);
      size[id] = dsz;
      st[i][id] += xs[ax];
      cnt[id]++;
      ax++;
    }
  }
  for (int id = 52; id < 52 + erank; id++)
    if (size[id] < 0) size[id] = 1;
  /* output labels */
  int out[EMAX], no = 0;
  if (arrow) {
    bool oell;
    int ol[EMAX];
    int n = drk_einsum_parse_term(arrow + 2, arrow + 2 + strlen(arrow + 2), ol, EMAX, &oell);
    if (n < 0) return drk_ierr(c, "bad output term in '%s'", eq);
    for (int j = 0; j < n; j++) {
      if (ol[j] == -2) {
        for (int q = 0; q < erank; q++) out[no++] = 52 + q;
      } else {
        if (size[ol[j]] < 0) return drk_ierr(c, "output label not in any input");
        for (int k = 0; k < no; k++)
          if (out[k] == ol[j]) return drk_ierr(c, "output label repeated");
        out[no++] = ol[j];
      }
    }
  } else {
    for (int q = 0; q < erank; q++) out[no++] = 52 + q;
    for (int id = 0; id < 52; id++)
      if (cnt[id] == 1) out[no++] = id;
  }
  if (no > DRK_MAX_RANK) return drk_ierr(c, "output rank %d too large", no);
  bool isout[EMAX] = {false};
  int64_t od[DRK_MAX_RANK];
  for (int k = 0; k < no; k++) {
    isout[out[k]] = true;
    od[k] = size[out[k]];
  }
  if (!drk_iout(c, 0, c->in[0]->dtype, no, od)) return false;
  int64_t os[DRK_MAX_RANK];
  drk_istrides(no, od, os);
  for (int k = 0; k < no; k++) st[nin][out[k]] = os[k];
  /* loop order: output labels, then summed labels */
  int order[EMAX], nord = 0;
  for (int k = 0; k < no; k++) order[nord++] = out[k];
  for (int id = 0; id < 52 + erank; id++)
    if (size[id] >= 0 && !isout[id]) order[nord++] = id;
  int64_t total = 1, on = drk_tensor_numel(&c->out[0]);
  for (int k = 0; k < nord; k++) total *= size[order[k]];
  double *acc = drk_imalloc(c, (size_t)on, sizeof(double));
  double *vals[16] = {NULL};
  bool ok = acc != NULL;
  for (int i = 0; i < nin && ok; i++) ok = (vals[i] = drk_iload_f64(c, c->in[i])) != NULL;
  if (ok) {
    for (int64_t j = 0; j < on; j++) acc[j] = 0;
    int64_t idx[EMAX] = {0}, off[17] = {0};
    for (int64_t it = 0; it < total; it++) {
      double pr = 1;
      for (int i = 0; i < nin; i++) pr *= vals[i][off[i]];
      acc[off[nin]] += pr;
      for (int k = nord - 1; k >= 0; k--) {
        int id = order[k];
        for (int i = 0; i <= nin; i++) off[i] += st[i][id];
        if (++idx[k] < size[id]) break;
        for (int i = 0; i <= nin; i++) off[i] -= st[i][id] * size[id];
        idx[k] = 0;
      }
    }
    drk_istore_f64(&c->out[0], acc);
  }
  drk_ifree(acc);
  for (int i = 0; i < nin; i++) drk_ifree(vals[i]);
  return ok;
}

drk_iop_fn drk_interp_lookup_mm(drk_op_t op) {
  switch (op) {
    case DRK_OP_MATMUL: return op_matmul;
    case DRK_OP_GEMM: return op_gemm;
    case DRK_OP_CONV: return op_conv;
    case DRK_OP_CONV_TRANSPOSE: return op_conv_transpose;
    case DRK_OP_EINSUM: return op_einsum;
    default: return NULL;
  }
}
