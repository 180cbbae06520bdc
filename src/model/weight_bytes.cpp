#include "model/weight_bytes.h"

#include <algorithm>
#include <cmath>

namespace striker {

std::string linear_format_name(LinearFormat format) { return format == LinearFormat::nvfp4 ? "NVFP4" : "BF16"; }

double linear_bytes_per_weight(LinearFormat format) {
  return format == LinearFormat::nvfp4 ? 0.5 + 1.0 / 16.0 : 2.0;
}

double ActiveWeights::bytes(LinearFormat format) const {
  return linear() * linear_bytes_per_weight(format) + (router + embedding_rows) * 2.0 + (router_bias + norms) * 4.0;
}

ActiveWeights active_weights(const FlintConfig& c, double experts_per_moe_layer, double tokens) {
  const double H = double(c.hidden_size), d = double(c.head_dim);
  const double nh = double(c.num_attention_heads), nkv = double(c.num_key_value_heads);
  ActiveWeights w;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    w.attention += (nh + 2 * nkv) * d * H + H * nh * d;
    w.norms += 2 * H + (c.use_qk_norm ? 2 * d : 0) + (c.attention_sinks ? nh : 0);
    if (c.is_dense_layer(l)) {
      w.dense_mlp += 3 * double(c.intermediate_size) * H;
      continue;
    }
    w.router += double(c.n_routed_experts) * H;
    w.router_bias += double(c.n_routed_experts);
    w.routed_experts += experts_per_moe_layer * 3 * double(c.moe_intermediate_size) * H;
    w.shared_experts += double(c.n_shared_experts) * 3 * double(c.shared_expert_intermediate_size) * H;
  }
  w.norms += H;  // final norm
  w.lm_head = double(c.vocab_size) * H;
  w.embedding_rows = tokens * H;
  return w;
}

double decode_weight_bytes(const FlintConfig& c, LinearFormat format) {
  return active_weights(c, double(c.num_experts_per_tok)).bytes(format);
}

double expected_distinct_experts(const FlintConfig& c, double batch) {
  const double E = double(c.n_routed_experts), K = double(c.num_experts_per_tok);
  if (E <= 0 || batch <= 0) return 0;
  return E * (1.0 - std::pow(1.0 - K / E, batch));
}

double batch_decode_weight_bytes(const FlintConfig& c, LinearFormat format, double batch) {
  return active_weights(c, expected_distinct_experts(c, batch), batch).bytes(format);
}

double decode_kv_bytes(const FlintConfig& c, int64_t context) {
  const double per_key = double(c.num_key_value_heads * c.head_dim) * 2 /*K,V*/ * 2 /*BF16*/;
  double keys = 0;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l)
    keys += c.is_sliding_layer(l) ? double(std::min<int64_t>(context + 1, c.sliding_window)) : double(context + 1);
  return keys * per_key;
}

}  // namespace striker
