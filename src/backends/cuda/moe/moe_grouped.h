// Routed experts of a batch of more than a few tokens (batched decode and prefill), entirely on
// the device: no routing is read back to the host, and every launch shape depends only on the
// token count T, so a step can be captured in a CUDA graph.
//
//   1. moe_route_sort: counting sort of the T·K routing slots by expert (histogram, exclusive
//      scan, scatter; slots of one expert keep their slot order, so the result never depends on
//      timing) and a work list of row tiles (expert, first sorted row, rows <= tile_rows).
//   2. moe_grouped_gate_up: per tile, x rows gathered by token times the expert's gate and up
//      matrices on tensor cores, SwiGLU fused: act = bf16(bf16(g·sigmoid(g))·u), g, u rounded
//      to bf16 first (FLINT.md §4).
//   3. moe_grouped_down: per tile, y = bf16(mm(act, Wd)) into the expert-sorted row order.
//   4. moe_combine_sorted (moe.h) weights the K rows of each token, adds the shared expert and
//      the residual.
// Steps 2 and 3 exist for BF16 and for NVFP4 (W4A16) expert stacks: the NVFP4 kernels decode each
// weight tile (exactly) into the same bf16 shared-memory tile and apply the expert's scale2 to
// the fp32 accumulator before the bf16 rounding.
// Each expert's weights stream once per tile of up to tile_rows rows: with 16-row tiles a decode
// batch (a few rows per expert) reads each selected expert once; 64-row tiles serve prefill.
#pragma once
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "backends/cuda/nvfp4/nvfp4_linear.h"
#include "backends/cuda/nvfp4/nvfp4_moe.h"
#include "core/bf16.h"

