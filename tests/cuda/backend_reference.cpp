// The CudaBackend tests' host reference and checks (backend_reference.h).
#include "backend_reference.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>

#include "backends/cuda/attention/attention.h"
#include "backends/cuda/backend/cuda_backend.h"
#include "backends/cuda/linear/gemv.h"
#include "backends/cuda/moe/moe.h"
#include "backends/cuda/attention/qk_rope_kv.h"
#include "backends/cuda/elementwise/rmsnorm.h"
#include "backends/cuda/moe/router.h"
#include "cuda_test_util.h"

namespace striker::cuda::testing {
namespace {

std::vector<bf16> as_bf16(const WeightView& w) {
  const auto* p = reinterpret_cast<const bf16*>(w.data);
  return std::vector<bf16>(p, p + w.numel());
}
std::vector<float> as_f32(const WeightView& w) {
  const auto* p = reinterpret_cast<const float*>(w.data);
  return std::vector<float>(p, p + w.numel());
}

std::vector<bf16> rounded_bf16(const std::vector<float>& v) {
  std::vector<bf16> r(v.size());
  for (size_t i = 0; i < v.size(); ++i) r[i] = float_to_bf16(v[i]);
  return r;
}

}  // namespace

FlintConfig small_config() {
  FlintConfig c;
  c.vocab_size = 4099;
  c.hidden_size = 256;
  c.num_hidden_layers = 5;
  c.num_attention_heads = 8;
  c.num_key_value_heads = 1;
  c.head_dim = 32;
  c.intermediate_size = 512;
  c.moe_intermediate_size = 64;
  c.shared_expert_intermediate_size = 64;
  c.n_routed_experts = 16;
  c.n_shared_experts = 1;
  c.num_experts_per_tok = 6;
  c.first_k_dense_replace = 2;
  c.norm_topk_prob = true;
  c.routed_scaling_factor = 2.5f;
  c.sliding_window = 17;
  c.layer_types = {LayerType::Sliding, LayerType::Full, LayerType::Sliding, LayerType::Sliding, LayerType::Full};
  c.rope_theta = 10000.f;
  c.rms_norm_eps = 1e-6f;
  c.max_position_embeddings = 4096;
  return c;
}

HostModel make_host_model(const FlintConfig& c) {
  HostModel hm;
  hm.model.config = c;
  const int64_t H = c.hidden_size, d = c.head_dim, nh = c.num_attention_heads, nkv = c.num_key_value_heads;
  const float s = 1.f / std::sqrt(float(H));
  auto& w = hm.model.weights;
  w.embed = hm.bf16_tensor("embed", {c.vocab_size, H}, 1.f);
  w.lm_head = hm.bf16_tensor("lm_head", {c.vocab_size, H}, s);
  w.final_norm = hm.f32_tensor("final_norm", H, 1.f, 0.1f);
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    LayerWeights lw;
    const std::string p = "layer" + std::to_string(l) + ".";
    lw.input_norm = hm.f32_tensor(p + "input_norm", H, 1.f, 0.1f);
    lw.post_attn_norm = hm.f32_tensor(p + "post_norm", H, 1.f, 0.1f);
    lw.q_norm = hm.f32_tensor(p + "q_norm", d, 1.f, 0.1f);
    lw.k_norm = hm.f32_tensor(p + "k_norm", d, 1.f, 0.1f);
    lw.sinks = hm.f32_tensor(p + "sinks", nh, 0.f, 1.f);
    lw.q_proj = hm.bf16_tensor(p + "q", {nh * d, H}, s);
    lw.k_proj = hm.bf16_tensor(p + "k", {nkv * d, H}, s);
    lw.v_proj = hm.bf16_tensor(p + "v", {nkv * d, H}, s);
    lw.o_proj = hm.bf16_tensor(p + "o", {H, nh * d}, 0.2f / std::sqrt(float(nh * d)));
    if (c.is_dense_layer(l)) {
      const int64_t I = c.intermediate_size;
      lw.dense = {hm.bf16_tensor(p + "gate", {I, H}, s), hm.bf16_tensor(p + "up", {I, H}, s),
                  hm.bf16_tensor(p + "down", {H, I}, 0.2f / std::sqrt(float(I)))};
    } else {
      const int64_t I = c.moe_intermediate_size, Is = c.shared_expert_intermediate_size;
      lw.router = hm.f32_tensor(p + "router", c.n_routed_experts * H, 0.f, s);
      lw.router.shape = {c.n_routed_experts, H};
      lw.router_bias = hm.f32_tensor(p + "bias", c.n_routed_experts, 0.f, 0.05f);
      for (int64_t e = 0; e < c.n_routed_experts; ++e)
        lw.experts.push_back({hm.bf16_tensor(p + "eg", {I, H}, s), hm.bf16_tensor(p + "eu", {I, H}, s),
                              hm.bf16_tensor(p + "ed", {H, I}, 0.2f / std::sqrt(float(I)))});
      lw.shared = {hm.bf16_tensor(p + "sg", {Is, H}, s), hm.bf16_tensor(p + "su", {Is, H}, s),
                   hm.bf16_tensor(p + "sd", {H, Is}, 0.2f / std::sqrt(float(Is)))};
    }
    w.layers.push_back(std::move(lw));
  }
  return hm;
}

