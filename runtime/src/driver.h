/* The table of entry points a GPU driver (runtime/drivers/<name>) gives libdrkrt.
 *
 * runtime/src/runtime.c owns the public drk_runtime_t / drk_session_t handles: it checks
 * arguments (NULL handles, bind indices and sizes), picks the driver (CUDA when libcuda
 * loads and reports a device, else HIP), and forwards here with the driver's own state
 * (`void *`, whatever the driver allocated). A driver may therefore assume non-NULL,
 * validated arguments. Every status a driver returns is complete: runtime.c adds no
 * context to it, so the messages read as they did before the table existed. */
#ifndef DRK_RT_DRIVER_H
#define DRK_RT_DRIVER_H

#include "runtime/src/internal.h"

typedef struct drk_driver {
  const char *name; /* "CUDA", "HIP" */
  /* Loads the driver library (`library`; NULL: the driver's default, its $DRK_*_DRIVER
   * variable, then its standard names), opens device o->device, creates a stream. On
   * failure returns DRK_STATUS_NO_DRIVER (library missing or lacking entry points),
   * DRK_STATUS_NO_DEVICE (library loaded, no such device) or another code, and leaves
   * nothing behind. */
  drk_status_t (*runtime_create)(const drk_runtime_options_t *o, const char *library, const drk_allocator_t *a, void **out_rt);
  void (*runtime_destroy)(void *rt);
  const char *(*device_name)(const void *rt);
  unsigned (*device_sm)(const void *rt);   /* 0 when the device is not an NVIDIA GPU */
  const char *(*device_arch)(const void *rt); /* "sm_90", "gfx942:sramecc+:xnack-" */
  drk_status_t (*session_create)(void *rt, const drk_module_t *m, void **out_session);
  void (*session_destroy)(void *s);
  /* Arguments already checked against the module. */
  void (*session_bind)(void *s, size_t index, void *ptr, size_t size, drk_memory_kind_t kind, int output);
  drk_status_t (*session_run)(void *s);
  void (*session_set_profiling)(void *s, int enabled);
  /* Per-kernel ms of the last profiled run, n_kernels entries; NULL before one. */
  const float *(*session_kernel_ms)(const void *s);
  float (*session_last_run_ms)(const void *s);
  /* A module with buckets: input_dims checked here (runtime/src/session.c). */
  drk_status_t (*session_run_shapes)(void *s, const int64_t *const *input_dims);
  /* The last run's output shape (dims: DRK_MODFILE_MAX_RANK entries) and bucket. */
  void (*session_output_shape)(const void *s, size_t index, int64_t *out_dims, uint32_t *out_rank);
  size_t (*session_last_bucket)(const void *s);
} drk_driver_t;

extern const drk_driver_t drk_driver_cuda; /* runtime/drivers/cuda/cuda.c */
extern const drk_driver_t drk_driver_hip;  /* runtime/drivers/hip/hip.c */

#endif
