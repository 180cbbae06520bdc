#include "loaders/gguf_model.h"

#include <cmath>
#include <cstring>
#include <set>

#include "core/error.h"
#include "loaders/gguf_flint_layout.h"
#include "loaders/gguf.h"
#include "model/nvfp4.h"

namespace striker {

namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

// GGUF metadata that, where present, must agree with config.json.
void cross_check_metadata(const GgufFile& f, const FlintConfig& c) {
  auto fail = [&](const std::string& key, const std::string& gguf, const std::string& cfg, const char* field) {
    throw Error(f.source() + ": metadata '" + key + "' = " + gguf + " disagrees with config.json " + field + " = " + cfg);
  };
  auto integer = [&](const std::string& key, int64_t expect, const char* field) {
    if (auto v = f.get_int(key); v && *v != expect) fail(key, std::to_string(*v), std::to_string(expect), field);
  };
  auto real = [&](const std::string& key, double expect, const char* field) {
    if (auto v = f.get_float(key); v && std::fabs(*v - expect) > 1e-6 * std::fmax(1.0, std::fabs(expect)))
      fail(key, std::to_string(*v), std::to_string(expect), field);
  };
  auto arch = f.get_string("general.architecture");
  if (!arch) throw Error(f.source() + ": metadata 'general.architecture' is missing");
  if (*arch != "flint") throw Error(f.source() + ": metadata 'general.architecture' is '" + *arch + "', expected 'flint'");
  const std::string a = "flint.";
  integer(a + "block_count", c.num_hidden_layers, "num_hidden_layers");
  integer(a + "context_length", c.max_position_embeddings, "max_position_embeddings");
  integer(a + "embedding_length", c.hidden_size, "hidden_size");
  integer(a + "feed_forward_length", c.intermediate_size, "intermediate_size");
  integer(a + "expert_feed_forward_length", c.moe_intermediate_size, "moe_intermediate_size");
  integer(a + "expert_shared_feed_forward_length", c.shared_expert_intermediate_size, "shared_expert_intermediate_size");
  integer(a + "expert_count", c.n_routed_experts, "n_routed_experts");
  integer(a + "expert_used_count", c.num_experts_per_tok, "num_experts_per_tok");
  integer(a + "expert_shared_count", c.n_shared_experts, "n_shared_experts");
  integer(a + "leading_dense_block_count", c.first_k_dense_replace, "first_k_dense_replace");
  integer(a + "attention.head_count", c.num_attention_heads, "num_attention_heads");
  integer(a + "attention.head_count_kv", c.num_key_value_heads, "num_key_value_heads");
  integer(a + "attention.key_length", c.head_dim, "head_dim");
  integer(a + "attention.value_length", c.head_dim, "head_dim");
  integer(a + "attention.sliding_window", c.sliding_window, "sliding_window");
  integer(a + "vocab_size", c.vocab_size, "vocab_size");
  integer(a + "expert_gating_func", 2, "scoring_func (sigmoid = 2)");
  real(a + "rope.freq_base", c.rope_theta, "rope_theta");
  real(a + "attention.layer_norm_rms_epsilon", c.rms_norm_eps, "rms_norm_eps");
  real(a + "expert_weights_scale", c.routed_scaling_factor, "routed_scaling_factor");
  if (auto v = f.get_bool(a + "expert_weights_norm"); v && *v != c.norm_topk_prob)
    fail(a + "expert_weights_norm", *v ? "true" : "false", c.norm_topk_prob ? "true" : "false", "norm_topk_prob");
  if (auto v = f.get_int_array(a + "attention.sliding_window_pattern")) {
    if (int64_t(v->size()) != c.num_hidden_layers)
      fail(a + "attention.sliding_window_pattern", std::to_string(v->size()) + " entries",
           std::to_string(c.num_hidden_layers), "layer_types length");
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
      const bool sliding = (*v)[size_t(l)] != 0;
      if (sliding != c.is_sliding_layer(l))
        fail(a + "attention.sliding_window_pattern[" + std::to_string(l) + "]", sliding ? "sliding" : "full",
             c.is_sliding_layer(l) ? "sliding_attention" : "full_attention", "layer_types");
    }
  }
}

std::string type_name(uint32_t t) {
  const GgmlTypeInfo* info = ggml_type_info(t);
  return info ? std::string(info->name) : "type " + std::to_string(t);
}

DType plain_dtype(uint32_t t) {
  switch (t) {
    case 0: return DType::F32;
    case 1: return DType::F16;
    case 30: return DType::BF16;
    case 40: return DType::NVFP4;
    default: return DType::U8;  // marks "not allowed"
  }
}

}  // namespace

