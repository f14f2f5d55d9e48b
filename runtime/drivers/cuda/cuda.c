/* The CUDA driver for libdrkrt: runtimes (driver + device + primary context + stream) and
 * sessions (a module's images loaded, arena allocated, weights uploaded, launch sequence
 * captured as a CUDA graph).
 *
 * The driver is reached only through dlopen; every drk_cu_result_t is converted where it enters,
 * with cuGetErrorName/String and a hint. Image choice per code slot: a cubin for the
 * device's exact sm, else a cubin of the same major and not newer that is not
 * arch-specific, else the newest PTX not newer than the device (JIT), else
 * DRK_STATUS_NO_IMAGE listing what the module has.
 *
 * Reached through the drk_driver_cuda table (runtime/src/driver.h): runtime/src/runtime.c
 * has checked every handle and binding before a call arrives here. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/package/fatbin.h"
#include "runtime/drivers/cuda/cuda_api.h"
#include "runtime/src/driver.h"

#define DRK_CUDA_DEFAULT_LIBRARY "libcuda.so.1"
#define MAX_FATBIN_ENTRIES 64

typedef struct cuda_rt {
  drk_allocator_t alloc;
  void *lib;
  drk_cuda_api_t cu;
  drk_cu_device_t dev;
  int ordinal;
  drk_cu_context_t ctx;
  drk_cu_stream_t stream;
  unsigned sm;
  char arch[16];
  char name[320];
} cuda_rt_t;

/* ---- error conversion ---- */
static drk_status_t cu_error(cuda_rt_t *rt, drk_cu_result_t r, const char *call, const char *hint) {
  const char *name = NULL, *text = NULL;
  if (rt->cu.GetErrorName) rt->cu.GetErrorName(r, &name);
  if (rt->cu.GetErrorString) rt->cu.GetErrorString(r, &text);
  drk_status_code_t code = DRK_STATUS_DRIVER;
  if (r == DRK_CUDA_ERROR_OUT_OF_MEMORY) code = DRK_STATUS_OUT_OF_MEMORY;
  else if (r == DRK_CUDA_ERROR_NO_DEVICE || r == DRK_CUDA_ERROR_INVALID_DEVICE) code = DRK_STATUS_NO_DEVICE;
  else if (r == DRK_CUDA_ERROR_NO_BINARY_FOR_GPU) code = DRK_STATUS_NO_IMAGE;
  return drk_rt_status(&rt->alloc, code, "%s: %s (%s)%s%s", call, name ? name : "CUDA_ERROR_?", text ? text : "unknown error",
                       hint && *hint ? "; hint: " : "", hint ? hint : "");
}
#define CU_CHECK(rt, expr, hint)                                                          \
  do {                                                                                    \
    drk_cu_result_t r_ = (expr);                                                                 \
    if (r_ != DRK_CUDA_SUCCESS) return cu_error((rt), r_, #expr, (hint));                  \
  } while (0)

/* ---- runtime ---- */
static void cuda_runtime_destroy(void *rtv);

static drk_status_t cuda_runtime_create(const drk_runtime_options_t *opts, const char *library, const drk_allocator_t *a, void **out_rt) {
  drk_runtime_options_t o = *opts;
  const char *libname = library;
  if (!libname) libname = getenv("DRK_CUDA_DRIVER");
  if (!libname || !*libname) libname = DRK_CUDA_DEFAULT_LIBRARY;
  void *lib = dlopen(libname, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char *e = dlerror();
    return drk_rt_status(a, DRK_STATUS_NO_DRIVER, "no CUDA driver: dlopen(\"%s\") failed: %s", libname, e ? e : "unknown error");
  }
  cuda_rt_t *rt = drk_rt_alloc(a, sizeof *rt, 16);
  if (!rt) {
    dlclose(lib);
    return drk_rt_status(a, DRK_STATUS_OUT_OF_MEMORY, "out of memory for the runtime");
  }
  rt->alloc = *a;
  rt->lib = lib;
  rt->ordinal = o.device;
  drk_status_t st = NULL;
#define LOAD(name, sym, args)                                                                 \
  if (!st) {                                                                                  \
    *(void **)&rt->cu.name = dlsym(lib, sym);                                                 \
    if (!rt->cu.name)                                                                         \
      st = drk_rt_status(a, DRK_STATUS_NO_DRIVER, "no CUDA driver: %s lacks %s (driver too old?)", libname, sym); \
  }
  DRK_CUDA_FUNCS(LOAD)
#undef LOAD
#define LOAD_OPT(name, sym, args) *(void **)&rt->cu.name = dlsym(lib, sym);
  DRK_CUDA_OPTIONAL_FUNCS(LOAD_OPT)
#undef LOAD_OPT
  if (st) goto fail;
  drk_cu_result_t r = rt->cu.Init(0);
  if (r == DRK_CUDA_ERROR_NO_DEVICE) {
    st = drk_rt_status(a, DRK_STATUS_NO_DEVICE, "no CUDA device: cuInit reports CUDA_ERROR_NO_DEVICE (driver %s loaded)", libname);
    goto fail;
  }
  if (r) { st = cu_error(rt, r, "cuInit", "is the NVIDIA kernel module loaded and /dev/nvidia* accessible?"); goto fail; }
  int count = 0, drv = 0;
  if ((r = rt->cu.DeviceGetCount(&count))) { st = cu_error(rt, r, "cuDeviceGetCount", NULL); goto fail; }
  if (o.device < 0 || o.device >= count) {
    st = drk_rt_status(a, DRK_STATUS_NO_DEVICE, "CUDA device %d requested, %d present", o.device, count);
    goto fail;
  }
  int major = 0, minor = 0;
  size_t mem = 0;
  char dname[256] = "";
  if ((r = rt->cu.DeviceGet(&rt->dev, o.device)) || (r = rt->cu.DeviceGetAttribute(&major, DRK_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, rt->dev)) ||
      (r = rt->cu.DeviceGetAttribute(&minor, DRK_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, rt->dev)) ||
      (r = rt->cu.DeviceGetName(dname, (int)sizeof dname - 1, rt->dev)) || (r = rt->cu.DeviceTotalMem(&mem, rt->dev)) ||
      (r = rt->cu.DriverGetVersion(&drv))) {
    st = cu_error(rt, r, "querying the device", NULL);
    goto fail;
  }
  rt->sm = (unsigned)(major * 10 + minor);
  snprintf(rt->arch, sizeof rt->arch, "sm_%u", rt->sm);
  snprintf(rt->name, sizeof rt->name, "%s (sm_%u, %.1f GiB, driver %d.%d)", dname, rt->sm, (double)mem / (1024.0 * 1024 * 1024), drv / 1000, (drv % 1000) / 10);
  if ((r = rt->cu.DevicePrimaryCtxRetain(&rt->ctx, rt->dev))) { st = cu_error(rt, r, "cuDevicePrimaryCtxRetain", NULL); goto fail; }
  if ((r = rt->cu.CtxSetCurrent(rt->ctx))) { st = cu_error(rt, r, "cuCtxSetCurrent", NULL); goto fail; }
  if ((r = rt->cu.StreamCreate(&rt->stream, DRK_CU_STREAM_NON_BLOCKING))) { st = cu_error(rt, r, "cuStreamCreate", NULL); goto fail; }
  *out_rt = rt;
  return NULL;
fail:
  cuda_runtime_destroy(rt);
  return st;
}

static void cuda_runtime_destroy(void *rtv) {
  cuda_rt_t *rt = rtv;
  if (!rt) return;
  if (rt->stream) rt->cu.StreamDestroy(rt->stream);
  if (rt->ctx) rt->cu.DevicePrimaryCtxRelease(rt->dev);
  dlclose(rt->lib);
  drk_allocator_t a = rt->alloc;
  drk_rt_free(&a, rt, sizeof *rt);
}

static const char *cuda_device_name(const void *rt) { return ((const cuda_rt_t *)rt)->name; }
static unsigned cuda_device_sm(const void *rt) { return ((const cuda_rt_t *)rt)->sm; }
static const char *cuda_device_arch(const void *rt) { return ((const cuda_rt_t *)rt)->arch; }

/* ---- sessions ---- */
typedef struct binding {
  void *ptr;
  size_t size;
  drk_memory_kind_t kind;
} binding_t;

typedef struct cuda_session {
  cuda_rt_t *rt;
  const drk_modfile_t *mf;
  uint32_t n_slots;
  uint32_t *slots;        /* distinct code slots used by kernels */
  drk_cu_module_t *mods;         /* per slot */
  drk_cu_function_t *funcs;      /* per kernel */
  void ***kparams;        /* per kernel: array of pointers into pstore */
  void **kparam_ptrs;     /* backing for kparams */
  uint8_t *pstore;        /* parameter values; 128-byte aligned for CUtensorMap */
  size_t pstore_size, n_param_ptrs;
  char **ptx_copies;      /* NUL-terminated PTX for standalone PTX images, per slot */
  size_t *ptx_sizes;
  drk_cu_deviceptr_t arena;
  drk_cu_graph_t graph;
  drk_cu_graph_exec_t exec;
  binding_t *inputs, *outputs;
  drk_cu_event_t *events;        /* n_kernels + 1 for profiling, then run start/end */
  float *kernel_ms;
  float last_ms;
  int profiling, profiled;
} cuda_session_t;

static size_t session_alloc_size(const cuda_session_t *s) { (void)s; return sizeof(cuda_session_t); }

/* One candidate code image for a slot. */
typedef struct cand {
  int is_ptx;
  unsigned sm;
  int arch_specific;
  int compressed;
  const void *data;
  size_t size;          /* PTX: without NUL */
  int nul_terminated;   /* PTX inside a fat binary is; a standalone PTX image is not */
} cand_t;

static void describe(const cand_t *c, size_t n, char *buf, size_t len) {
  size_t o = 0;
  buf[0] = 0;
  for (size_t i = 0; i < n && o + 40 < len; i++) {
    char arch[24];
    drk_fatbin_format_arch(c[i].sm, c[i].arch_specific, arch, sizeof arch);
    o += (size_t)snprintf(buf + o, len - o, "%s%s %s%s", i ? ", " : "", arch, c[i].is_ptx ? "PTX" : "cubin", c[i].compressed ? " (compressed, unusable)" : "");
  }
  if (!n) snprintf(buf, len, "nothing for CUDA");
}

static drk_status_t load_slot(cuda_session_t *s, uint32_t si) {
  cuda_rt_t *rt = s->rt;
  const drk_modfile_t *mf = s->mf;
  uint32_t slot = s->slots[si];
  cand_t c[MAX_FATBIN_ENTRIES];
  size_t nc = 0;
  for (uint32_t i = 0; i < mf->n_images; i++) {
    const drk_modfile_image_t *im = &mf->images[i];
    if (im->slot != slot) continue;
    if (im->kind == DRK_MODFILE_IMAGE_FATBIN) {
      drk_fatbin_image_t e[MAX_FATBIN_ENTRIES];
      size_t ne = 0;
      char err[256];
      if (drk_fatbin_parse(im->data, (size_t)im->size, e, MAX_FATBIN_ENTRIES, &ne, err, sizeof err))
        return drk_rt_status(&rt->alloc, DRK_STATUS_BAD_MODULE, "image %u (fat binary): %s", i, err);
      for (size_t j = 0; j < ne && j < MAX_FATBIN_ENTRIES && nc < MAX_FATBIN_ENTRIES; j++)
        c[nc++] = (cand_t){e[j].kind == DRK_FATBIN_PTX, e[j].sm, e[j].arch_specific, e[j].compressed, e[j].data, e[j].size, 1};
    } else if ((im->kind == DRK_MODFILE_IMAGE_CUBIN || im->kind == DRK_MODFILE_IMAGE_PTX) && nc < MAX_FATBIN_ENTRIES) {
      unsigned sm = 0;
      bool a = false;
      if (!drk_fatbin_parse_arch(im->targets, &sm, &a))
        return drk_rt_status(&rt->alloc, DRK_STATUS_BAD_MODULE, "image %u: target '%s' is not an sm_XX name", i, im->targets);
      c[nc++] = (cand_t){im->kind == DRK_MODFILE_IMAGE_PTX, sm, a, 0, im->data, (size_t)im->size, 0};
    }
  }
  unsigned dev = rt->sm;
  const cand_t *best = NULL;
  for (size_t i = 0; i < nc; i++) /* exact cubin */
    if (!c[i].is_ptx && !c[i].compressed && c[i].sm == dev) { best = &c[i]; break; }
  for (size_t i = 0; i < nc && !best; i++) /* compatible cubin: same major, older minor */
    if (!c[i].is_ptx && !c[i].compressed && !c[i].arch_specific && c[i].sm / 10 == dev / 10 && c[i].sm < dev) best = &c[i];
  if (!best)
    for (size_t i = 0; i < nc; i++) /* newest usable PTX */
      if (c[i].is_ptx && !c[i].compressed && c[i].sm <= dev && (!c[i].arch_specific || c[i].sm == dev) && (!best || c[i].sm > best->sm)) best = &c[i];
  char have[512];
  describe(c, nc, have, sizeof have);
  if (!best)
    return drk_rt_status(&rt->alloc, DRK_STATUS_NO_IMAGE, "no code for the device in slot %u: module has %s, device is sm_%u; recompile with --target=sm_%u",
                         slot, have, dev, dev);
  const void *img = best->data;
  if (best->is_ptx && !best->nul_terminated) {
    s->ptx_copies[si] = drk_rt_alloc(&rt->alloc, best->size + 1, 16);
    if (!s->ptx_copies[si]) return drk_rt_status(&rt->alloc, DRK_STATUS_OUT_OF_MEMORY, "out of memory copying PTX");
    s->ptx_sizes[si] = best->size + 1;
    memcpy(s->ptx_copies[si], best->data, best->size);
    img = s->ptx_copies[si];
  }
  char elog[2048] = "", ilog[1024] = "";
  int opts[4] = {DRK_CU_JIT_ERROR_LOG_BUFFER, DRK_CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, DRK_CU_JIT_INFO_LOG_BUFFER, DRK_CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES};
  void *vals[4] = {elog, (void *)(uintptr_t)(sizeof elog - 1), ilog, (void *)(uintptr_t)(sizeof ilog - 1)};
  drk_cu_result_t r = rt->cu.ModuleLoadDataEx(&s->mods[si], img, 4, opts, vals);
  if (r) {
    char arch[24], hint[3000];
    drk_fatbin_format_arch(best->sm, best->arch_specific, arch, sizeof arch);
    snprintf(hint, sizeof hint, "%s built for %s, device is sm_%u (module has %s)%s%s", best->is_ptx ? "PTX" : "cubin", arch, dev, have,
             elog[0] ? "; JIT log: " : "", elog);
    return cu_error(rt, r, "cuModuleLoadDataEx", hint);
  }
  return NULL;
}

static drk_status_t launch(cuda_session_t *s, uint32_t k) {
  cuda_rt_t *rt = s->rt;
  const drk_modfile_kernel_t *kd = &s->mf->kernels[k];
  if (kd->cluster[0]) {
    if (!rt->cu.LaunchKernelEx) return drk_rt_status(&rt->alloc, DRK_STATUS_DRIVER, "kernel '%s' needs a cluster launch; this driver lacks cuLaunchKernelEx", kd->name);
    drk_cu_launch_attribute_t attr;
    memset(&attr, 0, sizeof attr);
    attr.id = DRK_CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attr.value.cluster_dim.x = kd->cluster[0], attr.value.cluster_dim.y = kd->cluster[1], attr.value.cluster_dim.z = kd->cluster[2];
    drk_cu_launch_config_t cfg = {kd->grid[0], kd->grid[1], kd->grid[2], kd->block[0], kd->block[1], kd->block[2], kd->dyn_smem, rt->stream, &attr, 1};
    drk_cu_result_t r = rt->cu.LaunchKernelEx(&cfg, s->funcs[k], s->kparams[k], NULL);
    if (r) return drk_rt_status_wrap(cu_error(rt, r, "cuLaunchKernelEx", NULL), "kernel %u ('%s')", k, kd->name);
    return NULL;
  }
  drk_cu_result_t r = rt->cu.LaunchKernel(s->funcs[k], kd->grid[0], kd->grid[1], kd->grid[2], kd->block[0], kd->block[1], kd->block[2], kd->dyn_smem,
                                   rt->stream, s->kparams[k], NULL);
  if (r) return drk_rt_status_wrap(cu_error(rt, r, "cuLaunchKernel", NULL), "kernel %u ('%s')", k, kd->name);
  return NULL;
}

static drk_status_t session_init(cuda_session_t *s) {
  cuda_rt_t *rt = s->rt;
  const drk_modfile_t *mf = s->mf;
  const drk_allocator_t *a = &rt->alloc;
  uint32_t nk = mf->n_kernels;
  drk_cu_result_t r;
  /* Host tables, sized once. */
  s->slots = drk_rt_alloc(a, (nk + 1) * sizeof *s->slots, 16);
  s->funcs = drk_rt_alloc(a, (nk + 1) * sizeof *s->funcs, 16);
  s->kparams = drk_rt_alloc(a, (nk + 1) * sizeof *s->kparams, 16);
  s->inputs = drk_rt_alloc(a, (mf->n_inputs + 1) * sizeof *s->inputs, 16);
  s->outputs = drk_rt_alloc(a, (mf->n_outputs + 1) * sizeof *s->outputs, 16);
  s->events = drk_rt_alloc(a, (nk + 3) * sizeof *s->events, 16);
  s->kernel_ms = drk_rt_alloc(a, (nk + 1) * sizeof *s->kernel_ms, 16);
  if (!s->slots || !s->funcs || !s->kparams || !s->inputs || !s->outputs || !s->events || !s->kernel_ms)
    return drk_rt_status(a, DRK_STATUS_OUT_OF_MEMORY, "out of memory for session tables");
  for (uint32_t k = 0; k < nk; k++) {
    uint32_t j = 0;
    while (j < s->n_slots && s->slots[j] != mf->kernels[k].slot) j++;
    if (j == s->n_slots) s->slots[s->n_slots++] = mf->kernels[k].slot;
  }
  s->mods = drk_rt_alloc(a, (s->n_slots + 1) * sizeof *s->mods, 16);
  s->ptx_copies = drk_rt_alloc(a, (s->n_slots + 1) * sizeof *s->ptx_copies, 16);
  s->ptx_sizes = drk_rt_alloc(a, (s->n_slots + 1) * sizeof *s->ptx_sizes, 16);
  if (!s->mods || !s->ptx_copies || !s->ptx_sizes) return drk_rt_status(a, DRK_STATUS_OUT_OF_MEMORY, "out of memory for session tables");
  /* Parameter storage: 8 bytes per pointer/scalar, 128 per TMA descriptor at a 128-byte
   * aligned offset, laid out exactly as the filling loop below does (padding included). */
  size_t psz = 0, nptr = 0;
  for (uint32_t k = 0; k < nk; k++)
    for (uint32_t p = 0; p < mf->kernels[k].n_params; p++, nptr++)
      psz = mf->kernels[k].params[p].kind == DRK_MODFILE_PARAM_TMA ? ((psz + 127) & ~(size_t)127) + 128 : psz + 8;
  s->pstore_size = psz + 128;
  s->n_param_ptrs = nptr + 1;
  s->pstore = drk_rt_alloc(a, s->pstore_size, 128);
  s->kparam_ptrs = drk_rt_alloc(a, s->n_param_ptrs * sizeof(void *), 16);
  if (!s->pstore || !s->kparam_ptrs) return drk_rt_status(a, DRK_STATUS_OUT_OF_MEMORY, "out of memory for kernel parameters");

  if ((r = rt->cu.CtxSetCurrent(rt->ctx))) return cu_error(rt, r, "cuCtxSetCurrent", NULL);
  for (uint32_t i = 0; i < s->n_slots; i++) {
    drk_status_t st = load_slot(s, i);
    if (st) return drk_rt_status_wrap(st, "loading code slot %u", s->slots[i]);
  }
  if (mf->arena_size) {
    char hint[128];
    snprintf(hint, sizeof hint, "the module plans one %llu-byte arena", (unsigned long long)mf->arena_size);
    if ((r = rt->cu.MemAlloc(&s->arena, (size_t)mf->arena_size))) return cu_error(rt, r, "cuMemAlloc (arena)", hint);
    /* Poison (all bits set: NaN for floats, -1 for integers) so that an output element no
     * kernel wrote shows up in every check instead of passing as a stale or zero value. */
    if ((r = rt->cu.MemsetD8Async(s->arena, 0xff, (size_t)mf->arena_size, rt->stream))) return cu_error(rt, r, "cuMemsetD8Async (arena)", NULL);
  }
  if (mf->weights_size && (r = rt->cu.MemcpyHtoDAsync(s->arena + mf->weights_offset, mf->weights, (size_t)mf->weights_size, rt->stream)))
    return cu_error(rt, r, "cuMemcpyHtoDAsync (weights)", NULL);
  /* Resolve kernels and fill parameter values. */
  size_t po = 0, pi = 0;
  for (uint32_t k = 0; k < nk; k++) {
    const drk_modfile_kernel_t *kd = &mf->kernels[k];
    uint32_t si = 0;
    while (s->slots[si] != kd->slot) si++;
    r = rt->cu.ModuleGetFunction(&s->funcs[k], s->mods[si], kd->name);
    if (r) return drk_rt_status_wrap(cu_error(rt, r, "cuModuleGetFunction", "the image does not define this kernel"), "kernel %u ('%s')", k, kd->name);
    if (kd->dyn_smem > 48 * 1024 && (r = rt->cu.FuncSetAttribute(s->funcs[k], DRK_CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)kd->dyn_smem))) {
      char hint[96];
      snprintf(hint, sizeof hint, "kernel asks for %u bytes of dynamic shared memory", kd->dyn_smem);
      return drk_rt_status_wrap(cu_error(rt, r, "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)", hint), "kernel %u ('%s')", k, kd->name);
    }
    s->kparams[k] = s->kparam_ptrs + pi;
    for (uint32_t p = 0; p < kd->n_params; p++) {
      const drk_modfile_param_t *pa = &kd->params[p];
      uint8_t *slot = s->pstore + po;
      s->kparam_ptrs[pi++] = slot;
      if (pa->kind == DRK_MODFILE_PARAM_BUFFER) {
        uint64_t v = s->arena + pa->offset;
        memcpy(slot, &v, 8);
        po += 8;
      } else if (pa->kind == DRK_MODFILE_PARAM_SCALAR) {
        memcpy(slot, pa->scalar, pa->scalar_size);
        po += 8;
      } else {
        po = (po + 127) & ~(size_t)127;
        slot = s->pstore + po;
        s->kparam_ptrs[pi - 1] = slot;
        const drk_modfile_tma_t *t = &mf->tmas[pa->tma];
        if (!rt->cu.TensorMapEncodeTiled) return drk_rt_status(a, DRK_STATUS_DRIVER, "kernel %u ('%s') uses TMA; this driver lacks cuTensorMapEncodeTiled", k, kd->name);
        r = rt->cu.TensorMapEncodeTiled((drk_cu_tensor_map_t *)slot, (int)t->data_type, t->rank, (void *)(uintptr_t)(s->arena + t->offset), t->dims,
                                        t->strides, t->box, t->elem_strides, (int)t->interleave, (int)t->swizzle, (int)t->l2_promotion, (int)t->oob_fill);
        if (r) return drk_rt_status_wrap(cu_error(rt, r, "cuTensorMapEncodeTiled", "check rank 1..5, 16-byte aligned address and strides, box <= 256, inner box bytes multiple of 16"),
                                         "kernel %u ('%s') TMA descriptor %u", k, kd->name, pa->tma);
        po += 128;
      }
    }
  }
  for (uint32_t i = 0; i < nk + 3; i++)
    if ((r = rt->cu.EventCreate(&s->events[i], DRK_CU_EVENT_DEFAULT))) return cu_error(rt, r, "cuEventCreate", NULL);
  /* Capture the launch sequence once; runs replay it. */
  if (nk) {
    if ((r = rt->cu.StreamBeginCapture(rt->stream, DRK_CU_STREAM_CAPTURE_MODE_THREAD_LOCAL))) return cu_error(rt, r, "cuStreamBeginCapture", NULL);
    drk_status_t st = NULL;
    for (uint32_t k = 0; k < nk && !st; k++) st = launch(s, k);
    r = rt->cu.StreamEndCapture(rt->stream, &s->graph);
    if (st) return drk_rt_status_wrap(st, "capturing the launch sequence");
    if (r) return cu_error(rt, r, "cuStreamEndCapture", NULL);
    if ((r = rt->cu.GraphInstantiate(&s->exec, s->graph, 0))) return cu_error(rt, r, "cuGraphInstantiateWithFlags", NULL);
  }
  if ((r = rt->cu.StreamSynchronize(rt->stream))) return cu_error(rt, r, "cuStreamSynchronize (weights upload)", NULL);
  return NULL;
}

