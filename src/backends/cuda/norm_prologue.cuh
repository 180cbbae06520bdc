// The arithmetic of RMSNorm (FLINT.md §4: r = 1/sqrt(mean(x^2)+eps); y_i = bf16(bf16(x_i*r)*w_i)),
// shared by rmsnorm.cu and the kernels that compute the norm of their input themselves (the fused
// qkv GEMV, the fused router logits). One definition, so their x cannot drift from rmsnorm's by
// a single bit: the sum of squares is always the one a 256-thread block computes (thread j sums
// the elements i ≡ j mod 256 in order, warp_sum per warp, then the 8 warp partials in order),
// whatever the caller's block size.
#pragma once
#include "backends/cuda/device_math.cuh"

namespace striker::cuda {

constexpr int kRmsVirtualThreads = 256;
constexpr int kRmsVirtualWarps = kRmsVirtualThreads / 32;

// Σ value(i)² over i < hidden, reduced as described above, by a block of kBlockThreads threads
// (a multiple of 32 dividing 256): each real warp plays the virtual warps warp, warp + W, ...
// (a lane-for-lane copy of the 256-thread layout, so the butterfly and the order are the same).
// `partial` is a shared float[kRmsVirtualWarps]. Every thread of the block must call it; it
// ends with a barrier, so `partial` may be reused right after. value(i) may have side effects
// (add_rmsnorm writes the summed residual): it is called exactly once per element, by the thread
// that owns i in the 256-thread layout when kBlockThreads == 256.
template <int kBlockThreads, class Value>
__device__ __forceinline__ float rms_sum_squares(int hidden, Value value, float* partial) {
  static_assert(kBlockThreads % 32 == 0 && kRmsVirtualThreads % kBlockThreads == 0, "block must tile 256 threads");
  constexpr int kWarps = kBlockThreads / 32;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  for (int vw = warp; vw < kRmsVirtualWarps; vw += kWarps) {
    float ss = 0.f;
    for (int i = vw * 32 + lane; i < hidden; i += kRmsVirtualThreads) {
      const float v = value(i);
      ss += v * v;
    }
    ss = warp_sum(ss);
    if (lane == 0) partial[vw] = ss;
  }
  __syncthreads();
  float total = 0.f;
#pragma unroll
  for (int i = 0; i < kRmsVirtualWarps; ++i) total += partial[i];
  __syncthreads();  // every thread has read `partial`: the caller may reuse it
  return total;
}

// r = 1/sqrt(mean + eps) from the sum of squares.
__device__ __forceinline__ float rms_inverse(float total, int hidden, float eps) {
  return 1.0f / sqrtf(total / float(hidden) + eps);
}

// y_i = bf16(bf16(x_i*r) * w_i).
__device__ __forceinline__ bf16_t rms_output(float v, float r, float w) {
  return __float2bfloat16_rn(round_bf16(v * r) * w);
}

// x[t] = rmsnorm(h[t], gamma) for t < nt rows of width hidden, written to xs (row stride hidden;
// shared memory in the fused kernels) and, when x_out is not null, also to x_out (global).
// Every thread of the block must call it; xs is complete when it returns (ends with a barrier).
template <int kBlockThreads>
__device__ __forceinline__ void rms_norm_rows(const bf16_t* __restrict__ h, const float* __restrict__ gamma,
                                              float eps, int nt, int hidden, bf16_t* xs, bf16_t* x_out,
                                              float* partial) {
  for (int t = 0; t < nt; ++t) {
    const bf16_t* row = h + int64_t(t) * hidden;
    const float total = rms_sum_squares<kBlockThreads>(
        hidden, [&](int i) { return __bfloat162float(row[i]); }, partial);
    const float r = rms_inverse(total, hidden, eps);
    for (int i = threadIdx.x; i < hidden; i += kBlockThreads) {
      const bf16_t y = rms_output(__bfloat162float(row[i]), r, gamma[i]);
      xs[int64_t(t) * hidden + i] = y;
      if (x_out != nullptr) x_out[int64_t(t) * hidden + i] = y;
    }
  }
  __syncthreads();
}

}  // namespace striker::cuda
