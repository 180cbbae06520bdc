// Kernel launches with programmatic dependent launch (PDL): the next kernel of the stream (or
// captured graph) is scheduled while this one drains, and waits in griddepcontrol.wait until
// this grid has completed and flushed its writes. Every kernel of this backend starts with
// pdl_grid_start(), so launching any of them this way is safe (a wait without PDL is a no-op).
#pragma once
#include <cuda_runtime.h>

#include <utility>

#include "backends/cuda/common/cuda_check.h"

namespace striker::cuda {

// CUDA's bound on grid.y and grid.z (grid.x goes to 2^31 - 1). A kernel that puts tokens or queries
// on y or z strides over them (or its launches are sliced), so no step length is capped by it.
constexpr int kMaxGridYZ = 65535;

__device__ __forceinline__ void pdl_launch_dependents() {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

// Blocks until the previous grid of the stream has completed and its writes are visible. Loads of
// data no earlier kernel writes (weights, norm gammas) may be issued before it; nothing the
// previous kernels write (activations, routing, KV cache) may be read before it. Mind ptxas: it may
// schedule read-only-path loads (ld.global.nc: __ldg, load_cached) above the wait in straight-line
// code — a skinny-kernel form without its loop read its activations before the wait that way (fortieth
// session, docs/performance.md); the loops and branches of the current kernels hold them below (their
// SASS: scripts/sass_prewait_loads.py). Where none would, read what earlier kernels wrote with
// load_from_l2 (device_math.cuh), which stays below.
__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }

__device__ __forceinline__ void pdl_grid_start() {
  pdl_launch_dependents();
  pdl_wait();
}

// cluster_x > 0: the grid's x dimension is split into thread-block clusters of cluster_x CTAs
// (grid.x must be a multiple of it; at most 8 portable), whose CTAs can read each other's shared
// memory (cooperative_groups::this_cluster().map_shared_rank) between cluster barriers.
template <typename... KernelArgs, typename... Args>
void launch_pdl_cluster(void (*kernel)(KernelArgs...), dim3 grid, dim3 block, size_t smem, int cluster_x,
                        cudaStream_t stream, Args&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[2];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  if (cluster_x > 0) {
    attr[1].id = cudaLaunchAttributeClusterDimension;
    attr[1].val.clusterDim.x = unsigned(cluster_x);
    attr[1].val.clusterDim.y = 1;
    attr[1].val.clusterDim.z = 1;
    cfg.numAttrs = 2;
  }
  STRIKER_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...));
}

template <typename... KernelArgs, typename... Args>
void launch_pdl(void (*kernel)(KernelArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                Args&&... args) {
  launch_pdl_cluster(kernel, grid, block, smem, 0, stream, std::forward<Args>(args)...);
}

// Lets `kernel` take up to `bytes` of dynamic shared memory (over 48 KiB needs the opt-in) and, with
// `max_carveout`, asks for the largest shared-memory carveout (several big CTAs per SM). Function
// attributes, allowed while a graph is being captured; call it once per kernel instantiation, from
// a thread-safe static at the launch site (`static const bool ready = allow_dynamic_smem(...)`), so
// uncaptured launches (bench rows, prefill steps) do not pay the driver calls each time.
template <typename... KernelArgs>
bool allow_dynamic_smem(void (*kernel)(KernelArgs...), int bytes, bool max_carveout = false) {
  STRIKER_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  if (max_carveout)
    STRIKER_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared));
  return true;
}

}  // namespace striker::cuda
