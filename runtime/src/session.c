/* Driver-independent session logic (runtime/src/session.h): the host tables every driver
 * needs, the kernel-parameter layout, and the fixed order of work in session creation and
 * runs. The driver supplies the calls into its API through drk_rt_session_ops_t. */
#include <string.h>

#include "runtime/src/session.h"

#define PARAM_SLOT 8
#define TMA_SIZE 128
#define TMA_ALIGN 128

size_t drk_rt_param_layout(const drk_modfile_t *mf, size_t *out_offsets) {
  size_t o = 0, i = 0;
  for (uint32_t k = 0; k < mf->n_kernels; k++)
    for (uint32_t p = 0; p < mf->kernels[k].n_params; p++, i++) {
      int tma = mf->kernels[k].params[p].kind == DRK_MODFILE_PARAM_TMA;
      if (tma) o = (o + TMA_ALIGN - 1) & ~(size_t)(TMA_ALIGN - 1);
      if (out_offsets) out_offsets[i] = o;
      o += tma ? TMA_SIZE : PARAM_SLOT;
    }
  return o;
}

static size_t param_count(const drk_modfile_t *mf) {
  size_t n = 0;
  for (uint32_t k = 0; k < mf->n_kernels; k++) n += mf->kernels[k].n_params;
  return n;
}

/* Slots, bindings, timings and the parameter store with each kernel's kernelParams. */
static drk_status_t make_tables(drk_rt_session_t *s) {
  const drk_allocator_t *a = &s->alloc;
  const drk_modfile_t *mf = s->mf;
  uint32_t nk = mf->n_kernels;
  s->slots = drk_rt_alloc(a, (nk + 1) * sizeof *s->slots, 16);
  s->kernel_slot = drk_rt_alloc(a, (nk + 1) * sizeof *s->kernel_slot, 16);
  s->kparams = drk_rt_alloc(a, (nk + 1) * sizeof *s->kparams, 16);
  s->inputs = drk_rt_alloc(a, (mf->n_inputs + 1) * sizeof *s->inputs, 16);
  s->outputs = drk_rt_alloc(a, (mf->n_outputs + 1) * sizeof *s->outputs, 16);
  s->kernel_ms = drk_rt_alloc(a, (nk + 1) * sizeof *s->kernel_ms, 16);
  uint32_t nb = mf->n_buckets ? mf->n_buckets : 1;
  s->n_in = mf->n_inputs / nb, s->n_out = mf->n_outputs / nb, s->n_user_in = drk_modfile_user_inputs(mf);
  s->out_dims = drk_rt_alloc(a, ((size_t)s->n_out + 1) * DRK_MODFILE_MAX_RANK * sizeof *s->out_dims, 16);
  if (!s->slots || !s->kernel_slot || !s->kparams || !s->inputs || !s->outputs || !s->kernel_ms || !s->out_dims)
    return drk_rt_status(a, DRK_STATUS_OUT_OF_MEMORY, "out of memory for session tables");
  for (uint32_t i = 0; mf->n_buckets && i < s->n_out; i++) /* before a run: the largest bucket's */
    memcpy(s->out_dims + (size_t)i * DRK_MODFILE_MAX_RANK, mf->outputs[(mf->n_buckets - 1) * s->n_out + i].dims,
           DRK_MODFILE_MAX_RANK * sizeof *s->out_dims);
  for (uint32_t k = 0; k < nk; k++) {
    uint32_t j = 0;
    while (j < s->n_slots && s->slots[j] != mf->kernels[k].slot) j++;
    if (j == s->n_slots) s->slots[s->n_slots++] = mf->kernels[k].slot;
    s->kernel_slot[k] = j;
  }
  size_t np = param_count(mf);
  size_t *offsets = drk_rt_alloc(a, (np + 1) * sizeof *offsets, 16);
  if (!offsets) return drk_rt_status(a, DRK_STATUS_OUT_OF_MEMORY, "out of memory for kernel parameters");
  s->pstore_size = drk_rt_param_layout(mf, offsets);
  s->n_param_ptrs = np + 1;
  s->pstore = drk_rt_alloc(a, s->pstore_size, TMA_ALIGN);
  s->kparam_ptrs = drk_rt_alloc(a, s->n_param_ptrs * sizeof(void *), 16);
  if (s->pstore && s->kparam_ptrs) {
    for (size_t i = 0; i < np; i++) s->kparam_ptrs[i] = s->pstore + offsets[i];
    size_t i = 0;
    for (uint32_t k = 0; k < nk; k++) s->kparams[k] = s->kparam_ptrs + i, i += mf->kernels[k].n_params;
  }
  drk_rt_free(a, offsets, (np + 1) * sizeof *offsets);
  if (!s->pstore || !s->kparam_ptrs) return drk_rt_status(a, DRK_STATUS_OUT_OF_MEMORY, "out of memory for kernel parameters");
  return NULL;
}

