// `striker bench throughput` wraps the backend in a StepRecorder: every call must reach the real
// backend as the engine made it — the warm-up, and device sampling when the backend samples on the
// device (as `striker serve` runs it) — and every step is recorded, whichever way it ran.
#include <gtest/gtest.h>

#include <memory>

#include "cli/step_recorder.h"
#include "model/config.h"

namespace striker::cli {
namespace {

class CountingBackend final : public Backend {
 public:
  int warm_ups = 0, forwards = 0, sampled = 0;
  bool on_device = true;
  std::string name() const override { return "counting"; }
  int64_t full_block_bytes(int32_t) const override { return 1; }
  int64_t sliding_block_bytes(int32_t) const override { return 1; }
  void allocate_kv_cache(const KvCacheSpec&) override {}
  void warm_up() override { ++warm_ups; }
  bool samples_on_device() const override { return on_device; }
  DeviceLogprobLimits device_logprobs() const override { return {5, 3, 7}; }
  void forward(const ForwardBatch&, std::vector<float>& logits) override {
    ++forwards;
    logits.assign(4, 0.f);
  }
  void forward_sampled(const ForwardBatch& batch, const DeviceSampling&, SampledStep& out) override {
    ++sampled;
    out.tokens.assign(batch.seqs.size(), 7);
  }
};

ForwardBatch decode_batch(int seqs, int64_t pos) {
  ForwardBatch b;
  for (int s = 0; s < seqs; ++s) b.seqs.push_back(SequenceChunk{{1}, pos, {0}, {0}, false});
  return b;
}

TEST(StepRecorder, PassesWarmUpAndDeviceSamplingThroughAndRecordsEveryStep) {
  FlintConfig c;
  c.num_hidden_layers = 2;
  c.num_key_value_heads = 1;
  c.head_dim = 8;
  c.sliding_window = 4;
  c.layer_types = {LayerType::Full, LayerType::Sliding};
  auto inner = std::make_unique<CountingBackend>();
  CountingBackend* seen = inner.get();
  StepRecorder rec(std::move(inner), c, /*input_len=*/10);
  rec.warm_up();
  EXPECT_EQ(seen->warm_ups, 1);
  EXPECT_TRUE(rec.samples_on_device());
  EXPECT_EQ(rec.device_logprobs().max_top, 5);  // the engine must see what the real backend computes
  EXPECT_EQ(rec.device_logprobs().rows, 3);
  EXPECT_EQ(rec.device_logprobs().prompt_rows, 7);
  SampledStep out;
  rec.forward_sampled(decode_batch(3, 12), DeviceSampling{}, out);
  EXPECT_EQ(seen->sampled, 1);
  EXPECT_EQ(out.tokens, (std::vector<int32_t>{7, 7, 7}));
  std::vector<float> logits;
  rec.forward(decode_batch(1, 4), logits);  // a prompt position: not a decode step
  EXPECT_EQ(seen->forwards, 1);
  const auto steps = rec.steps();
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[0].seqs, 3);
  EXPECT_TRUE(steps[0].decode_only);
  EXPECT_GT(steps[0].kv_bytes, 0.0);
  EXPECT_FALSE(steps[1].decode_only);
  seen->on_device = false;
  EXPECT_FALSE(rec.samples_on_device());
}

}  // namespace
}  // namespace striker::cli
