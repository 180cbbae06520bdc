// Loading a Flint model from what the user typed: a local directory, a .gguf file, or a
// Hugging Face repo id resolved through the HF cache (FLINT.md §6, reference/formats.md §7).
// CONTRACT header.
#pragma once
#include <functional>
#include <optional>
#include <string>

#include "loaders/hub_repo.h"
#include "model/weight_bytes.h"
#include "model/weights.h"

namespace striker {

struct LoadOptions {
  std::string load_format = "auto";   // auto | safetensors | gguf | dummy
  std::string hf_config_path;         // config.json source for GGUF (dir or repo id); empty = model's
  // --quantization as vLLM users pass it: "" (whatever the checkpoint holds), "gguf",
  // "nvfp4" or "modelopt_fp4". A real checkpoint must agree with it; for dummy weights it
  // picks the format (gguf = Flint's NVFP4 GGUF).
  std::string quantization;
  uint64_t seed = 0;                  // --seed: the dummy weights
  // Called with (bytes done, bytes total) while tensors are validated/read, for a progress bar.
  std::function<void(size_t, size_t)> on_progress;
};

// Validates every expected tensor's name, dtype and shape against the config before
// returning; any problem throws striker::Error naming file, tensor and field.
// --load-format dummy: random weights in host memory (loaders/dummy_model.h), no weight file opened.
LoadedModel load_model(const std::string& model, const LoadOptions& options = {});

// The config.json that load_model would use (--hf-config-path, else beside the model), alone:
// what --load-format dummy on the GPU needs.
FlintConfig load_model_config(const std::string& model, const LoadOptions& options = {});

// --quantization: nullopt for "" (auto), else the linear-weight format it names; throws
// striker::Error naming the accepted values for anything else.
std::optional<LinearFormat> parse_quantization(const std::string& value);

// The format of --load-format dummy weights: NVFP4 when --quantization asks for it, else BF16.
LinearFormat dummy_weight_format(const LoadOptions& options);

// Which revision of a Hub repo, which cache, and which of its files a caller needs.
struct HubRequest {
  std::string revision;      // --revision / --tokenizer-revision; "" = main
  std::string download_dir;  // --download-dir: the HF cache folder to use; "" = HF_HUB_CACHE, HF_HOME/hub, ...
  hub::Need need = hub::Need::model;
};

// Resolves a model argument to a local path: an existing directory/file as is, else a Hub repo
// id "org/name" (or "org/name:file.gguf") found in the HF cache, downloaded into it first unless
// HF_HUB_OFFLINE is set (loaders/hub_download.h). Returns the snapshot folder, or the .gguf file.
std::string resolve_model_path(const std::string& model, const HubRequest& request = {});

}  // namespace striker