void drk_rt_session_fill_params(drk_rt_session_t *s) {
  const drk_modfile_t *mf = s->mf;
  for (uint32_t k = 0; k < mf->n_kernels; k++)
    for (uint32_t p = 0; p < mf->kernels[k].n_params; p++) {
      const drk_modfile_param_t *pa = &mf->kernels[k].params[p];
      if (pa->kind == DRK_MODFILE_PARAM_BUFFER) {
        uint64_t v = s->arena + pa->offset; /* device pointers are 64-bit, little-endian */
        memcpy(s->kparams[k][p], &v, sizeof v);
      } else if (pa->kind == DRK_MODFILE_PARAM_SCALAR) {
        memcpy(s->kparams[k][p], pa->scalar, pa->scalar_size);
      }
    }
}

/* Bucket b's kernels: [*first, *first + *n). A static module is one bucket of every kernel. */
static void bucket_kernels(const drk_modfile_t *mf, uint32_t b, uint32_t *first, uint32_t *n) {
  *first = mf->n_buckets ? mf->buckets[b].first_kernel : 0;
  *n = mf->n_buckets ? mf->buckets[b].n_kernels : mf->n_kernels;
}

/* Captures each bucket's launch sequence once (graph b); runs replay it. */
static drk_status_t capture(drk_rt_session_t *s) {
  const drk_modfile_t *mf = s->mf;
  if (!mf->n_kernels || !s->can_capture) return NULL;
  for (uint32_t b = 0; b < (mf->n_buckets ? mf->n_buckets : 1); b++) {
    uint32_t first, nk;
    bucket_kernels(mf, b, &first, &nk);
    if (!nk) continue;
    s->graph = b;
    drk_status_t st = s->ops->begin_capture(s);
    if (st) return st;
    for (uint32_t k = first; k < first + nk && !st; k++) st = s->ops->launch(s, k);
    drk_status_t end = s->ops->end_capture(s, !st);
    if (st) {
      drk_status_destroy(end);
      return mf->n_buckets ? drk_rt_status_wrap(st, "capturing the launch sequence of bucket %u", b)
                           : drk_rt_status_wrap(st, "capturing the launch sequence");
    }
    if (end) return end;
  }
  s->graph = 0;
  s->has_graph = 1;
  return NULL;
}

drk_status_t drk_rt_session_create(const drk_rt_session_ops_t *ops, void *rt, const drk_allocator_t *a, const drk_modfile_t *mf,
                                   const char *device, void **out_session) {
  drk_rt_session_t *s = drk_rt_alloc(a, ops->size, 16);
  if (!s) return drk_rt_status(a, DRK_STATUS_OUT_OF_MEMORY, "out of memory for the session");
  s->ops = ops;
  s->rt = rt;
  s->alloc = *a;
  s->mf = mf;
  drk_status_t st = make_tables(s);
  if (!st) st = ops->init(s);
  if (!st) st = capture(s);
  if (!st) st = ops->sync(s, 0);
  if (st) {
    drk_rt_session_destroy(s);
    return drk_rt_status_wrap(st, "session on %s", device);
  }
  *out_session = s;
  return NULL;
}

