// The consistency properties on a real make-model checkpoint of the tiny config
// (vocab 151552, window 17, 16-token blocks), loaded through load_model().
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "backend_harness.h"
#include "loaders/make_model.h"
#include "loaders/model_loader.h"

namespace striker::test {
namespace {

namespace fs = std::filesystem;

class TinyCheckpoint : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::temp_directory_path() / ("striker_cpu_tiny_" + std::to_string(::getpid())));
    MakeModelOptions o;
    o.config = fs::path(STRIKER_SHARED_DIR) / "fixtures/flint-config/config.tiny.json";
    o.tokenizer_dir = fs::path(STRIKER_SHARED_DIR) / "fixtures/flint-tokenizer";
    o.out_dir = *dir_;
    o.seed = 7;
    make_random_checkpoint(o);
    model_ = new LoadedModel(load_model(dir_->string()));
  }
  static void TearDownTestSuite() {
    delete model_;
    fs::remove_all(*dir_);
    delete dir_;
  }
  static inline fs::path* dir_ = nullptr;
  static inline LoadedModel* model_ = nullptr;
  static constexpr int32_t kBlock = 16;
  static constexpr int64_t kTokensBelow = 151329;  // ids the tokenizer actually has
};

TEST_F(TinyCheckpoint, DecodeChunksBatchingAndFreedBlocksMatchFullPrefill) {
  const LoadedModel& model = *model_;
  const int64_t W = model.config.sliding_window;
  const std::vector<int64_t> lengths = {70, 45};
  std::vector<std::vector<int32_t>> ids;
  std::vector<std::vector<float>> full;
  for (size_t s = 0; s < lengths.size(); ++s) {
    ids.push_back(random_ids(100 + s, lengths[s], kTokensBelow));
    BackendHarness ref(model, 2, kBlock, 1, lengths[s]);
    full.push_back(ref.full_prefill(0, ids[s]));
  }

  BackendHarness h(model, 2, kBlock, 2, 70);
  // Sequence 0 is prefilled in chunks of 7 (all logits) while sequence 1 prefills 20 at once.
  int64_t pos0 = 0;
  {
    ForwardBatch b;
    b.seqs.push_back(h.chunk(0, ids[0], 0, 7, true));
    b.seqs.push_back(h.chunk(1, ids[1], 0, 20, false));
    const auto out = h.run(b);
    for (int64_t p = 0; p < 7; ++p) ASSERT_EQ(h.row(out, p), h.row(full[0], p));
    ASSERT_EQ(h.row(out, 7), h.row(full[1], 19));
    pos0 = 7;
  }
  for (; pos0 < 35; pos0 += 7) {
    ForwardBatch b;
    b.seqs.push_back(h.chunk(0, ids[0], pos0, pos0 + 7, true));
    const auto out = h.run(b);
    for (int64_t i = 0; i < 7; ++i) ASSERT_EQ(h.row(out, i), h.row(full[0], pos0 + i)) << "position " << pos0 + i;
  }
  // Then both decode together, one token per step, with every sliding block wholly
  // before the window freed (-1).
  int64_t pos1 = 20;
  while (pos0 < lengths[0] || pos1 < lengths[1]) {
    ForwardBatch b;
    std::vector<std::pair<size_t, int64_t>> members;
    for (auto [s, p] : {std::pair<size_t, int64_t>{0, pos0}, std::pair<size_t, int64_t>{1, pos1}}) {
      if (p >= lengths[s]) continue;
      SequenceChunk c = h.chunk(int64_t(s), ids[s], p, p + 1, false);
      const int64_t first_needed = std::max<int64_t>(0, p - W + 1) / kBlock;
      for (int64_t i = 0; i < first_needed; ++i) c.sliding_block_table[size_t(i)] = -1;
      b.seqs.push_back(std::move(c));
      members.emplace_back(s, p);
    }
    const auto out = h.run(b);
    for (size_t m = 0; m < members.size(); ++m)
      ASSERT_EQ(h.row(out, int64_t(m)), h.row(full[members[m].first], members[m].second))
          << "sequence " << members[m].first << " position " << members[m].second;
    if (pos0 < lengths[0]) ++pos0;
    if (pos1 < lengths[1]) ++pos1;
  }
}

TEST_F(TinyCheckpoint, LogitsAreFiniteAndSpread) {
  // A cheap realism check from the C++ side: distinct prompts give distinct, finite logits
  // with a spread comparable to a real model's (not all equal, not exploding).
  BackendHarness h(*model_, 2, kBlock, 1, 32);
  const auto logits = h.full_prefill(0, random_ids(5, 32, kTokensBelow));
  double sum = 0, sum2 = 0;
  for (float v : logits) {
    ASSERT_TRUE(std::isfinite(v));
    sum += v;
    sum2 += double(v) * v;
  }
  const double n = double(logits.size()), sd = std::sqrt(sum2 / n - (sum / n) * (sum / n));
  EXPECT_GT(sd, 0.1);
  EXPECT_LT(sd, 100.0);
  EXPECT_NE(h.row(logits, 30), h.row(logits, 31));
}

}  // namespace
}  // namespace striker::test
