/* The CPU reference interpreter's driver: node dispatch, argument checks, and whole-graph
 * evaluation with use counts so each intermediate is freed right after its last use.
 *
 * Requires a graph whose nodes are in topological order (the builder's guarantee).
 * Guarantees: graph inputs and constants are borrowed (never copied); every returned
 * output tensor owns its data; on error nothing leaks and out_outputs is untouched. */
#include <pthread.h>
#include <stdarg.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "graph_attrs.h"
#include "interp_internal.h"

bool drk_ierr(drk_ictx_t *c, const char *fmt, ...) {
  char buf[900];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  drk_diag_error(c->d, c->n->loc, "%s: %s", drk_op_name(c->n->op), buf);
  return false;
}

/* Big scratch buffers are kept for reuse when freed (drk_ifree) instead of going back to the
 * system: a fresh 400 MB buffer costs 100k page faults and the kernel zeroing it, which was a
 * third of a ResNet-50 batch-64 run. At most CACHE_BYTES are kept; drk_interp_run empties the
 * cache when it returns. glibc only (malloc_usable_size); elsewhere buffers are just freed. */
#if defined(__GLIBC__)
#include <malloc.h>
#define DRK_SCRATCH_CACHE 1
#endif
enum { CACHE_N = 16 };
#define CACHE_MIN ((size_t)4 << 20)
#define CACHE_BYTES ((size_t)3 << 30)
static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
  void *p;
  size_t n;
} cache[CACHE_N];
static size_t cache_bytes;

static void hint_huge(void *p, size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  /* huge pages where the kernel gives them on request: fewer page faults. Only a hint. */
  if (p && bytes >= ((size_t)8 << 20)) {
    uintptr_t a = ((uintptr_t)p + ((uintptr_t)2 << 20) - 1) & ~(((uintptr_t)2 << 20) - 1);
    uintptr_t e = ((uintptr_t)p + bytes) & ~(((uintptr_t)2 << 20) - 1);
    if (e > a) madvise((void *)a, e - a, MADV_HUGEPAGE);
  }
#else
  (void)p, (void)bytes;
#endif
}

void drk_iscratch_atfork_child(void) {
  pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
  cache_mu = m;
}

void *drk_iscratch(size_t bytes) {
#ifdef DRK_SCRATCH_CACHE
  if (bytes >= CACHE_MIN) {
    drk_ipar_register_atfork();
    pthread_mutex_lock(&cache_mu);
    int best = -1;
    for (int i = 0; i < CACHE_N; i++)
      if (cache[i].p && cache[i].n >= bytes && cache[i].n / 2 <= bytes && (best < 0 || cache[i].n < cache[best].n))
        best = i;
    void *p = NULL;
    if (best >= 0) {
      p = cache[best].p;
      cache_bytes -= cache[best].n;
      cache[best].p = NULL;
    }
    pthread_mutex_unlock(&cache_mu);
    if (p) return p;
  }
#endif
  void *p = malloc(bytes > 0 ? bytes : 1);
  hint_huge(p, bytes);
  return p;
}

void drk_ifree(void *p) {
  if (!p) return;
#ifdef DRK_SCRATCH_CACHE
  size_t n = malloc_usable_size(p);
  if (n >= CACHE_MIN) {
    pthread_mutex_lock(&cache_mu);
    /* make room: drop the smallest kept buffers first */
    while (cache_bytes + n > CACHE_BYTES) {
      int s = -1;
      for (int i = 0; i < CACHE_N; i++)
        if (cache[i].p && (s < 0 || cache[i].n < cache[s].n)) s = i;
      if (s < 0) break;
      free(cache[s].p);
      cache_bytes -= cache[s].n;
      cache[s].p = NULL;
    }
    int slot = -1;
    for (int i = 0; i < CACHE_N && slot < 0; i++)
      if (!cache[i].p) slot = i;
    if (slot >= 0 && cache_bytes + n <= CACHE_BYTES) {
      cache[slot].p = p;
      cache[slot].n = n;
      cache_bytes += n;
      p = NULL;
    }
    pthread_mutex_unlock(&cache_mu);
    if (!p) return;
  }
#endif
  free(p);
}

void drk_iscratch_flush(void) {
  pthread_mutex_lock(&cache_mu);
  for (int i = 0; i < CACHE_N; i++) {
    free(cache[i].p);
    cache[i].p = NULL;
  }
  cache_bytes = 0;
  pthread_mutex_unlock(&cache_mu);
}

