// The tensor-core NVFP4 MoE down kernels (nvfp4_moe_mma.cu), launched by nvfp4_moe_down_combine
// (nvfp4_moe.cu) for the shapes they fit: inter and the shared inter <= 512.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "backends/cuda/nvfp4/nvfp4_moe.h"

namespace striker::cuda {

bool nvfp4_moe_down_mma_fits(int K, int inter, int shared_inter);
void launch_nvfp4_moe_down_mma(const bf16* act, int T, int K, Nvfp4Stack down, int inter, int hidden,
                               const int32_t* topk_ids, const float* topk_w, const Nvfp4Shared* shared,
                               const bf16* shared_act, const bf16* y_shared, bf16* h, size_t smem,
                               cudaStream_t stream);

// y [T·K (+ T), hidden]: each slot's bf16(scale2·(act_s·Wd_e)), the shared expert's slots T·K + t last;
// moe_combine_sorted then forms h with the one-token kernel's bits.
void launch_nvfp4_moe_down_slots_mma(const bf16* act, int T, int K, Nvfp4Stack down, int inter, int hidden,
                                     const int32_t* topk_ids, const Nvfp4Shared* shared, const bf16* shared_act,
                                     bf16* y, cudaStream_t stream);

}  // namespace striker::cuda
