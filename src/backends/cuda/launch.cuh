// Kernel launches with programmatic dependent launch (PDL): the next kernel of the stream (or
// captured graph) is scheduled while this one drains, and waits in griddepcontrol.wait until
// this grid has completed and flushed its writes. Every kernel of this backend starts with
// pdl_grid_start() (or its two halves around step-invariant weight prefetches), so launching any
// of them this way is safe (a wait without PDL is a no-op).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <utility>

#include "backends/cuda/cuda_check.h"

namespace striker::cuda {

// The two halves of pdl_grid_start, for kernels that first touch data no kernel of the step
// writes (weights, scales): issue those reads between the halves, so they overlap the previous
// kernel's tail. Nothing an earlier kernel writes (activations, routing) may be read before pdl_wait.
__device__ __forceinline__ void pdl_launch_dependents() {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}
__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }

__device__ __forceinline__ void pdl_grid_start() {
  pdl_launch_dependents();
  pdl_wait();
}

// Asks L2 for the 128-byte lines of [p, p + bytes) (no registers written, nothing waits on it);
// thread `tid` of `nthreads` takes every nthreads-th line. Generic addressing: p is a device pointer.
__device__ __forceinline__ void prefetch_l2(const void* p, int64_t bytes, int tid, int nthreads) {
  if (bytes <= 0) return;
  const uint64_t a = reinterpret_cast<uint64_t>(p);
  const uint64_t first = a & ~uint64_t(127);
  const int64_t lines = int64_t((a + uint64_t(bytes) - first + 127) / 128);
  for (int64_t l = tid; l < lines; l += nthreads) asm volatile("prefetch.L2 [%0];" ::"l"(first + uint64_t(l) * 128));
}

template <typename... KernelArgs, typename... Args>
void launch_pdl(void (*kernel)(KernelArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                Args&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  STRIKER_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...));
}

}  // namespace striker::cuda