void *drk_imalloc(drk_ictx_t *c, size_t n, size_t sz) {
  if (sz && n > SIZE_MAX / sz) {
    drk_ierr(c, "out of memory");
    return NULL;
  }
  size_t bytes = n * sz;
  void *p = drk_iscratch(bytes);
  if (!p) drk_ierr(c, "out of memory (%zu bytes)", bytes);
  return p;
}

bool drk_iout(drk_ictx_t *c, int i, drk_dtype_t t, int rank, const int64_t *dims) {
  DRK_ASSERT(i < c->n_out);
  if (rank < 0 || rank > DRK_MAX_RANK) return drk_ierr(c, "output rank %d out of range (max %d)", rank, DRK_MAX_RANK);
  for (int k = 0; k < rank; k++)
    if (dims[k] < 0) return drk_ierr(c, "negative output dimension %lld", (long long)dims[k]);
  int64_t total = 1;
  for (int k = 0; k < rank; k++)
    if (!drk_numel_mul(&total, dims[k])) return drk_ierr(c, "output %d would have more than 2^56 elements", i);
  drk_tensor_free(&c->out[i]);
  if (!drk_tensor_alloc(&c->out[i], t, rank, dims)) return drk_ierr(c, "cannot allocate output %d", i);
  return true;
}

bool drk_ireq(drk_ictx_t *c, int i, unsigned mask) {
  const drk_tensor_t *t = drk_iin(c, i);
  if (!t) return drk_ierr(c, "input %d is required", i);
  if (!((mask >> t->dtype) & 1u)) return drk_ierr(c, "input %d: dtype %s not supported", i, drk_dtype_name(t->dtype));
  return true;
}

int64_t drk_iread_ints(drk_ictx_t *c, const drk_tensor_t *t, int64_t *out, int64_t max, const char *what) {
  if (!drk_dtype_is_int(t->dtype)) {
    drk_ierr(c, "%s must be an integer tensor, got %s", what, drk_dtype_name(t->dtype));
    return -1;
  }
  if (t->rank > 1) {
    drk_ierr(c, "%s must be 0-D or 1-D, got rank %d", what, t->rank);
    return -1;
  }
  int64_t n = drk_tensor_numel(t);
  if (n > max) {
    drk_ierr(c, "%s has %lld elements, at most %lld allowed", what, (long long)n, (long long)max);
    return -1;
  }
  for (int64_t i = 0; i < n; i++) out[i] = drk_tensor_get_i64(t, i);
  return n;
}

bool drk_iaxis(drk_ictx_t *c, int64_t a, int rank, int *out_axis) {
  if (a < -rank || a >= rank || (rank == 0)) {
    if (rank == 0 && (a == 0 || a == -1)) return drk_ierr(c, "axis %lld invalid for a 0-D tensor", (long long)a);
    return drk_ierr(c, "axis %lld out of range for rank %d", (long long)a, rank);
  }
  *out_axis = (int)(a < 0 ? a + rank : a);
  return true;
}

bool drk_ibroadcast(drk_ictx_t *c, int n, const drk_tensor_t *const *ts, int *out_rank, int64_t *out_dims) {
  int r = 0;
  for (int i = 0; i < n; i++)
    if (ts[i] && ts[i]->rank > r) r = ts[i]->rank;
  for (int k = 0; k < r; k++) out_dims[k] = 1;
  for (int i = 0; i < n; i++) {
    const drk_tensor_t *t = ts[i];
    if (!t) continue;
    for (int k = 0; k < t->rank; k++) {
      int o = r - t->rank + k;
      int64_t a = out_dims[o], b = t->dims[k];
      if (a == b || b == 1) continue;
      if (a == 1) {
        out_dims[o] = b;
        continue;
      }
      return drk_ierr(c, "shapes do not broadcast (dimension %d: %lld vs %lld)", o, (long long)a, (long long)b);
    }
  }
  *out_rank = r;
  return true;
}

void drk_istrides(int rank, const int64_t *dims, int64_t *out_strides) {
  int64_t s = 1;
  for (int k = rank - 1; k >= 0; k--) {
    out_strides[k] = s;
    s *= dims[k];
  }
}

void drk_ibstrides(const drk_tensor_t *t, int rank, const int64_t *dims, int64_t *out_strides) {
  int64_t st[DRK_MAX_RANK];
  drk_istrides(t->rank, t->dims, st);
  for (int k = 0; k < rank; k++) {
    int j = k - (rank - t->rank);
    out_strides[k] = (j < 0 || t->dims[j] == 1) ? 0 : st[j];
  }
  (void)dims;
}

