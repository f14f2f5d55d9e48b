/* A CPU executor for the subset of tile IR that flat and row kernels use (tests only).
 *
 * Runs one kernel of a verified module over its whole grid, program after program, on host
 * tensors bound to its pointer parameters. Tiles are logical arrays (layouts do not change
 * what a program computes, only how threads hold it); every element of a value is computed
 * in f64/i64 and rounded to the value's dtype after each op (f32: (float), f16/bf16: round to
 * nearest even), so an f32 kernel computes what the GPU computes up to the accuracy of its
 * math functions. Every load and store of an active lane is bounds-checked against its
 * buffer. Shared memory, cp_async and dot (the matmul kernels of lower_matmul.c) run too,
 * with the hazards of a CTA checked per element: a read must follow the write (a cp_async
 * only once a cp_async_wait has retired its group) and a barrier after it, a write a barrier
 * after the last read, and every element read must have been written; shared buffers are
 * addressed by their layout's order, a swizzled fastest dim longer than the swizzle split
 * into swizzle-wide column chunks, as the backends place them (the XOR swizzle is a
 * permutation within each buffer that every access applies alike, left out here), so
 * buffers aliasing the same bytes in different shapes (TMA boxes, wgmma operands) agree.
 *
 * The warp-specialized Hopper kernels (te_run_tma) run too: each warp_group region is a
 * thread, and one baton passes between them, so exactly one runs at a time (deterministic,
 * no data races in the executor). A group runs until it must wait (mbarrier_wait on a phase
 * not yet completed, a named barrier not all its threads reached) and then hands the baton to
 * the next group; every group waiting with nothing changing is a deadlock (an error). TMA
 * loads complete at once: they write the box (zeros, or NaN with oob_nan, outside the
 * tensor) and complete their bytes on the mbarrier, whose phase flips when its arrivals and
 * bytes are all in. wgmma is synchronous. Other ops (TMA stores, clusters, remote arrivals)
 * make it refuse the kernel: TE_UNSUPPORTED. */
#include "tile_exec.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct tv {
  int64_t n;
  double *f;  /* float dtypes */
  int64_t *i; /* ints, bool, pointer offsets */
  int buf;    /* pointers: parameter index */
} tval_t;

typedef struct ex {
  const drk_tile_kernel_t *k;
  drk_tensor_t *bufs;
  int n_bufs;
  tval_t *vals; /* by value id */
  int64_t pid[3];
  char *err;
  size_t err_n;
  bool failed, unsupported;
  /* shared memory of the current program, per byte offset (an element at its first byte):
   * value, the barrier epoch in which it was written (SM_NEVER, SM_PENDING: a cp_async not
   * yet retired), the epoch of its last read; cp_async copies in flight with their commit
   * group (groups < n_groups are committed) */
  int64_t sm_bytes, epoch, n_groups, n_pend, cap_pend;
  double *sm;
  int64_t *sm_written, *sm_read;
  struct pend { int64_t addr, group; double v; } *pend;
  /* Hopper kernels: TMA descriptor specs by parameter; warp groups of the program (threads
   * passing the baton `turn`: a group's index, -1 the program's own thread); mbarriers by
   * address; named barriers' arrived threads and generation; idle: hand-overs since the last
   * change of any barrier (deadlock when it exceeds a few rounds) */
  const te_tma_t *const *tmas;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  struct wg { pthread_t th; const drk_tile_op_t *op; struct ex *e; int id; bool done; } wg[8];
  int n_wg, turn;
  bool in_wg;
  int64_t idle;
  struct mbar { int64_t addr, count, pending, tx, phase; } mbar[64];
  int n_mbar;
  int64_t nbar_arrived[16], nbar_gen[16];
} ex_t;

#define SM_NEVER INT64_MIN
#define SM_PENDING (INT64_MIN + 1)
#define SM_ASYNC (INT64_MIN + 2) /* written by a TMA load: ordered by its mbarrier, not by barriers */

static bool is_fl(drk_dtype_t t) { return drk_dtype_is_float(t); }

static double round_to(drk_dtype_t t, double v) {
  switch (t) {
  case DRK_DT_F32: return (double)(float)v;
  case DRK_DT_F16: return drk_f16_to_f32(drk_f32_to_f16((float)v));
  case DRK_DT_BF16: return drk_bf16_to_f32(drk_f32_to_bf16((float)v));
  default: return v;
  }
}

static int64_t wrap_to(drk_dtype_t t, int64_t v) {
  switch (t) {
  case DRK_DT_BOOL: return v != 0;
  case DRK_DT_I8: return (int8_t)v;
  case DRK_DT_U8: return (uint8_t)v;
  case DRK_DT_I16: return (int16_t)v;
  case DRK_DT_I32: return (int32_t)v;
  default: return v;
  }
}

/* bitcast: the bits of value v (of dtype from) as dtype to (same width; float values are
 * exact in their dtype, ints already wrapped) */
static uint64_t bits_of(drk_dtype_t from, double f, int64_t i) {
  switch (from) {
  case DRK_DT_F16: return drk_f32_to_f16((float)f);
  case DRK_DT_BF16: return drk_f32_to_bf16((float)f);
  case DRK_DT_F8E4M3: return drk_f32_to_f8e4m3((float)f, false);
  case DRK_DT_F8E5M2: return drk_f32_to_f8e5m2((float)f, false);
  case DRK_DT_F32: { float x = (float)f; uint32_t u; memcpy(&u, &x, 4); return u; }
  case DRK_DT_F64: { uint64_t u; memcpy(&u, &f, 8); return u; }
  default: return (uint64_t)i & (drk_dtype_bits(from) >= 64 ? ~0ull : ((1ull << drk_dtype_bits(from)) - 1));
  }
}

static double float_of_bits(drk_dtype_t to, uint64_t b) {
  switch (to) {
  case DRK_DT_F16: return drk_f16_to_f32((uint16_t)b);
  case DRK_DT_BF16: return drk_bf16_to_f32((uint16_t)b);
  case DRK_DT_F8E4M3: return drk_f8e4m3_to_f32((uint8_t)b);
  case DRK_DT_F8E5M2: return drk_f8e5m2_to_f32((uint8_t)b);
  case DRK_DT_F32: { uint32_t u = (uint32_t)b; float x; memcpy(&x, &u, 4); return x; }
  default: { double x; memcpy(&x, &b, 8); return x; }
  }
}

