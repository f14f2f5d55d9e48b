/* The HIP driver for libdrkrt (AMD GPUs, e.g. MI300 = gfx942): runtimes (HIP runtime
 * library + device) and sessions (a stream of their own, a module's code objects loaded, arena allocated,
 * weights uploaded, launch sequence captured as a HIP graph where the runtime can).
 *
 * The runtime library is reached only through dlopen (runtime/drivers/hip/hip_api.h lists
 * what is used); every hipError_t is converted where it enters, with hipGetErrorName and a
 * hint. The library is opened with RTLD_NODELETE: once hipInit has run, the HSA runtime
 * under it has threads of its own, and unmapping their code would crash the process later.
 *
 * Image choice per code slot: a code object (DRK_MODFILE_IMAGE_HSACO, or an entry of a
 * DRK_MODFILE_IMAGE_OFFLOAD_BUNDLE) whose target ID fits the device's gcnArchName (same
 * processor; every feature the code object names, e.g. xnack-, set the same way on the
 * device), the most specific one first; else DRK_STATUS_NO_IMAGE listing what the module has
 * and the device's target ID. Launch: workgroup = the kernel's block dims, grid as planned,
 * dynamic LDS = dyn_smem. TMA descriptors and thread-block clusters are NVIDIA-only; a
 * module using them fails at session creation with DRK_STATUS_NO_IMAGE.
 *
 * Reached through the drk_driver_hip table (runtime/src/driver.h): runtime/src/runtime.c
 * has checked every handle and binding before a call arrives here. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/package/bundle.h"
#include "runtime/drivers/hip/hip_api.h"
#include "runtime/src/driver.h"
#include "runtime/src/session.h"

#define MAX_CANDS 64
#define MAX_BUNDLE_ENTRIES 32
#define TARGET_ID_MAX 128

static const char *const default_libraries[] = {"libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5"};

typedef struct hip_rt {
  drk_allocator_t alloc;
  void *lib;
  drk_hip_api_t hip;
  int ordinal;
  int has_graphs; /* every DRK_HIP_GRAPH_FUNCS entry found */
  char arch[DRK_HIP_PROP_ARCH_SIZE];
  char name[704];
} hip_rt_t;

/* ---- error conversion ---- */
static drk_status_t hip_error(hip_rt_t *rt, drk_hip_error_t r, const char *call, const char *hint) {
  const char *name = rt->hip.GetErrorName ? rt->hip.GetErrorName(r) : NULL;
  const char *text = rt->hip.GetErrorString ? rt->hip.GetErrorString(r) : NULL;
  char num[32];
  if (!name) snprintf(num, sizeof num, "hipError %d", (int)r), name = num;
  if (text && !strcmp(text, name)) text = NULL; /* HIP 5 returns the name for both */
  drk_status_code_t code = DRK_STATUS_DRIVER;
  if (r == DRK_HIP_ERROR_OUT_OF_MEMORY) code = DRK_STATUS_OUT_OF_MEMORY;
  else if (r == DRK_HIP_ERROR_NO_DEVICE || r == DRK_HIP_ERROR_INVALID_DEVICE) code = DRK_STATUS_NO_DEVICE;
  else if (r == DRK_HIP_ERROR_NO_BINARY_FOR_GPU) code = DRK_STATUS_NO_IMAGE;
  return drk_rt_driver_status(&rt->alloc, code, call, name, text, hint);
}

/* ---- runtime ---- */
static void hip_runtime_destroy(void *rtv);

