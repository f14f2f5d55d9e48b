/* The public runtime and session functions: argument checks, the choice of driver, and
 * dispatch through its table (runtime/src/driver.h).
 *
 * Choice: DRK_DRIVER_AUTO tries CUDA first, then HIP only when CUDA reports no driver or
 * no device (any other CUDA failure means an NVIDIA GPU is there and is returned as is).
 * When both fail, one status carries both messages, CUDA's first; its code is NO_DRIVER
 * only when neither library loads. The handles own the driver's state and remember the
 * table, so every later call goes to the driver that made the object. */
#include <stdlib.h>
#include <string.h>

#include "runtime/src/driver.h"

struct drk_runtime {
  const drk_driver_t *drv;
  drk_allocator_t alloc;
  void *impl;
};

struct drk_session {
  const drk_driver_t *drv;
  drk_runtime_t *rt;
  const drk_modfile_t *mf;
  void *impl;
  /* Set while a thread binds or runs: a second thread at the same time gets
   * DRK_STATUS_INVALID_ARGUMENT instead of a torn binding or a half-captured graph. */
  unsigned char busy;
};

/* Takes the session for one call; false when another thread holds it. */
static int session_take(drk_session_t *s) { return !__atomic_test_and_set(&s->busy, __ATOMIC_ACQUIRE); }
static void session_give(drk_session_t *s) { __atomic_clear(&s->busy, __ATOMIC_RELEASE); }
static drk_status_t session_in_use(drk_session_t *s, const char *call) {
  return drk_rt_status(&s->rt->alloc, DRK_STATUS_INVALID_ARGUMENT,
                       "%s: the session is in use by another thread (a session serves one thread at a time; create a session per thread)", call);
}

static int no_gpu(drk_status_t st) {
  drk_status_code_t c = drk_status_code(st);
  return c == DRK_STATUS_NO_DRIVER || c == DRK_STATUS_NO_DEVICE;
}

/* Both drivers failed: one status naming both attempts. */
static drk_status_t combine(const drk_allocator_t *a, drk_status_t cuda, drk_status_t hip) {
  drk_status_code_t cc = drk_status_code(cuda), hc = drk_status_code(hip), code = DRK_STATUS_NO_DRIVER;
  if (!no_gpu(hip)) code = hc; /* HIP found a device and failed on it: its code */
  else if (cc == DRK_STATUS_NO_DEVICE || hc == DRK_STATUS_NO_DEVICE) code = DRK_STATUS_NO_DEVICE;
  drk_status_t st = drk_rt_status(a, code, "%s; %s", drk_status_message(cuda), drk_status_message(hip));
  drk_status_destroy(cuda);
  drk_status_destroy(hip);
  return st;
}

drk_status_t drk_runtime_create(const drk_runtime_options_t *opts, drk_runtime_t **out_rt) {
  return drk_runtime_create_driver(opts, DRK_DRIVER_AUTO, NULL, out_rt);
}

drk_status_t drk_runtime_create_driver(const drk_runtime_options_t *opts, drk_driver_kind_t driver, const char *hip_library,
                                       drk_runtime_t **out_rt) {
  drk_runtime_options_t o = {0};
  if (opts) o = *opts;
  const drk_allocator_t *a = drk_rt_allocator(o.allocator);
  if (!out_rt) return drk_rt_status(a, DRK_STATUS_INVALID_ARGUMENT, "drk_runtime_create: out_rt is NULL");
  if (driver != DRK_DRIVER_AUTO && driver != DRK_DRIVER_CUDA && driver != DRK_DRIVER_HIP)
    return drk_rt_status(a, DRK_STATUS_INVALID_ARGUMENT, "drk_runtime_create_driver: unknown driver kind %d", (int)driver);
  drk_runtime_t *rt = drk_rt_alloc(a, sizeof *rt, 16);
  if (!rt) return drk_rt_status(a, DRK_STATUS_OUT_OF_MEMORY, "out of memory for the runtime");
  rt->alloc = *a;
  drk_status_t st = NULL, cuda_st = NULL;
  if (driver != DRK_DRIVER_HIP) {
    rt->drv = &drk_driver_cuda;
    st = rt->drv->runtime_create(&o, o.driver_library, a, &rt->impl);
    if (st && driver == DRK_DRIVER_AUTO && no_gpu(st)) cuda_st = st, st = NULL;
    else if (st) goto fail;
    else goto done;
  }
  rt->drv = &drk_driver_hip;
  st = rt->drv->runtime_create(&o, hip_library, a, &rt->impl);
  if (st && cuda_st) st = combine(a, cuda_st, st);
  else if (!st) drk_status_destroy(cuda_st);
  if (st) goto fail;
done:
  *out_rt = rt;
  return NULL;
fail:
  drk_rt_free(a, rt, sizeof *rt);
  return st;
}

void drk_runtime_destroy(drk_runtime_t *rt) {
  if (!rt) return;
  rt->drv->runtime_destroy(rt->impl);
  drk_allocator_t a = rt->alloc;
  drk_rt_free(&a, rt, sizeof *rt);
}

