// The inner loop every GEMV-style kernel shares: one warp computes R dot products (R weight rows,
// each against its own activation row, for up to NT tokens) with 16-byte streaming loads of the
// weights. Results are lane-partial; the caller reduces them with warp_sum.
#pragma once
#include "backends/cuda/common/device_math.cuh"

namespace striker::cuda {

// w[r]: weight row r (in bf16 values, 16-byte aligned). x[r]: activations for row r, token t at
// x[r] + t*x_stride. nt <= NT tokens are live. in % 8 == 0. With split-K, `part` of `parts`
// warps share the rows: this warp takes 16-byte chunks part*32+lane, stepping 32*parts.
template <int R, int NT>
__device__ __forceinline__ void warp_dot(const bf16_t* const (&w)[R], const bf16_t* const (&x)[R], int64_t x_stride,
                                         int nt, int in, float (&acc)[R][NT], int part = 0, int parts = 1) {
  const int lane = threadIdx.x & 31;
  const int chunks = in / 8;
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int t = 0; t < NT; ++t) acc[r][t] = 0.f;
  // Single-token passes unroll deeper: more independent 16-byte loads in flight per lane.
#pragma unroll(NT == 1 ? 4 : 2)
  for (int c = part * 32 + lane; c < chunks; c += 32 * parts) {
    uint4 wq[R];
#pragma unroll
    for (int r = 0; r < R; ++r) wq[r] = load_stream(w[r] + int64_t(c) * 8);
#pragma unroll
    for (int r = 0; r < R; ++r) {
      float wf[8];
      unpack8(wq[r], wf);
#pragma unroll
      for (int t = 0; t < NT; ++t) {
        if (t < nt) {
          float xf[8];
          unpack8(load_cached(x[r] + t * x_stride + int64_t(c) * 8), xf);
#pragma unroll
          for (int i = 0; i < 8; ++i) acc[r][t] = fmaf(wf[i], xf[i], acc[r][t]);
        }
      }
    }
  }
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int t = 0; t < NT; ++t) acc[r][t] = warp_sum(acc[r][t]);
}

__device__ __forceinline__ float silu_bf16(float g) {
  // bf16(g·sigmoid(g)) of FLINT.md swiglu; expf is accurate to ~2 ulp, far below bf16 rounding.
  return round_bf16(g / (1.0f + expf(-g)));
}

}  // namespace striker::cuda