void drk_rt_session_destroy(void *sv) {
  drk_rt_session_t *s = sv;
  if (!s) return;
  s->ops->release(s);
  drk_allocator_t a = s->alloc;
  const drk_modfile_t *mf = s->mf;
  uint32_t nk = mf->n_kernels;
  drk_rt_free(&a, s->slots, (nk + 1) * sizeof *s->slots);
  drk_rt_free(&a, s->kernel_slot, (nk + 1) * sizeof *s->kernel_slot);
  drk_rt_free(&a, s->kparams, (nk + 1) * sizeof *s->kparams);
  drk_rt_free(&a, s->inputs, (mf->n_inputs + 1) * sizeof *s->inputs);
  drk_rt_free(&a, s->outputs, (mf->n_outputs + 1) * sizeof *s->outputs);
  drk_rt_free(&a, s->kernel_ms, (nk + 1) * sizeof *s->kernel_ms);
  drk_rt_free(&a, s->out_dims, ((size_t)s->n_out + 1) * DRK_MODFILE_MAX_RANK * sizeof *s->out_dims);
  drk_rt_free(&a, s->pstore, s->pstore_size);
  drk_rt_free(&a, s->kparam_ptrs, s->n_param_ptrs * sizeof(void *));
  drk_rt_free(&a, s, s->ops->size);
}

void drk_rt_session_bind(void *sv, size_t index, void *ptr, size_t size, drk_memory_kind_t kind, int output) {
  drk_rt_session_t *s = sv;
  drk_rt_binding_t *b = output ? &s->outputs[index] : &s->inputs[index];
  *b = (drk_rt_binding_t){ptr, size, kind};
}

/* Copies bound inputs in, runs the kernels (the captured graph, or one by one between
 * events when profiling or when there is no graph), copies bound outputs out, syncs. */
drk_status_t drk_rt_session_run(void *sv) {
  drk_rt_session_t *s = sv;
  const drk_rt_session_ops_t *ops = s->ops;
  const drk_modfile_t *mf = s->mf;
  uint32_t nk = mf->n_kernels;
  drk_status_t st;
  if ((st = ops->enter(s)) || (st = ops->record(s, DRK_RT_EVENT_RUN_START(nk)))) return st;
  for (uint32_t i = 0; i < mf->n_inputs; i++)
    if (s->inputs[i].ptr && (st = ops->copy(s, mf->inputs[i].offset, &s->inputs[i], 0)))
      return drk_rt_status_wrap(st, "input %u ('%s')", i, mf->inputs[i].name);
  if (s->profiling || (nk && !s->has_graph)) {
    for (uint32_t k = 0; k < nk; k++)
      if ((s->profiling && (st = ops->record(s, k))) || (st = ops->launch(s, k))) return st;
    if (s->profiling && nk && (st = ops->record(s, nk))) return st;
  } else if (s->has_graph && (st = ops->replay(s))) {
    return st;
  }
  for (uint32_t i = 0; i < mf->n_outputs; i++)
    if (s->outputs[i].ptr && (st = ops->copy(s, mf->outputs[i].offset, &s->outputs[i], 1)))
      return drk_rt_status_wrap(st, "output %u ('%s')", i, mf->outputs[i].name);
  if ((st = ops->record(s, DRK_RT_EVENT_RUN_END(nk))) || (st = ops->sync(s, 1)) ||
      (st = ops->elapsed(s, &s->last_ms, DRK_RT_EVENT_RUN_START(nk), DRK_RT_EVENT_RUN_END(nk))))
    return st;
  if (s->profiling) {
    for (uint32_t k = 0; k < nk; k++)
      if ((st = ops->elapsed(s, &s->kernel_ms[k], k, k + 1))) return st;
    s->profiled = 1;
  }
  return NULL;
}

/* ---- runs at actual shapes (modules with buckets) ---- */

static unsigned dtype_bits(int32_t code) {
  switch (code) {
  case 1: case 6: case 12: return 32;
  case 2: case 3: case 9: case 17: case 18: case 19: case 20: return 8;
  case 4: case 5: case 10: case 16: return 16;
  case 7: case 11: case 13: return 64;
  default: return 4; /* u4, i4: the reader allows no other code */
  }
}

/* Tensor t (numbering one bucket's tensors: inputs, then outputs) of bucket b. */
static const drk_modfile_tensor_t *bucket_tensor(const drk_rt_session_t *s, uint32_t b, uint32_t t) {
  return t < s->n_in ? &s->mf->inputs[b * s->n_in + t] : &s->mf->outputs[b * s->n_out + (t - s->n_in)];
}

