/* The measurement worker of `drkc tune` (tune_worker.h). */
#include "tools/tune_worker.h"

#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backends/package/module.h"
#include "drk/drkrt.h"
#include "ir/graph.h"
#include "ir/tensor.h"

enum { REQ_MEASURE = 1, REQ_PROFILE = 2, REQ_DEVICE = 3 };

typedef struct request {
  int kind;
  int warmup, iters;
  uint64_t seed;
  int64_t bound[DRK_TUNE_MAX_INPUTS]; /* integer inputs: values in [0, bound) */
  char path[4096];
  char kernel[128];
} request_t;

/* ---- pipes ---- */
/* Reads n bytes, waiting at most timeout_s in all (< 0: forever). */
static bool read_all(int fd, void *p, size_t n, double timeout_s) {
  char *c = p;
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  while (n) {
    if (timeout_s >= 0) {
      struct timespec t;
      clock_gettime(CLOCK_MONOTONIC, &t);
      double left = timeout_s - ((double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) / 1e9);
      struct pollfd pf = {fd, POLLIN, 0};
      if (left <= 0 || poll(&pf, 1, (int)(left * 1000) + 1) <= 0) return false;
    }
    ssize_t r = read(fd, c, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    c += r, n -= (size_t)r;
  }
  return true;
}

/* ---- NVML (dlopen; every field < 0 without it) ---- */
typedef struct nvml {
  void *lib;
  void *dev;
  int (*clock)(void *, int, unsigned *);
  int (*power)(void *, unsigned *);
  int (*energy)(void *, unsigned long long *);
} nvml_t;

static void nvml_open(nvml_t *n, int device) {
  memset(n, 0, sizeof *n);
  n->lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!n->lib) return;
  int (*init)(void) = (int (*)(void))dlsym(n->lib, "nvmlInit_v2");
  int (*handle)(unsigned, void **) = (int (*)(unsigned, void **))dlsym(n->lib, "nvmlDeviceGetHandleByIndex_v2");
  n->clock = (int (*)(void *, int, unsigned *))dlsym(n->lib, "nvmlDeviceGetClockInfo");
  n->power = (int (*)(void *, unsigned *))dlsym(n->lib, "nvmlDeviceGetPowerUsage");
  n->energy = (int (*)(void *, unsigned long long *))dlsym(n->lib, "nvmlDeviceGetTotalEnergyConsumption");
  if (!init || !handle || init() != 0 || handle((unsigned)device, &n->dev) != 0) n->dev = NULL;
}

static double nvml_sm_mhz(const nvml_t *n) {
  unsigned v;
  return n->dev && n->clock && n->clock(n->dev, 1 /* NVML_CLOCK_SM */, &v) == 0 ? (double)v : -1.0;
}
static double nvml_power_w(const nvml_t *n) {
  unsigned v;
  return n->dev && n->power && n->power(n->dev, &v) == 0 ? v / 1000.0 : -1;
}
static double nvml_energy_mj(const nvml_t *n) {
  unsigned long long v;
  return n->dev && n->energy && n->energy(n->dev, &v) == 0 ? (double)v : -1;
}

/* ---- L2 flush ----
 * Before every timed run the worker overwrites a buffer of twice the L2 size, so no run finds
 * the previous run's weights and activations in L2 (a kernel reads what the kernels before it
 * in the same run wrote, as it does in deployment). Through the CUDA driver the runtime has
 * loaded (its primary context is current on this thread); cuCtxSynchronize orders the memset
 * (legacy stream) before the run (the runtime's own stream). Without the driver functions or
 * the memory, the worker times without it and says so (drk_tune_device_t.l2_flush). */
typedef struct l2flush {
  unsigned long long buf; /* CUdeviceptr */
  size_t bytes;
  unsigned char fill;
  int (*memset8)(unsigned long long, unsigned char, size_t);
  int (*sync)(void);
} l2flush_t;

static l2flush_t g_flush;