/* Reads gcnArchName through whichever hipGetDeviceProperties the library has. */
static drk_status_t read_arch(hip_rt_t *rt) {
  char *props = drk_rt_alloc(&rt->alloc, DRK_HIP_PROP_BUFFER_SIZE, 16);
  if (!props) return drk_rt_status(&rt->alloc, DRK_STATUS_OUT_OF_MEMORY, "out of memory for the device properties");
  const struct {
    drk_hip_error_t (*fn)(void *, int);
    size_t offset;
  } tries[] = {{rt->hip.GetDevicePropertiesR0600, DRK_HIP_PROP_R0600_ARCH_OFFSET},
               {rt->hip.GetDevicePropertiesR0000, DRK_HIP_PROP_R0000_ARCH_OFFSET},
               {rt->hip.GetDeviceProperties, DRK_HIP_PROP_R0000_ARCH_OFFSET}};
  drk_hip_error_t r = DRK_HIP_SUCCESS;
  int called = 0;
  for (size_t i = 0; i < sizeof tries / sizeof tries[0]; i++) {
    if (!tries[i].fn) continue;
    memset(props, 0, DRK_HIP_PROP_BUFFER_SIZE);
    called = 1;
    if ((r = tries[i].fn(props, rt->ordinal))) continue;
    const char *arch = props + tries[i].offset;
    if (strncmp(arch, "gfx", 3)) continue; /* not this layout after all */
    memcpy(rt->arch, arch, DRK_HIP_PROP_ARCH_SIZE);
    rt->arch[DRK_HIP_PROP_ARCH_SIZE - 1] = 0;
    drk_rt_free(&rt->alloc, props, DRK_HIP_PROP_BUFFER_SIZE);
    return NULL;
  }
  drk_rt_free(&rt->alloc, props, DRK_HIP_PROP_BUFFER_SIZE);
  if (!called) return drk_rt_status(&rt->alloc, DRK_STATUS_NO_DRIVER, "no HIP driver: the library has no hipGetDeviceProperties (nor its R0600/R0000 forms)");
  if (r) return hip_error(rt, r, "hipGetDeviceProperties", NULL);
  return drk_rt_status(&rt->alloc, DRK_STATUS_DRIVER, "hipGetDeviceProperties: device %d reports no gfx architecture name", rt->ordinal);
}