void drk_iiter_init(drk_iiter_t *it, int rank, const int64_t *dims, int n, int64_t *const *strides) {
  memset(it, 0, sizeof *it);
  it->rank = rank;
  it->n = n;
  for (int k = 0; k < rank; k++) it->dims[k] = dims[k];
  for (int j = 0; j < n; j++)
    for (int k = 0; k < rank; k++) it->st[j][k] = strides[j][k];
}

void drk_iiter_seek(drk_iiter_t *it, int64_t linear) {
  for (int k = 0; k < it->n; k++) it->off[k] = 0;
  for (int d = it->rank - 1; d >= 0; d--) {
    int64_t i = it->dims[d] ? linear % it->dims[d] : 0;
    linear = it->dims[d] ? linear / it->dims[d] : 0;
    it->idx[d] = i;
    for (int k = 0; k < it->n; k++) it->off[k] += i * it->st[k][d];
  }
}

/* Conversions run in parallel chunks above this many elements (each element on its own). */
enum { PAR_CONVERT = 1 << 16 };

typedef struct conv_job {
  const drk_tensor_t *t;
  void *p;
} conv_job_t;

static void load_f64_range(void *ctx, int64_t i0, int64_t i1, int tid) {
  const conv_job_t *j = ctx;
  const drk_tensor_t *t = j->t;
  double *p = j->p;
  switch (t->dtype) {
    case DRK_DT_F64: memcpy(p + i0, (const double *)t->data + i0, (size_t)(i1 - i0) * 8); break;
    case DRK_DT_F32: { const float *s = t->data; for (int64_t i = i0; i < i1; i++) p[i] = s[i]; } break;
    case DRK_DT_I64: { const int64_t *s = t->data; for (int64_t i = i0; i < i1; i++) p[i] = (double)s[i]; } break;
    case DRK_DT_I32: { const int32_t *s = t->data; for (int64_t i = i0; i < i1; i++) p[i] = s[i]; } break;
    case DRK_DT_U8: { const uint8_t *s = t->data; for (int64_t i = i0; i < i1; i++) p[i] = s[i]; } break;
    case DRK_DT_F16: { const uint16_t *s = t->data; for (int64_t i = i0; i < i1; i++) p[i] = drk_f16_to_f32(s[i]); } break;
    default: for (int64_t i = i0; i < i1; i++) p[i] = drk_tensor_get_f64(t, i); break;
  }
}

static bool sub_byte(drk_dtype_t t) { return drk_dtype_bits(t) < 8; }

void drk_iload_f64_range(const drk_tensor_t *t, int64_t i0, int64_t i1, double *dst) {
  conv_job_t j = {t, dst - i0};
  load_f64_range(&j, i0, i1, 0);
}

double *drk_iload_f64(drk_ictx_t *c, const drk_tensor_t *t) {
  int64_t n = drk_tensor_numel(t);
  double *p = drk_imalloc(c, (size_t)n, sizeof(double));
  if (!p) return NULL;
  conv_job_t j = {t, p};
  if (n >= PAR_CONVERT) drk_ipar_for(n, drk_ipar_grain(n, PAR_CONVERT / 4), load_f64_range, &j);
  else load_f64_range(&j, 0, n, 0);
  return p;
}

int64_t *drk_iload_i64(drk_ictx_t *c, const drk_tensor_t *t) {
  int64_t n = drk_tensor_numel(t);
  int64_t *p = drk_imalloc(c, (size_t)n, sizeof(int64_t));
  if (!p) return NULL;
  switch (t->dtype) {
    case DRK_DT_I64: if (n) memcpy(p, t->data, (size_t)n * 8); break;
    case DRK_DT_I32: { const int32_t *s = t->data; for (int64_t i = 0; i < n; i++) p[i] = s[i]; } break;
    default: for (int64_t i = 0; i < n; i++) p[i] = drk_tensor_get_i64(t, i); break;
  }
  return p;
}

static void store_f64_range(void *ctx, int64_t i0, int64_t i1, int tid) {
  const conv_job_t *j = ctx;
  drk_tensor_t *t = (drk_tensor_t *)j->t;
  const double *v = j->p;
  switch (t->dtype) {
    case DRK_DT_F64: memcpy((double *)t->data + i0, v + i0, (size_t)(i1 - i0) * 8); break;
    case DRK_DT_F32: { float *d = t->data; for (int64_t i = i0; i < i1; i++) d[i] = (float)v[i]; } break;
    case DRK_DT_F16: { uint16_t *d = t->data; for (int64_t i = i0; i < i1; i++) d[i] = drk_f32_to_f16((float)v[i]); } break;
    default: for (int64_t i = i0; i < i1; i++) drk_tensor_set_f64(t, i, v[i]); break;
  }
}

