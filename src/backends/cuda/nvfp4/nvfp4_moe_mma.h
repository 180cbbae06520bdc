// Tensor-core forms of the NVFP4 per-slot MoE kernels (nvfp4_moe_mma.cu), launched by
// nvfp4_moe_gate_up / nvfp4_moe_down_combine (nvfp4_moe.cu) for the shapes they fit.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "backends/cuda/nvfp4/nvfp4_moe.h"

namespace striker::cuda {

bool nvfp4_moe_mma_gate_up_enabled();
bool nvfp4_moe_mma_down_enabled();
bool nvfp4_gemv_mma_enabled();

bool nvfp4_moe_down_mma_fits(int K, int inter, int shared_inter);
void launch_nvfp4_moe_down_mma(const bf16* act, int T, int K, Nvfp4Stack down, int inter, int hidden,
                               const int32_t* topk_ids, const float* topk_w, const Nvfp4Shared* shared,
                               const bf16* shared_act, const bf16* y_shared, bf16* h, size_t smem,
                               cudaStream_t stream);

}  // namespace striker::cuda
