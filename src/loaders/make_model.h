// Writes a complete random-weight BF16 Flint checkpoint in the HF layout of FLINT.md §2
// (config.json, generation_config.json, tokenizer files, sharded safetensors + index).
// CONTRACT header.
#pragma once
#include <cstdint>
#include <filesystem>

#include "loaders/flint_tensors.h"

namespace striker {

struct MakeModelOptions {
  std::filesystem::path config;        // config.json to use
  std::filesystem::path tokenizer_dir; // tokenizer.json, tokenizer_config.json, generation_config.json
  std::filesystem::path out_dir;
  uint64_t seed = 0;
  int64_t max_shard_bytes = 64ll << 20;
  // Multiplies q_norm's weights (mean 1): attention logits grow with it, so > 1 makes attention
  // sharp (long-context checks, where a key-indexing error must move the logits).
  float q_norm_scale = 1.0f;
};

void make_random_checkpoint(const MakeModelOptions& options);

// The random values make-model writes for elements [first, last) of `spec` (first even), in
// spec.dtypes.front(), stored at `out` (which points at element 0). Value i depends only on
// (seed, tensor name, i), so --load-format dummy on the host gets exactly make-model's weights.
void fill_random_tensor(const TensorSpec& spec, uint64_t seed, uint64_t first, uint64_t last, std::byte* out);

}  // namespace striker
