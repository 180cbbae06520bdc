#include "backends/cuda/elementwise/embedding.h"

#include <algorithm>

#include "backends/cuda/common/cuda_check.h"
#include "backends/cuda/common/launch.cuh"
#include "backends/cuda/common/device_math.cuh"

namespace striker::cuda {
namespace {

__global__ void embedding_kernel(const uint16_t* __restrict__ table, int64_t vocab, int64_t hidden,
                                 const int32_t* __restrict__ ids, uint16_t* __restrict__ out) {
  pdl_grid_start();  // see launch.cuh
  const int t = blockIdx.y;
  const int64_t id = ids[t];
  uint16_t* dst = out + int64_t(t) * hidden;
  const bool valid = id >= 0 && id < vocab;
  const uint16_t* src = table + (valid ? id : 0) * hidden;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < hidden; i += int64_t(gridDim.x) * blockDim.x)
    dst[i] = valid ? src[i] : uint16_t(0x7fc0);  // 0x7fc0: bf16 quiet NaN
}

__global__ void embedding_kernel_vec(const uint4* __restrict__ table, int64_t vocab, int64_t hidden8,
                                     const int32_t* __restrict__ ids, uint4* __restrict__ out) {
  pdl_grid_start();  // see launch.cuh
  const int t = blockIdx.y;
  const int64_t id = ids[t];
  uint4* dst = out + int64_t(t) * hidden8;
  const bool valid = id >= 0 && id < vocab;
  const uint4* src = table + (valid ? id : 0) * hidden8;
  const uint4 nan8 = make_uint4(0x7fc07fc0u, 0x7fc07fc0u, 0x7fc07fc0u, 0x7fc07fc0u);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < hidden8; i += int64_t(gridDim.x) * blockDim.x)
    dst[i] = valid ? load_cached(src + i) : nan8;
}

// One thread per taken token (a step has at most a few hundred).
__global__ void take_drawn_tokens_kernel(int32_t* __restrict__ tokens, const int32_t* __restrict__ pairs, int n,
                                         const int32_t* __restrict__ drawn) {
  pdl_grid_start();  // the draws come from the previous step's sampling kernels
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) tokens[pairs[2 * i]] = drawn[pairs[2 * i + 1]];
}

}  // namespace

void take_drawn_tokens(int32_t* tokens, const int32_t* pairs, int n, const int32_t* drawn, cudaStream_t stream) {
  if (n <= 0) return;
  const int threads = 128;
  launch_pdl(take_drawn_tokens_kernel, dim3(unsigned((n + threads - 1) / threads)), dim3(threads), 0, stream, tokens,
             pairs, n, drawn);
  STRIKER_CUDA_CHECK_LAUNCH("take_drawn_tokens");
}

void embedding_gather(const bf16* table, int64_t vocab, int64_t hidden, const int32_t* ids, int n,
                      bf16* out, cudaStream_t stream) {
  const bool aligned = hidden % 8 == 0 && reinterpret_cast<uintptr_t>(table) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(out) % 16 == 0;
  // Rows go on grid.y (at most kMaxGridYZ per launch).
  for (int first = 0; first < n; first += kMaxGridYZ) {
    const int rows = std::min(n - first, kMaxGridYZ);
    const int32_t* id = ids + first;
    if (aligned) {
      const int64_t h8 = hidden / 8;
      const int threads = 128;
      const dim3 grid(unsigned((h8 + threads - 1) / threads), unsigned(rows));
      launch_pdl(embedding_kernel_vec, grid, dim3(threads), 0, stream, reinterpret_cast<const uint4*>(table), vocab,
                 h8, id, reinterpret_cast<uint4*>(out) + int64_t(first) * h8);
    } else {
      const int threads = 256;
      const dim3 grid(unsigned((hidden + threads - 1) / threads), unsigned(rows));
      launch_pdl(embedding_kernel, grid, dim3(threads), 0, stream, reinterpret_cast<const uint16_t*>(table), vocab,
                 hidden, id, reinterpret_cast<uint16_t*>(out) + int64_t(first) * hidden);
    }
    STRIKER_CUDA_CHECK_LAUNCH("embedding_gather");
  }
}

}  // namespace striker::cuda