std::vector<float> reference_logits(const LoadedModel& m, const std::vector<int32_t>& tokens) {
  const FlintConfig& c = m.config;
  const int N = int(tokens.size()), H = int(c.hidden_size), d = int(c.head_dim), nh = int(c.num_attention_heads),
            nkv = int(c.num_key_value_heads), K = int(c.num_experts_per_tok), B = 16;
  const auto& w = m.weights;
  const auto embed = as_bf16(w.embed);
  std::vector<bf16> h(size_t(N) * H);
  for (int t = 0; t < N; ++t)
    std::copy_n(&embed[size_t(tokens[size_t(t)]) * H], H, &h[size_t(t) * H]);
  std::vector<int32_t> positions(static_cast<size_t>(N)), offsets(static_cast<size_t>(N), 0);
  std::vector<int32_t> table(static_cast<size_t>((N + B - 1) / B));
  std::iota(positions.begin(), positions.end(), 0);
  std::iota(table.begin(), table.end(), 0);
  std::vector<int64_t> slots(positions.begin(), positions.end());
  const auto inv = rope_inv_freq(c.rope_theta, d);
  const HeadShape hs{nh, nkv, d};
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const LayerWeights& L = w.layers[size_t(l)];
    const bool sliding = c.is_sliding_layer(l);
    std::vector<bf16> x, qkv_all(size_t(N) * (nh + 2 * nkv) * d);
    rmsnorm_ref(h, as_f32(L.input_norm), x, N, H, c.rms_norm_eps);
    std::vector<float> q, k, v;
    gemv_ref(x, N, H, as_bf16(L.q_proj), nh * d, q);
    gemv_ref(x, N, H, as_bf16(L.k_proj), nkv * d, k);
    gemv_ref(x, N, H, as_bf16(L.v_proj), nkv * d, v);
    for (int t = 0; t < N; ++t) {
      bf16* dst = &qkv_all[size_t(t) * (nh + 2 * nkv) * d];
      for (int i = 0; i < nh * d; ++i) dst[i] = float_to_bf16(q[size_t(t) * nh * d + i]);
      for (int i = 0; i < nkv * d; ++i) dst[nh * d + i] = float_to_bf16(k[size_t(t) * nkv * d + i]);
      for (int i = 0; i < nkv * d; ++i) dst[(nh + nkv) * d + i] = float_to_bf16(v[size_t(t) * nkv * d + i]);
    }
    std::vector<bf16> kc(table.size() * size_t(nkv * B * d)), vc(kc.size()), qo, o;
    qk_norm_rope_kv_write_ref(qkv_all, N, hs, as_f32(L.q_norm), as_f32(L.k_norm), c.rms_norm_eps, positions,
                              sliding ? &inv : nullptr, slots, B, kc, vc, qo);
    const auto sinks = as_f32(L.sinks);
    paged_attention_ref(qo, kc, vc, &sinks, AttentionShape{nh, nkv, d, B, sliding ? int(c.sliding_window) : 0},
                        positions, offsets, table, o);
    std::vector<float> proj;
    gemv_ref(o, N, nh * d, as_bf16(L.o_proj), H, proj);
    for (size_t i = 0; i < h.size(); ++i) h[i] = float_to_bf16(bf16_to_float(h[i]) + round_bf16(proj[i]));
    rmsnorm_ref(h, as_f32(L.post_attn_norm), x, N, H, c.rms_norm_eps);
    if (c.is_dense_layer(l)) {
      const int I = int(c.intermediate_size);
      std::vector<bf16> act;
      gate_up_ref(x, N, H, as_bf16(L.dense.gate), as_bf16(L.dense.up), I, act);
      std::vector<float> y;
      gemv_ref(act, N, I, as_bf16(L.dense.down), H, y);
      for (size_t i = 0; i < h.size(); ++i) h[i] = float_to_bf16(bf16_to_float(h[i]) + round_bf16(y[i]));
    } else {
      const RouterShape rs{H, int(c.n_routed_experts), K, c.norm_topk_prob, c.routed_scaling_factor};
      std::vector<int32_t> ids;
      std::vector<float> tw;
      const auto bias = as_f32(L.router_bias);
      router_topk_ref(x, N, rs, as_f32(L.router), &bias, ids, tw);
      const int E = int(c.n_routed_experts), I = int(c.moe_intermediate_size);
      std::vector<bf16> g, u, dn;
      for (int e = 0; e < E; ++e) {
        auto ge = as_bf16(L.experts[size_t(e)].gate), ue = as_bf16(L.experts[size_t(e)].up),
             de = as_bf16(L.experts[size_t(e)].down);
        g.insert(g.end(), ge.begin(), ge.end());
        u.insert(u.end(), ue.begin(), ue.end());
        dn.insert(dn.end(), de.begin(), de.end());
      }
      const auto sg = as_bf16(L.shared.gate), su = as_bf16(L.shared.up), sd = as_bf16(L.shared.down);
      moe_ref(x, N, H, I, int(c.shared_expert_intermediate_size), MoeRefWeights{&g, &u, &dn, &sg, &su, &sd}, ids, tw,
              K, h);
    }
  }
  std::vector<bf16> xf;
  rmsnorm_ref(h, as_f32(w.final_norm), xf, N, H, c.rms_norm_eps);
  std::vector<float> logits;
  gemv_ref(xf, N, H, as_bf16(w.lm_head), int(c.vocab_size), logits);
  for (auto& v : logits) v = round_bf16(v);
  return logits;
}

