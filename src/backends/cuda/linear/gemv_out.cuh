// How a decode GEMV (BF16 gemv.cu, NVFP4 nvfp4_gemv.cu) writes one output value y, already rounded
// to bf16 precision: stored as bf16, added to the residual stream h (h = bf16(h + y), FLINT.md §4),
// or stored as fp32 logits.
#pragma once
#include <cstdint>

#include "backends/cuda/common/device_math.cuh"

namespace striker::cuda {

enum class GemvOut { Store, Residual, Logits };

template <GemvOut M>
__device__ __forceinline__ void store_gemv_out(void* out, int64_t idx, float y) {
  if constexpr (M == GemvOut::Store) {
    static_cast<bf16_t*>(out)[idx] = __float2bfloat16_rn(y);
  } else if constexpr (M == GemvOut::Residual) {
    bf16_t* h = static_cast<bf16_t*>(out);
    h[idx] = __float2bfloat16_rn(__bfloat162float(h[idx]) + y);
  } else {
    static_cast<float*>(out)[idx] = y;
  }
}

// The one-token GEMVs (gemv_kernel, nvfp4_gemv_kernel) load h at a storing lane's own output right
// after griddepcontrol.wait (residual_h) and add it at the end (store_gemv_out_h): its L2 round trip
// overlaps the dot product instead of following it. The same bits as store_gemv_out<Residual>.
// Measured with the MoE down kernels' tail loads moved the same way (H200, seventeenth session,
// docs/performance.md): −0.02 ms per step, BF16 and NVFP4, 8K and 100K.
template <GemvOut M>
__device__ __forceinline__ float residual_h(const void* out, int64_t idx) {
  if constexpr (M == GemvOut::Residual) return __bfloat162float(static_cast<const bf16_t*>(out)[idx]);
  else return 0.f;
}
// Residual: h at the lane's own outputs (lane (r·NT + t) % 32 of a row group's part 0 stores element
// (t0 + t, o0 + r)), requested right after the wait (residual_h).
template <GemvOut M, int R, int NT>
__device__ __forceinline__ void preload_residual_h(const void* out, int out_dim, int o0, int t0, int nt, int lane,
                                                   int part, float (&hv)[R][NT]) {
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int t = 0; t < NT; ++t)
      if (M == GemvOut::Residual && part == 0 && lane == (r * NT + t) % 32 && t < nt && o0 + r < out_dim)
        hv[r][t] = residual_h<M>(out, int64_t(t0 + t) * out_dim + o0 + r);
}

template <GemvOut M>
__device__ __forceinline__ void store_gemv_out_h(void* out, int64_t idx, float y, float hv) {
  if constexpr (M == GemvOut::Residual) static_cast<bf16_t*>(out)[idx] = __float2bfloat16_rn(hv + y);
  else store_gemv_out<M>(out, idx, y);
}

}  // namespace striker::cuda
