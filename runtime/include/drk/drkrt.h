/* libdrkrt: loads a drkc module (.drkm) and runs it on a GPU.
 *
 * Ownership, once for the whole API: every drk_*_create/load has a drk_*_destroy, and the
 * caller owns what it creates; drk_*_get/info results are borrowed from the object they
 * came from and live until it is destroyed. Output parameters (out_*) are written only on
 * success.
 *
 * Errors: every function that can fail returns drk_status_t. NULL means success; otherwise
 * the caller owns a status (code + message, e.g. "session: loading image 0: cuModuleLoadData:
 * CUDA_ERROR_NO_BINARY_FOR_GPU (no kernel image is available for execution on the device);
 * hint: module has cubins for sm_90a, device is sm_87") and releases it with
 * drk_status_destroy(). Messages gain context as they propagate outward.
 *
 * Memory: every object takes a drk_allocator_t (NULL selects the default, malloc/free). All
 * host memory the runtime uses comes from it; nothing is allocated during drk_session_run.
 *
 * GPU drivers are reached only through dlopen: "libcuda.so.1" (NVIDIA) and, when that
 * reports no device, "libamdhip64.so" (AMD; then .so.6, .so.5). The library links and runs
 * on machines without a GPU, and there drk_runtime_create (the one gate to every device
 * operation) returns DRK_STATUS_NO_DRIVER naming both libraries and their dlerror() texts.
 *
 * Threading: objects are not internally locked; use one runtime per thread or serialize. */
#ifndef DRK_DRKRT_H
#define DRK_DRKRT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- status ---- */
typedef enum drk_status_code {
  DRK_STATUS_OK = 0,
  DRK_STATUS_INVALID_ARGUMENT, /* API misuse: NULL handle, index out of range, size mismatch */
  DRK_STATUS_IO,               /* a file could not be read */
  DRK_STATUS_BAD_MODULE,       /* truncated, corrupted or inconsistent module file */
  DRK_STATUS_VERSION_MISMATCH, /* module written for another module format version */
  DRK_STATUS_NO_DRIVER,        /* libcuda.so.1 (and libamdhip64.so) missing or unusable */
  DRK_STATUS_NO_DEVICE,        /* no GPU, or device index out of range */
  DRK_STATUS_NO_IMAGE,         /* module has no code for this device's architecture */
  DRK_STATUS_OUT_OF_MEMORY,    /* host allocator or device memory exhausted */
  DRK_STATUS_DRIVER,           /* any other driver error (message has the CUresult/hipError_t name) */
} drk_status_code_t;

typedef struct drk_status *drk_status_t; /* NULL = OK */

drk_status_code_t drk_status_code(drk_status_t st);   /* DRK_STATUS_OK for NULL */
const char *drk_status_message(drk_status_t st);     /* borrowed; "" for NULL */
const char *drk_status_code_name(drk_status_code_t c); /* "DRK_STATUS_NO_DRIVER" */
void drk_status_destroy(drk_status_t st);             /* NULL is a no-op */

/* ---- allocator ---- */
/* alloc returns size bytes aligned to align (a power of two <= 4096) or NULL; free gets the
 * same size back. */
typedef struct drk_allocator {
  void *(*alloc)(void *user, size_t size, size_t align);
  void (*free)(void *user, void *ptr, size_t size);
  void *user;
} drk_allocator_t;

/* A status of the caller's making (code must not be DRK_STATUS_OK), for code that wraps this
 * API, e.g. the headers drkc writes with host objects (-c). The message is copied; NULL
 * alloc: malloc. When even that fails the result is a static out-of-memory status. */
drk_status_t drk_status_create(const drk_allocator_t *alloc, drk_status_code_t code, const char *message);

/* ---- modules (host side; no driver needed) ---- */
typedef struct drk_module drk_module_t;

/* Reads and validates a module file (magic, format version, section table, checksums). */
drk_status_t drk_module_load_file(const drk_allocator_t *alloc, const char *path,
                                  drk_module_t **out_module);
/* Same from memory. The bytes are borrowed: they must stay valid and unchanged until
 * drk_module_destroy (weights and images are not copied). */
drk_status_t drk_module_load_memory(const drk_allocator_t *alloc, const void *data,
                                    size_t size, drk_module_t **out_module);
void drk_module_destroy(drk_module_t *m);

/* Weights in a side file (drkc --weights=external): its base name as drkc wrote it (the file
 * lay next to the module or object), or NULL when the weights are in the module. Such a module
 * needs its weights before drk_session_create (which otherwise fails, naming the file). */
const char *drk_module_weights_file(const drk_module_t *m);
/* Gives the module its weights: the side file's bytes, whose size and SHA-256 must be those the
 * module records (DRK_STATUS_BAD_MODULE otherwise). Borrowed: valid and unchanged until
 * drk_module_destroy. */
drk_status_t drk_module_set_weights(drk_module_t *m, const void *data, size_t size);
/* Reads the side file at path (NULL: drk_module_weights_file's name, relative to the current
 * directory) into memory from the module's allocator, freed with the module, and checks it as
 * drk_module_set_weights does. */
