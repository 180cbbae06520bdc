// Prefix caching through the whole engine on the CPU reference backend (random model with a
// sliding window of 5 and blocks of 4, so hits end inside windows): every token, logprob and
// prompt logprob must be bit-identical with the cache on and off — across turns of a growing
// conversation, n > 1, evictions and preemptions in a pool too small for the workload.
#include <gtest/gtest.h>

#include <map>
#include <ostream>
#include <random>

#include "backends/cpu/cpu_backend.h"
#include "cpu/synthetic_model.h"
#include "engine/engine_core.h"
#include "fakes.h"

using namespace striker;
using namespace striker::testing;

namespace {

struct Job {
  std::string id;
  std::vector<int32_t> prompt;
  SamplingParams params;
  std::optional<std::string> salt;
};

// Everything a client can see of one request, compared bit for bit.
struct Seen {
  std::map<int32_t, std::vector<int32_t>> tokens;
  std::map<int32_t, std::vector<std::pair<int32_t, float>>> logprobs;  // token, logprob, then top
  std::vector<std::pair<int32_t, float>> prompt_logprobs;
  int64_t cached_tokens = -1;
  bool operator==(const Seen& o) const {
    return tokens == o.tokens && logprobs == o.logprobs && prompt_logprobs == o.prompt_logprobs;
  }
};

// Failures print the tokens of each choice.
std::ostream& operator<<(std::ostream& os, const Seen& s) {
  for (const auto& [choice, toks] : s.tokens) {
    os << " choice " << choice << ":";
    for (int32_t t : toks) os << " " << t;
  }
  return os << " (cached " << s.cached_tokens << ")";
}

void flatten(const TokenLogprob& l, std::vector<std::pair<int32_t, float>>& out) {
  out.emplace_back(l.token, l.logprob);
  out.insert(out.end(), l.top.begin(), l.top.end());
}

struct EngineRun {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<EngineCore> core;
  std::map<std::string, Seen> seen;
  int64_t tokens_computed = 0;

  EngineRun(const LoadedModel& model, EngineConfig cfg) : backend(make_cpu_backend(model, 1)) {
    core = std::make_unique<EngineCore>(cfg, model.config, *backend, piece_text({}));
  }
  void add(const Job& j) {
    GenerationRequest r{j.id, j.prompt, j.params, j.salt};
    core->add_request(std::move(r), [this](const RequestOutput& o) {
      Seen& s = seen[o.request_id];
      s.cached_tokens = o.num_cached_tokens;
      for (const auto& p : o.prompt_logprobs)
        if (p) flatten(*p, s.prompt_logprobs);
      for (const auto& d : o.choices) {
        auto& t = s.tokens[d.index];
        t.insert(t.end(), d.new_tokens.begin(), d.new_tokens.end());
        for (const auto& l : d.logprobs) flatten(l, s.logprobs[d.index]);
      }
    });
  }
  void step() {
    core->step();
    tokens_computed += core->last_plan().num_tokens();
  }
  void drain() {
    for (int steps = 0; core->has_work(); ++steps) {
      ASSERT_LT(steps, 20000);
      step();
    }
  }
  std::vector<int32_t> output(const std::string& id, int32_t choice = 0) { return seen[id].tokens[choice]; }
};

EngineConfig config(bool caching, int64_t kv_bytes) {
  EngineConfig c;
  c.max_model_len = 96;
  c.max_num_seqs = 6;
  c.max_num_batched_tokens = 24;
  c.block_size = 4;
  c.kv_cache_bytes = kv_bytes;
  c.enable_prefix_caching = caching;
  c.prefix_caching_hash_seed = "0";
  c.enable_kv_events = true;
  c.sampler_threads = 1;
  return c;
}

struct PrefixCacheCpu : ::testing::Test {
  LoadedModel model = striker::test::make_synthetic_model(21);
  int64_t fb = 0, sb = 0;  // bytes of one block in each pool
  void SetUp() override {
    auto probe = make_cpu_backend(model, 1);
    fb = probe->full_block_bytes(4);
    sb = probe->sliding_block_bytes(4);
  }
  int64_t roomy() const { return 400 * (fb + sb); }
};

std::vector<int32_t> random_ids(std::mt19937& rng, int n) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(int32_t(rng() % 1000));
  return t;
}

