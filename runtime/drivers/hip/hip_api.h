/* The slice of the HIP runtime API that libdrkrt uses, declared here so the runtime builds
 * without ROCm. Values mirror hip_runtime_api.h (HIP 5.x and 6.x agree on everything here);
 * tests/runtime/test_hip_abi.c checks them against the real header where it is installed
 * (it defines DRK_HIP_ABI_CHECK and includes that header first, so that the handle types
 * below become the real ones and a signature that drifted fails to compile). Every function
 * is reached through a pointer filled from dlopen("libamdhip64.so").
 *
 * hipDeviceProp_t changed layout in HIP 6 (hipGetDeviceProperties became a macro for
 * hipGetDevicePropertiesR0600); the runtime only reads gcnArchName, so it calls whichever
 * entry the library has into a buffer larger than either layout and reads the name at that
 * layout's offset (the offsets below; the R0000 one is checked against HIP 5's header, the
 * R0600 one against HIP 6's when that is what is installed). */
#ifndef DRK_HIP_API_H
#define DRK_HIP_API_H

#include <stddef.h>
#include <stdint.h>

#ifdef DRK_HIP_ABI_CHECK
typedef hipError_t drk_hip_error_t;
typedef hipDevice_t drk_hip_device_t;
typedef hipDeviceptr_t drk_hip_deviceptr_t;
typedef hipModule_t drk_hip_module_t;
typedef hipFunction_t drk_hip_function_t;
typedef hipStream_t drk_hip_stream_t;
typedef hipEvent_t drk_hip_event_t;
typedef hipGraph_t drk_hip_graph_t;
typedef hipGraphExec_t drk_hip_graph_exec_t;
typedef hipStreamCaptureMode drk_hip_capture_mode_t;
#else
typedef int drk_hip_error_t; /* hipError_t: an enum of int size */
typedef int drk_hip_device_t;
typedef void *drk_hip_deviceptr_t;
typedef struct drk_hip_mod *drk_hip_module_t;
typedef struct drk_hip_func *drk_hip_function_t;
typedef struct drk_hip_stream *drk_hip_stream_t;
typedef struct drk_hip_event *drk_hip_event_t;
typedef struct drk_hip_graph *drk_hip_graph_t;
typedef struct drk_hip_graph_exec *drk_hip_graph_exec_t;
typedef int drk_hip_capture_mode_t; /* hipStreamCaptureMode */
#endif

enum {
  DRK_HIP_SUCCESS = 0,
  DRK_HIP_ERROR_OUT_OF_MEMORY = 2,
  DRK_HIP_ERROR_NOT_INITIALIZED = 3,
  DRK_HIP_ERROR_INSUFFICIENT_DRIVER = 35,
  DRK_HIP_ERROR_NO_DEVICE = 100,
  DRK_HIP_ERROR_INVALID_DEVICE = 101, /* what hipInit returns on a machine without a GPU */
  DRK_HIP_ERROR_INVALID_IMAGE = 200,
  DRK_HIP_ERROR_NO_BINARY_FOR_GPU = 209,
  DRK_HIP_ERROR_NOT_FOUND = 500,
  DRK_HIP_ERROR_NOT_SUPPORTED = 801,
};
enum {
  DRK_HIP_STREAM_NON_BLOCKING = 1,
  DRK_HIP_EVENT_DEFAULT = 0,
  DRK_HIP_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1,
};

/* Where gcnArchName (char[256]) lies in each hipDeviceProp_t layout, and a buffer size
 * above both layouts' sizes (1472 and 792 bytes). */
#define DRK_HIP_PROP_R0000_ARCH_OFFSET 396
#define DRK_HIP_PROP_R0600_ARCH_OFFSET 1160
#define DRK_HIP_PROP_ARCH_SIZE 256
#define DRK_HIP_PROP_BUFFER_SIZE 4096

