/* The CUDA driver for libdrkrt: runtimes (driver + device + primary context) and
 * sessions (a stream of their own, a module's images loaded, arena allocated, weights uploaded, launch sequence
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
#include "runtime/src/session.h"

#define DRK_CUDA_DEFAULT_LIBRARY "libcuda.so.1"
#define MAX_FATBIN_ENTRIES 64

typedef struct cuda_rt {
  drk_allocator_t alloc;
  void *lib;
  drk_cuda_api_t cu;
  drk_cu_device_t dev;
  int ordinal;
  drk_cu_context_t ctx;
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
  return drk_rt_driver_status(&rt->alloc, code, call, name ? name : "CUDA_ERROR_?", text ? text : "unknown error", hint);
}

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
  *out_rt = rt;
  return NULL;
fail:
  cuda_runtime_destroy(rt);
  return st;
}

static void cuda_runtime_destroy(void *rtv) {
  cuda_rt_t *rt = rtv;
  if (!rt) return;
  if (rt->ctx) rt->cu.DevicePrimaryCtxRelease(rt->dev);
  dlclose(rt->lib);
  drk_allocator_t a = rt->alloc;
  drk_rt_free(&a, rt, sizeof *rt);
}

static const char *cuda_device_name(const void *rt) { return ((const cuda_rt_t *)rt)->name; }
static unsigned cuda_device_sm(const void *rt) { return ((const cuda_rt_t *)rt)->sm; }
static const char *cuda_device_arch(const void *rt) { return ((const cuda_rt_t *)rt)->arch; }

/* ---- sessions (runtime/src/session.c has the driver-independent half) ---- */
typedef struct cuda_session {
  drk_rt_session_t base;
  drk_cu_module_t *mods;    /* per slot */
  drk_cu_function_t *funcs; /* per kernel */
  char **ptx_copies;        /* NUL-terminated PTX for standalone PTX images, per slot */
  size_t *ptx_sizes;
  drk_cu_graph_t graph[DRK_RT_MAX_GRAPHS]; /* per bucket (base.graph) */
  drk_cu_graph_exec_t exec[DRK_RT_MAX_GRAPHS];
  drk_cu_event_t *events; /* DRK_RT_EVENT_COUNT(n_kernels) */
  drk_cu_stream_t stream;  /* the session's own: sessions run from several threads at once */
} cuda_session_t;

static cuda_rt_t *rt_of(const drk_rt_session_t *s) { return s->rt; }

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
  cuda_rt_t *rt = rt_of(&s->base);
  const drk_modfile_t *mf = s->base.mf;
  uint32_t slot = s->base.slots[si];
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
  /* DRK_CUDA_JIT=1: the PTX even where a cubin fits (what a later GPU does; docs/runtime.md) */
  const char *jit = getenv("DRK_CUDA_JIT");
  bool ptx_only = jit && *jit && strcmp(jit, "0") != 0;
  for (size_t i = 0; i < nc && !ptx_only; i++) /* exact cubin */
    if (!c[i].is_ptx && !c[i].compressed && c[i].sm == dev) { best = &c[i]; break; }
  for (size_t i = 0; i < nc && !best && !ptx_only; i++) /* compatible cubin: same major, older minor */
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