static void fail(ex_t *e, const char *msg, const drk_tile_op_t *op) {
  if (e->failed) return;
  e->failed = true;
  snprintf(e->err, e->err_n, "%s: %s (op %s)", e->k->name, msg, op ? drk_tile_op_name(op->code) : "-");
}

static tval_t *val(ex_t *e, const drk_tile_value_t *v) { return &e->vals[v->id]; }

static tval_t *res(ex_t *e, const drk_tile_value_t *v) {
  tval_t *t = &e->vals[v->id];
  int64_t n = v->type.kind == DRK_TT_SCALAR ? 1 : drk_tile_type_numel(&v->type);
  if (t->n != n || (is_fl(v->type.dtype) && !v->type.is_ptr ? !t->f : !t->i)) {
    free(t->f);
    free(t->i);
    t->f = NULL;
    t->i = NULL;
    t->n = n;
    if (is_fl(v->type.dtype) && !v->type.is_ptr) t->f = calloc((size_t)n, sizeof(double));
    else t->i = calloc((size_t)n, sizeof(int64_t));
  }
  return t;
}

static bool isf(const drk_tile_value_t *v) { return is_fl(v->type.dtype) && !v->type.is_ptr; }

/* element j of a as double / int, whatever a holds */
static double gf(const tval_t *a, int64_t j) { return a->f ? a->f[a->n == 1 ? 0 : j] : (double)a->i[a->n == 1 ? 0 : j]; }
static int64_t gi(const tval_t *a, int64_t j) { return a->i ? a->i[a->n == 1 ? 0 : j] : (int64_t)a->f[a->n == 1 ? 0 : j]; }

static void copyv(tval_t *d, const tval_t *s) {
  if (d->f) memcpy(d->f, s->f, sizeof(double) * (size_t)d->n);
  else memcpy(d->i, s->i, sizeof(int64_t) * (size_t)d->n);
  d->buf = s->buf;
}

static void run_region(ex_t *e, const drk_tile_region_t *r, const drk_tile_op_t **out_yield);

static double ewb_f(drk_tile_opcode_t c, double a, double b) {
  switch (c) {
  case DRK_TOP_ADD: return a + b;
  case DRK_TOP_SUB: return a - b;
  case DRK_TOP_MUL: return a * b;
  case DRK_TOP_DIV: return a / b;
  case DRK_TOP_REM: return fmod(a, b);
  case DRK_TOP_MAX: return isnan(a) || isnan(b) ? NAN : a > b ? a : b;
  case DRK_TOP_MIN: return isnan(a) || isnan(b) ? NAN : a < b ? a : b;
  case DRK_TOP_POW: return pow(a, b);
  default: return NAN;
  }
}

static int64_t ewb_i(drk_tile_opcode_t c, int64_t a, int64_t b, bool *bad) {
  switch (c) {
  case DRK_TOP_ADD: return (int64_t)((uint64_t)a + (uint64_t)b);
  case DRK_TOP_SUB: return (int64_t)((uint64_t)a - (uint64_t)b);
  case DRK_TOP_MUL: return (int64_t)((uint64_t)a * (uint64_t)b);
  case DRK_TOP_DIV: if (!b) { *bad = true; return 0; } return a / b;
  case DRK_TOP_REM: if (!b) { *bad = true; return 0; } return a % b;
  case DRK_TOP_MAX: return a > b ? a : b;
  case DRK_TOP_MIN: return a < b ? a : b;
  case DRK_TOP_AND: return a & b;
  case DRK_TOP_OR: return a | b;
  default: *bad = true; return 0;
  }
}

static double ewu_f(drk_tile_opcode_t c, double a) {
  switch (c) {
  case DRK_TOP_NEG: return -a;
  case DRK_TOP_ABS: return fabs(a);
  case DRK_TOP_EXP: return exp(a);
  case DRK_TOP_EXP2: return exp2(a);
  case DRK_TOP_LOG: return log(a);
  case DRK_TOP_SQRT: return sqrt(a);
  case DRK_TOP_RSQRT: return 1.0 / sqrt(a);
  case DRK_TOP_TANH: return tanh(a);
  case DRK_TOP_ERF: return erf(a);
  case DRK_TOP_SIN: return sin(a);
  case DRK_TOP_COS: return cos(a);
  case DRK_TOP_FLOOR: return floor(a);
  case DRK_TOP_CEIL: return ceil(a);
  case DRK_TOP_RINT: return nearbyint(a);
  default: return NAN;
  }
}

static bool cmp_pred(const char *p, double a, double b) {
  if (!strcmp(p, "lt")) return a < b;
  if (!strcmp(p, "le")) return a <= b;
  if (!strcmp(p, "gt")) return a > b;
  if (!strcmp(p, "ge")) return a >= b;
  if (!strcmp(p, "eq")) return a == b;
  return a != b; /* ne: true for NaN */
}

static bool cmp_pred_i(const char *p, int64_t a, int64_t b) {
  if (!strcmp(p, "lt")) return a < b;
  if (!strcmp(p, "le")) return a <= b;
  if (!strcmp(p, "gt")) return a > b;
  if (!strcmp(p, "ge")) return a >= b;
  if (!strcmp(p, "eq")) return a == b;
  return a != b;
}

/* row-major index of element j of dims `d` mapped into source dims `s` (1 = broadcast) */
static int64_t bidx(int rank, const int64_t *d, const int64_t *s, int64_t j) {
  int64_t off = 0, st = 1;
  for (int k = rank - 1; k >= 0; k--) {
    int64_t c = j % d[k];
    j /= d[k];
    if (s[k] != 1) off += c * st;
    st *= s[k];
  }
  return off;
}

/* ---- shared memory, cp_async, dot ---- */
/* A shared buffer value holds its byte offset in i[0]. */
static tval_t *sres(ex_t *e, const drk_tile_value_t *v) {
  tval_t *t = &e->vals[v->id];
  if (t->n != 1 || !t->i) {
    free(t->f);
    free(t->i);
    t->f = NULL;
    t->n = 1;
    t->i = calloc(1, sizeof(int64_t));
  }
  return t;
}

static int64_t sm_elem_bytes(const drk_tile_type_t *t) { return drk_dtype_bits(t->dtype) / 8; }