void drk_istore_f64_range(drk_tensor_t *t, int64_t i0, int64_t i1, const double *src) {
  conv_job_t j = {t, (void *)(src - i0)};
  store_f64_range(&j, i0, i1, 0);
}

void drk_istore_f64(drk_tensor_t *t, const double *v) {
  int64_t n = drk_tensor_numel(t);
  conv_job_t j = {t, (void *)v};
  /* sub-byte dtypes pack two elements a byte: one thread writes them all */
  if (n >= PAR_CONVERT && !sub_byte(t->dtype)) drk_ipar_for(n, drk_ipar_grain(n, PAR_CONVERT / 4), store_f64_range, &j);
  else store_f64_range(&j, 0, n, 0);
}

void drk_istore_i64(drk_tensor_t *t, const int64_t *v) {
  int64_t n = drk_tensor_numel(t);
  switch (t->dtype) {
    case DRK_DT_I64: if (n) memcpy(t->data, v, (size_t)n * 8); break;
    case DRK_DT_I32: { int32_t *d = t->data; for (int64_t i = 0; i < n; i++) d[i] = (int32_t)v[i]; } break;
    default: for (int64_t i = 0; i < n; i++) drk_tensor_set_i64(t, i, v[i]); break;
  }
}

void drk_icopy_elem(drk_tensor_t *dst, int64_t di, const drk_tensor_t *src, int64_t si) {
  int bits = drk_dtype_bits(src->dtype);
  uint8_t *d = dst->data;
  const uint8_t *s = src->data;
  switch (bits) {
    case 64: memcpy(d + di * 8, s + si * 8, 8); break;
    case 32: memcpy(d + di * 4, s + si * 4, 4); break;
    case 16: memcpy(d + di * 2, s + si * 2, 2); break;
    case 8: d[di] = s[si]; break;
    default: drk_tensor_set_i64(dst, di, drk_tensor_get_i64(src, si)); break;
  }
}

static _Thread_local int run_depth; /* drk_interp_run active on this thread */

static drk_iop_fn lookup(drk_op_t op) {
  drk_iop_fn f;
  if ((f = drk_interp_lookup_ew(op))) return f;
  if ((f = drk_interp_lookup_reduce(op))) return f;
  if ((f = drk_interp_lookup_mm(op))) return f;
  if ((f = drk_interp_lookup_norm(op))) return f;
  if ((f = drk_interp_lookup_move(op))) return f;
  if ((f = drk_interp_lookup_pool(op))) return f;
  if ((f = drk_interp_lookup_resize(op))) return f;
  if ((f = drk_interp_lookup_layout(op))) return f;
  if ((f = drk_interp_lookup_quant(op))) return f;
  return NULL;
}

