// The feed-forward half of a layer (FLINT.md §4): SwiGLU MLPs and sigmoid top-K routing.
#pragma once
#include <cstdint>
#include <vector>

#include "backends/cpu/cpu_model.h"
#include "backends/cpu/tensor.h"
#include "core/thread_pool.h"

namespace striker::cpu {

// swiglu(x): g = bf16(mm(x,Wg)); u = bf16(mm(x,Wu)); a = bf16(bf16(g·sigmoid(g))·u); bf16(mm(a,Wd)).
void swiglu(ThreadPool& pool, const Mat& x, const MlpWeights& w, Mat& out);

// One token's routing: experts in ascending index order, with their weights w_e.
struct Routing {
  std::vector<int32_t> experts;
  std::vector<float> weights;
};

// r = fp32 router logits; s = sigmoid(r); top-K of s + bias (ties: lower index);
// w_e = s_e / (Σ_S s + 1e-20) × rsf when norm_topk_prob, else s_e × rsf.
std::vector<Routing> route(ThreadPool& pool, const Mat& x, const CpuLayer& layer, const FlintConfig& config);

// y = bf16( bf16(Σ_{e∈S} w_e·swiglu_e(x)) + swiglu_shared(x) ), inner sum in fp32. Only the
// experts some token selected are computed.
void moe(ThreadPool& pool, const Mat& x, const CpuLayer& layer, const FlintConfig& config, Mat& out);

}  // namespace striker::cpu
