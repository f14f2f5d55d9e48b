/* A stand-in for libamdhip64.so, loaded by tests/runtime/test_hip through the hip_library
 * argument of drk_runtime_create_driver, so that the HIP driver's paths run without an AMD GPU.
 *
 * It exports the hip* entry points runtime/drivers/hip/hip_api.h lists, with the same
 * calling convention. Behaviour comes from the environment (DEVICE read at hipInit, the
 * others at each call):
 *   DRK_FAKE_HIP_DEVICE  unset/empty: hipInit fails with hipErrorInvalidDevice (what the
 *                        real runtime says without a GPU); "none": hipInit succeeds and
 *                        there are no devices; anything else: one device with that
 *                        gcnArchName (e.g. "gfx942:sramecc+:xnack-").
 *   DRK_FAKE_HIP_PROPS   "r0000": hipGetDevicePropertiesR0600 fails (the driver must fall
 *                        back to the old layout).
 *   DRK_FAKE_HIP_FAIL    name of one entry point that fails with hipErrorOutOfMemory.
 * "Device" memory is host memory; copies happen at once. A code object is a NUL-terminated
 * string starting with "\x7f" "ELF" that names its kernels; the kernels vadd and vscale of
 * tests/runtime/test_util.h execute on the host (c = a + b, y = x * s), so a run computes
 * real results. Stream capture records launches into a graph that hipGraphLaunch replays.
 * Built with -DFAKE_HIP_NO_GRAPH the graph entry points are absent (an old HIP runtime).
 * fake_hip_stats() reports what happened, for the test to check.
 *
 * Every entry point is declared from hip_api.h's own tables, with its handle types (this
 * file completes the opaque structs), so the driver calls exactly the function types it
 * declares: UBSan's -fsanitize=function checks that on every call. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/drivers/hip/hip_api.h"

#define EXPORT __attribute__((visibility("default")))
#define DECLARE(ret, name, sym, args) EXPORT ret sym args;
DRK_HIP_FUNCS(DECLARE)
DRK_HIP_GRAPH_FUNCS(DECLARE)
EXPORT drk_hip_error_t hipGetDevicePropertiesR0600(void *prop, int ordinal);
EXPORT drk_hip_error_t hipGetDeviceProperties(void *prop, int ordinal);
#undef DECLARE

enum { OK = 0, OOM = 2, INVALID_VALUE = 1, NO_DEVICE = 100, INVALID_DEVICE = 101, INVALID_IMAGE = 200, NOT_FOUND = 500, NOT_SUPPORTED = 801 };

typedef struct drk_hip_func { char name[64]; } fake_func_t;
typedef struct drk_hip_mod { const char *image; fake_func_t funcs[8]; int n; } fake_mod_t;
typedef struct launch { fake_func_t *f; unsigned grid[3], block[3], smem; uint64_t args[4]; } launch_t;
typedef struct drk_hip_graph { launch_t l[16]; int n; } fake_graph_t;
typedef struct drk_hip_graph_exec { fake_graph_t g; } fake_graph_exec_t;
typedef struct drk_hip_stream { fake_graph_t *capturing; } fake_stream_t;
typedef struct drk_hip_event { long tick; } fake_event_t;

static int g_device_present, g_no_devices;
static char g_arch[256];
static long g_tick, g_live;
static int g_launches, g_graph_launches;
static launch_t g_last;
static char g_last_image[128];

EXPORT void fake_hip_stats(int *launches, int *graph_launches, long *live, unsigned last_grid[3], unsigned last_block[3], unsigned *last_smem,
                           const char **last_image) {
  *launches = g_launches, *graph_launches = g_graph_launches, *live = g_live;
  memcpy(last_grid, g_last.grid, sizeof g_last.grid), memcpy(last_block, g_last.block, sizeof g_last.block);
  *last_smem = g_last.smem;
  *last_image = g_last_image;
}

static int fails(const char *fn) {
  const char *f = getenv("DRK_FAKE_HIP_FAIL");
  return f && !strcmp(f, fn);
}
#define FAILPOINT(fn) if (fails(#fn)) return OOM

EXPORT int hipInit(unsigned int flags) {
  (void)flags;
  const char *d = getenv("DRK_FAKE_HIP_DEVICE");
  if (!d || !*d) return INVALID_DEVICE;
  g_no_devices = !strcmp(d, "none");
  g_device_present = !g_no_devices;
  snprintf(g_arch, sizeof g_arch, "%s", d);
  FAILPOINT(hipInit);
  return OK;
}
EXPORT int hipRuntimeGetVersion(int *v) { *v = 6 * 10000000 + 2 * 100000 + 41133; return OK; }
EXPORT const char *hipGetErrorName(int e) {
  switch (e) {
  case OK: return "hipSuccess";
  case INVALID_VALUE: return "hipErrorInvalidValue";
  case OOM: return "hipErrorOutOfMemory";
  case NO_DEVICE: return "hipErrorNoDevice";
  case INVALID_DEVICE: return "hipErrorInvalidDevice";
  case INVALID_IMAGE: return "hipErrorInvalidImage";
  case NOT_FOUND: return "hipErrorNotFound";
  case NOT_SUPPORTED: return "hipErrorNotSupported";
  }
  return "hipErrorUnknown";
}
EXPORT const char *hipGetErrorString(int e) { return e == NOT_FOUND ? "named symbol not found" : hipGetErrorName(e); }
EXPORT int hipGetDeviceCount(int *n) {
  FAILPOINT(hipGetDeviceCount);
  *n = g_device_present;
  return g_device_present ? OK : NO_DEVICE;
}
EXPORT int hipSetDevice(int d) { return d == 0 && g_device_present ? OK : INVALID_DEVICE; }
EXPORT int hipDeviceGet(int *d, int ordinal) { *d = ordinal; return OK; }
EXPORT int hipDeviceGetName(char *name, int len, int d) { snprintf(name, (size_t)len, "Fake AMD GPU"); return OK; }
EXPORT int hipDeviceTotalMem(size_t *bytes, int d) { *bytes = (size_t)192 << 30; return OK; }
static int props(void *p, size_t offset) {
  memset(p, 0, offset + 256);
  snprintf((char *)p, 256, "Fake AMD GPU");
  memcpy((char *)p + offset, g_arch, 256);
  return OK;
}
EXPORT int hipGetDevicePropertiesR0600(void *p, int d) {
  const char *old = getenv("DRK_FAKE_HIP_PROPS");
  return old && !strcmp(old, "r0000") ? NOT_SUPPORTED : props(p, 1160);
}
EXPORT int hipGetDeviceProperties(void *p, int d) { return props(p, 396); }

EXPORT int hipStreamCreateWithFlags(fake_stream_t **s, unsigned int flags) {
  FAILPOINT(hipStreamCreateWithFlags);
  *s = calloc(1, sizeof **s);
  g_live++;
  return OK;
}
EXPORT int hipStreamDestroy(fake_stream_t *s) { free(s), g_live--; return OK; }
EXPORT int hipStreamSynchronize(fake_stream_t *s) { return OK; }
EXPORT int hipMalloc(void **p, size_t n) {
  FAILPOINT(hipMalloc);
  *p = malloc(n ? n : 1);
  g_live++;
  return OK;
}
EXPORT int hipFree(void *p) { free(p), g_live--; return OK; }
EXPORT int hipMemsetD8Async(void *p, unsigned char v, size_t n, fake_stream_t *s) { memset(p, v, n); return OK; }
EXPORT int hipMemcpyHtoDAsync(void *d, void *h, size_t n, fake_stream_t *s) { memcpy(d, h, n); return OK; }
EXPORT int hipMemcpyDtoHAsync(void *h, void *d, size_t n, fake_stream_t *s) { memcpy(h, d, n); return OK; }
EXPORT int hipMemcpyDtoDAsync(void *d, void *s_, size_t n, fake_stream_t *s) { memcpy(d, s_, n); return OK; }

EXPORT int hipModuleLoadData(fake_mod_t **m, const void *image) {
  FAILPOINT(hipModuleLoadData);
  if (memcmp(image, "\x7f" "ELF", 4)) return INVALID_IMAGE;
  *m = calloc(1, sizeof **m);
  (*m)->image = image;
  snprintf(g_last_image, sizeof g_last_image, "%s", (const char *)image + 4);
  g_live++;
  return OK;
}
EXPORT int hipModuleUnload(fake_mod_t *m) { free(m), g_live--; return OK; }
EXPORT int hipModuleGetFunction(fake_func_t **f, fake_mod_t *m, const char *name) {
  if (!strstr(m->image, name) || m->n == 8 || strlen(name) >= 64) return NOT_FOUND;
  snprintf(m->funcs[m->n].name, sizeof m->funcs[m->n].name, "%s", name);
  *f = &m->funcs[m->n++];
  return OK;
}

static void execute(const launch_t *l) {
  uint64_t threads = (uint64_t)l->grid[0] * l->block[0];
  uint32_t n = (uint32_t)l->args[3];
  if (!strcmp(l->f->name, "vadd")) {
    const float *a = (const float *)(uintptr_t)l->args[0], *b = (const float *)(uintptr_t)l->args[1];
    float *c = (float *)(uintptr_t)l->args[2];
    for (uint32_t i = 0; i < n && i < threads; i++) c[i] = a[i] + b[i];
  } else if (!strcmp(l->f->name, "vscale")) {
    const float *x = (const float *)(uintptr_t)l->args[0];
    float *y = (float *)(uintptr_t)l->args[1], s;
    memcpy(&s, &l->args[2], 4);
    for (uint32_t i = 0; i < n && i < threads; i++) y[i] = x[i] * s;
  }
  g_last = *l;
  g_launches++;
}

EXPORT int hipModuleLaunchKernel(fake_func_t *f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, unsigned int by, unsigned int bz,
                                 unsigned int smem, fake_stream_t *s, void **params, void **extra) {
  FAILPOINT(hipModuleLaunchKernel);
  if (!f || !params || extra) return INVALID_VALUE;
  launch_t l = {f, {gx, gy, gz}, {bx, by, bz}, smem, {0}};
  /* Both test kernels take 4 arguments: 8-byte pointers, 4-byte scalars. */
  for (int i = 0; i < 4; i++) memcpy(&l.args[i], params[i], i == 3 || (i == 2 && !strcmp(f->name, "vscale")) ? 4 : 8);
  if (s && s->capturing) {
    if (s->capturing->n == 16) return OOM;
    s->capturing->l[s->capturing->n++] = l;
    return OK;
  }
  execute(&l);
  return OK;
}

