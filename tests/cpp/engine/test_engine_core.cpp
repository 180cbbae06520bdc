#include <gtest/gtest.h>

#include <map>
#include <random>

#include "core/error.h"
#include "engine/engine_core.h"
#include "engine/sampler.h"
#include "fakes.h"

using namespace striker;
using namespace striker::testing;

namespace {

// What a test sees of one request: per choice tokens, text and finish.
struct Collected {
  std::map<int32_t, std::vector<int32_t>> tokens;
  std::map<int32_t, std::string> text;
  std::map<int32_t, std::vector<std::string>> deltas;
  std::map<int32_t, FinishReason> finish;
  std::map<int32_t, std::optional<std::string>> stop_reason;
  std::map<int32_t, std::vector<TokenLogprob>> logprobs;
  std::vector<std::optional<TokenLogprob>> prompt_logprobs;
  int outputs = 0;
  int finished_outputs = 0;
  int64_t completion_tokens = 0;
};

struct Harness {
  std::map<std::string, Collected> got;
  std::unique_ptr<FakeBackend> backend;
  std::unique_ptr<EngineCore> core;

  Harness(EngineConfig cfg, std::vector<std::string> pieces = {}) {
    backend = std::make_unique<FakeBackend>(kTinyVocab, kTinyWindow);
    cfg.eos_token_ids = {kTinyEos};
    core = std::make_unique<EngineCore>(cfg, tiny_model(kTinyVocab, kTinyWindow, 256), *backend, piece_text(pieces));
  }
  void add(const std::string& id, std::vector<int32_t> prompt, SamplingParams p) {
    core->add_request({id, std::move(prompt), p}, [this](const RequestOutput& o) { record(o); });
  }
  void record(const RequestOutput& o) {
    Collected& c = got[o.request_id];
    ++c.outputs;
    if (o.finished) ++c.finished_outputs;
    c.completion_tokens = o.completion_tokens;
    if (!o.prompt_logprobs.empty()) c.prompt_logprobs = o.prompt_logprobs;
    for (const auto& d : o.choices) {
      auto& t = c.tokens[d.index];
      t.insert(t.end(), d.new_tokens.begin(), d.new_tokens.end());
      c.text[d.index] += d.new_text;
      c.deltas[d.index].push_back(d.new_text);
      auto& l = c.logprobs[d.index];
      l.insert(l.end(), d.logprobs.begin(), d.logprobs.end());
      if (d.finish) {
        c.finish[d.index] = *d.finish;
        c.stop_reason[d.index] = d.stop_reason;
      }
    }
  }
  int run(int max_steps = 10000) {
    int steps = 0;
    while (core->has_work() && steps < max_steps) {
      core->step();
      ++steps;
    }
    return steps;
  }
};

// Full pool of 12 blocks (48 tokens) for sequences up to 32 tokens: at most one fits for sure.
EngineConfig tiny_pool() {
  EngineConfig c = small_engine_config();
  c.max_model_len = 32;
  c.max_num_seqs = 4;
  c.kv_cache_bytes = 400 * 24;
  return c;
}

std::vector<int32_t> prompt_of(int n, int salt) {
  std::vector<int32_t> p;
  for (int i = 0; i < n; ++i) p.push_back((i * 7 + salt) % 30);
  return p;
}

}  // namespace

TEST(EngineCore, GreedyFollowsTheReferenceLogitsThroughTheKvCache) {
  Harness h(small_engine_config());
  SamplingParams p = greedy_params(20);
  auto prompt = prompt_of(23, 1);  // two chunks of prefill (budget 16)
  h.add("r", prompt, p);
  h.run();
  std::vector<int32_t> history = prompt, expected;
  for (int i = 0; i < 20; ++i) {
    auto row = reference_logits(history, kTinyVocab);
    int32_t best = int32_t(std::max_element(row.begin(), row.end()) - row.begin());
    expected.push_back(best);
    history.push_back(best);
  }
  EXPECT_EQ(h.got["r"].tokens[0], expected);
  EXPECT_EQ(h.got["r"].finish[0], FinishReason::Length);
  EXPECT_EQ(h.got["r"].finished_outputs, 1);
  EXPECT_EQ(h.core->kv().full_pool().num_used(), 0);
  EXPECT_EQ(h.core->kv().sliding_pool().num_used(), 0);
}