/* X(return type, name in this table, exported symbol, argument list). Required entries. */
#define DRK_HIP_FUNCS(X)                                                                                   \
  X(drk_hip_error_t, Init, hipInit, (unsigned int flags))                                                  \
  X(drk_hip_error_t, RuntimeGetVersion, hipRuntimeGetVersion, (int *v))                                    \
  X(const char *, GetErrorName, hipGetErrorName, (drk_hip_error_t e))                                      \
  X(const char *, GetErrorString, hipGetErrorString, (drk_hip_error_t e))                                  \
  X(drk_hip_error_t, GetDeviceCount, hipGetDeviceCount, (int *n))                                          \
  X(drk_hip_error_t, SetDevice, hipSetDevice, (int ordinal))                                               \
  X(drk_hip_error_t, DeviceGet, hipDeviceGet, (drk_hip_device_t * d, int ordinal))                         \
  X(drk_hip_error_t, DeviceGetName, hipDeviceGetName, (char *name, int len, drk_hip_device_t d))           \
  X(drk_hip_error_t, DeviceTotalMem, hipDeviceTotalMem, (size_t * bytes, drk_hip_device_t d))              \
  X(drk_hip_error_t, StreamCreateWithFlags, hipStreamCreateWithFlags, (drk_hip_stream_t * s, unsigned int flags)) \
  X(drk_hip_error_t, StreamDestroy, hipStreamDestroy, (drk_hip_stream_t s))                                \
  X(drk_hip_error_t, StreamSynchronize, hipStreamSynchronize, (drk_hip_stream_t s))                        \
  X(drk_hip_error_t, Malloc, hipMalloc, (void **p, size_t bytes))                                          \
  X(drk_hip_error_t, Free, hipFree, (void *p))                                                             \
  X(drk_hip_error_t, MemsetD8Async, hipMemsetD8Async, (drk_hip_deviceptr_t p, unsigned char v, size_t n, drk_hip_stream_t s)) \
  X(drk_hip_error_t, MemcpyHtoDAsync, hipMemcpyHtoDAsync, (drk_hip_deviceptr_t d, void *h, size_t n, drk_hip_stream_t s)) \
  X(drk_hip_error_t, MemcpyDtoHAsync, hipMemcpyDtoHAsync, (void *h, drk_hip_deviceptr_t d, size_t n, drk_hip_stream_t s)) \
  X(drk_hip_error_t, MemcpyDtoDAsync, hipMemcpyDtoDAsync, (drk_hip_deviceptr_t d, drk_hip_deviceptr_t s_, size_t n, drk_hip_stream_t s)) \
  X(drk_hip_error_t, ModuleLoadData, hipModuleLoadData, (drk_hip_module_t * m, const void *image))         \
  X(drk_hip_error_t, ModuleUnload, hipModuleUnload, (drk_hip_module_t m))                                  \
  X(drk_hip_error_t, ModuleGetFunction, hipModuleGetFunction, (drk_hip_function_t * f, drk_hip_module_t m, const char *name)) \
  X(drk_hip_error_t, ModuleLaunchKernel, hipModuleLaunchKernel, (drk_hip_function_t f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, unsigned int by, unsigned int bz, unsigned int smem, drk_hip_stream_t s, void **params, void **extra)) \
  X(drk_hip_error_t, EventCreateWithFlags, hipEventCreateWithFlags, (drk_hip_event_t * e, unsigned flags))  \
  X(drk_hip_error_t, EventDestroy, hipEventDestroy, (drk_hip_event_t e))                                   \
  X(drk_hip_error_t, EventRecord, hipEventRecord, (drk_hip_event_t e, drk_hip_stream_t s))                 \
  X(drk_hip_error_t, EventElapsedTime, hipEventElapsedTime, (float *ms, drk_hip_event_t a, drk_hip_event_t b))

/* Stream capture (HIP 4.3+ for capture, 4.5+ for InstantiateWithFlags); NULL when missing:
 * a session then launches its kernels one by one on every run. */
#define DRK_HIP_GRAPH_FUNCS(X)                                                                              \
  X(drk_hip_error_t, StreamBeginCapture, hipStreamBeginCapture, (drk_hip_stream_t s, drk_hip_capture_mode_t mode)) \
  X(drk_hip_error_t, StreamEndCapture, hipStreamEndCapture, (drk_hip_stream_t s, drk_hip_graph_t * g))      \
  X(drk_hip_error_t, GraphInstantiateWithFlags, hipGraphInstantiateWithFlags, (drk_hip_graph_exec_t * e, drk_hip_graph_t g, unsigned long long flags)) \
  X(drk_hip_error_t, GraphLaunch, hipGraphLaunch, (drk_hip_graph_exec_t e, drk_hip_stream_t s))             \
  X(drk_hip_error_t, GraphExecDestroy, hipGraphExecDestroy, (drk_hip_graph_exec_t e))                       \
  X(drk_hip_error_t, GraphDestroy, hipGraphDestroy, (drk_hip_graph_t g))

/* Device properties, one entry per hipDeviceProp_t layout (the argument is that layout);
 * NULL when missing; at least one must be there. Tried in this order. */
#define DRK_HIP_PROPS_FUNCS(X)                                                                   \
  X(drk_hip_error_t, GetDevicePropertiesR0600, hipGetDevicePropertiesR0600, (void *prop, int ordinal)) \
  X(drk_hip_error_t, GetDevicePropertiesR0000, hipGetDevicePropertiesR0000, (void *prop, int ordinal)) \
  X(drk_hip_error_t, GetDeviceProperties, hipGetDeviceProperties, (void *prop, int ordinal))

typedef struct drk_hip_api {
#define DRK_HIP_FIELD(ret, name, sym, args) ret(*name) args;
  DRK_HIP_FUNCS(DRK_HIP_FIELD)
  DRK_HIP_GRAPH_FUNCS(DRK_HIP_FIELD)
  DRK_HIP_PROPS_FUNCS(DRK_HIP_FIELD)
#undef DRK_HIP_FIELD
} drk_hip_api_t;

#endif
