// Hopper (sm_90a) grouped expert GEMMs on NVFP4 stacks without a bf16 scratch: the products and
// FLINT.md §4 rounding points of moe_grouped_gate_up_wgmma / moe_grouped_down_wgmma with the
// expert's scale2, computed transposed (weight rows × tokens) so the weights are wgmma's register
// operand, decoded from NVFP4 by the consumer threads themselves (moe_grouped_wgmma_nvfp4.cu,
// layout in moe_grouped_wgmma_nvfp4_layout.h). The routing must be sorted with
// tile_rows = kMoeWgmmaTileRows, as for the BF16 kernels. The stacks are the decode kernels' own
// (nvfp4_moe.h), read in place: kdim % 64 == 0, 16-byte aligned codes, 4-byte aligned scales.
#pragma once
#include <cuda_runtime_api.h>

#include "backends/cuda/moe/moe_grouped.h"
#include "backends/cuda/nvfp4/nvfp4_moe.h"

namespace striker::cuda {

// act_sorted[r] = bf16(bf16(g·sigmoid(g))·u), g = bf16(scale2_gate[e]·mm(x[token(r)], W_gate[e])), u likewise.
void moe_grouped_gate_up_nvfp4_direct(const bf16* x, int T, int K, int hidden, const Nvfp4Stack& gate,
                                      const Nvfp4Stack& up, int inter, const MoeRouting& routing, bf16* act_sorted,
                                      cudaStream_t stream);

// y_sorted[r] = bf16(scale2_down[e]·mm(act_sorted[r], W_down[e])).
void moe_grouped_down_nvfp4_direct(const bf16* act_sorted, int T, int K, int inter, const Nvfp4Stack& down,
                                   int hidden, const MoeRouting& routing, bf16* y_sorted, cudaStream_t stream);

}  // namespace striker::cuda