/* The dynamic dim of axis a of tensor t, or -1. */
static int dyn_dim_of(const drk_modfile_t *mf, uint32_t t, uint32_t a) {
  for (uint32_t j = 0; j < mf->n_dyn_axes; j++)
    if (mf->dyn_axes[j].tensor == t && mf->dyn_axes[j].axis == a) return (int)mf->dyn_axes[j].dim;
  return -1;
}

/* The actual sizes of the dynamic dims from the inputs' dims, checked: ranges, the other
 * dims, inputs that disagree. */
static drk_status_t actual_sizes(drk_rt_session_t *s, const int64_t *const *dims, int64_t *act) {
  const drk_modfile_t *mf = s->mf;
  const drk_allocator_t *a = &s->alloc;
  uint32_t last = mf->n_buckets ? mf->n_buckets - 1 : 0;
  for (uint32_t d = 0; d < DRK_MODFILE_MAX_DYN_DIMS; d++) act[d] = -1;
  for (uint32_t i = 0; i < s->n_user_in; i++) {
    const drk_modfile_tensor_t *t = bucket_tensor(s, last, i);
    if (!dims[i]) return drk_rt_status(a, DRK_STATUS_INVALID_ARGUMENT, "input %u ('%s'): no dims given", i, t->name);
    for (uint32_t k = 0; k < t->rank; k++) {
      int d = dyn_dim_of(mf, i, k);
      int64_t v = dims[i][k];
      if (d < 0 && v != t->dims[k])
        return drk_rt_status(a, DRK_STATUS_INVALID_ARGUMENT, "input %u ('%s') axis %u: size %lld, the module's is %lld", i,
                             t->name, k, (long long)v, (long long)t->dims[k]);
      if (d < 0) continue;
      const drk_modfile_dyn_dim_t *x = &mf->dyn_dims[d];
      if (v < x->lo || v > x->hi)
        return drk_rt_status(a, DRK_STATUS_INVALID_ARGUMENT, "input %u ('%s') axis %u: dim '%s' = %lld is outside the "
                             "module's range %lld..%lld", i, t->name, k, x->name, (long long)v, (long long)x->lo,
                             (long long)x->hi);
      if (act[d] >= 0 && act[d] != v)
        return drk_rt_status(a, DRK_STATUS_INVALID_ARGUMENT, "input %u ('%s') axis %u: dim '%s' = %lld, but an earlier "
                             "input gives it %lld", i, t->name, k, x->name, (long long)v, (long long)act[d]);
      act[d] = v;
    }
  }
  return NULL;
}

/* The smallest bucket (fewest elements over the dynamic dims; the first of equals) holding act. */
static uint32_t pick_bucket(const drk_modfile_t *mf, const int64_t *act) {
  uint32_t best = mf->n_buckets - 1;
  double best_n = -1;
  for (uint32_t b = 0; b < mf->n_buckets; b++) {
    double n = 1;
    int holds = 1;
    for (uint32_t d = 0; d < mf->n_dyn_dims; d++) {
      holds &= mf->buckets[b].size[d] >= act[d];
      n *= (double)mf->buckets[b].size[d];
    }
    if (holds && (best_n < 0 || n < best_n)) best = b, best_n = n;
  }
  return best;
}

/* Copies a binding holding the actual shape adims into (output 0) or out of the bucket's
 * tensor bt (shape bt->dims): blocks of whole rows up to the innermost padded axis. Inputs
 * are zeroed first where padded, so padded indices are valid ones (pad_exact.h). */
