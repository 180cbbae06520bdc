#include "backends/cuda/backend/device_model.h"

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstring>
#include <string>
#include <utility>

#include "backends/cuda/common/cuda_check.h"
#include "backends/cuda/elementwise/elementwise.h"
#include "backends/cuda/nvfp4/nvfp4_scales.h"
#include "core/error.h"
#include "model/nvfp4.h"

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

// A BF16 linear weight (the BF16 kernels read bf16 directly; F16/F32 linear weights are not run).
void expect_bf16(const WeightView& w) {
  if (w.dtype != DType::BF16)
    throw Error("CUDA backend: tensor " + w.name + " must be BF16, got " + std::string(dtype_name(w.dtype)));
}

bool is_nvfp4(const WeightView& w) { return w.dtype == DType::NVFP4; }

void expect_nvfp4(const WeightView& w) {
  if (w.cols() % 64 != 0)
    throw Error("CUDA backend: tensor " + w.name + " is NVFP4 with in = " + std::to_string(w.cols()) +
                ", not a multiple of 64");
  if (w.nvfp4_scales == nullptr || w.nbytes != size_t(w.rows() * w.cols() / 2))
    throw Error("CUDA backend: tensor " + w.name + " is NVFP4 without split-layout codes and scales");
  if (!std::isfinite(w.scale2)) throw Error("CUDA backend: tensor " + w.name + " has a non-finite global scale");
}

