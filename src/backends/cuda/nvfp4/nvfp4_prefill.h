// NVFP4 projections of prefill chunks (more than 8 tokens): the weight is dequantised into a
// bf16 scratch buffer (exact, nvfp4_linear.h) and multiplied by cuBLASLt with alpha = scale2,
// so scale2 still multiplies the fp32 accumulator before the bf16 rounding (FLINT.md §4).
// Kept apart from the BF16 prefill path (backend/ops_linear.cpp) on purpose. Routed NVFP4 experts do
// not come here: the grouped MoE kernels decode their tiles themselves (moe_grouped.h).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "backends/cuda/backend/device_model.h"
#include "backends/cuda/linear/gemm_lt.h"
#include "backends/cuda/nvfp4/nvfp4_linear.h"

namespace striker::cuda {

// A device buffer for dequantised weights; matrices larger than it go in row chunks.
struct Nvfp4Scratch {
  bf16* data = nullptr;
  int64_t elems = 0;
};

// Scratch size the backend allocates for `model` (0 when no nvfp4_gemm weight is NVFP4): the
// largest NVFP4 matrix other than the LM head and the routed experts, at least 8M values (the
// LM head goes in chunks).
int64_t nvfp4_scratch_elems(const DeviceModel& model);

// y[t·ld_y + o] = bf16(scale2(o)·Σ_i x[t,i]·W[o,i]) for o < out_dim: rows dequantised chunk by
// chunk (chunks also end where scale2 changes), one GEMM per chunk.
void nvfp4_gemm(LtGemm& lt, const bf16* x, int T, int in, Nvfp4Matrix W, RowScale2 scale2, int out_dim, bf16* y,
                int ld_y, Nvfp4Scratch scratch, cudaStream_t stream);

}  // namespace striker::cuda
