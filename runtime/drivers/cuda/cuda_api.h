/* The slice of the CUDA driver API that libdrkrt uses, declared here so the runtime builds
 * without the CUDA toolkit. Values and layouts mirror cuda.h (CUDA 12/13);
 * tests/runtime/test_cuda_abi.c checks them against cuda.h where the toolkit is installed.
 * Every function is reached through a pointer filled from dlopen("libcuda.so.1"). */
#ifndef DRK_CUDA_API_H
#define DRK_CUDA_API_H

#include <stddef.h>
#include <stdint.h>

typedef int drk_cu_result_t;
typedef int drk_cu_device_t;
typedef unsigned long long drk_cu_deviceptr_t;
typedef struct drk_cu_ctx *drk_cu_context_t;
typedef struct drk_cu_mod *drk_cu_module_t;
typedef struct drk_cu_func *drk_cu_function_t;
typedef struct drk_cu_stream *drk_cu_stream_t;
typedef struct drk_cu_event *drk_cu_event_t;
typedef struct drk_cu_graph *drk_cu_graph_t;
typedef struct drk_cu_graphExec *drk_cu_graph_exec_t;

enum {
  DRK_CUDA_SUCCESS = 0,
  DRK_CUDA_ERROR_OUT_OF_MEMORY = 2,
  DRK_CUDA_ERROR_NO_DEVICE = 100,
  DRK_CUDA_ERROR_INVALID_DEVICE = 101,
  DRK_CUDA_ERROR_NO_BINARY_FOR_GPU = 209,
  DRK_CUDA_ERROR_INVALID_PTX = 218,
  DRK_CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222,
};
enum {
  DRK_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
  DRK_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
  DRK_CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
  DRK_CU_JIT_INFO_LOG_BUFFER = 3,
  DRK_CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4,
  DRK_CU_JIT_ERROR_LOG_BUFFER = 5,
  DRK_CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6,
  DRK_CU_STREAM_NON_BLOCKING = 1,
  DRK_CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1,
  DRK_CU_EVENT_DEFAULT = 0,
  DRK_CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4,
};

typedef struct drk_cu_launch_attribute {
  int id;
  char pad[8 - sizeof(int)];
  union {
    char pad[64];
    struct { unsigned x, y, z; } cluster_dim;
  } value;
} drk_cu_launch_attribute_t;

typedef struct drk_cu_launch_config {
  unsigned grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_mem_bytes;
  drk_cu_stream_t stream;
  drk_cu_launch_attribute_t *attrs;
  unsigned num_attrs;
} drk_cu_launch_config_t;

typedef struct drk_cu_tensor_map {
  _Alignas(128) uint64_t opaque[16];
} drk_cu_tensor_map_t;