// The kernels need one format per group (see device_model.h); names the first odd one out.
void expect_same_format(const std::string& what, const std::vector<const WeightView*>& ws) {
  for (const WeightView* v : ws) {
    if (v->empty()) throw Error("CUDA backend: tensor " + v->name + " is missing");
    if (is_nvfp4(*v) != is_nvfp4(*ws[0]))
      throw Error(what + " mix NVFP4 and BF16 (" + ws[0]->name + " is " + std::string(dtype_name(ws[0]->dtype)) +
                  ", " + v->name + " is " + std::string(dtype_name(v->dtype)) +
                  "), which the CUDA backend does not run");
  }
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
  std::swap(nv_lm_head, o.nv_lm_head);
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
  // NVFP4 codes/scales of one [rows, cols] weight into `dst` at row `row0` (dst has `cols` columns).
  auto nv_copy = [&](const WeightView& v, int64_t rows, int64_t cols, Nvfp4Linear& dst, int64_t row0) {
    expect_shape(v, {rows, cols});
    expect_nvfp4(v);
    copy_to_device(dst.codes + row0 * cols / 2, v.data, size_t(rows * cols / 2));
    nvfp4_upload_scales(dst.scales + row0 * cols / 16, reinterpret_cast<const uint8_t*>(v.nvfp4_scales),
                        size_t(rows * cols / 16));  // canonical: nvfp4_scales.h
  };
  auto nv_alloc = [&](int64_t rows, int64_t cols) {
    Nvfp4Linear l;
    l.codes = m.alloc<uint8_t>(rows * cols / 2);
    l.scales = m.alloc<uint8_t>(rows * cols / 16);
    return l;
  };
  // One linear weight in whichever format the checkpoint has.
  auto any_linear = [&](const WeightView& v, int64_t rows, int64_t cols, bf16*& bf, Nvfp4Linear& nv) {
    if (is_nvfp4(v)) {
      nv = nv_alloc(rows, cols);
      nv_copy(v, rows, cols, nv, 0);
      nv.scale2 = RowScale2::uniform(v.scale2);
    } else {
      bf = m.alloc<bf16>(rows * cols);
      linear(v, rows, cols, bf);
    }
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
  any_linear(w.lm_head, V, H, m.lm_head, m.nv_lm_head);
  m.final_norm = vec(w.final_norm, H);
  if (int64_t(w.layers.size()) != c.num_hidden_layers)
    throw Error("CUDA backend: checkpoint has " + std::to_string(w.layers.size()) + " layers, config says " +
                std::to_string(c.num_hidden_layers));
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const LayerWeights& lw = w.layers[size_t(l)];
    const std::string where = "CUDA backend: layer " + std::to_string(l) + ": ";
    DeviceLayer dl;
    dl.input_norm = vec(lw.input_norm, H);
    dl.post_norm = vec(lw.post_attn_norm, H);
    dl.q_norm = vec(lw.q_norm, d);
    dl.k_norm = vec(lw.k_norm, d);
    if (c.attention_sinks) dl.sinks = vec(lw.sinks, nh);
    expect_same_format(where + "q/k/v projections", {&lw.q_proj, &lw.k_proj, &lw.v_proj});
    if (is_nvfp4(lw.q_proj)) {  // one q|k|v matrix, scale2 per row range
      dl.nv_qkv = nv_alloc((nh + 2 * nkv) * d, H);
      nv_copy(lw.q_proj, nh * d, H, dl.nv_qkv, 0);
      nv_copy(lw.k_proj, nkv * d, H, dl.nv_qkv, nh * d);
      nv_copy(lw.v_proj, nkv * d, H, dl.nv_qkv, (nh + nkv) * d);
      dl.nv_qkv.scale2 =
          RowScale2{int(nh * d), int((nh + nkv) * d), {lw.q_proj.scale2, lw.k_proj.scale2, lw.v_proj.scale2}};
    } else {
      dl.wqkv = m.alloc<bf16>((nh + 2 * nkv) * d * H);
      linear(lw.q_proj, nh * d, H, dl.wqkv);
      linear(lw.k_proj, nkv * d, H, dl.wqkv + nh * d * H);
      linear(lw.v_proj, nkv * d, H, dl.wqkv + (nh + nkv) * d * H);
    }
    any_linear(lw.o_proj, H, nh * d, dl.wo, dl.nv_o);
    if (c.is_dense_layer(l)) {
      any_linear(lw.dense.gate, Id, H, dl.gate, dl.nv_gate);
      any_linear(lw.dense.up, Id, H, dl.up, dl.nv_up);
      any_linear(lw.dense.down, H, Id, dl.down, dl.nv_down);
    } else {
      expect_shape(lw.router, {E, H});
      const auto r = to_f32(lw.router);
      dl.router_f32 = m.alloc<float>(E * H);
      copy_to_device(dl.router_f32, r.data(), r.size() * 4);
      dl.router_bias = vec(lw.router_bias, E);
      if (int64_t(lw.experts.size()) != E)
        throw Error("CUDA backend: layer " + std::to_string(l) + " has " + std::to_string(lw.experts.size()) +
                    " experts, config says " + std::to_string(E));
      std::vector<const WeightView*> routed;
      for (const auto& ex : lw.experts) routed.insert(routed.end(), {&ex.gate, &ex.up, &ex.down});
      expect_same_format(where + "routed experts' gate/up/down", routed);
      const bool routed_nv = is_nvfp4(lw.experts[0].gate);
      if (routed_nv) {
        auto stack = [&](int64_t rows, int64_t cols, Nvfp4Experts& dst, const WeightView MlpWeights::*which) {
          dst.codes = m.alloc<uint8_t>(E * rows * cols / 2);
          dst.scales = m.alloc<uint8_t>(E * rows * cols / 16);
          dst.scale2 = m.alloc<float>(E);
          dst.scale2_host.resize(size_t(E));
          for (int64_t e = 0; e < E; ++e) {
            Nvfp4Linear view{dst.codes, dst.scales, {}};
            nv_copy(lw.experts[size_t(e)].*which, rows, cols, view, e * rows);
            dst.scale2_host[size_t(e)] = (lw.experts[size_t(e)].*which).scale2;
          }
          copy_to_device(dst.scale2, dst.scale2_host.data(), size_t(E) * 4);
        };
        stack(I, H, dl.nv_exp_gate, &MlpWeights::gate);
        stack(I, H, dl.nv_exp_up, &MlpWeights::up);
        stack(H, I, dl.nv_exp_down, &MlpWeights::down);
      } else {
        dl.exp_gate = m.alloc<bf16>(E * I * H);
        dl.exp_up = m.alloc<bf16>(E * I * H);
        dl.exp_down = m.alloc<bf16>(E * H * I);
        for (int64_t e = 0; e < E; ++e) {
          linear(lw.experts[size_t(e)].gate, I, H, dl.exp_gate + e * I * H);
          linear(lw.experts[size_t(e)].up, I, H, dl.exp_up + e * I * H);
          linear(lw.experts[size_t(e)].down, H, I, dl.exp_down + e * H * I);
        }
      }
      if (c.n_shared_experts > 0) {
        expect_same_format(where + "shared expert's gate/up/down", {&lw.shared.gate, &lw.shared.up, &lw.shared.down});
        if (is_nvfp4(lw.shared.gate) && !routed_nv)
          throw Error(where + "an NVFP4 shared expert (" + lw.shared.gate.name +
                      ") beside BF16 routed experts is not supported by the CUDA backend");
        any_linear(lw.shared.gate, Is, H, dl.sh_gate, dl.nv_sh_gate);
        any_linear(lw.shared.up, Is, H, dl.sh_up, dl.nv_sh_up);
        any_linear(lw.shared.down, H, Is, dl.sh_down, dl.nv_sh_down);
      }
    }
    m.layers.push_back(dl);
  }
  return m;
}

