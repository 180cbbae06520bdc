// The CudaBackend forward pass with NVFP4 (W4A16) linear weights: quantised in memory against
// the host reference (all NVFP4, and mixed with BF16), dummy weights, format errors, and a GGUF
// written by `striker quantize` against the CPU backend.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend_reference.h"
#include "backends/cuda/backend/cuda_backend.h"
#include "backends/cpu/cpu_backend.h"
#include "cuda_test_util.h"
#include "loaders/gguf_model.h"
#include "loaders/quantize.h"
#include "model/nvfp4.h"

namespace striker::cuda::testing {
namespace {

// Quantises hm's linear weights to NVFP4 in memory (model/nvfp4's ggml quantiser, then the split
// layout the loader produces) and returns that model. scale2 is a power of two per tensor,
// varied by tensor and expert (q, k and v differ), so E2M1·E4M3·scale2 is exactly a bf16 value:
// hm's BF16 weights are overwritten with the dequantised values and stay an exact reference.
// `keep_bf16` leaves the LM head, dense down_proj and shared experts BF16 (mixed formats).
LoadedModel quantize_in_memory(HostModel& hm, bool keep_bf16) {
  LoadedModel q = hm.model;  // shares norms, router, embedding (and keeps hm's buffers alive)
  int counter = 0;
  auto quantize = [&](WeightView& ref_view, WeightView& q_view) {
    const int64_t rows = ref_view.rows(), in = ref_view.cols();
    auto* w = const_cast<bf16*>(reinterpret_cast<const bf16*>(ref_view.data));  // hm owns this buffer
    float amax = 0.f;
    for (int64_t i = 0; i < rows * in; ++i) amax = std::max(amax, std::fabs(bf16_to_float(w[i])));
    const float scale2 = std::ldexp(1.f, int(std::ceil(std::log2(amax / (6.f * 448.f)))) + counter++ % 3);
    auto buf = std::make_shared<std::vector<uint8_t>>(size_t(rows * in / 2 + rows * in / 16));
    uint8_t* codes = buf->data();
    uint8_t* scales = codes + rows * in / 2;
    std::vector<float> row(static_cast<size_t>(in)), deq(static_cast<size_t>(in));
    std::vector<uint8_t> blocks(size_t(nvfp4::ggml_row_bytes(in)));
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t i = 0; i < in; ++i) row[size_t(i)] = bf16_to_float(w[r * in + i]) / scale2;
      nvfp4::quantize_row_to_ggml(row.data(), in, blocks.data());
      nvfp4::ggml_row_to_split(blocks.data(), in, codes + r * in / 2, scales + r * in / 16);
      nvfp4::dequantize_ggml_row(blocks.data(), in, scale2, deq.data());
      for (int64_t i = 0; i < in; ++i) {
        if (round_bf16(deq[size_t(i)]) != deq[size_t(i)]) throw Error("test: dequantised weight is not a bf16 value");
        w[r * in + i] = float_to_bf16(deq[size_t(i)]);
      }
    }
    q.storage.push_back(buf);
    q_view.dtype = DType::NVFP4;
    q_view.data = reinterpret_cast<const std::byte*>(codes);
    q_view.nbytes = size_t(rows * in / 2);
    q_view.nvfp4_scales = reinterpret_cast<const std::byte*>(scales);
    q_view.scale2 = scale2;
  };
  auto& R = hm.model.weights;
  auto& Q = q.weights;
  if (!keep_bf16) quantize(R.lm_head, Q.lm_head);
  for (size_t l = 0; l < R.layers.size(); ++l) {
    LayerWeights &rl = R.layers[l], &ql = Q.layers[l];
    quantize(rl.q_proj, ql.q_proj);
    quantize(rl.k_proj, ql.k_proj);
    quantize(rl.v_proj, ql.v_proj);
    quantize(rl.o_proj, ql.o_proj);
    if (hm.model.config.is_dense_layer(int64_t(l))) {
      quantize(rl.dense.gate, ql.dense.gate);
      quantize(rl.dense.up, ql.dense.up);
      if (!keep_bf16) quantize(rl.dense.down, ql.dense.down);
      continue;
    }
    for (size_t e = 0; e < rl.experts.size(); ++e) {
      quantize(rl.experts[e].gate, ql.experts[e].gate);
      quantize(rl.experts[e].up, ql.experts[e].up);
      quantize(rl.experts[e].down, ql.experts[e].down);
    }
    if (!keep_bf16) {
      quantize(rl.shared.gate, ql.shared.gate);
      quantize(rl.shared.up, ql.shared.up);
      quantize(rl.shared.down, ql.shared.down);
    }
  }
  return q;
}

TEST(CudaBackend, Nvfp4ForwardMatchesHostReference) {
  for (bool mixed : {false, true}) {
    SCOPED_TRACE(mixed ? "NVFP4 with BF16 LM head, dense down and shared experts" : "all linear weights NVFP4");
    HostModel hm = make_host_model(small_config());
    const LoadedModel q = quantize_in_memory(hm, mixed);
    expect_backend_matches_reference(q, hm.model);  // hm now holds the dequantised weights
  }
}

