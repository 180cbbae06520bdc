// striker perplexity's scoring holds a bounded number of logits rows on the host, however long
// the chunk or the decode batch's first step, and scores the same as when a step's rows arrive
// in one block. The CPU backend is wrapped to record the most rows it handed over at once.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <random>

#include "backends/cpu/cpu_backend.h"
#include "cli/perplexity_scoring.h"
#include "cpu/synthetic_model.h"

namespace striker::cli {
namespace {

// Delegates to a CPU backend; `peak_rows` is the largest logits buffer it returned or handed on.
class RowCountingBackend final : public Backend {
 public:
  explicit RowCountingBackend(const LoadedModel& model) : inner_(make_cpu_backend(model, 2)), vocab_(model.config.vocab_size) {}
  std::string name() const override { return "counting cpu"; }
  int64_t full_block_bytes(int32_t b) const override { return inner_->full_block_bytes(b); }
  int64_t sliding_block_bytes(int32_t b) const override { return inner_->sliding_block_bytes(b); }
  void allocate_kv_cache(const KvCacheSpec& spec) override { inner_->allocate_kv_cache(spec); }
  void forward(const ForwardBatch& batch, std::vector<float>& logits) override {
    inner_->forward(batch, logits);
    peak_rows = std::max(peak_rows, int64_t(logits.size()) / vocab_);
  }
  void forward_streamed(const ForwardBatch& batch, int64_t max_block_rows, const LogitsSink& sink) override {
    inner_->forward_streamed(batch, max_block_rows, [&](int64_t first, const float* rows, int64_t count) {
      peak_rows = std::max(peak_rows, count);
      sink(first, rows, count);
    });
  }
  int64_t peak_rows = 0;

 private:
  std::unique_ptr<Backend> inner_;
  int64_t vocab_;
};

std::vector<int32_t> random_ids(int64_t n, int32_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (auto& id : ids) id = int32_t(rng() % uint64_t(vocab));
  return ids;
}

void expect_same(const Scores& a, const Scores& b) {
  EXPECT_EQ(a.logprobs, b.logprobs);  // exact: the same reductions in the same order
  EXPECT_EQ(a.argmax, b.argmax);
  EXPECT_EQ(a.top, b.top);
}

TEST(PerplexityScoring, LongPrefillChunkHoldsOneBlockOfRows) {
  const LoadedModel model = test::make_synthetic_model(31);
  const auto ids = random_ids(301, model.config.vocab_size, 1);
  RowCountingBackend backend(model);
  // One 300-token chunk: every position scored in one step.
  const Scores s = score_prefill(backend, model.config, ids, 300, 3);
  EXPECT_EQ(backend.peak_rows, kScoreBlockRows);
  ASSERT_EQ(s.logprobs.size(), 300u);
  ASSERT_EQ(s.top.size(), 300u);

  RowCountingBackend small(model);
  expect_same(score_prefill(small, model.config, ids, 300, 3, 0, 7), s);
  EXPECT_EQ(small.peak_rows, 7);
  RowCountingBackend whole(model);  // the step's rows in one block: what scoring did before
  expect_same(score_prefill(whole, model.config, ids, 300, 3, 0, 1000), s);
  EXPECT_EQ(whole.peak_rows, 300);
}

TEST(PerplexityScoring, ScoreFromSkipsRowsWithinBlocks) {
  const LoadedModel model = test::make_synthetic_model(32);
  const auto ids = random_ids(120, model.config.vocab_size, 2);
  RowCountingBackend ref_backend(model);
  const Scores ref = score_prefill(ref_backend, model.config, ids, 1000, 2, 0, 1000);
  for (int64_t score_from : {1, 37, 118}) {
    RowCountingBackend backend(model);
    const Scores s = score_prefill(backend, model.config, ids, 50, 2, score_from, 16);
    EXPECT_LE(backend.peak_rows, 16);
    ASSERT_EQ(int64_t(s.logprobs.size()), 119 - score_from);
    EXPECT_TRUE(std::equal(s.logprobs.begin(), s.logprobs.end(), ref.logprobs.begin() + score_from));
    EXPECT_TRUE(std::equal(s.argmax.begin(), s.argmax.end(), ref.argmax.begin() + score_from));
  }
}

// Step 0 of the decode mode prefills every sequence at once: 3 x 100 rows here, in blocks that
// straddle the sequences' boundaries.
TEST(PerplexityScoring, DecodeBatchFirstStepHoldsOneBlockOfRows) {
  const LoadedModel model = test::make_synthetic_model(33);
  const auto seqs = split_sequences(random_ids(331, model.config.vocab_size, 3), 3);
  for (int64_t score_from : {0, 40, 99, 100}) {
    RowCountingBackend whole(model), blocks(model);
    const auto want = score_decode_batch(whole, model.config, seqs, 100, 2, score_from, 1000);
    const auto got = score_decode_batch(blocks, model.config, seqs, 100, 2, score_from, 64);
    EXPECT_EQ(whole.peak_rows, score_from < 99 ? 300 : 3) << "score_from " << score_from;
    EXPECT_LE(blocks.peak_rows, 64) << "score_from " << score_from;
    ASSERT_EQ(got.size(), 3u);
    for (size_t s = 0; s < 3; ++s) {
      EXPECT_EQ(int64_t(got[s].logprobs.size()), int64_t(seqs[s].size()) - 1 - score_from);
      expect_same(got[s], want[s]);
    }
  }
}

}  // namespace
}  // namespace striker::cli
