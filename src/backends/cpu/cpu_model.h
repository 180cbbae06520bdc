// The loaded weights as the CPU backend reads them: big matrices stay in place (mmap'd),
// small vectors (norms, sinks, routing bias) are converted to fp32 once. Construction
// validates every tensor the forward pass touches, so forward() never meets a bad weight.
#pragma once
#include <vector>

#include "model/weights.h"

namespace striker::cpu {

struct CpuLayer {
  const LayerWeights* w = nullptr;
  std::vector<float> input_norm, post_attn_norm;  // [H]
  std::vector<float> q_norm, k_norm;              // [d]; empty when use_qk_norm is false
  std::vector<float> sinks;                       // [n_heads]; -inf when attention_sinks is false
  std::vector<float> router_bias;                 // [E] (MoE layers)
};

struct CpuModel {
  explicit CpuModel(const LoadedModel& model);

  const FlintConfig& config;
  const FlintWeights& weights;
  std::vector<CpuLayer> layers;
  std::vector<float> final_norm;
};

}  // namespace striker::cpu
