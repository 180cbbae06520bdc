#include "loaders/flint_tensors.h"

namespace striker {

namespace {

class SpecBuilder {
 public:
  std::vector<TensorSpec> specs;

  void add(std::string name, std::vector<int64_t> shape, TensorRole role, WeightView* slot,
           std::vector<DType> dtypes = {DType::BF16}) {
    specs.push_back(TensorSpec{std::move(name), std::move(shape), std::move(dtypes), role, slot});
  }

  void mlp(const std::string& prefix, int64_t hidden, int64_t inner, MlpWeights* w) {
    add(prefix + ".gate_proj.weight", {inner, hidden}, TensorRole::InputProjection, w ? &w->gate : nullptr);
    add(prefix + ".up_proj.weight", {inner, hidden}, TensorRole::InputProjection, w ? &w->up : nullptr);
    add(prefix + ".down_proj.weight", {hidden, inner}, TensorRole::ResidualProjection, w ? &w->down : nullptr);
  }
};

}  // namespace

std::vector<TensorSpec> flint_tensor_specs(const FlintConfig& c, FlintWeights* bind) {
  const int64_t H = c.hidden_size, d = c.head_dim;
  if (bind) {
    bind->layers.assign(size_t(c.num_hidden_layers), LayerWeights{});
    for (int64_t l = c.first_k_dense_replace; l < c.num_hidden_layers; ++l)
      bind->layers[size_t(l)].experts.assign(size_t(c.n_routed_experts), MlpWeights{});
  }
  SpecBuilder b;
  b.add("model.embed_tokens.weight", {c.vocab_size, H}, TensorRole::Embedding, bind ? &bind->embed : nullptr);
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    LayerWeights* L = bind ? &bind->layers[size_t(l)] : nullptr;
    const std::string p = "model.layers." + std::to_string(l);
    b.add(p + ".input_layernorm.weight", {H}, TensorRole::Norm, L ? &L->input_norm : nullptr);
    b.add(p + ".self_attn.q_proj.weight", {c.q_dim(), H}, TensorRole::InputProjection, L ? &L->q_proj : nullptr);
    b.add(p + ".self_attn.k_proj.weight", {c.kv_dim(), H}, TensorRole::InputProjection, L ? &L->k_proj : nullptr);
    b.add(p + ".self_attn.v_proj.weight", {c.kv_dim(), H}, TensorRole::InputProjection, L ? &L->v_proj : nullptr);
    b.add(p + ".self_attn.o_proj.weight", {H, c.q_dim()}, TensorRole::ResidualProjection, L ? &L->o_proj : nullptr);
    if (c.use_qk_norm) {
      b.add(p + ".self_attn.q_norm.weight", {d}, TensorRole::QkNorm, L ? &L->q_norm : nullptr);
      b.add(p + ".self_attn.k_norm.weight", {d}, TensorRole::QkNorm, L ? &L->k_norm : nullptr);
    }
    if (c.attention_sinks)
      b.add(p + ".self_attn.sinks", {c.num_attention_heads}, TensorRole::Sinks, L ? &L->sinks : nullptr,
            {DType::BF16, DType::F32});
    b.add(p + ".post_attention_layernorm.weight", {H}, TensorRole::MlpNorm, L ? &L->post_attn_norm : nullptr);
    if (c.is_dense_layer(l)) {
      b.mlp(p + ".mlp", H, c.intermediate_size, L ? &L->dense : nullptr);
      continue;
    }
    const int64_t E = c.n_routed_experts;
    b.add(p + ".mlp.gate.weight", {E, H}, TensorRole::Router, L ? &L->router : nullptr, {DType::BF16, DType::F32});
    b.add(p + ".mlp.gate.e_score_correction_bias", {E}, TensorRole::RouterBias, L ? &L->router_bias : nullptr,
          {DType::F32});
    for (int64_t e = 0; e < E; ++e)
      b.mlp(p + ".mlp.experts." + std::to_string(e), H, c.moe_intermediate_size, L ? &L->experts[size_t(e)] : nullptr);
    if (c.n_shared_experts > 0)
      b.mlp(p + ".mlp.shared_experts", H, c.shared_expert_intermediate_size, L ? &L->shared : nullptr);
  }
  b.add("model.norm.weight", {H}, TensorRole::Norm, bind ? &bind->final_norm : nullptr);
  b.add("lm_head.weight", {c.vocab_size, H}, TensorRole::InputProjection, bind ? &bind->lm_head : nullptr);
  return std::move(b.specs);
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace striker