bool drk_interp_node(const drk_node_t *n, const drk_tensor_t *const *inputs, drk_tensor_t *out_outputs,
                     drk_diag_t *d) {
  drk_ictx_t c = {n, inputs, n->n_inputs, NULL, n->n_outputs, d};
  const drk_op_info_t *info = drk_op_info(n->op);
  if (n->n_inputs < info->min_inputs || (info->max_inputs >= 0 && n->n_inputs > info->max_inputs))
    return drk_ierr(&c, "%d inputs given, expected %d..%d", n->n_inputs, info->min_inputs, info->max_inputs);
  if (n->n_outputs < info->min_outputs || (info->max_outputs >= 0 && n->n_outputs > info->max_outputs))
    return drk_ierr(&c, "%d outputs given, expected %d..%d", n->n_outputs, info->min_outputs, info->max_outputs);
  if (n->n_outputs > 64) return drk_ierr(&c, "too many outputs (%d)", n->n_outputs);
  /* the verifier's attribute checks, for graphs run without it (the table is one answer) */
  if (!drk_node_check_attrs(n, n->loc, d)) return false;
  for (int i = 0; i < n->n_inputs; i++) {
    const drk_tensor_t *t = inputs[i];
    if (!t) continue;
    if (t->rank < 0 || t->rank > DRK_MAX_RANK || (unsigned)t->dtype >= DRK_DT_COUNT)
      return drk_ierr(&c, "input %d is malformed", i);
    if (drk_tensor_numel(t) && !t->data) return drk_ierr(&c, "input %d has no data", i);
  }
  drk_iop_fn f = lookup(n->op);
  if (!f) return drk_ierr(&c, "not supported by the interpreter");
  /* tf32 = 1 (precision auto's choice): the f32 operands A and B rounded to tf32 as the GPU's
   * cvt.rna.tf32.f32 does before a tf32 mma (nearest, ties away, 10 mantissa bits) */
  drk_tensor_t tf[2];
  const drk_tensor_t *tf_in[3];
  bool tf32 = drk_node_attr_int(n, "tf32", 0) && n->n_inputs >= 2 && n->n_inputs <= 3;
  if (tf32) {
    for (int i = 0; i < n->n_inputs; i++) tf_in[i] = inputs[i];
    for (int i = 0; i < 2; i++) {
      memset(&tf[i], 0, sizeof tf[i]);
      if (!inputs[i] || inputs[i]->dtype != DRK_DT_F32) continue;
      if (!drk_tensor_alloc(&tf[i], DRK_DT_F32, inputs[i]->rank, inputs[i]->dims)) {
        drk_tensor_free(&tf[0]);
        return drk_ierr(&c, "out of memory rounding operands to tf32");
      }
      int64_t m = drk_tensor_numel(inputs[i]);
      const unsigned char *src = inputs[i]->data;
      unsigned char *dst = tf[i].data;
      for (int64_t k = 0; k < m; k++) {
        uint32_t u;
        memcpy(&u, src + 4 * k, 4);
        u = drk_tf32_round_bits(u);
        memcpy(dst + 4 * k, &u, 4);
      }
      tf_in[i] = &tf[i];
    }
    c.in = tf_in;
  }
  drk_tensor_t outs[64];
  memset(outs, 0, sizeof outs);
  c.out = outs;
  bool ok = f(&c);
  if (tf32) {
    drk_tensor_free(&tf[0]);
    drk_tensor_free(&tf[1]);
  }
  if (!run_depth) drk_iscratch_flush(); /* a node on its own (constant folding) keeps nothing */
  if (ok) {
    for (int i = 0; i < n->n_outputs; i++) DRK_ASSERT(outs[i].data != NULL);
    memcpy(out_outputs, outs, sizeof(drk_tensor_t) * (size_t)n->n_outputs);
  } else {
    for (int i = 0; i < n->n_outputs; i++) drk_tensor_free(&outs[i]);
    if (d && d->n_errors == 0) drk_diag_error(d, n->loc, "%s: failed", drk_op_name(n->op));
  }
  return ok;
}

typedef struct slot {
  drk_tensor_t t;
  bool live;
  bool pinned; /* a graph output: kept to the end */
  int64_t uses;
} slot_t;

static void free_slots(slot_t *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (s[i].live) drk_tensor_free(&s[i].t);
  free(s);
  run_depth--;
  drk_iscratch_flush();
}