namespace striker::cuda {

// One unit of work for the grouped kernels: `rows` consecutive expert-sorted rows starting at
// `first`, all routed to `expert`.
struct MoeTile {
  int32_t expert = 0;
  int32_t first = 0;
  int32_t rows = 0;
  int32_t unused = 0;  // pads the record to 16 bytes (one vector load)
};

constexpr int kMoeMaxExperts = 512;  // the sort keeps per-expert counters in shared memory
// A step routes fewer than 2^kMoeRankBits slots (T·K): 349,525 tokens at top-6, above Flint's
// 262,144-token context (the sort's bound; its CTAs count every slot, chunks grow past 128 CTAs).
constexpr int kMoeRankBits = 21;
inline int64_t moe_max_step_tokens(int top_k) { return ((int64_t(1) << kMoeRankBits) - 1) / top_k; }

// Row-tile height for `slots` = T·K routed rows over `experts`: 16 while an expert averages at
// most 16 rows (decode batches), else 64 (prefill: more reuse of each weight tile).
inline int moe_tile_rows_for(int64_t slots, int experts) { return slots <= int64_t(16) * experts ? 16 : 64; }

// Upper bound on the tiles of any routing: each active expert wastes less than one tile; plus the
// shared expert's tiles when its rows are sorted in (moe_route_sort's shared_rows).
inline int64_t moe_max_tiles(int64_t slots, int experts, int tile_rows, int64_t shared_rows = 0) {
  return (slots + tile_rows - 1) / tile_rows + std::min<int64_t>(experts, slots) +
         (shared_rows + tile_rows - 1) / tile_rows;
}

// Batched decode steps of up to this many tokens run the shared expert as expert E of the grouped
// mma.sync kernels (moe_route_sort's shared_rows) where it has the routed experts' format and width.
constexpr int kMoeSharedTileMaxTokens = 64;

// Device buffers of one routing (caller-owned). slot = t·K + k.
struct MoeRouting {
  int32_t* sorted_slot = nullptr;  // [T·K] slot of each expert-sorted row
  int32_t* slot_row = nullptr;     // [T·K] sorted row of each slot (moe_combine_sorted's `inv`)
  MoeTile* tiles = nullptr;        // [moe_max_tiles(T·K, experts, tile_rows)]
  int32_t* num_tiles = nullptr;    // [1] tiles written
  int experts = 0;                 // E (<= kMoeMaxExperts)
  // 16 or 64 (moe_grouped_*), 128 (moe_grouped_*_wgmma*, BF16 and NVFP4); the same for
  // the sort and the GEMMs
  int tile_rows = 16;
};

// topk_ids [T·K] in 0..E-1 (the router's output). An id outside that range (never produced by
// router_topk) is sorted after every expert and gets no tile: its output row stays unwritten.
// shared_rows = T (else 0): the shared expert joins the grouped GEMMs as expert E — sorted rows
// T·K + t are token t's (sorted_slot = t·K), after every routed row, in tiles of expert id E at the
// end of the list; the routing buffers then hold T·(K + 1) rows and moe_max_tiles(..., T) tiles, and
// the GEMMs take the shared matrices for E (their `shared` argument).
void moe_route_sort(const int32_t* topk_ids, int T, int K, const MoeRouting& routing, cudaStream_t stream,
                    int shared_rows = 0);

// A BF16 shared expert run as expert E of the grouped GEMMs (moe_route_sort's shared_rows): gate,
// up [inter, hidden], down [hidden, inter], inter the routed experts' width.
struct Bf16SharedExpert {
  const bf16* gate = nullptr;
  const bf16* up = nullptr;
  const bf16* down = nullptr;
  int inter = 0;
};

// act_sorted[r] = bf16(bf16(g·sigmoid(g))·u), g/u = bf16(mm(x[token of sorted_slot[r]], W{g,u}[e]))
// for every sorted row r of a tile of expert e. x [T, hidden]; w_gate, w_up [E, inter, hidden];
// act_sorted [T·K, inter] ([T·(K + 1), inter] with the shared expert's rows). hidden and inter
// multiples of 8. `shared`: the matrices of tiles of expert E (the routing sorted with shared_rows = T).
void moe_grouped_gate_up(const bf16* x, int T, int K, int hidden, const bf16* w_gate, const bf16* w_up, int inter,
                         const MoeRouting& routing, bf16* act_sorted, cudaStream_t stream,
                         const Bf16SharedExpert* shared = nullptr);

// y_sorted[r] = bf16(mm(act_sorted[r], Wd[e])); w_down [E, hidden, inter]; y_sorted [T·K, hidden]
// (T·(K + 1) rows with the shared expert's, which are then its output of token t at row T·K + t).
void moe_grouped_down(const bf16* act_sorted, int T, int K, int inter, const bf16* w_down, int hidden,
                      const MoeRouting& routing, bf16* y_sorted, cudaStream_t stream,
                      const Bf16SharedExpert* shared = nullptr);

// The same two steps for NVFP4 expert stacks (nvfp4_moe.h: codes [E·rows, in/2], scales
// [E·rows, in/16], scale2 [E]); g = bf16(scale2_g[e]·mm), u likewise, y = bf16(scale2_d[e]·mm)
// (FLINT.md §4). The reduction width (hidden for gate/up, inter for down) must be a multiple of 64.
// `shared` (NVFP4, shared->inter == inter): the shared expert as expert E, as for the BF16 kernels.
void moe_grouped_gate_up_nvfp4(const bf16* x, int T, int K, int hidden, const Nvfp4Stack& gate, const Nvfp4Stack& up,
                               int inter, const MoeRouting& routing, bf16* act_sorted, cudaStream_t stream,
                               const Nvfp4Shared* shared = nullptr);
void moe_grouped_down_nvfp4(const bf16* act_sorted, int T, int K, int inter, const Nvfp4Stack& down, int hidden,
                            const MoeRouting& routing, bf16* y_sorted, cudaStream_t stream,
                            const Nvfp4Shared* shared = nullptr);

// CPU references (moe_grouped_ref.cpp). The sort reference is exact: the device sort must
// produce the same permutation and the same tiles.
void moe_route_sort_ref(const std::vector<int32_t>& topk_ids, int T, int K, int experts, int tile_rows,
                        std::vector<int32_t>& sorted_slot, std::vector<int32_t>& slot_row,
                        std::vector<MoeTile>& tiles, int shared_rows = 0);
// Double accumulation, then FLINT.md §4 rounding points; rows not covered by a tile are left as they are.
void moe_grouped_gate_up_ref(const std::vector<bf16>& x, int K, int hidden, const std::vector<bf16>& w_gate,
                             const std::vector<bf16>& w_up, int inter, const std::vector<int32_t>& sorted_slot,
                             const std::vector<MoeTile>& tiles, std::vector<bf16>& act_sorted);
void moe_grouped_down_ref(const std::vector<bf16>& act_sorted, int inter, const std::vector<bf16>& w_down, int hidden,
                          const std::vector<MoeTile>& tiles, std::vector<bf16>& y_sorted);
// NVFP4 twins: the stacks are dequantised by nvfp4_dequantize_ref (the scalar codec) and the
// products scaled by the expert's scale2 in double before the FLINT.md §4 roundings.
void moe_grouped_gate_up_nvfp4_ref(const std::vector<bf16>& x, int K, int hidden, const Nvfp4HostMatrix& w_gate,
                                   const std::vector<float>& scale2_gate, const Nvfp4HostMatrix& w_up,
                                   const std::vector<float>& scale2_up, int inter,
                                   const std::vector<int32_t>& sorted_slot, const std::vector<MoeTile>& tiles,
                                   std::vector<bf16>& act_sorted);
void moe_grouped_down_nvfp4_ref(const std::vector<bf16>& act_sorted, int inter, const Nvfp4HostMatrix& w_down,
                                const std::vector<float>& scale2_down, int hidden, const std::vector<MoeTile>& tiles,
                                std::vector<bf16>& y_sorted);
// h[t] = bf16(h[t] + bf16(bf16(Σ_k w[t,k]·y_sorted[slot_row[t·K+k]]) + y_shared[t])), y_shared may be empty.
void moe_combine_sorted_ref(const std::vector<bf16>& y_sorted, const std::vector<int32_t>& slot_row,
                            const std::vector<float>& topk_w, const std::vector<bf16>& y_shared, int T, int K,
                            int hidden, std::vector<bf16>& h);

}  // namespace striker::cuda