drk_status_t drk_module_load_weights(drk_module_t *m, const char *path);

/* Data types are ONNX TensorProto.DataType codes (1 float, 10 float16, 16 bfloat16, ...). */
#define DRK_TENSOR_MAX_RANK 8
typedef struct drk_tensor_info {
  const char *name;  /* borrowed from the module */
  int32_t dtype;     /* ONNX TensorProto.DataType */
  uint32_t rank;
  int64_t dims[DRK_TENSOR_MAX_RANK];
  uint64_t size_bytes;
} drk_tensor_info_t;

size_t drk_module_num_inputs(const drk_module_t *m);
size_t drk_module_num_outputs(const drk_module_t *m);
size_t drk_module_num_kernels(const drk_module_t *m);
/* The targets of the module's (main) plan, as drkc wrote them: "sm_90a,compute_90a". */
const char *drk_module_targets(const drk_module_t *m);
drk_status_t drk_module_input_info(const drk_module_t *m, size_t index, drk_tensor_info_t *out_info);
drk_status_t drk_module_output_info(const drk_module_t *m, size_t index, drk_tensor_info_t *out_info);
const char *drk_module_kernel_name(const drk_module_t *m, size_t index); /* NULL if out of range */
/* One-line provenance, e.g. "drkc 0.1.0; targets sm_90a,sm_87; model sha256:ab12..." */
const char *drk_module_provenance(const drk_module_t *m);

/* ---- runtime: driver, device, context, stream ---- */
typedef struct drk_runtime drk_runtime_t;

typedef struct drk_runtime_options {
  const drk_allocator_t *allocator; /* NULL: default */
  int device;                       /* device ordinal (among the chosen driver's devices) */
  const char *driver_library;       /* CUDA's; NULL: $DRK_CUDA_DRIVER if set, else "libcuda.so.1" */
} drk_runtime_options_t;

/* Loads a driver, initializes it, opens the device (CUDA: retains its primary context;
 * HIP: makes it current), creates a stream. The driver: CUDA when libcuda loads and reports
 * a device, else HIP (libamdhip64: $DRK_HIP_DRIVER if set, else the first of
 * "libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5" that loads). When neither gives
 * a device, the status names both attempts; its code is DRK_STATUS_NO_DRIVER when neither
 * library loads, DRK_STATUS_NO_DEVICE when one loads but has no (such) device. */
drk_status_t drk_runtime_create(const drk_runtime_options_t *opts, drk_runtime_t **out_rt);

/* Which GPU driver a runtime uses. */
typedef enum drk_driver_kind {
  DRK_DRIVER_AUTO = 0, /* as drk_runtime_create chooses */
  DRK_DRIVER_CUDA = 1,
  DRK_DRIVER_HIP = 2,
} drk_driver_kind_t;

/* drk_runtime_create with the driver chosen by the caller. hip_library names the HIP
 * runtime library (NULL: as above); CUDA's comes from opts->driver_library. */
drk_status_t drk_runtime_create_driver(const drk_runtime_options_t *opts, drk_driver_kind_t driver,
                                       const char *hip_library, drk_runtime_t **out_rt);
void drk_runtime_destroy(drk_runtime_t *rt);
/* E.g. "NVIDIA H200 (sm_90, 139.8 GiB, driver 13.0)",
 * "AMD Instinct MI300X (gfx942:sramecc+:xnack-, 192.0 GiB, HIP 6.2)"; borrowed. */
const char *drk_runtime_device_name(const drk_runtime_t *rt);
/* Device architecture as major*10+minor (90 for H100/H200, 87 for Orin); 0 on AMD GPUs. */
unsigned drk_runtime_device_sm(const drk_runtime_t *rt);
/* Architecture name: "sm_90", or an AMD target ID such as "gfx942:sramecc+:xnack-"
 * (hipDeviceProp_t.gcnArchName); borrowed, "" for NULL. */
const char *drk_runtime_device_arch(const drk_runtime_t *rt);
/* The driver in use: "CUDA" or "HIP"; "" for NULL. */
const char *drk_runtime_driver_name(const drk_runtime_t *rt);

/* ---- sessions: a module made ready to run on one runtime's device ---- */
typedef struct drk_session drk_session_t;

/* Picks an image per code slot for the device (CUDA: cubin for its sm; else the newest PTX
 * not newer than the device, JIT-compiled. HIP: a code object, bare or in an offload
 * bundle, whose target ID fits the device's gcnArchName. Else DRK_STATUS_NO_IMAGE naming the
 * archs present and the device's), loads it, resolves kernels, allocates the one arena the
 * module plans, uploads the weights, encodes TMA descriptors (CUDA only: a module with TMA
 * parameters or cluster launches fails on HIP), and captures the launch sequence as a
 * CUDA/HIP graph (HIP: where the runtime has stream capture). The module must outlive the
 * session, the runtime too. Each session has its own stream: sessions run from different
 * threads at once; one session serves one thread at a time (a bind or run while another
 * thread is inside one returns DRK_STATUS_INVALID_ARGUMENT). */
