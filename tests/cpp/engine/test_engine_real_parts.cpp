// The engine with real parts: the CPU reference backend on a random model (batched, chunked
// and preempted runs give the same tokens as each request alone) and the real tokenizer's
// streaming decode (text deltas, stop strings across token boundaries).
#include <gtest/gtest.h>

#include <condition_variable>
#include <map>
#include <mutex>
#include <random>

#include "backends/cpu/cpu_backend.h"
#include "cpu/synthetic_model.h"
#include "engine/engine_core.h"
#include "fakes.h"
#include "tokenizer/tokenizer.h"

using namespace striker;
using namespace striker::testing;

namespace {

using Tokens = std::map<std::string, std::vector<int32_t>>;

struct Job {
  std::string id;
  std::vector<int32_t> prompt;
  SamplingParams params;
};

std::vector<Job> jobs() {
  std::mt19937 rng(11);
  std::vector<Job> out;
  const int lens[] = {9, 17, 23, 30, 5};
  for (int i = 0; i < 5; ++i) {
    Job j;
    j.id = "r" + std::to_string(i);
    for (int k = 0; k < lens[i]; ++k) j.prompt.push_back(int32_t(rng() % 1000));
    j.params.seed = 1000 + uint64_t(i);
    j.params.max_tokens = 12 + i;
    j.params.top_k = 50;
    j.params.ignore_eos = true;
    if (i == 3) j.params.temperature = 0;
    if (i == 4) j.params.n = 2;
    out.push_back(j);
  }
  return out;
}

Tokens run_core(const LoadedModel& model, const EngineConfig& cfg, const std::vector<Job>& js, int64_t* preemptions,
               EngineStats* stats = nullptr) {
  auto backend = make_cpu_backend(model, 2);
  EngineCore core(cfg, model.config, *backend, piece_text({}));
  Tokens got;
  for (const auto& j : js)
    core.add_request({j.id, j.prompt, j.params}, [&](const RequestOutput& o) {
      for (const auto& d : o.choices) {
        auto& t = got[o.request_id + "/" + std::to_string(d.index)];
        t.insert(t.end(), d.new_tokens.begin(), d.new_tokens.end());
      }
    });
  int steps = 0;
  while (core.has_work() && steps++ < 5000) core.step();
  if (preemptions) *preemptions = core.stats().num_preemptions;
  if (stats) *stats = core.stats();
  return got;
}

}  // namespace

TEST(EngineCpu, BatchedChunkedPreemptedRunsMatchEachRequestAlone) {
  const LoadedModel model = striker::test::make_synthetic_model(3);
  auto probe = make_cpu_backend(model, 1);
  const int64_t fb = probe->full_block_bytes(4), sb = probe->sliding_block_bytes(4);
  EngineConfig roomy;
  roomy.max_model_len = 48;
  roomy.max_num_seqs = 4;
  roomy.max_num_batched_tokens = 16;  // prompts take up to two chunks
  roomy.block_size = 4;
  roomy.kv_cache_bytes = 1000 * (fb + sb);
  Tokens alone;
  for (const auto& j : jobs()) {
    Tokens one = run_core(model, roomy, {j}, nullptr);
    alone.insert(one.begin(), one.end());
  }
  ASSERT_EQ(alone.size(), 6u);
  EXPECT_NE(alone["r4/0"], alone["r4/1"]);

  EngineConfig tight = roomy;
  tight.max_num_seqs = 6;
  tight.kv_cache_bytes = 24 * sb + 8 * fb;  // 23 full and 14 sliding blocks: both pools run out
  int64_t preemptions = 0;
  Tokens together = run_core(model, tight, jobs(), &preemptions);
  EXPECT_GT(preemptions, 0);
  for (const auto& [id, toks] : alone) EXPECT_EQ(together[id], toks) << id;
}

