// A random in-memory Flint model for CPU backend tests: small vocabulary so tests run fast,
// residual-branch outputs scaled down as FLINT.md §4 asks of random checkpoints.
#pragma once
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/bf16.h"
#include "model/weights.h"

namespace striker::test {

inline nlohmann::json small_config_json() {
  return {{"vocab_size", 1000}, {"hidden_size", 64}, {"num_hidden_layers", 5},
          {"num_attention_heads", 6}, {"num_key_value_heads", 2}, {"head_dim", 16},  // q_dim 96 != H
          {"intermediate_size", 96}, {"moe_intermediate_size", 32}, {"shared_expert_intermediate_size", 32},
          {"n_routed_experts", 8}, {"n_shared_experts", 1}, {"num_experts_per_tok", 3},
          {"first_k_dense_replace", 1}, {"norm_topk_prob", true}, {"routed_scaling_factor", 2.5},
          {"sliding_window", 5},
          {"layer_types", {"sliding_attention", "full_attention", "sliding_attention", "sliding_attention",
                           "full_attention"}},
          {"rope_theta", 10000.0}, {"rms_norm_eps", 1e-6}, {"max_position_embeddings", 4096},
          {"use_qk_norm", true}, {"attention_sinks", true}};
}

class SyntheticModelBuilder {
 public:
  SyntheticModelBuilder(const FlintConfig& config, uint64_t seed) : rng_(seed) { model_.config = config; }

  LoadedModel build() {
    const FlintConfig& c = model_.config;
    const int64_t H = c.hidden_size, d = c.head_dim;
    auto& w = model_.weights;
    w.embed = matrix("model.embed_tokens.weight", c.vocab_size, H, 1.0);
    w.lm_head = matrix("lm_head.weight", c.vocab_size, H, 1.0 / std::sqrt(double(H)));
    w.final_norm = norm("model.norm.weight", H);
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
      const std::string p = "model.layers." + std::to_string(l) + ".";
      LayerWeights L;
      L.input_norm = norm(p + "input_layernorm.weight", H);
      L.post_attn_norm = norm(p + "post_attention_layernorm.weight", H);
      L.q_proj = linear(p + "self_attn.q_proj.weight", c.q_dim(), H);
      L.k_proj = linear(p + "self_attn.k_proj.weight", c.kv_dim(), H);
      L.v_proj = linear(p + "self_attn.v_proj.weight", c.kv_dim(), H);
      L.o_proj = matrix(p + "self_attn.o_proj.weight", H, c.q_dim(), 0.2 / std::sqrt(double(c.q_dim())));
      L.q_norm = norm(p + "self_attn.q_norm.weight", d);
      L.k_norm = norm(p + "self_attn.k_norm.weight", d);
      L.sinks = vector_f32(p + "self_attn.sinks", c.num_attention_heads, 1.0);
      if (c.is_dense_layer(l)) {
        L.dense = mlp(p + "mlp.", c.intermediate_size);
      } else {
        L.router = linear(p + "mlp.gate.weight", c.n_routed_experts, H);
        L.router_bias = vector_f32(p + "mlp.gate.e_score_correction_bias", c.n_routed_experts, 0.01);
        for (int64_t e = 0; e < c.n_routed_experts; ++e)
          L.experts.push_back(mlp(p + "mlp.experts." + std::to_string(e) + ".", c.moe_intermediate_size));
        L.shared = mlp(p + "mlp.shared_experts.", c.shared_expert_intermediate_size);
      }
      w.layers.push_back(std::move(L));
    }
    return std::move(model_);
  }

 private:
  WeightView bf16_tensor(const std::string& name, std::vector<int64_t> shape, double mean, double scale) {
    int64_t n = 1;
    for (auto s : shape) n *= s;
    auto buf = std::make_shared<std::vector<uint16_t>>(static_cast<size_t>(n));
    std::normal_distribution<double> dist(0.0, 1.0);
    for (auto& v : *buf) v = float_to_bf16(float(mean + scale * dist(rng_))).bits;
    model_.storage.push_back(buf);
    WeightView view;
    view.name = name;
    view.dtype = DType::BF16;
    view.shape = std::move(shape);
    view.data = reinterpret_cast<const std::byte*>(buf->data());
    view.nbytes = buf->size() * 2;
    return view;
  }
  WeightView matrix(const std::string& name, int64_t rows, int64_t cols, double scale) {
    return bf16_tensor(name, {rows, cols}, 0.0, scale);
  }
  WeightView linear(const std::string& name, int64_t rows, int64_t cols) {
    return matrix(name, rows, cols, 1.0 / std::sqrt(double(cols)));
  }
  WeightView norm(const std::string& name, int64_t n) { return bf16_tensor(name, {n}, 1.0, 0.1); }
  WeightView vector_f32(const std::string& name, int64_t n, double scale) {
    auto buf = std::make_shared<std::vector<float>>(static_cast<size_t>(n));
    std::normal_distribution<double> dist(0.0, 1.0);
    for (auto& v : *buf) v = float(scale * dist(rng_));
    model_.storage.push_back(buf);
    WeightView view;
    view.name = name;
    view.dtype = DType::F32;
    view.shape = {n};
    view.data = reinterpret_cast<const std::byte*>(buf->data());
    view.nbytes = buf->size() * 4;
    return view;
  }
  MlpWeights mlp(const std::string& p, int64_t width) {
    const int64_t H = model_.config.hidden_size;
    return {linear(p + "gate_proj.weight", width, H), linear(p + "up_proj.weight", width, H),
            matrix(p + "down_proj.weight", H, width, 0.2 / std::sqrt(double(width)))};
  }

  std::mt19937_64 rng_;
  LoadedModel model_;
};

inline LoadedModel make_synthetic_model(uint64_t seed) {
  return SyntheticModelBuilder(parse_flint_config(small_config_json(), "small test config"), seed).build();
}

}  // namespace striker::test