drk_status_t drk_session_create(drk_runtime_t *rt, const drk_module_t *m, drk_session_t **out_session);
void drk_session_destroy(drk_session_t *s);
/* The plan a session runs: a module made by drkc --target=sm_90 holds two, the sm_90a one and a
 * fallback of portable kernels (an sm_90 cubin and compute_90 PTX) that drk_session_create
 * takes where the device has no code in the first (a later GPU JIT-compiles the PTX;
 * DRK_VARIANT=fallback takes it on any device, DRK_VARIANT=main never). Both plans have the
 * module's inputs and outputs; their kernels differ: these give the session's own (its
 * targets, e.g. "sm_90a,compute_90a", and the kernels drk_session_kernel_times times). */
const char *drk_session_targets(const drk_session_t *s);
size_t drk_session_num_kernels(const drk_session_t *s);
const char *drk_session_kernel_name(const drk_session_t *s, size_t index);

typedef enum drk_memory_kind {
  DRK_MEMORY_HOST = 0,   /* ordinary host pointer (pinned is faster, not required) */
  DRK_MEMORY_DEVICE = 1, /* CUdeviceptr cast to void * (HIP: a hipMalloc pointer), on the runtime's device */
} drk_memory_kind_t;

/* Binds a caller buffer to graph input/output `index`. size must equal the tensor's
 * size_bytes (a module with buckets: at most that; drk_session_run_shapes checks it against
 * the actual shape). Bound memory is borrowed until rebound or the session is destroyed. Inputs
 * are copied into the arena before the graph runs, outputs out of it afterwards.
 * ptr NULL with size 0 unbinds: runs then leave that tensor in the arena (an input keeps
 * its last contents, an output is not copied out). */
drk_status_t drk_session_bind_input(drk_session_t *s, size_t index, void *ptr, size_t size,
                                    drk_memory_kind_t kind);
drk_status_t drk_session_bind_output(drk_session_t *s, size_t index, void *ptr, size_t size,
                                     drk_memory_kind_t kind);

/* Copies inputs in, replays the captured graph, copies outputs out, and waits for the
 * stream (the caller asked for results). Unbound inputs keep their previous arena contents.
 * With profiling on, kernels are launched one by one between events instead (slower, gives
 * per-kernel times). */
drk_status_t drk_session_run(drk_session_t *s);

/* Per-kernel timing for later runs (0 = off, the default). */
drk_status_t drk_session_set_profiling(drk_session_t *s, int enabled);
/* Milliseconds each kernel took in the last profiled run; n must be drk_session_num_kernels
 * (drk_module_num_kernels unless the session runs the module's fallback plan). */
drk_status_t drk_session_kernel_times(const drk_session_t *s, float *out_ms, size_t n);
/* Milliseconds the last run took on the GPU (copies + kernels), from events. */
drk_status_t drk_session_last_run_ms(const drk_session_t *s, float *out_ms);

/* ---- modules with shape buckets (drkc --dynamic; docs/dynamic-shapes.md) ----
 * Such a module holds one plan per bucket of sizes of its dynamic dims. Its inputs and outputs
 * are the graph's (drk_module_num_inputs), described at the largest bucket (input_info: the
 * biggest shape a run may give). A run gives the actual shapes: the smallest bucket holding
 * them runs, on the inputs zero-padded up to it, and the outputs are sliced back; bound buffers
 * hold the actual shapes' bytes. Static modules have 0 dynamic dims and 1 bucket. */
size_t drk_module_num_dynamic_dims(const drk_module_t *m);
/* Name and range of dynamic dim i (NULL if out of range); out_lo/out_hi may be NULL. */
const char *drk_module_dynamic_dim(const drk_module_t *m, size_t i, int64_t *out_lo, int64_t *out_hi);
size_t drk_module_num_buckets(const drk_module_t *m);
/* Which dynamic dim axis `axis` of input (output = 0) or output (1) `index` is, or -1. */
int drk_module_dynamic_axis(const drk_module_t *m, int output, size_t index, uint32_t axis);
/* The sizes of bucket b's dynamic dims (num_dynamic_dims entries) and its kernel range. */
drk_status_t drk_module_bucket_info(const drk_module_t *m, size_t b, int64_t *out_sizes, size_t *out_first_kernel,
                                    size_t *out_n_kernels);

/* drk_session_run at the actual shapes: input_dims[i] holds input i's dims (its rank as the
 * module says). Each dynamic dim must be in its range (DRK_STATUS_INVALID_ARGUMENT naming the
 * dim, its size and the range otherwise), every other dim as the module has it, and every
 * bound buffer exactly the actual shape's bytes. On a static module the dims must be the
 * module's. Replays the bucket's own CUDA graph. */
drk_status_t drk_session_run_shapes(drk_session_t *s, const int64_t *const *input_dims);
/* After a run: output i's actual dims (out_dims: DRK_TENSOR_MAX_RANK entries) and rank, and
 * the bucket that ran (0 on a static module). */
drk_status_t drk_session_output_shape(const drk_session_t *s, size_t index, int64_t *out_dims, uint32_t *out_rank);
size_t drk_session_last_bucket(const drk_session_t *s);

#ifdef __cplusplus
}
#endif
#endif