DeviceModel DeviceModel::random(const FlintConfig& c, uint64_t seed, WeightFormat format) {
  DeviceModel m;
  m.config = c;
  const int64_t H = c.hidden_size, V = c.vocab_size, d = c.head_dim, nh = c.num_attention_heads,
                nkv = c.num_key_value_heads, E = c.n_routed_experts, I = c.moe_intermediate_size,
                Is = c.shared_expert_intermediate_size, Id = c.intermediate_size;
  const bool nv = format == WeightFormat::nvfp4;
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
  // Random NVFP4 codes/scales with the same std as the BF16 dummy's weight (scale2 chosen by
  // nvfp4::random_weight_scale); `rows` may span several stacked experts.
  auto nv_fill = [&](uint8_t*& codes, uint8_t*& scales, int64_t rows, int64_t cols, float std) {
    codes = m.alloc<uint8_t>(rows * cols / 2);
    scales = m.alloc<uint8_t>(rows * cols / 16);
    const auto pick = nvfp4::random_weight_scale(std);
    nvfp4_fill_random(codes, scales, rows, int(cols), ++stream_id, pick.scale_lo, pick.scale_hi, nullptr);
    return pick.scale2;
  };
  // One linear weight [rows, cols] in the requested format.
  auto linear = [&](int64_t rows, int64_t cols, float std, bf16*& bf, Nvfp4Linear& q) {
    if (!nv) {
      bf = mat(rows * cols, std);
      return;
    }
    q.scale2 = RowScale2::uniform(nv_fill(q.codes, q.scales, rows, cols, std));
  };
  auto experts = [&](int64_t rows, int64_t cols, float std, bf16*& bf, Nvfp4Experts& q) {
    if (!nv) {
      bf = mat(E * rows * cols, std);
      return;
    }
    const float s2 = nv_fill(q.codes, q.scales, E * rows, cols, std);
    q.scale2_host.assign(size_t(E), s2);
    q.scale2 = m.alloc<float>(E);
    copy_to_device(q.scale2, q.scale2_host.data(), size_t(E) * 4);
  };
  const float in_std = 1.0f / std::sqrt(float(H));
  m.embed = mat(V * H, 1.0f);
  linear(V, H, in_std, m.lm_head, m.nv_lm_head);
  m.final_norm = vecf(H, 1.f, 0.1f);
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    DeviceLayer dl;
    dl.input_norm = vecf(H, 1.f, 0.1f);
    dl.post_norm = vecf(H, 1.f, 0.1f);
    dl.q_norm = vecf(d, 1.f, 0.1f);
    dl.k_norm = vecf(d, 1.f, 0.1f);
    if (c.attention_sinks) dl.sinks = vecf(nh, 0.f, 1.f);
    linear((nh + 2 * nkv) * d, H, in_std, dl.wqkv, dl.nv_qkv);
    if (nv) {  // the three row ranges a real checkpoint has (same value here: one std for all three)
      const float s2 = dl.nv_qkv.scale2.s[0];
      dl.nv_qkv.scale2 = RowScale2{int(nh * d), int((nh + nkv) * d), {s2, s2, s2}};
    }
    linear(H, nh * d, 0.2f / std::sqrt(float(nh * d)), dl.wo, dl.nv_o);
    if (c.is_dense_layer(l)) {
      linear(Id, H, in_std, dl.gate, dl.nv_gate);
      linear(Id, H, in_std, dl.up, dl.nv_up);
      linear(H, Id, 0.2f / std::sqrt(float(Id)), dl.down, dl.nv_down);
    } else {
      dl.router_bf16 = mat(E * H, in_std);
      dl.router_bias = vecf(E, 0.f, 0.01f);
      experts(I, H, in_std, dl.exp_gate, dl.nv_exp_gate);
      experts(I, H, in_std, dl.exp_up, dl.nv_exp_up);
      experts(H, I, 0.2f / std::sqrt(float(I)), dl.exp_down, dl.nv_exp_down);
      if (c.n_shared_experts > 0) {
        linear(Is, H, in_std, dl.sh_gate, dl.nv_sh_gate);
        linear(Is, H, in_std, dl.sh_up, dl.nv_sh_up);
        linear(H, Is, 0.2f / std::sqrt(float(Is)), dl.sh_down, dl.nv_sh_down);
      }
    }
    m.layers.push_back(dl);
  }
  STRIKER_CUDA_CHECK(cudaDeviceSynchronize());
  return m;
}

}  // namespace striker::cuda