static void l2flush_open(int device) {
  void *cu = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  if (!cu) return;
  int (*get)(int *, int) = (int (*)(int *, int))dlsym(cu, "cuDeviceGet");
  int (*attr)(int *, int, int) = (int (*)(int *, int, int))dlsym(cu, "cuDeviceGetAttribute");
  int (*alloc)(unsigned long long *, size_t) = (int (*)(unsigned long long *, size_t))dlsym(cu, "cuMemAlloc_v2");
  g_flush.memset8 = (int (*)(unsigned long long, unsigned char, size_t))dlsym(cu, "cuMemsetD8_v2");
  g_flush.sync = (int (*)(void))dlsym(cu, "cuCtxSynchronize");
  int dev = 0, l2 = 0;
  /* CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38 */
  if (!get || !attr || !alloc || !g_flush.memset8 || !g_flush.sync || get(&dev, device) || attr(&l2, 38, dev) || l2 <= 0 ||
      alloc(&g_flush.buf, 2 * (size_t)l2)) {
    g_flush.buf = 0;
    return;
  }
  g_flush.bytes = 2 * (size_t)l2;
}

/* false: the flush failed (the run is then not timed: a broken context would fail it anyway) */
static bool l2flush(char *msg, size_t n) {
  if (!g_flush.buf) return true;
  if (g_flush.memset8(g_flush.buf, ++g_flush.fill, g_flush.bytes) || g_flush.sync()) {
    snprintf(msg, n, "flushing L2 before a timed run failed");
    return false;
  }
  return true;
}

/* The device's fingerprint from the CUDA driver API and NVML (dlopen; the runtime has loaded
 * libcuda in this process already). */
static void device_info(int device, const nvml_t *nv, drk_tune_device_t *out) {
  memset(out, 0, sizeof *out);
  out->nvml = nv->dev != NULL;
  out->l2_flush = g_flush.buf != 0;
  void *cu = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!cu) return;
  int (*init)(unsigned) = (int (*)(unsigned))dlsym(cu, "cuInit");
  int (*get)(int *, int) = (int (*)(int *, int))dlsym(cu, "cuDeviceGet");
  int (*name)(char *, int, int) = (int (*)(char *, int, int))dlsym(cu, "cuDeviceGetName");
  int (*attr)(int *, int, int) = (int (*)(int *, int, int))dlsym(cu, "cuDeviceGetAttribute");
  int (*version)(int *) = (int (*)(int *))dlsym(cu, "cuDriverGetVersion");
  int dev = 0, v = 0;
  if (init && get && name && attr && init(0) == 0 && get(&dev, device) == 0) {
    out->ok = true;
    name(out->name, (int)sizeof out->name, dev);
    /* CU_DEVICE_ATTRIBUTE_: MULTIPROCESSOR_COUNT 16, CLOCK_RATE 13 (kHz), MEMORY_CLOCK_RATE 36
     * (kHz), GLOBAL_MEMORY_BUS_WIDTH 37, L2_CACHE_SIZE 38, COMPUTE_CAPABILITY_MAJOR 75, _MINOR 76 */
    int a = 0, b = 0;
    if (attr(&a, 16, dev) == 0) out->sms = a;
    if (attr(&a, 13, dev) == 0) out->sm_mhz = a / 1000;
    if (attr(&a, 36, dev) == 0) out->mem_mhz = a / 1000;
    if (attr(&a, 37, dev) == 0) out->bus_bits = a;
    if (attr(&a, 38, dev) == 0) out->l2_bytes = a;
    if (attr(&a, 75, dev) == 0 && attr(&b, 76, dev) == 0) out->cc = 10 * a + b;
    out->bw_gbs = 2.0 * out->mem_mhz * 1e6 * (out->bus_bits / 8.0) / 1e9;
  }
  if (version && version(&v) == 0) {
    snprintf(out->cuda, sizeof out->cuda, "%d.%d", v / 1000, (v % 1000) / 10);
    snprintf(out->driver, sizeof out->driver, "%d", v);
  }
  int (*drv)(char *, unsigned) = nv->lib ? (int (*)(char *, unsigned))dlsym(nv->lib, "nvmlSystemGetDriverVersion") : NULL;
  char buf[80];
  if (nv->dev && drv && drv(buf, sizeof buf) == 0) snprintf(out->driver, sizeof out->driver, "%.31s", buf);
  dlclose(cu);
}

