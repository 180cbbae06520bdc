// Flint from an NVFP4 GGUF file (FLINT.md §3): tensors mapped by llama.cpp names, metadata
// cross-checked with config.json, NVFP4 blocks repacked losslessly into the split layout the
// kernels read (model/nvfp4.h), global scales attached per tensor / per expert.
#pragma once
#include <functional>
#include <string>

#include "model/weights.h"

namespace striker {

// `config` comes from config.json (--hf-config-path); GGUF metadata must agree with it.
LoadedModel load_gguf_model(const std::string& gguf_path, const FlintConfig& config,
                            const std::function<void(size_t, size_t)>& on_progress = {});

}  // namespace striker