LoadedModel load_gguf_model(const std::string& path, const FlintConfig& config,
                            const std::function<void(size_t, size_t)>& on_progress) {
  auto file = std::make_shared<GgufFile>(GgufFile::open(path));
  const GgufFile& f = *file;
  cross_check_metadata(f, config);

  LoadedModel m;
  m.config = config;
  m.source = path;
  m.weights.layers.resize(size_t(config.num_hidden_layers));
  for (int64_t l = 0; l < config.num_hidden_layers; ++l)
    if (!config.is_dense_layer(l)) m.weights.layers[size_t(l)].experts.resize(size_t(config.n_routed_experts));

  const auto layout = flint_gguf_tensors(config);
  std::set<std::string> used;
  size_t total = 0, done = 0;
  for (const auto& t : f.tensors) total += t.nbytes;

  for (const auto& want : layout) {
    const std::string name = want.base + want.suffix;
    const GgufTensorInfo* t = f.find_tensor(name);
    if (!t) throw Error(path + ": tensor '" + name + "' is missing");
    used.insert(name);
    DType dt = plain_dtype(t->type);
    bool ok = false;
    switch (want.role) {
      case GgufRole::Embedding: ok = dt == DType::BF16 || dt == DType::F16 || dt == DType::F32; break;
      case GgufRole::Linear: ok = dt == DType::BF16 || dt == DType::F16 || dt == DType::F32 || dt == DType::NVFP4; break;
      case GgufRole::Vector: case GgufRole::Router: ok = dt == DType::BF16 || dt == DType::F32; break;
    }
    if (!ok) throw Error(path + ": tensor '" + name + "' has type " + type_name(t->type) + ", not allowed for this tensor");
    if (t->torch_shape() != want.shape)
      throw Error(path + ": tensor '" + name + "' has shape " + shape_str(t->torch_shape()) + ", expected " + shape_str(want.shape));

    // Global scale: <base>.scale or <base>.weight.scale, [1] or [E] for stacked experts.
    const int64_t n_mats = want.stacked_experts ? want.shape[0] : 1;
    std::vector<float> scale2(size_t(n_mats), 1.0f);
    for (const std::string& sname : {want.base + ".scale", want.base + ".weight.scale"}) {
      const GgufTensorInfo* s = f.find_tensor(sname);
      if (!s) continue;
      used.insert(sname);
      if (dt != DType::NVFP4) throw Error(path + ": tensor '" + sname + "' scales '" + name + "', which is not NVFP4");
      if (s->type != 0) throw Error(path + ": tensor '" + sname + "' must be F32, got " + type_name(s->type));
      int64_t n = 1;
      for (uint32_t d = 0; d < s->n_dims; ++d) n *= s->ne[d];
      if (n != n_mats) throw Error(path + ": tensor '" + sname + "' has " + std::to_string(n) + " values, expected " + std::to_string(n_mats));
      std::memcpy(scale2.data(), f.tensor_data(*s), size_t(n) * 4);
      for (int64_t e = 0; e < n; ++e)
        if (!std::isfinite(scale2[size_t(e)]))
          throw Error(path + ": tensor '" + sname + "' holds a non-finite scale at index " + std::to_string(e));
    }
    used.insert(want.base + ".input_scale");  // W4A4 activation scale: unused for W4A16

    const int64_t out_dim = want.shape[want.shape.size() >= 2 ? want.shape.size() - 2 : 0];
    const int64_t in_dim = want.shape.back();
    std::vector<int64_t> mat_shape = want.stacked_experts ? std::vector<int64_t>{want.shape[1], want.shape[2]} : want.shape;
    if (dt == DType::NVFP4) {
      if (in_dim % nvfp4::kBlockWeights != 0)
        throw Error(path + ": tensor '" + name + "' is NVFP4 with in = " + std::to_string(in_dim) + ", not a multiple of 64");
      const int64_t rows = want.stacked_experts ? want.shape[0] * want.shape[1] : out_dim;
      auto buf = std::make_shared<std::vector<std::byte>>(size_t(rows * (in_dim / 2 + in_dim / 16)));
      std::byte* codes = buf->data();
      std::byte* scales = codes + rows * in_dim / 2;
      const auto* src = reinterpret_cast<const uint8_t*>(f.tensor_data(*t));
      for (int64_t r = 0; r < rows; ++r)
        nvfp4::ggml_row_to_split(src + r * nvfp4::ggml_row_bytes(in_dim), in_dim,
                                 reinterpret_cast<uint8_t*>(codes) + r * in_dim / 2,
                                 reinterpret_cast<uint8_t*>(scales) + r * in_dim / 16);
      const int64_t mat_rows = rows / n_mats;
      for (int64_t e = 0; e < n_mats; ++e) {
        WeightView& v = want.slot(m.weights, e);
        v.name = want.stacked_experts ? name + "[" + std::to_string(e) + "]" : name;
        v.dtype = DType::NVFP4;
        v.shape = mat_shape;
        v.data = codes + e * mat_rows * in_dim / 2;
        v.nbytes = size_t(mat_rows * in_dim / 2);
        v.nvfp4_scales = scales + e * mat_rows * in_dim / 16;
        v.scale2 = scale2[size_t(e)];
      }
      m.storage.push_back(buf);
    } else {
      const size_t mat_bytes = t->nbytes / size_t(n_mats);
      for (int64_t e = 0; e < n_mats; ++e) {
        WeightView& v = want.slot(m.weights, e);
        v.name = want.stacked_experts ? name + "[" + std::to_string(e) + "]" : name;
        v.dtype = dt;
        v.shape = mat_shape;
        v.data = f.tensor_data(*t) + size_t(e) * mat_bytes;
        v.nbytes = mat_bytes;
      }
    }
    done += t->nbytes;
    if (on_progress) on_progress(done, total);
  }
  for (const auto& t : f.tensors)
    if (!used.count(t.name)) throw Error(path + ": unexpected tensor '" + t.name + "' (not part of Flint)");
  m.storage.push_back(file);  // keeps the mapping behind the non-NVFP4 views alive
  return m;
}

}  // namespace striker