static drk_status_t cuda_launch(drk_rt_session_t *bs, uint32_t k) {
  cuda_session_t *s = (cuda_session_t *)bs;
  cuda_rt_t *rt = rt_of(bs);
  const drk_modfile_kernel_t *kd = &bs->mf->kernels[k];
  if (kd->cluster[0]) {
    if (!rt->cu.LaunchKernelEx) return drk_rt_status(&rt->alloc, DRK_STATUS_DRIVER, "kernel '%s' needs a cluster launch; this driver lacks cuLaunchKernelEx", kd->name);
    drk_cu_launch_attribute_t attr;
    memset(&attr, 0, sizeof attr);
    attr.id = DRK_CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attr.value.cluster_dim.x = kd->cluster[0], attr.value.cluster_dim.y = kd->cluster[1], attr.value.cluster_dim.z = kd->cluster[2];
    drk_cu_launch_config_t cfg = {kd->grid[0], kd->grid[1], kd->grid[2], kd->block[0], kd->block[1], kd->block[2], kd->dyn_smem, s->stream, &attr, 1};
    drk_cu_result_t r = rt->cu.LaunchKernelEx(&cfg, s->funcs[k], bs->kparams[k], NULL);
    if (r) return drk_rt_status_wrap(cu_error(rt, r, "cuLaunchKernelEx", NULL), "kernel %u ('%s')", k, kd->name);
    return NULL;
  }
  drk_cu_result_t r = rt->cu.LaunchKernel(s->funcs[k], kd->grid[0], kd->grid[1], kd->grid[2], kd->block[0], kd->block[1], kd->block[2], kd->dyn_smem,
                                          s->stream, bs->kparams[k], NULL);
  if (r) return drk_rt_status_wrap(cu_error(rt, r, "cuLaunchKernel", NULL), "kernel %u ('%s')", k, kd->name);
  return NULL;
}

/* Resolves kernel k and encodes its TMA descriptors (the other parameters are filled). */
static drk_status_t prepare_kernel(cuda_session_t *s, uint32_t k) {
  cuda_rt_t *rt = rt_of(&s->base);
  const drk_modfile_t *mf = s->base.mf;
  const drk_modfile_kernel_t *kd = &mf->kernels[k];
  drk_cu_result_t r = rt->cu.ModuleGetFunction(&s->funcs[k], s->mods[s->base.kernel_slot[k]], kd->name);
  if (r) return drk_rt_status_wrap(cu_error(rt, r, "cuModuleGetFunction", "the image does not define this kernel"), "kernel %u ('%s')", k, kd->name);
  if (kd->dyn_smem > 48 * 1024 && (r = rt->cu.FuncSetAttribute(s->funcs[k], DRK_CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)kd->dyn_smem))) {
    char hint[96];
    snprintf(hint, sizeof hint, "kernel asks for %u bytes of dynamic shared memory", kd->dyn_smem);
    return drk_rt_status_wrap(cu_error(rt, r, "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)", hint), "kernel %u ('%s')", k, kd->name);
  }
  /* The module's parameter records against the kernel's own signature (drivers from CUDA 12.4):
   * a launch with too few or wrongly sized parameters reads garbage or faults, far from the
   * cause. A driver without cuFuncGetParamInfo keeps the reader's checks only. A kernel taking
   * more parameters than the module gives is caught where the driver has cuFuncGetParamCount;
   * probing past the last parameter instead would be an API error on every good module, which
   * compute-sanitizer reports (tests/gpu/sanitize.sh). */
  if (rt->cu.FuncGetParamInfo) {
    size_t off, size, count = 0;
    for (uint32_t n = 0; n < kd->n_params; n++) {
      if (rt->cu.FuncGetParamInfo(s->funcs[k], n, &off, &size))
        return drk_rt_status(&rt->alloc, DRK_STATUS_BAD_MODULE, "kernel %u ('%s'): the module gives %u parameters, the kernel's code takes %u (inconsistent module)",
                             k, kd->name, kd->n_params, n);
      const drk_modfile_param_t *pa = &kd->params[n];
      size_t want = pa->kind == DRK_MODFILE_PARAM_BUFFER ? 8 : pa->kind == DRK_MODFILE_PARAM_SCALAR ? pa->scalar_size : 128;
      if (size != want)
        return drk_rt_status(&rt->alloc, DRK_STATUS_BAD_MODULE, "kernel %u ('%s') parameter %u: the module gives %zu bytes, the kernel's code takes %zu (inconsistent module)",
                             k, kd->name, n, want, size);
    }
    if (rt->cu.FuncGetParamCount && !rt->cu.FuncGetParamCount(s->funcs[k], &count) && count != kd->n_params)
      return drk_rt_status(&rt->alloc, DRK_STATUS_BAD_MODULE, "kernel %u ('%s'): the module gives %u parameters, the kernel's code takes %zu (inconsistent module)",
                           k, kd->name, kd->n_params, count);
  }
  for (uint32_t p = 0; p < kd->n_params; p++) {
    const drk_modfile_param_t *pa = &kd->params[p];
    if (pa->kind != DRK_MODFILE_PARAM_TMA) continue;
    const drk_modfile_tma_t *t = &mf->tmas[pa->tma];
    if (!rt->cu.TensorMapEncodeTiled) return drk_rt_status(&rt->alloc, DRK_STATUS_DRIVER, "kernel %u ('%s') uses TMA; this driver lacks cuTensorMapEncodeTiled", k, kd->name);
    r = rt->cu.TensorMapEncodeTiled((drk_cu_tensor_map_t *)s->base.kparams[k][p], (int)t->data_type, t->rank, (void *)(uintptr_t)(s->base.arena + t->offset),
                                    t->dims, t->strides, t->box, t->elem_strides, (int)t->interleave, (int)t->swizzle, (int)t->l2_promotion, (int)t->oob_fill);
    if (r) return drk_rt_status_wrap(cu_error(rt, r, "cuTensorMapEncodeTiled", "check rank 1..5, 16-byte aligned address and strides, box <= 256, inner box bytes multiple of 16"),
                                     "kernel %u ('%s') TMA descriptor %u", k, kd->name, pa->tma);
  }
  return NULL;
}