RowDiff diff_row(const float* got, const float* ref, int64_t V) {
  auto logsumexp = [V](const float* x) {
    const double m = *std::max_element(x, x + V);
    double s = 0;
    for (int64_t i = 0; i < V; ++i) s += std::exp(double(x[i]) - m);
    return m + std::log(s);
  };
  const double lg = logsumexp(got), lr = logsumexp(ref);
  double md = 0;
  for (int64_t i = 0; i < V; ++i) {
    if (!std::isfinite(got[i])) return {1e30, false};
    md = std::max(md, std::fabs((got[i] - lg) - (ref[i] - lr)));
  }
  return {md, std::max_element(got, got + V) - got == std::max_element(ref, ref + V) - ref};
}

namespace {
// Prints the rows' median / worst max|dlogprob| and argmax agreement, and requires median < 0.05,
// worst < 0.5 and >= 90 % argmax agreement (the backend-vs-reference tolerance).
void expect_rows_close(const std::vector<RowDiff>& diffs, const std::string& what) {
  ASSERT_FALSE(diffs.empty()) << what;
  std::vector<double> md;
  int agree = 0;
  for (const auto& dr : diffs) {
    md.push_back(dr.max_dlogprob);
    agree += dr.same_argmax;
  }
  std::sort(md.begin(), md.end());
  const double median = md[md.size() / 2], worst = md.back();
  std::printf("backend vs reference, %s: %zu rows, median max|dlogprob| %.4f, worst %.4f, argmax agree %d/%zu\n",
              what.c_str(), md.size(), median, worst, agree, diffs.size());
  EXPECT_LT(median, 0.05) << what;
  EXPECT_LT(worst, 0.5) << what;
  EXPECT_GE(agree, int(diffs.size() * 9 / 10)) << what;
}
}  // namespace

