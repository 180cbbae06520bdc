// Logprobs on the GPU (backends/cuda/sampling/logprobs.cu), of sampled and of given tokens, against
// the engine's token_logprob (the CPU reference) on the raw rows: the top ids exactly (higher logit, then lower
// id; -inf counts, NaN never), every value within the rounding of a sum taken in another order
// and of CUDA's expf against the host's, NaN where the reference is NaN. The rows go through the
// sampler's masks, edits and draw in between, as in forward_sampled, so a value read from the
// edited logits instead of the snapshot shows (sampled tokens are biased by +40 on half the rows).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>

#include "backends/cuda/backend/cuda_backend.h"
#include "backends/cuda/sampling/logprobs.h"
#include "backends/cuda/sampling/sampling.h"
#include "backends/cuda/sampling/sampling_masks.h"
#include "backends/sample_split.h"
#include "backend_reference.h"
#include "cuda_test_util.h"
#include "engine/sampler.h"
#include "engine/sampling_cases.h"
#include "sampling_test_util.h"

namespace striker::cuda::testing {
namespace {

using namespace striker::sampling_cases;

struct LpTally {
  int rows = 0, values = 0, bad = 0, nan_rows = 0, edited_tokens = 0, exact_bits = 0;
  double max_diff = 0;
};

bool close(float got, float want, LpTally& t) {
  ++t.values;
  if (std::isnan(want) || std::isnan(got)) return std::isnan(want) && std::isnan(got);
  if (std::isinf(want) || std::isinf(got)) return got == want;
  if (got == want) ++t.exact_bits;
  const double d = std::abs(double(got) - double(want));
  t.max_diff = std::max(t.max_diff, d);
  return d <= 1e-6 + 4e-7 * std::abs(double(want));
}

// One launch of `rows` rows (at most kMaxDeviceLogprobRows) of vocabulary V.
void run_logprob_batch(std::mt19937& rng, int64_t V, int rows, LpTally& t) {
  std::vector<float> logits;
  std::vector<SampleRequest> reqs;
  for (int r = 0; r < rows; ++r) {
    const int kind = int(rng() % 6);
    auto row = make_row(rng, V, kind);
    if ((kind == 3 || kind == 5) && r % 2 == 0)  // half of those rows without their NaN: finite sums
      for (auto& v : row)
        if (v != v) v = -2.5f;
    logits.insert(logits.end(), row.begin(), row.end());
    SampleRequest q = random_request(rng, V, r);
    q.top_logprobs = pick<int32_t>(rng, {0, 1, 5, 20, 20, kMaxDeviceTopLogprobs});
    if (r % 2 == 1) {  // a token far above the rest after the edits: most likely the one drawn
      int32_t id;
      do id = int32_t(rng() % uint64_t(V));
      while (std::any_of(q.logit_bias.begin(), q.logit_bias.end(), [&](const auto& b) { return b.first == id; }) ||
             std::find(q.suppressed.begin(), q.suppressed.end(), id) != q.suppressed.end() || !(row[size_t(id)] > -1e30f));
      q.logit_bias.emplace_back(id, 40.f);
    }
    reqs.push_back(q);
  }
  std::shuffle(reqs.begin(), reqs.end(), rng);
  std::vector<SampleRowParams> params;
  std::vector<LogitEdit> edits;
  pack_samples(reqs, rows, V, params, edits);
  SamplingBuffers sb(rows, std::max<int64_t>(int64_t(edits.size()), 1));
  stage_samples(sb, params, edits);
  DeviceBuffer<float> d_logits(logits);
  LogprobBuffers lb(V, kMaxDeviceLogprobRows);
  // Poisoned scratch and records: whatever a kernel fails to write shows as NaN, huge counts or id -1.
  const LogprobScratch& s = lb.scratch();
  const size_t slices = size_t(kMaxDeviceLogprobRows) * sample_split::kMaxSplits;
  STRIKER_CUDA_CHECK(cudaMemset(s.snapshot, 0xFF, size_t(kMaxDeviceLogprobRows) * size_t(V) * 4));
  STRIKER_CUDA_CHECK(cudaMemset(s.slice_max, 0xFF, slices * 4));
  STRIKER_CUDA_CHECK(cudaMemset(s.slice_sum, 0xFF, slices * 8));
  STRIKER_CUDA_CHECK(cudaMemset(s.cand_key, 0xFF, slices * kMaxDeviceTopLogprobs * 4));
  STRIKER_CUDA_CHECK(cudaMemset(s.cand_id, 0xFF, slices * kMaxDeviceTopLogprobs * 4));
  STRIKER_CUDA_CHECK(cudaMemset(s.cand_n, 0x7F, slices * 4));
  STRIKER_CUDA_CHECK(cudaMemset(s.records, 0xFF, size_t(kMaxDeviceLogprobRows) * sizeof(LogprobRecord)));
  LogprobRows lr;
  for (size_t k = 0; k < reqs.size(); ++k) lr.r[lr.n++] = LogprobRow{reqs[k].row, int32_t(k), 0, reqs[k].top_logprobs};
  // forward_sampled's order: logprobs' first launches, masks, edits, the draw, the logprobs' finish.
  logprob_prepare(d_logits.get(), lr, lb, nullptr);
  TokenMaskBuffers masks(rows, V);
  masks.apply(reqs, d_logits.get(), nullptr);
  sb.upload(int(params.size()), int64_t(edits.size()), nullptr);
  apply_logit_edits(d_logits.get(), V, sb.params_dev(), sb.edits_dev(), sb.counts_dev(), int64_t(edits.size()), nullptr);
  sample_rows(d_logits.get(), V, sb.params_dev(), sb.counts_dev(), int(params.size()), sb.scratch(), sb.tokens_dev(), nullptr,
              sample_paths(params, V));
  logprob_finish(d_logits.get(), lr, sb.tokens_dev(), lb, nullptr);
  STRIKER_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<int32_t> tokens(static_cast<size_t>(rows));
  STRIKER_CUDA_CHECK(cudaMemcpy(tokens.data(), sb.tokens_dev(), size_t(rows) * 4, cudaMemcpyDeviceToHost));
  const std::vector<float> edited = d_logits.download();
  for (int j = 0; j < lr.n; ++j) {
    const SampleRequest& q = reqs[size_t(lr.r[j].sample)];
    const std::span<const float> raw(logits.data() + size_t(q.row) * size_t(V), size_t(V));
    const int32_t token = tokens[size_t(lr.r[j].sample)];
    ASSERT_TRUE(token >= 0 && token < V) << "sampled token " << token;
    if (edited[size_t(q.row) * size_t(V) + size_t(token)] != raw[size_t(token)]) ++t.edited_tokens;
    const TokenLogprob want = token_logprob(raw, token, q.top_logprobs);
    const LogprobRecord& got = lb.records_host()[j];
    ++t.rows;
    t.nan_rows += std::isnan(want.logprob);
    bool ok = close(got.logprob, want.logprob, t) && got.n == int32_t(want.top.size()) && got.rank == 0;
    for (int k = 0; ok && k < got.n; ++k)
      ok = got.id[k] == want.top[size_t(k)].first && close(got.value[k], want.top[size_t(k)].second, t);
    if (!ok && t.bad++ < 8) {
      std::printf("LOGPROB MISMATCH V %lld row %d token %d top_n %d: gpu %.9g (n %d) cpu %.9g (n %zu)", (long long)V,
                  q.row, token, q.top_logprobs, got.logprob, got.n, want.logprob, want.top.size());
      for (int k = 0; k < std::min<int>(got.n, 4); ++k) std::printf(" | gpu %d %.9g", got.id[k], got.value[k]);
      for (size_t k = 0; k < std::min<size_t>(want.top.size(), 4); ++k)
        std::printf(" | cpu %d %.9g", want.top[k].first, want.top[k].second);
      std::printf("\n");
    }
  }
}

TEST(CudaLogprobs, MatchCpuTokenLogprobThroughTheSamplersEdits) {
  std::mt19937 rng(77);
  LpTally t;
  run_logprob_batch(rng, 151552, 16, t);
  run_logprob_batch(rng, 151552, 1, t);
  for (int batch = 0; batch < 2; ++batch) run_logprob_batch(rng, 4099, kMaxDeviceLogprobRows, t);
  run_logprob_batch(rng, 37, 9, t);  // one slice shorter than its block
  std::printf("logprobs: %d rows (%d NaN), %d values, %d bit-exact, max |diff| %.3g, %d sampled tokens edited, %d bad\n",
              t.rows, t.nan_rows, t.values, t.exact_bits, t.max_diff, t.edited_tokens, t.bad);
  EXPECT_EQ(t.bad, 0);
  EXPECT_GT(t.edited_tokens, 10) << "too few sampled tokens whose logit the edits changed: the snapshot is untested";
  EXPECT_GT(t.nan_rows, 0);
  EXPECT_LT(t.nan_rows * 2, t.rows);
}

// Scored rows (prompt logprobs: a given token per row, no sampler in between) in launches of
// kMaxDeviceLogprobRows, each writing its records at its offset, on random rows of every kind.
TEST(CudaLogprobs, ScoredRowsMatchCpuTokenLogprobInSeveralLaunches) {
  std::mt19937 rng(78);
  LpTally t;
  for (const int64_t V : {int64_t(151552), int64_t(4099)}) {
    const int rows = V > 5000 ? 70 : 150;  // 2 and 3 launches
    std::vector<float> logits;
    std::vector<LogprobRow> want_rows;
    for (int r = 0; r < rows; ++r) {
      const auto row = make_row(rng, V, int(rng() % 6));
      logits.insert(logits.end(), row.begin(), row.end());
      // Row r scores a random token (also one whose logit is -inf or NaN) with a random top_n.
      want_rows.push_back(LogprobRow{r, -1, int32_t(rng() % uint64_t(V)), pick<int32_t>(rng, {0, 1, 2, 20, 32})});
    }
    std::shuffle(want_rows.begin(), want_rows.end(), rng);  // records follow the request order, not the rows'
    DeviceBuffer<float> d_logits(logits);
    LogprobBuffers lb(V, rows + 3);
    STRIKER_CUDA_CHECK(cudaMemset(lb.scratch().records, 0xFF, size_t(rows + 3) * sizeof(LogprobRecord)));
    for (int first = 0; first < rows; first += kMaxDeviceLogprobRows) {
      LogprobRows g;
      g.first_record = first;
      g.n = std::min(kMaxDeviceLogprobRows, rows - first);
      for (int j = 0; j < g.n; ++j) g.r[j] = want_rows[size_t(first + j)];
      logprob_prepare(d_logits.get(), g, lb, nullptr);
      logprob_finish(d_logits.get(), g, nullptr, lb, nullptr);
    }
    STRIKER_CUDA_CHECK(cudaDeviceSynchronize());
    for (int k = 0; k < rows; ++k) {
      const LogprobRow& q = want_rows[size_t(k)];
      const std::span<const float> raw(logits.data() + size_t(q.row) * size_t(V), size_t(V));
      const TokenLogprob want = token_logprob(raw, q.token, q.top_n);
      const LogprobRecord& got = lb.records_host()[k];
      ++t.rows;
      t.nan_rows += std::isnan(want.logprob);
      bool ok = close(got.logprob, want.logprob, t) && got.n == int32_t(want.top.size()) && got.rank == want.rank;
      for (int i = 0; ok && i < got.n; ++i)
        ok = got.id[i] == want.top[size_t(i)].first && close(got.value[i], want.top[size_t(i)].second, t);
      if (!ok && t.bad++ < 8)
        std::printf("SCORED MISMATCH V %lld row %d token %d top_n %d: gpu %.9g (n %d, rank %d) cpu %.9g (n %zu, rank %lld)\n",
                    (long long)V, q.row, q.token, q.top_n, got.logprob, got.n, got.rank, want.logprob, want.top.size(),
                    (long long)want.rank);
    }
  }
  std::printf("scored logprobs: %d rows (%d NaN), %d values, %d bit-exact, max |diff| %.3g, %d bad\n", t.rows, t.nan_rows,
              t.values, t.exact_bits, t.max_diff, t.bad);
  EXPECT_EQ(t.bad, 0);
  EXPECT_GT(t.nan_rows, 0);
}

TEST(CudaLogprobs, RefusesRowsBeyondItsLimits) {
  LogprobBuffers lb(4099, kMaxDeviceLogprobRows);
  LogprobRows lr;
  lr.n = 1;
  lr.r[0] = LogprobRow{0, 0, 0, kMaxDeviceTopLogprobs + 1};
  EXPECT_THROW(logprob_prepare(nullptr, lr, lb, nullptr), Error);
  lr.r[0] = LogprobRow{0, -1, 4099, 1};  // a scored token outside the vocabulary
  EXPECT_THROW(logprob_prepare(nullptr, lr, lb, nullptr), Error);
  lr.r[0] = LogprobRow{0, 0, 0, 2};
  EXPECT_THROW(logprob_finish(nullptr, lr, nullptr, lb, nullptr), Error);  // sampled, but no tokens
  lr.first_record = 1;
  lr.n = kMaxDeviceLogprobRows;  // records past the buffers' end
  EXPECT_THROW(logprob_finish(nullptr, lr, nullptr, lb, nullptr), Error);
  lr.first_record = 0;
  lr.n = kMaxDeviceLogprobRows + 1;
  EXPECT_THROW(logprob_finish(nullptr, lr, nullptr, lb, nullptr), Error);
}

// The backend end to end: logprobs asked of forward_sampled are those of the raw rows it returns
// in the same call, for samples with edits too.
TEST(CudaLogprobs, BackendForwardSampledReturnsLogprobsOfItsRawRows) {
  FlintConfig c = small_config();  // backend_reference.h, cut to two layers
  c.num_hidden_layers = 2;
  c.first_k_dense_replace = 1;
  c.layer_types = {LayerType::Sliding, LayerType::Full};
  auto backend = make_cuda_backend_dummy(c, 5, WeightFormat::bf16, CudaBackendOptions{256, 64, 1 << 16});
  ASSERT_EQ(backend->device_logprobs().max_top, kMaxDeviceTopLogprobs);
  ASSERT_EQ(backend->device_logprobs().rows, kMaxDeviceLogprobRows);
  backend->allocate_kv_cache(KvCacheSpec{16, 16, 16});
  std::mt19937 rng(13);
  ForwardBatch batch;
  for (int s = 0; s < 4; ++s) {
    SequenceChunk ch;
    for (int i = 0; i < 9 + s; ++i) ch.tokens.push_back(int32_t(rng() % uint32_t(c.vocab_size)));
    ch.full_block_table = {s * 2, s * 2 + 1};
    ch.sliding_block_table = {s * 2, s * 2 + 1};
    batch.seqs.push_back(ch);
  }
  DeviceSampling ds;
  for (int32_t r : {2, 0, 3, 1}) {
    SampleRequest q = random_request(rng, c.vocab_size, r);
    q.top_logprobs = pick<int32_t>(rng, {0, 3, 20});
    ds.samples.push_back(q);
    ds.return_rows.push_back(r);
  }
  ds.samples[1].top_logprobs = -1;  // no logprobs for this one
  // Scored rows too: rows 0-3 at given tokens (the same row twice at other tokens).
  ds.prompt_logprobs = {{3, 7, 2}, {0, int32_t(c.vocab_size) - 1, 0}, {3, 11, 32}, {1, 5, 5}};
  SampledStep out;
  backend->forward_sampled(batch, ds, out);
  ASSERT_EQ(out.tokens.size(), ds.samples.size());
  ASSERT_EQ(out.logprobs.size(), 3u);
  ASSERT_EQ(out.prompt_logprobs.size(), ds.prompt_logprobs.size());
  LpTally t;
  for (size_t s = 0, j = 0; s < ds.samples.size(); ++s) {
    if (ds.samples[s].top_logprobs < 0) continue;
    const std::span<const float> raw(out.logits.data() + s * size_t(c.vocab_size), size_t(c.vocab_size));
    const TokenLogprob want = token_logprob(raw, out.tokens[s], ds.samples[s].top_logprobs);
    const SampledLogprobs& got = out.logprobs[j++];
    EXPECT_TRUE(close(got.logprob, want.logprob, t)) << "sample " << s << ": " << got.logprob << " vs " << want.logprob;
    ASSERT_EQ(got.top.size(), want.top.size()) << "sample " << s;
    for (size_t k = 0; k < got.top.size(); ++k) {
      EXPECT_EQ(got.top[k].first, want.top[k].first) << "sample " << s << " rank " << k;
      EXPECT_TRUE(close(got.top[k].second, want.top[k].second, t)) << "sample " << s << " rank " << k;
    }
  }
  for (size_t j = 0; j < ds.prompt_logprobs.size(); ++j) {
    const RowLogprobRequest& q = ds.prompt_logprobs[j];
    const size_t s = size_t(std::find(ds.return_rows.begin(), ds.return_rows.end(), q.row) - ds.return_rows.begin());
    const std::span<const float> raw(out.logits.data() + s * size_t(c.vocab_size), size_t(c.vocab_size));
    const TokenLogprob want = token_logprob(raw, q.token, q.top_n);
    const SampledLogprobs& got = out.prompt_logprobs[j];
    EXPECT_TRUE(close(got.logprob, want.logprob, t)) << "scored " << j << ": " << got.logprob << " vs " << want.logprob;
    EXPECT_EQ(got.rank, want.rank) << "scored " << j;
    ASSERT_EQ(got.top.size(), want.top.size()) << "scored " << j;
    for (size_t k = 0; k < got.top.size(); ++k) {
      EXPECT_EQ(got.top[k].first, want.top[k].first) << "scored " << j << " rank " << k;
      EXPECT_TRUE(close(got.top[k].second, want.top[k].second, t)) << "scored " << j << " rank " << k;
    }
  }
  // Beyond the limits: a clear error, and the backend keeps working.
  ds.samples[1].top_logprobs = kMaxDeviceTopLogprobs + 1;
  EXPECT_THROW(backend->forward_sampled(batch, ds, out), Error);
  ds.samples[1].top_logprobs = -1;
  ds.prompt_logprobs.push_back({4, 0, 1});  // row 4: the step has 4
  EXPECT_THROW(backend->forward_sampled(batch, ds, out), Error);
  ds.prompt_logprobs.pop_back();
  backend->forward_sampled(batch, ds, out);
  EXPECT_EQ(out.logprobs.size(), 3u);
  EXPECT_EQ(out.prompt_logprobs.size(), 4u);
}

}  // namespace
}  // namespace striker::cuda::testing
