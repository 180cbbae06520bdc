// Async scheduling (EngineConfig::async_scheduling, engine_core_async.cpp): the engine launches
// step n + 1 before it reads step n's tokens, the backend taking n + 1's tokens from n's draws.
// Driven by a fake that resolves those tokens itself and whose logits depend on every token it
// reads back from its KV pools: every output must equal the synchronous engine's, steps must
// actually go ahead, and aborts, stops, failures and the fallbacks to one step at a time must
// leave nothing behind.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>

#include "engine/engine_core.h"
#include "engine/grammar/structured_output.h"
#include "engine/host_sampled_steps.h"
#include "fakes.h"

using namespace striker;
using namespace striker::testing;

namespace {

struct Outputs {
  std::map<std::string, std::map<int32_t, std::vector<int32_t>>> tokens;
  std::map<std::string, std::map<int32_t, std::string>> text;
  std::map<std::string, std::map<int32_t, int>> finish;
  std::map<std::string, std::map<int32_t, std::vector<std::pair<int32_t, float>>>> logprobs;  // by choice
  std::map<std::string, int64_t> completion_tokens;
  int64_t generation_tokens_total = 0;  // the engine's counter (vllm:generation_tokens_total)
  int64_t stopped_choices = 0;          // choices that ended on a stop token or string
  int64_t preemptions = 0;              // not compared: the two engines' plans may differ
  bool operator==(const Outputs& o) const {
    return tokens == o.tokens && text == o.text && finish == o.finish && logprobs == o.logprobs &&
           completion_tokens == o.completion_tokens && generation_tokens_total == o.generation_tokens_total &&
           stopped_choices == o.stopped_choices;
  }
};

std::vector<std::string> letter_pieces() {
  std::vector<std::string> pieces;
  for (int64_t v = 0; v < kTinyVocab; ++v) pieces.push_back(std::string(1, char('a' + v % 26)));
  return pieces;
}

// A regex grammar over the letter pieces, for the requests that carry one.
std::shared_ptr<const grammar::CompiledGrammar> letters_grammar() {
  static const auto compiled = [] {
    grammar::StructuredOutputSpec spec;
    spec.kind = grammar::StructuredOutputSpec::Kind::Regex;
    spec.text = "[a-h]+";
    auto vocab = std::make_shared<grammar::TokenVocabulary>(letter_pieces(), std::vector<int32_t>{kTinyEos});
    return grammar::compile_structured_output(spec, vocab);
  }();
  return compiled;
}

// Requests that async scheduling can run ahead of (no penalties, no prompt logprobs), with stop
// strings, eos, n > 1, min_tokens, logprobs, and now and then a grammar (admitted by a step
// launched ahead, its masks read by that step; its own next steps run one at a time); `mixed`
// draws every knob instead.
SamplingParams params_for(std::mt19937& rng, bool mixed, bool grammars, bool penalties) {
  if (mixed) return random_sampling_params(rng, kTinyVocab, kTinyEos, 14, 3);
  SamplingParams p;
  p.seed = rng();
  p.max_tokens = 1 + int32_t(rng() % 20);
  p.min_tokens = int32_t(rng() % uint32_t(p.max_tokens + 1)) / 2;
  p.temperature = (rng() % 4 == 0) ? 0.f : 0.5f + float(rng() % 8) * 0.1f;
  p.top_k = int32_t(rng() % 6);
  p.n = 1 + int32_t(rng() % 3);
  if (rng() % 3 == 0) p.stop = {"cd"};
  if (rng() % 3 == 0) p.logprobs = int32_t(rng() % 3);
  if (rng() % 4 == 0) p.logit_bias = {{int32_t(rng() % uint64_t(kTinyVocab)), 2.0f}};
  if (grammars && rng() % 8 == 0) p.structured = StructuredConstraint{letters_grammar(), -1};
  if (penalties) {
    p.repetition_penalty = (rng() % 2) ? 1.3f : 1.f;
    p.frequency_penalty = (rng() % 2) ? 0.6f : 0.f;
    p.presence_penalty = (rng() % 2) ? -0.4f : 0.5f;
  }
  return p;
}

struct Workload {
  uint64_t seed = 1;
  bool mixed = false;
  int requests = 40;
  int64_t kv_blocks = 24;   // small enough to preempt
  int abort_every = 0;      // > 0: about one request in this many is aborted while running
  bool grammars = false;    // now and then a request with a grammar
  bool penalties = false;   // every request with a penalty
};

// Runs the workload to completion; `aborted` collects the ids aborted on the way.
Outputs run(Backend& backend, const Workload& w, bool async, std::set<std::string>* aborted = nullptr,
            int64_t* ahead = nullptr) {
  EngineConfig cfg;
  cfg.max_model_len = 40;
  cfg.max_num_seqs = 4;
  cfg.max_num_batched_tokens = 16;
  cfg.block_size = 4;
  cfg.kv_cache_bytes = 400 * w.kv_blocks;
  cfg.eos_token_ids = {kTinyEos};
  cfg.sampler_threads = 1;
  cfg.async_scheduling = async;
  EngineCore core(cfg, tiny_model(kTinyVocab, kTinyWindow, 256), backend, piece_text(letter_pieces()));
  Outputs out;
  auto record = [&out](const RequestOutput& o) {
    for (const auto& d : o.choices) {
      auto& t = out.tokens[o.request_id][d.index];
      t.insert(t.end(), d.new_tokens.begin(), d.new_tokens.end());
      out.text[o.request_id][d.index] += d.new_text;
      if (d.finish) out.finish[o.request_id][d.index] = int(*d.finish);
      for (const auto& l : d.logprobs) out.logprobs[o.request_id][d.index].emplace_back(l.token, l.logprob);
    }
    if (o.finished) out.completion_tokens[o.request_id] = o.completion_tokens;
  };
  std::mt19937 rng{uint32_t(w.seed)};
  std::mt19937 abort_rng{uint32_t(w.seed) + 99};
  int added = 0;
  for (int step = 0; step < 20000 && (added < w.requests || core.has_work()); ++step) {
    if (added < w.requests && rng() % 3 == 0) {
      const SamplingParams p = params_for(rng, w.mixed, w.grammars, w.penalties);
      const int len = 1 + int(rng() % uint32_t(cfg.max_model_len - p.max_tokens - 1));
      std::vector<int32_t> prompt;
      for (int i = 0; i < len; ++i) prompt.push_back(int32_t(rng() % 30));
      core.add_request({"q" + std::to_string(added++), prompt, p}, record);
    }
    // Aborts land between step() calls, where an async engine has a step in flight.
    if (w.abort_every > 0 && added > 0 && abort_rng() % uint32_t(w.abort_every * 4) == 0) {
      const std::string id = "q" + std::to_string(abort_rng() % uint32_t(added));
      if (!out.completion_tokens.count(id) && aborted) aborted->insert(id);
      core.abort_request(id);
    }
    if (core.has_work()) core.step();
  }
  EXPECT_FALSE(core.has_work());
  EXPECT_EQ(core.stats().kv_usage, 0.0) << "blocks left allocated after every request ended";
  if (ahead) *ahead = core.stats().async_ahead_steps;
  out.generation_tokens_total = core.stats().generation_tokens_total;
  out.preemptions = core.stats().num_preemptions;
  for (const auto& [id, choices] : out.finish)
    for (const auto& [c, f] : choices) out.stopped_choices += f == int(FinishReason::Stop);
  return out;
}

// The workload one step at a time and with async scheduling, each on a fresh fake.
struct Both {
  Outputs sync, async;
  int64_t sync_samples = 0, async_samples = 0, launches = 0, ahead = 0, engine_ahead = 0, resolved = 0;
  size_t uncollected = 0;
  std::set<std::string> aborted_sync, aborted_async;
};

Both run_both(const Workload& w, DeviceLogprobLimits limits = {4, 8, 8}) {
  DeviceSamplingFake sync_backend(kTinyVocab, kTinyWindow);
  AsyncDeviceSamplingFake async_backend(kTinyVocab, kTinyWindow);
  sync_backend.limits_ = async_backend.limits_ = limits;
  Both r;
  r.sync = run(sync_backend, w, false, &r.aborted_sync);
  r.async = run(async_backend, w, true, &r.aborted_async, &r.engine_ahead);
  r.sync_samples = sync_backend.samples_;
  r.async_samples = async_backend.samples_;
  r.launches = async_backend.launches_;
  r.ahead = async_backend.ahead_launches_;
  r.resolved = async_backend.resolved_tokens_;
  r.uncollected = async_backend.uncollected();
  return r;
}

// The first request whose outputs differ, for the failure message.
std::string first_difference(const Outputs& a, const Outputs& b) {
  for (const auto& [id, choices] : a.tokens) {
    if (b.tokens.count(id) && choices != b.tokens.at(id)) return "tokens of " + id;
    if (a.finish.count(id) != b.finish.count(id) || (a.finish.count(id) && a.finish.at(id) != b.finish.at(id)))
      return "finish of " + id;
    if (a.logprobs.count(id) != b.logprobs.count(id) || (a.logprobs.count(id) && a.logprobs.at(id) != b.logprobs.at(id)))
      return "logprobs of " + id;
  }
  return a == b ? "none" : "text, usage or counters";
}

}  // namespace

