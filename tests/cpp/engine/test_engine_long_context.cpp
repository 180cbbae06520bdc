// One request at Flint's full context (262,144 tokens) through the engine's host-side logic, as
// `striker serve --max-model-len 262144 --max-num-batched-tokens 8192` runs it: the KV pools sized
// for one max-length sequence, the prompt prefilled in 8,192-token chunks over block tables of
// 16,384 entries, the sliding pool recycled over the whole prompt, and the last token landing
// exactly on max_model_len. The fake backend reads every position back from its pools.
#include <gtest/gtest.h>

#include <algorithm>

#include "core/error.h"
#include "engine/engine_core.h"
#include "fakes.h"

using namespace striker;
using namespace striker::testing;

namespace {

constexpr int64_t kVocab = 64, kWindow = 513, kMaxLen = 262144;
constexpr int32_t kChunk = 8192, kBlock = 16, kOutput = 144;

EngineConfig full_context_config() {
  EngineConfig c;
  c.max_model_len = kMaxLen;
  c.max_num_seqs = 2;
  c.max_num_batched_tokens = kChunk;
  c.block_size = kBlock;
  // The fake backend's blocks cost 100 bytes a token in each pool: one max-length sequence in the
  // full pool and ~600 sliding blocks (what plan_kv_pools asks for at this chunk size), no more.
  c.kv_cache_bytes = (kMaxLen / kBlock + 600) * 100 * kBlock;
  c.eos_token_ids = {int32_t(kVocab - 1)};
  return c;
}

std::vector<int32_t> long_prompt(int64_t n) {
  std::vector<int32_t> p(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) p[size_t(i)] = int32_t((i * 7 + i / 1000) % (kVocab - 1));
  return p;
}

}  // namespace

TEST(EngineLongContext, OneRequestFillsTheWholeContext) {
  FakeBackend backend(kVocab, kWindow);
  EngineCore core(full_context_config(), tiny_model(kVocab, kWindow, kMaxLen), backend, piece_text({}));
  EXPECT_GE(core.stats().kv_capacity_tokens, kMaxLen);

  const std::vector<int32_t> prompt = long_prompt(kMaxLen - kOutput);
  SamplingParams p = greedy_params(kOutput);
  std::vector<int32_t> got;
  std::optional<FinishReason> finish;
  core.add_request({"long", prompt, p}, [&](const RequestOutput& o) {
    for (const auto& c : o.choices) {
      got.insert(got.end(), c.new_tokens.begin(), c.new_tokens.end());
      if (c.finish) finish = c.finish;
    }
  });
  int steps = 0, prefill_steps = 0;
  while (core.has_work() && steps < 1000) {
    core.step();
    ++steps;
    const int64_t tokens = core.last_plan().num_tokens();
    EXPECT_LE(tokens, kChunk);
    if (tokens > 1) ++prefill_steps;
  }
  EXPECT_EQ(prefill_steps, int((prompt.size() + kChunk - 1) / kChunk));  // 32 chunks
  ASSERT_EQ(finish, FinishReason::Length);
  // Greedy tokens of the fake's logits over the whole history: every position read back right.
  std::vector<int32_t> history = prompt, expected;
  for (int i = 0; i < kOutput; ++i) {
    const auto row = reference_logits(history, kVocab);
    expected.push_back(int32_t(std::max_element(row.begin(), row.end()) - row.begin()));
    history.push_back(expected.back());
  }
  EXPECT_EQ(got, expected);
  EXPECT_EQ(int64_t(prompt.size() + got.size()), kMaxLen);
  EXPECT_EQ(core.kv().full_pool().num_used(), 0);
  EXPECT_EQ(core.kv().sliding_pool().num_used(), 0);

  // One token more than the context is refused up front, with vLLM's message.
  try {
    core.add_request({"over", long_prompt(kMaxLen - kOutput + 1), p}, [](const RequestOutput&) {});
    FAIL() << "a request past max_model_len was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("maximum context length is 262144 tokens"), std::string::npos) << e.what();
  }
}

TEST(EngineLongContext, APoolBelowOneFullContextIsAStartupError) {
  EngineConfig c = full_context_config();
  c.kv_cache_bytes = (kMaxLen / kBlock - 1) * 100 * kBlock;
  FakeBackend backend(kVocab, kWindow);
  try {
    EngineCore core(c, tiny_model(kVocab, kWindow, kMaxLen), backend, piece_text({}));
    FAIL() << "an engine whose KV pool cannot hold 262,144 tokens started";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("fewer than max_model_len 262144"), std::string::npos) << e.what();
  }
}
