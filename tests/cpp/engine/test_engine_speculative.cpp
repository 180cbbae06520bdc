// N-gram speculation: the proposer picks what vLLM's does, and an engine that checks guesses
// gives exactly the outputs of one that does not (tokens, text, logprobs, finish reasons), on
// the host sampler and on a backend that samples on the device, while its counters show the
// guesses were made and accepted.
#include <gtest/gtest.h>

#include <map>
#include <numeric>
#include <random>

#include "core/error.h"
#include "engine/engine_core.h"
#include "engine/ngram_proposer.h"
#include "engine/sampler.h"
#include "fakes.h"

using namespace striker;
using namespace striker::testing;

namespace {

using Ids = std::vector<int32_t>;

TEST(NgramProposer, PicksTheLongestSuffixMatchAndWhatFollowedIt) {
  // vLLM's documented case: [4,2,3] recurs nowhere, [2,3] does; three tokens follow it.
  EXPECT_EQ(propose_ngram(Ids{1, 2, 3, 4, 2, 3}, 2, 3, 4), (Ids{4, 2, 3}));
  EXPECT_EQ(propose_ngram(Ids{1, 2, 3, 4, 2, 3}, 2, 3, 2), (Ids{4, 2}));
  // The longer match wins over an earlier shorter one.
  EXPECT_EQ(propose_ngram(Ids{5, 3, 9, 1, 2, 3, 7, 8, 2, 3}, 1, 3, 2), (Ids{7, 8}));
  EXPECT_EQ(propose_ngram(Ids{5, 3, 9, 1, 2, 3, 7, 8, 1, 2, 3}, 1, 3, 2), (Ids{7, 8}));
  // Of equally long matches the earliest; matches longer than max_n count as max_n long.
  EXPECT_EQ(propose_ngram(Ids{7, 1, 2, 8, 1, 2, 9, 1, 2}, 2, 2, 1), (Ids{8}));
  EXPECT_EQ(propose_ngram(Ids{0, 1, 2, 8, 4, 1, 2, 9, 0, 1, 2}, 2, 2, 1), (Ids{8}));
  // The match may overlap the suffix but is never the suffix itself.
  EXPECT_EQ(propose_ngram(Ids{1, 1, 1, 1}, 1, 2, 5), (Ids{1, 1}));
  // No suffix of min_n tokens recurs, or too short a context: nothing.
  EXPECT_EQ(propose_ngram(Ids{1, 2, 3, 4, 5, 3}, 2, 4, 3), Ids{});
  EXPECT_EQ(propose_ngram(Ids{1, 2, 3, 4, 5, 3}, 1, 4, 3), (Ids{4, 5, 3}));
  EXPECT_EQ(propose_ngram(Ids{3}, 1, 1, 3), Ids{});
  EXPECT_EQ(propose_ngram(Ids{}, 1, 1, 3), Ids{});
  EXPECT_EQ(propose_ngram(Ids{1, 2, 1, 2}, 2, 2, 0), Ids{});
}

// The proposer against a plain search over every n and start, on random small-alphabet contexts.
TEST(NgramProposer, MatchesABruteForceSearch) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 3000; ++trial) {
    Ids t(size_t(1 + rng() % 40));
    for (auto& x : t) x = int32_t(rng() % 4);
    const int32_t lo = 1 + int32_t(rng() % 3), hi = lo + int32_t(rng() % 3), k = 1 + int32_t(rng() % 5);
    Ids want;
    const int64_t n = int64_t(t.size());
    for (int64_t len = std::min<int64_t>(hi, n - 1); len >= lo && want.empty(); --len)
      for (int64_t s = 0; s + len < n; ++s)  // the occurrence [s, s+len) ends before the last token
        if (std::equal(t.begin() + s, t.begin() + s + len, t.end() - len)) {
          want.assign(t.begin() + s + len, t.begin() + std::min<int64_t>(n, s + len + k));
          break;
        }
    ASSERT_EQ(propose_ngram(t, lo, hi, k), want) << "trial " << trial;
  }
}