TEST(EngineAsync, SameOutputsAsOneStepAtATimeAndStepsGoAhead) {
  int64_t preempted = 0;
  for (uint64_t seed : {1u, 2u, 3u}) {
    Workload w;
    w.seed = seed;
    w.grammars = seed == 3;  // steps go ahead with late masks (made once the previous step is collected)
    const Both r = run_both(w);
    EXPECT_EQ(r.sync.tokens.size(), 40u);
    EXPECT_TRUE(r.sync == r.async) << "seed " << seed << ": differs first in " << first_difference(r.sync, r.async);
    // Async scheduling must have been at work: most steps launched ahead, their tokens taken from
    // the previous step's draws on the backend.
    EXPECT_EQ(r.engine_ahead, r.ahead) << seed;
    EXPECT_GT(r.ahead * 2, r.launches) << seed;
    EXPECT_GT(r.resolved, 100) << seed;
    EXPECT_EQ(r.uncollected, 0u) << seed;
    // What going ahead wastes: at most one draw for each choice that stopped on a token or string
    // while the next step was in flight, none for a choice ending at its length limit.
    EXPECT_GE(r.async_samples, r.sync_samples) << seed;
    EXPECT_LE(r.async_samples - r.sync_samples, r.sync.stopped_choices) << seed;
    preempted += r.async.preemptions;
  }
  EXPECT_GT(preempted, 0) << "the pool never ran short: preemption under async scheduling went untested";
}

