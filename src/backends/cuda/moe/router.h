// MoE router (FLINT.md §4): r = Σ_i float(x_i)·float(Wr[e,i]) in fp32, s = sigmoid(r),
// top-K of s + bias (ties: lower expert index), w_e = s_e / (Σ_S s + 1e-20) × rsf.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "core/bf16.h"

namespace striker::cuda {

struct RouterShape {
  int hidden = 0;
  int n_experts = 0;   // E, at most 1024
  int top_k = 0;       // K, at most 8
  bool norm_topk_prob = true;
  float routed_scaling_factor = 1.f;
};

// The router's input normalised by the router itself (FLINT.md §4's post-attention RMSNorm):
// router_topk's x is then h, and x_out = rmsnorm(h, gamma) is written for the expert kernels.
struct RouterInputNorm {
  const float* gamma = nullptr;  // [hidden] fp32
  float eps = 0.f;
  bf16* x_out = nullptr;         // [T, hidden], not h
};

class LtGemm;

// Size of router_topk's `counter` in unsigned ints: the decode launch's exchange words ([8][1024] of
// 64 bits: a logit and its ready flag), zero between launches.
constexpr int kRouterSyncWords = 2 * 8 * 1024;

// x [T, hidden] bf16; weight [E, hidden] as bf16 (weight_f32 == nullptr) or fp32; bias [E] fp32 or nullptr.
// logits_scratch: [T, E] fp32 device buffer. Outputs: topk_ids [T, K] int32, topk_w [T, K] fp32.
// T <= 8 (decode): logits and selection in one launch (router.cu: each CTA takes a few expert rows
// for every token, the logits meet as flagged words in `counter` — kRouterSyncWords zero-initialised
// unsigned ints, left zero — and CTA t selects token t's top K). Larger T: the logits, then a selection
// kernel (counter unused). The logits of larger steps come from a tensor-core GEMM through `lt`
// (required then) for a bf16 router — bf16 products are exact in fp32, so only the fp32 summation
// order differs from the decode forms (FLINT.md §4 fixes the products and the fp32 accumulation,
// not the order): a token's logits may differ from its decode-step logits in the last bits, and a
// near-tie in the top K may then pick the other expert. An fp32 router keeps the CUDA-core logits
// kernel (fp32 products are not exact on tensor cores), whose per-lane order is the decode forms':
// the same bits either way.
// in_norm: x is h and the router normalises it first — inside the decode launch (no launch of its
// own), with the rmsnorm kernel for larger T; the same bits either way.
void router_topk(const bf16* x, int T, const RouterShape& rs, const bf16* weight_bf16, const float* weight_f32,
                 const float* bias, float* logits_scratch, unsigned int* counter, int32_t* topk_ids, float* topk_w,
                 cudaStream_t stream, const RouterInputNorm* in_norm = nullptr, LtGemm* lt = nullptr);

// The selection alone of a step above 8 tokens (router_topk's second launch) on logits [T, E] fp32
// (a device buffer): topk_ids [T, K], topk_w [T, K]. For benchmarks and tests of the selection.
void router_select_topk(const float* logits, int T, const RouterShape& rs, const float* bias, int32_t* topk_ids,
                        float* topk_w, cudaStream_t stream);

// CPU reference; weight given as fp32 values (exact for either checkpoint dtype).
void router_topk_ref(const std::vector<bf16>& x, int T, const RouterShape& rs, const std::vector<float>& weight,
                     const std::vector<float>* bias, std::vector<int32_t>& topk_ids, std::vector<float>& topk_w);
// Its two halves: the logits [T, E] in double, and the selection given logits (the rule alone, so
// a GPU's own logits can be checked against it).
std::vector<double> router_logits_ref(const std::vector<bf16>& x, int T, int hidden, int n_experts,
                                      const std::vector<float>& weight);
void router_select_ref(const std::vector<double>& logits, int T, const RouterShape& rs, const std::vector<float>* bias,
                       std::vector<int32_t>& topk_ids, std::vector<float>& topk_w);

}  // namespace striker::cuda
