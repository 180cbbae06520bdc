// The engine's device-sampling path, driven by a fake backend that "samples on the device" by
// calling the CPU reference sampler on its own logits: every output (tokens, text, logprobs,
// prompt logprobs, finish reasons) must equal the host-sampling path's, and only the rows that
// logprobs need may come back.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "engine/engine_core.h"
#include "engine/sampler.h"
#include "fakes.h"

using namespace striker;
using namespace striker::testing;

namespace {

struct Outputs {
  std::map<std::string, std::map<int32_t, std::vector<int32_t>>> tokens;
  std::map<std::string, std::map<int32_t, std::string>> text;
  std::map<std::string, std::map<int32_t, int>> finish;
  std::map<std::string, std::vector<std::tuple<int32_t, float, std::vector<std::pair<int32_t, float>>>>> logprobs;
  std::map<std::string, std::vector<std::tuple<int32_t, float, std::vector<std::pair<int32_t, float>>, int64_t>>>
      prompt_logprobs;
  bool operator==(const Outputs&) const = default;
};

// A fixed random workload (prompts, every sampling parameter, staggered arrivals, a pool small
// enough to preempt) run to completion on `backend`.
Outputs run_workload(Backend& backend, uint64_t seed) {
  EngineConfig cfg;
  cfg.max_model_len = 32;
  cfg.max_num_seqs = 4;
  cfg.max_num_batched_tokens = 16;
  cfg.block_size = 4;
  cfg.kv_cache_bytes = 400 * 24;
  cfg.eos_token_ids = {kTinyEos};
  cfg.sampler_threads = 1;
  EngineCore core(cfg, tiny_model(kTinyVocab, kTinyWindow, 256), backend, piece_text(std::vector<std::string>(kTinyVocab, "ab")));
  Outputs out;
  auto record = [&out](const RequestOutput& o) {
    for (const auto& d : o.choices) {
      auto& t = out.tokens[o.request_id][d.index];
      t.insert(t.end(), d.new_tokens.begin(), d.new_tokens.end());
      out.text[o.request_id][d.index] += d.new_text;
      if (d.finish) out.finish[o.request_id][d.index] = int(*d.finish);
      for (const auto& l : d.logprobs) out.logprobs[o.request_id].emplace_back(l.token, l.logprob, l.top);
    }
    for (const auto& l : o.prompt_logprobs)
      out.prompt_logprobs[o.request_id].emplace_back(l ? l->token : -1, l ? l->logprob : 0.f,
                                                     l ? l->top : std::vector<std::pair<int32_t, float>>{},
                                                     l ? l->rank : -1);
  };
  std::mt19937 rng{uint32_t(seed)};
  int added = 0;
  for (int step = 0; step < 5000 && (added < 40 || core.has_work()); ++step) {
    if (added < 40 && rng() % 2 == 0) {
      const SamplingParams p = random_sampling_params(rng, kTinyVocab, kTinyEos, 14, 3);
      const int len = 1 + int(rng() % uint32_t(32 - p.max_tokens));
      std::vector<int32_t> prompt;
      for (int i = 0; i < len; ++i) prompt.push_back(int32_t(rng() % 30));
      core.add_request({"q" + std::to_string(added++), prompt, p}, record);
    }
    if (core.has_work()) core.step();
  }
  EXPECT_FALSE(core.has_work());
  return out;
}

}  // namespace

TEST(EngineDeviceSampling, SameOutputsAsHostSampling) {
  for (uint64_t seed : {1u, 2u, 3u}) {
    FakeBackend host(kTinyVocab, kTinyWindow);
    DeviceSamplingFake device(kTinyVocab, kTinyWindow);
    const Outputs a = run_workload(host, seed);
    const Outputs b = run_workload(device, seed);
    EXPECT_EQ(a.tokens.size(), 40u);
    EXPECT_TRUE(a == b) << "seed " << seed << ": device-sampled outputs differ from host-sampled ones";
    EXPECT_EQ(a.tokens, b.tokens) << seed;
    EXPECT_GT(device.samples_, 100);
    // Only rows for logprobs come back: far fewer than the sampled rows.
    EXPECT_LT(device.returned_, device.samples_) << seed;
  }
}

// Logprobs of sampled tokens and prompt logprobs computed by the backend (all of them, or at most
// one sampled and three prompt rows per step with top_n <= 1, the rest coming back as rows): the
// same outputs, fewer rows returned.
TEST(EngineDeviceSampling, LogprobsComputedByTheBackendGiveTheSameOutputs) {
  for (uint64_t seed : {4u, 5u}) {
    FakeBackend host(kTinyVocab, kTinyWindow);
    DeviceSamplingFake rows_only(kTinyVocab, kTinyWindow);
    const Outputs a = run_workload(host, seed);
    const Outputs b = run_workload(rows_only, seed);
    EXPECT_TRUE(a == b) << seed;
    EXPECT_EQ(rows_only.device_lp_ + rows_only.device_prompt_, 0) << seed;
    for (const DeviceLogprobLimits limits : {DeviceLogprobLimits{20, 64, 1000}, DeviceLogprobLimits{1, 1, 3}}) {
      DeviceSamplingFake device(kTinyVocab, kTinyWindow);
      device.limits_ = limits;
      const Outputs c = run_workload(device, seed);
      EXPECT_TRUE(a == c) << "seed " << seed << ", limits " << limits.max_top << "/" << limits.rows
                          << ": outputs with logprobs from the backend differ";
      EXPECT_GT(device.device_lp_, 0) << seed;
      EXPECT_GT(device.device_prompt_, 0) << seed;
      EXPECT_EQ(device.returned_ + device.device_lp_ + device.device_prompt_, rows_only.returned_) << seed;
      if (limits.rows >= 64) EXPECT_EQ(device.returned_, 0) << seed;  // nothing left for the host
    }
  }
}

TEST(EngineDeviceSampling, BackendWithoutDeviceSamplingSaysSo) {
  FakeBackend host(kTinyVocab, kTinyWindow);
  SampledStep out;
  try {
    host.forward_sampled(ForwardBatch{}, DeviceSampling{}, out);
    FAIL() << "forward_sampled on a host-only backend did not throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot sample on the device"), std::string::npos) << e.what();
  }
}