// Penalties on every request: a step launched ahead gets the output counts of its sequences
// completed once the step before it is collected (late counts), and the outputs stay the same.
TEST(EngineAsync, PenaltiesGoAheadWithTheirCountsCompletedLate) {
  for (uint64_t seed : {9u, 10u}) {
    Workload w;
    w.seed = seed;
    w.penalties = true;
    const Both r = run_both(w);
    EXPECT_TRUE(r.sync == r.async) << "seed " << seed << ": differs first in " << first_difference(r.sync, r.async);
    EXPECT_GT(r.ahead * 2, r.launches) << seed;
  }
}

// Every sampling knob, prompt logprobs and a tight pool: most steps fall back to one at a time
// (prompt logprobs, rows sent back), the outputs still equal the synchronous engine's.
TEST(EngineAsync, FallsBackWhereTheNextDrawNeedsTheTokenAndKeepsTheOutputs) {
  for (uint64_t seed : {4u, 5u}) {
    Workload w;
    w.seed = seed;
    w.mixed = true;
    w.kv_blocks = 22;
    const Both r = run_both(w);
    EXPECT_TRUE(r.sync == r.async) << "seed " << seed << ": differs first in " << first_difference(r.sync, r.async);
    EXPECT_GT(r.ahead, 0) << seed;
    EXPECT_LT(r.ahead * 2, r.launches) << seed;
  }
}

// Requests aborted while a step that names them runs: they end as aborts, every other request's
// output is the synchronous engine's, and all blocks come back.
TEST(EngineAsync, AbortsWhileAStepIsInFlight) {
  for (uint64_t seed : {6u, 7u}) {
    Workload w;
    w.seed = seed;
    w.abort_every = 6;
    const Both r = run_both(w, DeviceLogprobLimits{});  // logprobs come back as rows: those steps go one at a time
    ASSERT_FALSE(r.aborted_async.empty()) << seed;
    int compared = 0;
    for (const auto& [id, choices] : r.sync.tokens) {
      if (r.aborted_sync.count(id) || r.aborted_async.count(id)) continue;
      EXPECT_EQ(choices, r.async.tokens.at(id)) << "seed " << seed << ", request " << id;
      ++compared;
    }
    EXPECT_GT(compared, 10) << seed;
    for (const std::string& id : r.aborted_async) {
      if (!r.async.finish.count(id)) continue;  // aborted before its first output
      bool any_abort = false;
      for (const auto& [c, f] : r.async.finish.at(id)) any_abort |= f == int(FinishReason::Abort);
      EXPECT_TRUE(any_abort || r.sync.finish.count(id)) << seed << " " << id;
    }
    EXPECT_GT(r.ahead, 0) << seed;
    EXPECT_EQ(r.uncollected, 0u) << seed;
  }
}