SamplingParams params(uint64_t seed, int32_t max_tokens, float temperature, int32_t logprobs = 2) {
  SamplingParams p;
  p.seed = seed;
  p.max_tokens = max_tokens;
  p.temperature = temperature;
  p.top_k = 40;
  p.ignore_eos = true;
  p.logprobs = logprobs;
  return p;
}

}  // namespace

// A conversation: each turn's prompt is the previous prompt, its answer and a new message,
// so each turn hits the previous turn's blocks, ending inside a sliding window.
TEST_F(PrefixCacheCpu, TurnsOfAConversationMatchTheUncachedRun) {
  std::mt19937 rng(5);
  const auto first = random_ids(rng, 23);
  std::vector<std::vector<int32_t>> messages = {random_ids(rng, 6), random_ids(rng, 9), random_ids(rng, 3)};
  std::map<bool, std::vector<Seen>> turns;
  std::map<bool, EngineStats> stats;
  for (bool caching : {false, true}) {
    EngineRun run(model, config(caching, roomy()));
    std::vector<int32_t> prompt = first;
    for (size_t t = 0; t < 4; ++t) {
      const std::string id = "turn" + std::to_string(t);
      run.add({id, prompt, params(100 + t, 7, t % 2 ? 0.0f : 0.8f), {}});
      run.drain();
      turns[caching].push_back(run.seen[id]);
      const auto out = run.output(id);
      prompt.insert(prompt.end(), out.begin(), out.end());
      if (t < messages.size()) prompt.insert(prompt.end(), messages[t].begin(), messages[t].end());
    }
    stats[caching] = run.core->stats();
  }
  for (size_t t = 0; t < 4; ++t) {
    EXPECT_EQ(turns[true][t], turns[false][t]) << "turn " << t;
    EXPECT_EQ(turns[false][t].cached_tokens, 0);
  }
  EXPECT_EQ(turns[true][0].cached_tokens, 0);
  // Turn 1's prompt is 23 + 7 + 6 = 36 tokens; turn 0 cached blocks up to its 29 computed
  // positions (7 blocks = 28 tokens): the hit is 28, ending inside the window.
  EXPECT_EQ(turns[true][1].cached_tokens, 28);
  EXPECT_GT(turns[true][2].cached_tokens, 28);
  EXPECT_GT(turns[true][3].cached_tokens, turns[true][2].cached_tokens);
  EXPECT_EQ(stats[false].prefix_cache_queries, 0);
  EXPECT_GT(stats[true].prefix_cache_hits, 0);
  EXPECT_EQ(stats[true].prefix_cache_hits, 28 + turns[true][2].cached_tokens + turns[true][3].cached_tokens);
}

TEST_F(PrefixCacheCpu, PromptLogprobsAreComputedNotReadButStillFillTheCache) {
  std::mt19937 rng(6);
  const auto base = random_ids(rng, 30);
  auto longer = base;
  longer.push_back(7);
  std::map<bool, Seen> got, after;
  for (bool caching : {false, true}) {
    EngineRun run(model, config(caching, roomy()));
    run.add({"warm", base, params(1, 3, 0.0f), {}});
    run.drain();
    Job j{"pl", longer, params(2, 4, 0.0f), {}};
    j.params.prompt_logprobs = 3;
    run.add(j);
    run.drain();
    got[caching] = run.seen["pl"];
    run.add({"after", longer, params(3, 4, 1.0f), {}});
    run.drain();
    after[caching] = run.seen["after"];
  }
  EXPECT_EQ(got[true], got[false]);
  EXPECT_EQ(got[false].prompt_logprobs.size(), size_t(30 * 4));  // 30 scored tokens, each with 3 alternatives
  EXPECT_EQ(got[true].cached_tokens, 0);
  EXPECT_EQ(after[true], after[false]);
  EXPECT_EQ(after[true].cached_tokens, 28);
}

