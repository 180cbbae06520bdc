// thinking_token_budget through the engine: random logits at temperature 1, several requests and
// choices, on the host sampler, a backend that samples "on the device", async scheduling and
// n-gram speculation. The forced end must land exactly where the budget runs out, the tokens before
// it must be the ones an unbudgeted run draws, and every path must give the same outputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "core/error.h"
#include "engine/engine_core.h"
#include "fakes.h"

using namespace striker;
using namespace striker::testing;

namespace {

constexpr int64_t kVocab = 32;
constexpr int32_t kEos = 31;
constexpr int32_t kThink = 28, kEndThink = 29;

using Outputs = std::map<std::string, std::vector<int32_t>>;  // "request/choice" -> tokens

struct BudgetRun {
  std::optional<int32_t> budget;
  bool open_section = true;  // the prompt ends with <think>, as GLM-4.7's template does
  SpeculativeConfig speculative;
  bool async = false;
};

Outputs run(Backend& backend, const BudgetRun& r, EngineStats* stats = nullptr) {
  EngineConfig cfg = masked_steps_config(kEos, r.speculative, r.async);
  cfg.reasoning = ReasoningDelimiters{{kThink}, {kEndThink}};
  EngineCore core(cfg, tiny_model(kVocab, 8, 256), backend, piece_text({}));
  Outputs got;
  for (int q = 0; q < 5; ++q) {
    SamplingParams p;
    p.temperature = 1.0f;
    p.seed = uint64_t(q);
    p.n = 2;
    p.max_tokens = 24;
    p.ignore_eos = true;
    p.thinking_token_budget = r.budget;
    std::vector<int32_t> prompt = {1, 2, int32_t(3 + q)};
    if (r.open_section) prompt.push_back(kThink);
    const std::string id = "r" + std::to_string(q);
    core.add_request({id, prompt, p}, [&got](const RequestOutput& o) {
      EXPECT_TRUE(o.error.empty()) << o.error;
      for (const auto& d : o.choices) {
        auto& tokens = got[o.request_id + "/" + std::to_string(d.index)];
        tokens.insert(tokens.end(), d.new_tokens.begin(), d.new_tokens.end());
      }
    });
  }
  for (int steps = 0; core.has_work() && steps < 2000; ++steps) core.step();
  EXPECT_FALSE(core.has_work());
  if (stats) *stats = core.stats();
  return got;
}

// Where the reasoning of `out` ends (the index of its end token), counting from `from`.
size_t end_of_reasoning(const std::vector<int32_t>& out, size_t from = 0) {
  return size_t(std::find(out.begin() + int64_t(from), out.end(), kEndThink) - out.begin());
}

// Budgeted outputs against the unbudgeted ones of the same seeds, the section open in the prompt.
void expect_cut_at_budget(const Outputs& free, const Outputs& cut, int32_t budget) {
  ASSERT_EQ(free.size(), cut.size());
  int forced = 0;
  for (const auto& [key, tokens] : cut) {
    const std::vector<int32_t>& unbudgeted = free.at(key);
    const size_t natural = end_of_reasoning(unbudgeted);
    ASSERT_EQ(tokens.size(), 24u) << key;
    if (natural <= size_t(budget)) {
      EXPECT_EQ(tokens, unbudgeted) << key << ": the model closed its reasoning within the budget";
      continue;
    }
    ++forced;
    EXPECT_EQ(end_of_reasoning(tokens), size_t(budget)) << key;
    EXPECT_TRUE(std::equal(tokens.begin(), tokens.begin() + budget, unbudgeted.begin())) << key;
  }
  EXPECT_GT(forced, 0) << "no output ran past the budget: the workload tests nothing";
}

}  // namespace

TEST(EngineThinkingBudget, TheEndIsForcedWhereTheBudgetRunsOut) {
  FakeBackend backend(kVocab, 8);
  const Outputs free = run(backend, {});
  for (int32_t budget : {0, 1, 4}) {
    FakeBackend fresh(kVocab, 8);
    expect_cut_at_budget(free, run(fresh, {budget}), budget);
  }
}

TEST(EngineThinkingBudget, WithoutAnOpenSectionTheModelsOwnSectionIsCounted) {
  FakeBackend backend(kVocab, 8);
  const Outputs got = run(backend, {2, false});
  int opened = 0;
  for (const auto& [key, tokens] : got) {
    const auto start = std::find(tokens.begin(), tokens.end(), kThink);
    if (start == tokens.end() || tokens.end() - start <= 3) continue;
    ++opened;
    EXPECT_LE(end_of_reasoning(tokens, size_t(start - tokens.begin())) - size_t(start - tokens.begin()) - 1, 2u) << key;
  }
  EXPECT_GT(opened, 0) << "no output opened a reasoning section: the workload tests nothing";
}