void expect_backend_matches_reference(const LoadedModel& device_model, const LoadedModel& ref_model,
                                      int one_token_step_kernels, int block_size) {
  const FlintConfig& c = device_model.config;
  const int B = block_size, N = 60, N2 = 40;
  // Physical blocks shuffled (blocks of 16: 4 per sequence; of 32 and more the first ones of these
  // lists); the sliding pool is a ring of 4 blocks per sequence (window 17 spans at most 3 logical
  // blocks), older logical blocks are -1 (freed).
  std::mt19937 rng(5);
  std::vector<int32_t> full_a = {9, 3, 14, 0}, full_b = {7, 1, 12, 5};
  auto sliding_table = [&](int ring_base, int64_t last_pos, int64_t first_needed) {
    std::vector<int32_t> t;
    for (int64_t b = 0; b <= last_pos / B; ++b)
      t.push_back(b < first_needed / B ? -1 : int32_t(ring_base + b % 4));
    return t;
  };
  std::vector<int32_t> toks_a(static_cast<size_t>(N)), toks_b(static_cast<size_t>(N2));
  for (auto& t : toks_a) t = int32_t(rng() % c.vocab_size);
  for (auto& t : toks_b) t = int32_t(rng() % c.vocab_size);
  const auto ref_a = reference_logits(ref_model, toks_a);
  const auto ref_b = reference_logits(ref_model, toks_b);

  std::vector<std::vector<float>> step_logits[2];  // every step's logits, stream launches then graphs
  for (bool graphs : {false, true}) {
    SCOPED_TRACE(graphs ? "CUDA graph replay" : "stream launches");
    CudaBackendOptions options{256, 64, 1 << 16, graphs};
    options.max_captured_graphs = 1;  // every new step shape destroys the graph just launched (still in flight)
    auto backend = make_cuda_backend(device_model, options);
    backend->allocate_kv_cache(KvCacheSpec{B, 16, 8});
    std::vector<RowDiff> diffs;
    auto run = [&](std::vector<std::tuple<char, int, int, bool>> chunks) {  // (seq, start, len, all_logits)
      ForwardBatch batch;
      for (auto [s, start, len, all] : chunks) {
        const auto& toks = s == 'a' ? toks_a : toks_b;
        SequenceChunk ch;
        ch.tokens.assign(toks.begin() + start, toks.begin() + start + len);
        ch.start_pos = start;
        ch.all_logits = all;
        ch.full_block_table = s == 'a' ? full_a : full_b;
        ch.full_block_table.resize(size_t((start + len - 1) / B + 1));
        ch.sliding_block_table = sliding_table(s == 'a' ? 0 : 4, start + len - 1, std::max(0, start - 16));
        batch.seqs.push_back(ch);
      }
      std::vector<float> logits;
      backend->forward(batch, logits);
      step_logits[graphs ? 1 : 0].push_back(logits);
      size_t row = 0;
      for (auto [s, start, len, all] : chunks) {
        const auto& ref = s == 'a' ? ref_a : ref_b;
        for (int p = all ? start : start + len - 1; p < start + len; ++p, ++row)
          diffs.push_back(diff_row(&logits[row * size_t(c.vocab_size)], &ref[size_t(p) * size_t(c.vocab_size)],
                                   c.vocab_size));
      }
      ASSERT_EQ(row * size_t(c.vocab_size), logits.size());
    };
    run({{'a', 0, 37, true}});                       // prefill chunk, cuBLASLt path, every row
    run({{'a', 37, 5, true}, {'b', 0, 12, false}});  // a small chunk beside another sequence's prefill
    for (int p = 42; p < 50; ++p) run({{'a', p, 1, false}});  // decode steps
    const auto* cuda_backend = dynamic_cast<const CudaBackend*>(backend.get());
    ASSERT_NE(cuda_backend, nullptr);
    if (graphs && one_token_step_kernels >= 0)  // the last capture was the one-token step's
      EXPECT_EQ(cuda_backend->captured_step_kernels(), one_token_step_kernels) << "kernels of a one-token step";
    run({{'b', 12, 18, false}, {'a', 50, 1, false}});  // mixed batch
    for (int p = 51; p < N; ++p) run({{'a', p, 1, false}, {'b', std::min(p - 21, N2 - 1), 1, false}});
    expect_rows_close(diffs, std::string(graphs ? "graphs" : "stream"));
    // The graph pass must really have replayed captured steps, or the bit check below compares
    // eager launches with themselves.
    if (graphs) EXPECT_GT(cuda_backend->captured_step_kernels(), 0) << "no step was captured";
    else EXPECT_EQ(cuda_backend->captured_step_kernels(), 0) << "a step was captured with graphs off";
  }
  // Graph replay runs the same kernels on the same data: the logits must be the same bits.
  ASSERT_EQ(step_logits[0].size(), step_logits[1].size());
  for (size_t i = 0; i < step_logits[0].size(); ++i) {
    ASSERT_EQ(step_logits[0][i].size(), step_logits[1][i].size()) << "step " << i;
    EXPECT_EQ(std::memcmp(step_logits[0][i].data(), step_logits[1][i].data(), step_logits[0][i].size() * sizeof(float)),
              0)
        << "step " << i << ": logits differ between stream launches and graph replay";
  }
}

