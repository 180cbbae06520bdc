// load_model: resolves the model argument, then loads a BF16 safetensors checkpoint directory
// (FLINT.md §2) into FlintWeights views over the mmapped files, after checking every tensor's
// name, dtype and shape against config.json.
#include "loaders/model_loader.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "core/error.h"
#include "loaders/dummy_model.h"
#include "loaders/flint_tensors.h"
#include "loaders/gguf_model.h"
#include "loaders/safetensors_checkpoint.h"
#include "loaders/strict_json.h"

namespace striker {

namespace fs = std::filesystem;

namespace {

bool has_gguf_extension(const std::string& path) {
  return path.size() >= 5 && path.compare(path.size() - 5, 5, ".gguf") == 0;
}

std::string dtype_list(const std::vector<DType>& ds) {
  std::string s;
  for (size_t i = 0; i < ds.size(); ++i) s += std::string(i ? " or " : "") + std::string(dtype_name(ds[i]));
  return s;
}

fs::path config_path_for(const fs::path& model_dir, const std::string& hf_config_path) {
  if (hf_config_path.empty()) return model_dir / "config.json";
  fs::path p = resolve_model_path(hf_config_path, {"", "", hub::Need::config});
  return fs::is_directory(p) ? p / "config.json" : p;
}

// The format does not promise alignment; backends read BF16/F32 through typed pointers, so a
// misaligned tensor is copied into an owned, aligned buffer instead of being viewed in place.
const std::byte* aligned_data(const CheckpointTensor& t, size_t element_size, LoadedModel& out) {
  const std::byte* p = t.data();
  if (element_size <= 1 || reinterpret_cast<uintptr_t>(p) % element_size == 0) return p;
  const size_t n = size_t(t.tensor->nbytes());
  std::shared_ptr<std::byte[]> copy(new std::byte[n]);
  std::memcpy(copy.get(), p, n);
  out.storage.push_back(copy);
  return copy.get();
}

void bind_safetensors(const SafetensorsCheckpoint& ck, const fs::path& dir, const LoadOptions& options,
                      LoadedModel& out) {
  auto specs = flint_tensor_specs(out.config, &out.weights);
  std::set<std::string> expected;
  size_t total = 0;
  for (const auto& s : specs) {
    expected.insert(s.name);
    if (auto it = ck.tensors().find(s.name); it != ck.tensors().end()) total += size_t(it->second.tensor->nbytes());
  }
  // Unexpected Flint-namespace tensors mean the checkpoint and config.json disagree.
  for (const auto& [name, t] : ck.tensors()) {
    const bool flint_name = name.rfind("model.", 0) == 0 || name.rfind("lm_head", 0) == 0;
    if (flint_name && !expected.count(name))
      throw Error(t.file->map->path().string() + ": unexpected tensor " + quote(name) +
                  " (not part of Flint as config.json describes it)");
  }

  size_t done = 0;
  for (const auto& s : specs) {
    auto it = ck.tensors().find(s.name);
    if (it == ck.tensors().end())
      throw Error(dir.string() + ": tensor " + quote(s.name) + " is missing (expected " + dtype_list(s.dtypes) + " " +
                  shape_string(s.shape) + ")");
    const CheckpointTensor& t = it->second;
    const std::string file = t.file->map->path().string();
    const bool dtype_ok = t.tensor->dtype_supported &&
                          std::find(s.dtypes.begin(), s.dtypes.end(), t.tensor->dtype) != s.dtypes.end();
    if (!dtype_ok)
      throw Error(file + ": tensor " + quote(s.name) + " has dtype " + t.tensor->dtype_name + ", expected " +
                  dtype_list(s.dtypes));
    if (t.tensor->shape != s.shape)
      throw Error(file + ": tensor " + quote(s.name) + " has shape " + shape_string(t.tensor->shape) + ", expected " +
                  shape_string(s.shape));
    WeightView& v = *s.slot;
    v.name = s.name;
    v.dtype = t.tensor->dtype;
    v.shape = t.tensor->shape;
    v.nbytes = size_t(t.tensor->nbytes());
    v.data = aligned_data(t, dtype_size(v.dtype), out);
    done += v.nbytes;
    if (options.on_progress) options.on_progress(done, total);
  }
  for (const auto& f : ck.files()) out.storage.push_back(f->map);
}

// The GGUF file to load, or "" for a safetensors checkpoint: a .gguf path, or a directory
// (e.g. an HF snapshot) that holds exactly one .gguf file and no safetensors.
std::string gguf_file_in(const std::string& path, const std::string& format) {
  if (!fs::is_directory(path)) {
    if (format == "gguf" || (format == "auto" && has_gguf_extension(path))) return path;
    return "";
  }
  if (format == "safetensors") return "";
  std::vector<std::string> ggufs;
  bool safetensors = false;
  for (const auto& e : fs::directory_iterator(path)) {
    const std::string name = e.path().filename().string();
    if (has_gguf_extension(name)) ggufs.push_back(e.path().string());
    if (name.size() > 12 && name.compare(name.size() - 12, 12, ".safetensors") == 0) safetensors = true;
  }
  if (format == "auto" && (safetensors || ggufs.empty())) return "";
  if (ggufs.empty()) throw Error(path + ": --load-format gguf but the directory holds no .gguf file");
  if (ggufs.size() > 1) throw Error(path + ": holds " + std::to_string(ggufs.size()) + " .gguf files; name the one to load");
  return ggufs[0];
}

}  // namespace

std::optional<LinearFormat> parse_quantization(const std::string& value) {
  if (value.empty()) return std::nullopt;
  if (value == "nvfp4" || value == "modelopt_fp4" || value == "gguf") return LinearFormat::nvfp4;
  throw Error("--quantization " + quote(value) +
              " is not supported (striker serves Flint's BF16 checkpoint without --quantization, and its NVFP4 "
              "checkpoint with gguf, nvfp4 or modelopt_fp4)");
}

LinearFormat dummy_weight_format(const LoadOptions& options) {
  return parse_quantization(options.quantization).value_or(LinearFormat::bf16);
}

FlintConfig load_model_config(const std::string& model, const LoadOptions& options) {
  if (!options.hf_config_path.empty()) return load_flint_config(config_path_for({}, options.hf_config_path));
  const std::string path = resolve_model_path(model, {"", "", hub::Need::model_no_weights});
  const fs::path dir = fs::is_directory(path) ? fs::path(path) : fs::path(path).parent_path();
  if (!fs::exists(dir / "config.json"))
    throw Error(path + ": no config.json beside the model; give one with --hf-config-path");
  return load_flint_config(dir / "config.json");
}

namespace {

// --quantization against what the checkpoint holds: NVFP4 needs a GGUF with NVFP4 linear weights.
void check_quantization(const std::string& source, const std::string& quantization, const LoadedModel* loaded) {
  if (!parse_quantization(quantization)) return;
  if (!loaded)
    throw Error(source + ": --quantization " + quantization +
                " but this is a BF16 safetensors checkpoint (NVFP4 comes as a .gguf file); drop --quantization");
  const FlintWeights& w = loaded->weights;
  bool any_nvfp4 = w.lm_head.dtype == DType::NVFP4;
  for (const auto& l : w.layers) any_nvfp4 = any_nvfp4 || l.q_proj.dtype == DType::NVFP4 || l.shared.up.dtype == DType::NVFP4 ||
                                             (!l.experts.empty() && l.experts[0].up.dtype == DType::NVFP4);
  if (!any_nvfp4 && quantization != "gguf")
    throw Error(source + ": --quantization " + quantization + " but the file holds no NVFP4 weights; drop --quantization");
}

}  // namespace

LoadedModel load_model(const std::string& model, const LoadOptions& options) {
  const std::string& format = options.load_format;
  if (format != "auto" && format != "safetensors" && format != "gguf" && format != "dummy")
    throw Error("--load-format " + quote(format) + " is not one of auto, safetensors, gguf, dummy");
  if (format == "dummy") {
    LoadedModel out = make_dummy_model(load_model_config(model, options), options.seed, dummy_weight_format(options));
    out.source = model;
    return out;
  }
  parse_quantization(options.quantization);  // an unknown value fails before any file is read

  const std::string path = resolve_model_path(model);
  const std::string gguf = gguf_file_in(path, format);
  if (gguf.empty() && parse_quantization(options.quantization)) check_quantization(path, options.quantization, nullptr);
  if (!gguf.empty()) {
    if (options.hf_config_path.empty() && !fs::exists(fs::path(gguf).parent_path() / "config.json"))
      throw Error(gguf + ": a GGUF checkpoint needs --hf-config-path (the BF16 repo or a directory with config.json)");
    fs::path cfg = options.hf_config_path.empty() ? fs::path(gguf).parent_path() / "config.json"
                                                  : config_path_for(path, options.hf_config_path);
    LoadedModel out = load_gguf_model(gguf, load_flint_config(cfg), options.on_progress);
    out.source = model;
    check_quantization(gguf, options.quantization, &out);
    return out;
  }
  if (!fs::is_directory(path))
    throw Error(path + ": not a checkpoint directory (expected config.json and model*.safetensors inside)");
  LoadedModel out;
  out.source = model;
  out.config = load_flint_config(config_path_for(path, options.hf_config_path));
  SafetensorsCheckpoint ck = SafetensorsCheckpoint::open(path);
  bind_safetensors(ck, path, options, out);
  return out;
}

}  // namespace striker