/* Byte offset of element j (row-major) of a shared buffer of type t: leading (stage) dims
 * row-major, the layout's dims by its order, a swizzled fastest dim longer than the swizzle
 * in column chunks of `swizzle` bytes (backends/common/lower.c, gpu_smem_elem_addr, without
 * the XOR). */
static int64_t sm_off(const drk_tile_type_t *t, int64_t j) {
  const drk_tile_layout_t *L = t->layout;
  int64_t es = sm_elem_bytes(t);
  if (!L || L->rank < 1 || L->rank > t->rank) return j * es;
  int lr = L->rank, first = t->rank - lr;
  int64_t co[DRK_TILE_MAX_RANK], q = j, lead = 0, block = es;
  for (int d = t->rank - 1; d >= 0; d--) {
    co[d] = q % t->dims[d];
    q /= t->dims[d];
  }
  for (int d = 0; d < first; d++) lead = lead * t->dims[d] + co[d];
  for (int d = first; d < t->rank; d++) block *= t->dims[d];
  int f = first + L->order[0];
  int64_t ce = L->swizzle ? L->swizzle / es : 0, stride = es, rest = 1, off = 0;
  bool chunked = ce > 0 && t->dims[f] > ce;
  for (int i = 0; i < lr; i++) {
    int d = first + L->order[i];
    off += (chunked && i == 0 ? co[d] % ce : co[d]) * stride;
    stride *= chunked && i == 0 ? ce : t->dims[d];
    if (i) rest *= t->dims[d];
  }
  if (chunked) off += co[f] / ce * rest * L->swizzle;
  return lead * block + off;
}

/* byte address of element j (row-major) of shared buffer v; -1 after a failure */
static int64_t sm_addr(ex_t *e, const drk_tile_op_t *op, const drk_tile_value_t *v, int64_t j) {
  int64_t es = sm_elem_bytes(&v->type), a = val(e, v)->i[0] + sm_off(&v->type, j);
  if (a < 0 || a + es > e->sm_bytes) {
    fail(e, "shared memory access outside the kernel's smem", op);
    return -1;
  }
  return a;
}

static bool sm_write_ok(ex_t *e, const drk_tile_op_t *op, int64_t a) {
  if (e->sm_written[a] == SM_PENDING) fail(e, "write to shared memory with a cp_async in flight", op);
  else if (e->sm_read[a] != SM_NEVER && e->sm_read[a] >= e->epoch)
    fail(e, "write to shared memory read since the last barrier (other threads may still read it)", op);
  return !e->failed;
}

static void sm_cp_async(ex_t *e, const drk_tile_op_t *op) {
  const drk_tile_value_t *dst = op->operands[0];
  tval_t *p = val(e, op->operands[1]), *m = op->n_operands > 2 ? val(e, op->operands[2]) : NULL;
  if (p->buf < 0 || p->buf >= e->n_bufs || !e->bufs[p->buf].data) {
    fail(e, "cp_async through an unbound parameter", op);
    return;
  }
  drk_tensor_t *B = &e->bufs[p->buf];
  int64_t nb = drk_tensor_numel(B), n = drk_tile_type_numel(&op->operands[1]->type);
  for (int64_t j = 0; j < n && !e->failed; j++) {
    int64_t a = sm_addr(e, op, dst, j);
    if (a < 0 || !sm_write_ok(e, op, a)) return;
    double v = 0; /* masked off: zero-filled */
    if (!m || gi(m, j)) {
      int64_t off = gi(p, j);
      if (off < 0 || off >= nb) {
        char msg[160];
        snprintf(msg, sizeof msg, "cp_async out of bounds: element %lld of a buffer of %lld", (long long)off, (long long)nb);
        fail(e, msg, op);
        return;
      }
      v = drk_tensor_get_f64(B, off);
    }
    if (e->n_pend == e->cap_pend) {
      e->cap_pend = e->cap_pend ? 2 * e->cap_pend : 1024;
      e->pend = realloc(e->pend, sizeof *e->pend * (size_t)e->cap_pend);
    }
    e->pend[e->n_pend++] = (struct pend){a, e->n_groups, v};
    e->sm_written[a] = SM_PENDING;
  }
}

/* cp_async_wait {pending}: the committed groups but the newest `pending` land now */
static void sm_wait(ex_t *e, int64_t pending) {
  int64_t k = 0;
  for (int64_t i = 0; i < e->n_pend; i++) {
    struct pend *q = &e->pend[i];
    if (q->group < e->n_groups - pending) {
      e->sm[q->addr] = q->v;
      e->sm_written[q->addr] = e->epoch;
    } else {
      e->pend[k++] = *q;
    }
  }
  e->n_pend = k;
}

/* Element j of shared buffer v as a read of it (local_load, or a wgmma operand) sees it:
 * written, landed and published by a barrier; false after a failure. */
static bool sm_read(ex_t *e, const drk_tile_op_t *op, const drk_tile_value_t *v, int64_t j, double *out) {
  int64_t a = sm_addr(e, op, v, j);
  if (a < 0) return false;
  int64_t w = e->sm_written[a];
  if (w == SM_NEVER) fail(e, "read of shared memory never written", op);
  else if (w == SM_PENDING) fail(e, "read of shared memory whose cp_async no cp_async_wait has retired", op);
  else if (w >= e->epoch) fail(e, "read of shared memory written since the last barrier", op);
  if (e->failed) return false;
  e->sm_read[a] = e->epoch;
  *out = e->sm[a];
  return true;
}

static void sm_local_load(ex_t *e, const drk_tile_op_t *op) {
  tval_t *y = res(e, op->results[0]);
  for (int64_t j = 0; j < y->n; j++) {
    double x;
    if (!sm_read(e, op, op->operands[0], j, &x)) return;
    if (y->f) y->f[j] = x;
    else y->i[j] = (int64_t)x;
  }
}

static void sm_local_store(ex_t *e, const drk_tile_op_t *op) {
  const drk_tile_value_t *dst = op->operands[0];
  tval_t *v = val(e, op->operands[1]);
  for (int64_t j = 0; j < v->n; j++) {
    int64_t a = sm_addr(e, op, dst, j);
    if (a < 0 || !sm_write_ok(e, op, a)) return;
    e->sm[a] = gf(v, j);
    e->sm_written[a] = e->epoch;
  }
}

