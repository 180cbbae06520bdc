// Routed experts for small batches (decode) with NVFP4 weights: the NVFP4 twins of moe.h's
// kernels, same rounding points (FLINT.md §4), reading only the selected experts' codes.
// Stacked experts use the split layout of nvfp4_linear.h per expert: gate/up codes [E, I, H/2],
// scales [E, I, H/16]; down codes [E, H, I/2], scales [E, H, I/16]; one scale2 per expert.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "backends/cuda/elementwise/rmsnorm.h"
#include "backends/cuda/nvfp4/nvfp4_linear.h"
#include "core/bf16.h"

namespace striker::cuda {

struct Nvfp4Stack {
  Nvfp4Matrix m;                  // expert e's rows start at e·rows·in
  const float* scale2 = nullptr;  // device [E]
};

// The shared expert's part, NVFP4 too (a BF16 shared expert runs separately, see y_shared below).
struct Nvfp4Shared {
  Nvfp4Matrix gate, up, down;
  float s2_gate = 1.f, s2_up = 1.f, s2_down = 1.f;
  int inter = 0;
};

// From kNvfp4MoeSharedSkinnyMinTokens to kNvfp4MoeSharedSkinnyMaxTokens tokens the shared expert's
// gate/up and down run as skinny tiles for all T tokens, one grid row per group of 8 tokens (the dense
// decode GEMMs' warp computation and bits, nvfp4_skinny.cuh), in the first grid rows, ahead of the
// routed slots; its codes are decoded once per token group instead of once per token. Fewer tokens
// keep one shared slot per token (the one-token kernels' bits). Session 36 (H100, 1K context, device
// ms): 4 sequences 3.29 -> 3.22, 8 4.64 -> 4.44, 16 7.32 -> 6.83, 24 9.81 -> 9.14; 2 sequences lost
// (2.69 -> 2.71); shared rows after the routed slots won less (16: 7.01).
constexpr int kNvfp4MoeSharedSkinnyMinTokens = 3;
constexpr int kNvfp4MoeSharedSkinnyMaxTokens = 64;
inline bool nvfp4_moe_shared_skinny(int T) {
  return T >= kNvfp4MoeSharedSkinnyMinTokens && T <= kNvfp4MoeSharedSkinnyMaxTokens;
}
inline int nvfp4_moe_shared_groups(int T) { return (T + 7) / 8; }

// act[t*K+k] = bf16(bf16(g·sigmoid(g))·u) of expert ids[t*K+k] on token t (act [T*K, I]); with
// `shared` and shared_act non-null, also shared_act [T, shared->inter] in the same launch. With
// prefetch_down (the down stack, [E, hidden, inter]), the CTAs also request the selected experts' down
// rows into L2, each its share, for the down kernel that follows.
void nvfp4_moe_gate_up(const bf16* x, int T, int hidden, Nvfp4Stack gate, Nvfp4Stack up, int inter,
                       const int32_t* topk_ids, int K, bf16* act, const Nvfp4Shared* shared, bf16* shared_act,
                       cudaStream_t stream, const Nvfp4Matrix* prefetch_down = nullptr);

// y = bf16( bf16(Σ_k w_k·bf16(act_k·Wd_e)) + ys );  h = bf16(h + y), where ys is the shared
// expert's bf16 output: computed here from shared_act and shared->down when shared_act is
// given, or read from y_shared [T, H] (a BF16 shared expert run beforehand), or absent when both are null.
// With y_scratch ([T·(K+1), H] bf16), T >= 2 and inter, shared inter <= 512: two launches, each
// slot's down rows into y_scratch, then the combine (moe.h moe_combine_sorted in slot order) — the same bits.
// With next_norm, also next_norm->out = rmsnorm(h) (in the combine's pass on the two-launch path).
void nvfp4_moe_down_combine(const bf16* act, int T, int K, Nvfp4Stack down, int inter, int hidden,
                            const int32_t* topk_ids, const float* topk_w, const Nvfp4Shared* shared,
                            const bf16* shared_act, const bf16* y_shared, bf16* h, cudaStream_t stream,
                            bf16* y_scratch = nullptr, const RowNorm* next_norm = nullptr);

// CPU reference of the routed + shared block with float weights (already E2M1·E4M3·scale2):
// gate/up [E, I, H], down [E, H, I]; shared_* may be null.
struct MoeFloatWeights {
  const std::vector<float>* gate;
  const std::vector<float>* up;
  const std::vector<float>* down;
  const std::vector<float>* shared_gate;
  const std::vector<float>* shared_up;
  const std::vector<float>* shared_down;
};
void moe_float_ref(const std::vector<bf16>& x, int T, int hidden, int inter, int shared_inter,
                   const MoeFloatWeights& w, const std::vector<int32_t>& topk_ids, const std::vector<float>& topk_w,
                   int K, std::vector<bf16>& h);

}  // namespace striker::cuda
