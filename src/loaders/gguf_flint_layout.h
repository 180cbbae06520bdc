// Where every Flint weight lives in a GGUF file (FLINT.md §3): the llama.cpp tensor names,
// their PyTorch-order shapes, which types each may have, and the FlintWeights slot it fills.
// Shared by the GGUF loader and `striker quantize` so both agree by construction.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "model/weights.h"

namespace striker {

enum class GgufRole {
  Embedding,  // token_embd: BF16/F16/F32
  Linear,     // may be NVFP4 or BF16/F16/F32; has an optional global scale tensor
  Vector,     // norms, sinks, router bias: F32/BF16
  Router,     // ffn_gate_inp: F32/BF16
};

struct GgufFlintTensor {
  std::string base;                 // e.g. "blk.7.ffn_down_exps"
  std::string suffix;               // ".weight" (".bias" for exp_probs_b)
  GgufRole role;
  std::vector<int64_t> shape;       // PyTorch order; stacked experts: [E, out, in]
  bool stacked_experts = false;
  // The FlintWeights slot(s): for stacked experts, slot(w, e) for each expert e.
  std::function<WeightView&(FlintWeights&, int64_t expert)> slot;
};

// Every tensor a Flint GGUF holds for `config`, in a stable order (embedding, layers, head).
std::vector<GgufFlintTensor> flint_gguf_tensors(const FlintConfig& config);

}  // namespace striker
