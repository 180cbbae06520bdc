#include "backends/cuda/device_model.h"

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstring>
#include <string>
#include <utility>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/elementwise.h"
#include "core/error.h"

namespace striker::cuda {
namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

void expect_shape(const WeightView& w, std::vector<int64_t> shape) {
  if (w.empty()) throw Error("CUDA backend: tensor " + w.name + " is missing");
  if (w.shape != shape)
    throw Error("CUDA backend: tensor " + w.name + " has shape " + shape_str(w.shape) + ", expected " +
                shape_str(shape));
}

// Linear weights must be BF16 here (the kernels read bf16 directly).
void expect_bf16(const WeightView& w) {
  if (w.dtype == DType::NVFP4)
    throw Error("CUDA backend: tensor " + w.name + " is NVFP4, which the CUDA backend does not run yet");
  if (w.dtype != DType::BF16)
    throw Error("CUDA backend: tensor " + w.name + " must be BF16, got " + std::string(dtype_name(w.dtype)));
}

// Norm weights, sinks, router, bias: BF16 / F16 / F32 converted exactly to fp32.
std::vector<float> to_f32(const WeightView& w) {
  std::vector<float> out(size_t(w.numel()));
  for (size_t i = 0; i < out.size(); ++i) {
    switch (w.dtype) {
      case DType::BF16: {
        bf16 v;
        std::memcpy(&v.bits, w.data + 2 * i, 2);
        out[i] = bf16_to_float(v);
        break;
      }
      case DType::F16: {
        uint16_t v;
        std::memcpy(&v, w.data + 2 * i, 2);
        out[i] = f16_to_float(v);
        break;
      }
      case DType::F32: std::memcpy(&out[i], w.data + 4 * i, 4); break;
      default:
        throw Error("CUDA backend: tensor " + w.name + " has unsupported dtype " + std::string(dtype_name(w.dtype)));
    }
  }
  return out;
}

void copy_to_device(void* dst, const void* src, size_t bytes) {
  STRIKER_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
}

}  // namespace

template <typename T>
T* DeviceModel::alloc(int64_t count) {
  void* p = nullptr;
  const size_t bytes_needed = size_t(count) * sizeof(T);
  const cudaError_t err = cudaMalloc(&p, bytes_needed);
  if (err != cudaSuccess)
    throw Error("CUDA backend: cannot allocate " + std::to_string(bytes_needed >> 20) + " MiB for weights (" +
                std::to_string(bytes >> 30) + " GiB already held): " + cudaGetErrorString(err));
  allocations_.push_back(p);
  bytes += int64_t(bytes_needed);
  return static_cast<T*>(p);
}

DeviceModel::~DeviceModel() {
  for (void* p : allocations_) cudaFree(p);
}

DeviceModel::DeviceModel(DeviceModel&& o) noexcept { *this = std::move(o); }

DeviceModel& DeviceModel::operator=(DeviceModel&& o) noexcept {
  std::swap(config, o.config);
  std::swap(embed, o.embed);
  std::swap(final_norm, o.final_norm);
  std::swap(lm_head, o.lm_head);
  std::swap(layers, o.layers);
  std::swap(bytes, o.bytes);
  std::swap(allocations_, o.allocations_);
  return *this;
}

