// The row loop of the NVFP4 CUDA-core decode GEMV (nvfp4_gemv_kernel in nvfp4_gemv.cu), shared with
// the QKV projection that runs the attention front in its epilogue (attention/qkv_front.cu).
#pragma once
#include <cstdint>

#include "backends/cuda/common/device_math.cuh"
#include "backends/cuda/common/launch.cuh"
#include "backends/cuda/nvfp4/nvfp4_decode.cuh"
#include "backends/cuda/nvfp4/nvfp4_linear.h"

namespace striker::cuda {

constexpr int kNvfp4GemvWarps = 8;  // warps per block

// (kNvfp4GemvWarps/S) row groups of R rows per block (rows from blockIdx.x), tokens blockIdx.y·NT..,
// each row's input split over S warps. Each warp loads its first two chunks of weights, then calls
// before_wait() (weights and step metadata only), then waits (x comes from earlier kernels).
// emit(t, o, y): y = bf16-rounded scale2(o)·sum of token t, row o, called by one lane per output.
// No early return: every thread reaches the end (the caller may follow with a barrier).
template <int R, int NT, int S, typename BeforeWait, typename Emit>
__device__ __forceinline__ void nvfp4_gemv_rows(const bf16_t* __restrict__ x, int T, int in,
                                                const uint8_t* __restrict__ codes, const uint8_t* __restrict__ scales,
                                                const RowScale2& s2, int out_dim, BeforeWait before_wait, Emit emit) {
  constexpr int kWarps = kNvfp4GemvWarps, kGroups = kWarps / S;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int group = warp / S, part = warp % S;
  const int o0 = (blockIdx.x * kGroups + group) * R;
  const int t0 = blockIdx.y * NT;
  const int nt = min(NT, T - t0);
  const uint8_t* cr[R];
  const uint8_t* sr[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int64_t row = min(o0 + r, out_dim - 1);  // clamped rows are computed, never stored
    cr[r] = codes + row * (in / 2);
    sr[r] = scales + row * (in / 16);
  }
  float acc[R][NT];
  Nvfp4Prologue<R> pr;
  if (o0 < out_dim) warp_dot_nvfp4_prologue<R>(cr, sr, in, pr, part, S);
  before_wait();
  pdl_wait();  // x and h (Residual) are written by earlier kernels
  if (o0 < out_dim) warp_dot_nvfp4_early<R, NT>(pr, cr, sr, x + int64_t(t0) * in, in, nt, in, acc, part, S);
  bool stores = o0 < out_dim;  // this warp holds finished sums to store
  if constexpr (S > 1) {
    __shared__ float red[kWarps][R * NT];
    if (lane == 0)
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int t = 0; t < NT; ++t) red[warp][r * NT + t] = o0 < out_dim ? acc[r][t] : 0.f;
    __syncthreads();
    stores = stores && part == 0;
    if (stores) {
#pragma unroll
      for (int r = 0; r < R; ++r)
#pragma unroll
        for (int t = 0; t < NT; ++t) {
          float v = 0.f;
#pragma unroll
          for (int p = 0; p < S; ++p) v += red[warp + p][r * NT + t];
          acc[r][t] = v;
        }
    }
  }
  if (stores) {
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int t = 0; t < NT; ++t)
        if (lane == (r * NT + t) % 32 && t < nt && o0 + r < out_dim)
          emit(t0 + t, o0 + r, round_bf16(acc[r][t] * s2.at(o0 + r)));  // scale2 before the rounding (FLINT.md §4)
  }
}

}  // namespace striker::cuda