static void cuda_session_destroy(void *sv);

static drk_status_t cuda_session_create(void *rtv, const drk_module_t *m, void **out_session) {
  cuda_rt_t *rt = rtv;
  cuda_session_t *s = drk_rt_alloc(&rt->alloc, sizeof *s, 16);
  if (!s) return drk_rt_status(&rt->alloc, DRK_STATUS_OUT_OF_MEMORY, "out of memory for the session");
  s->rt = rt;
  s->mf = m->mf;
  drk_status_t st = session_init(s);
  if (st) {
    cuda_session_destroy(s);
    return drk_rt_status_wrap(st, "session on %s", rt->name);
  }
  *out_session = s;
  return NULL;
}

static void cuda_session_destroy(void *sv) {
  cuda_session_t *s = sv;
  if (!s) return;
  cuda_rt_t *rt = s->rt;
  const drk_allocator_t *a = &rt->alloc;
  const drk_modfile_t *mf = s->mf;
  uint32_t nk = mf->n_kernels;
  rt->cu.CtxSetCurrent(rt->ctx);
  if (s->exec) rt->cu.GraphExecDestroy(s->exec);
  if (s->graph) rt->cu.GraphDestroy(s->graph);
  if (s->events)
    for (uint32_t i = 0; i < nk + 3; i++)
      if (s->events[i]) rt->cu.EventDestroy(s->events[i]);
  if (s->arena) rt->cu.MemFree(s->arena);
  if (s->mods)
    for (uint32_t i = 0; i < s->n_slots; i++)
      if (s->mods[i]) rt->cu.ModuleUnload(s->mods[i]);
  if (s->ptx_copies)
    for (uint32_t i = 0; i < s->n_slots; i++) drk_rt_free(a, s->ptx_copies[i], s->ptx_sizes[i]);
  drk_rt_free(a, s->slots, (nk + 1) * sizeof *s->slots);
  drk_rt_free(a, s->funcs, (nk + 1) * sizeof *s->funcs);
  drk_rt_free(a, s->kparams, (nk + 1) * sizeof *s->kparams);
  drk_rt_free(a, s->inputs, (mf->n_inputs + 1) * sizeof *s->inputs);
  drk_rt_free(a, s->outputs, (mf->n_outputs + 1) * sizeof *s->outputs);
  drk_rt_free(a, s->events, (nk + 3) * sizeof *s->events);
  drk_rt_free(a, s->kernel_ms, (nk + 1) * sizeof *s->kernel_ms);
  drk_rt_free(a, s->mods, (s->n_slots + 1) * sizeof *s->mods);
  drk_rt_free(a, s->ptx_copies, (s->n_slots + 1) * sizeof *s->ptx_copies);
  drk_rt_free(a, s->ptx_sizes, (s->n_slots + 1) * sizeof *s->ptx_sizes);
  drk_rt_free(a, s->pstore, s->pstore_size);
  drk_rt_free(a, s->kparam_ptrs, s->n_param_ptrs * sizeof(void *));
  drk_rt_free(a, s, session_alloc_size(s));
}

