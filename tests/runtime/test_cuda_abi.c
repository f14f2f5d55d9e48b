/* runtime/drivers/cuda/cuda_api.h mirrors part of cuda.h so the runtime builds without the
 * toolkit; this checks the mirror against the real header (compile-time, mostly). */
#include <cuda.h>
#include <stddef.h>
#include <stdio.h>

#include "runtime/drivers/cuda/cuda_api.h"

#define SAME(a, b) _Static_assert((int)(a) == (int)(b), #a " != " #b)
SAME(DRK_CUDA_ERROR_OUT_OF_MEMORY, CUDA_ERROR_OUT_OF_MEMORY);
SAME(DRK_CUDA_ERROR_NO_DEVICE, CUDA_ERROR_NO_DEVICE);
SAME(DRK_CUDA_ERROR_INVALID_DEVICE, CUDA_ERROR_INVALID_DEVICE);
SAME(DRK_CUDA_ERROR_NO_BINARY_FOR_GPU, CUDA_ERROR_NO_BINARY_FOR_GPU);
SAME(DRK_CUDA_ERROR_INVALID_PTX, CUDA_ERROR_INVALID_PTX);
SAME(DRK_CUDA_ERROR_UNSUPPORTED_PTX_VERSION, CUDA_ERROR_UNSUPPORTED_PTX_VERSION);
SAME(DRK_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
SAME(DRK_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
SAME(DRK_CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES);
SAME(DRK_CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER);
SAME(DRK_CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES);
SAME(DRK_CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER);
SAME(DRK_CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES);
SAME(DRK_CU_STREAM_NON_BLOCKING, CU_STREAM_NON_BLOCKING);
SAME(DRK_CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
SAME(DRK_CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION);
SAME(sizeof(drk_cu_launch_attribute_t), sizeof(CUlaunchAttribute));
SAME(offsetof(drk_cu_launch_attribute_t, value), offsetof(CUlaunchAttribute, value));
SAME(sizeof(drk_cu_launch_config_t), sizeof(CUlaunchConfig));
SAME(offsetof(drk_cu_launch_config_t, stream), offsetof(CUlaunchConfig, hStream));
SAME(offsetof(drk_cu_launch_config_t, attrs), offsetof(CUlaunchConfig, attrs));
SAME(offsetof(drk_cu_launch_config_t, num_attrs), offsetof(CUlaunchConfig, numAttrs));
SAME(sizeof(drk_cu_tensor_map_t), sizeof(CUtensorMap));
SAME(_Alignof(drk_cu_tensor_map_t), _Alignof(CUtensorMap));
SAME(sizeof(drk_cu_deviceptr_t), sizeof(CUdeviceptr));
SAME(sizeof(drk_cu_result_t), sizeof(CUresult));

int main(void) {
  printf("test_cuda_abi: ok (cuda.h version %d)\n", CUDA_VERSION);
  return 0;
}
