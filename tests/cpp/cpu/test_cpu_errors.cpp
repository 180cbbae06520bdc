// Bad input to the CPU backend is a one-line striker::Error, never a crash, and the backend
// stays usable afterwards.
#include <gtest/gtest.h>

#include "backend_harness.h"
#include "core/error.h"
#include "synthetic_model.h"

namespace striker::test {
namespace {

constexpr int32_t kBlock = 4;

void expect_error(Backend& backend, const ForwardBatch& batch, const std::string& fragment) {
  std::vector<float> logits;
  try {
    backend.forward(batch, logits);
    FAIL() << "no error for a batch that should mention '" << fragment << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
  }
}

TEST(CpuErrors, ForwardBeforeAllocateIsAnError) {
  const LoadedModel model = make_synthetic_model(1);
  auto backend = make_cpu_backend(model, 1);
  ForwardBatch b;
  b.seqs.push_back({{1, 2}, 0, {0}, {0}, false});
  expect_error(*backend, b, "allocate_kv_cache");
}

TEST(CpuErrors, BadBatchesAreRejectedAndTheBackendStaysUsable) {
  const LoadedModel model = make_synthetic_model(1);
  BackendHarness h(model, 2, kBlock, 1, 16);
  const auto ids = random_ids(1, 12, model.config.vocab_size);
  const auto good = h.full_prefill(0, ids);

  auto batch_with = [&](auto edit) {
    ForwardBatch b;
    b.seqs.push_back(h.chunk(0, ids, 0, 12, true));
    edit(b.seqs[0]);
    return b;
  };
  expect_error(h.backend(), batch_with([](SequenceChunk& c) { c.tokens[3] = 1000; }), "token id 1000");
  expect_error(h.backend(), batch_with([](SequenceChunk& c) { c.tokens[3] = -5; }), "token id -5");
  expect_error(h.backend(), batch_with([](SequenceChunk& c) { c.tokens.clear(); }), "no tokens");
  expect_error(h.backend(), batch_with([](SequenceChunk& c) { c.start_pos = -1; }), "negative start_pos");
  expect_error(h.backend(), batch_with([](SequenceChunk& c) { c.start_pos = 4090; }), "max_position_embeddings");
  expect_error(h.backend(), batch_with([](SequenceChunk& c) { c.full_block_table.resize(2); }),
               "full_block_table has 2 entries");
  expect_error(h.backend(), batch_with([](SequenceChunk& c) { c.full_block_table[1] = 4; }), "full_block_table[1] = 4");
  expect_error(h.backend(), batch_with([](SequenceChunk& c) { c.sliding_block_table[2] = -1; }),
               "sliding_block_table[2] = -1");
  expect_error(h.backend(), batch_with([](SequenceChunk& c) { c.full_block_table[2] = c.full_block_table[0]; }),
               "same physical block");
  // A freed (-1) sliding block that the window still needs: position 9 sees 5..9, block 1.
  {
    ForwardBatch b;
    b.seqs.push_back(h.chunk(0, ids, 9, 10, false));
    b.seqs[0].sliding_block_table[1] = -1;
    expect_error(h.backend(), b, "sliding_block_table[1] = -1");
  }
  // Nothing above crashed or corrupted state: the same prefill still gives the same logits.
  EXPECT_EQ(h.full_prefill(0, ids), good);
}

TEST(CpuErrors, UnsupportedWeightDtypeIsAClearErrorAtConstruction) {
  LoadedModel model = make_synthetic_model(1);
  model.weights.layers[2].q_proj.dtype = DType::NVFP4;
  try {
    make_cpu_backend(model, 1);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.layers.2.self_attn.q_proj.weight"), std::string::npos) << e.what();
  }
  LoadedModel wrong_shape = make_synthetic_model(1);
  wrong_shape.weights.layers[1].o_proj.shape = {64, 63};
  EXPECT_THROW(make_cpu_backend(wrong_shape, 1), Error);
}

TEST(CpuErrors, EmptyBatchGivesNoLogits) {
  const LoadedModel model = make_synthetic_model(1);
  BackendHarness h(model, 1, kBlock, 1, 8);
  std::vector<float> logits = {1.0f};
  h.backend().forward(ForwardBatch{}, logits);
  EXPECT_TRUE(logits.empty());
}

}  // namespace
}  // namespace striker::test