/* ---- the worker process ---- */
typedef struct loaded {
  void *bytes;
  drk_module_t *m;
  drk_session_t *s;
  size_t ni, no, nk;
  drk_tensor_t *in, *out;
  double tol_floor; /* precision_floor of the module */
} loaded_t;

/* The least tolerance of a module's outputs by the precision its kernels compute in (its
 * PRECISION section: operands of products, other arithmetic, stored data): a model computed in
 * f16/bf16 (--precision=fp16) changes by more than an f32 output's 1e-3 when one kernel's
 * schedule reorders its sums (BERT-base on the H200: 1.2e-3 through 12 layers when a matmul's
 * split-K changed, 14 of 16 candidates refused), so its outputs get the 16-bit tolerance, the
 * one `--check` gives fp16 builds; fp8 arithmetic the fp8 one. 0: none known. */
static double precision_floor(const void *bytes, size_t size) {
  drk_modfile_t *mf = NULL;
  char err[64];
  if (drk_modfile_read(bytes, size, NULL, &mf, err, sizeof err) != DRK_MODFILE_OK) return 0;
  double tol = 0;
  for (uint32_t k = 0; mf->kernel_precision && k < mf->n_kernels; k++) {
    const drk_modfile_kernel_prec_t *kp = &mf->kernel_precision[k];
    unsigned m = (unsigned)kp->dot | kp->math | kp->io;
    if (m & (1u << DRK_MODFILE_PREC_F8E4M3 | 1u << DRK_MODFILE_PREC_F8E5M2)) tol = fmax(tol, 6e-2);
    if (m & (1u << DRK_MODFILE_PREC_F16 | 1u << DRK_MODFILE_PREC_BF16)) tol = fmax(tol, 1e-2);
  }
  drk_modfile_free(NULL, mf);
  return tol;
}

static void loaded_free(loaded_t *l) {
  for (size_t i = 0; l->out && i < l->no; i++) drk_tensor_free(&l->out[i]);
  free(l->in); /* the inputs are shared: freed by the caller */
  free(l->out);
  drk_session_destroy(l->s);
  drk_module_destroy(l->m);
  free(l->bytes);
  memset(l, 0, sizeof *l);
}

static bool st_fail(drk_status_t st, const char *what, char *msg, size_t n) {
  if (!st) return false;
  snprintf(msg, n, "%s: %s", what, drk_status_message(st));
  drk_status_destroy(st);
  return true;
}

/* Loads the module at path with a session; outputs allocated as the module declares them. */
static bool load(drk_runtime_t *rt, const char *path, loaded_t *l, char *msg, size_t n) {
  memset(l, 0, sizeof *l);
  drk_diag_t d;
  drk_diag_init(&d, NULL);
  size_t size = 0;
  l->bytes = drk_read_file(path, &size, &d);
  if (!l->bytes) {
    snprintf(msg, n, "cannot read %s", path);
    return false;
  }
  l->tol_floor = precision_floor(l->bytes, size);
  if (st_fail(drk_module_load_memory(NULL, l->bytes, size, &l->m), "loading the module", msg, n) ||
      st_fail(drk_session_create(rt, l->m, &l->s), "preparing the module", msg, n))
    return false;
  l->ni = drk_module_num_inputs(l->m);
  l->no = drk_module_num_outputs(l->m);
  l->nk = drk_module_num_kernels(l->m);
  l->out = calloc(l->no + 1, sizeof *l->out);
  for (size_t i = 0; i < l->no; i++) {
    drk_tensor_info_t ti;
    drk_dtype_t t;
    if (st_fail(drk_module_output_info(l->m, i, &ti), "output info", msg, n)) return false;
    if (!drk_dtype_from_onnx(ti.dtype, &t) || !drk_tensor_alloc(&l->out[i], t, (int)ti.rank, ti.dims)) {
      snprintf(msg, n, "output %zu: cannot allocate", i);
      return false;
    }
    if (st_fail(drk_session_bind_output(l->s, i, l->out[i].data, l->out[i].nbytes, DRK_MEMORY_HOST), "binding an output",
                msg, n))
      return false;
  }
  return true;
}