/* tf32: f32 rounded to 10 mantissa bits, to nearest with ties away (cvt.rna.tf32.f32) */
static double tf32(double x) {
  float f = (float)x;
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0x1000u) & 0xffffe000u;
  memcpy(&f, &u, 4);
  return f;
}

/* A dot operand read from shared memory (wgmma): like local_load, hazards checked. */
static bool sm_operand(ex_t *e, const drk_tile_op_t *op, const drk_tile_value_t *v, tval_t *out) {
  out->n = drk_tile_type_numel(&v->type);
  out->f = calloc((size_t)out->n, sizeof *out->f);
  out->i = NULL;
  for (int64_t j = 0; j < out->n; j++)
    if (!sm_read(e, op, v, j, &out->f[j])) return false;
  return true;
}

static void run_dot(ex_t *e, const drk_tile_op_t *op) {
  const drk_tile_type_t *ta = &op->operands[0]->type, *tc = &op->results[0]->type;
  const char *kind = drk_tile_op_attr_ident(op, "kind", "");
  bool smem = ta->kind == DRK_TT_SMEM && op->operands[1]->type.kind == DRK_TT_SMEM && !strcmp(kind, "wgmma");
  if (!smem && (ta->kind != DRK_TT_TILE || op->operands[1]->type.kind != DRK_TT_TILE)) {
    e->unsupported = true;
    fail(e, "dot with shared-memory operands", op);
    return;
  }
  bool tf = ta->dtype == DRK_DT_F32 && !strcmp(kind, "mma_sync");
  tval_t sa = {0}, sb = {0};
  if (smem && (!sm_operand(e, op, op->operands[0], &sa) || !sm_operand(e, op, op->operands[1], &sb))) {
    free(sa.f), free(sb.f);
    return;
  }
  tval_t *A = smem ? &sa : val(e, op->operands[0]), *B = smem ? &sb : val(e, op->operands[1]);
  tval_t *C = val(e, op->operands[2]);
  int64_t M = tc->dims[0], N = tc->dims[1], K = ta->dims[1];
  double *out = malloc(sizeof *out * (size_t)(M * N)); /* C may be the result's own storage */
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      double acc = gf(C, i * N + j);
      for (int64_t k = 0; k < K; k++) {
        double a = gf(A, i * K + k), b = gf(B, k * N + j);
        acc += tf ? tf32(a) * tf32(b) : a * b;
      }
      out[i * N + j] = round_to(tc->dtype, acc);
    }
  tval_t *y = res(e, op->results[0]);
  memcpy(y->f, out, sizeof *out * (size_t)(M * N));
  free(out);
  free(sa.f), free(sb.f);
}

/* ---- Hopper: warp groups, mbarriers, TMA loads, named barriers ---- */

/* (lock held) the baton to the next group not done after the running one (itself when it
 * is the only one left), or back to the program's thread */
static void wg_pass(ex_t *e) {
  for (int i = 1; i <= e->n_wg; i++) {
    int j = (e->turn + i) % e->n_wg;
    if (!e->wg[j].done) {
      e->turn = j;
      pthread_cond_broadcast(&e->cv);
      return;
    }
  }
  e->turn = -1;
  pthread_cond_broadcast(&e->cv);
}

/* The running group must wait (waiting: counts toward a deadlock) or lets the others run
 * (after releasing a buffer: the producer refills it at once, as early as the GPU could, so a
 * consumer that releases a stage before its last read of it reads the next fill's data): hand
 * the baton on, resume when it comes back. */
static void wg_yield(ex_t *e, const drk_tile_op_t *op, bool waiting) {
  if (!e->in_wg) {
    if (waiting) fail(e, "a wait outside warp groups that nothing can satisfy", op);
    return;
  }
  pthread_mutex_lock(&e->mu);
  if (waiting && ++e->idle > 4 * (int64_t)e->n_wg + 4) fail(e, "deadlock: every warp group waits on a barrier no other one will complete", op);
  int me = e->turn;
  wg_pass(e);
  while (e->turn != me) pthread_cond_wait(&e->cv, &e->mu);
  pthread_mutex_unlock(&e->mu);
}

static void *wg_main(void *p) {
  struct wg *w = p;
  ex_t *e = w->e;
  pthread_mutex_lock(&e->mu);
  while (e->turn != w->id) pthread_cond_wait(&e->cv, &e->mu);
  pthread_mutex_unlock(&e->mu);
  run_region(e, w->op->regions[0], NULL);
  pthread_mutex_lock(&e->mu);
  w->done = true;
  wg_pass(e);
  pthread_mutex_unlock(&e->mu);
  return NULL;
}

/* Runs the program's pending warp groups to completion (from the program's thread). */
static void wg_flush(ex_t *e) {
  if (!e->n_wg) return;
  pthread_mutex_lock(&e->mu);
  e->turn = -2;
  e->in_wg = true;
  e->idle = 0;
  int started = 0;
  for (int i = 0; i < e->n_wg; i++) {
    e->wg[i].e = e;
    e->wg[i].id = i;
    e->wg[i].done = false;
    if (pthread_create(&e->wg[i].th, NULL, wg_main, &e->wg[i])) break;
    started++;
  }
  if (started < e->n_wg) {
    for (int i = started; i < e->n_wg; i++) e->wg[i].done = true;
    fail(e, "cannot start a thread for a warp group", NULL);
  }
  if (started) {
    e->turn = 0;
    while (e->wg[e->turn].done && e->turn < started - 1) e->turn++;
    pthread_cond_broadcast(&e->cv);
    while (e->turn != -1) pthread_cond_wait(&e->cv, &e->mu);
  }
  pthread_mutex_unlock(&e->mu);
  for (int i = 0; i < started; i++) pthread_join(e->wg[i].th, NULL);
  e->in_wg = false;
  e->n_wg = 0;
}

static struct mbar *mbar_of(ex_t *e, const drk_tile_op_t *op, const drk_tile_value_t *v) {
  int64_t a = sm_addr(e, op, v, 0);
  if (a < 0) return NULL;
  for (int i = 0; i < e->n_mbar; i++)
    if (e->mbar[i].addr == a) return &e->mbar[i];
  if (op->code != DRK_TOP_MBARRIER_INIT) {
    fail(e, "mbarrier used before its mbarrier_init", op);
    return NULL;
  }
  if (e->n_mbar == (int)(sizeof e->mbar / sizeof e->mbar[0])) {
    e->unsupported = true;
    fail(e, "too many mbarriers for the CPU executor", op);
    return NULL;
  }
  e->mbar[e->n_mbar] = (struct mbar){.addr = a};
  return &e->mbar[e->n_mbar++];
}