// N-gram speculation on the CPU reference backend: a step over the last token and the guesses
// computes each row with the same arithmetic as one-token steps, so the outputs are the same bits
// (greedy and seeded alike) while guesses are accepted.
TEST(EngineCpu, SpeculationGivesTheTokensOfPlainDecoding) {
  const LoadedModel model = striker::test::make_synthetic_model(3);
  auto probe = make_cpu_backend(model, 1);
  EngineConfig cfg;
  cfg.max_model_len = 96;
  cfg.max_num_seqs = 4;
  cfg.max_num_batched_tokens = 32;
  cfg.block_size = 4;
  cfg.kv_cache_bytes = 1000 * (probe->full_block_bytes(4) + probe->sliding_block_bytes(4));
  std::vector<Job> js;
  std::mt19937 rng(5);
  for (int i = 0; i < 6; ++i) {
    Job j;
    j.id = "s" + std::to_string(i);
    const int period = 2 + i % 3;
    for (int k = 0; k < 30; ++k) j.prompt.push_back(int32_t(k % period == 0 ? rng() % 1000 : 7 * (k % period)));
    j.params.seed = 77 + uint64_t(i);
    j.params.max_tokens = 40;
    j.params.ignore_eos = true;
    j.params.temperature = i % 2 ? 0.f : 0.2f;
    j.params.n = i == 4 ? 2 : 1;
    js.push_back(j);
  }
  const Tokens plain = run_core(model, cfg, js, nullptr);
  cfg.speculative = SpeculativeConfig{4, 1, 3, 0};
  EngineStats stats;
  const Tokens fast = run_core(model, cfg, js, nullptr, &stats);
  ASSERT_EQ(plain.size(), 7u);
  for (const auto& [id, toks] : plain) EXPECT_EQ(fast.at(id), toks) << id;
  EXPECT_GT(stats.spec_num_drafts, 0);
  EXPECT_GT(stats.spec_num_accepted_tokens, 0);
}

TEST(EngineTokenizer, StreamedTextMatchesDecodeAndStopsAcrossTokens) {
  auto tok = Tokenizer::from_dir(std::string(STRIKER_SHARED_DIR) + "/fixtures/flint-tokenizer");
  const int64_t V = tok->vocab_size();
  EngineConfig cfg;
  cfg.max_model_len = 64;
  cfg.max_num_seqs = 2;
  cfg.max_num_batched_tokens = 32;
  cfg.block_size = 4;
  cfg.kv_cache_bytes = 400 * 200;
  auto run = [&](SamplingParams p, std::vector<int32_t>* tokens) {
    auto engine = make_engine(cfg, tiny_model(V, 8, 256), std::make_unique<FakeBackend>(V, 8), *tok);
    std::mutex mu;
    std::condition_variable cv;
    std::string text;
    std::optional<FinishReason> finish;
    engine->add_request({"t", tok->encode("Hello, streaming world"), p}, [&](const RequestOutput& o) {
      std::lock_guard lock(mu);
      for (const auto& d : o.choices) {
        text += d.new_text;
        tokens->insert(tokens->end(), d.new_tokens.begin(), d.new_tokens.end());
        if (d.finish) finish = d.finish;
      }
      cv.notify_all();
    });
    std::unique_lock lock(mu);
    EXPECT_TRUE(cv.wait_for(lock, std::chrono::seconds(20), [&] { return finish.has_value(); }));
    return std::make_pair(text, finish.value_or(FinishReason::Abort));
  };
  SamplingParams p = greedy_params(8);
  std::vector<int32_t> toks;
  auto [text, finish] = run(p, &toks);
  ASSERT_EQ(toks.size(), 8u);
  EXPECT_EQ(finish, FinishReason::Length);
  EXPECT_EQ(text, tok->decode(toks, true));

  // A stop string made of the text of tokens 1 and 2: it spans a token boundary.
  const auto prefix_len = [&](size_t n) { return tok->decode(std::span(toks).first(n), true).size(); };
  const std::string stop = text.substr(prefix_len(1), prefix_len(3) - prefix_len(1));
  ASSERT_FALSE(stop.empty());
  p.stop = {stop};
  std::vector<int32_t> toks2;
  auto [text2, finish2] = run(p, &toks2);
  EXPECT_EQ(finish2, FinishReason::Stop);
  EXPECT_EQ(text2, text.substr(0, text.find(stop)));
  EXPECT_LE(toks2.size(), 3u);
}