// head_dim 128 with 8 query heads per KV head (Flint's attention shape) and NVFP4 weights: the
// NVFP4 projections beside the tensor-core decode and prefill attention, graphs vs eager.
TEST(CudaBackend, Nvfp4ForwardMatchesHostReferenceWithFlintHeadShape) {
  FlintConfig c = small_config();
  c.head_dim = 128;
  HostModel hm = make_host_model(c);
  const LoadedModel q = quantize_in_memory(hm, false);
  expect_backend_matches_reference(q, hm.model);
}

// NVFP4 routed experts in steps of 64 and 16 tokens: the grouped kernels with NVFP4 weight
// tiles (no host sync, so graphs capture them), shared experts NVFP4 or BF16.
TEST(CudaBackend, Nvfp4BatchedStepsOf64And16TokensMatchHostReference) {
  for (bool mixed : {false, true}) {
    SCOPED_TRACE(mixed ? "NVFP4 with BF16 LM head, dense down and shared experts" : "all linear weights NVFP4");
    HostModel hm = make_host_model(small_config());
    const LoadedModel q = quantize_in_memory(hm, mixed);
    expect_batched_steps_match_reference(q, hm.model, mixed ? "nvfp4 mixed" : "nvfp4");
  }
}

// A 300-token NVFP4 prefill chunk: 1800 routed slots over 16 experts (> 80 per expert), so the
// routed experts run the Hopper kernels that decode NVFP4 in registers
// (moe_grouped_wgmma_nvfp4.h) through the backend's dispatch; every row against the reference.
TEST(CudaBackend, Nvfp4PrefillOnTheWgmmaPathMatchesHostReference) {
  const int N = 300, B = 16;
  HostModel hm = make_host_model(small_config());
  const LoadedModel q = quantize_in_memory(hm, false);
  const FlintConfig& c = q.config;
  ASSERT_GT(int64_t(N) * c.num_experts_per_tok, 80 * c.n_routed_experts) << "the step must take the wgmma path";
  std::mt19937 rng(11);
  std::vector<int32_t> toks(static_cast<size_t>(N));
  for (auto& t : toks) t = int32_t(rng() % c.vocab_size);
  const auto ref = reference_logits(hm.model, toks);
  CudaBackendOptions options{512, 512, 1 << 16, false};
  auto backend = make_cuda_backend(q, options);
  const int blocks = (N + B - 1) / B;
  backend->allocate_kv_cache(KvCacheSpec{B, blocks, blocks});
  ForwardBatch batch;
  SequenceChunk ch;
  ch.tokens = toks;
  ch.start_pos = 0;
  ch.all_logits = true;
  for (int b = 0; b < blocks; ++b) {
    ch.full_block_table.push_back(int32_t(b));
    ch.sliding_block_table.push_back(int32_t(b));
  }
  batch.seqs.push_back(ch);
  std::vector<float> logits;
  backend->forward(batch, logits);
  ASSERT_EQ(logits.size(), size_t(N) * size_t(c.vocab_size));
  std::vector<double> md;
  int agree = 0;
  for (int p = 0; p < N; ++p) {
    const RowDiff d = diff_row(&logits[size_t(p) * size_t(c.vocab_size)], &ref[size_t(p) * size_t(c.vocab_size)],
                               c.vocab_size);
    md.push_back(d.max_dlogprob);
    agree += d.same_argmax;
  }
  std::sort(md.begin(), md.end());
  std::printf("backend vs reference, nvfp4 prefill T=%d: median max|dlogprob| %.4f, worst %.4f, argmax %d/%d\n", N,
              md[md.size() / 2], md.back(), agree, N);
  EXPECT_LT(md[md.size() / 2], 0.05);
  EXPECT_LT(md.back(), 0.5);
  EXPECT_GE(agree, N * 9 / 10);
}

TEST(CudaBackend, Nvfp4RejectsMixedQkvFormats) {
  HostModel hm = make_host_model(small_config());
  LoadedModel q = quantize_in_memory(hm, false);
  q.weights.layers[1].k_proj = hm.model.weights.layers[1].k_proj;  // k BF16 beside NVFP4 q and v
  try {
    make_cuda_backend(q);
    FAIL() << "expected an error for a q/k/v format mix";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layer1.k"), std::string::npos) << e.what();
  }
}