static drk_status_t copy_padded(drk_rt_session_t *s, const drk_modfile_tensor_t *bt, const int64_t *adims,
                                const drk_rt_binding_t *b, int output) {
  int p = -1;
  for (uint32_t k = 0; k < bt->rank; k++)
    if (adims[k] != bt->dims[k]) p = (int)k;
  if (p < 0) return s->ops->copy(s, bt->offset, b, output);
  unsigned bits = dtype_bits(bt->dtype);
  uint64_t inner = 1, blocks = 1;
  for (uint32_t k = (uint32_t)p + 1; k < bt->rank; k++) inner *= (uint64_t)bt->dims[k];
  for (int k = 0; k < p; k++) blocks *= (uint64_t)adims[k];
  if (bits < 8 && (inner * (uint64_t)adims[p] * bits % 8 || inner * (uint64_t)bt->dims[p] * bits % 8))
    return drk_rt_status(&s->alloc, DRK_STATUS_INVALID_ARGUMENT, "not implemented: padding a 4-bit tensor ('%s') "
                         "inside a byte", bt->name);
  uint64_t block = inner * (uint64_t)adims[p] * bits / 8;
  drk_status_t st;
  if (!output && (st = s->ops->zero(s, bt->offset, bt->size))) return st;
  for (uint64_t i = 0; i < blocks; i++) {
    /* block i's index over axes 0..p-1 of the actual shape, as a row of the bucket's */
    uint64_t rem = i, row = 0, stride = 1;
    for (int k = p - 1; k >= 0; k--) {
      row += (rem % (uint64_t)adims[k]) * stride;
      rem /= (uint64_t)adims[k];
      stride *= (uint64_t)bt->dims[k];
    }
    uint64_t dst = row * (uint64_t)bt->dims[p] * inner * bits / 8;
    drk_rt_binding_t part = {(uint8_t *)b->ptr + i * block, (size_t)block, b->kind};
    if ((st = s->ops->copy(s, bt->offset + dst, &part, output))) return st;
  }
  return NULL;
}

static uint64_t shape_bytes(const drk_modfile_tensor_t *t, const int64_t *dims) {
  uint64_t n = 1;
  for (uint32_t k = 0; k < t->rank; k++) n *= (uint64_t)dims[k];
  return (n * dtype_bits(t->dtype) + 7) / 8;
}

/* The actual dims of tensor t of bucket b at sizes act. */
static void actual_dims(const drk_rt_session_t *s, uint32_t b, uint32_t t, const int64_t *act, int64_t *out) {
  const drk_modfile_tensor_t *x = bucket_tensor(s, b, t);
  for (uint32_t k = 0; k < x->rank; k++) {
    int d = dyn_dim_of(s->mf, t, k);
    out[k] = d < 0 ? x->dims[k] : act[d];
  }
}

static drk_status_t check_binding(drk_rt_session_t *s, uint32_t t, const drk_rt_binding_t *b, const int64_t *dims) {
  const drk_modfile_tensor_t *x = bucket_tensor(s, 0, t);
  uint64_t want = shape_bytes(x, dims);
  if (!b->ptr || b->size == want) return NULL;
  return drk_rt_status(&s->alloc, DRK_STATUS_INVALID_ARGUMENT, "%s %u ('%s'): %zu bytes bound, the actual shape takes %llu",
                       t < s->n_in ? "input" : "output", t < s->n_in ? t : t - s->n_in, x->name, b->size,
                       (unsigned long long)want);
}