/* X(name in this table, exported symbol, return/argument list). Required entries. */
#define DRK_CUDA_FUNCS(X)                                                                      \
  X(Init, "cuInit", (unsigned flags))                                                          \
  X(DriverGetVersion, "cuDriverGetVersion", (int *v))                                          \
  X(GetErrorName, "cuGetErrorName", (drk_cu_result_t e, const char **s))                              \
  X(GetErrorString, "cuGetErrorString", (drk_cu_result_t e, const char **s))                          \
  X(DeviceGetCount, "cuDeviceGetCount", (int *n))                                              \
  X(DeviceGet, "cuDeviceGet", (drk_cu_device_t * d, int ordinal))                                     \
  X(DeviceGetName, "cuDeviceGetName", (char *name, int len, drk_cu_device_t d))                       \
  X(DeviceGetAttribute, "cuDeviceGetAttribute", (int *v, int attr, drk_cu_device_t d))                \
  X(DeviceTotalMem, "cuDeviceTotalMem_v2", (size_t * bytes, drk_cu_device_t d))                       \
  X(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", (drk_cu_context_t * c, drk_cu_device_t d))           \
  X(DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", (drk_cu_device_t d))                     \
  X(CtxSetCurrent, "cuCtxSetCurrent", (drk_cu_context_t c))                                           \
  X(StreamCreate, "cuStreamCreate", (drk_cu_stream_t * s, unsigned flags))                            \
  X(StreamDestroy, "cuStreamDestroy_v2", (drk_cu_stream_t s))                                         \
  X(StreamSynchronize, "cuStreamSynchronize", (drk_cu_stream_t s))                                    \
  X(MemAlloc, "cuMemAlloc_v2", (drk_cu_deviceptr_t * p, size_t bytes))                                \
  X(MemFree, "cuMemFree_v2", (drk_cu_deviceptr_t p))                                                  \
  X(MemsetD8Async, "cuMemsetD8Async", (drk_cu_deviceptr_t p, unsigned char v, size_t n, drk_cu_stream_t s))  \
  X(MemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", (drk_cu_deviceptr_t d, const void *h, size_t n, drk_cu_stream_t s)) \
  X(MemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2", (void *h, drk_cu_deviceptr_t d, size_t n, drk_cu_stream_t s))   \
  X(MemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2", (drk_cu_deviceptr_t d, drk_cu_deviceptr_t s_, size_t n, drk_cu_stream_t s)) \
  X(ModuleLoadDataEx, "cuModuleLoadDataEx", (drk_cu_module_t * m, const void *img, unsigned n, int *opts, void **vals)) \
  X(ModuleUnload, "cuModuleUnload", (drk_cu_module_t m))                                              \
  X(ModuleGetFunction, "cuModuleGetFunction", (drk_cu_function_t * f, drk_cu_module_t m, const char *name))  \
  X(FuncSetAttribute, "cuFuncSetAttribute", (drk_cu_function_t f, int attr, int v))                   \
  X(LaunchKernel, "cuLaunchKernel", (drk_cu_function_t f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned smem, drk_cu_stream_t s, void **params, void **extra)) \
  X(StreamBeginCapture, "cuStreamBeginCapture_v2", (drk_cu_stream_t s, int mode))                     \
  X(StreamEndCapture, "cuStreamEndCapture", (drk_cu_stream_t s, drk_cu_graph_t * g))                         \
  X(GraphInstantiate, "cuGraphInstantiateWithFlags", (drk_cu_graph_exec_t * e, drk_cu_graph_t g, unsigned long long flags)) \
  X(GraphLaunch, "cuGraphLaunch", (drk_cu_graph_exec_t e, drk_cu_stream_t s))                                 \
  X(GraphExecDestroy, "cuGraphExecDestroy", (drk_cu_graph_exec_t e))                                   \
  X(GraphDestroy, "cuGraphDestroy", (drk_cu_graph_t g))                                               \
  X(EventCreate, "cuEventCreate", (drk_cu_event_t * e, unsigned flags))                               \
  X(EventDestroy, "cuEventDestroy_v2", (drk_cu_event_t e))                                            \
  X(EventRecord, "cuEventRecord", (drk_cu_event_t e, drk_cu_stream_t s))                                     \
  X(EventElapsedTime, "cuEventElapsedTime", (float *ms, drk_cu_event_t a, drk_cu_event_t b))

/* Optional entries (newer drivers); NULL when missing, checked where used. */
#define DRK_CUDA_OPTIONAL_FUNCS(X)                                                             \
  X(LaunchKernelEx, "cuLaunchKernelEx", (const drk_cu_launch_config_t *cfg, drk_cu_function_t f, void **params, void **extra)) \
  X(FuncGetParamInfo, "cuFuncGetParamInfo", (drk_cu_function_t f, size_t index, size_t *offset, size_t *size)) \
  X(FuncGetParamCount, "cuFuncGetParamCount", (drk_cu_function_t f, size_t *count)) \
  X(TensorMapEncodeTiled, "cuTensorMapEncodeTiled", (drk_cu_tensor_map_t * map, int dtype, unsigned rank, void *addr, const uint64_t *dims, const uint64_t *strides, const unsigned *box, const unsigned *elem_strides, int interleave, int swizzle, int l2, int oob))

typedef struct drk_cuda_api {
#define DRK_CUDA_FIELD(name, sym, args) drk_cu_result_t (*name) args;
  DRK_CUDA_FUNCS(DRK_CUDA_FIELD)
  DRK_CUDA_OPTIONAL_FUNCS(DRK_CUDA_FIELD)
#undef DRK_CUDA_FIELD
} drk_cuda_api_t;

#endif
