// Routed experts for small batches (decode): only the K selected experts of each token are read.
// Expert weights are stacked per layer: gate/up [E, I, H], down [E, H, I] (bf16, row-major).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

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
// K <= 8.
void moe_down_combine(const bf16* act, int T, int K, const bf16* w_down, int inter, int hidden,
                      const int32_t* topk_ids, const float* topk_w, const bf16* shared_act,
                      const bf16* w_down_shared, int shared_inter, bf16* h, cudaStream_t stream);

// Decode (T <= kMaxClusterTokens, BF16 experts) in one launch: per (token, expert slot) a cluster of
// cluster_size CTAs (portable <= 8; up to 16) computes the slot's SwiGLU activations and its expert
// output y_slots[t, k] = bf16(act_k·Wd_e) (k < K routed, k = K the shared expert; y_slots is
// [T, K+1, hidden]), bit-identical to what moe_gate_up + moe_down_combine compute inside. The
// weighted combine and residual add (h = bf16(h + bf16(bf16(Σ_k w_k·y_k) + y_K))) are left to
// moe_combine_rmsnorm / moe_combine (rmsnorm.h). shared_gate = nullptr: no shared expert.
// prefetch_down: each CTA first asks L2 for its block of down rows (prefetch.global.L2), so DRAM
// stays busy across the gate/up -> down seam; the arithmetic is the same either way.
constexpr int kMaxClusterTokens = 8;
void moe_cluster(const bf16* x, int T, int hidden, const bf16* w_gate, const bf16* w_up, const bf16* w_down,
                 int inter, const int32_t* topk_ids, int K, const bf16* shared_gate, const bf16* shared_up,
                 const bf16* shared_down, int shared_inter, bf16* y_slots, int cluster_size, bool prefetch_down,
                 cudaStream_t stream);

// Prefill path, after the routed experts ran as grouped GEMMs over rows sorted by expert:
// h[t] = bf16(h[t] + bf16(bf16(Σ_k w[t,k]·y_sorted[inv[t·K+k]]) + y_shared[t])), where y_sorted
// [T·K, H] holds bf16 expert outputs and inv maps slot t·K+k to its sorted row. y_shared may be null.
void moe_combine_sorted(const bf16* y_sorted, const int32_t* inv, const float* topk_w, const bf16* y_shared, int T,
                        int K, int hidden, bf16* h, cudaStream_t stream);

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

// CPU reference of the deferred combine (moe_combine in rmsnorm.h), with the device's operation
// order (fmaf in k order, bf16 after the routed sum, after the shared term, after the residual add),
// so it matches bit for bit. y_slots [rows, K+1, hidden], topk_w [rows, K]; h updated in place.
void moe_combine_ref(std::vector<bf16>& h, const std::vector<bf16>& y_slots, const std::vector<float>& topk_w,
                     int rows, int K, bool has_shared, int hidden);

}  // namespace striker::cuda
