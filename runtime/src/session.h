/* The driver-independent half of a session, shared by runtime/drivers/cuda and
 * runtime/drivers/hip: host tables (code slots, kernel parameters, bindings, timings), the
 * kernel-parameter store's layout, and the order of work in session creation (tables,
 * driver setup, launch-sequence capture, upload sync) and in a run (copy in, replay or
 * launch one by one, copy out, sync, timings). A driver embeds drk_rt_session_t as the first
 * member of its own session and supplies, through drk_rt_session_ops_t, only the calls into
 * its API; every status those calls return is already converted (drk_rt_driver_status). */
#ifndef DRK_RT_SESSION_H
#define DRK_RT_SESSION_H

#include <stdint.h>

#include "runtime/src/internal.h"

typedef struct drk_rt_session drk_rt_session_t;

typedef struct drk_rt_binding {
  void *ptr; /* NULL: not bound */
  size_t size;
  drk_memory_kind_t kind;
} drk_rt_binding_t;

/* Events, by index (the driver creates n_kernels + 3 of them): 0..n_kernels bracket the
 * kernels of a profiled run, then the start and end of every run. */
#define DRK_RT_EVENT_RUN_START(n_kernels) ((n_kernels) + 1)
#define DRK_RT_EVENT_RUN_END(n_kernels) ((n_kernels) + 2)
#define DRK_RT_EVENT_COUNT(n_kernels) ((n_kernels) + 3)

/* Captured launch sequences a session keeps: one per bucket (the module reader allows no more
 * buckets than this). */
#define DRK_RT_MAX_GRAPHS DRK_MODFILE_MAX_BUCKETS

typedef struct drk_rt_session_ops {
  size_t size; /* of the driver's session struct, which starts with drk_rt_session_t */
  /* After the host tables: makes the device current, loads code, allocates the arena
   * (s->arena), uploads weights, fills drk_rt_session_fill_params and whatever parameters
   * it does not (TMA), resolves kernels, creates the events. */
  drk_status_t (*init)(drk_rt_session_t *s);
  /* Releases every driver object init made (also after a partial init); not the tables. */
  void (*release)(drk_rt_session_t *s);
  drk_status_t (*enter)(drk_rt_session_t *s); /* make the runtime's device current */
  drk_status_t (*record)(drk_rt_session_t *s, uint32_t event);
  /* Copies a binding into (output = 0) or out of the arena at `offset`. */
  drk_status_t (*copy)(drk_rt_session_t *s, uint64_t offset, const drk_rt_binding_t *b, int output);
  drk_status_t (*launch)(drk_rt_session_t *s, uint32_t k);
  drk_status_t (*begin_capture)(drk_rt_session_t *s);
  /* Ends the capture into graph s->graph; with `instantiate`, makes it runnable (else only
   * ends it). */
  drk_status_t (*end_capture)(drk_rt_session_t *s, int instantiate);
  drk_status_t (*replay)(drk_rt_session_t *s); /* graph s->graph */
  drk_status_t (*sync)(drk_rt_session_t *s, int run); /* run = 0: after session creation */
  drk_status_t (*elapsed)(drk_rt_session_t *s, float *out_ms, uint32_t from, uint32_t to);
  drk_status_t (*zero)(drk_rt_session_t *s, uint64_t offset, uint64_t size); /* arena bytes to 0 */
} drk_rt_session_ops_t;

struct drk_rt_session {
  const drk_rt_session_ops_t *ops;
  void *rt; /* the driver's runtime */
  drk_allocator_t alloc;
  const drk_modfile_t *mf;
  uint32_t n_slots;
  uint32_t *slots;       /* distinct code slots used by kernels, in order of first use */
  uint32_t *kernel_slot; /* per kernel: its index in slots */
  void ***kparams;       /* per kernel: kernelParams, pointers into pstore */
  void **kparam_ptrs;    /* backing for kparams */
  uint8_t *pstore;       /* parameter values at drk_rt_param_layout's offsets; 128-byte aligned */
  size_t pstore_size, n_param_ptrs;
  uint64_t arena;        /* device address of the arena */
  int can_capture;       /* set by the driver: capture the launch sequence at creation */
  int has_graph;         /* a captured graph replays the kernels (one per bucket) */
  uint32_t graph;        /* the graph end_capture fills and replay runs: the bucket's */
  /* modules with buckets (mf->n_buckets; a static module counts as one bucket) */
  uint32_t n_in, n_out;  /* the graph's inputs and outputs (per bucket) */
  uint32_t n_user_in;    /* the inputs the caller binds: the rest are length inputs */
  int64_t lengths[DRK_MODFILE_MAX_DYN_DIMS]; /* the last run's actual sizes, copied to the length inputs */
  uint32_t bucket;       /* the last run's */
  int64_t *out_dims;     /* n_out * DRK_MODFILE_MAX_RANK: the last run's output shapes */
  drk_rt_binding_t *inputs, *outputs;
  float *kernel_ms;
  float last_ms;
  int profiling, profiled;
};

/* The kernel-parameter store of module mf, computed once for every driver: 8 bytes per
 * pointer or scalar, 128 per TMA descriptor (CUtensorMap) at a 128-byte aligned offset.
 * Writes each parameter's offset to out_offsets (kernel by kernel, parameters in order;
 * as many entries as the module has parameters; NULL: not written) and returns the store's
 * size, alignment padding included. */
size_t drk_rt_param_layout(const drk_modfile_t *mf, size_t *out_offsets);

/* Allocates a session of ops->size bytes for driver runtime rt, builds the host tables,
 * calls ops->init, captures the launch sequence when s->can_capture, and waits for the
 * uploads. On failure destroys it and returns the status with "session on <device>". */
drk_status_t drk_rt_session_create(const drk_rt_session_ops_t *ops, void *rt, const drk_allocator_t *a, const drk_modfile_t *mf,
                                   const char *device, void **out_session);
/* Writes buffer parameters (arena + offset, 64-bit) and scalars into the store; TMA
 * descriptors are the driver's. */
void drk_rt_session_fill_params(drk_rt_session_t *s);

/* Entry points for the driver tables (runtime/src/driver.h). */
void drk_rt_session_destroy(void *s);
void drk_rt_session_bind(void *s, size_t index, void *ptr, size_t size, drk_memory_kind_t kind, int output);
drk_status_t drk_rt_session_run(void *s);
drk_status_t drk_rt_session_run_shapes(void *s, const int64_t *const *input_dims);
void drk_rt_session_output_shape(const void *s, size_t index, int64_t *out_dims, uint32_t *out_rank);
size_t drk_rt_session_last_bucket(const void *s);
void drk_rt_session_set_profiling(void *s, int enabled);
const float *drk_rt_session_kernel_ms(const void *s);
float drk_rt_session_last_run_ms(const void *s);

#endif