/* Fresh inputs for module m from seed: floats uniform in [-1, 1), integers in [0, bound) (the
 * parent reads the bounds off the graph: token ids and indices stay in range), bools fair
 * coins. */
static bool make_inputs(const drk_module_t *m, uint64_t seed, const int64_t *bound, drk_tensor_t **out, char *msg,
                        size_t n) {
  size_t ni = drk_module_num_inputs(m);
  drk_tensor_t *in = calloc(ni + 1, sizeof *in);
  for (size_t i = 0; i < ni; i++) {
    drk_tensor_info_t ti;
    drk_dtype_t t;
    if (drk_module_input_info(m, i, &ti) || !drk_dtype_from_onnx(ti.dtype, &t) ||
        !drk_tensor_alloc(&in[i], t, (int)ti.rank, ti.dims)) {
      snprintf(msg, n, "input %zu: cannot allocate", i);
      *out = in;
      return false;
    }
    int64_t k = drk_tensor_numel(&in[i]);
    for (int64_t e = 0; e < k; e++) {
      uint64_t r = drk_splitmix64(&seed);
      if (drk_dtype_is_float(t)) drk_tensor_set_f64(&in[i], e, (double)(r >> 11) * 0x1.0p-52 - 1.0);
      else {
        int64_t bi = i < DRK_TUNE_MAX_INPUTS ? bound[i] : 0;
        uint64_t b = bi > 0 ? (uint64_t)bi : 4;
        drk_tensor_set_i64(&in[i], e, bi < 0 ? -bi - 1 : (int64_t)(t == DRK_DT_BOOL ? (r & 1) : (r % b)));
      }
    }
  }
  *out = in;
  return true;
}