void expect_batched_steps_match_reference(const LoadedModel& device_model, const LoadedModel& ref_model,
                                          const char* label) {
  const FlintConfig& c = device_model.config;
  const int B = 16, S = 16, L = 6;
  std::mt19937 rng(9);
  std::vector<std::vector<int32_t>> toks(S, std::vector<int32_t>(L));
  std::vector<std::vector<float>> refs;
  for (auto& t : toks) {
    for (auto& v : t) v = int32_t(rng() % c.vocab_size);
    refs.push_back(reference_logits(ref_model, t));
  }
  for (bool graphs : {false, true}) {
    SCOPED_TRACE(graphs ? "CUDA graph replay" : "stream launches");
    CudaBackendOptions options{256, 128, 1 << 16, graphs};
    options.max_captured_graphs = 1;  // every new step shape destroys the graph just launched (still in flight)
    auto backend = make_cuda_backend(device_model, options);
    backend->allocate_kv_cache(KvCacheSpec{B, S, S});  // sequence s owns full block s and sliding block s
    std::vector<RowDiff> diffs;
    auto step = [&](int start, int len) {
      ForwardBatch batch;
      for (int s = 0; s < S; ++s) {
        SequenceChunk ch;
        ch.tokens.assign(toks[size_t(s)].begin() + start, toks[size_t(s)].begin() + start + len);
        ch.start_pos = start;
        ch.all_logits = true;
        ch.full_block_table = {int32_t(s)};
        ch.sliding_block_table = {int32_t(s)};
        batch.seqs.push_back(ch);
      }
      std::vector<float> logits;
      backend->forward(batch, logits);
      ASSERT_EQ(logits.size(), size_t(S) * len * size_t(c.vocab_size));
      size_t row = 0;
      for (int s = 0; s < S; ++s)
        for (int p = start; p < start + len; ++p, ++row)
          diffs.push_back(diff_row(&logits[row * size_t(c.vocab_size)],
                                   &refs[size_t(s)][size_t(p) * size_t(c.vocab_size)], c.vocab_size));
    };
    step(0, 4);  // T = 64
    step(4, 1);  // T = 16
    step(5, 1);  // T = 16 again
    expect_rows_close(diffs, std::string(label) + " batched T=64/16 (" + (graphs ? "graphs" : "stream") + ")");
  }
}

}  // namespace striker::cuda::testing