static drk_status_t hip_runtime_create(const drk_runtime_options_t *o, const char *library, const drk_allocator_t *a, void **out_rt) {
  const char *names[3];
  size_t n_names = 0;
  const char *chosen = library;
  if (!chosen) chosen = getenv("DRK_HIP_DRIVER");
  if (chosen && *chosen) names[n_names++] = chosen;
  else
    for (size_t i = 0; i < 3; i++) names[n_names++] = default_libraries[i];
  void *lib = NULL;
  const char *libname = NULL;
  char tried[1536] = "";
  size_t tl = 0;
  for (size_t i = 0; i < n_names && !lib; i++) {
    lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (lib) { libname = names[i]; break; }
    const char *e = dlerror();
    if (tl < sizeof tried) tl += (size_t)snprintf(tried + tl, sizeof tried - tl, "%sdlopen(\"%s\") failed: %s", i ? "; " : "", names[i], e ? e : "unknown error");
  }
  if (!lib) return drk_rt_status(a, DRK_STATUS_NO_DRIVER, "no HIP driver: %s", tried);
  hip_rt_t *rt = drk_rt_alloc(a, sizeof *rt, 16);
  if (!rt) {
    dlclose(lib);
    return drk_rt_status(a, DRK_STATUS_OUT_OF_MEMORY, "out of memory for the runtime");
  }
  rt->alloc = *a;
  rt->lib = lib;
  rt->ordinal = o->device;
  drk_status_t st = NULL;
#define LOAD(ret, name, sym, args)                                                                           \
  if (!st) {                                                                                                 \
    *(void **)&rt->hip.name = dlsym(lib, #sym);                                                              \
    if (!rt->hip.name) st = drk_rt_status(a, DRK_STATUS_NO_DRIVER, "no HIP driver: %s lacks %s (HIP runtime too old, or not HIP?)", libname, #sym); \
  }
  DRK_HIP_FUNCS(LOAD)
#undef LOAD
#define LOAD_OPT(ret, name, sym, args) *(void **)&rt->hip.name = dlsym(lib, #sym);
  DRK_HIP_GRAPH_FUNCS(LOAD_OPT)
  DRK_HIP_PROPS_FUNCS(LOAD_OPT)
#undef LOAD_OPT
  if (st) goto fail;
  rt->has_graphs = 1;
#define HAS(ret, name, sym, args) rt->has_graphs &= rt->hip.name != NULL;
  DRK_HIP_GRAPH_FUNCS(HAS)
#undef HAS
  drk_hip_error_t r = rt->hip.Init(0);
  if (r == DRK_HIP_ERROR_NO_DEVICE || r == DRK_HIP_ERROR_INVALID_DEVICE) {
    st = drk_rt_status(a, DRK_STATUS_NO_DEVICE, "no AMD GPU: hipInit reports %s (HIP runtime %s loaded); is the amdgpu kernel driver loaded and /dev/kfd accessible?",
                       rt->hip.GetErrorName(r) ? rt->hip.GetErrorName(r) : "an error", libname);
    goto fail;
  }
  if (r) { st = hip_error(rt, r, "hipInit", "is the amdgpu kernel driver loaded and /dev/kfd accessible?"); goto fail; }
  int count = 0, ver = 0;
  r = rt->hip.GetDeviceCount(&count);
  if (r == DRK_HIP_ERROR_NO_DEVICE) count = 0;
  else if (r) { st = hip_error(rt, r, "hipGetDeviceCount", NULL); goto fail; }
  if (o->device < 0 || o->device >= count) {
    st = drk_rt_status(a, DRK_STATUS_NO_DEVICE, "HIP device %d requested, %d present", o->device, count);
    goto fail;
  }
  if ((r = rt->hip.SetDevice(o->device))) { st = hip_error(rt, r, "hipSetDevice", NULL); goto fail; }
  if ((st = read_arch(rt))) goto fail;
  drk_hip_device_t dev = 0;
  size_t mem = 0;
  char dname[256] = "";
  if ((r = rt->hip.DeviceGet(&dev, o->device)) || (r = rt->hip.DeviceGetName(dname, (int)sizeof dname - 1, dev)) ||
      (r = rt->hip.DeviceTotalMem(&mem, dev)) || (r = rt->hip.RuntimeGetVersion(&ver))) {
    st = hip_error(rt, r, "querying the device", NULL);
    goto fail;
  }
  /* HIP_VERSION encoding: major * 10000000 + minor * 100000 + patch. */
  snprintf(rt->name, sizeof rt->name, "%s (%s, %.1f GiB, HIP %d.%d)", dname, rt->arch, (double)mem / (1024.0 * 1024 * 1024), ver / 10000000, (ver / 100000) % 100);
  *out_rt = rt;
  return NULL;
fail:
  hip_runtime_destroy(rt);
  return st;
}

static void hip_runtime_destroy(void *rtv) {
  hip_rt_t *rt = rtv;
  if (!rt) return;
  dlclose(rt->lib);
  drk_allocator_t a = rt->alloc;
  drk_rt_free(&a, rt, sizeof *rt);
}

static const char *hip_device_name(const void *rt) { return ((const hip_rt_t *)rt)->name; }
static unsigned hip_device_sm(const void *rt) { (void)rt; return 0; }
static const char *hip_device_arch(const void *rt) { return ((const hip_rt_t *)rt)->arch; }

/* ---- target IDs ---- */
/* processor[:feature(+|-)]...; returns -1 when code object `code` cannot run on a device
 * whose target ID is `dev`, else how many features it pins (more = more specific). */
static int target_fits(const char *code, const char *dev) {
  size_t pc = strcspn(code, ":"), pd = strcspn(dev, ":");
  if (pc != pd || strncmp(code, dev, pc)) return -1;
  int pinned = 0;
  for (const char *f = code + pc; *f == ':';) {
    f++;
    size_t fl = strcspn(f, ":");
    if (fl < 2 || (f[fl - 1] != '+' && f[fl - 1] != '-')) return -1; /* malformed */
    int found = 0;
    for (const char *g = dev + pd; *g == ':' && !found;) {
      g++;
      size_t gl = strcspn(g, ":");
      if (gl == fl && !strncmp(f, g, fl - 1)) {
        if (g[gl - 1] != f[fl - 1]) return -1;
        found = 1;
      }
      g += gl;
    }
    if (!found) return -1; /* the device does not have the feature it needs */
    pinned++;
    f += fl;
  }
  return pinned;
}

/* ---- sessions (runtime/src/session.c has the driver-independent half) ---- */
typedef struct hip_session {
  drk_rt_session_t base;
  drk_hip_module_t *mods;    /* per slot */
  drk_hip_function_t *funcs; /* per kernel */
  drk_hip_graph_t graph[DRK_RT_MAX_GRAPHS]; /* per bucket (base.graph) */
  drk_hip_graph_exec_t exec[DRK_RT_MAX_GRAPHS];
  drk_hip_event_t *events; /* DRK_RT_EVENT_COUNT(n_kernels) */
  drk_hip_stream_t stream; /* the session's own: sessions run from several threads at once */
} hip_session_t;

static hip_rt_t *rt_of(const drk_rt_session_t *s) { return s->rt; }
static drk_hip_stream_t stream_of(const drk_rt_session_t *s) { return ((const hip_session_t *)s)->stream; }
/* The arena is an integer (no pointer arithmetic on NULL); HIP takes pointers. */
static void *at(const drk_rt_session_t *s, uint64_t offset) { return (void *)(uintptr_t)(s->arena + offset); }

/* One candidate code object for a slot. */
typedef struct cand {
  char target[TARGET_ID_MAX]; /* target ID, e.g. "gfx942:xnack-" */
  const void *data;
  size_t size;
  int in_bundle;
} cand_t;

/* Bundle entry IDs read "hipv4-amdgcn-amd-amdhsa--gfx942:xnack-" (kind-triple-environment-
 * target ID); returns 0 and the target ID for HIP code objects for amdgcn, else -1. */
static int bundle_target(const drk_bundle_entry_t *e, char *out, size_t len) {
  char id[256];
  static const char triple[] = "-amdgcn-amd-amdhsa-";
  if (e->triple_len >= sizeof id) return -1;
  memcpy(id, e->triple, e->triple_len);
  id[e->triple_len] = 0;
  if (strncmp(id, "hip", 3)) return -1;
  const char *t = strstr(id, triple);
  if (!t) return -1;
  t += sizeof triple - 1;
  t += strcspn(t, "-"); /* environment, usually empty */
  if (*t != '-' || !t[1] || strlen(t + 1) >= len) return -1;
  snprintf(out, len, "%s", t + 1);
  return 0;
}

static void describe(const drk_modfile_t *mf, uint32_t slot, const cand_t *c, size_t n, char *buf, size_t len) {
  size_t o = 0;
  buf[0] = 0;
  for (size_t i = 0; i < n && o + 40 < len; i++)
    o += (size_t)snprintf(buf + o, len - o, "%s%s %s", o ? ", " : "", c[i].target, c[i].in_bundle ? "(offload bundle)" : "code object");
  for (uint32_t i = 0; i < mf->n_images && o + 40 < len; i++) {
    const drk_modfile_image_t *im = &mf->images[i];
    if (im->slot == slot && im->kind != DRK_MODFILE_IMAGE_HSACO && im->kind != DRK_MODFILE_IMAGE_OFFLOAD_BUNDLE)
      o += (size_t)snprintf(buf + o, len - o, "%sNVIDIA code for %s", o ? ", " : "", im->targets);
  }
  if (!o) snprintf(buf, len, "nothing");
}

static drk_status_t load_slot(hip_session_t *s, uint32_t si) {
  hip_rt_t *rt = rt_of(&s->base);
  const drk_modfile_t *mf = s->base.mf;
  uint32_t slot = s->base.slots[si];
  cand_t c[MAX_CANDS];
  size_t nc = 0;
  for (uint32_t i = 0; i < mf->n_images && nc < MAX_CANDS; i++) {
    const drk_modfile_image_t *im = &mf->images[i];
    if (im->slot != slot) continue;
    if (im->kind == DRK_MODFILE_IMAGE_HSACO) {
      size_t tl = strcspn(im->targets, ",");
      if (!tl || tl >= TARGET_ID_MAX)
        return drk_rt_status(&rt->alloc, DRK_STATUS_BAD_MODULE, "image %u: target '%s' is not a gfx target ID", i, im->targets);
      c[nc] = (cand_t){"", im->data, (size_t)im->size, 0};
      memcpy(c[nc].target, im->targets, tl);
      c[nc++].target[tl] = 0;
    } else if (im->kind == DRK_MODFILE_IMAGE_OFFLOAD_BUNDLE) {
      drk_bundle_entry_t e[MAX_BUNDLE_ENTRIES];
      size_t ne = 0;
      char err[256];
      if (drk_bundle_parse(im->data, (size_t)im->size, e, MAX_BUNDLE_ENTRIES, &ne, err, sizeof err))
        return drk_rt_status(&rt->alloc, DRK_STATUS_BAD_MODULE, "image %u (offload bundle): %s", i, err);
      for (size_t j = 0; j < ne && j < MAX_BUNDLE_ENTRIES && nc < MAX_CANDS; j++) {
        c[nc] = (cand_t){"", e[j].data, e[j].size, 1};
        if (e[j].size && !bundle_target(&e[j], c[nc].target, sizeof c[nc].target)) nc++;
      }
    }
  }
  const cand_t *best = NULL;
  int best_pins = -1;
  for (size_t i = 0; i < nc; i++) {
    int p = target_fits(c[i].target, rt->arch);
    if (p > best_pins) best = &c[i], best_pins = p;
  }
  char have[512];
  describe(mf, slot, c, nc, have, sizeof have);
  if (!best)
    return drk_rt_status(&rt->alloc, DRK_STATUS_NO_IMAGE, "no code for the device in slot %u: module has %s, device is %s; recompile with --target=%.*s",
                         slot, have, rt->arch, (int)strcspn(rt->arch, ":"), rt->arch);
  drk_hip_error_t r = rt->hip.ModuleLoadData(&s->mods[si], best->data);
  if (r) {
    char hint[1024];
    snprintf(hint, sizeof hint, "code object for %s%s, device is %s (module has %s)", best->target, best->in_bundle ? " from an offload bundle" : "", rt->arch, have);
    return hip_error(rt, r, "hipModuleLoadData", hint);
  }
  return NULL;
}

static drk_status_t hip_launch(drk_rt_session_t *s, uint32_t k) {
  hip_rt_t *rt = rt_of(s);
  const drk_modfile_kernel_t *kd = &s->mf->kernels[k];
  drk_hip_error_t r = rt->hip.ModuleLaunchKernel(((hip_session_t *)s)->funcs[k], kd->grid[0], kd->grid[1], kd->grid[2], kd->block[0], kd->block[1],
                                                 kd->block[2], kd->dyn_smem, stream_of(s), s->kparams[k], NULL);
  if (r) return drk_rt_status_wrap(hip_error(rt, r, "hipModuleLaunchKernel", NULL), "kernel %u ('%s')", k, kd->name);
  return NULL;
}

/* Features only NVIDIA GPUs have; checked before anything is loaded. */
static drk_status_t check_portable(const drk_rt_session_t *s) {
  const drk_modfile_t *mf = s->mf;
  hip_rt_t *rt = rt_of(s);
  for (uint32_t k = 0; k < mf->n_kernels; k++) {
    const drk_modfile_kernel_t *kd = &mf->kernels[k];
    if (kd->cluster[0])
      return drk_rt_status(&rt->alloc, DRK_STATUS_NO_IMAGE, "kernel %u ('%s') needs a thread-block cluster launch, which only NVIDIA GPUs (sm_90+) have; recompile for %s",
                           k, kd->name, rt->arch);
    for (uint32_t p = 0; p < kd->n_params; p++)
      if (kd->params[p].kind == DRK_MODFILE_PARAM_TMA)
        return drk_rt_status(&rt->alloc, DRK_STATUS_NO_IMAGE, "kernel %u ('%s') takes a TMA descriptor, which only NVIDIA GPUs (sm_90+) have; recompile for %s",
                             k, kd->name, rt->arch);
  }
  return NULL;
}

static drk_status_t hip_init(drk_rt_session_t *bs) {
  hip_session_t *s = (hip_session_t *)bs;
  hip_rt_t *rt = rt_of(bs);
  const drk_modfile_t *mf = bs->mf;
  const drk_allocator_t *a = &rt->alloc;
  uint32_t nk = mf->n_kernels;
  drk_hip_error_t r;
  drk_status_t st = check_portable(bs);
  if (st) return st;
  s->funcs = drk_rt_alloc(a, (nk + 1) * sizeof *s->funcs, 16);
  s->events = drk_rt_alloc(a, DRK_RT_EVENT_COUNT(nk) * sizeof *s->events, 16);
  s->mods = drk_rt_alloc(a, (bs->n_slots + 1) * sizeof *s->mods, 16);
  if (!s->funcs || !s->events || !s->mods) return drk_rt_status(a, DRK_STATUS_OUT_OF_MEMORY, "out of memory for session tables");
  /* Without stream capture in this HIP runtime, runs launch the kernels one by one. */
  bs->can_capture = rt->has_graphs;
  if ((r = rt->hip.SetDevice(rt->ordinal))) return hip_error(rt, r, "hipSetDevice", NULL);
  if ((r = rt->hip.StreamCreateWithFlags(&s->stream, DRK_HIP_STREAM_NON_BLOCKING))) return hip_error(rt, r, "hipStreamCreateWithFlags", NULL);
  for (uint32_t i = 0; i < bs->n_slots; i++)
    if ((st = load_slot(s, i))) return drk_rt_status_wrap(st, "loading code slot %u", bs->slots[i]);
  if (mf->arena_size) {
    char hint[128];
    snprintf(hint, sizeof hint, "the module plans one %llu-byte arena", (unsigned long long)mf->arena_size);
    void *p = NULL;
    if ((r = rt->hip.Malloc(&p, (size_t)mf->arena_size))) return hip_error(rt, r, "hipMalloc (arena)", hint);
    bs->arena = (uintptr_t)p;
    /* Poison, as the CUDA driver does: an output no kernel wrote reads as NaN / -1. */
    if ((r = rt->hip.MemsetD8Async(p, 0xff, (size_t)mf->arena_size, s->stream))) return hip_error(rt, r, "hipMemsetD8Async (arena)", NULL);
  }
  /* hipMemcpyHtoDAsync takes a non-const source it never writes. */
  if (mf->weights_size && (r = rt->hip.MemcpyHtoDAsync(at(bs, mf->weights_offset), (void *)(uintptr_t)mf->weights, (size_t)mf->weights_size, s->stream)))
    return hip_error(rt, r, "hipMemcpyHtoDAsync (weights)", NULL);
  /* 8-byte parameter slots; HIP reads each argument's size from the code object's metadata. */
  drk_rt_session_fill_params(bs);
  for (uint32_t k = 0; k < nk; k++) {
    const drk_modfile_kernel_t *kd = &mf->kernels[k];
    r = rt->hip.ModuleGetFunction(&s->funcs[k], s->mods[bs->kernel_slot[k]], kd->name);
    if (r) return drk_rt_status_wrap(hip_error(rt, r, "hipModuleGetFunction", "the code object does not define this kernel"), "kernel %u ('%s')", k, kd->name);
  }
  for (uint32_t i = 0; i < DRK_RT_EVENT_COUNT(nk); i++)
    if ((r = rt->hip.EventCreateWithFlags(&s->events[i], DRK_HIP_EVENT_DEFAULT))) return hip_error(rt, r, "hipEventCreateWithFlags", NULL);
  return NULL;
}

static void hip_release(drk_rt_session_t *bs) {
  hip_session_t *s = (hip_session_t *)bs;
  hip_rt_t *rt = rt_of(bs);
  const drk_allocator_t *a = &rt->alloc;
  uint32_t nk = bs->mf->n_kernels;
  rt->hip.SetDevice(rt->ordinal);
  if (s->stream) {
    rt->hip.StreamSynchronize(s->stream); /* nothing of this session may still run on its arena */
    rt->hip.StreamDestroy(s->stream);
  }
  for (uint32_t g = 0; g < DRK_RT_MAX_GRAPHS; g++) {
    if (s->exec[g]) rt->hip.GraphExecDestroy(s->exec[g]);
    if (s->graph[g]) rt->hip.GraphDestroy(s->graph[g]);
  }
  if (s->events)
    for (uint32_t i = 0; i < DRK_RT_EVENT_COUNT(nk); i++)
      if (s->events[i]) rt->hip.EventDestroy(s->events[i]);
  if (bs->arena) rt->hip.Free(at(bs, 0));
  if (s->mods)
    for (uint32_t i = 0; i < bs->n_slots; i++)
      if (s->mods[i]) rt->hip.ModuleUnload(s->mods[i]);
  drk_rt_free(a, s->funcs, (nk + 1) * sizeof *s->funcs);
  drk_rt_free(a, s->events, DRK_RT_EVENT_COUNT(nk) * sizeof *s->events);
  drk_rt_free(a, s->mods, (bs->n_slots + 1) * sizeof *s->mods);
}

static drk_status_t hip_enter(drk_rt_session_t *s) {
  hip_rt_t *rt = rt_of(s);
  drk_hip_error_t r = rt->hip.SetDevice(rt->ordinal);
  return r ? hip_error(rt, r, "hipSetDevice", NULL) : NULL;
}

static drk_status_t hip_record(drk_rt_session_t *s, uint32_t event) {
  hip_rt_t *rt = rt_of(s);
  drk_hip_error_t r = rt->hip.EventRecord(((hip_session_t *)s)->events[event], stream_of(s));
  return r ? hip_error(rt, r, "hipEventRecord", NULL) : NULL;
}

static drk_status_t hip_copy(drk_rt_session_t *s, uint64_t offset, const drk_rt_binding_t *b, int output) {
  hip_rt_t *rt = rt_of(s);
  void *arena = at(s, offset);
  drk_hip_error_t r;
  if (output)
    r = b->kind == DRK_MEMORY_HOST ? rt->hip.MemcpyDtoHAsync(b->ptr, arena, b->size, stream_of(s)) : rt->hip.MemcpyDtoDAsync(b->ptr, arena, b->size, stream_of(s));
  else
    r = b->kind == DRK_MEMORY_HOST ? rt->hip.MemcpyHtoDAsync(arena, b->ptr, b->size, stream_of(s)) : rt->hip.MemcpyDtoDAsync(arena, b->ptr, b->size, stream_of(s));
  return r ? hip_error(rt, r, output ? "copying out" : "copying in", NULL) : NULL;
}

static drk_status_t hip_zero(drk_rt_session_t *s, uint64_t offset, uint64_t size) {
  hip_rt_t *rt = rt_of(s);
  drk_hip_error_t r = rt->hip.MemsetD8Async(at(s, offset), 0, (size_t)size, stream_of(s));
  return r ? hip_error(rt, r, "hipMemsetD8Async (padding)", NULL) : NULL;
}

static drk_status_t hip_begin_capture(drk_rt_session_t *s) {
  hip_rt_t *rt = rt_of(s);
  drk_hip_error_t r = rt->hip.StreamBeginCapture(stream_of(s), DRK_HIP_STREAM_CAPTURE_MODE_THREAD_LOCAL);
  return r ? hip_error(rt, r, "hipStreamBeginCapture", NULL) : NULL;
}

static drk_status_t hip_end_capture(drk_rt_session_t *bs, int instantiate) {
  hip_session_t *s = (hip_session_t *)bs;
  hip_rt_t *rt = rt_of(bs);
  uint32_t g = bs->graph;
  drk_hip_error_t r = rt->hip.StreamEndCapture(s->stream, &s->graph[g]);
  if (r) return hip_error(rt, r, "hipStreamEndCapture", NULL);
  if (instantiate && (r = rt->hip.GraphInstantiateWithFlags(&s->exec[g], s->graph[g], 0))) return hip_error(rt, r, "hipGraphInstantiateWithFlags", NULL);
  return NULL;
}

static drk_status_t hip_replay(drk_rt_session_t *s) {
  hip_rt_t *rt = rt_of(s);
  drk_hip_error_t r = rt->hip.GraphLaunch(((hip_session_t *)s)->exec[s->graph], stream_of(s));
  return r ? hip_error(rt, r, "hipGraphLaunch", NULL) : NULL;
}

static drk_status_t hip_sync(drk_rt_session_t *s, int run) {
  hip_rt_t *rt = rt_of(s);
  drk_hip_error_t r = rt->hip.StreamSynchronize(stream_of(s));
  if (!r) return NULL;
  if (!run) return hip_error(rt, r, "hipStreamSynchronize (weights upload)", NULL);
  return hip_error(rt, r, "hipStreamSynchronize (run)", "a kernel faulted or timed out; run with AMD_LOG_LEVEL=3 or under rocgdb");
}

static drk_status_t hip_elapsed(drk_rt_session_t *s, float *out_ms, uint32_t from, uint32_t to) {
  hip_rt_t *rt = rt_of(s);
  drk_hip_event_t *ev = ((hip_session_t *)s)->events;
  drk_hip_error_t r = rt->hip.EventElapsedTime(out_ms, ev[from], ev[to]);
  return r ? hip_error(rt, r, "hipEventElapsedTime", NULL) : NULL;
}

static const drk_rt_session_ops_t hip_session_ops = {
    sizeof(hip_session_t), hip_init, hip_release, hip_enter, hip_record, hip_copy, hip_launch,
    hip_begin_capture, hip_end_capture, hip_replay, hip_sync, hip_elapsed, hip_zero,
};

static drk_status_t hip_session_create(void *rtv, const drk_module_t *m, void **out_session) {
  hip_rt_t *rt = rtv;
  return drk_rt_session_create(&hip_session_ops, rt, &rt->alloc, m->mf, rt->name, out_session);
}

const drk_driver_t drk_driver_hip = {
    "HIP", hip_runtime_create, hip_runtime_destroy, hip_device_name, hip_device_sm, hip_device_arch,
    hip_session_create, drk_rt_session_destroy, drk_rt_session_bind, drk_rt_session_run, drk_rt_session_set_profiling,
    drk_rt_session_kernel_ms, drk_rt_session_last_run_ms, drk_rt_session_run_shapes, drk_rt_session_output_shape,
    drk_rt_session_last_bucket,
};