TEST(EngineThinkingBudget, EverySamplingPathGivesTheHostsOutputs) {
  FakeBackend host(kVocab, 8);
  const Outputs want = run(host, {3});
  DeviceSamplingFake device(kVocab, 8);
  EXPECT_EQ(run(device, {3}), want);
  AsyncDeviceSamplingFake async(kVocab, 8);
  BudgetRun a{3};
  a.async = true;
  EngineStats stats;
  EXPECT_EQ(run(async, a, &stats), want);
  EXPECT_GT(stats.async_ahead_steps, 0) << "no step went ahead: async scheduling was not exercised";
}

TEST(EngineThinkingBudget, SpeculationKeepsTheCutAndTheOutputs) {
  // Logits that depend on the last 2 tokens only: outputs repeat, so guesses are made and hit.
  FakeBackend plain(kVocab, 8, nullptr, 2), plain_free(kVocab, 8, nullptr, 2);
  const Outputs free = run(plain_free, {});
  const Outputs want = run(plain, {3});
  expect_cut_at_budget(free, want, 3);
  BudgetRun s{3};
  s.speculative = SpeculativeConfig{3, 1, 2, 0};
  FakeBackend guessing(kVocab, 8, nullptr, 2);
  EngineStats stats;
  EXPECT_EQ(run(guessing, s, &stats), want);
  EXPECT_GT(stats.spec_num_accepted_tokens, 0) << "no guess was kept: speculation was not exercised";
  DeviceSamplingFake device(kVocab, 8, 2);
  EXPECT_EQ(run(device, s), want);
}

TEST(EngineThinkingBudget, RefusedWithoutReasoningDelimitersOrBelowZero) {
  GenerationRequest req{"r", {1, 2}, {}};
  req.params.thinking_token_budget = 4;
  RequestLimits limits{128, kVocab, 8};
  EXPECT_THROW(validate_request(req, limits), Error);
  limits.reasoning = std::make_shared<const ReasoningDelimiters>(ReasoningDelimiters{{kThink}, {kEndThink}});
  EXPECT_NO_THROW(validate_request(req, limits));
  req.params.thinking_token_budget = -1;
  EXPECT_THROW(validate_request(req, limits), Error);
}

// min_tokens masks the stop ids (and EOS) out of every draw below it: a forced end among them could
// not be drawn, so the combination is refused up front instead of the draws going astray.
TEST(EngineThinkingBudget, RefusedWhereMinTokensWouldMaskTheForcedEnd) {
  RequestLimits limits{128, kVocab, 8};
  limits.reasoning = std::make_shared<const ReasoningDelimiters>(ReasoningDelimiters{{kThink}, {kEndThink}});
  limits.eos_token_ids = {kEos};
  GenerationRequest req{"r", {1, 2, kThink}, {}};
  req.params.thinking_token_budget = 4;
  req.params.stop_token_ids = {kEndThink};
  EXPECT_NO_THROW(validate_request(req, limits));  // no min_tokens: nothing is masked
  req.params.min_tokens = 3;
  try {
    validate_request(req, limits);
    ADD_FAILURE() << "a forced end masked by min_tokens was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("stop_token_ids"), std::string::npos) << e.what();
  }
  req.params.stop_token_ids = {kEos - 1};  // another stop id: the end stays drawable
  EXPECT_NO_THROW(validate_request(req, limits));
  limits.eos_token_ids = {kEndThink};  // the end as an EOS id, masked unless EOS is ignored
  EXPECT_THROW(validate_request(req, limits), Error);
  req.params.ignore_eos = true;
  EXPECT_NO_THROW(validate_request(req, limits));
}

TEST(EngineThinkingBudget, RefusedWhereAGrammarWouldConstrainTheOpenReasoning) {
  RequestLimits limits{128, kVocab, 8};
  limits.reasoning = std::make_shared<const ReasoningDelimiters>(ReasoningDelimiters{{kThink}, {kEndThink}});
  GenerationRequest req{"r", {1, 2, kThink}, {}};
  req.params.thinking_token_budget = 4;
  req.params.structured = StructuredConstraint{nullptr, -1};  // in force from the first token
  EXPECT_THROW(validate_request(req, limits), Error);
  req.params.structured->start_after_token = kEndThink;  // a reasoning parser starts it after the end
  EXPECT_NO_THROW(validate_request(req, limits));
  req.params.structured->start_after_token = -1;
  req.prompt = {1, 2, kThink, 3, kEndThink};  // the prompt closed its section: nothing to force into the grammar
  EXPECT_NO_THROW(validate_request(req, limits));
}
