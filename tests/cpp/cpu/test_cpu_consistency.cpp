// The KV cache, chunked prefill, batching and freed sliding blocks must not change results:
// every path below runs the same per-token arithmetic, so logits are compared bit for bit.
#include <gtest/gtest.h>

#include "backend_harness.h"
#include "core/error.h"
#include "synthetic_model.h"

namespace striker::test {
namespace {

constexpr int32_t kBlock = 4;  // small blocks: many block boundaries, window 5 spans two

TEST(CpuConsistency, IncrementalDecodeMatchesFullPrefill) {
  const LoadedModel model = make_synthetic_model(1);
  const auto ids = random_ids(1, 40, model.config.vocab_size);
  BackendHarness ref(model, 2, kBlock, 1, 40);
  const auto full = ref.full_prefill(0, ids);

  BackendHarness h(model, 2, kBlock, 1, 40);
  const int64_t k = 9;
  ForwardBatch prefill;
  prefill.seqs.push_back(h.chunk(0, ids, 0, k, false));
  EXPECT_EQ(h.run(prefill), h.row(full, k - 1));
  for (int64_t p = k; p < 40; ++p) {
    ForwardBatch step;
    step.seqs.push_back(h.chunk(0, ids, p, p + 1, false));
    ASSERT_EQ(h.run(step), h.row(full, p)) << "position " << p;
  }
}

TEST(CpuConsistency, PrefillInChunksOfSevenMatchesFullPrefill) {
  const LoadedModel model = make_synthetic_model(2);
  const auto ids = random_ids(2, 45, model.config.vocab_size);
  BackendHarness ref(model, 2, kBlock, 1, 45);
  const auto full = ref.full_prefill(0, ids);

  BackendHarness h(model, 2, kBlock, 1, 45);
  std::vector<float> chunked;
  for (int64_t b = 0; b < 45; b += 7) {
    ForwardBatch step;
    step.seqs.push_back(h.chunk(0, ids, b, std::min<int64_t>(45, b + 7), true));
    const auto out = h.run(step);
    chunked.insert(chunked.end(), out.begin(), out.end());
  }
  EXPECT_EQ(chunked, full);
}

TEST(CpuConsistency, BatchedSequencesAtDifferentLengthsMatchAlone) {
  const LoadedModel model = make_synthetic_model(3);
  const std::vector<int64_t> lengths = {13, 29, 40}, prefill = {13, 10, 25};
  std::vector<std::vector<int32_t>> ids;
  std::vector<std::vector<float>> alone;
  for (size_t s = 0; s < lengths.size(); ++s) {
    ids.push_back(random_ids(10 + s, lengths[s], model.config.vocab_size));
    BackendHarness ref(model, 2, kBlock, 1, lengths[s]);
    alone.push_back(ref.full_prefill(0, ids[s]));
  }

  BackendHarness h(model, 2, kBlock, 3, 40);
  ForwardBatch first;
  for (size_t s = 0; s < lengths.size(); ++s) first.seqs.push_back(h.chunk(int64_t(s), ids[s], 0, prefill[s], true));
  const auto out = h.run(first);
  int64_t row = 0;
  for (size_t s = 0; s < lengths.size(); ++s)
    for (int64_t p = 0; p < prefill[s]; ++p, ++row) ASSERT_EQ(h.row(out, row), h.row(alone[s], p)) << s << " " << p;

  // Decode steps: every unfinished sequence advances one token, each at its own position.
  std::vector<int64_t> pos = prefill;
  for (;;) {
    ForwardBatch step;
    std::vector<size_t> members;
    for (size_t s = 0; s < lengths.size(); ++s)
      if (pos[s] < lengths[s]) {
        step.seqs.push_back(h.chunk(int64_t(s), ids[s], pos[s], pos[s] + 1, false));
        members.push_back(s);
      }
    if (members.empty()) break;
    const auto logits = h.run(step);
    for (size_t m = 0; m < members.size(); ++m) {
      const size_t s = members[m];
      ASSERT_EQ(h.row(logits, int64_t(m)), h.row(alone[s], pos[s])) << "sequence " << s << " position " << pos[s];
      ++pos[s];
    }
  }
}

TEST(CpuConsistency, FreedAndRecycledSlidingBlocksMatchFullPrefill) {
  const LoadedModel model = make_synthetic_model(4);
  const int64_t n = 50, W = model.config.sliding_window;
  const auto ids = random_ids(4, n, model.config.vocab_size);
  BackendHarness ref(model, 2, kBlock, 1, n);
  const auto full = ref.full_prefill(0, ids);

  // Sliding layers get a ring of 3 physical blocks (enough for a 5-token window plus the
  // block being written); every logical block wholly before the window is -1.
  BackendHarness h(model, 2, kBlock, 1, n);
  const int64_t ring = 3;
  for (int64_t p = 0; p < n; ++p) {
    SequenceChunk c = h.chunk(0, ids, p, p + 1, false);
    const int64_t first_needed = std::max<int64_t>(0, p - W + 1) / kBlock;
    for (size_t i = 0; i < c.sliding_block_table.size(); ++i)
      c.sliding_block_table[i] = (int64_t(i) < first_needed || int64_t(i) > p / kBlock) ? -1 : int32_t(i % ring);
    ForwardBatch step;
    step.seqs.push_back(std::move(c));
    ASSERT_EQ(h.run(step), h.row(full, p)) << "position " << p;
  }
}

TEST(CpuConsistency, PreemptedAndRecomputedSequenceMatchesFullPrefill) {
  // Preemption by recompute: sequence 0's blocks are handed to sequence 1 (which overwrites
  // them), then sequence 0 is prefilled again from scratch in the blocks of slot 2.
  const LoadedModel model = make_synthetic_model(7);
  const auto a = random_ids(70, 30, model.config.vocab_size), b = random_ids(71, 30, model.config.vocab_size);
  BackendHarness ref(model, 2, kBlock, 1, 30);
  const auto full = ref.full_prefill(0, a);

  BackendHarness h(model, 2, kBlock, 3, 30);
  ForwardBatch first;
  first.seqs.push_back(h.chunk(0, a, 0, 17, false));
  h.run(first);
  ForwardBatch other;  // sequence b lives in slot 0's blocks now
  other.seqs.push_back(h.chunk(0, b, 0, 30, false));
  h.run(other);
  ForwardBatch again;  // a restarts: prompt + what it had generated, in slot 2
  again.seqs.push_back(h.chunk(2, a, 0, 20, false));
  ASSERT_EQ(h.run(again), h.row(full, 19));
  for (int64_t p = 20; p < 30; ++p) {
    ForwardBatch step;
    step.seqs.push_back(h.chunk(2, a, p, p + 1, false));
    ASSERT_EQ(h.run(step), h.row(full, p)) << "position " << p;
  }
}

TEST(CpuConsistency, ThreadCountDoesNotChangeResults) {
  const LoadedModel model = make_synthetic_model(5);
  const auto ids = random_ids(5, 30, model.config.vocab_size);
  BackendHarness one(model, 1, kBlock, 1, 30), three(model, 3, kBlock, 1, 30);
  EXPECT_EQ(one.full_prefill(0, ids), three.full_prefill(0, ids));
}

TEST(CpuConsistency, LogitsAreFiniteAndDependOnContext) {
  const LoadedModel model = make_synthetic_model(6);
  auto ids = random_ids(6, 20, model.config.vocab_size);
  BackendHarness h(model, 2, kBlock, 1, 20);
  const auto a = h.full_prefill(0, ids);
  for (float v : a) ASSERT_TRUE(std::isfinite(v));
  ids[0] = (ids[0] + 1) % int32_t(model.config.vocab_size);  // a full layer sees position 0 from everywhere
  const auto b = h.full_prefill(0, ids);
  EXPECT_NE(h.row(a, 19), h.row(b, 19));
}

}  // namespace
}  // namespace striker::test
