#include "loaders/gguf_flint_layout.h"

namespace striker {

std::vector<GgufFlintTensor> flint_gguf_tensors(const FlintConfig& c) {
  const int64_t H = c.hidden_size, d = c.head_dim, E = c.n_routed_experts;
  std::vector<GgufFlintTensor> out;
  auto add = [&](std::string base, GgufRole role, std::vector<int64_t> shape,
                 std::function<WeightView&(FlintWeights&, int64_t)> slot, bool stacked = false,
                 std::string suffix = ".weight") {
    out.push_back({std::move(base), std::move(suffix), role, std::move(shape), stacked, std::move(slot)});
  };
  add("token_embd", GgufRole::Embedding, {c.vocab_size, H}, [](FlintWeights& w, int64_t) -> WeightView& { return w.embed; });
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    auto L = [l](auto member) {
      return [l, member](FlintWeights& w, int64_t) -> WeightView& { return w.layers[size_t(l)].*member; };
    };
    add(b + "attn_norm", GgufRole::Vector, {H}, L(&LayerWeights::input_norm));
    add(b + "attn_q", GgufRole::Linear, {c.q_dim(), H}, L(&LayerWeights::q_proj));
    add(b + "attn_k", GgufRole::Linear, {c.kv_dim(), H}, L(&LayerWeights::k_proj));
    add(b + "attn_v", GgufRole::Linear, {c.kv_dim(), H}, L(&LayerWeights::v_proj));
    add(b + "attn_output", GgufRole::Linear, {H, c.q_dim()}, L(&LayerWeights::o_proj));
    add(b + "attn_q_norm", GgufRole::Vector, {d}, L(&LayerWeights::q_norm));
    add(b + "attn_k_norm", GgufRole::Vector, {d}, L(&LayerWeights::k_norm));
    add(b + "attn_sinks", GgufRole::Vector, {c.num_attention_heads}, L(&LayerWeights::sinks));
    add(b + "ffn_norm", GgufRole::Vector, {H}, L(&LayerWeights::post_attn_norm));
    auto mlp = [l](MlpWeights LayerWeights::*m, WeightView MlpWeights::*p) {
      return [l, m, p](FlintWeights& w, int64_t) -> WeightView& { return w.layers[size_t(l)].*m.*p; };
    };
    if (c.is_dense_layer(l)) {
      const int64_t I = c.intermediate_size;
      add(b + "ffn_gate", GgufRole::Linear, {I, H}, mlp(&LayerWeights::dense, &MlpWeights::gate));
      add(b + "ffn_up", GgufRole::Linear, {I, H}, mlp(&LayerWeights::dense, &MlpWeights::up));
      add(b + "ffn_down", GgufRole::Linear, {H, I}, mlp(&LayerWeights::dense, &MlpWeights::down));
      continue;
    }
    add(b + "ffn_gate_inp", GgufRole::Router, {E, H}, L(&LayerWeights::router));
    add(b + "exp_probs_b", GgufRole::Vector, {E}, L(&LayerWeights::router_bias), false, ".bias");
    const int64_t I = c.moe_intermediate_size;
    auto expert = [l](WeightView MlpWeights::*p) {
      return [l, p](FlintWeights& w, int64_t e) -> WeightView& { return w.layers[size_t(l)].experts[size_t(e)].*p; };
    };
    add(b + "ffn_gate_exps", GgufRole::Linear, {E, I, H}, expert(&MlpWeights::gate), true);
    add(b + "ffn_up_exps", GgufRole::Linear, {E, I, H}, expert(&MlpWeights::up), true);
    add(b + "ffn_down_exps", GgufRole::Linear, {E, H, I}, expert(&MlpWeights::down), true);
    if (c.n_shared_experts > 0) {
      const int64_t S = c.shared_expert_intermediate_size;
      add(b + "ffn_gate_shexp", GgufRole::Linear, {S, H}, mlp(&LayerWeights::shared, &MlpWeights::gate));
      add(b + "ffn_up_shexp", GgufRole::Linear, {S, H}, mlp(&LayerWeights::shared, &MlpWeights::up));
      add(b + "ffn_down_shexp", GgufRole::Linear, {H, S}, mlp(&LayerWeights::shared, &MlpWeights::down));
    }
  }
  add("output_norm", GgufRole::Vector, {H}, [](FlintWeights& w, int64_t) -> WeightView& { return w.final_norm; });
  add("output", GgufRole::Linear, {c.vocab_size, H}, [](FlintWeights& w, int64_t) -> WeightView& { return w.lm_head; });
  return out;
}

}  // namespace striker