DeviceModel DeviceModel::upload(const LoadedModel& model) {
  DeviceModel m;
  const FlintConfig& c = model.config;
  m.config = c;
  const int64_t H = c.hidden_size, V = c.vocab_size, d = c.head_dim, nh = c.num_attention_heads,
                nkv = c.num_key_value_heads, E = c.n_routed_experts, I = c.moe_intermediate_size,
                Is = c.shared_expert_intermediate_size, Id = c.intermediate_size;
  const FlintWeights& w = model.weights;
  auto linear = [&](const WeightView& v, int64_t rows, int64_t cols, bf16* dst) {
    expect_shape(v, {rows, cols});
    expect_bf16(v);
    copy_to_device(dst, v.data, size_t(rows * cols) * 2);
  };
  auto vec = [&](const WeightView& v, int64_t n) {
    expect_shape(v, {n});
    const auto f = to_f32(v);
    float* p = m.alloc<float>(n);
    copy_to_device(p, f.data(), size_t(n) * 4);
    return p;
  };
  m.embed = m.alloc<bf16>(V * H);
  linear(w.embed, V, H, m.embed);
  m.lm_head = m.alloc<bf16>(V * H);
  linear(w.lm_head, V, H, m.lm_head);
  m.final_norm = vec(w.final_norm, H);
  if (int64_t(w.layers.size()) != c.num_hidden_layers)
    throw Error("CUDA backend: checkpoint has " + std::to_string(w.layers.size()) + " layers, config says " +
                std::to_string(c.num_hidden_layers));
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const LayerWeights& lw = w.layers[size_t(l)];
    DeviceLayer dl;
    dl.input_norm = vec(lw.input_norm, H);
    dl.post_norm = vec(lw.post_attn_norm, H);
    dl.q_norm = vec(lw.q_norm, d);
    dl.k_norm = vec(lw.k_norm, d);
    if (c.attention_sinks) dl.sinks = vec(lw.sinks, nh);
    dl.wqkv = m.alloc<bf16>((nh + 2 * nkv) * d * H);
    linear(lw.q_proj, nh * d, H, dl.wqkv);
    linear(lw.k_proj, nkv * d, H, dl.wqkv + nh * d * H);
    linear(lw.v_proj, nkv * d, H, dl.wqkv + (nh + nkv) * d * H);
    dl.wo = m.alloc<bf16>(H * nh * d);
    linear(lw.o_proj, H, nh * d, dl.wo);
    if (c.is_dense_layer(l)) {
      dl.gate = m.alloc<bf16>(Id * H);
      dl.up = m.alloc<bf16>(Id * H);
      dl.down = m.alloc<bf16>(H * Id);
      linear(lw.dense.gate, Id, H, dl.gate);
      linear(lw.dense.up, Id, H, dl.up);
      linear(lw.dense.down, H, Id, dl.down);
    } else {
      expect_shape(lw.router, {E, H});
      const auto r = to_f32(lw.router);
      dl.router_f32 = m.alloc<float>(E * H);
      copy_to_device(dl.router_f32, r.data(), r.size() * 4);
      dl.router_bias = vec(lw.router_bias, E);
      if (int64_t(lw.experts.size()) != E)
        throw Error("CUDA backend: layer " + std::to_string(l) + " has " + std::to_string(lw.experts.size()) +
                    " experts, config says " + std::to_string(E));
      dl.exp_gate = m.alloc<bf16>(E * I * H);
      dl.exp_up = m.alloc<bf16>(E * I * H);
      dl.exp_down = m.alloc<bf16>(E * H * I);
      for (int64_t e = 0; e < E; ++e) {
        linear(lw.experts[size_t(e)].gate, I, H, dl.exp_gate + e * I * H);
        linear(lw.experts[size_t(e)].up, I, H, dl.exp_up + e * I * H);
        linear(lw.experts[size_t(e)].down, H, I, dl.exp_down + e * H * I);
      }
      if (c.n_shared_experts > 0) {
        dl.sh_gate = m.alloc<bf16>(Is * H);
        dl.sh_up = m.alloc<bf16>(Is * H);
        dl.sh_down = m.alloc<bf16>(H * Is);
        linear(lw.shared.gate, Is, H, dl.sh_gate);
        linear(lw.shared.up, Is, H, dl.sh_up);
        linear(lw.shared.down, H, Is, dl.sh_down);
      }
    }
    m.layers.push_back(dl);
  }
  return m;
}

DeviceModel DeviceModel::random(const FlintConfig& c, uint64_t seed, WeightFormat format) {
  if (format != WeightFormat::bf16)
    throw Error("--load-format dummy: random NVFP4 weights are not available in the CUDA backend yet");
  DeviceModel m;
  m.config = c;
  const int64_t H = c.hidden_size, V = c.vocab_size, d = c.head_dim, nh = c.num_attention_heads,
                nkv = c.num_key_value_heads, E = c.n_routed_experts, I = c.moe_intermediate_size,
                Is = c.shared_expert_intermediate_size, Id = c.intermediate_size;
  uint64_t stream_id = seed * 1000003ull;
  auto mat = [&](int64_t n, float std) {
    bf16* p = m.alloc<bf16>(n);
    fill_random_bf16(p, n, ++stream_id, 0.f, std, nullptr);
    return p;
  };
  auto vecf = [&](int64_t n, float mean, float std) {
    float* p = m.alloc<float>(n);
    fill_random_f32(p, n, ++stream_id, mean, std, nullptr);
    return p;
  };
  const float in_std = 1.0f / std::sqrt(float(H));
  m.embed = mat(V * H, 1.0f);
  m.lm_head = mat(V * H, in_std);
  m.final_norm = vecf(H, 1.f, 0.1f);
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    DeviceLayer dl;
    dl.input_norm = vecf(H, 1.f, 0.1f);
    dl.post_norm = vecf(H, 1.f, 0.1f);
    dl.q_norm = vecf(d, 1.f, 0.1f);
    dl.k_norm = vecf(d, 1.f, 0.1f);
    if (c.attention_sinks) dl.sinks = vecf(nh, 0.f, 1.f);
    dl.wqkv = mat((nh + 2 * nkv) * d * H, in_std);
    dl.wo = mat(H * nh * d, 0.2f / std::sqrt(float(nh * d)));
    if (c.is_dense_layer(l)) {
      dl.gate = mat(Id * H, in_std);
      dl.up = mat(Id * H, in_std);
      dl.down = mat(H * Id, 0.2f / std::sqrt(float(Id)));
    } else {
      dl.router_bf16 = mat(E * H, in_std);
      dl.router_bias = vecf(E, 0.f, 0.01f);
      dl.exp_gate = mat(E * I * H, in_std);
      dl.exp_up = mat(E * I * H, in_std);
      dl.exp_down = mat(E * H * I, 0.2f / std::sqrt(float(I)));
      if (c.n_shared_experts > 0) {
        dl.sh_gate = mat(Is * H, in_std);
        dl.sh_up = mat(Is * H, in_std);
        dl.sh_down = mat(H * Is, 0.2f / std::sqrt(float(Is)));
      }
    }
    m.layers.push_back(dl);
  }
  STRIKER_CUDA_CHECK(cudaDeviceSynchronize());
  return m;
}

}  // namespace striker::cuda
