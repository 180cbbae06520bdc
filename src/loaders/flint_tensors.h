// The list of tensors a Flint BF16 checkpoint holds (FLINT.md §2), derived from the config.
// The loader checks a checkpoint against it; make-model writes exactly it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "model/config.h"
#include "model/weights.h"

namespace striker {

// What a tensor does, which decides how make-model initialises it (FLINT.md §4 conformance).
enum class TensorRole : uint8_t {
  Embedding,           // embed_tokens
  InputProjection,     // q/k/v, gate/up, lm_head: read the residual stream
  ResidualProjection,  // o_proj and every down_proj: write into the residual stream
  Norm,                // input_layernorm and the final norm
  MlpNorm,             // post_attention_layernorm: its scale sets the MLP/MoE branch's strength
  QkNorm,              // q_norm, k_norm: their scale sets how sharp attention is
  Sinks,               // attention sink logits
  Router,              // mlp.gate.weight
  RouterBias,          // e_score_correction_bias
};

struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<DType> dtypes;    // accepted dtypes; the first is what make-model writes
  TensorRole role;
  WeightView* slot = nullptr;   // where the loader puts the view (when binding)
};

// Every tensor the config implies, in a stable order (embed, layers in order, norm, lm_head).
// With `bind`, its layers/experts are sized and each spec's `slot` points into it.
std::vector<TensorSpec> flint_tensor_specs(const FlintConfig& config, FlintWeights* bind = nullptr);

std::string shape_string(const std::vector<int64_t>& shape);  // "[2048, 128]"

}  // namespace striker
