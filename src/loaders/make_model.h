// Writes a complete random-weight BF16 Flint checkpoint in the HF layout of FLINT.md §2
// (config.json, generation_config.json, tokenizer files, sharded safetensors + index).
// CONTRACT header.
#pragma once
#include <cstdint>
#include <filesystem>

namespace striker {

struct MakeModelOptions {
  std::filesystem::path config;        // config.json to use
  std::filesystem::path tokenizer_dir; // tokenizer.json, tokenizer_config.json, generation_config.json
  std::filesystem::path out_dir;
  uint64_t seed = 0;
  int64_t max_shard_bytes = 64ll << 20;
};

void make_random_checkpoint(const MakeModelOptions& options);

}  // namespace striker
