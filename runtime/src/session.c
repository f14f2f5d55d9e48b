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
  if (!s->slots || !s->kernel_slot || !s->kparams || !s->inputs || !s->outputs || !s->kernel_ms)
    return drk_rt_status(a, DRK_STATUS_OUT_OF_MEMORY, "out of memory for session tables");
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

/* Captures the launch sequence once; runs replay it. */
static drk_status_t capture(drk_rt_session_t *s) {
  uint32_t nk = s->mf->n_kernels;
  if (!nk || !s->can_capture) return NULL;
  drk_status_t st = s->ops->begin_capture(s);
  if (st) return st;
  for (uint32_t k = 0; k < nk && !st; k++) st = s->ops->launch(s, k);
  drk_status_t end = s->ops->end_capture(s, !st);
  if (st) {
    drk_status_destroy(end);
    return drk_rt_status_wrap(st, "capturing the launch sequence");
  }
  if (end) return end;
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

void drk_rt_session_set_profiling(void *s, int enabled) { ((drk_rt_session_t *)s)->profiling = enabled != 0; }

const float *drk_rt_session_kernel_ms(const void *sv) {
  const drk_rt_session_t *s = sv;
  return s->profiled ? s->kernel_ms : NULL;
}

float drk_rt_session_last_run_ms(const void *s) { return ((const drk_rt_session_t *)s)->last_ms; }
