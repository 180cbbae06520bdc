#include "backends/cpu/cpu_model.h"

#include <cmath>
#include <string>

#include "backends/cpu/ops_linear.h"
#include "core/error.h"

namespace striker::cpu {

namespace {

void check_mlp(const MlpWeights& m, int64_t width, int64_t hidden) {
  check_matrix(m.gate, width, hidden);
  check_matrix(m.up, width, hidden);
  check_matrix(m.down, hidden, width);
}

}  // namespace

CpuModel::CpuModel(const LoadedModel& model) : config(model.config), weights(model.weights) {
  const FlintConfig& c = config;
  const int64_t H = c.hidden_size, d = c.head_dim;
  if (c.num_attention_heads <= 0 || c.num_key_value_heads <= 0 ||
      c.num_attention_heads % c.num_key_value_heads != 0)
    throw Error("CPU backend: num_attention_heads must be a positive multiple of num_key_value_heads");
  if (d % 2 != 0) throw Error("CPU backend: head_dim must be even (RoPE pairs i, i + d/2)");
  if (int64_t(weights.layers.size()) != c.num_hidden_layers || int64_t(c.layer_types.size()) != c.num_hidden_layers)
    throw Error("CPU backend: the model has " + std::to_string(weights.layers.size()) +
                " layers of weights but num_hidden_layers is " + std::to_string(c.num_hidden_layers));
  if (c.num_sliding_layers() > 0 && c.sliding_window < 1)
    throw Error("CPU backend: sliding_window must be at least 1 when the model has sliding layers");
  if (c.num_experts_per_tok > c.n_routed_experts)
    throw Error("CPU backend: num_experts_per_tok exceeds n_routed_experts");

  check_matrix(weights.embed, c.vocab_size, H);
  check_matrix(weights.lm_head, c.vocab_size, H);
  final_norm = load_vector(weights.final_norm, H);

  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const LayerWeights& w = weights.layers[size_t(l)];
    CpuLayer layer;
    layer.w = &w;
    layer.input_norm = load_vector(w.input_norm, H);
    layer.post_attn_norm = load_vector(w.post_attn_norm, H);
    check_matrix(w.q_proj, c.q_dim(), H);
    check_matrix(w.k_proj, c.kv_dim(), H);
    check_matrix(w.v_proj, c.kv_dim(), H);
    check_matrix(w.o_proj, H, c.q_dim());
    if (c.use_qk_norm) {
      layer.q_norm = load_vector(w.q_norm, d);
      layer.k_norm = load_vector(w.k_norm, d);
    }
    if (c.attention_sinks)
      layer.sinks = load_vector(w.sinks, c.num_attention_heads);
    else
      layer.sinks.assign(size_t(c.num_attention_heads), -INFINITY);  // exp(-inf) = 0: no sink
    if (c.is_dense_layer(l)) {
      check_mlp(w.dense, c.intermediate_size, H);
    } else {
      check_matrix(w.router, c.n_routed_experts, H);
      layer.router_bias = load_vector(w.router_bias, c.n_routed_experts);
      if (int64_t(w.experts.size()) != c.n_routed_experts)
        throw Error("CPU backend: layer " + std::to_string(l) + " has " + std::to_string(w.experts.size()) +
                    " experts, config says " + std::to_string(c.n_routed_experts));
      for (const auto& e : w.experts) check_mlp(e, c.moe_intermediate_size, H);
      // The shared expert's width is whatever its weights say (config conventions differ on
      // whether it is per shared expert or in total); the three matrices must agree.
      if (c.n_shared_experts > 0) check_mlp(w.shared, w.shared.gate.rows(), H);
    }
    layers.push_back(std::move(layer));
  }
}

}  // namespace striker::cpu