/* an arrival or completed bytes changed b: its phase completes with no arrival and no byte
 * left to come */
static void mbar_step(ex_t *e, const drk_tile_op_t *op, struct mbar *b) {
  e->idle = 0;
  if (b->pending < 0 || b->tx < 0) fail(e, "mbarrier over-arrived (more arrivals or bytes than expected)", op);
  if (b->pending == 0 && b->tx == 0) {
    b->phase++;
    b->pending = b->count;
  }
}

static void run_mbarrier(ex_t *e, const drk_tile_op_t *op) {
  struct mbar *b = mbar_of(e, op, op->operands[0]);
  if (!b) return;
  switch (op->code) {
  case DRK_TOP_MBARRIER_INIT:
    b->count = b->pending = drk_tile_op_attr_int(op, "count", 1);
    b->tx = b->phase = 0;
    return;
  case DRK_TOP_MBARRIER_EXPECT_TX: /* arrive.expect_tx: the bytes first, then the arrival */
    b->tx += drk_tile_op_attr_int(op, "bytes", 0);
    b->pending--;
    mbar_step(e, op, b);
    return;
  case DRK_TOP_MBARRIER_ARRIVE:
    if (op->n_operands > 1) {
      e->unsupported = true;
      fail(e, "mbarrier_arrive on another CTA of a cluster", op);
      return;
    }
    b->pending--;
    mbar_step(e, op, b);
    wg_yield(e, op, false);
    return;
  case DRK_TOP_MBARRIER_WAIT: {
    /* try_wait.parity P returns once the phase of parity P has completed, i.e. while the
     * current phase's parity differs from P */
    int64_t par = gi(val(e, op->operands[1]), 0) & 1;
    while (!e->failed && (b->phase & 1) == par) wg_yield(e, op, true);
    return;
  }
  default: return;
  }
}

static void run_tma_load(ex_t *e, const drk_tile_op_t *op) {
  const drk_tile_value_t *dv = op->operands[0], *dst = op->operands[1];
  int pi = val(e, dv)->buf;
  const te_tma_t *T = e->tmas && pi >= 0 && pi < e->n_bufs ? e->tmas[pi] : NULL;
  if (!T || op->n_operands - 3 != dv->type.rank || drk_tile_op_attr_int(op, "multicast", 0)) {
    e->unsupported = true;
    fail(e, T ? "multicast TMA load" : "TMA load through a descriptor with no spec", op);
    return;
  }
  struct mbar *b = mbar_of(e, op, op->operands[2]);
  if (!b) return;
  const drk_tile_type_t *dt = &dv->type;
  const drk_tile_layout_t *L = dt->layout;
  int r = dt->rank;
  int64_t co[DRK_TILE_MAX_RANK], es[DRK_TILE_MAX_RANK], eb = drk_dtype_bits(dt->dtype) / 8;
  if (T->rank != r || !L || L->rank != r) {
    fail(e, "TMA descriptor spec of another rank than its box", op);
    return;
  }
  for (int i = 0; i < r; i++) {
    int d = L->order[i];
    es[i] = T->elem_strides[i] > 1 ? T->elem_strides[i] : 1;
    if ((T->box[i] + es[i] - 1) / es[i] != dt->dims[d]) {
      char msg[160];
      snprintf(msg, sizeof msg, "TMA spec box %d / element stride %lld along dim %d does not land the tile's %lld elements",
               T->box[i], (long long)es[i], i, (long long)dt->dims[d]);
      fail(e, msg, op);
      return;
    }
    co[d] = gi(val(e, op->operands[3 + d]), 0);
  }
  drk_tensor_t *B = &e->bufs[pi];
  int64_t nb = drk_tensor_numel(B), n = drk_tile_type_numel(dt);
  for (int64_t j = 0; j < n && !e->failed; j++) {
    int64_t t[DRK_TILE_MAX_RANK], q = j, off = 0;
    for (int d = r - 1; d >= 0; d--) t[d] = q % dt->dims[d], q /= dt->dims[d];
    bool in = true;
    for (int i = 0; i < r; i++) {
      int d = L->order[i];
      int64_t g = co[d] + t[d] * es[i];
      if (g < 0 || g >= T->dims[i]) in = false;
      off += g * (i ? T->strides[i - 1] / eb : 1);
    }
    double v = T->oob_nan ? NAN : 0.0;
    if (in) {
      if (off < 0 || off >= nb) {
        fail(e, "TMA load outside its tensor (the descriptor's dims or strides exceed the buffer)", op);
        return;
      }
      v = drk_tensor_get_f64(B, off);
    }
    int64_t a = sm_addr(e, op, dst, j);
    if (a < 0) return;
    if (e->sm_written[a] == SM_PENDING) {
      fail(e, "TMA load into shared memory with a cp_async in flight", op);
      return;
    }
    e->sm[a] = v;
    e->sm_written[a] = SM_ASYNC;
  }
  b->tx -= n * eb;
  mbar_step(e, op, b);
}

/* barrier {id, threads} in a warp group: waits for `threads` threads of the groups to arrive */
static void run_named_barrier(ex_t *e, const drk_tile_op_t *op) {
  int64_t id = drk_tile_op_attr_int(op, "id", 0), thr = drk_tile_op_attr_int(op, "threads", 0);
  if (!e->in_wg || id < 0 || id >= 16 || thr <= 0 || drk_tile_op_attr(op, "scope")) {
    e->unsupported = true;
    fail(e, "named barrier outside warp groups, or of a cluster", op);
    return;
  }
  int64_t mine = drk_tile_op_attr_int(e->wg[e->turn].op, "num_warps", 4) * 32, gen = e->nbar_gen[id];
  e->nbar_arrived[id] += mine;
  e->idle = 0;
  if (e->nbar_arrived[id] >= thr) {
    e->nbar_arrived[id] = 0;
    e->nbar_gen[id]++;
    e->epoch++;
    return;
  }
  while (!e->failed && e->nbar_gen[id] == gen) wg_yield(e, op, true);
}

