// Kernel launches with programmatic dependent launch (PDL): the next kernel of the stream (or
// captured graph) is scheduled while this one drains, and waits in griddepcontrol.wait until
// this grid has completed and flushed its writes. Every kernel of this backend starts with
// pdl_grid_start(), so launching any of them this way is safe (a wait without PDL is a no-op).
#pragma once
#include <cuda_runtime.h>

#include <utility>

#include "backends/cuda/cuda_check.h"

namespace striker::cuda {

__device__ __forceinline__ void pdl_launch_dependents() {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

// Blocks until the previous grid of the stream has completed and its writes are visible. Loads of
// data no earlier kernel writes (weights, norm gammas) may be issued before it; nothing the
// previous kernels write (activations, routing, KV cache) may be read before it.
__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }

__device__ __forceinline__ void pdl_grid_start() {
  pdl_launch_dependents();
  pdl_wait();
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