static drk_status_t cuda_init(drk_rt_session_t *bs) {
  cuda_session_t *s = (cuda_session_t *)bs;
  cuda_rt_t *rt = rt_of(bs);
  const drk_modfile_t *mf = bs->mf;
  const drk_allocator_t *a = &rt->alloc;
  uint32_t nk = mf->n_kernels;
  drk_cu_result_t r;
  s->funcs = drk_rt_alloc(a, (nk + 1) * sizeof *s->funcs, 16);
  s->events = drk_rt_alloc(a, DRK_RT_EVENT_COUNT(nk) * sizeof *s->events, 16);
  s->mods = drk_rt_alloc(a, (bs->n_slots + 1) * sizeof *s->mods, 16);
  s->ptx_copies = drk_rt_alloc(a, (bs->n_slots + 1) * sizeof *s->ptx_copies, 16);
  s->ptx_sizes = drk_rt_alloc(a, (bs->n_slots + 1) * sizeof *s->ptx_sizes, 16);
  if (!s->funcs || !s->events || !s->mods || !s->ptx_copies || !s->ptx_sizes)
    return drk_rt_status(a, DRK_STATUS_OUT_OF_MEMORY, "out of memory for session tables");
  bs->can_capture = 1;
  if ((r = rt->cu.CtxSetCurrent(rt->ctx))) return cu_error(rt, r, "cuCtxSetCurrent", NULL);
  if ((r = rt->cu.StreamCreate(&s->stream, DRK_CU_STREAM_NON_BLOCKING))) return cu_error(rt, r, "cuStreamCreate", NULL);
  for (uint32_t i = 0; i < bs->n_slots; i++) {
    drk_status_t st = load_slot(s, i);
    if (st) return drk_rt_status_wrap(st, "loading code slot %u", bs->slots[i]);
  }
  if (mf->arena_size) {
    char hint[128];
    snprintf(hint, sizeof hint, "the module plans one %llu-byte arena", (unsigned long long)mf->arena_size);
    drk_cu_deviceptr_t arena = 0;
    if ((r = rt->cu.MemAlloc(&arena, (size_t)mf->arena_size))) return cu_error(rt, r, "cuMemAlloc (arena)", hint);
    bs->arena = arena;
    /* Poison (all bits set: NaN for floats, -1 for integers) so that an output element no
     * kernel wrote shows up in every check instead of passing as a stale or zero value. */
    if ((r = rt->cu.MemsetD8Async(arena, 0xff, (size_t)mf->arena_size, s->stream))) return cu_error(rt, r, "cuMemsetD8Async (arena)", NULL);
  }
  if (mf->weights_size && (r = rt->cu.MemcpyHtoDAsync(bs->arena + mf->weights_offset, mf->weights, (size_t)mf->weights_size, s->stream)))
    return cu_error(rt, r, "cuMemcpyHtoDAsync (weights)", NULL);
  drk_rt_session_fill_params(bs);
  for (uint32_t k = 0; k < nk; k++) {
    drk_status_t st = prepare_kernel(s, k);
    if (st) return st;
  }
  for (uint32_t i = 0; i < DRK_RT_EVENT_COUNT(nk); i++)
    if ((r = rt->cu.EventCreate(&s->events[i], DRK_CU_EVENT_DEFAULT))) return cu_error(rt, r, "cuEventCreate", NULL);
  return NULL;
}