const char *drk_runtime_device_name(const drk_runtime_t *rt) { return rt ? rt->drv->device_name(rt->impl) : ""; }
unsigned drk_runtime_device_sm(const drk_runtime_t *rt) { return rt ? rt->drv->device_sm(rt->impl) : 0; }
const char *drk_runtime_device_arch(const drk_runtime_t *rt) { return rt ? rt->drv->device_arch(rt->impl) : ""; }
const char *drk_runtime_driver_name(const drk_runtime_t *rt) { return rt ? rt->drv->name : ""; }

static drk_status_t session_create(drk_runtime_t *rt, const drk_module_t *m, drk_session_t **out_session);

/* A module with a fallback plan (drkc --target=sm_90): the main plan, and the fallback when the
 * device has no code in the main one (DRK_STATUS_NO_IMAGE: a GPU later than sm_90 JIT-compiles
 * the fallback's compute_90 PTX). DRK_VARIANT=fallback takes the fallback at once (to test it
 * on a device that runs both). */
drk_status_t drk_session_create(drk_runtime_t *rt, const drk_module_t *m, drk_session_t **out_session) {
  if (!rt || !m || !out_session) return drk_rt_status(rt ? &rt->alloc : NULL, DRK_STATUS_INVALID_ARGUMENT, "drk_session_create: NULL argument");
  const char *v = getenv("DRK_VARIANT");
  if (v && *v && strcmp(v, "main") != 0 && strcmp(v, "fallback") != 0)
    return drk_rt_status(&rt->alloc, DRK_STATUS_INVALID_ARGUMENT, "DRK_VARIANT=%s: expected main or fallback", v);
  if (v && strcmp(v, "fallback") == 0) {
    if (!m->fallback)
      return drk_rt_status(&rt->alloc, DRK_STATUS_INVALID_ARGUMENT, "DRK_VARIANT=fallback, but the module has no fallback plan (drkc --target=sm_90 makes one)");
    return drk_rt_status_wrap(session_create(rt, m->fallback, out_session), "the fallback plan (DRK_VARIANT=fallback)");
  }
  drk_status_t st = session_create(rt, m, out_session);
  if (drk_status_code(st) != DRK_STATUS_NO_IMAGE || !m->fallback || (v && *v)) return st;
  drk_status_t fst = session_create(rt, m->fallback, out_session);
  if (!fst) {
    drk_status_destroy(st);
    return NULL;
  }
  fst = drk_rt_status_wrap(fst, "%s; its fallback plan (targets %s)", drk_status_message(st), m->fallback->mf->prov.targets);
  drk_status_destroy(st);
  return fst;
}

static drk_status_t session_create(drk_runtime_t *rt, const drk_module_t *m, drk_session_t **out_session) {
  if (m->mf->weights_size && !m->mf->weights)
    return drk_rt_status(&rt->alloc, DRK_STATUS_INVALID_ARGUMENT, "the module's weights are in a side file (%s): load them first (drk_module_load_weights)", m->mf->weights_file ? m->mf->weights_file : "?");
  drk_session_t *s = drk_rt_alloc(&rt->alloc, sizeof *s, 16);
  if (!s) return drk_rt_status(&rt->alloc, DRK_STATUS_OUT_OF_MEMORY, "out of memory for the session");
  s->drv = rt->drv;
  s->rt = rt;
  s->mf = m->mf;
  drk_status_t st = s->drv->session_create(rt->impl, m, &s->impl);
  if (st) {
    drk_rt_free(&rt->alloc, s, sizeof *s);
    return st;
  }
  *out_session = s;
  return NULL;
}

void drk_session_destroy(drk_session_t *s) {
  if (!s) return;
  s->drv->session_destroy(s->impl);
  drk_rt_free(&s->rt->alloc, s, sizeof *s);
}

static drk_status_t bind(drk_session_t *s, size_t index, void *ptr, size_t size, drk_memory_kind_t kind, int output) {
  if (!s) return drk_rt_status(NULL, DRK_STATUS_INVALID_ARGUMENT, "bind: session is NULL");
  /* with buckets: the graph's tensors, bound at most at the largest bucket's size (the last) */
  size_t nb = s->mf->n_buckets ? s->mf->n_buckets : 1;
  size_t all = (output ? s->mf->n_outputs : s->mf->n_inputs) / nb, n = output ? all : drk_modfile_user_inputs(s->mf);
  const drk_modfile_tensor_t *ts = (output ? s->mf->outputs : s->mf->inputs) + (nb - 1) * all;
  const char *what = output ? "output" : "input";
  if (index >= n) return drk_rt_status(&s->rt->alloc, DRK_STATUS_INVALID_ARGUMENT, "%s index %zu out of range (module has %zu)", what, index, n);
  if (!ptr && size == 0) { /* unbind: the tensor stays in the arena */
    if (!session_take(s)) return session_in_use(s, "bind");
    s->drv->session_bind(s->impl, index, NULL, 0, kind, output);
    session_give(s);
    return NULL;
  }
  if (!ptr || (s->mf->n_buckets ? size > ts[index].size : size != ts[index].size))
    return drk_rt_status(&s->rt->alloc, DRK_STATUS_INVALID_ARGUMENT, "%s %zu ('%s'): bound %zu bytes at %p, the tensor has %llu bytes", what, index, ts[index].name, size, ptr, (unsigned long long)ts[index].size);
  if (kind != DRK_MEMORY_HOST && kind != DRK_MEMORY_DEVICE) return drk_rt_status(&s->rt->alloc, DRK_STATUS_INVALID_ARGUMENT, "%s %zu: unknown memory kind %d", what, index, (int)kind);
  if (!session_take(s)) return session_in_use(s, "bind");
  s->drv->session_bind(s->impl, index, ptr, size, kind, output);
  session_give(s);
  return NULL;
}

