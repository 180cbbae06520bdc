// The MoE block of a 1-token decode step in one launch (BF16 experts; moe_decode_fused.cu):
// x = rmsnorm(h, gamma); router logits, top K (the decode router's bits: router.h); routed and
// shared gate/up + SwiGLU; down, weighted sum and the residual h = bf16(h + y) (moe.h's bits,
// FLINT.md §4). What router_topk (with its input norm), moe_gate_up and moe_down_combine do for
// T = 1 in three launches, with the same bits.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "backends/cuda/moe/router.h"
#include "core/bf16.h"

namespace striker::cuda {

// The launch's exchange words (64-bit, zero-initialised once, never reset): the CTAs' launch
// counters, the router logits and the SwiGLU outputs, each tagged with the launch's number.
constexpr int kMoeFusedSyncWords = 128 + 256 + 8 * 256 + 2 * 16 * 16 + 16;

struct MoeFusedWeights {
  const float* post_gamma = nullptr;  // [H] the post-attention RMSNorm
  float eps = 0.f;
  const bf16* router_bf16 = nullptr;  // [E, H]; or router_f32
  const float* router_f32 = nullptr;
  const float* router_bias = nullptr;  // [E] or null
  const bf16* gate = nullptr;          // [E, I, H]
  const bf16* up = nullptr;            // [E, I, H]
  const bf16* down = nullptr;          // [E, H, I]
  int inter = 0;                       // I
  const bf16* shared_gate = nullptr;   // [Is, H] or null (no shared expert)
  const bf16* shared_up = nullptr;
  const bf16* shared_down = nullptr;   // [H, Is]
  int shared_inter = 0;                // Is
};

// Whether the one-launch form takes this shape: hidden <= 2048, at most 256 experts, inter and
// shared_inter <= 512, K routed + the shared expert <= 8 slots, widths multiples of 8, and its
// 128 CTAs co-resident on the device.
bool moe_decode_fused_fits(const RouterShape& rs, int inter, int shared_inter, bool has_shared);

// h [1, H] in and out. topk_ids [K] / topk_w [K] (may be null) receive the routing.
// sync: kMoeFusedSyncWords zero-initialised 64-bit words, used by this function only.
void moe_decode_fused(bf16* h, const RouterShape& rs, const MoeFusedWeights& w, unsigned long long* sync,
                      int32_t* topk_ids, float* topk_w, cudaStream_t stream, int variant = 2);
// TEMPORARY A/B variants (issue 11): bit 0 = prefetch the routed down rows into L2 at the ids;
// bit 1 = consumers wait on per-group arrival counters (one line each) before reading the tagged
// words once, instead of every CTA spinning on every word; bit 2 = CTA 0 alone selects the top K
// and publishes K words {tag, id, weight} that the other CTAs wait on (one hop more, no redundant
// selection and no 128-CTA read of the logit words).

}  // namespace striker::cuda