static void run_op(ex_t *e, const drk_tile_op_t *op) {
  if (e->failed) return;
  if (e->n_wg && !e->in_wg && op->code != DRK_TOP_WARP_GROUP) wg_flush(e);
  if (e->failed) return;
  drk_tile_opcode_t c = op->code;
  const drk_tile_value_t *r0 = op->n_results ? op->results[0] : NULL;
  unsigned fl = drk_tile_op_info(c)->flags;
  if (fl & DRK_TOPF_EWB) {
    tval_t *a = val(e, op->operands[0]), *b = val(e, op->operands[1]), *y = res(e, r0);
    drk_dtype_t t = r0->type.dtype;
    for (int64_t j = 0; j < y->n; j++) {
      if (isf(r0)) {
        y->f[j] = round_to(t, ewb_f(c, gf(a, j), gf(b, j)));
      } else {
        bool bad = false;
        y->i[j] = wrap_to(t, ewb_i(c, gi(a, j), gi(b, j), &bad));
        if (bad && c != DRK_TOP_DIV && c != DRK_TOP_REM) {
          fail(e, "integer op not supported", op);
          return;
        }
        if (bad) y->i[j] = 0; /* division by zero: only in inactive lanes, never loaded */
      }
    }
    return;
  }
  if (fl & DRK_TOPF_EWU) {
    tval_t *a = val(e, op->operands[0]), *y = res(e, r0);
    for (int64_t j = 0; j < y->n; j++) {
      if (isf(r0)) y->f[j] = round_to(r0->type.dtype, ewu_f(c, gf(a, j)));
      else if (c == DRK_TOP_NEG) y->i[j] = wrap_to(r0->type.dtype, -gi(a, j));
      else if (c == DRK_TOP_ABS) y->i[j] = wrap_to(r0->type.dtype, llabs(gi(a, j)));
      else { fail(e, "integer unary op", op); return; }
    }
    return;
  }
  switch (c) {
  case DRK_TOP_PROGRAM_ID: res(e, r0)->i[0] = e->pid[drk_tile_op_attr_int(op, "axis", 0)]; return;
  case DRK_TOP_CONSTANT: {
    const drk_tile_attr_t *a = drk_tile_op_attr(op, "value");
    tval_t *y = res(e, r0);
    for (int64_t j = 0; j < y->n; j++) {
      if (y->f) y->f[j] = round_to(r0->type.dtype, a->kind == DRK_TA_FLOAT ? a->f : (double)a->i);
      else y->i[j] = wrap_to(r0->type.dtype, a->kind == DRK_TA_FLOAT ? (int64_t)a->f : a->i);
    }
    return;
  }
  case DRK_TOP_MAKE_RANGE: {
    tval_t *y = res(e, r0);
    int64_t s = drk_tile_op_attr_int(op, "start", 0);
    for (int64_t j = 0; j < y->n; j++) y->i[j] = s + j;
    return;
  }
  case DRK_TOP_SPLAT: {
    tval_t *a = val(e, op->operands[0]), *y = res(e, r0);
    for (int64_t j = 0; j < y->n; j++) {
      if (y->f) y->f[j] = gf(a, 0);
      else y->i[j] = gi(a, 0);
    }
    y->buf = op->operands[0]->param_of ? op->operands[0]->index : a->buf;
    return;
  }
  case DRK_TOP_EXPAND_DIMS: case DRK_TOP_CONVERT_LAYOUT: case DRK_TOP_RESHAPE:
    copyv(res(e, r0), val(e, op->operands[0]));
    return;
  case DRK_TOP_BROADCAST: {
    const drk_tile_type_t *st = &op->operands[0]->type, *dt = &r0->type;
    tval_t *a = val(e, op->operands[0]), *y = res(e, r0);
    for (int64_t j = 0; j < y->n; j++) {
      int64_t s = bidx(dt->rank, dt->dims, st->dims, j);
      if (y->f) y->f[j] = a->f[s];
      else y->i[j] = a->i[s];
    }
    y->buf = a->buf;
    return;
  }
  case DRK_TOP_ADDPTR: {
    tval_t *a = val(e, op->operands[0]), *b = val(e, op->operands[1]), *y = res(e, r0);
    for (int64_t j = 0; j < y->n; j++) y->i[j] = gi(a, j) + gi(b, j);
    y->buf = op->operands[0]->param_of ? op->operands[0]->index : a->buf;
    return;
  }
  case DRK_TOP_LOAD: case DRK_TOP_STORE: {
    bool st = c == DRK_TOP_STORE;
    tval_t *p = val(e, op->operands[0]);
    tval_t *v = st ? val(e, op->operands[1]) : NULL;
    tval_t *m = op->n_operands > (st ? 2 : 1) ? val(e, op->operands[st ? 2 : 1]) : NULL;
    tval_t *o = !st && op->n_operands > 2 ? val(e, op->operands[2]) : NULL;
    tval_t *y = st ? NULL : res(e, r0);
    if (p->buf < 0 || p->buf >= e->n_bufs || !e->bufs[p->buf].data) {
      fail(e, "access through an unbound parameter", op);
      return;
    }
    drk_tensor_t *B = &e->bufs[p->buf];
    int64_t nb = drk_tensor_numel(B);
    int64_t n = st ? drk_tile_type_numel(&op->operands[0]->type) : y->n;
    if (op->operands[0]->type.kind == DRK_TT_SCALAR) n = 1;
    for (int64_t j = 0; j < n; j++) {
      bool on = !m || gi(m, j);
      if (!on) {
        if (y) {
          if (y->f) y->f[j] = o ? gf(o, j) : 0;
          else y->i[j] = o ? gi(o, j) : 0;
        }
        continue;
      }
      int64_t off = gi(p, j);
      if (off < 0 || off >= nb) {
        char msg[160];
        snprintf(msg, sizeof msg, "%s out of bounds: element %lld of a buffer of %lld", st ? "store" : "load",
                 (long long)off, (long long)nb);
        fail(e, msg, op);
        return;
      }
      if (st) {
        if (is_fl(B->dtype)) drk_tensor_set_f64(B, off, gf(v, j));
        else drk_tensor_set_i64(B, off, gi(v, j));
      } else if (y->f) {
        y->f[j] = drk_tensor_get_f64(B, off);
      } else {
        y->i[j] = drk_tensor_get_i64(B, off);
      }
    }
    return;
  }
  case DRK_TOP_SELECT: {
    tval_t *cnd = val(e, op->operands[0]), *a = val(e, op->operands[1]), *b = val(e, op->operands[2]), *y = res(e, r0);
    for (int64_t j = 0; j < y->n; j++) {
      bool t = gi(cnd, j) != 0;
      if (y->f) y->f[j] = t ? gf(a, j) : gf(b, j);
      else y->i[j] = t ? gi(a, j) : gi(b, j);
    }
    return;
  }
  case DRK_TOP_FMA: { /* exact product and sum in double, then the dtype's rounding */
    tval_t *a = val(e, op->operands[0]), *b = val(e, op->operands[1]), *c3 = val(e, op->operands[2]), *y = res(e, r0);
    for (int64_t j = 0; j < y->n; j++) y->f[j] = round_to(r0->type.dtype, fma(gf(a, j), gf(b, j), gf(c3, j)));
    return;
  }
  case DRK_TOP_CMP: {
    const char *pred = drk_tile_op_attr_ident(op, "pred", "eq");
    tval_t *a = val(e, op->operands[0]), *b = val(e, op->operands[1]), *y = res(e, r0);
    bool fa = isf(op->operands[0]);
    for (int64_t j = 0; j < y->n; j++)
      y->i[j] = fa ? cmp_pred(pred, gf(a, j), gf(b, j)) : cmp_pred_i(pred, gi(a, j), gi(b, j));
    return;
  }
  case DRK_TOP_CAST: {
    tval_t *a = val(e, op->operands[0]), *y = res(e, r0);
    drk_dtype_t t = r0->type.dtype;
    bool fa = isf(op->operands[0]);
    for (int64_t j = 0; j < y->n; j++) {
      if (y->f) y->f[j] = round_to(t, fa ? gf(a, j) : (double)gi(a, j));
      else if (fa) {
        double x = gf(a, j);
        y->i[j] = wrap_to(t, isnan(x) ? 0 : (int64_t)x);
      } else {
        y->i[j] = wrap_to(t, gi(a, j));
      }
    }
    return;
  }
  case DRK_TOP_BITCAST: {
    tval_t *a = val(e, op->operands[0]), *y = res(e, r0);
    drk_dtype_t from = op->operands[0]->type.dtype, to = r0->type.dtype;
    for (int64_t j = 0; j < y->n; j++) {
      uint64_t b = bits_of(from, a->f ? gf(a, j) : 0, a->i ? gi(a, j) : 0);
      if (y->f) y->f[j] = float_of_bits(to, b);
      else y->i[j] = wrap_to(to, (int64_t)b);
    }
    return;
  }
  case DRK_TOP_REDUCE: {
    const drk_tile_type_t *st = &op->operands[0]->type;
    int axis = (int)drk_tile_op_attr_int(op, "axis", 0);
    const char *comb = drk_tile_op_attr_ident(op, "combiner", "sum");
    tval_t *a = val(e, op->operands[0]), *y = res(e, r0);
    int64_t inner = 1, len = st->dims[axis];
    for (int k = axis + 1; k < st->rank; k++) inner *= st->dims[k];
    for (int64_t j = 0; j < y->n; j++) {
      int64_t o = j / inner, in = j % inner;
      double af = 0;
      int64_t ai = 0;
      for (int64_t q = 0; q < len; q++) {
        int64_t s = (o * len + q) * inner + in;
        if (y->f) {
          double x = a->f[s];
          if (q == 0) af = x;
          else if (!strcmp(comb, "sum")) af = round_to(r0->type.dtype, af + x);
          else if (!strcmp(comb, "max")) af = isnan(af) || isnan(x) ? NAN : af > x ? af : x;
          else af = isnan(af) || isnan(x) ? NAN : af < x ? af : x;
        } else {
          int64_t x = a->i[s];
          if (q == 0) ai = x;
          else if (!strcmp(comb, "sum")) ai += x;
          else if (!strcmp(comb, "max")) ai = ai > x ? ai : x;
          else ai = ai < x ? ai : x;
        }
      }
      if (y->f) y->f[j] = af;
      else y->i[j] = wrap_to(r0->type.dtype, ai);
    }
    return;
  }
  case DRK_TOP_FOR: {
    int64_t lb = gi(val(e, op->operands[0]), 0), ub = gi(val(e, op->operands[1]), 0), stp = gi(val(e, op->operands[2]), 0);
    const drk_tile_region_t *body = op->regions[0];
    int nc = op->n_operands - 3;
    for (int q = 0; q < nc; q++) copyv(res(e, body->args[1 + q]), val(e, op->operands[3 + q]));
    if (stp <= 0) { fail(e, "for with step <= 0", op); return; }
    for (int64_t iv = lb; iv < ub && !e->failed; iv += stp) {
      res(e, body->args[0])->i[0] = iv;
      const drk_tile_op_t *y = NULL;
      run_region(e, body, &y);
      if (e->failed) return;
      for (int q = 0; q < nc; q++) copyv(res(e, body->args[1 + q]), val(e, y->operands[q]));
    }
    for (int q = 0; q < nc; q++) copyv(res(e, op->results[q]), val(e, body->args[1 + q]));
    return;
  }
  case DRK_TOP_IF: {
    bool t = gi(val(e, op->operands[0]), 0) != 0;
    if (!t && op->n_regions < 2) return;
    const drk_tile_op_t *y = NULL;
    run_region(e, op->regions[t ? 0 : 1], &y);
    for (int q = 0; q < op->n_results && !e->failed; q++) copyv(res(e, op->results[q]), val(e, y->operands[q]));
    return;
  }
  case DRK_TOP_LOCAL_ALLOC: sres(e, r0)->i[0] = drk_tile_op_attr_int(op, "offset", 0); return;
  case DRK_TOP_MEMDESC_INDEX: {
    int64_t b = val(e, op->operands[0])->i[0], i = gi(val(e, op->operands[1]), 0);
    sres(e, r0)->i[0] = b + i * drk_tile_type_numel(&r0->type) * sm_elem_bytes(&r0->type);
    return;
  }
  case DRK_TOP_CP_ASYNC: sm_cp_async(e, op); return;
  case DRK_TOP_CP_ASYNC_COMMIT: e->n_groups++; return;
  case DRK_TOP_CP_ASYNC_WAIT: sm_wait(e, drk_tile_op_attr_int(op, "pending", 0)); return;
  case DRK_TOP_LOCAL_LOAD: sm_local_load(e, op); return;
  case DRK_TOP_LOCAL_STORE: sm_local_store(e, op); return;
  case DRK_TOP_DOT: run_dot(e, op); return;
  /* wgmma runs synchronously here: its fences and commit groups order nothing more */
  case DRK_TOP_WGMMA_FENCE: case DRK_TOP_WGMMA_COMMIT:
    return;
  case DRK_TOP_WGMMA_WAIT:
    for (int i = 0; i < op->n_results; i++) copyv(res(e, op->results[i]), val(e, op->operands[i]));
    return;
  case DRK_TOP_FENCE: {
    const char *fk = drk_tile_op_attr_ident(op, "kind", "");
    if (!strcmp(fk, "proxy_async") || !strcmp(fk, "mbarrier_init")) return;
    break;
  }
  case DRK_TOP_BARRIER:
    if (drk_tile_op_attr(op, "id")) {
      run_named_barrier(e, op);
      return;
    }
    if (drk_tile_op_attr(op, "scope")) break; /* cluster barriers: not executed */
    e->epoch++;
    return;
  case DRK_TOP_WARP_GROUP:
    if (e->in_wg || e->n_wg == (int)(sizeof e->wg / sizeof e->wg[0])) break;
    e->wg[e->n_wg++].op = op;
    return;
  case DRK_TOP_SETMAXNREG: return; /* registers: nothing to do on the CPU */
  case DRK_TOP_MBARRIER_INIT: case DRK_TOP_MBARRIER_EXPECT_TX: case DRK_TOP_MBARRIER_ARRIVE: case DRK_TOP_MBARRIER_WAIT:
    run_mbarrier(e, op);
    return;
  case DRK_TOP_TMA_LOAD: run_tma_load(e, op); return;
  case DRK_TOP_YIELD: case DRK_TOP_RETURN:
    return;
  default:
    break;
  }
  e->unsupported = true;
  fail(e, "op not supported by the CPU executor", op);
}