bool drk_interp_run(const drk_graph_t *g, const drk_tensor_t *inputs, drk_tensor_t *out_outputs,
                    drk_diag_t *d) {
  size_t nv = g->next_value_id;
  slot_t *s = calloc(nv ? nv : 1, sizeof *s);
  run_depth++; /* free_slots, on every way out, undoes it */
  if (!s) {
    run_depth--;
    drk_diag_error(d, drk_loc_none, "interpreter: out of memory");
    return false;
  }
  for (size_t i = 0; i < g->n_inputs; i++) {
    const drk_value_t *v = g->inputs[i];
    const drk_tensor_t *t = &inputs[i];
    if (t->dtype != v->dtype) {
      drk_diag_error(d, v->loc, "input '%s': dtype %s given, %s expected", v->name, drk_dtype_name(t->dtype),
                     drk_dtype_name(v->dtype));
      free_slots(s, nv);
      return false;
    }
    if (v->shape.rank >= 0 && t->rank != v->shape.rank) {
      drk_diag_error(d, v->loc, "input '%s': rank %d given, %d expected", v->name, t->rank, v->shape.rank);
      free_slots(s, nv);
      return false;
    }
    for (int k = 0; k < t->rank && v->shape.rank >= 0; k++)
      if (!v->shape.dims[k].sym && v->shape.dims[k].size >= 0 && v->shape.dims[k].size != t->dims[k]) {
        drk_diag_error(d, v->loc, "input '%s': dimension %d is %lld, %lld expected", v->name, k,
                       (long long)t->dims[k], (long long)v->shape.dims[k].size);
        free_slots(s, nv);
        return false;
      }
    slot_t *sl = &s[v->id];
    sl->t = *t;
    sl->t.owned = false;
    sl->live = true;
  }
  for (size_t i = 0; i < g->n_nodes; i++) {
    const drk_node_t *n = g->nodes[i];
    if (n->dead) continue;
    for (int k = 0; k < n->n_inputs; k++)
      if (n->inputs[k]) s[n->inputs[k]->id].uses++;
  }
  for (size_t i = 0; i < g->n_outputs; i++) s[g->outputs[i]->id].pinned = true;

  const drk_tensor_t *args[256];
  for (size_t i = 0; i < g->n_nodes; i++) {
    const drk_node_t *n = g->nodes[i];
    if (n->dead) continue;
    if (n->n_inputs > 256) {
      drk_diag_error(d, n->loc, "%s: too many inputs (%d)", drk_op_name(n->op), n->n_inputs);
      free_slots(s, nv);
      return false;
    }
    for (int k = 0; k < n->n_inputs; k++) {
      const drk_value_t *v = n->inputs[k];
      if (!v) {
        args[k] = NULL;
        continue;
      }
      slot_t *sl = &s[v->id];
      if (!sl->live && v->kind == DRK_VALUE_CONST) {
        if (!drk_tensor_from_const(&sl->t, v)) {
          drk_diag_error(d, v->loc, "constant '%s' has no static shape or too little data", v->name);
          free_slots(s, nv);
          return false;
        }
        sl->live = true;
      }
      if (!sl->live) {
        drk_diag_error(d, n->loc, "%s: input %d ('%s') has no value (not computed before use)",
                       drk_op_name(n->op), k, v->name);
        free_slots(s, nv);
        return false;
      }
      args[k] = &sl->t;
    }
    drk_tensor_t outs[64];
    if (n->n_outputs > 64) {
      drk_diag_error(d, n->loc, "%s: too many outputs", drk_op_name(n->op));
      free_slots(s, nv);
      return false;
    }
    if (!drk_interp_node(n, args, outs, d)) {
      free_slots(s, nv);
      return false;
    }
    for (int k = 0; k < n->n_outputs; k++) {
      const drk_value_t *v = n->outputs[k];
      if (!v) {
        drk_tensor_free(&outs[k]);
        continue;
      }
      slot_t *sl = &s[v->id];
      if (sl->live) drk_tensor_free(&sl->t);
      sl->t = outs[k];
      sl->live = true;
      if (sl->uses == 0 && !sl->pinned) {
        drk_tensor_free(&sl->t);
        sl->live = false;
      }
    }
    for (int k = 0; k < n->n_inputs; k++) {
      const drk_value_t *v = n->inputs[k];
      if (!v) continue;
      slot_t *sl = &s[v->id];
      if (--sl->uses == 0 && !sl->pinned && sl->live) {
        drk_tensor_free(&sl->t);
        sl->live = false;
      }
    }
  }
  drk_tensor_t *res = calloc(g->n_outputs ? g->n_outputs : 1, sizeof *res);
  if (!res) {
    drk_diag_error(d, drk_loc_none, "interpreter: out of memory");
    free_slots(s, nv);
    return false;
  }
  for (size_t i = 0; i < g->n_outputs; i++) {
    const drk_value_t *v = g->outputs[i];
    slot_t *sl = &s[v->id];
    if (!sl->live && v->kind == DRK_VALUE_CONST && drk_tensor_from_const(&sl->t, v)) sl->live = true;
    bool ok = sl->live;
    if (ok) {
      if (sl->t.owned) {
        res[i] = sl->t; /* move; a repeated output is copied from res below */
        sl->t.owned = false;
      } else {
        size_t j = 0;
        for (; j < i; j++)
          if (g->outputs[j] == v) break;
        ok = drk_tensor_copy(&res[i], j < i ? &res[j] : &sl->t);
      }
    }
    if (!ok) {
      drk_diag_error(d, v->loc, "output '%s' has no value", v->name);
      for (size_t j = 0; j < i; j++) drk_tensor_free(&res[j]);
      free(res);
      free_slots(s, nv);
      return false;
    }
  }
  memcpy(out_outputs, res, sizeof *res * g->n_outputs);
  free(res);
  free_slots(s, nv);
  return true;
}
