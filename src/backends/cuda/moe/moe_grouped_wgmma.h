// Hopper (sm_90a) grouped expert GEMMs for prefill-sized steps: the same two products as
// moe_grouped_gate_up / moe_grouped_down (moe_grouped.h), same FLINT.md §4 rounding points, on
// wgmma with a TMA + cp.async producer warpgroup feeding two consumer warpgroups through an
// mbarrier ring (moe_grouped_wgmma.cu). The routing must be sorted with
// tile_rows = kMoeWgmmaTileRows (moe_route_sort).
//
// scale2_* (device [E], may be null = 1) multiplies the fp32 accumulator before the bf16 rounding.
// NVFP4 experts have their own kernels on this path (moe_grouped_wgmma_nvfp4.h).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "backends/cuda/moe/moe_grouped.h"

namespace striker::cuda {

constexpr int kMoeWgmmaTileRows = 128;

// Whether a step of `slots` = T·K routed rows over `experts` runs on this path: prefill sizes,
// where experts average more than 16 rows (moe_tile_rows_for); below, the 16-row mma.sync tiles
// of moe_grouped.h read each selected expert once per step.
inline bool moe_wgmma_for(int64_t slots, int experts) { return moe_tile_rows_for(slots, experts) != 16; }
// NVFP4 stacks take this path (moe_grouped_wgmma_nvfp4.h: the weights decoded in registers) from
// 24 rows per expert (T >= 1024 at E = 256, top-6), the fewest measured; below, the 64-row
// mma.sync NVFP4 kernels. H200, per layer (sort, both GEMMs, combine), mma.sync vs this path:
// T = 1024 658 vs 517 µs, 1536 659 vs 509, 2048 670 vs 516 (seventh session), 8192 2250 vs 1103.
inline bool moe_wgmma_nvfp4_for(int64_t slots, int experts) { return slots >= int64_t(24) * experts; }

// act_sorted[r] = bf16(bf16(g·sigmoid(g))·u), g = bf16(scale2_gate[e]·mm(x[token(r)], W_gate[e])), u likewise.
void moe_grouped_gate_up_wgmma(const bf16* x, int T, int K, int hidden, const bf16* w_gate, const bf16* w_up,
                               int inter, const float* scale2_gate, const float* scale2_up, const MoeRouting& routing,
                               bf16* act_sorted, cudaStream_t stream);

// y_sorted[r] = bf16(scale2_down[e]·mm(act_sorted[r], W_down[e])).
void moe_grouped_down_wgmma(const bf16* act_sorted, int T, int K, int inter, const bf16* w_down, int hidden,
                            const float* scale2_down, const MoeRouting& routing, bf16* y_sorted, cudaStream_t stream);

}  // namespace striker::cuda
