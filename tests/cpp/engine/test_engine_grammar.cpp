// Structured outputs through the engine: a regex grammar on a tiny vocabulary, random logits,
// temperature 1, several choices and requests at once, on the host sampler and on a backend
// that samples "on the device" (reading the masks only after DeviceSampling::wait_for_masks).
// Every finished output must match the grammar and end on the stop token.
#include <gtest/gtest.h>

#include <map>
#include <regex>

#include "engine/engine_core.h"
#include "engine/grammar/structured_output.h"
#include "engine/host_sampled_steps.h"
#include "engine/sampler.h"
#include "fakes.h"

using namespace striker;
using namespace striker::testing;

namespace {

constexpr int64_t kVocab = 32;
constexpr int32_t kEos = 31;

std::vector<std::string> pieces() {
  std::vector<std::string> p = {"a", "b", "c", "ab", "bc", "abc", "1", "2", "12", "x", "y", "-", "--", "a1", "c2",
                                "(", ")", " ", "  ", "ba", "cab", "21", "z", "q", "r", "s", "t", "u", "v", "w", "<S>", "<E>"};
  return p;
}

std::map<std::string, std::map<int32_t, std::pair<std::string, std::vector<int32_t>>>> run(
    Backend& backend, const std::string& pattern, SpeculativeConfig speculative = {}, EngineStats* stats = nullptr,
    float temperature = 1.0f, bool async = false) {
  grammar::StructuredOutputSpec spec;
  spec.kind = grammar::StructuredOutputSpec::Kind::Regex;
  spec.text = pattern;
  auto vocab = std::make_shared<grammar::TokenVocabulary>(pieces(), std::vector<int32_t>{30, 31});
  auto compiled = grammar::compile_structured_output(spec, vocab);
  const EngineConfig cfg = masked_steps_config(kEos, speculative, async);
  EngineCore core(cfg, tiny_model(kVocab, 8, 256), backend, piece_text(pieces()));
  std::map<std::string, std::map<int32_t, std::pair<std::string, std::vector<int32_t>>>> got;
  for (int r = 0; r < 6; ++r) {
    SamplingParams p;
    p.temperature = temperature;
    p.seed = uint64_t(r);
    p.n = 3;
    p.max_tokens = 60;
    p.structured = StructuredConstraint{compiled, -1};
    const std::string id = "r" + std::to_string(r);
    core.add_request({id, {1, 2, 3, int32_t(r)}, p}, [&got](const RequestOutput& o) {
      for (const auto& d : o.choices) {
        auto& [text, tokens] = got[o.request_id][d.index];
        text += d.new_text;
        tokens.insert(tokens.end(), d.new_tokens.begin(), d.new_tokens.end());
        EXPECT_TRUE(!d.finish || *d.finish == FinishReason::Stop) << o.request_id << " ended without the grammar";
      }
      EXPECT_TRUE(o.error.empty()) << o.error;
    });
  }
  for (int steps = 0; core.has_work() && steps < 1000; ++steps) core.step();
  EXPECT_FALSE(core.has_work());
  if (stats) *stats = core.stats();
  return got;
}

void expect_all_match(const std::map<std::string, std::map<int32_t, std::pair<std::string, std::vector<int32_t>>>>& got,
                      const std::string& pattern) {
  const std::regex re(pattern);
  int outputs = 0;
  for (const auto& [id, choices] : got)
    for (const auto& [c, out] : choices) {
      ++outputs;
      ASSERT_FALSE(out.second.empty());
      EXPECT_EQ(out.second.back(), kEos) << id << "/" << c;
      EXPECT_TRUE(std::regex_match(out.first, re)) << id << "/" << c << ": '" << out.first << "'";
    }
  EXPECT_EQ(outputs, 18);
}

TEST(EngineGrammar, HostSamplerFollowsTheGrammar) {
  const std::string pattern = "(ab|c)+-?(12|2){1,3}";
  FakeBackend backend(kVocab, 8);
  expect_all_match(run(backend, pattern), pattern);
}

TEST(EngineGrammar, DeviceSamplingGetsTheSameMasksAndTokens) {
  const std::string pattern = "(ab|c)+-?(12|2){1,3}";
  FakeBackend host(kVocab, 8);
  DeviceSamplingFake device(kVocab, 8);
  const auto a = run(host, pattern);
  const auto b = run(device, pattern);
  expect_all_match(b, pattern);
  EXPECT_EQ(a, b);  // the draw is the same function of logits, mask and seed on both paths
}

// Speculation under a grammar: guesses the grammar rules out are dropped, each guessed row is drawn
// under the mask after the guesses before it; the outputs are those without speculation, on the
// host sampler and on the device, while guesses are made and accepted.
TEST(EngineGrammar, SpeculationGivesTheSameOutputsUnderTheGrammar) {
  const std::string pattern = "(ab|c){12,30}-?(12|2){1,3}";  // long enough outputs to repeat themselves
  const SpeculativeConfig spec{3, 1, 2, 0};
  // Sampled at temperature 1 and greedy; logits from the last token only, so that outputs repeat
  // themselves and guesses are accepted.
  for (const float temperature : {1.0f, 0.0f}) {
    FakeBackend plain(kVocab, 8, nullptr, 1), speculating(kVocab, 8, nullptr, 1);
    DeviceSamplingFake device(kVocab, 8, 1);
    EngineStats stats, device_stats;
    const auto a = run(plain, pattern, {}, nullptr, temperature);
    const auto b = run(speculating, pattern, spec, &stats, temperature);
    const auto c = run(device, pattern, spec, &device_stats, temperature);
    expect_all_match(b, pattern);
    EXPECT_EQ(a, b) << temperature;
    EXPECT_EQ(a, c) << temperature;
    for (const EngineStats& s : {stats, device_stats}) {
      EXPECT_GT(s.spec_num_drafts, 10) << temperature;
      EXPECT_GT(s.spec_num_accepted_tokens, 0) << temperature;
    }
  }
}

// Async scheduling under grammars: each step launched ahead gets its masks only once the step
// before it is collected (late masks, made while its forward pass runs): the same outputs as one
// step at a time, on a device-sampling backend and on HostSampledSteps, with steps going ahead.
TEST(EngineGrammar, AsyncSchedulingGivesTheSameOutputsUnderTheGrammar) {
  const std::string pattern = "(ab|c)+-?(12|2){1,3}";
  DeviceSamplingFake device(kVocab, 8);
  AsyncDeviceSamplingFake async_device(kVocab, 8);
  HostSampledSteps host_steps(std::make_unique<FakeBackend>(kVocab, 8), kVocab);
  EngineStats a_stats, b_stats;
  const auto a = run(device, pattern);
  const auto b = run(async_device, pattern, {}, &a_stats, 1.0f, true);
  const auto c = run(host_steps, pattern, {}, &b_stats, 1.0f, true);
  expect_all_match(b, pattern);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a, c);
  for (const EngineStats& s : {a_stats, b_stats}) EXPECT_GT(s.async_ahead_steps * 2, s.async_steps);
  EXPECT_GT(async_device.ahead_launches_ * 2, async_device.launches_);
}

}  // namespace
