// Loading a Flint model from what the user typed: a local directory, a .gguf file, or a
// Hugging Face repo id resolved through the HF cache (FLINT.md §6, reference/formats.md §7).
// CONTRACT header.
#pragma once
#include <functional>
#include <string>

#include "model/weights.h"

namespace striker {

struct LoadOptions {
  std::string load_format = "auto";   // auto | safetensors | gguf | dummy
  std::string hf_config_path;         // config.json source for GGUF (dir or repo id); empty = model's
  // Called with (bytes done, bytes total) while tensors are validated/read, for a progress bar.
  std::function<void(size_t, size_t)> on_progress;
};

// Validates every expected tensor's name, dtype and shape against the config before
// returning; any problem throws striker::Error naming file, tensor and field.
LoadedModel load_model(const std::string& model, const LoadOptions& options = {});

// Resolves a model argument to a local path: an existing directory/file as is, else a HF repo
// id looked up in the HF cache (HF_HOME / HF_HUB_CACHE / HF_HUB_OFFLINE).
std::string resolve_model_path(const std::string& model);

}  // namespace striker