TEST(CudaBackend, Nvfp4DummyWeightsRunAndCountTheirBytes) {
  const FlintConfig c = small_config();
  const DeviceModel bf = DeviceModel::random(c, 3, WeightFormat::bf16);
  DeviceModel nv = DeviceModel::random(c, 3, WeightFormat::nvfp4);
  // Linear weights: 2 bytes -> 0.5 + 1/16 bytes per weight; embedding, norms and router unchanged.
  const int64_t H = c.hidden_size, d = c.head_dim, nh = c.num_attention_heads, nkv = c.num_key_value_heads;
  int64_t linear = c.vocab_size * H, moe_layers = 0;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    linear += (nh + 2 * nkv) * d * H + H * nh * d;
    if (c.is_dense_layer(l)) linear += 3 * c.intermediate_size * H;
    else {
      linear += 3 * (c.n_routed_experts * c.moe_intermediate_size + c.shared_expert_intermediate_size) * H;
      ++moe_layers;
    }
  }
  const int64_t expected = bf.bytes - linear * 2 + linear / 2 + linear / 16 + moe_layers * 3 * c.n_routed_experts * 4;
  EXPECT_EQ(nv.bytes, expected) << "bf16 dummy " << bf.bytes << " bytes";
  auto backend = std::make_unique<CudaBackend>(std::move(nv), CudaBackendOptions{64, 8, 1024});
  backend->allocate_kv_cache(KvCacheSpec{16, 4, 4});
  std::vector<float> logits;
  ForwardBatch batch;
  std::vector<int32_t> toks(20);
  for (size_t i = 0; i < toks.size(); ++i) toks[i] = int32_t(i * 97 % c.vocab_size);
  batch.seqs.push_back(SequenceChunk{toks, 0, {0, 1}, {0, 1}, false});
  backend->forward(batch, logits);  // prefill path
  batch.seqs[0] = SequenceChunk{{5}, 20, {0, 1}, {0, 1}, false};
  backend->forward(batch, logits);  // decode path
  ASSERT_EQ(logits.size(), size_t(c.vocab_size));
  double sq = 0;
  for (float v : logits) {
    ASSERT_TRUE(std::isfinite(v));
    sq += double(v) * v;
  }
  const double rms = std::sqrt(sq / double(logits.size()));
  std::printf("nvfp4 dummy: %lld weight bytes, logits rms %.3f\n", (long long)backend->model().bytes, rms);
  EXPECT_GT(rms, 0.05);  // a live network: neither zero nor exploding
  EXPECT_LT(rms, 20.0);
}

// End to end through the real file path: `striker quantize`'s writer -> GGUF -> loader (split
// layout, per-expert scale2 that are not powers of two) -> CUDA backend, against the CPU
// backend's W4A16 path on the same loaded checkpoint (prefill with every row, then decode).
TEST(CudaBackend, Nvfp4GgufMatchesCpuBackend) {
  const FlintConfig c = small_config();
  HostModel hm = make_host_model(c);
  const auto path = std::filesystem::temp_directory_path() / ("striker_nvfp4_" + std::to_string(::getpid()) + ".gguf");
  quantize_to_gguf(hm.model, path.string());
  const LoadedModel q = load_gguf_model(path.string(), c);
  ASSERT_EQ(q.weights.layers[2].experts[3].down.dtype, DType::NVFP4);
  auto gpu = make_cuda_backend(q, CudaBackendOptions{64, 64, 1024});
  auto cpu = make_cpu_backend(q);
  std::filesystem::remove(path);
  const int N = 40;
  std::mt19937 rng(8);
  std::vector<int32_t> toks(static_cast<size_t>(N));
  for (auto& t : toks) t = int32_t(rng() % c.vocab_size);
  std::vector<int32_t> table = {0, 1, 2};
  for (Backend* b : {gpu.get(), cpu.get()}) b->allocate_kv_cache(KvCacheSpec{16, 4, 4});
  std::vector<RowDiff> diffs;
  auto step = [&](int start, int len, bool all) {
    ForwardBatch batch;
    batch.seqs.push_back(SequenceChunk{{toks.begin() + start, toks.begin() + start + len}, start, table, table, all});
    std::vector<float> lg, lc;
    gpu->forward(batch, lg);
    cpu->forward(batch, lc);
    ASSERT_EQ(lg.size(), lc.size());
    for (size_t r = 0; r < lg.size() / size_t(c.vocab_size); ++r)
      diffs.push_back(diff_row(&lg[r * size_t(c.vocab_size)], &lc[r * size_t(c.vocab_size)], c.vocab_size));
  };
  step(0, 33, true);                           // prefill: dequantise + cuBLASLt, grouped NVFP4 MoE
  for (int p = 33; p < N; ++p) step(p, 1, false);  // decode: NVFP4 GEMV kernels
  std::vector<double> md;
  int agree = 0;
  for (const auto& dr : diffs) md.push_back(dr.max_dlogprob), agree += dr.same_argmax;
  std::sort(md.begin(), md.end());
  std::printf("backend vs reference (nvfp4 gguf, cuda vs cpu backend): %zu rows, median max|dlogprob| %.4f, "
              "worst %.4f, argmax %d/%zu\n",
              md.size(), md[md.size() / 2], md.back(), agree, diffs.size());
  EXPECT_LT(md[md.size() / 2], 0.05);
  EXPECT_LT(md.back(), 0.5);
  EXPECT_GE(agree, int(diffs.size() * 9 / 10));
}

}  // namespace
}  // namespace striker::cuda::testing
