// Flint hyper-parameters, parsed from config.json (FLINT.md §1).
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace striker {

enum class LayerType : uint8_t { Sliding, Full };

struct FlintConfig {
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;              // H
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;                 // d
  int64_t intermediate_size = 0;        // dense MLP width (layers < first_k_dense_replace)
  int64_t moe_intermediate_size = 0;    // width of each routed expert
  int64_t shared_expert_intermediate_size = 0;
  int64_t n_routed_experts = 0;
  int64_t n_shared_experts = 0;
  int64_t num_experts_per_tok = 0;      // K
  int64_t first_k_dense_replace = 0;
  bool norm_topk_prob = true;
  float routed_scaling_factor = 1.0f;
  int64_t sliding_window = 0;           // W: a query at p sees keys p-W+1 .. p
  std::vector<LayerType> layer_types;   // one per layer
  float rope_theta = 10000.0f;
  float rms_norm_eps = 1e-6f;
  int64_t max_position_embeddings = 0;
  bool tie_word_embeddings = false;
  bool attention_sinks = true;
  bool use_qk_norm = true;
  std::vector<int64_t> eos_token_ids;   // from config.json when present

  bool is_dense_layer(int64_t l) const { return l < first_k_dense_replace; }
  bool is_sliding_layer(int64_t l) const { return layer_types[size_t(l)] == LayerType::Sliding; }
  int64_t q_dim() const { return num_attention_heads * head_dim; }
  int64_t kv_dim() const { return num_key_value_heads * head_dim; }
  int64_t num_full_layers() const;
  int64_t num_sliding_layers() const { return num_hidden_layers - num_full_layers(); }
  // Bytes of KV cache one token occupies in the full-attention layers (BF16 K and V).
  int64_t full_kv_bytes_per_token() const { return num_full_layers() * kv_dim() * 2 * 2; }
};

// Parses and validates; throws striker::Error naming `source` and the field at fault.
FlintConfig parse_flint_config(const nlohmann::json& j, const std::string& source);
FlintConfig load_flint_config(const std::filesystem::path& config_json);

}  // namespace striker
