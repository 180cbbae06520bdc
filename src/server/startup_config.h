// Pieces of `striker serve` startup that are worth testing on their own: memory sizes,
// generation_config.json defaults, and --default-chat-template-kwargs.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/sampling_request.h"

namespace striker::server {

// "512MiB", "2GiB", "1.5G", "1000000" (bytes) -> bytes. Throws striker::Error naming `flag`.
int64_t parse_memory_size(const std::string& text, const std::string& flag);

struct GenerationConfig {
  SamplingDefaults defaults;              // defaults.stop_token_ids = eos ids after the first
  std::vector<int32_t> eos_token_ids;     // all of them, as listed
  std::string source;  // the file read, or a description of the fallback
};

// --generation-config: "auto" reads <model_dir>/generation_config.json (absent -> FLINT.md §5
// defaults with the model's config.json eos ids), "vllm" ignores it (OpenAI defaults), any other
// value is a folder holding generation_config.json. Malformed files throw naming the field.
GenerationConfig load_generation_config(const std::string& mode, const std::filesystem::path& model_dir,
                                        const std::vector<int64_t>& config_eos_ids);
// vLLM's --override-generation-config JSON: its sampling defaults replace the loaded ones (keys
// temperature, top_p, top_k, min_p, repetition_penalty; anything else throws naming the key).
void apply_generation_config_overrides(GenerationConfig& gen, const std::string& json);

// --default-chat-template-kwargs must be a JSON object.
nlohmann::json parse_template_kwargs_flag(const std::string& text);

}  // namespace striker::server