EXPORT int hipEventCreateWithFlags(fake_event_t **e, unsigned flags) {
  FAILPOINT(hipEventCreateWithFlags);
  *e = calloc(1, sizeof **e);
  g_live++;
  return OK;
}
EXPORT int hipEventDestroy(fake_event_t *e) { free(e), g_live--; return OK; }
EXPORT int hipEventRecord(fake_event_t *e, fake_stream_t *s) { e->tick = ++g_tick; return OK; }
EXPORT int hipEventElapsedTime(float *ms, fake_event_t *a, fake_event_t *b) { *ms = 0.25f * (float)(b->tick - a->tick); return OK; }

#ifndef FAKE_HIP_NO_GRAPH
EXPORT int hipStreamBeginCapture(fake_stream_t *s, int mode) {
  FAILPOINT(hipStreamBeginCapture);
  if (mode != 1) return INVALID_VALUE; /* the driver asks for hipStreamCaptureModeThreadLocal */
  s->capturing = calloc(1, sizeof *s->capturing);
  g_live++;
  return OK;
}
EXPORT int hipStreamEndCapture(fake_stream_t *s, fake_graph_t **g) {
  *g = s->capturing;
  s->capturing = NULL;
  return *g ? OK : INVALID_VALUE;
}
EXPORT int hipGraphInstantiateWithFlags(fake_graph_exec_t **e, fake_graph_t *g, unsigned long long flags) {
  FAILPOINT(hipGraphInstantiateWithFlags);
  *e = malloc(sizeof **e);
  (*e)->g = *g;
  g_live++;
  return OK;
}
EXPORT int hipGraphLaunch(fake_graph_exec_t *e, fake_stream_t *s) {
  for (int i = 0; i < e->g.n; i++) execute(&e->g.l[i]);
  g_graph_launches++;
  return OK;
}
EXPORT int hipGraphExecDestroy(fake_graph_exec_t *e) { free(e), g_live--; return OK; }
EXPORT int hipGraphDestroy(fake_graph_t *g) { free(g), g_live--; return OK; }
#endif
