/* The measurement worker of `drkc tune`: candidate modules run in a process of their own, so
 * a candidate that crashes, hangs or corrupts the GPU context costs one restart, not the tune.
 *
 * The parent never touches the GPU driver (a CUDA context does not survive fork). The worker
 * keeps the reference module (the heuristic's build of the same model) loaded; for every
 * request it draws fresh random inputs (the request's seed), runs the reference on them,
 * poisons the candidate's outputs (all bytes 0xFF: NaN for floats), runs the candidate, checks
 * every element of every output against the reference (‖cand − ref‖ / ‖ref‖ within the dtype's
 * tolerance, NaN never passes), and only then times it: per-kernel times of profiled runs
 * (kernels launched one by one between events, in model order), the median over `iters`, plus
 * the SM clock, power and energy from NVML when libnvidia-ml can be opened.
 *
 * A candidate that fails any check is reported valid = false with the reason; the tuner gives
 * it the floor reward and never stores it as best. A request that takes longer than the
 * timeout kills the worker (SIGKILL) and reports the candidate as hung; the next request
 * starts a new worker. */
#ifndef DRK_TUNE_WORKER_H
#define DRK_TUNE_WORKER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct drk_tune_result {
  bool ok;          /* the worker answered (false: crashed or hung; reason in msg) */
  bool valid;       /* every output matched the reference */
  double max_err;   /* the worst output's relative error against the reference */
  double kernel_ms; /* median time of the named kernel (all kernels of its node together) */
  double run_ms;    /* median time of a whole run (kernels one by one) */
  double ref_kernel_ms; /* the same kernel in the reference module, measured in the same request */
  double ref_run_ms;    /* a whole run of the reference, likewise */
  double sm_mhz, power_w, energy_mj_per_run; /* NVML; < 0 when unavailable */
  char msg[256];
} drk_tune_result_t;

#define DRK_TUNE_MAX_INPUTS 16

/* What the worker tells of its GPU (the target fingerprint of the kernel database): from the
 * CUDA driver (libcuda via dlopen: cuDeviceGetName, cuDeviceGetAttribute, cuDriverGetVersion)
 * and NVML (the driver's version string). Unknown numbers are 0, unknown strings "". */
typedef struct drk_tune_device {
  bool ok;          /* the CUDA driver answered */
  bool nvml;        /* NVML could be opened (clocks, power, energy get measured) */
  bool l2_flush;    /* timed runs start with L2 overwritten (a buffer of 2x its size) */
  char name[96];
  int cc;           /* compute capability, 90 for 9.0 */
  int sms, sm_mhz, mem_mhz, bus_bits;
  int64_t l2_bytes;
  double bw_gbs;    /* 2 x memory clock x bus width (the DDR peak) */
  char driver[32];  /* NVML's driver version ("560.35.03"), else the CUDA driver API's ("12060") */
  char cuda[32];    /* the CUDA driver API version, "12.6" */
} drk_tune_device_t;

typedef struct drk_tune_worker {
  /* per graph input: integer values are drawn in [0, bound) (drk_graph_index_bound); 0: 4;
   * negative: every value is -bound - 1 (a --dynamic bucket's length input: its size) */
  int64_t bound[DRK_TUNE_MAX_INPUTS];
  pid_t pid;
  int to_child, from_child;
  char ref_path[4096];
  int device;
  double timeout_s;
  int restarts;
} drk_tune_worker_t;

/* Prepares (does not start) a worker over the reference module at ref_path on GPU device. */
void drk_tune_worker_init(drk_tune_worker_t *w, const char *ref_path, int device, double timeout_s);
/* Measures the module at path: the kernels named `kernel` and its node's further kernels
 * (k12_MatMul, k12_MatMul_1...) timed together, in the candidate and in the reference.
 * Starts the worker when none runs. */
drk_tune_result_t drk_tune_worker_measure(drk_tune_worker_t *w, const char *path, const char *kernel, int warmup,
                                          int iters, uint64_t seed);
/* Per-kernel times (ms, medians over iters profiled runs) of the reference module, written to
 * out_ms (n entries: drk_module_num_kernels); false with msg when the run failed. */
bool drk_tune_worker_profile_reference(drk_tune_worker_t *w, double *out_ms, size_t n, int iters, char *msg,
                                       size_t msg_size);
/* The worker's GPU (starts the worker when none runs); false with msg when it cannot tell. */
bool drk_tune_worker_device(drk_tune_worker_t *w, drk_tune_device_t *out, char *msg, size_t msg_size);
void drk_tune_worker_stop(drk_tune_worker_t *w);

#endif
