#include "cli/speculative_flag.h"

#include <nlohmann/json.hpp>

#include "cli/json_flag.h"
#include "core/error.h"

namespace striker::cli {

namespace {

int32_t int_field(const nlohmann::json& j, const char* key, int32_t fallback) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  const nlohmann::json& v = j[key];
  if (!v.is_number_integer())
    throw Error(std::string("--speculative-config: ") + key + " must be an integer, got " + v.dump());
  const int64_t x = v.get<int64_t>();
  if (x < -1'000'000 || x > 1'000'000) throw Error(std::string("--speculative-config: ") + key + " is out of range");
  return int32_t(x);
}

}  // namespace

SpeculativeConfig parse_speculative_config(const std::string& text) {
  const nlohmann::json j =
      parse_json_object_flag("--speculative-config", text, R"({"method": "ngram", "num_speculative_tokens": 3})");
  static const char* const kKeys[] = {"method", "model", "num_speculative_tokens", "prompt_lookup_min",
                                      "prompt_lookup_max", "disable_by_batch_size"};
  for (const auto& [key, value] : j.items()) {
    bool known = false;
    for (const char* k : kKeys) known = known || key == k;
    if (!known)
      throw Error("--speculative-config: '" + key + "' is not taken (striker's n-gram speculation takes method, "
                  "num_speculative_tokens, prompt_lookup_min, prompt_lookup_max, disable_by_batch_size)");
  }
  auto text_field = [&](const char* key) {
    if (!j.contains(key) || j[key].is_null()) return std::string();
    if (!j[key].is_string()) throw Error(std::string("--speculative-config: ") + key + " must be a string");
    return j[key].get<std::string>();
  };
  // vLLM names the method in "method", or (older configs) "model": "ngram"; any other model is a
  // draft model's path.
  std::string method = text_field("method");
  const std::string model = text_field("model");
  if (!model.empty() && model != "ngram" && model != "[ngram]")
    throw Error("--speculative-config: model '" + model + "' is a draft model; striker has none and speculates with "
                "n-grams of the context only (\"method\": \"ngram\")");
  if (method.empty()) method = model;
  if (method.empty()) throw Error("--speculative-config needs \"method\": \"ngram\" (striker has no draft models)");
  if (method != "ngram" && method != "[ngram]")
    throw Error("--speculative-config method '" + method +
                "' is not available: striker speculates with n-grams of the context only (\"method\": \"ngram\"); "
                "draft models, EAGLE, MTP and suffix decoding are not built");
  if (!j.contains("num_speculative_tokens") || j["num_speculative_tokens"].is_null())
    throw Error("--speculative-config: num_speculative_tokens is required (guessed tokens per step, e.g. 3)");
  SpeculativeConfig c;
  c.num_speculative_tokens = int_field(j, "num_speculative_tokens", 0);
  if (c.num_speculative_tokens < 1)
    throw Error("--speculative-config: num_speculative_tokens must be > 0, got " + std::to_string(c.num_speculative_tokens));
  // vLLM's defaults: both 5 when neither is given, else the one given for both.
  const bool has_min = j.contains("prompt_lookup_min") && !j["prompt_lookup_min"].is_null();
  const bool has_max = j.contains("prompt_lookup_max") && !j["prompt_lookup_max"].is_null();
  c.prompt_lookup_min = int_field(j, "prompt_lookup_min", 5);
  c.prompt_lookup_max = int_field(j, "prompt_lookup_max", 5);
  if (has_min && !has_max) c.prompt_lookup_max = c.prompt_lookup_min;
  if (has_max && !has_min) c.prompt_lookup_min = c.prompt_lookup_max;
  c.disable_by_batch_size = int_field(j, "disable_by_batch_size", 0);
  try {
    validate_speculative_config(c);
  } catch (const Error& e) {
    throw Error(std::string("--speculative-config: ") + e.what());
  }
  return c;
}

}  // namespace striker::cli
