#include "server/startup_config.h"

#include <cctype>
#include <cmath>
#include <fstream>

#include "core/error.h"

namespace striker::server {

int64_t parse_memory_size(const std::string& text, const std::string& flag) {
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    throw Error(flag + ": '" + text + "' is not a size (examples: 512MiB, 2GiB, 1000000)");
  }
  std::string unit = text.substr(used);
  for (auto& ch : unit) ch = char(std::tolower(static_cast<unsigned char>(ch)));
  double mult = 0;
  if (unit.empty() || unit == "b") mult = 1;
  else if (unit == "k" || unit == "kib" || unit == "kb") mult = 1024.0;
  else if (unit == "m" || unit == "mib" || unit == "mb") mult = 1024.0 * 1024;
  else if (unit == "g" || unit == "gib" || unit == "gb") mult = 1024.0 * 1024 * 1024;
  else throw Error(flag + ": unknown unit '" + unit + "' in '" + text + "' (use B, KiB, MiB or GiB)");
  const double bytes = value * mult;
  if (!std::isfinite(bytes) || bytes <= 0 || bytes > 9.0e18) throw Error(flag + ": size '" + text + "' is out of range");
  return int64_t(bytes);
}

namespace {

std::optional<float> read_float(const nlohmann::json& j, const char* key, const std::string& file) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if (!it->is_number()) throw Error(file + ": field '" + key + "' must be a number");
  return it->get<float>();
}

}  // namespace

namespace {
GenerationConfig read_generation_config(const std::string& mode, const std::filesystem::path& model_dir,
                                        const std::vector<int64_t>& config_eos_ids);
}  // namespace

GenerationConfig load_generation_config(const std::string& mode, const std::filesystem::path& model_dir,
                                        const std::vector<int64_t>& config_eos_ids) {
  GenerationConfig out = read_generation_config(mode, model_dir, config_eos_ids);
  out.defaults.stop_token_ids.clear();
  for (size_t i = 1; i < out.eos_token_ids.size(); ++i) out.defaults.stop_token_ids.push_back(out.eos_token_ids[i]);
  return out;
}

namespace {

GenerationConfig read_generation_config(const std::string& mode, const std::filesystem::path& model_dir,
                                        const std::vector<int64_t>& config_eos_ids) {
  GenerationConfig out;
  for (int64_t id : config_eos_ids) out.eos_token_ids.push_back(int32_t(id));
  if (mode == "vllm") {
    out.source = "vLLM defaults (--generation-config vllm)";
    return out;
  }
  const std::filesystem::path dir = mode == "auto" ? model_dir : std::filesystem::path(mode);
  const auto file = dir / "generation_config.json";
  if (!std::filesystem::exists(file)) {
    if (mode != "auto") throw Error("--generation-config: " + file.string() + " does not exist");
    // FLINT.md §5 defaults for a checkpoint that ships no generation_config.json.
    out.defaults.temperature = 1.0f;
    out.defaults.top_p = 0.95f;
    out.defaults.top_k = 20;
    out.source = "FLINT.md defaults (no generation_config.json)";
    return out;
  }
  std::ifstream in(file);
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  const std::string name = file.string();
  if (j.is_discarded() || !j.is_object()) throw Error(name + ": not a JSON object");
  out.defaults.temperature = read_float(j, "temperature", name);
  out.defaults.top_p = read_float(j, "top_p", name);
  out.defaults.min_p = read_float(j, "min_p", name);
  out.defaults.repetition_penalty = read_float(j, "repetition_penalty", name);
  if (auto it = j.find("top_k"); it != j.end() && !it->is_null()) {
    if (!it->is_number_integer()) throw Error(name + ": field 'top_k' must be an integer");
    out.defaults.top_k = it->get<int32_t>();
  }
  if (auto it = j.find("eos_token_id"); it != j.end() && !it->is_null()) {
    out.eos_token_ids.clear();
    if (it->is_number_integer()) {
      out.eos_token_ids.push_back(it->get<int32_t>());
    } else if (it->is_array()) {
      for (const auto& id : *it) {
        if (!id.is_number_integer()) throw Error(name + ": field 'eos_token_id' must hold integers");
        out.eos_token_ids.push_back(id.get<int32_t>());
      }
    } else {
      throw Error(name + ": field 'eos_token_id' must be an integer or a list of integers");
    }
  }
  out.source = name;
  return out;
}

}  // namespace

void apply_generation_config_overrides(GenerationConfig& gen, const std::string& json) {
  const std::string flag = "--override-generation-config";
  const auto j = nlohmann::json::parse(json, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    throw Error(flag + ": expected a JSON object such as '{\"temperature\": 0.6, \"top_p\": 0.9}', got '" + json + "'");
  for (const auto& [key, value] : j.items()) {
    if (key != "temperature" && key != "top_p" && key != "top_k" && key != "min_p" && key != "repetition_penalty")
      throw Error(flag + ": '" + key + "' is not a sampling default striker takes (temperature, top_p, top_k, min_p, "
                  "repetition_penalty)");
  }
  auto set = [&](const char* key, std::optional<float>& field) {
    if (auto v = read_float(j, key, flag)) field = v;
  };
  set("temperature", gen.defaults.temperature);
  set("top_p", gen.defaults.top_p);
  set("min_p", gen.defaults.min_p);
  set("repetition_penalty", gen.defaults.repetition_penalty);
  if (auto it = j.find("top_k"); it != j.end() && !it->is_null()) {
    if (!it->is_number_integer()) throw Error(flag + ": field 'top_k' must be an integer");
    gen.defaults.top_k = it->get<int32_t>();
  }
  if (!j.empty()) gen.source += ", overridden by " + flag + " " + j.dump();
}

nlohmann::json parse_template_kwargs_flag(const std::string& text) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    throw Error("--default-chat-template-kwargs: expected a JSON object such as '{\"enable_thinking\": false}', got '" +
                text + "'");
  }
  return j;
}

}  // namespace striker::server