drk_status_t drk_rt_session_run_shapes(void *sv, const int64_t *const *dims) {
  drk_rt_session_t *s = sv;
  const drk_rt_session_ops_t *ops = s->ops;
  const drk_modfile_t *mf = s->mf;
  if (!mf->n_buckets) { /* static: the dims must be the module's */
    for (uint32_t i = 0; i < mf->n_inputs; i++)
      for (uint32_t k = 0; k < mf->inputs[i].rank; k++)
        if (!dims[i] || dims[i][k] != mf->inputs[i].dims[k])
          return drk_rt_status(&s->alloc, DRK_STATUS_INVALID_ARGUMENT, "input %u ('%s') axis %u: size %lld, the module "
                               "(static shapes) has %lld", i, mf->inputs[i].name, k, dims[i] ? (long long)dims[i][k] : -1LL,
                               (long long)mf->inputs[i].dims[k]);
    return drk_rt_session_run(s);
  }
  int64_t act[DRK_MODFILE_MAX_DYN_DIMS], ad[DRK_MODFILE_MAX_RANK];
  drk_status_t st = actual_sizes(s, dims, act);
  if (st) return st;
  uint32_t b = pick_bucket(mf, act), first, nk;
  bucket_kernels(mf, b, &first, &nk);
  for (uint32_t t = 0; t < s->n_in + s->n_out; t++) {
    if (t >= s->n_user_in && t < s->n_in) continue; /* length inputs: filled below */
    actual_dims(s, b, t, act, ad);
    if ((st = check_binding(s, t, t < s->n_in ? &s->inputs[t] : &s->outputs[t - s->n_in], ad))) return st;
    if (t >= s->n_in) memcpy(s->out_dims + (size_t)(t - s->n_in) * DRK_MODFILE_MAX_RANK, ad, sizeof ad);
  }
  s->bucket = b;
  uint32_t all = mf->n_kernels;
  if ((st = ops->enter(s)) || (st = ops->record(s, DRK_RT_EVENT_RUN_START(all)))) return st;
  for (uint32_t i = 0; i < s->n_user_in; i++) {
    actual_dims(s, b, i, act, ad);
    if (s->inputs[i].ptr && (st = copy_padded(s, bucket_tensor(s, b, i), ad, &s->inputs[i], 0)))
      return drk_rt_status_wrap(st, "input %u ('%s')", i, bucket_tensor(s, b, i)->name);
  }
  for (uint32_t d = 0; d < mf->n_dyn_dims; d++) { /* the padding masks' actual sizes */
    uint32_t li = mf->dyn_dims[d].length_input;
    if (!li) continue;
    s->lengths[d] = act[d];
    drk_rt_binding_t len = {&s->lengths[d], sizeof s->lengths[d], DRK_MEMORY_HOST};
    if ((st = ops->copy(s, bucket_tensor(s, b, li - 1)->offset, &len, 0)))
      return drk_rt_status_wrap(st, "the length input of dim '%s'", mf->dyn_dims[d].name);
  }
  if (s->profiling || (nk && !s->has_graph)) {
    for (uint32_t k = first; k < first + nk; k++)
      if ((s->profiling && (st = ops->record(s, k))) || (st = ops->launch(s, k))) return st;
    if (s->profiling && nk && (st = ops->record(s, first + nk))) return st;
  } else if (nk && s->has_graph) {
    s->graph = b;
    if ((st = ops->replay(s))) return st;
  }
  for (uint32_t i = 0; i < s->n_out; i++) {
    actual_dims(s, b, s->n_in + i, act, ad);
    if (s->outputs[i].ptr && (st = copy_padded(s, bucket_tensor(s, b, s->n_in + i), ad, &s->outputs[i], 1)))
      return drk_rt_status_wrap(st, "output %u ('%s')", i, bucket_tensor(s, b, s->n_in + i)->name);
  }
  if ((st = ops->record(s, DRK_RT_EVENT_RUN_END(all))) || (st = ops->sync(s, 1)) ||
      (st = ops->elapsed(s, &s->last_ms, DRK_RT_EVENT_RUN_START(all), DRK_RT_EVENT_RUN_END(all))))
    return st;
  if (s->profiling) {
    for (uint32_t k = 0; k < all; k++) s->kernel_ms[k] = 0; /* the other buckets' kernels did not run */
    for (uint32_t k = first; k < first + nk; k++)
      if ((st = ops->elapsed(s, &s->kernel_ms[k], k, k + 1))) return st;
    s->profiled = 1;
  }
  return NULL;
}

void drk_rt_session_output_shape(const void *sv, size_t index, int64_t *out_dims, uint32_t *out_rank) {
  const drk_rt_session_t *s = sv;
  const drk_modfile_tensor_t *t = bucket_tensor(s, 0, s->n_in + (uint32_t)index);
  *out_rank = t->rank;
  if (s->mf->n_buckets) memcpy(out_dims, s->out_dims + index * DRK_MODFILE_MAX_RANK, t->rank * sizeof *out_dims);
  else memcpy(out_dims, t->dims, t->rank * sizeof *out_dims);
}

size_t drk_rt_session_last_bucket(const void *s) { return ((const drk_rt_session_t *)s)->bucket; }

void drk_rt_session_set_profiling(void *s, int enabled) { ((drk_rt_session_t *)s)->profiling = enabled != 0; }

const float *drk_rt_session_kernel_ms(const void *sv) {
  const drk_rt_session_t *s = sv;
  return s->profiled ? s->kernel_ms : NULL;
}

float drk_rt_session_last_run_ms(const void *s) { return ((const drk_rt_session_t *)s)->last_ms; }
