/* The slice of the CUDA driver API that libdrkrt uses, declared here so the runtime builds
 * without the CUDA toolkit. Values and layouts mirror cuda.h (CUDA 12/13);
 * tests/runtime/test_cuda_abi.c checks them against cuda.h where the toolkit is installed.
 * Every function is reached through a pointer filled from dlopen("libcuda.so.1"). */
#ifndef DRK_CUDA_API_H
#define DRK_CUDA_API_H

#include <stddef.h>
#include <stdint.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphExec_st *CUgraphExec;

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
  CUstream stream;
  drk_cu_launch_attribute_t *attrs;
  unsigned num_attrs;
} drk_cu_launch_config_t;

typedef struct drk_cu_tensor_map {
  _Alignas(64) uint64_t opaque[16];
} drk_cu_tensor_map_t;

/* X(name in this table, exported symbol, return/argument list). Required entries. */
#define DRK_CUDA_FUNCS(X)                                                                      \
  X(Init, "cuInit", (unsigned flags))                                                          \
  X(DriverGetVersion, "cuDriverGetVersion", (int *v))                                          \
  X(GetErrorName, "cuGetErrorName", (CUresult e, const char **s))                              \
  X(GetErrorString, "cuGetErrorString", (CUresult e, const char **s))                          \
  X(DeviceGetCount, "cuDeviceGetCount", (int *n))                                              \
  X(DeviceGet, "cuDeviceGet", (CUdevice * d, int ordinal))                                     \
  X(DeviceGetName, "cuDeviceGetName", (char *name, int len, CUdevice d))                       \
  X(DeviceGetAttribute, "cuDeviceGetAttribute", (int *v, int attr, CUdevice d))                \
  X(DeviceTotalMem, "cuDeviceTotalMem_v2", (size_t * bytes, CUdevice d))                       \
  X(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", (CUcontext * c, CUdevice d))           \
  X(DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", (CUdevice d))                     \
  X(CtxSetCurrent, "cuCtxSetCurrent", (CUcontext c))                                           \
  X(StreamCreate, "cuStreamCreate", (CUstream * s, unsigned flags))                            \
  X(StreamDestroy, "cuStreamDestroy_v2", (CUstream s))                                         \
  X(StreamSynchronize, "cuStreamSynchronize", (CUstream s))                                    \
  X(MemAlloc, "cuMemAlloc_v2", (CUdeviceptr * p, size_t bytes))                                \
  X(MemFree, "cuMemFree_v2", (CUdeviceptr p))                                                  \
  X(MemsetD8Async, "cuMemsetD8Async", (CUdeviceptr p, unsigned char v, size_t n, CUstream s))  \
  X(MemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", (CUdeviceptr d, const void *h, size_t n, CUstream s)) \
  X(MemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2", (void *h, CUdeviceptr d, size_t n, CUstream s))   \
  X(MemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2", (CUdeviceptr d, CUdeviceptr s_, size_t n, CUstream s)) \
  X(ModuleLoadDataEx, "cuModuleLoadDataEx", (CUmodule * m, const void *img, unsigned n, int *opts, void **vals)) \
  X(ModuleUnload, "cuModuleUnload", (CUmodule m))                                              \
  X(ModuleGetFunction, "cuModuleGetFunction", (CUfunction * f, CUmodule m, const char *name))  \
  X(FuncSetAttribute, "cuFuncSetAttribute", (CUfunction f, int attr, int v))                   \
  X(LaunchKernel, "cuLaunchKernel", (CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned smem, CUstream s, void **params, void **extra)) \
  X(StreamBeginCapture, "cuStreamBeginCapture_v2", (CUstream s, int mode))                     \
  X(StreamEndCapture, "cuStreamEndCapture", (CUstream s, CUgraph * g))                         \
  X(GraphInstantiate, "cuGraphInstantiateWithFlags", (CUgraphExec * e, CUgraph g, unsigned long long flags)) \
  X(GraphLaunch, "cuGraphLaunch", (CUgraphExec e, CUstream s))                                 \
  X(GraphExecDestroy, "cuGraphExecDestroy", (CUgraphExec e))                                   \
  X(GraphDestroy, "cuGraphDestroy", (CUgraph g))                                               \
  X(EventCreate, "cuEventCreate", (CUevent * e, unsigned flags))                               \
  X(EventDestroy, "cuEventDestroy_v2", (CUevent e))                                            \
  X(EventRecord, "cuEventRecord", (CUevent e, CUstream s))                                     \
  X(EventElapsedTime, "cuEventElapsedTime", (float *ms, CUevent a, CUevent b))

/* Optional entries (newer drivers); NULL when missing, checked where used. */
#define DRK_CUDA_OPTIONAL_FUNCS(X)                                                             \
  X(LaunchKernelEx, "cuLaunchKernelEx", (const drk_cu_launch_config_t *cfg, CUfunction f, void **params, void **extra)) \
  X(TensorMapEncodeTiled, "cuTensorMapEncodeTiled", (drk_cu_tensor_map_t * map, int dtype, unsigned rank, void *addr, const uint64_t *dims, const uint64_t *strides, const unsigned *box, const unsigned *elem_strides, int interleave, int swizzle, int l2, int oob))

typedef struct drk_cuda_api {
#define DRK_CUDA_FIELD(name, sym, args) CUresult (*name) args;
  DRK_CUDA_FUNCS(DRK_CUDA_FIELD)
  DRK_CUDA_OPTIONAL_FUNCS(DRK_CUDA_FIELD)
#undef DRK_CUDA_FIELD
} drk_cuda_api_t;

#endif