static bool bind_inputs(loaded_t *l, drk_tensor_t *in, char *msg, size_t n) {
  for (size_t i = 0; i < l->ni; i++)
    if (st_fail(drk_session_bind_input(l->s, i, in[i].data, in[i].nbytes, DRK_MEMORY_HOST), "binding an input", msg, n))
      return false;
  return true;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The tolerance of a candidate against the reference (the same graph, the same precision: only
 * reordered arithmetic differs): DESIGN.md's, by the output's dtype. */
static double tolerance(drk_dtype_t t) {
  switch (t) {
    case DRK_DT_F64: return 1e-5;
    case DRK_DT_F32: return 1e-3; /* a split-K or another tile shape reorders f32 sums of 16-bit products */
    case DRK_DT_F16: case DRK_DT_BF16: return 1e-2;
    case DRK_DT_F8E4M3: case DRK_DT_F8E5M2: return 6e-2;
    default: return 0;
  }
}

/* Whether kernel index k belongs to the node of `kernel` (the same "k<node>_" prefix). */
static bool same_node(const drk_module_t *m, size_t k, const char *kernel) {
  const char *name = drk_module_kernel_name(m, k);
  size_t p = strcspn(kernel + 1, "_") + 2; /* "k12_" */
  return name && strncmp(name, kernel, p) == 0;
}

/* iters profiled runs of l; medians of the whole run and of the node's kernels. */
static bool time_runs(loaded_t *l, const char *kernel, int warmup, int iters, double *out_kernel, double *out_run,
                      char *msg, size_t n) {
  if (st_fail(drk_session_set_profiling(l->s, 1), "profiling", msg, n)) return false;
  float *kt = calloc(l->nk + 1, sizeof *kt);
  double *ks = calloc((size_t)iters + 1, sizeof *ks), *rs = calloc((size_t)iters + 1, sizeof *rs);
  bool ok = true, found = false;
  for (int i = 0; ok && i < warmup + iters; i++) {
    ok = l2flush(msg, n) && !st_fail(drk_session_run(l->s), "profiled run", msg, n) &&
         !st_fail(drk_session_kernel_times(l->s, kt, l->nk), "kernel times", msg, n);
    if (!ok || i < warmup) continue;
    double sum = 0, mine = 0;
    for (size_t k = 0; k < l->nk; k++) {
      sum += kt[k];
      if (kernel && same_node(l->m, k, kernel)) mine += kt[k], found = true;
    }
    ks[i - warmup] = mine, rs[i - warmup] = sum;
  }
  if (ok && kernel && !found) {
    snprintf(msg, n, "the module has no kernel of %s's node", kernel);
    ok = false;
  }
  if (ok) *out_kernel = median(ks, iters), *out_run = median(rs, iters);
  drk_session_set_profiling(l->s, 0);
  free(kt);
  free(ks);
  free(rs);
  return ok;
}

static void measure(drk_runtime_t *rt, loaded_t *ref, const nvml_t *nv, const request_t *rq, drk_tune_result_t *r) {
  loaded_t c;
  drk_tensor_t *in = NULL;
  r->ok = true;
  r->sm_mhz = r->power_w = r->energy_mj_per_run = -1;
  if (!load(rt, rq->path, &c, r->msg, sizeof r->msg)) goto done;
  if (c.ni != ref->ni || c.no != ref->no) {
    snprintf(r->msg, sizeof r->msg, "the candidate's interface differs from the reference's");
    goto done;
  }
  if (!make_inputs(ref->m, rq->seed, rq->bound, &in, r->msg, sizeof r->msg) || !bind_inputs(ref, in, r->msg, sizeof r->msg) ||
      !bind_inputs(&c, in, r->msg, sizeof r->msg) || st_fail(drk_session_run(ref->s), "the reference run", r->msg, sizeof r->msg))
    goto done;
  for (size_t i = 0; i < c.no; i++) memset(c.out[i].data, 0xff, c.out[i].nbytes); /* poison */
  if (st_fail(drk_session_run(c.s), "the candidate's run", r->msg, sizeof r->msg)) goto done;
  r->max_err = 0;
  for (size_t i = 0; i < c.no; i++) {
    double e = drk_tensor_rel_error(&c.out[i], &ref->out[i]), tol = fmax(tolerance(c.out[i].dtype), ref->tol_floor);
    if (!(e <= r->max_err)) r->max_err = e;
    if (!(e <= tol)) {
      snprintf(r->msg, sizeof r->msg, "output %zu: relative error %.3g against the reference (tolerance %.0e)", i, e, tol);
      goto done;
    }
  }
  double e0 = nvml_energy_mj(nv), k, run, rk, rrun;
  if (!time_runs(&c, rq->kernel, rq->warmup, rq->iters, &k, &run, r->msg, sizeof r->msg)) goto done;
  double e1 = nvml_energy_mj(nv);
  r->sm_mhz = nvml_sm_mhz(nv);
  r->power_w = nvml_power_w(nv);
  if (e0 >= 0 && e1 >= e0) r->energy_mj_per_run = (e1 - e0) / (rq->warmup + rq->iters);
  if (!time_runs(ref, rq->kernel, rq->warmup, rq->iters, &rk, &rrun, r->msg, sizeof r->msg)) goto done;
  r->kernel_ms = k, r->run_ms = run, r->ref_kernel_ms = rk, r->ref_run_ms = rrun;
  r->valid = true;
done:
  for (size_t i = 0; in && i < ref->ni; i++) drk_tensor_free(&in[i]);
  free(in);
  loaded_free(&c);
}

static void worker_main(int in, int out, const char *ref_path, int device) {
  drk_runtime_options_t ro = {.device = device};
  drk_runtime_t *rt = NULL;
  loaded_t ref = {0};
  char msg[256] = "";
  nvml_t nv;
  nvml_open(&nv, device);
  bool ready = !st_fail(drk_runtime_create(&ro, &rt), "starting the GPU runtime", msg, sizeof msg) &&
               load(rt, ref_path, &ref, msg, sizeof msg);
  if (ready) l2flush_open(device);
  request_t rq;
  while (read_all(in, &rq, sizeof rq, -1)) {
    drk_tune_result_t r = {0};
    if (!ready) {
      r.ok = true;
      snprintf(r.msg, sizeof r.msg, "%s", msg);
      uint64_t none = 0;
      drk_tune_device_t nodev = {0};
      if (!drk_write_all(out, &r, sizeof r) || (rq.kind == REQ_PROFILE && !drk_write_all(out, &none, sizeof none)) ||
          (rq.kind == REQ_DEVICE && !drk_write_all(out, &nodev, sizeof nodev)))
        break;
      continue;
    } else if (rq.kind == REQ_DEVICE) {
      drk_tune_device_t info;
      device_info(device, &nv, &info);
      r.ok = r.valid = info.ok;
      if (!info.ok) snprintf(r.msg, sizeof r.msg, "the CUDA driver does not describe device %d", device);
      if (!drk_write_all(out, &r, sizeof r) || !drk_write_all(out, &info, sizeof info)) break;
      continue;
    } else if (rq.kind == REQ_MEASURE) {
      measure(rt, &ref, &nv, &rq, &r);
    } else {
      drk_tensor_t *ins = NULL;
      r.ok = make_inputs(ref.m, rq.seed, rq.bound, &ins, r.msg, sizeof r.msg) && bind_inputs(&ref, ins, r.msg, sizeof r.msg);
      double *ms = calloc(ref.nk + 1, sizeof *ms);
      /* per kernel: median over iters of each kernel's own time */
      float *kt = calloc(ref.nk + 1, sizeof *kt);
      double *all = calloc((ref.nk + 1) * (size_t)(rq.iters + 1), sizeof *all);
      r.ok = r.ok && !st_fail(drk_session_set_profiling(ref.s, 1), "profiling", r.msg, sizeof r.msg);
      for (int i = 0; r.ok && i < rq.warmup + rq.iters; i++) {
        r.ok = l2flush(r.msg, sizeof r.msg) && !st_fail(drk_session_run(ref.s), "profiled run", r.msg, sizeof r.msg) &&
               !st_fail(drk_session_kernel_times(ref.s, kt, ref.nk), "kernel times", r.msg, sizeof r.msg);
        for (size_t k = 0; r.ok && i >= rq.warmup && k < ref.nk; k++) all[k * (size_t)rq.iters + (size_t)(i - rq.warmup)] = kt[k];
      }
      drk_session_set_profiling(ref.s, 0);
      for (size_t k = 0; r.ok && k < ref.nk; k++) ms[k] = median(&all[k * (size_t)rq.iters], rq.iters);
      r.valid = r.ok;
      r.ok = true;
      uint64_t nk = r.valid ? ref.nk : 0;
      if (!(drk_write_all(out, &r, sizeof r) && drk_write_all(out, &nk, sizeof nk) && drk_write_all(out, ms, nk * sizeof *ms))) break;
      for (size_t i = 0; ins && i < ref.ni; i++) drk_tensor_free(&ins[i]);
      free(ins);
      free(ms);
      free(kt);
      free(all);
      continue;
    }
    if (!drk_write_all(out, &r, sizeof r)) break;
  }
  for (size_t i = 0; i < ref.no; i++) drk_tensor_free(&ref.out[i]);
  _exit(0);
}

/* ---- the parent's side ---- */
void drk_tune_worker_init(drk_tune_worker_t *w, const char *ref_path, int device, double timeout_s) {
  memset(w, 0, sizeof *w);
  w->pid = -1;
  snprintf(w->ref_path, sizeof w->ref_path, "%s", ref_path);
  w->device = device;
  w->timeout_s = timeout_s;
}

void drk_tune_worker_stop(drk_tune_worker_t *w) {
  if (w->pid <= 0) return;
  close(w->to_child);
  close(w->from_child);
  kill(w->pid, SIGKILL);
  waitpid(w->pid, NULL, 0);
  w->pid = -1;
}

static bool start(drk_tune_worker_t *w) {
  int a[2], b[2];
  if (pipe(a) || pipe(b)) return false;
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) return false;
  if (pid == 0) {
    close(a[1]);
    close(b[0]);
    worker_main(a[0], b[1], w->ref_path, w->device);
  }
  close(a[0]);
  close(b[1]);
  signal(SIGPIPE, SIG_IGN);
  w->pid = pid, w->to_child = a[1], w->from_child = b[0];
  return true;
}