TEST(NgramProposer, ConfigIsChecked) {
  auto refused = [](SpeculativeConfig c, const std::string& needle) {
    try {
      validate_speculative_config(c);
      ADD_FAILURE() << "accepted: " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  refused({-1, 5, 5, 0}, "num_speculative_tokens");
  refused({3, 0, 5, 0}, "prompt_lookup_min");
  refused({3, 1, 0, 0}, "prompt_lookup_max");
  refused({3, 4, 2, 0}, "prompt_lookup_min=4 must be <= prompt_lookup_max=2");
  refused({3, 1, 2, -1}, "disable_by_batch_size");
  EXPECT_NO_THROW(validate_speculative_config({3, 1, 2, 4}));
}

struct Outputs {
  std::map<std::string, std::map<int32_t, Ids>> tokens;
  std::map<std::string, std::map<int32_t, std::string>> text;
  std::map<std::string, std::map<int32_t, int>> finish;
  std::map<std::string, std::map<int32_t, std::vector<std::tuple<int32_t, float, std::vector<std::pair<int32_t, float>>>>>>
      logprobs;
  std::map<std::string, std::vector<float>> prompt_logprobs;
  bool operator==(const Outputs&) const = default;
};

struct WorkloadRun {
  Outputs out;
  EngineStats stats;
  int steps = 0;
};

// A fixed random workload: repetitive prompts (so guesses exist), every sampling parameter,
// greedy and sampled (`coin_flips`: every draw at temperature 1 between the best 2 or 3, so that
// guesses are accepted with chance and a wrong random stream shows), n > 1, stop strings,
// staggered arrivals, a pool small enough to preempt.
WorkloadRun run_workload(Backend& backend, uint64_t seed, const SpeculativeConfig& spec, int64_t pool_blocks = 40,
                         bool coin_flips = false) {
  EngineConfig cfg;
  cfg.max_model_len = 48;
  cfg.max_num_seqs = 4;
  cfg.max_num_batched_tokens = 16;
  cfg.block_size = 4;
  cfg.kv_cache_bytes = 400 * pool_blocks;
  cfg.eos_token_ids = {kTinyEos};
  cfg.sampler_threads = 2;
  cfg.speculative = spec;
  std::vector<std::string> pieces(kTinyVocab);
  for (int64_t i = 0; i < kTinyVocab; ++i) pieces[size_t(i)] = std::string(1, char('a' + i % 26));
  EngineCore core(cfg, tiny_model(kTinyVocab, kTinyWindow, 256), backend, piece_text(pieces));
  WorkloadRun run;
  auto record = [&run](const RequestOutput& o) {
    EXPECT_TRUE(o.error.empty()) << o.error;
    for (const auto& d : o.choices) {
      auto& t = run.out.tokens[o.request_id][d.index];
      t.insert(t.end(), d.new_tokens.begin(), d.new_tokens.end());
      run.out.text[o.request_id][d.index] += d.new_text;
      if (d.finish) run.out.finish[o.request_id][d.index] = int(*d.finish);
      for (const auto& l : d.logprobs) run.out.logprobs[o.request_id][d.index].emplace_back(l.token, l.logprob, l.top);
    }
    for (const auto& l : o.prompt_logprobs) run.out.prompt_logprobs[o.request_id].push_back(l ? l->logprob : 1.f);
  };
  std::mt19937 rng{uint32_t(seed)};
  int added = 0;
  for (; run.steps < 5000 && (added < 30 || core.has_work()); ++run.steps) {
    if (added < 30 && rng() % 2 == 0) {
      SamplingParams p = random_sampling_params(rng, kTinyVocab, kTinyEos, 24, 2);
      if (rng() % 5 == 0) p.stop = {std::string(1, char('a' + rng() % 26)) + char('a' + rng() % 26)};
      if (coin_flips) {
        p.temperature = 1.f;
        p.top_k = 2 + int32_t(rng() % 2);
        p.top_p = 1.f;
      }
      p.ignore_eos = rng() % 3 == 0;
      // A short motif repeated, with a random tail: text that repeats itself.
      Ids motif(size_t(2 + rng() % 4));
      for (auto& x : motif) x = int32_t(rng() % 30);
      Ids prompt;
      const int len = 2 + int(rng() % uint32_t(48 - p.max_tokens - 1));
      for (int i = 0; i < len; ++i) prompt.push_back(rng() % 5 == 0 ? int32_t(rng() % 30) : motif[size_t(i) % motif.size()]);
      core.add_request({"q" + std::to_string(added++), prompt, p}, record);
    }
    if (core.has_work()) core.step();
  }
  EXPECT_FALSE(core.has_work());
  run.stats = core.stats();
  return run;
}

void expect_counters_consistent(const EngineStats& s, int32_t k) {
  EXPECT_EQ(s.num_speculative_tokens, k);
  ASSERT_EQ(s.spec_accepted_per_pos.size(), size_t(k));
  EXPECT_LE(s.spec_num_accepted_tokens, s.spec_num_draft_tokens);
  EXPECT_LE(s.spec_num_draft_tokens, s.spec_num_drafts * k);
  EXPECT_EQ(std::accumulate(s.spec_accepted_per_pos.begin(), s.spec_accepted_per_pos.end(), int64_t(0)),
            s.spec_num_accepted_tokens);
  EXPECT_LE(s.spec_accepted_per_pos.front(), s.spec_num_drafts);
  for (size_t i = 1; i < s.spec_accepted_per_pos.size(); ++i)
    EXPECT_LE(s.spec_accepted_per_pos[i], s.spec_accepted_per_pos[i - 1]) << "position " << i;
}

TEST(EngineSpeculative, HostSamplingGivesTheSameOutputs) {
  for (uint64_t seed : {1u, 2u, 3u}) {
    for (const SpeculativeConfig spec : {SpeculativeConfig{3, 1, 3, 0}, SpeculativeConfig{5, 2, 2, 0}}) {
      FakeBackend plain_backend(kTinyVocab, kTinyWindow, nullptr, 1), spec_backend(kTinyVocab, kTinyWindow, nullptr, 1);
      const WorkloadRun plain = run_workload(plain_backend, seed, SpeculativeConfig{}, 40, seed == 3);
      const WorkloadRun fast = run_workload(spec_backend, seed, spec, 40, seed == 3);
      EXPECT_EQ(plain.out.tokens.size(), 30u);
      EXPECT_TRUE(plain.out == fast.out) << "seed " << seed << ", k " << spec.num_speculative_tokens
                                         << ": outputs with speculation differ";
      EXPECT_EQ(plain.out.tokens, fast.out.tokens) << seed;
      EXPECT_EQ(plain.stats.spec_num_drafts, 0);
      EXPECT_GT(fast.stats.spec_num_drafts, 10) << seed;
      EXPECT_GT(fast.stats.spec_num_accepted_tokens, 5) << seed;
      EXPECT_EQ(fast.stats.generation_tokens_total, plain.stats.generation_tokens_total);
      expect_counters_consistent(fast.stats, spec.num_speculative_tokens);
    }
  }
}

// Blocks so few that sequences are preempted (and guesses dropped for want of blocks): the same.
TEST(EngineSpeculative, PreemptionUnderATinyPoolGivesTheSameOutputs) {
  for (uint64_t seed : {4u, 5u}) {
    FakeBackend plain_backend(kTinyVocab, kTinyWindow, nullptr, 1), spec_backend(kTinyVocab, kTinyWindow, nullptr, 1);
    const WorkloadRun plain = run_workload(plain_backend, seed, SpeculativeConfig{}, 30);
    const WorkloadRun fast = run_workload(spec_backend, seed, SpeculativeConfig{4, 1, 2, 0}, 30);
    EXPECT_GT(fast.stats.num_preemptions, 0) << seed;
    EXPECT_TRUE(plain.out == fast.out) << seed;
    EXPECT_GT(fast.stats.spec_num_accepted_tokens, 10) << seed;
  }
}

// Device sampling: every guessed row is drawn on the device with the counts and step it would
// have had, logprobs computed there or sent back as rows: the host path's outputs.
TEST(EngineSpeculative, DeviceSamplingGivesTheSameOutputs) {
  for (uint64_t seed : {6u, 7u}) {
    for (const bool coin_flips : {false, true}) {
      FakeBackend host(kTinyVocab, kTinyWindow, nullptr, 1);
      const WorkloadRun plain = run_workload(host, seed, SpeculativeConfig{}, 40, coin_flips);
      for (const DeviceLogprobLimits limits : {DeviceLogprobLimits{}, DeviceLogprobLimits{20, 64, 1000},
                                               DeviceLogprobLimits{1, 1, 3}}) {
        DeviceSamplingFake device(kTinyVocab, kTinyWindow, 1);
        device.limits_ = limits;
        const WorkloadRun fast = run_workload(device, seed, SpeculativeConfig{4, 1, 3, 0}, 40, coin_flips);
        EXPECT_TRUE(plain.out == fast.out) << "seed " << seed << ", limits " << limits.max_top << ", coin flips "
                                           << coin_flips;
        EXPECT_GT(fast.stats.spec_num_accepted_tokens, 20) << seed;
        expect_counters_consistent(fast.stats, 4);
      }
    }
  }
}

// disable_by_batch_size: no guesses while that many sequences run.
TEST(EngineSpeculative, NoGuessesAtOrAboveTheBatchSizeBound) {
  FakeBackend off_backend(kTinyVocab, kTinyWindow, nullptr, 1), on_backend(kTinyVocab, kTinyWindow, nullptr, 1);
  const WorkloadRun off = run_workload(off_backend, 8, SpeculativeConfig{3, 1, 3, 1});
  EXPECT_EQ(off.stats.spec_num_drafts, 0);
  const WorkloadRun on = run_workload(on_backend, 8, SpeculativeConfig{3, 1, 3, 3});
  EXPECT_GT(on.stats.spec_num_drafts, 0);
  EXPECT_TRUE(off.out == on.out);
}

// A guess's KV is written at positions the sequence does not hold yet: rejected ones must never
// be read as the sequence's (the fake reads its whole history back from the pools), and a later
// request finds the accepted ones in the prefix cache.
TEST(EngineSpeculative, RejectedGuessesLeaveNoKvBehindAndAcceptedOnesAreCached) {
  auto log = std::make_shared<FakeBackendLog>();
  FakeBackend backend(kTinyVocab, kTinyWindow, log, 1);
  EngineConfig cfg;
  cfg.max_model_len = 64;
  cfg.max_num_seqs = 2;
  cfg.max_num_batched_tokens = 16;
  cfg.block_size = 4;
  cfg.kv_cache_bytes = 400 * 100;
  cfg.eos_token_ids = {kTinyEos};
  cfg.speculative = SpeculativeConfig{4, 1, 2, 0};
  EngineCore core(cfg, tiny_model(kTinyVocab, kTinyWindow, 256), backend, piece_text({}));
  // Greedy on this fake: each token is the argmax of the logits after the token before it.
  auto next = [](int32_t t) {
    const auto row = reference_logits(Ids{t}, kTinyVocab);
    return int32_t(std::max_element(row.begin(), row.end()) - row.begin());
  };
  // The prompt holds the first output token followed by a wrong one: the first guess fails.
  const int32_t x = next(4);
  const Ids prompt = {x, int32_t((next(x) + 1) % 30), 7, 8, 9, 3, 4};
  Ids seq = prompt;
  for (int i = 0; i < 30; ++i) seq.push_back(next(seq.back()));
  Ids out;
  SamplingParams p = greedy_params(30);
  core.add_request({"a", prompt, p}, [&](const RequestOutput& o) {
    for (const auto& d : o.choices) out.insert(out.end(), d.new_tokens.begin(), d.new_tokens.end());
  });
  int steps = 0;
  for (; core.has_work(); ++steps) core.step();
  EXPECT_EQ(out, Ids(seq.begin() + int64_t(prompt.size()), seq.end()));
  EXPECT_LT(steps, 20);  // 30 tokens, one prefill step
  const EngineStats s = core.stats();
  EXPECT_GT(s.spec_num_draft_tokens, s.spec_num_accepted_tokens);  // some guesses were rejected
  EXPECT_GT(s.spec_num_accepted_tokens, 0);
  // Every step's chunk carries at most 1 + 4 tokens after the prompt, its rows all returned.
  size_t checked = 0;
  for (const ForwardBatch& b : log->batches)
    for (const SequenceChunk& c : b.seqs)
      if (c.start_pos >= int64_t(prompt.size())) {
        EXPECT_LE(c.tokens.size(), 5u);
        if (c.tokens.size() > 1) {
          EXPECT_TRUE(c.all_logits);
          ++checked;
        }
      }
  EXPECT_GT(checked, 0u);
  // The whole output as a new prompt: its blocks up to the last full one are found cached.
  Ids again = seq;
  again.resize(33);  // the cache serves its first 32 (the last token is always computed)
  p.max_tokens = 4;
  core.add_request({"b", again, p}, [](const RequestOutput&) {});
  core.step();
  EXPECT_EQ(core.stats().prefix_cache_hits, 32);
  while (core.has_work()) core.step();
}

}  // namespace
