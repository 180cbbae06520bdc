// Error checking for CUDA runtime / cuBLASLt calls: every failure becomes a striker::Error
// naming the call site, so a bad launch is never silently ignored.
#pragma once
#include <cuda_runtime_api.h>

#include <string>

#include "core/error.h"

namespace striker::cuda {

[[noreturn]] inline void throw_cuda_error(cudaError_t err, const char* what, const char* file, int line) {
  throw Error(std::string("CUDA error in ") + what + " (" + file + ":" + std::to_string(line) +
              "): " + cudaGetErrorString(err));
}

}  // namespace striker::cuda

#define STRIKER_CUDA_CHECK(call)                                                     \
  do {                                                                               \
    cudaError_t _err = (call);                                                       \
    if (_err != cudaSuccess) ::striker::cuda::throw_cuda_error(_err, #call, __FILE__, __LINE__); \
  } while (0)

// After a kernel launch: catches bad launch configurations immediately (asynchronous
// faults surface at the next synchronising call, which is checked too).
#define STRIKER_CUDA_CHECK_LAUNCH(name)                                              \
  do {                                                                               \
    cudaError_t _err = cudaGetLastError();                                           \
    if (_err != cudaSuccess) ::striker::cuda::throw_cuda_error(_err, name, __FILE__, __LINE__); \
  } while (0)
