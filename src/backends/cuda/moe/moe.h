// Routed experts for small batches (decode): only the K selected experts of each token are read.
// Expert weights are stacked per layer: gate/up [E, I, H], down [E, H, I] (bf16, row-major).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "backends/cuda/elementwise/rmsnorm.h"
#include "core/bf16.h"

namespace striker::cuda {

// act[t*K+k] = bf16(bf16(g·sigmoid(g))·u) of expert topk_ids[t*K+k] on token t.  act [T*K, I].
// The shared expert's front half rides in the same launch: shared_act [T, shared_inter] from
// shared_gate/shared_up [shared_inter, H]; pass shared_act = nullptr when there is none.
void moe_gate_up(const bf16* x, int T, int hidden, const bf16* w_gate, const bf16* w_up, int inter,
                 const int32_t* topk_ids, int K, bf16* act, const bf16* shared_gate, const bf16* shared_up,
                 int shared_inter, bf16* shared_act, cudaStream_t stream);

// y = bf16( bf16(Σ_k w_k·bf16(act_k·Wd_e)) + bf16(shared_act·Wd_shared) );  h = bf16(h + y).
// shared_act [T, shared_inter] and w_down_shared [H, shared_inter] may be null (no shared expert).
// K <= 8. With y_scratch ([T·(K+1), H] bf16) and T >= 2, two launches: each slot's down rows
// into y_scratch, then the combine (moe_combine_sorted in slot order) — the same bits.
// With next_norm, also next_norm->out = rmsnorm(h) of the new h (the next layer's input norm): in
// the combine's pass on the two-launch path, by the rmsnorm kernel after the one-launch path.
void moe_down_combine(const bf16* act, int T, int K, const bf16* w_down, int inter, int hidden,
                      const int32_t* topk_ids, const float* topk_w, const bf16* shared_act,
                      const bf16* w_down_shared, int shared_inter, bf16* h, cudaStream_t stream,
                      bf16* y_scratch = nullptr, const RowNorm* next_norm = nullptr);

// Prefill path, after the routed experts ran as grouped GEMMs over rows sorted by expert:
// h[t] = bf16(h[t] + bf16(bf16(Σ_k w[t,k]·y_sorted[inv[t·K+k]]) + y_shared[t])), where y_sorted
// [T·K, H] holds bf16 expert outputs and inv maps slot t·K+k to its sorted row (null: row t·K+k). y_shared may be null;
// H a multiple of 8 (16-byte vectors; checked). With next_norm, also next_norm->out = rmsnorm(h) of
// the new h in the same pass (one CTA per row; the rmsnorm kernel's bits): the next layer's input
// norm at prefill sizes.
void moe_combine_sorted(const bf16* y_sorted, const int32_t* inv, const float* topk_w, const bf16* y_shared, int T,
                        int K, int hidden, bf16* h, cudaStream_t stream, const RowNorm* next_norm = nullptr);

// CPU reference of the whole routed + shared block given the routing (ids/weights) and the
// shared expert's weights; updates h like the device path.
struct MoeRefWeights {
  const std::vector<bf16>* gate;  // [E, I, H]
  const std::vector<bf16>* up;
  const std::vector<bf16>* down;  // [E, H, I]
  const std::vector<bf16>* shared_gate;  // [Is, H] or null
  const std::vector<bf16>* shared_up;
  const std::vector<bf16>* shared_down;  // [H, Is]
};
void moe_ref(const std::vector<bf16>& x, int T, int hidden, int inter, int shared_inter, const MoeRefWeights& w,
             const std::vector<int32_t>& topk_ids, const std::vector<float>& topk_w, int K, std::vector<bf16>& h);

}  // namespace striker::cuda