// A backend failure while a step runs ahead: the step() throws, no step stays uncollected on the
// backend, no stand-in token stays in a sequence; after abort_all the engine serves again.
TEST(EngineAsync, ABackendFailureLeavesNothingInFlight) {
  AsyncDeviceSamplingFake backend(kTinyVocab, kTinyWindow);
  backend.fail_collect_at_ = 5;
  EngineConfig cfg;
  cfg.max_model_len = 64;
  cfg.block_size = 4;
  cfg.kv_cache_bytes = 400 * 32;
  cfg.eos_token_ids = {kTinyEos};
  cfg.sampler_threads = 1;
  cfg.async_scheduling = true;
  EngineCore core(cfg, tiny_model(kTinyVocab, kTinyWindow, 256), backend, piece_text(letter_pieces()));
  SamplingParams p;
  p.max_tokens = 30;
  p.ignore_eos = true;
  p.temperature = 0;
  std::map<std::string, std::vector<int32_t>> got;
  std::map<std::string, std::string> errors;
  auto record = [&](const RequestOutput& o) {
    for (const auto& d : o.choices) got[o.request_id].insert(got[o.request_id].end(), d.new_tokens.begin(), d.new_tokens.end());
    if (!o.error.empty()) errors[o.request_id] = o.error;
  };
  core.add_request({"a", {1, 2, 3}, p}, record);
  core.add_request({"b", {4, 5}, p}, record);
  bool threw = false;
  for (int i = 0; i < 40 && core.has_work() && !threw; ++i) {
    try {
      core.step();
    } catch (const std::exception& e) {
      threw = true;
      EXPECT_NE(std::string(e.what()).find("injected"), std::string::npos) << e.what();
    }
  }
  ASSERT_TRUE(threw);
  EXPECT_EQ(backend.uncollected(), 0u);
  EXPECT_GT(backend.ahead_launches_, 0);
  core.abort_all("engine step failed");
  EXPECT_FALSE(core.has_work());
  EXPECT_EQ(errors.size(), 2u);
  EXPECT_EQ(core.stats().kv_usage, 0.0);
  // Serving goes on: a new request runs to its end with the tokens a fresh engine gives.
  core.add_request({"c", {1, 2, 3}, p}, record);
  while (core.has_work()) core.step();
  AsyncDeviceSamplingFake fresh_backend(kTinyVocab, kTinyWindow);
  EngineCore fresh(cfg, tiny_model(kTinyVocab, kTinyWindow, 256), fresh_backend, piece_text(letter_pieces()));
  std::vector<int32_t> expect;
  fresh.add_request({"c", {1, 2, 3}, p}, [&](const RequestOutput& o) {
    for (const auto& d : o.choices) expect.insert(expect.end(), d.new_tokens.begin(), d.new_tokens.end());
  });
  while (fresh.has_work()) fresh.step();
  EXPECT_EQ(got["c"], expect);
  EXPECT_EQ(expect.size(), 30u);
}

TEST(EngineAsync, RefusedWhereItCannotRun) {
  EngineConfig cfg;
  cfg.max_model_len = 64;
  cfg.block_size = 4;
  cfg.kv_cache_bytes = 400 * 32;
  cfg.async_scheduling = true;
  DeviceSamplingFake no_async(kTinyVocab, kTinyWindow);  // samples on the device, runs steps one at a time
  try {
    EngineCore core(cfg, tiny_model(kTinyVocab, kTinyWindow, 256), no_async, piece_text(letter_pieces()));
    FAIL() << "async scheduling accepted on a backend without asynchronous steps";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("async scheduling needs"), std::string::npos) << e.what();
  }
  AsyncDeviceSamplingFake backend(kTinyVocab, kTinyWindow);
  cfg.speculative.num_speculative_tokens = 2;
  cfg.speculative.prompt_lookup_min = 1;
  cfg.speculative.prompt_lookup_max = 2;
  try {
    EngineCore core(cfg, tiny_model(kTinyVocab, kTinyWindow, 256), backend, piece_text(letter_pieces()));
    FAIL() << "async scheduling accepted with n-gram speculation";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("speculation"), std::string::npos) << e.what();
  }
}