TEST(EngineCore, SeededTokensDoNotDependOnBatchOrPreemption) {
  const std::vector<std::pair<int, int>> shapes = {{5, 12}, {9, 14}, {13, 10}, {3, 16}, {11, 12}};
  std::map<std::string, std::vector<int32_t>> alone;
  for (size_t i = 0; i < shapes.size(); ++i) {
    Harness h(small_engine_config());
    h.add("r" + std::to_string(i), prompt_of(shapes[i].first, int(i)), seeded_params(100 + i, shapes[i].second));
    h.run();
    alone["r" + std::to_string(i)] = h.got["r" + std::to_string(i)].tokens[0];
    ASSERT_EQ(int(alone["r" + std::to_string(i)].size()), shapes[i].second);
  }
  for (auto cfg : {small_engine_config(), tiny_pool()}) {
    Harness h(cfg);
    for (size_t i = shapes.size(); i-- > 0;)  // reverse arrival order
      h.add("r" + std::to_string(i), prompt_of(shapes[i].first, int(i)), seeded_params(100 + i, shapes[i].second));
    h.run();
    for (const auto& [id, toks] : alone) EXPECT_EQ(h.got[id].tokens[0], toks) << id;
    if (cfg.kv_cache_bytes == tiny_pool().kv_cache_bytes) EXPECT_GT(h.core->stats().num_preemptions, 0);
    EXPECT_EQ(h.core->kv().full_pool().num_used(), 0);
    EXPECT_EQ(h.core->kv().sliding_pool().num_used(), 0);
  }
}

TEST(EngineCore, BudgetAndSeqLimitsHoldEveryStep) {
  Harness h(tiny_pool());
  for (int i = 0; i < 6; ++i) h.add("r" + std::to_string(i), prompt_of(10 + i, i), seeded_params(i, 12));
  int steps = 0;
  while (h.core->has_work() && steps++ < 1000) {
    h.core->step();
    const StepPlan& p = h.core->last_plan();
    EXPECT_LE(p.num_tokens(), 16);
    EXPECT_LE(p.chunks.size(), 4u);
    for (auto* s : h.core->scheduler().running())
      EXPECT_LE(s->blocks.num_sliding_held(), ceil_div(kTinyWindow + 16 - 1, 4) + 1);
  }
  EXPECT_FALSE(h.core->has_work());
  for (int i = 0; i < 6; ++i) EXPECT_EQ(h.got["r" + std::to_string(i)].tokens[0].size(), 12u);
}

TEST(EngineCore, AbortFreesEverythingAtOnce) {
  Harness h(small_engine_config());
  h.add("a", prompt_of(6, 1), seeded_params(1, 30));
  h.add("b", prompt_of(6, 2), seeded_params(2, 5));
  h.core->step();
  h.core->step();
  const int64_t used_before = h.core->kv().full_pool().num_used();
  h.core->abort_request("a");
  EXPECT_EQ(h.got["a"].finish[0], FinishReason::Abort);
  EXPECT_EQ(h.got["a"].finished_outputs, 1);
  EXPECT_LT(h.core->kv().full_pool().num_used(), used_before);
  EXPECT_EQ(h.core->scheduler().running().size(), 1u);
  h.core->abort_request("a");        // a second abort is a no-op
  h.core->abort_request("unknown");  // so is an unknown id
  h.run();
  EXPECT_EQ(h.got["b"].finish[0], FinishReason::Length);
  EXPECT_EQ(h.got["a"].finished_outputs, 1);
  EXPECT_EQ(h.core->kv().full_pool().num_used(), 0);
  EXPECT_EQ(h.core->kv().sliding_pool().num_used(), 0);
  EXPECT_FALSE(h.core->has_work());
}

