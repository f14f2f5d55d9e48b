/* Private to the CPU reference interpreter (interp*.c): the per-node evaluation context,
 * error reporting that names the op, and helpers shared by the op families
 * (broadcasting, attribute access, output allocation).
 *
 * Every op function reads c->in (NULL entries: omitted optional inputs), allocates and
 * fills c->out[0..n_outputs), and returns true; on failure it reports through c (the
 * message starts with the op name) and returns false, and the caller frees whatever
 * outputs were allocated. */
#ifndef DRK_INTERP_INTERNAL_H
#define DRK_INTERP_INTERNAL_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "interp.h"

typedef struct drk_ictx {
  const drk_node_t *n;
  const drk_tensor_t *const *in;
  int n_in;
  drk_tensor_t *out;
  int n_out;
  drk_diag_t *d;
} drk_ictx_t;

typedef bool (*drk_iop_fn)(drk_ictx_t *c);

/* Reports "<Op>: <message>" at the node's location; always returns false. */
bool drk_ierr(drk_ictx_t *c, const char *fmt, ...) DRK_PRINTF(2, 3);

/* Input i, or NULL when absent (or beyond the node's inputs). */
static inline const drk_tensor_t *drk_iin(const drk_ictx_t *c, int i) {
  return i < c->n_in ? c->in[i] : NULL;
}

/* Allocates output i; reports on failure. */
bool drk_iout(drk_ictx_t *c, int i, drk_dtype_t t, int rank, const int64_t *dims);
/* Requires input i present with one of the dtypes in the mask (bit per drk_dtype_t). */
bool drk_ireq(drk_ictx_t *c, int i, unsigned mask);

#define DRK_DTM(E) (1u << DRK_DT_##E)
#define DRK_M_FLOAT (DRK_DTM(F64) | DRK_DTM(F32) | DRK_DTM(F16) | DRK_DTM(BF16) | DRK_DTM(F8E4M3) | DRK_DTM(F8E5M2))
#define DRK_M_SINT (DRK_DTM(I64) | DRK_DTM(I32) | DRK_DTM(I16) | DRK_DTM(I8) | DRK_DTM(I4))
#define DRK_M_UINT (DRK_DTM(U8) | DRK_DTM(U4))
#define DRK_M_INT (DRK_M_SINT | DRK_M_UINT)
#define DRK_M_NUM (DRK_M_FLOAT | DRK_M_INT)
#define DRK_M_ALL (DRK_M_NUM | DRK_DTM(BOOL))
#define DRK_M_IDX (DRK_DTM(I64) | DRK_DTM(I32))

/* Reads a 0-D/1-D integer tensor as int64s into out (at most max); returns the count or
 * -1 after reporting. */
int64_t drk_iread_ints(drk_ictx_t *c, const drk_tensor_t *t, int64_t *out, int64_t max, const char *what);

/* Normalizes axis a into [0, rank); reports and returns false when out of range. */
bool drk_iaxis(drk_ictx_t *c, int64_t a, int rank, int *out_axis);

/* Multidirectional broadcast of n shapes; reports on mismatch. */
bool drk_ibroadcast(drk_ictx_t *c, int n, const drk_tensor_t *const *ts, int *out_rank, int64_t *out_dims);
/* Element strides of t viewed in the broadcast output shape (0 on broadcast dims). */
void drk_ibstrides(const drk_tensor_t *t, int rank, const int64_t *dims, int64_t *out_strides);
/* Row-major strides. */
void drk_istrides(int rank, const int64_t *dims, int64_t *out_strides);

/* Iterates a multi-index over dims, maintaining up to 4 offsets with given strides. */
typedef struct drk_iiter {
  int rank;
  int64_t dims[DRK_MAX_RANK];
  int64_t idx[DRK_MAX_RANK];
  int64_t st[4][DRK_MAX_RANK];
  int64_t off[4];
  int n;
} drk_iiter_t;
void drk_iiter_init(drk_iiter_t *it, int rank, const int64_t *dims, int n, int64_t *const *strides);
/* Moves the iterator to row-major position linear (what `linear` calls of next would reach). */
void drk_iiter_seek(drk_iiter_t *it, int64_t linear);
static inline void drk_iiter_next(drk_iiter_t *it) {
  for (int d = it->rank - 1; d >= 0; d--) {
    for (int k = 0; k < it->n; k++) it->off[k] += it->st[k][d];
    if (++it->idx[d] < it->dims[d]) return;
    for (int k = 0; k < it->n; k++) it->off[k] -= it->st[k][d] * it->dims[d];
    it->idx[d] = 0;
  }
}


