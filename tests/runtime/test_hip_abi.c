/* runtime/drivers/hip/hip_api.h mirrors part of hip_runtime_api.h so the runtime builds
 * without ROCm; this checks the mirror against the real header: enum values and the
 * hipDeviceProp_t layout at compile time, and every entry point's signature by assigning
 * the real function to a pointer of the mirror's type (the target is compiled with
 * -Werror=incompatible-pointer-types, and DRK_HIP_ABI_CHECK makes the mirror's handle types
 * the header's, so any drift in an argument or return type fails the build). The
 * pointers are compound literals inside sizeof, initialized (same rules as assignment)
 * but never evaluated: the test neither links nor loads libamdhip64. */
#define __HIP_PLATFORM_AMD__ 1
#include <hip/hip_runtime_api.h>
#include <hip/hip_version.h>
#include <stddef.h>
#include <stdio.h>

#define DRK_HIP_ABI_CHECK 1
#include "runtime/drivers/hip/hip_api.h"

#define SAME(a, b) _Static_assert((long)(a) == (long)(b), #a " != " #b)
SAME(DRK_HIP_SUCCESS, hipSuccess);
SAME(DRK_HIP_ERROR_OUT_OF_MEMORY, hipErrorOutOfMemory);
SAME(DRK_HIP_ERROR_NOT_INITIALIZED, hipErrorNotInitialized);
SAME(DRK_HIP_ERROR_INSUFFICIENT_DRIVER, hipErrorInsufficientDriver);
SAME(DRK_HIP_ERROR_NO_DEVICE, hipErrorNoDevice);
SAME(DRK_HIP_ERROR_INVALID_DEVICE, hipErrorInvalidDevice);
SAME(DRK_HIP_ERROR_INVALID_IMAGE, hipErrorInvalidImage);
SAME(DRK_HIP_ERROR_NO_BINARY_FOR_GPU, hipErrorNoBinaryForGpu);
SAME(DRK_HIP_ERROR_NOT_FOUND, hipErrorNotFound);
SAME(DRK_HIP_ERROR_NOT_SUPPORTED, hipErrorNotSupported);
SAME(DRK_HIP_STREAM_NON_BLOCKING, hipStreamNonBlocking);
SAME(DRK_HIP_EVENT_DEFAULT, hipEventDefault);
SAME(DRK_HIP_STREAM_CAPTURE_MODE_THREAD_LOCAL, hipStreamCaptureModeThreadLocal);
/* The runtime's own build uses int for hipError_t and hipStreamCaptureMode, and its own
 * opaque pointers for the handles: same sizes, same passing. */
SAME(sizeof(hipError_t), sizeof(int));
SAME(sizeof(hipStreamCaptureMode), sizeof(int));
SAME(sizeof(hipDevice_t), sizeof(int));
SAME(sizeof(hipDeviceptr_t), sizeof(void *));

/* hipDeviceProp_t: where gcnArchName is, and that the runtime's buffer holds it all. */
#if HIP_VERSION_MAJOR >= 6
SAME(offsetof(hipDeviceProp_tR0600, gcnArchName), DRK_HIP_PROP_R0600_ARCH_OFFSET);
SAME(sizeof(((hipDeviceProp_tR0600 *)0)->gcnArchName), DRK_HIP_PROP_ARCH_SIZE);
_Static_assert(sizeof(hipDeviceProp_tR0600) <= DRK_HIP_PROP_BUFFER_SIZE, "hipDeviceProp_tR0600 outgrew the buffer");
#else
SAME(offsetof(hipDeviceProp_t, gcnArchName), DRK_HIP_PROP_R0000_ARCH_OFFSET);
SAME(sizeof(((hipDeviceProp_t *)0)->gcnArchName), DRK_HIP_PROP_ARCH_SIZE);
_Static_assert(sizeof(hipDeviceProp_t) <= DRK_HIP_PROP_BUFFER_SIZE, "hipDeviceProp_t outgrew the buffer");
#endif

int main(void) {
#define ASSIGN(ret, name, sym, args) (void)sizeof((ret(*) args){sym});
  DRK_HIP_FUNCS(ASSIGN)
  DRK_HIP_GRAPH_FUNCS(ASSIGN)
#undef ASSIGN
#if HIP_VERSION_MAJOR >= 6
  (void)sizeof((hipError_t(*)(hipDeviceProp_tR0600 *, int)){hipGetDevicePropertiesR0600});
  printf("hipDeviceProp_tR0600: %zu bytes, gcnArchName at %zu\n", sizeof(hipDeviceProp_tR0600), offsetof(hipDeviceProp_tR0600, gcnArchName));
#else
  (void)sizeof((hipError_t(*)(hipDeviceProp_t *, int)){hipGetDeviceProperties});
  printf("hipDeviceProp_t: %zu bytes, gcnArchName at %zu\n", sizeof(hipDeviceProp_t), offsetof(hipDeviceProp_t, gcnArchName));
#endif
  printf("test_hip_abi: ok (hip_runtime_api.h version %d.%d.%d)\n", HIP_VERSION_MAJOR, HIP_VERSION_MINOR, HIP_VERSION_PATCH);
  return 0;
}
