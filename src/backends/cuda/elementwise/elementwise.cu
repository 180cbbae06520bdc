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

// Prefill-sized forms: 8 values per thread in 16-byte loads and stores (the scalar kernels above
// move 2 bytes per access and reached 0.06-0.18 of the bandwidth at 8192 x 2048); the same
// arithmetic per element, so the same bits. n8 = n / 8 vectors; the scalar kernels take the tail.
__global__ void swiglu_vec_kernel(const uint4* __restrict__ g, const uint4* __restrict__ u, uint4* __restrict__ act,
                                  int64_t n8) {
  pdl_grid_start();  // see launch.cuh
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n8; i += int64_t(gridDim.x) * blockDim.x) {
    float gf[8], uf[8], a[8];
    unpack8(g[i], gf);
    unpack8(u[i], uf);
#pragma unroll
    for (int k = 0; k < 8; ++k) a[k] = silu_bf16(gf[k]) * uf[k];
    act[i] = pack8(a);
  }
}

__global__ void residual_vec_kernel(uint4* __restrict__ h, const uint4* __restrict__ y, int64_t n8) {
  pdl_grid_start();  // see launch.cuh
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n8; i += int64_t(gridDim.x) * blockDim.x) {
    float hf[8], yf[8];
    unpack8(h[i], hf);
    unpack8(y[i], yf);
#pragma unroll
    for (int k = 0; k < 8; ++k) hf[k] += yf[k];
    h[i] = pack8(hf);
  }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

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
  if (n >= 8 && aligned16(g) && aligned16(u) && aligned16(act)) {
    const int64_t n8 = n / 8;
    launch_pdl(swiglu_vec_kernel, dim3(blocks_for(n8)), dim3(kThreads), 0, stream, reinterpret_cast<const uint4*>(g),
               reinterpret_cast<const uint4*>(u), reinterpret_cast<uint4*>(act), n8);
    STRIKER_CUDA_CHECK_LAUNCH("swiglu_act");
    if (n8 * 8 == n) return;
    g += n8 * 8, u += n8 * 8, act += n8 * 8, n -= n8 * 8;
  }
  launch_pdl(swiglu_kernel, dim3(blocks_for(n)), dim3(kThreads), 0, stream, reinterpret_cast<const bf16_t*>(g),
                                                        reinterpret_cast<const bf16_t*>(u),
                                                        reinterpret_cast<bf16_t*>(act), n);
  STRIKER_CUDA_CHECK_LAUNCH("swiglu_act");
}

void residual_add(bf16* h, const bf16* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  if (n >= 8 && aligned16(h) && aligned16(y)) {
    const int64_t n8 = n / 8;
    launch_pdl(residual_vec_kernel, dim3(blocks_for(n8)), dim3(kThreads), 0, stream, reinterpret_cast<uint4*>(h),
               reinterpret_cast<const uint4*>(y), n8);
    STRIKER_CUDA_CHECK_LAUNCH("residual_add");
    if (n8 * 8 == n) return;
    h += n8 * 8, y += n8 * 8, n -= n8 * 8;
  }
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
