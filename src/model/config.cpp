#include "model/config.h"

#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace striker {

int64_t FlintConfig::num_full_layers() const {
  int64_t n = 0;
  for (auto t : layer_types) n += t == LayerType::Full;
  return n;
}

namespace {

struct Reader {
  const nlohmann::json& j;
  const std::string& source;

  [[noreturn]] void fail(const std::string& field, const std::string& why) const {
    throw Error(source + ": field '" + field + "' " + why);
  }
  const nlohmann::json& get(const char* field) const {
    auto it = j.find(field);
    if (it == j.end() || it->is_null()) fail(field, "is missing");
    return *it;
  }
  int64_t integer(const char* field, int64_t min_value = 1) const {
    const auto& v = get(field);
    if (!v.is_number_integer()) fail(field, "must be an integer, got " + v.dump());
    int64_t x = v.get<int64_t>();
    if (x < min_value) fail(field, "must be >= " + std::to_string(min_value) + ", got " + std::to_string(x));
    return x;
  }
  double number(const char* field) const {
    const auto& v = get(field);
    if (!v.is_number()) fail(field, "must be a number, got " + v.dump());
    return v.get<double>();
  }
  bool boolean(const char* field, bool fallback) const {
    auto it = j.find(field);
    if (it == j.end() || it->is_null()) return fallback;
    if (!it->is_boolean()) fail(field, "must be true or false, got " + it->dump());
    return it->get<bool>();
  }
};

}  // namespace

FlintConfig parse_flint_config(const nlohmann::json& j, const std::string& source) {
  if (!j.is_object()) throw Error(source + ": config must be a JSON object");
  Reader r{j, source};
  FlintConfig c;
  c.vocab_size = r.integer("vocab_size");
  c.hidden_size = r.integer("hidden_size");
  c.num_hidden_layers = r.integer("num_hidden_layers");
  c.num_attention_heads = r.integer("num_attention_heads");
  c.num_key_value_heads = r.integer("num_key_value_heads");
  c.head_dim = r.integer("head_dim");
  c.intermediate_size = r.integer("intermediate_size");
  c.moe_intermediate_size = r.integer("moe_intermediate_size");
  c.n_routed_experts = r.integer("n_routed_experts");
  c.n_shared_experts = r.integer("n_shared_experts", 0);
  c.shared_expert_intermediate_size =
      j.contains("shared_expert_intermediate_size") ? r.integer("shared_expert_intermediate_size")
                                                    : c.moe_intermediate_size * c.n_shared_experts;
  c.num_experts_per_tok = r.integer("num_experts_per_tok");
  c.first_k_dense_replace = r.integer("first_k_dense_replace", 0);
  c.norm_topk_prob = r.boolean("norm_topk_prob", true);
  c.routed_scaling_factor = float(r.number("routed_scaling_factor"));
  c.sliding_window = r.integer("sliding_window");
  c.rope_theta = float(r.number("rope_theta"));
  c.rms_norm_eps = float(r.number("rms_norm_eps"));
  c.max_position_embeddings = r.integer("max_position_embeddings");
  c.tie_word_embeddings = r.boolean("tie_word_embeddings", false);
  c.attention_sinks = r.boolean("attention_sinks", true);
  c.use_qk_norm = r.boolean("use_qk_norm", true);

  if (auto it = j.find("scoring_func"); it != j.end() && !it->is_null()) {
    if (!it->is_string() || it->get<std::string>() != "sigmoid")
      r.fail("scoring_func", "must be \"sigmoid\" (the only scoring Flint defines), got " + it->dump());
  }
  if (auto it = j.find("hidden_act"); it != j.end() && !it->is_null()) {
    if (!it->is_string() || it->get<std::string>() != "silu")
      r.fail("hidden_act", "must be \"silu\", got " + it->dump());
  }
  if (auto it = j.find("rope_scaling"); it != j.end() && !it->is_null())
    r.fail("rope_scaling", "is not supported by Flint (must be null), got " + it->dump());
  if (r.boolean("attention_bias", false)) r.fail("attention_bias", "must be false (Flint has no attention bias)");

  const auto& lt = r.get("layer_types");
  if (!lt.is_array()) r.fail("layer_types", "must be a list");
  if (int64_t(lt.size()) != c.num_hidden_layers)
    r.fail("layer_types", "has " + std::to_string(lt.size()) + " entries but num_hidden_layers is " +
                              std::to_string(c.num_hidden_layers));
  for (size_t i = 0; i < lt.size(); ++i) {
    std::string s = lt[i].is_string() ? lt[i].get<std::string>() : "";
    if (s == "sliding_attention") c.layer_types.push_back(LayerType::Sliding);
    else if (s == "full_attention") c.layer_types.push_back(LayerType::Full);
    else r.fail("layer_types", "entry " + std::to_string(i) + " must be \"sliding_attention\" or \"full_attention\", got " + lt[i].dump());
  }

  if (auto it = j.find("eos_token_id"); it != j.end() && !it->is_null()) {
    if (it->is_number_integer()) c.eos_token_ids.push_back(it->get<int64_t>());
    else if (it->is_array()) {
      for (const auto& e : *it) {
        if (!e.is_number_integer()) r.fail("eos_token_id", "must hold integers, got " + e.dump());
        c.eos_token_ids.push_back(e.get<int64_t>());
      }
    } else r.fail("eos_token_id", "must be an integer or a list of integers");
  }

  // Cross-field rules.
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    r.fail("num_key_value_heads", "(" + std::to_string(c.num_key_value_heads) + ") must divide num_attention_heads (" +
                                      std::to_string(c.num_attention_heads) + ")");
  if (c.head_dim % 2 != 0) r.fail("head_dim", "must be even (RoPE rotates halves)");
  if (c.num_experts_per_tok > c.n_routed_experts)
    r.fail("num_experts_per_tok", "(" + std::to_string(c.num_experts_per_tok) + ") exceeds n_routed_experts (" +
                                      std::to_string(c.n_routed_experts) + ")");
  if (c.first_k_dense_replace > c.num_hidden_layers)
    r.fail("first_k_dense_replace", "exceeds num_hidden_layers");
  if (c.n_shared_experts > 1)
    r.fail("n_shared_experts", "must be 0 or 1 (Flint has one shared expert), got " + std::to_string(c.n_shared_experts));
  if (!(c.rms_norm_eps > 0)) r.fail("rms_norm_eps", "must be positive");
  if (!(c.rope_theta > 0)) r.fail("rope_theta", "must be positive");
  if (!(c.routed_scaling_factor > 0)) r.fail("routed_scaling_factor", "must be positive");
  if (c.tie_word_embeddings) r.fail("tie_word_embeddings", "must be false (Flint has a separate lm_head)");
  for (auto e : c.eos_token_ids)
    if (e < 0 || e >= c.vocab_size) r.fail("eos_token_id", "holds " + std::to_string(e) + ", outside the vocabulary");
  return c;
}

FlintConfig load_flint_config(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw Error(path.string() + ": cannot open config file");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw Error(path.string() + ": invalid JSON: " + e.what());
  }
  return parse_flint_config(j, path.string());
}

}  // namespace striker