TEST_F(PrefixCacheCpu, ChoicesOfOneRequestShareThePromptBlocks) {
  std::mt19937 rng(7);
  Job j{"n3", random_ids(rng, 41), params(9, 6, 1.0f), {}};
  j.params.n = 3;
  std::map<bool, Seen> got;
  std::map<bool, int64_t> computed;
  for (bool caching : {false, true}) {
    EngineRun run(model, config(caching, roomy()));
    run.add(j);
    run.drain();
    got[caching] = run.seen["n3"];
    computed[caching] = run.tokens_computed;
    if (caching) {
      EXPECT_EQ(run.core->stats().prefix_cache_hits, 2 * 40);
    }
  }
  EXPECT_EQ(got[true], got[false]);
  EXPECT_NE(got[true].tokens[0], got[true].tokens[1]);
  // Choices 1 and 2 compute one token of the prompt instead of 41.
  EXPECT_EQ(computed[false] - computed[true], 2 * 40);
}

TEST_F(PrefixCacheCpu, SaltedRequestsDoNotShare) {
  std::mt19937 rng(8);
  const auto p = random_ids(rng, 20);
  EngineRun run(model, config(true, roomy()));
  Job a{"a", p, params(1, 2, 0.0f), "tenant-a"};
  run.add(a);
  run.drain();
  Job b = a;
  b.id = "b";
  b.salt = "tenant-b";
  run.add(b);
  run.drain();
  Job c = a;
  c.id = "c";
  run.add(c);
  run.drain();
  EXPECT_EQ(run.seen["b"].cached_tokens, 0);
  EXPECT_EQ(run.seen["c"].cached_tokens, 16);
}

// Many requests sharing and diverging from a few prefixes, in waves that overlap running work,
// through pools far too small to keep them: blocks are evicted, sequences preempted, one
// request aborted; no token may differ from the uncached run.
TEST_F(PrefixCacheCpu, StressThroughATinyPoolNeverChangesAToken) {
  std::mt19937 rng(9);
  std::vector<std::vector<int32_t>> roots = {random_ids(rng, 26), random_ids(rng, 13), random_ids(rng, 37)};
  std::vector<std::vector<Job>> waves(4);
  int k = 0;
  for (auto& wave : waves)
    for (int i = 0; i < 7; ++i, ++k) {
      Job j;
      j.id = "s" + std::to_string(k);
      j.prompt = roots[rng() % roots.size()];
      j.prompt.resize(j.prompt.size() - rng() % 6);  // diverge at different depths
      auto tail = random_ids(rng, int(rng() % 12) + 1);
      j.prompt.insert(j.prompt.end(), tail.begin(), tail.end());
      j.params = params(1000 + uint64_t(k), int32_t(rng() % 9) + 2, rng() % 3 ? 1.0f : 0.0f, int32_t(rng() % 3));
      if (k % 5 == 0) j.params.n = 2;
      if (k % 11 == 3) j.params.prompt_logprobs = 1;
      wave.push_back(j);
    }
  // About 30 full and 18 sliding blocks: one 96-token sequence (24 blocks) fits, two do not.
  const int64_t tight = 30 * fb + 18 * sb;
  std::map<bool, std::map<std::string, Seen>> seen;
  for (bool caching : {false, true}) {
    EngineConfig cfg = config(caching, roomy());
    cfg.kv_cache_bytes = caching ? tight : roomy();
    EngineRun run(model, cfg);
    if (caching) {
      ASSERT_LT(run.core->kv_plan().layout.num_full_blocks, 2 * 24);
    }
    for (size_t w = 0; w < waves.size(); ++w) {
      for (const auto& j : waves[w]) run.add(j);
      for (int s = 0; s < 6 && run.core->has_work(); ++s) run.step();  // the next wave arrives mid-run
      if (w == 1 && caching) run.core->abort_request("s9");
    }
    run.drain();
    seen[caching] = run.seen;
    if (!caching) continue;
    const EngineStats st = run.core->stats();
    EXPECT_GT(st.num_preemptions, 0);
    EXPECT_GT(st.prefix_cache_hits, 0);
    // Every evicted hash was stored before, in the same pool, and not evicted twice meanwhile.
    std::map<std::pair<KvPoolKind, BlockHash>, int> live;
    int removed = 0;
    for (const auto& e : run.core->take_kv_events())
      for (const auto& h : e.block_hashes) {
        int& n = live[{e.pool, h}];
        n += e.type == KvEvent::Type::BlockStored ? 1 : -1;
        ASSERT_GE(n, 0);
        removed += e.type == KvEvent::Type::BlockRemoved;
      }
    EXPECT_GT(removed, 0);
    // Nothing is held once every request is done; the cache keeps what was not evicted.
    EXPECT_EQ(run.core->kv().full_pool().num_used(), 0);
    EXPECT_EQ(run.core->kv().sliding_pool().num_used(), 0);
    EXPECT_GT(run.core->kv().full_pool().num_cached(), 0);
  }
  int compared = 0;
  for (const auto& [id, s] : seen[true]) {
    if (id == "s9") continue;
    EXPECT_EQ(s, seen[false][id]) << id;
    ++compared;
  }
  EXPECT_EQ(compared, 27);
}

