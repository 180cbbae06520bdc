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

}  // namespace striker::cuda