/* Sends rq and reads a result (and for profiles the kernel times); kills the worker when it
 * does not answer within the timeout (the first request also loads the reference). */
static bool ask(drk_tune_worker_t *w, const request_t *rq, drk_tune_result_t *r) {
  if (w->pid <= 0 && !start(w)) {
    snprintf(r->msg, sizeof r->msg, "cannot start the measurement worker: %s", strerror(errno));
    return false;
  }
  if (drk_write_all(w->to_child, rq, sizeof *rq) && read_all(w->from_child, r, sizeof *r, w->timeout_s)) return true;
  int status = 0;
  bool exited = waitpid(w->pid, &status, WNOHANG) == w->pid;
  if (exited && WIFSIGNALED(status))
    snprintf(r->msg, sizeof r->msg, "the worker died (signal %d) on this candidate", WTERMSIG(status));
  else if (exited)
    snprintf(r->msg, sizeof r->msg, "the worker exited (status %d) on this candidate", WEXITSTATUS(status));
  else
    snprintf(r->msg, sizeof r->msg, "no answer within %.0f s: the candidate hung; worker killed", w->timeout_s);
  if (exited) w->pid = -1, close(w->to_child), close(w->from_child);
  else drk_tune_worker_stop(w);
  w->restarts++;
  r->ok = r->valid = false;
  return false;
}