TEST_F(PrefixCacheCpu, ResetIsRefusedWhileBlocksAreHeldAndEmptiesTheCache) {
  std::mt19937 rng(10);
  const auto p = random_ids(rng, 20);
  EngineRun run(model, config(true, roomy()));
  run.add({"a", p, params(1, 3, 0.0f), {}});
  run.step();
  EXPECT_FALSE(run.core->reset_prefix_cache());
  run.drain();
  run.core->take_kv_events();
  EXPECT_TRUE(run.core->reset_prefix_cache());
  EXPECT_EQ(run.core->kv().full_pool().num_cached(), 0);
  const auto events = run.core->take_kv_events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].type, KvEvent::Type::AllBlocksCleared);
  run.add({"b", p, params(1, 3, 0.0f), {}});
  run.drain();
  EXPECT_EQ(run.seen["b"].cached_tokens, 0);
  EXPECT_EQ(run.seen["b"], run.seen["a"]);
}

TEST_F(PrefixCacheCpu, StoredEventsChainTheirBlocks) {
  std::mt19937 rng(11);
  const auto p = random_ids(rng, 18);
  EngineRun run(model, config(true, roomy()));
  run.add({"a", p, params(1, 1, 0.0f), {}});
  run.drain();
  BlockHasher h(HashAlgo::Sha256, "0");
  std::vector<BlockHash> expect;
  h.extend(p, 4, {}, expect);  // 4 full blocks
  std::map<KvPoolKind, std::vector<BlockHash>> stored;
  std::map<KvPoolKind, std::vector<int32_t>> tokens;
  for (const auto& e : run.core->take_kv_events()) {
    ASSERT_EQ(e.type, KvEvent::Type::BlockStored);
    auto& s = stored[e.pool];
    if (s.empty()) EXPECT_FALSE(e.parent_block_hash);
    else EXPECT_EQ(e.parent_block_hash, s.back());
    EXPECT_EQ(e.token_ids.size(), e.block_hashes.size() * 4);
    s.insert(s.end(), e.block_hashes.begin(), e.block_hashes.end());
    tokens[e.pool].insert(tokens[e.pool].end(), e.token_ids.begin(), e.token_ids.end());
  }
  for (KvPoolKind pool : {KvPoolKind::Full, KvPoolKind::Sliding}) {
    EXPECT_EQ(stored[pool], expect);
    EXPECT_EQ(tokens[pool], std::vector<int32_t>(p.begin(), p.begin() + 16));
  }
}