static void cuda_release(drk_rt_session_t *bs) {
  cuda_session_t *s = (cuda_session_t *)bs;
  cuda_rt_t *rt = rt_of(bs);
  const drk_allocator_t *a = &rt->alloc;
  uint32_t nk = bs->mf->n_kernels;
  rt->cu.CtxSetCurrent(rt->ctx);
  if (s->stream) {
    rt->cu.StreamSynchronize(s->stream); /* nothing of this session may still run on its arena */
    rt->cu.StreamDestroy(s->stream);
  }
  for (uint32_t g = 0; g < DRK_RT_MAX_GRAPHS; g++) {
    if (s->exec[g]) rt->cu.GraphExecDestroy(s->exec[g]);
    if (s->graph[g]) rt->cu.GraphDestroy(s->graph[g]);
  }
  if (s->events)
    for (uint32_t i = 0; i < DRK_RT_EVENT_COUNT(nk); i++)
      if (s->events[i]) rt->cu.EventDestroy(s->events[i]);
  if (bs->arena) rt->cu.MemFree(bs->arena);
  if (s->mods)
    for (uint32_t i = 0; i < bs->n_slots; i++)
      if (s->mods[i]) rt->cu.ModuleUnload(s->mods[i]);
  if (s->ptx_copies)
    for (uint32_t i = 0; i < bs->n_slots; i++) drk_rt_free(a, s->ptx_copies[i], s->ptx_sizes[i]);
  drk_rt_free(a, s->funcs, (nk + 1) * sizeof *s->funcs);
  drk_rt_free(a, s->events, DRK_RT_EVENT_COUNT(nk) * sizeof *s->events);
  drk_rt_free(a, s->mods, (bs->n_slots + 1) * sizeof *s->mods);
  drk_rt_free(a, s->ptx_copies, (bs->n_slots + 1) * sizeof *s->ptx_copies);
  drk_rt_free(a, s->ptx_sizes, (bs->n_slots + 1) * sizeof *s->ptx_sizes);
}

static drk_status_t cuda_enter(drk_rt_session_t *s) {
  cuda_rt_t *rt = rt_of(s);
  drk_cu_result_t r = rt->cu.CtxSetCurrent(rt->ctx);
  return r ? cu_error(rt, r, "cuCtxSetCurrent", NULL) : NULL;
}

static drk_status_t cuda_record(drk_rt_session_t *s, uint32_t event) {
  cuda_rt_t *rt = rt_of(s);
  drk_cu_result_t r = rt->cu.EventRecord(((cuda_session_t *)s)->events[event], ((cuda_session_t *)s)->stream);
  return r ? cu_error(rt, r, "cuEventRecord", NULL) : NULL;
}

static drk_status_t cuda_copy(drk_rt_session_t *s, uint64_t offset, const drk_rt_binding_t *b, int output) {
  cuda_rt_t *rt = rt_of(s);
  drk_cu_stream_t stream = ((cuda_session_t *)s)->stream;
  drk_cu_deviceptr_t arena = s->arena + offset, user = (drk_cu_deviceptr_t)(uintptr_t)b->ptr;
  drk_cu_result_t r;
  if (output)
    r = b->kind == DRK_MEMORY_HOST ? rt->cu.MemcpyDtoHAsync(b->ptr, arena, b->size, stream) : rt->cu.MemcpyDtoDAsync(user, arena, b->size, stream);
  else
    r = b->kind == DRK_MEMORY_HOST ? rt->cu.MemcpyHtoDAsync(arena, b->ptr, b->size, stream) : rt->cu.MemcpyDtoDAsync(arena, user, b->size, stream);
  return r ? cu_error(rt, r, output ? "copying out" : "copying in", NULL) : NULL;
}

