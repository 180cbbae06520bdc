// RMSNorm of a few rows by one CTA (FLINT.md §4 rmsnorm: r = 1/sqrt(mean(x²) + eps),
// y_i = bf16(bf16(x_i·r)·w_i)): the "last block" epilogue of the kernels that write the residual
// stream h in a decode step (linear/gemv.cu, moe/moe.cu, nvfp4/*), so the next layer's input
// needs no kernel of its own. One warp per row; a row of up to 2048 values stays in registers.
#pragma once
#include "backends/cuda/common/device_math.cuh"
#include "backends/cuda/common/last_block.cuh"
#include "backends/cuda/elementwise/rmsnorm.h"

namespace striker::cuda {

// h: [T, hidden] written by other CTAs of this grid (read through L2). hidden % 8 == 0.
__device__ __forceinline__ void rmsnorm_rows_block(const bf16_t* h, const float* __restrict__ gamma,
                                                   bf16_t* __restrict__ out, int T, int hidden, float eps) {
  constexpr int kHeld = 8;  // 16-byte chunks per lane kept in registers: rows up to 2048 values
  const int warp = int(threadIdx.x >> 5), lane = int(threadIdx.x & 31), warps = int(blockDim.x >> 5);
  const int chunks = hidden / 8;
  for (int t = warp; t < T; t += warps) {
    const bf16_t* row = h + int64_t(t) * hidden;
    bf16_t* dst = out + int64_t(t) * hidden;
    uint4 held[kHeld];
    float ss = 0.f;
#pragma unroll
    for (int i = 0; i < kHeld; ++i)
      if (lane + 32 * i < chunks) held[i] = load_coherent(row + (lane + 32 * i) * 8);
    for (int c = lane; c < chunks; c += 32) {  // (chunks past kHeld·32 are loaded again below)
      const int i = (c - lane) / 32;
      float f[8];
      unpack8(i < kHeld ? held[i] : load_coherent(row + c * 8), f);
#pragma unroll
      for (int j = 0; j < 8; ++j) ss += f[j] * f[j];
    }
    ss = warp_sum(ss);
    const float r = 1.0f / sqrtf(ss / float(hidden) + eps);
    for (int c = lane; c < chunks; c += 32) {
      const int i = (c - lane) / 32;
      float f[8];
      unpack8(i < kHeld ? held[i] : load_coherent(row + c * 8), f);
      uint32_t packed[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float a = round_bf16(round_bf16(f[2 * j] * r) * gamma[c * 8 + 2 * j]);
        const float b = round_bf16(round_bf16(f[2 * j + 1] * r) * gamma[c * 8 + 2 * j + 1]);
        packed[j] = (__float_as_uint(a) >> 16) | (__float_as_uint(b) & 0xffff0000u);
      }
      *reinterpret_cast<uint4*>(dst + c * 8) = make_uint4(packed[0], packed[1], packed[2], packed[3]);
    }
  }
}

// The epilogue of NormEpilogue (rmsnorm.h): every thread of every CTA calls it after the CTA's
// residual stores; the last CTA normalises the T rows of h into ep.out.
__device__ __forceinline__ void norm_epilogue(const NormEpilogue& ep, const bf16_t* h, int T, int hidden) {
  if (ep.counter == nullptr) return;
  if (last_block_arrive(ep.counter, gridDim.x * gridDim.y * gridDim.z))
    rmsnorm_rows_block(h, ep.gamma, reinterpret_cast<bf16_t*>(ep.out), T, hidden, ep.eps);
}

}  // namespace striker::cuda
