// The grid of a persistent kernel: how many of its CTAs the current device holds at once.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>

#include "backends/cuda/common/cuda_check.h"

namespace striker::cuda {

// CTAs of `Kernel` (block threads, smem dynamic bytes) resident on the current device at once:
// the grid of a persistent kernel whose CTAs stride over their work. The per-SM occupancy is
// remembered per kernel, thread and shape (the same on every device of one architecture).
template <auto Kernel>
int resident_ctas(int threads, size_t smem) {
  thread_local int cached_threads = -1, cached_per_sm = 0;
  thread_local size_t cached_smem = 0;
  if (threads != cached_threads || smem != cached_smem) {
    STRIKER_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&cached_per_sm, Kernel, threads, smem));
    cached_threads = threads, cached_smem = smem;
  }
  int device = 0, sms = 0;
  STRIKER_CUDA_CHECK(cudaGetDevice(&device));
  STRIKER_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return cached_per_sm * sms > 0 ? cached_per_sm * sms : 1;
}

}  // namespace striker::cuda