static drk_status_t cuda_zero(drk_rt_session_t *s, uint64_t offset, uint64_t size) {
  cuda_rt_t *rt = rt_of(s);
  drk_cu_result_t r = rt->cu.MemsetD8Async(s->arena + offset, 0, (size_t)size, ((cuda_session_t *)s)->stream);
  return r ? cu_error(rt, r, "cuMemsetD8Async (padding)", NULL) : NULL;
}

static drk_status_t cuda_begin_capture(drk_rt_session_t *s) {
  cuda_rt_t *rt = rt_of(s);
  drk_cu_result_t r = rt->cu.StreamBeginCapture(((cuda_session_t *)s)->stream, DRK_CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
  return r ? cu_error(rt, r, "cuStreamBeginCapture", NULL) : NULL;
}

static drk_status_t cuda_end_capture(drk_rt_session_t *bs, int instantiate) {
  cuda_session_t *s = (cuda_session_t *)bs;
  cuda_rt_t *rt = rt_of(bs);
  uint32_t g = bs->graph;
  drk_cu_result_t r = rt->cu.StreamEndCapture(s->stream, &s->graph[g]);
  if (r) return cu_error(rt, r, "cuStreamEndCapture", NULL);
  if (instantiate && (r = rt->cu.GraphInstantiate(&s->exec[g], s->graph[g], 0))) return cu_error(rt, r, "cuGraphInstantiateWithFlags", NULL);
  return NULL;
}

static drk_status_t cuda_replay(drk_rt_session_t *s) {
  cuda_rt_t *rt = rt_of(s);
  drk_cu_result_t r = rt->cu.GraphLaunch(((cuda_session_t *)s)->exec[s->graph], ((cuda_session_t *)s)->stream);
  return r ? cu_error(rt, r, "cuGraphLaunch", NULL) : NULL;
}

static drk_status_t cuda_sync(drk_rt_session_t *s, int run) {
  cuda_rt_t *rt = rt_of(s);
  drk_cu_result_t r = rt->cu.StreamSynchronize(((cuda_session_t *)s)->stream);
  if (!r) return NULL;
  if (!run) return cu_error(rt, r, "cuStreamSynchronize (weights upload)", NULL);
  return cu_error(rt, r, "cuStreamSynchronize (run)", "a kernel faulted or timed out; run under compute-sanitizer");
}

static drk_status_t cuda_elapsed(drk_rt_session_t *s, float *out_ms, uint32_t from, uint32_t to) {
  cuda_rt_t *rt = rt_of(s);
  drk_cu_event_t *ev = ((cuda_session_t *)s)->events;
  drk_cu_result_t r = rt->cu.EventElapsedTime(out_ms, ev[from], ev[to]);
  return r ? cu_error(rt, r, "cuEventElapsedTime", NULL) : NULL;
}

static const drk_rt_session_ops_t cuda_session_ops = {
    sizeof(cuda_session_t), cuda_init, cuda_release, cuda_enter, cuda_record, cuda_copy, cuda_launch,
    cuda_begin_capture, cuda_end_capture, cuda_replay, cuda_sync, cuda_elapsed, cuda_zero,
};

static drk_status_t cuda_session_create(void *rtv, const drk_module_t *m, void **out_session) {
  cuda_rt_t *rt = rtv;
  return drk_rt_session_create(&cuda_session_ops, rt, &rt->alloc, m->mf, rt->name, out_session);
}

const drk_driver_t drk_driver_cuda = {
    "CUDA", cuda_runtime_create, cuda_runtime_destroy, cuda_device_name, cuda_device_sm, cuda_device_arch,
    cuda_session_create, drk_rt_session_destroy, drk_rt_session_bind, drk_rt_session_run, drk_rt_session_set_profiling,
    drk_rt_session_kernel_ms, drk_rt_session_last_run_ms, drk_rt_session_run_shapes, drk_rt_session_output_shape,
    drk_rt_session_last_bucket,
};
