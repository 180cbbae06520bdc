#include "loaders/quantize.h"

#include <cmath>
#include <cstring>

#include "core/bf16.h"
#include "core/error.h"
#include "loaders/gguf_flint_layout.h"
#include "loaders/gguf_writer.h"
#include "model/nvfp4.h"

namespace striker {

namespace {

// Element i of a BF16/F16/F32 view as float.
float element(const WeightView& v, int64_t i) {
  switch (v.dtype) {
    case DType::BF16: {
      uint16_t b;
      std::memcpy(&b, v.data + 2 * i, 2);
      return bf16_to_float(bf16{b});
    }
    case DType::F16: {
      uint16_t h;
      std::memcpy(&h, v.data + 2 * i, 2);
      return f16_to_float(h);
    }
    case DType::F32: {
      float f;
      std::memcpy(&f, v.data + 4 * i, 4);
      return f;
    }
    default:
      throw Error("quantize: tensor '" + v.name + "' has type " + std::string(dtype_name(v.dtype)) +
                  "; only BF16/F16/F32 sources can be quantised");
  }
}

float amax_of(const WeightView& v) {
  float a = 0.0f;
  for (int64_t i = 0; i < v.numel(); ++i) {
    float x = element(v, i);
    if (!std::isfinite(x)) throw Error("quantize: tensor '" + v.name + "' holds a non-finite value at element " + std::to_string(i));
    a = std::fmax(a, std::fabs(x));
  }
  return a;
}

void quantize_matrix(const WeightView& v, float scale2, std::byte* dst) {
  const int64_t rows = v.rows(), in = v.cols();
  std::vector<float> row(static_cast<size_t>(in));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < in; ++i) row[size_t(i)] = element(v, r * in + i) / scale2;
    nvfp4::quantize_row_to_ggml(row.data(), in, reinterpret_cast<uint8_t*>(dst) + r * nvfp4::ggml_row_bytes(in));
  }
}

std::vector<int64_t> reversed(std::vector<int64_t> s) { return {s.rbegin(), s.rend()}; }

}  // namespace

void quantize_to_gguf(const LoadedModel& src, const std::string& out_path, const QuantizeOptions& options) {
  const FlintConfig& c = src.config;
  GgufWriter w;
  w.add_string("general.architecture", "flint");
  w.add_string("general.name", options.name.empty() ? "Flint" : options.name);
  w.add_u32("general.quantization_version", 2);
  w.add_u32("general.file_type", 39);  // LLAMA_FTYPE_MOSTLY_NVFP4
  const std::string a = "flint.";
  w.add_u32(a + "block_count", uint32_t(c.num_hidden_layers));
  w.add_u32(a + "context_length", uint32_t(c.max_position_embeddings));
  w.add_u32(a + "embedding_length", uint32_t(c.hidden_size));
  w.add_u32(a + "feed_forward_length", uint32_t(c.intermediate_size));
  w.add_u32(a + "expert_feed_forward_length", uint32_t(c.moe_intermediate_size));
  w.add_u32(a + "expert_shared_feed_forward_length", uint32_t(c.shared_expert_intermediate_size));
  w.add_u32(a + "expert_count", uint32_t(c.n_routed_experts));
  w.add_u32(a + "expert_used_count", uint32_t(c.num_experts_per_tok));
  w.add_u32(a + "expert_shared_count", uint32_t(c.n_shared_experts));
  w.add_u32(a + "expert_gating_func", 2);  // sigmoid
  w.add_f32(a + "expert_weights_scale", c.routed_scaling_factor);
  w.add_bool(a + "expert_weights_norm", c.norm_topk_prob);
  w.add_u32(a + "leading_dense_block_count", uint32_t(c.first_k_dense_replace));
  w.add_u32(a + "attention.head_count", uint32_t(c.num_attention_heads));
  w.add_u32(a + "attention.head_count_kv", uint32_t(c.num_key_value_heads));
  w.add_u32(a + "attention.key_length", uint32_t(c.head_dim));
  w.add_u32(a + "attention.value_length", uint32_t(c.head_dim));
  w.add_u32(a + "attention.sliding_window", uint32_t(c.sliding_window));
  nlohmann::json pattern = nlohmann::json::array();
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) pattern.push_back(c.is_sliding_layer(l));
  w.add(a + "attention.sliding_window_pattern", GgufValueType::ARRAY, pattern, GgufValueType::BOOL);
  w.add_f32(a + "attention.layer_norm_rms_epsilon", c.rms_norm_eps);
  w.add_f32(a + "rope.freq_base", c.rope_theta);
  w.add_u32(a + "vocab_size", uint32_t(c.vocab_size));

  // The layout's slots are non-const accessors; they only read here.
  FlintWeights& weights = const_cast<FlintWeights&>(src.weights);
  for (const auto& t : flint_gguf_tensors(c)) {
    const std::string name = t.base + t.suffix;
    const int64_t n_mats = t.stacked_experts ? t.shape[0] : 1;
    // Fill callbacks run later, in write(): capture the slot accessor by value.
    auto view = [&weights, slot = t.slot](int64_t e) -> const WeightView& { return slot(weights, e); };
    if (t.role == GgufRole::Linear) {
      if (t.shape.back() % nvfp4::kBlockWeights != 0)
        throw Error("quantize: tensor '" + name + "' has in = " + std::to_string(t.shape.back()) + ", not a multiple of 64");
      auto scales = std::make_shared<std::vector<float>>(size_t(n_mats));
      for (int64_t e = 0; e < n_mats; ++e) (*scales)[size_t(e)] = nvfp4::global_scale_for_amax(amax_of(view(e)));
      w.add_tensor(name, 40, reversed(t.shape), [view, n_mats, scales](std::byte* dst, size_t nbytes) {
        const size_t per = nbytes / size_t(n_mats);
        for (int64_t e = 0; e < n_mats; ++e) quantize_matrix(view(e), (*scales)[size_t(e)], dst + size_t(e) * per);
      });
      w.add_tensor(t.base + ".scale", 0, {n_mats}, [scales](std::byte* dst, size_t nbytes) {
        std::memcpy(dst, scales->data(), nbytes);
      });
    } else if (t.role == GgufRole::Embedding) {
      w.add_tensor(name, 30, reversed(t.shape), [view](std::byte* dst, size_t nbytes) {
        const WeightView& v = view(0);
        for (int64_t i = 0; i < v.numel(); ++i) {
          uint16_t b = float_to_bf16(element(v, i)).bits;  // exact for a BF16 source
          std::memcpy(dst + 2 * i, &b, 2);
        }
        (void)nbytes;
      });
    } else {  // norms, sinks, router, bias: F32
      w.add_tensor(name, 0, reversed(t.shape), [view](std::byte* dst, size_t) {
        const WeightView& v = view(0);
        for (int64_t i = 0; i < v.numel(); ++i) {
          float f = element(v, i);
          std::memcpy(dst + 4 * i, &f, 4);
        }
      });
    }
  }
  w.write(out_path);
}

}  // namespace striker
