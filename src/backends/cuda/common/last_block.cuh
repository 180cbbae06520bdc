// "Last block" epilogues: work that needs the whole grid's output (the RMSNorm of the new residual
// stream, a head's q/k-norm and RoPE, a split-KV merge, the router's top-K) runs in the CTA that
// finishes last instead of in a kernel of its own (one fewer kernel boundary and tail per use;
// docs/performance.md, issue 11). Each CTA publishes its stores (fence), counts itself on a counter
// in global memory, and the CTA that brings the count to `expected` runs the epilogue. That CTA
// resets the counter to zero, so counters are zero between launches (also across graph replays).
//
// Why a counter may be reused by the next kernel: every kernel arrives only after its
// griddepcontrol.wait, i.e. after the previous grid (and so every earlier one) has completed, so
// two grids never count at the same time even when PDL starts the next one early.
#pragma once
#include <cuda_runtime.h>

#include "backends/cuda/common/device_math.cuh"
#include "backends/cuda/common/launch.cuh"

namespace striker::cuda {

// Called by every thread of every CTA, after the CTA's last global store. True in all threads of
// the CTA that arrived last; its loads of other CTAs' results must bypass L1 (load_coherent).
__device__ __forceinline__ bool last_block_arrive(unsigned int* counter, unsigned int expected) {
  __shared__ unsigned int is_last;
  pdl_wait();  // threads that exited their work early have not waited yet (a no-op for the others)
  __syncthreads();  // every thread's stores are issued
  if (threadIdx.x == 0) {
    __threadfence();  // ... and visible device-wide before this CTA counts
    const unsigned int prev = atomicAdd(counter, 1u);
    is_last = prev + 1u == expected ? 1u : 0u;
    if (is_last) *counter = 0u;  // everyone else has counted: ready for the next launch
  }
  __syncthreads();
  if (is_last) __threadfence();  // order the epilogue's loads after the count
  return is_last != 0u;
}

// A load of data another CTA of the same grid wrote: from L2 (the SM's L1 is not coherent).
__device__ __forceinline__ uint4 load_coherent(const void* p) {
  return __ldcg(reinterpret_cast<const uint4*>(p));
}

}  // namespace striker::cuda