/* Op families: each returns the function for op, or NULL when the op is not theirs. */
drk_iop_fn drk_interp_lookup_ew(drk_op_t op);
drk_iop_fn drk_interp_lookup_reduce(drk_op_t op);
drk_iop_fn drk_interp_lookup_mm(drk_op_t op);
drk_iop_fn drk_interp_lookup_norm(drk_op_t op);
drk_iop_fn drk_interp_lookup_move(drk_op_t op);
drk_iop_fn drk_interp_lookup_pool(drk_op_t op);
drk_iop_fn drk_interp_lookup_resize(drk_op_t op);
drk_iop_fn drk_interp_lookup_layout(drk_op_t op); /* ConvNHWC, MaxPoolNHWC, AveragePoolNHWC */
drk_iop_fn drk_interp_lookup_quant(drk_op_t op);  /* MatMulNBits */

/* Whole-tensor conversions with the dtype switch hoisted out of the loop. load: malloc'ed
 * (caller frees), NULL after reporting out-of-memory. store: rounds to t's dtype as Cast. */
double *drk_iload_f64(drk_ictx_t *c, const drk_tensor_t *t);
int64_t *drk_iload_i64(drk_ictx_t *c, const drk_tensor_t *t);
void drk_istore_f64(drk_tensor_t *t, const double *vals);
/* Elements [i0, i1) only, to/from dst[0 .. i1-i0) (not for sub-byte dtypes when storing from
 * several threads: two elements share a byte). */
void drk_iload_f64_range(const drk_tensor_t *t, int64_t i0, int64_t i1, double *dst);
void drk_istore_f64_range(drk_tensor_t *t, int64_t i0, int64_t i1, const double *src);
void drk_istore_i64(drk_tensor_t *t, const int64_t *vals);
/* malloc that reports out-of-memory (n elements of size sz; never 0 bytes). Free with
 * drk_ifree: big buffers are kept for reuse (fresh ones cost page faults and zeroing). */
void *drk_imalloc(drk_ictx_t *c, size_t n, size_t sz);
/* drk_imalloc without the report (NULL when out of memory). */
void *drk_iscratch(size_t bytes);
/* free() for anything malloc'ed (drk_imalloc, drk_iscratch, drk_iload_*): big buffers go to
 * the interpreter's cache, emptied by drk_iscratch_flush (at the end of drk_interp_run). */
void drk_ifree(void *p);
void drk_iscratch_flush(void);
/* Copies element si of src to element di of dst (same dtype). */
void drk_icopy_elem(drk_tensor_t *dst, int64_t di, const drk_tensor_t *src, int64_t si);

/* The worker pool: drk_ipar_for (ir/support.h). */
/* pthread_atfork for the pool and the scratch cache (a forked child starts without workers,
 * with fresh locks); idempotent. */
void drk_ipar_register_atfork(void);
void drk_iscratch_atfork_child(void);
/* A grain that splits n into about 4 ranges per thread (at least min_grain each). */
int64_t drk_ipar_grain(int64_t n, int64_t min_grain);

/* Dense f64 GEMM: C[m,n] (+)= sum_k A[m,k]*B[k,n] with arbitrary strides; used by MatMul,
 * Gemm and Conv (im2col). accumulate: add into C instead of overwriting. Every C[m,n] is one
 * running sum in k order 0, 1, ..., K-1, each product rounded then added (no FMA), starting
 * from 0 (or from C): the bits do not depend on the blocking, the SIMD width or the threads.
 * Spread over the pool for large problems (serial when called from a parallel region);
 * drk_igemm_f64_serial never uses the pool. */
void drk_igemm_f64(int64_t M, int64_t N, int64_t K, const double *A, int64_t lda_m, int64_t lda_k,
                   const double *B, int64_t ldb_k, int64_t ldb_n, double *C, int64_t ldc, bool accumulate);
void drk_igemm_f64_serial(int64_t M, int64_t N, int64_t K, const double *A, int64_t lda_m, int64_t lda_k,
                          const double *B, int64_t ldb_k, int64_t ldb_n, double *C, int64_t ldc, bool accumulate);
/* The same with A and/or B read as f32 (a_f32, b_f32: the pointer is a float array): f32 -> f64
 * is exact, so the result is that of f64 copies, without making them. parallel: may use the pool. */
void drk_igemm_mixed(int64_t M, int64_t N, int64_t K, const void *A, bool a_f32, int64_t lda_m, int64_t lda_k,
                     const void *B, bool b_f32, int64_t ldb_k, int64_t ldb_n, double *C, int64_t ldc, bool accumulate,
                     bool parallel);

#endif