static void cuda_session_bind(void *sv, size_t index, void *ptr, size_t size, drk_memory_kind_t kind, int output) {
  cuda_session_t *s = sv;
  binding_t *b = output ? &s->outputs[index] : &s->inputs[index];
  *b = (binding_t){ptr, size, kind};
}

static drk_status_t cuda_session_run(void *sv) {
  cuda_session_t *s = sv;
  cuda_rt_t *rt = s->rt;
  const drk_modfile_t *mf = s->mf;
  uint32_t nk = mf->n_kernels;
  drk_cu_stream_t st = rt->stream;
  drk_cu_result_t r;
  if ((r = rt->cu.CtxSetCurrent(rt->ctx))) return cu_error(rt, r, "cuCtxSetCurrent", NULL);
  if ((r = rt->cu.EventRecord(s->events[nk + 1], st))) return cu_error(rt, r, "cuEventRecord", NULL);
  for (uint32_t i = 0; i < mf->n_inputs; i++) {
    const binding_t *b = &s->inputs[i];
    if (!b->ptr) continue;
    drk_cu_deviceptr_t dst = s->arena + mf->inputs[i].offset;
    r = b->kind == DRK_MEMORY_HOST ? rt->cu.MemcpyHtoDAsync(dst, b->ptr, b->size, st) : rt->cu.MemcpyDtoDAsync(dst, (drk_cu_deviceptr_t)(uintptr_t)b->ptr, b->size, st);
    if (r) return drk_rt_status_wrap(cu_error(rt, r, "copying in", NULL), "input %u ('%s')", i, mf->inputs[i].name);
  }
  if (s->profiling) {
    for (uint32_t k = 0; k < nk; k++) {
      if ((r = rt->cu.EventRecord(s->events[k], st))) return cu_error(rt, r, "cuEventRecord", NULL);
      drk_status_t e = launch(s, k);
      if (e) return e;
    }
    if (nk && (r = rt->cu.EventRecord(s->events[nk], st))) return cu_error(rt, r, "cuEventRecord", NULL);
  } else if (s->exec && (r = rt->cu.GraphLaunch(s->exec, st))) {
    return cu_error(rt, r, "cuGraphLaunch", NULL);
  }
  for (uint32_t i = 0; i < mf->n_outputs; i++) {
    const binding_t *b = &s->outputs[i];
    if (!b->ptr) continue;
    drk_cu_deviceptr_t src = s->arena + mf->outputs[i].offset;
    r = b->kind == DRK_MEMORY_HOST ? rt->cu.MemcpyDtoHAsync(b->ptr, src, b->size, st) : rt->cu.MemcpyDtoDAsync((drk_cu_deviceptr_t)(uintptr_t)b->ptr, src, b->size, st);
    if (r) return drk_rt_status_wrap(cu_error(rt, r, "copying out", NULL), "output %u ('%s')", i, mf->outputs[i].name);
  }
  if ((r = rt->cu.EventRecord(s->events[nk + 2], st))) return cu_error(rt, r, "cuEventRecord", NULL);
  if ((r = rt->cu.StreamSynchronize(st))) return cu_error(rt, r, "cuStreamSynchronize (run)", "a kernel faulted or timed out; run under compute-sanitizer");
  if ((r = rt->cu.EventElapsedTime(&s->last_ms, s->events[nk + 1], s->events[nk + 2]))) return cu_error(rt, r, "cuEventElapsedTime", NULL);
  if (s->profiling) {
    for (uint32_t k = 0; k < nk; k++)
      if ((r = rt->cu.EventElapsedTime(&s->kernel_ms[k], s->events[k], s->events[k + 1]))) return cu_error(rt, r, "cuEventElapsedTime", NULL);
    s->profiled = 1;
  }
  return NULL;
}

static void cuda_session_set_profiling(void *s, int enabled) { ((cuda_session_t *)s)->profiling = enabled != 0; }

static const float *cuda_session_kernel_ms(const void *sv) {
  const cuda_session_t *s = sv;
  return s->profiled ? s->kernel_ms : NULL;
}

static float cuda_session_last_run_ms(const void *s) { return ((const cuda_session_t *)s)->last_ms; }

const drk_driver_t drk_driver_cuda = {
    "CUDA", cuda_runtime_create, cuda_runtime_destroy, cuda_device_name, cuda_device_sm, cuda_device_arch,
    cuda_session_create, cuda_session_destroy, cuda_session_bind, cuda_session_run, cuda_session_set_profiling,
    cuda_session_kernel_ms, cuda_session_last_run_ms,
};