static void run_region(ex_t *e, const drk_tile_region_t *r, const drk_tile_op_t **out_yield) {
  for (size_t i = 0; i < r->n_ops && !e->failed; i++) {
    const drk_tile_op_t *op = r->ops[i];
    if (op->code == DRK_TOP_YIELD && out_yield) *out_yield = op;
    run_op(e, op);
  }
}

te_result_t te_run(const drk_tile_module_t *m, const drk_tile_kernel_t *k, drk_tensor_t *bufs, int n_bufs,
                   char *err, size_t err_n) {
  return te_run_tma(m, k, bufs, n_bufs, NULL, err, err_n);
}

te_result_t te_run_tma(const drk_tile_module_t *m, const drk_tile_kernel_t *k, drk_tensor_t *bufs, int n_bufs,
                       const te_tma_t *const *tmas, char *err, size_t err_n) {
  ex_t e = {.k = k, .bufs = bufs, .n_bufs = n_bufs, .err = err, .err_n = err_n, .tmas = tmas};
  pthread_mutex_init(&e.mu, NULL);
  pthread_cond_init(&e.cv, NULL);
  if (err_n) err[0] = 0;
  e.vals = calloc(m->next_value_id + 1, sizeof *e.vals);
  for (int i = 0; i < k->n_params; i++) {
    tval_t *t = res(&e, k->params[i]);
    t->buf = i;
    const drk_tile_type_t *ty = &k->params[i]->type;
    if (ty->kind == DRK_TT_SCALAR && !ty->is_ptr) { /* a scalar: bufs[i] holds its value (one element) */
      if (i >= n_bufs || !bufs[i].data || drk_tensor_numel(&bufs[i]) != 1) {
        fail(&e, "a scalar parameter without a one-element value", NULL);
        continue;
      }
      if (t->f) t->f[0] = drk_tensor_get_f64(&bufs[i], 0); /* res() made room for one value */
      else if (t->i) t->i[0] = drk_tensor_get_i64(&bufs[i], 0);
    }
  }
  int64_t g[3];
  for (int i = 0; i < 3; i++) {
    const drk_tile_value_t *p = k->grid[i].param;
    if (!p) g[i] = k->grid[i].c;
    else { /* cdiv(param, c) */
      const tval_t *t = res(&e, p);
      g[i] = t->i && k->grid[i].c > 0 ? (t->i[0] + k->grid[i].c - 1) / k->grid[i].c : -1;
    }
  }
  if (g[0] < 0 || g[1] < 0 || g[2] < 0) fail(&e, "a grid from a parameter without a value", NULL);
  e.sm_bytes = k->smem > 0 ? k->smem : 0;
  e.sm = calloc((size_t)e.sm_bytes + 1, sizeof *e.sm);
  e.sm_written = calloc((size_t)e.sm_bytes + 1, sizeof *e.sm_written);
  e.sm_read = calloc((size_t)e.sm_bytes + 1, sizeof *e.sm_read);
  for (int64_t z = 0; z < g[2] && !e.failed; z++)
    for (int64_t y = 0; y < g[1] && !e.failed; y++)
      for (int64_t x = 0; x < g[0] && !e.failed; x++) {
        e.pid[0] = x;
        e.pid[1] = y;
        e.pid[2] = z;
        /* a fresh CTA: shared memory never written, no copies in flight */
        e.epoch = e.n_groups = e.n_pend = 0;
        e.n_mbar = 0;
        memset(e.nbar_arrived, 0, sizeof e.nbar_arrived);
        memset(e.nbar_gen, 0, sizeof e.nbar_gen);
        for (int64_t a = 0; a < e.sm_bytes; a++) e.sm_written[a] = e.sm_read[a] = SM_NEVER;
        run_region(&e, k->body, NULL);
        wg_flush(&e);
        if (e.n_pend && !e.failed) fail(&e, "cp_async copies still in flight at the end of the kernel", NULL);
      }
  for (uint32_t i = 0; i <= m->next_value_id; i++) {
    free(e.vals[i].f);
    free(e.vals[i].i);
  }
  free(e.vals);
  free(e.sm);
  free(e.sm_written);
  free(e.sm_read);
  free(e.pend);
  pthread_mutex_destroy(&e.mu);
  pthread_cond_destroy(&e.cv);
  return e.unsupported ? TE_UNSUPPORTED : e.failed ? TE_ERROR : TE_OK;
}
