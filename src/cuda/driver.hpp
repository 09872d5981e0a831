// The CUDA driver API, loaded with dlopen("libcuda.so.1") on first use: the binary starts on a
// machine with no driver. Each symbol is resolved once, under the versioned name cuda.h maps it
// to (cuMemAlloc -> cuMemAlloc_v2), so calls use the header's signatures.
#pragma once
#include <cuda.h>  // types and prototypes only; nothing is linked

#include <string>

namespace moetune::cuda {

// X-macro of every driver function moetune calls. Add a name here to use it through driver().
// clang-format off
#define MOETUNE_DRIVER_FUNCTIONS(X)                                                              \
  X(cuInit) X(cuDriverGetVersion) X(cuGetErrorName) X(cuGetErrorString) X(cuDeviceGetCount)      \
  X(cuDeviceGet) X(cuDeviceGetName) X(cuDeviceGetAttribute) X(cuDeviceTotalMem)                  \
  X(cuDeviceGetPCIBusId) X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease)                \
  X(cuCtxSetCurrent) X(cuCtxGetCurrent) X(cuCtxPushCurrent) X(cuCtxPopCurrent)                   \
  X(cuCtxSynchronize) X(cuCtxGetDevice) X(cuModuleLoadData) X(cuModuleUnload)                    \
  X(cuModuleGetFunction) X(cuModuleGetGlobal) X(cuFuncGetAttribute) X(cuFuncSetAttribute)      \
  X(cuLaunchKernel) X(cuLaunchKernelEx)                                                          \
  X(cuOccupancyMaxActiveBlocksPerMultiprocessor)                                                 \
  X(cuMemAlloc) X(cuMemFree) X(cuMemAllocHost) X(cuMemFreeHost) X(cuMemGetInfo)                  \
  X(cuMemcpyHtoD) X(cuMemcpyDtoH) X(cuMemcpyDtoD) X(cuMemcpyHtoDAsync) X(cuMemcpyDtoHAsync)      \
  X(cuMemcpyDtoDAsync) X(cuMemsetD8) X(cuMemsetD32) X(cuMemsetD8Async) X(cuMemsetD32Async)       \
  X(cuStreamCreate) X(cuStreamDestroy) X(cuStreamSynchronize)                                    \
  X(cuStreamBeginCapture) X(cuStreamEndCapture)                                                  \
  X(cuEventCreate) X(cuEventDestroy) X(cuEventRecord) X(cuEventSynchronize)                      \
  X(cuEventElapsedTime) X(cuGraphInstantiate) X(cuGraphLaunch) X(cuGraphExecDestroy)             \
  X(cuGraphDestroy)
// clang-format on

// The resolved function table. A member is null when this driver lacks the symbol; calling it
// through MOETUNE_CU reports "symbol not found" as a CudaError.
struct DriverApi {
#define MOETUNE_DRIVER_MEMBER(name) decltype(&::name) name = nullptr;
  MOETUNE_DRIVER_FUNCTIONS(MOETUNE_DRIVER_MEMBER)
#undef MOETUNE_DRIVER_MEMBER
};

// Loads libcuda.so.1 and calls cuInit(0) once. Throws GpuUnavailable (one line) when the
// library is missing or cuInit fails; the same answer on every later call.
const DriverApi& driver();

// True when the driver loads, cuInit succeeds and at least one device exists; else false and
// *why holds the one-line reason.
bool gpu_available(std::string* why = nullptr);
// Throws GpuUnavailable with that one line unless gpu_available().
void require_gpu();

// Throws CudaError "<call>: <CUDA_ERROR_NAME> (<description>)" unless r == CUDA_SUCCESS.
void check(CUresult r, const char* call);
// Throws CudaError when a driver symbol was not found.
void require_symbol(const void* fn, const char* call);

}  // namespace moetune::cuda

// MOETUNE_CU(cuMemAlloc, &ptr, bytes): calls the driver function and checks its result.
#define MOETUNE_CU(fn, ...)                                                               \
  do {                                                                                    \
    const auto& moetune_api_ = ::moetune::cuda::driver();                                 \
    ::moetune::cuda::require_symbol(reinterpret_cast<const void*>(moetune_api_.fn), #fn); \
    ::moetune::cuda::check(moetune_api_.fn(__VA_ARGS__), #fn);                            \
  } while (0)
