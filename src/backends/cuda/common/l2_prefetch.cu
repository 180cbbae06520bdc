#include "backends/cuda/common/cuda_check.h"
#include "backends/cuda/common/l2_prefetch.h"
#include "core/error.h"

namespace striker::cuda {

namespace {

constexpr int64_t kChunkBytes = 16 * 1024;  // bytes per prefetch instruction (spread over many SMs' TMA units)
constexpr int kThreads = 32;
constexpr int kMaxBlocks = 128;  // one warp each: fits beside whatever the step runs

__global__ void __launch_bounds__(kThreads) l2_prefetch_kernel(L2Ranges ranges) {
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int i = 0; i < ranges.n; ++i) {
    const char* base = static_cast<const char*>(ranges.r[i].ptr);
    const int64_t bytes = ranges.r[i].bytes;
    const int64_t chunks = (bytes + kChunkBytes - 1) / kChunkBytes;
    for (int64_t c = tid; c < chunks; c += stride) {
      const int64_t off = c * kChunkBytes;
      const int64_t left = bytes - off;
      const uint32_t n = uint32_t(left < kChunkBytes ? left : kChunkBytes) & ~15u;
      if (n > 0) asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(base + off), "r"(n) : "memory");
    }
  }
}

}  // namespace

void L2Ranges::add(const void* ptr, int64_t bytes) {
  if (ptr == nullptr || bytes <= 0) return;
  if (n == kL2PrefetchMaxRanges) throw Error("l2_prefetch: more than " + std::to_string(kL2PrefetchMaxRanges) + " ranges");
  r[n++] = L2Range{ptr, bytes};
}

int64_t L2Ranges::total() const {
  int64_t t = 0;
  for (int i = 0; i < n; ++i) t += r[i].bytes;
  return t;
}

void l2_prefetch(const L2Ranges& ranges, cudaStream_t stream) {
  int64_t chunks = 0;
  for (int i = 0; i < ranges.n; ++i) chunks += (ranges.r[i].bytes + kChunkBytes - 1) / kChunkBytes;
  if (chunks == 0) return;
  const int64_t blocks = std::min<int64_t>(kMaxBlocks, (chunks + kThreads - 1) / kThreads);
  l2_prefetch_kernel<<<unsigned(blocks), kThreads, 0, stream>>>(ranges);
  STRIKER_CUDA_CHECK(cudaGetLastError());
}

}  // namespace striker::cuda
