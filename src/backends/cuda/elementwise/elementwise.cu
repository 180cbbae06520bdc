#include "backends/cuda/elementwise/elementwise.h"

#include <algorithm>

#include "backends/cuda/common/cuda_check.h"
#include "backends/cuda/common/launch.cuh"
#include "backends/cuda/common/device_math.cuh"
#include "backends/cuda/common/warp_dot.cuh"

namespace striker::cuda {
namespace {

constexpr int kThreads = 256;

unsigned blocks_for(int64_t n) { return unsigned(std::min<int64_t>((n + kThreads - 1) / kThreads, 65535 * 4)); }

__global__ void swiglu_kernel(const bf16_t* __restrict__ g, const bf16_t* __restrict__ u, bf16_t* __restrict__ act,
                              int64_t n) {
  pdl_grid_start();  // see launch.cuh
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    act[i] = __float2bfloat16_rn(silu_bf16(__bfloat162float(g[i])) * __bfloat162float(u[i]));
}

__global__ void residual_kernel(bf16_t* __restrict__ h, const bf16_t* __restrict__ y, int64_t n) {
  pdl_grid_start();  // see launch.cuh
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    h[i] = __float2bfloat16_rn(__bfloat162float(h[i]) + __bfloat162float(y[i]));
}

__global__ void to_f32_kernel(const bf16_t* __restrict__ in, float* __restrict__ out, int64_t n) {
  pdl_grid_start();  // see launch.cuh
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = __bfloat162float(in[i]);
}

// splitmix64 of (seed, index) -> uniform in [-1, 1); scaled by sqrt(3)·std for that std.
__device__ __forceinline__ float hash_uniform(uint64_t seed, uint64_t i) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * (i + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return float(z >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

template <typename T>
__global__ void fill_kernel(T* __restrict__ out, int64_t n, uint64_t seed, float mean, float scale) {
  pdl_grid_start();  // see launch.cuh
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float v = mean + scale * hash_uniform(seed, uint64_t(i));
    if constexpr (sizeof(T) == 2) out[i] = __float2bfloat16_rn(v);
    else out[i] = v;
  }
}

}  // namespace

void swiglu_act(const bf16* g, const bf16* u, bf16* act, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  launch_pdl(swiglu_kernel, dim3(blocks_for(n)), dim3(kThreads), 0, stream, reinterpret_cast<const bf16_t*>(g),
                                                        reinterpret_cast<const bf16_t*>(u),
                                                        reinterpret_cast<bf16_t*>(act), n);
  STRIKER_CUDA_CHECK_LAUNCH("swiglu_act");
}

void residual_add(bf16* h, const bf16* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  launch_pdl(residual_kernel, dim3(blocks_for(n)), dim3(kThreads), 0, stream, reinterpret_cast<bf16_t*>(h),
                                                          reinterpret_cast<const bf16_t*>(y), n);
  STRIKER_CUDA_CHECK_LAUNCH("residual_add");
}

void bf16_to_f32(const bf16* in, float* out, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  launch_pdl(to_f32_kernel, dim3(blocks_for(n)), dim3(kThreads), 0, stream, reinterpret_cast<const bf16_t*>(in), out, n);
  STRIKER_CUDA_CHECK_LAUNCH("bf16_to_f32");
}

void fill_random_bf16(bf16* out, int64_t n, uint64_t seed, float mean, float std, cudaStream_t stream) {
  if (n <= 0) return;
  launch_pdl(fill_kernel<bf16_t>, dim3(blocks_for(n)), dim3(kThreads), 0, stream, reinterpret_cast<bf16_t*>(out), n, seed, mean,
                                                              std * 1.7320508f);
  STRIKER_CUDA_CHECK_LAUNCH("fill_random_bf16");
}

void fill_random_f32(float* out, int64_t n, uint64_t seed, float mean, float std, cudaStream_t stream) {
  if (n <= 0) return;
  launch_pdl(fill_kernel<float>, dim3(blocks_for(n)), dim3(kThreads), 0, stream, out, n, seed, mean, std * 1.7320508f);
  STRIKER_CUDA_CHECK_LAUNCH("fill_random_f32");
}

}  // namespace striker::cuda
