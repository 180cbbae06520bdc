// Routed experts of decode steps (2..8 tokens) as "skinny" tensor-core GEMMs (skinny_mma.cuh):
// after moe_route_sort with tile_rows = kMoeSkinnyTileRows (8), each tile is one expert and its
// <= 8 rows, which become the N side of mma.sync m16n8k16; the expert's weights (M side) stream
// once per tile straight into registers — no shared-memory staging, and NVFP4 codes decoded
// exactly into bf16 fragments in registers. At <= 8 tokens every selected expert has one tile
// (a token picks an expert once), so each distinct expert is read once.
// Same contracts and outputs as moe_grouped_gate_up / _down and their NVFP4 twins (moe_grouped.h);
// moe_combine_sorted finishes the layer. Requires routing.tile_rows == kMoeSkinnyTileRows.
// A shared expert in the experts' format rides in the same two launches (one more grid row, its
// tokens 0..T-1 in order, T <= 8): gate/up writes shared_act [T, shared_inter], down reads it and
// writes y_shared [T, hidden] for moe_combine_sorted. Pass null shared weights for none.
#pragma once
#include <cuda_runtime_api.h>

#include "backends/cuda/moe/moe_grouped.h"
#include "backends/cuda/nvfp4/nvfp4_moe.h"
#include "core/bf16.h"

namespace striker::cuda {

void moe_skinny_gate_up(const bf16* x, int T, int K, int hidden, const bf16* w_gate, const bf16* w_up, int inter,
                        const MoeRouting& routing, bf16* act_sorted, const bf16* shared_gate, const bf16* shared_up,
                        int shared_inter, bf16* shared_act, cudaStream_t stream);
void moe_skinny_down(const bf16* act_sorted, int T, int K, int inter, const bf16* w_down, int hidden,
                     const MoeRouting& routing, bf16* y_sorted, const bf16* shared_act, const bf16* shared_down,
                     int shared_inter, bf16* y_shared, cudaStream_t stream);
void moe_skinny_gate_up_nvfp4(const bf16* x, int T, int K, int hidden, const Nvfp4Stack& gate, const Nvfp4Stack& up,
                              int inter, const MoeRouting& routing, bf16* act_sorted, const Nvfp4Shared* shared,
                              bf16* shared_act, cudaStream_t stream);
void moe_skinny_down_nvfp4(const bf16* act_sorted, int T, int K, int inter, const Nvfp4Stack& down, int hidden,
                           const MoeRouting& routing, bf16* y_sorted, const Nvfp4Shared* shared,
                           const bf16* shared_act, bf16* y_shared, cudaStream_t stream);

}  // namespace striker::cuda