drk_tune_result_t drk_tune_worker_measure(drk_tune_worker_t *w, const char *path, const char *kernel, int warmup,
                                          int iters, uint64_t seed) {
  request_t rq = {.kind = REQ_MEASURE, .warmup = warmup, .iters = iters, .seed = seed};
  memcpy(rq.bound, w->bound, sizeof rq.bound);
  snprintf(rq.path, sizeof rq.path, "%s", path);
  snprintf(rq.kernel, sizeof rq.kernel, "%s", kernel);
  drk_tune_result_t r = {0};
  ask(w, &rq, &r);
  return r;
}

bool drk_tune_worker_profile_reference(drk_tune_worker_t *w, double *out_ms, size_t n, int iters, char *msg,
                                       size_t msg_size) {
  request_t rq = {.kind = REQ_PROFILE, .warmup = 3, .iters = iters, .seed = 1};
  memcpy(rq.bound, w->bound, sizeof rq.bound);
  drk_tune_result_t r = {0};
  uint64_t nk = 0;
  bool ok = ask(w, &rq, &r) && read_all(w->from_child, &nk, sizeof nk, w->timeout_s); /* the worker always sends nk */
  if (ok && nk) {
    double *ms = calloc(nk, sizeof *ms);
    ok = ms && read_all(w->from_child, ms, nk * sizeof *ms, w->timeout_s);
    if (ok && nk == n) memcpy(out_ms, ms, n * sizeof *ms);
    else if (ok) snprintf(r.msg, sizeof r.msg, "the reference has %llu kernels, not %zu", (unsigned long long)nk, n);
    ok = ok && nk == n;
    free(ms);
  }
  ok = ok && r.valid;
  if (!ok) snprintf(msg, msg_size, "%s", r.msg[0] ? r.msg : "the reference's profile failed");
  return ok;
}

bool drk_tune_worker_device(drk_tune_worker_t *w, drk_tune_device_t *out, char *msg, size_t msg_size) {
  request_t rq = {.kind = REQ_DEVICE};
  drk_tune_result_t r = {0};
  drk_tune_device_t info;
  bool ok = ask(w, &rq, &r) && read_all(w->from_child, &info, sizeof info, w->timeout_s);
  ok = ok && r.valid;
  if (ok) *out = info;
  else snprintf(msg, msg_size, "%s", r.msg[0] ? r.msg : "the worker did not describe its GPU");
  return ok;
}