drk_status_t drk_session_bind_input(drk_session_t *s, size_t index, void *ptr, size_t size, drk_memory_kind_t kind) { return bind(s, index, ptr, size, kind, 0); }
drk_status_t drk_session_bind_output(drk_session_t *s, size_t index, void *ptr, size_t size, drk_memory_kind_t kind) { return bind(s, index, ptr, size, kind, 1); }

drk_status_t drk_session_run(drk_session_t *s) {
  if (!s) return drk_rt_status(NULL, DRK_STATUS_INVALID_ARGUMENT, "drk_session_run: session is NULL");
  if (s->mf->n_buckets)
    return drk_rt_status(&s->rt->alloc, DRK_STATUS_INVALID_ARGUMENT, "the module has shape buckets (drkc --dynamic): "
                         "run it with drk_session_run_shapes and the inputs' actual dims");
  if (!session_take(s)) return session_in_use(s, "drk_session_run");
  drk_status_t st = s->drv->session_run(s->impl);
  session_give(s);
  return st;
}

drk_status_t drk_session_run_shapes(drk_session_t *s, const int64_t *const *input_dims) {
  if (!s || !input_dims)
    return drk_rt_status(s ? &s->rt->alloc : NULL, DRK_STATUS_INVALID_ARGUMENT, "drk_session_run_shapes: NULL argument");
  if (!session_take(s)) return session_in_use(s, "drk_session_run_shapes");
  drk_status_t st = s->drv->session_run_shapes(s->impl, input_dims);
  session_give(s);
  return st;
}

drk_status_t drk_session_output_shape(const drk_session_t *s, size_t index, int64_t *out_dims, uint32_t *out_rank) {
  size_t n = s ? s->mf->n_outputs / (s->mf->n_buckets ? s->mf->n_buckets : 1) : 0;
  if (!s || !out_dims || !out_rank || index >= n)
    return drk_rt_status(s ? &s->rt->alloc : NULL, DRK_STATUS_INVALID_ARGUMENT, "drk_session_output_shape: output %zu of %zu, "
                         "or a NULL argument", index, n);
  s->drv->session_output_shape(s->impl, index, out_dims, out_rank);
  return NULL;
}

const char *drk_session_targets(const drk_session_t *s) { return s ? s->mf->prov.targets : ""; }
size_t drk_session_num_kernels(const drk_session_t *s) { return s ? s->mf->n_kernels : 0; }
const char *drk_session_kernel_name(const drk_session_t *s, size_t index) {
  return s && index < s->mf->n_kernels ? s->mf->kernels[index].name : NULL;
}
size_t drk_session_last_bucket(const drk_session_t *s) { return s ? s->drv->session_last_bucket(s->impl) : 0; }

drk_status_t drk_session_set_profiling(drk_session_t *s, int enabled) {
  if (!s) return drk_rt_status(NULL, DRK_STATUS_INVALID_ARGUMENT, "drk_session_set_profiling: session is NULL");
  s->drv->session_set_profiling(s->impl, enabled);
  return NULL;
}

drk_status_t drk_session_kernel_times(const drk_session_t *s, float *out_ms, size_t n) {
  if (!s || !out_ms || n != s->mf->n_kernels)
    return drk_rt_status(s ? &s->rt->alloc : NULL, DRK_STATUS_INVALID_ARGUMENT, "drk_session_kernel_times: need an array of %u floats", s ? s->mf->n_kernels : 0);
  const float *ms = s->drv->session_kernel_ms(s->impl);
  if (!ms) return drk_rt_status(&s->rt->alloc, DRK_STATUS_INVALID_ARGUMENT, "no profiled run yet: call drk_session_set_profiling(s, 1) and run");
  if (n) memcpy(out_ms, ms, n * sizeof *out_ms);
  return NULL;
}

drk_status_t drk_session_last_run_ms(const drk_session_t *s, float *out_ms) {
  if (!s || !out_ms) return drk_rt_status(NULL, DRK_STATUS_INVALID_ARGUMENT, "drk_session_last_run_ms: NULL argument");
  *out_ms = s->drv->session_last_run_ms(s->impl);
  return NULL;
}