// The CPU backend's way to async scheduling: a logits backend wrapped into HostSampledSteps (steps
// on a worker thread, tokens drawn by the engine's sampler) gives the host-sampling engine's
// outputs, every sampling knob, prompt logprobs and grammars included.
TEST(EngineAsync, HostSampledStepsGiveTheHostEnginesOutputs) {
  for (const bool mixed : {false, true}) {
    Workload w;
    w.seed = 8;
    w.mixed = mixed;
    w.grammars = true;
    FakeBackend host(kTinyVocab, kTinyWindow);
    HostSampledSteps steps(std::make_unique<FakeBackend>(kTinyVocab, kTinyWindow), kTinyVocab);
    int64_t ahead = 0;
    const Outputs a = run(host, w, false);
    const Outputs b = run(steps, w, true, nullptr, &ahead);
    EXPECT_TRUE(a == b) << "mixed " << mixed << ": outputs differ from the host-sampling engine's";
    EXPECT_EQ(a.tokens, b.tokens) << mixed;
    EXPECT_GT(ahead, 0) << mixed;
  }
}

// HostSampledSteps' side of the contract: errors name the misuse, a failed step fails its collect
// (and the step after it, which cannot take its tokens), and the worker serves on afterwards.
TEST(EngineAsync, HostSampledStepsContractAndFailures) {
  class Failing : public FakeBackend {
   public:
    using FakeBackend::FakeBackend;
    void forward(const ForwardBatch& b, std::vector<float>& logits) override {
      if (fail_next) {
        fail_next = false;
        throw Error("injected forward failure");
      }
      FakeBackend::forward(b, logits);
    }
    bool fail_next = false;
  };
  auto owned = std::make_unique<Failing>(kTinyVocab, kTinyWindow);
  Failing* inner = owned.get();
  HostSampledSteps steps(std::move(owned), kTinyVocab);
  steps.allocate_kv_cache(KvCacheSpec{4, 8, 8});
  auto chunk = [](std::vector<int32_t> tokens, int64_t start, int32_t from = -1) {
    SequenceChunk c;
    c.tokens = std::move(tokens);
    c.start_pos = start;
    c.full_block_table = {0, 1, 2};
    c.sliding_block_table = {0, 1, 2};
    c.token_from_sample = from;
    return c;
  };
  DeviceSampling ds;
  ds.samples.push_back(SampleRequest{});
  ds.samples.back().temperature = 0;
  ForwardBatch first{{chunk({1, 2, 3}, 0)}}, next{{chunk({0}, 3, 0)}}, after{{chunk({0}, 4, 0)}};
  SampledStep out;
  EXPECT_THROW(steps.launch_sampled(next, ds), std::logic_error);  // nothing to take a token from
  EXPECT_THROW(steps.collect_sampled(out), std::logic_error);
  // Launched one ahead, the second step takes the first's token: the same as feeding it by hand.
  steps.launch_sampled(first, ds);
  steps.launch_sampled(next, ds);
  EXPECT_THROW(steps.launch_sampled(after, ds), std::logic_error);  // a third uncollected launch
  EXPECT_THROW(steps.forward(first, out.logits), std::logic_error);  // not while steps are uncollected
  SampledStep a, b;
  steps.collect_sampled(a);
  steps.collect_sampled(b);
  FakeBackend plain(kTinyVocab, kTinyWindow);
  plain.allocate_kv_cache(KvCacheSpec{4, 8, 8});
  std::vector<float> logits;
  plain.forward(first, logits);
  std::vector<float> scratch;
  const int32_t t0 = sample_request(logits, ds.samples[0], scratch);
  EXPECT_EQ(a.tokens, std::vector<int32_t>{t0});
  plain.forward(ForwardBatch{{chunk({t0}, 3)}}, logits);
  EXPECT_EQ(b.tokens, std::vector<int32_t>{sample_request(logits, ds.samples[0], scratch)});
  // A failing step fails its collect, and the one launched after it cannot take its tokens.
  inner->fail_next = true;
  steps.launch_sampled(first, ds);
  steps.launch_sampled(next, ds);
  EXPECT_THROW(steps.collect_sampled(out), Error);
  EXPECT_THROW(steps.collect_sampled(out), Error);
  // Then it serves on.
  steps.forward_sampled(first, ds, out);
  EXPECT_EQ(out.tokens, std::vector<int32_t>{t0});
}