TEST(EngineCore, NChoicesAreIndependentSequences) {
  Harness h(small_engine_config());
  SamplingParams p = seeded_params(7, 10);
  p.n = 3;
  h.add("r", prompt_of(5, 3), p);
  h.run();
  Collected& c = h.got["r"];
  ASSERT_EQ(c.tokens.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(c.tokens[i].size(), 10u);
  EXPECT_NE(c.tokens[0], c.tokens[1]);
  EXPECT_NE(c.tokens[1], c.tokens[2]);
  EXPECT_EQ(c.finished_outputs, 1);
  EXPECT_EQ(c.completion_tokens, 30);
  // Same seed, same request: every choice reproduces.
  Harness again(small_engine_config());
  again.add("r", prompt_of(5, 3), p);
  again.run();
  EXPECT_EQ(again.got["r"].tokens, c.tokens);
}

TEST(EngineCore, UnseededRequestsFollowTheEngineSeed) {
  auto run_with = [](uint64_t engine_seed) {
    EngineConfig cfg = small_engine_config();
    cfg.seed = engine_seed;
    Harness h(cfg);
    SamplingParams p;
    p.max_tokens = 12;
    p.ignore_eos = true;
    h.add("r", prompt_of(4, 0), p);
    h.run();
    return h.got["r"].tokens[0];
  };
  EXPECT_EQ(run_with(5), run_with(5));
  EXPECT_NE(run_with(5), run_with(6));
}

TEST(EngineCore, MinTokensSuppressesEosThenEosStops) {
  Harness h(small_engine_config());
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = 10;
  p.min_tokens = 3;
  p.logit_bias = {{kTinyEos, 100.f}};
  h.add("r", prompt_of(4, 0), p);
  h.run();
  auto& t = h.got["r"].tokens[0];
  ASSERT_EQ(t.size(), 4u);
  for (int i = 0; i < 3; ++i) EXPECT_NE(t[size_t(i)], kTinyEos);
  EXPECT_EQ(t[3], kTinyEos);
  EXPECT_EQ(h.got["r"].finish[0], FinishReason::Stop);
  EXPECT_FALSE(h.got["r"].stop_reason[0].has_value());  // eos: no stop_reason, as vLLM
}

TEST(EngineCore, IgnoreEosAndStopTokenIds) {
  Harness h(small_engine_config());
  SamplingParams p = greedy_params(5);
  p.logit_bias = {{kTinyEos, 100.f}};
  h.add("ign", prompt_of(4, 0), p);
  SamplingParams q;
  q.temperature = 0;
  q.max_tokens = 5;
  q.stop_token_ids = {9};
  q.logit_bias = {{9, 100.f}};
  h.add("stop", prompt_of(4, 0), q);
  h.run();
  EXPECT_EQ(h.got["ign"].tokens[0], std::vector<int32_t>(5, kTinyEos));
  EXPECT_EQ(h.got["ign"].finish[0], FinishReason::Length);
  EXPECT_EQ(h.got["stop"].tokens[0], std::vector<int32_t>{9});
  EXPECT_EQ(h.got["stop"].finish[0], FinishReason::Stop);
  EXPECT_EQ(h.got["stop"].stop_reason[0], "9");
}

TEST(EngineCore, StopStringAcrossTokenBoundaries) {
  // Every token reads "ab": the text is abab..., and "bab" spans two tokens.
  Harness h(small_engine_config(), std::vector<std::string>(kTinyVocab, "ab"));
  SamplingParams p = seeded_params(3, 10);
  p.stop = {"bab"};
  h.add("r", prompt_of(4, 0), p);
  SamplingParams q = seeded_params(3, 3);
  q.stop = {"abc"};  // never matches: held text comes out at the end
  h.add("held", prompt_of(4, 0), q);
  h.run();
  EXPECT_EQ(h.got["r"].text[0], "a");
  EXPECT_EQ(h.got["r"].deltas[0], (std::vector<std::string>{"a", ""}));
  EXPECT_EQ(h.got["r"].tokens[0].size(), 2u);
  EXPECT_EQ(h.got["r"].finish[0], FinishReason::Stop);
  EXPECT_EQ(h.got["r"].stop_reason[0], "bab");
  EXPECT_EQ(h.got["held"].deltas[0], (std::vector<std::string>{"", "ab", "abab"}));
  EXPECT_EQ(h.got["held"].finish[0], FinishReason::Length);
}

TEST(EngineCore, LogprobsAndChunkedPromptLogprobs) {
  EngineConfig cfg = small_engine_config();
  cfg.max_num_batched_tokens = 8;  // the 11-token prompt takes two chunks
  Harness h(cfg);
  SamplingParams p = seeded_params(4, 3);
  p.logprobs = 2;
  p.prompt_logprobs = 1;
  auto prompt = prompt_of(11, 5);
  h.add("r", prompt, p);
  h.run();
  Collected& c = h.got["r"];
  ASSERT_EQ(c.prompt_logprobs.size(), prompt.size());
  EXPECT_FALSE(c.prompt_logprobs[0].has_value());
  for (size_t j = 1; j < prompt.size(); ++j) {
    std::vector<int32_t> hist(prompt.begin(), prompt.begin() + long(j));
    TokenLogprob want = token_logprob(reference_logits(hist, kTinyVocab), prompt[j], 1);
    ASSERT_TRUE(c.prompt_logprobs[j].has_value()) << j;
    EXPECT_EQ(c.prompt_logprobs[j]->token, prompt[j]);
    EXPECT_FLOAT_EQ(c.prompt_logprobs[j]->logprob, want.logprob) << j;
    EXPECT_EQ(c.prompt_logprobs[j]->top, want.top) << j;
  }
  ASSERT_EQ(c.logprobs[0].size(), 3u);
  std::vector<int32_t> hist = prompt;
  for (int i = 0; i < 3; ++i) {
    TokenLogprob want = token_logprob(reference_logits(hist, kTinyVocab), c.tokens[0][size_t(i)], 2);
    EXPECT_FLOAT_EQ(c.logprobs[0][size_t(i)].logprob, want.logprob);
    EXPECT_EQ(c.logprobs[0][size_t(i)].top, want.top);
    hist.push_back(c.tokens[0][size_t(i)]);
  }
}

TEST(EngineCore, RejectsRequestsThatCanNeverRun) {
  Harness h(tiny_pool());
  auto error_of = [&](std::vector<int32_t> prompt, SamplingParams p) -> std::string {
    try {
      h.add("x", std::move(prompt), p);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  SamplingParams ok;
  ok.max_tokens = 4;
  EXPECT_NE(error_of(prompt_of(30, 0), ok).find("maximum context length is 32 tokens"), std::string::npos);
  EXPECT_NE(error_of({}, ok).find("prompt is empty"), std::string::npos);
  EXPECT_NE(error_of({1, 40}, ok).find("prompt token id 40 is outside the vocabulary"), std::string::npos);
  SamplingParams bad = ok;
  bad.n = 0;
  EXPECT_NE(error_of({1}, bad).find("n must be between 1 and 4"), std::string::npos);
  bad = ok;
  bad.logit_bias = {{99, 1.f}};
  EXPECT_NE(error_of({1}, bad).find("logit_bias token id 99"), std::string::npos);
  bad = ok;
  bad.top_p = 0;
  EXPECT_NE(error_of({1}, bad).find("top_p"), std::string::npos);
  bad = ok;
  bad.temperature = -1;
  EXPECT_NE(error_of({1}, bad).find("temperature"), std::string::npos);
  EXPECT_EQ(error_of({1}, ok), "");
  EXPECT_NE(error_of({1}, ok).find("already in use"), std::string::npos);
  EXPECT_EQ(h.core->stats().num_waiting, 1);
}

TEST(EngineCore, StatsReportCapacityAndCounters) {
  Harness h(tiny_pool());
  EngineStats s0 = h.core->stats();
  EXPECT_EQ(s0.kv_capacity_tokens, 48);
  EXPECT_EQ(s0.max_concurrency, 1);
  h.add("a", prompt_of(6, 0), seeded_params(1, 4));
  h.core->step();
  EngineStats s1 = h.core->stats();
  EXPECT_EQ(s1.num_running, 1);
  EXPECT_DOUBLE_EQ(s1.kv_usage, 2.0 / 12);
  h.run();
  EngineStats s2 = h.core->stats();
  EXPECT_EQ(s2.prompt_tokens_total, 6);
  EXPECT_EQ(s2.generation_tokens_total, 4);
  EXPECT_EQ(s2.num_running, 0);
  EXPECT_EQ(s2.kv_usage, 0);
}

namespace {
class ThrowsOnFive : public TokenTextStream {
 public:
  std::string push(int32_t id) override {
    if (id == 5) throw Error("token 5 cannot be decoded");
    return "x";
  }
  std::string flush() override { return ""; }
};
}  // namespace

TEST(EngineCore, AFailingRequestIsAbortedAloneAndItsBlocksFreed) {
  FakeBackend backend(kTinyVocab, kTinyWindow);
  EngineCore core(small_engine_config(), tiny_model(kTinyVocab, kTinyWindow, 256), backend,
                  [](bool) { return std::make_unique<ThrowsOnFive>(); });
  std::map<std::string, std::optional<FinishReason>> finish;
  std::map<std::string, std::string> text;
  auto cb = [&](const RequestOutput& o) {
    for (const auto& d : o.choices) {
      text[o.request_id] += d.new_text;
      if (d.finish) finish[o.request_id] = d.finish;
    }
  };
  SamplingParams bad;
  bad.temperature = 0;
  bad.max_tokens = 6;
  bad.logit_bias = {{5, 100.f}};
  SamplingParams good = bad;
  good.logit_bias = {{5, -100.f}};
  core.add_request({"bad", {1, 2, 3}, bad}, cb);
  core.add_request({"good", {1, 2, 3}, good}, cb);
  while (core.has_work()) core.step();
  EXPECT_EQ(finish["bad"], FinishReason::Abort);
  EXPECT_EQ(finish["good"], FinishReason::Length);
  EXPECT_EQ(text["good"], "xxxxxx");
  EXPECT_EQ(core.kv().full_pool().num_used(), 0);
}

TEST(EngineCore, PromptLogprobsCapTheChunkSize) {
  EngineConfig cfg = small_engine_config();
  cfg.max_model_len = 600;
  cfg.max_num_batched_tokens = 512;
  cfg.kv_cache_bytes = 400 * 2000;
  FakeBackend backend(kTinyVocab, kTinyWindow);
  EngineCore core(cfg, tiny_model(kTinyVocab, kTinyWindow, 1024), backend, piece_text({}));
  SamplingParams p = seeded_params(1, 1);
  p.prompt_logprobs = 0;
  core.add_request({"r", prompt_of(300, 0), p}, [](const RequestOutput&) {});
  core.step();
  EXPECT_EQ(core.last_plan().chunks.at(0).count, 256);
  core.step();
  EXPECT_EQ(core.last_plan().chunks.at(0).count, 44);
  EXPECT_FALSE(core.has_work());
}

TEST(EngineCore, ParallelSamplingMatchesOneThread) {
  auto run = [](int threads) {
    EngineConfig cfg = small_engine_config();
    cfg.sampler_threads = threads;
    Harness h(cfg);
    for (int i = 0; i < 7; ++i) {
      SamplingParams p = seeded_params(uint64_t(50 + i), 10);
      p.top_k = 5;
      p.logprobs = 1;
      p.frequency_penalty = 0.5f;
      h.add("r" + std::to_string(i), prompt_of(4 + i, i), p);
    }
    h.run();
    std::map<std::string, std::vector<int32_t>> out;
    for (auto& [id, c] : h.got) out[id] = c.tokens[0];
    return out;
  };
  auto one = run(1);
  EXPECT_EQ(one.size(), 7u);
  EXPECT_EQ(run(5), one);
}

TEST(EngineCore, RandomWorkloadUnderATinyPoolAlwaysDrains) {
  // Random prompts, parameters, arrivals and aborts: every request ends exactly once, limits
  // hold every step, and both pools are empty at the end.
  std::mt19937 rng(2024);
  Harness h(tiny_pool(), std::vector<std::string>(kTinyVocab, "ab"));
  int added = 0;
  std::vector<std::string> live;
  for (int step = 0; step < 3000 && (added < 60 || h.core->has_work()); ++step) {
    if (added < 60 && rng() % 3 == 0) {
      SamplingParams p;
      p.max_tokens = 1 + int32_t(rng() % 16);
      p.min_tokens = int32_t(rng() % uint32_t(p.max_tokens + 1));
      p.temperature = (rng() % 4 == 0) ? 0.f : 0.7f;
      p.top_k = int32_t(rng() % 8);
      p.top_p = (rng() % 2) ? 1.f : 0.8f;
      p.n = 1 + int32_t(rng() % 3);
      p.repetition_penalty = (rng() % 3 == 0) ? 1.3f : 1.f;
      if (rng() % 3 == 0) p.stop = {"bab"};
      if (rng() % 4 == 0) p.logprobs = 2;
      if (rng() % 5 == 0) p.prompt_logprobs = 1;
      const int len = 1 + int(rng() % uint32_t(32 - p.max_tokens));
      const std::string id = "q" + std::to_string(added++);
      h.add(id, prompt_of(len, added), p);
      live.push_back(id);
    }
    if (!live.empty() && rng() % 25 == 0) h.core->abort_request(live[rng() % live.size()]);
    if (h.core->has_work()) h.core->step();
    EXPECT_LE(h.core->last_plan().num_tokens(), 16);
    EXPECT_LE(h.core->scheduler().running().size(), 4u);
  }
  EXPECT_FALSE(h.core->has_work());
  EXPECT_EQ(added, 60);
  for (int i = 0; i < 60; ++i) EXPECT_EQ(h.got["q" + std::to_string(i)].finished_outputs, 1) << i;
  EXPECT_EQ(h.core->kv().full_pool().num_used(), 0);
  EXPECT_EQ(h.core->kv().sliding_pool().num_used(), 0);
  EXPECT_GT(h.core->stats().num_preemptions, 0);
}
