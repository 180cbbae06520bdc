// Engine overhead per decode step (scheduling, batch building, sampling, output) with a
// backend that does no compute: what the engine adds on top of the forward pass.
// BM_DecodeStep: the host samples from logits rows (the CPU backend's path).
// BM_DeviceSampledStep: the backend draws the tokens (the CUDA backend's path, as `striker serve`
// runs it): the host time per step that the GPU waits for unless --async-scheduling hides it.
#include <benchmark/benchmark.h>

#include <random>

#include "engine/engine_core.h"

using namespace striker;

namespace {

constexpr int64_t kVocab = 151552;

// Returns the same random rows every step: no compute, only the logits copy a real backend does.
class NullBackend : public Backend {
 public:
  NullBackend() : row_(kVocab) {
    std::mt19937 rng(1);
    std::normal_distribution<float> d(0.f, 3.f);
    for (auto& v : row_) v = d(rng);
  }
  std::string name() const override { return "null"; }
  int64_t full_block_bytes(int32_t b) const override { return 28 * 1024 * b; }
  int64_t sliding_block_bytes(int32_t b) const override { return 70 * 1024 * b; }
  void allocate_kv_cache(const KvCacheSpec&) override {}
  void forward(const ForwardBatch& batch, std::vector<float>& logits) override {
    logits.clear();
    for (const auto& s : batch.seqs) {
      const size_t rows = s.all_logits ? s.tokens.size() : 1;
      for (size_t r = 0; r < rows; ++r) logits.insert(logits.end(), row_.begin(), row_.end());
    }
  }

 private:
  std::vector<float> row_;
};

// Draws without compute: a token that depends on the sample's (seed, step), as a device sampler's
// would, so every sequence keeps decoding its own text.
class NullSampledBackend : public NullBackend {
 public:
  std::string name() const override { return "null-sampled"; }
  bool samples_on_device() const override { return true; }
  void forward_sampled(const ForwardBatch&, const DeviceSampling& ds, SampledStep& out) override {
    if (ds.wait_for_masks) ds.wait_for_masks();
    out = SampledStep{};
    out.tokens.reserve(ds.samples.size());
    for (const SampleRequest& r : ds.samples) out.tokens.push_back(int32_t((r.seed * 7919 + uint64_t(r.step) * 104729) % 150000));
  }
};

class PlainText : public TokenTextStream {
 public:
  std::string push(int32_t) override { return "x"; }
  std::string flush() override { return ""; }
};

FlintConfig flint_like() {
  FlintConfig c;
  c.vocab_size = kVocab;
  c.num_hidden_layers = 49;
  c.layer_types.assign(49, LayerType::Sliding);
  for (int l = 3; l < 49; l += 4) c.layer_types[size_t(l)] = LayerType::Full;
  c.sliding_window = 513;
  c.max_position_embeddings = 262144;
  return c;
}

template <class B>
void run_decode_steps(benchmark::State& state) {
  const int seqs = int(state.range(0));
  const bool greedy = state.range(1) != 0;
  B backend;
  EngineConfig cfg;
  cfg.max_model_len = 8192;
  cfg.max_num_seqs = 256;
  cfg.max_num_batched_tokens = 8192;
  cfg.kv_cache_bytes = int64_t(40) << 30;
  EngineCore core(cfg, flint_like(), backend, [](bool) { return std::make_unique<PlainText>(); });
  SamplingParams p;
  p.max_tokens = 4096;
  p.ignore_eos = true;
  if (greedy) {
    p.temperature = 0;
  } else {  // Flint's generation defaults
    p.top_k = 20;
    p.top_p = 0.95f;
  }
  for (int i = 0; i < seqs; ++i) {
    p.seed = uint64_t(i);
    core.add_request({"r" + std::to_string(i), std::vector<int32_t>(128, 7), p}, [](const RequestOutput&) {});
  }
  while (core.scheduler().running().size() < size_t(seqs) || !core.scheduler().waiting().empty()) core.step();
  core.step();  // everyone decoding from here
  for (auto _ : state) core.step();
  state.counters["tok/s"] = benchmark::Counter(double(seqs), benchmark::Counter::kIsIterationInvariantRate);
}

void BM_DecodeStep(benchmark::State& state) { run_decode_steps<NullBackend>(state); }
void BM_DeviceSampledStep(benchmark::State& state) { run_decode_steps<NullSampledBackend>(state); }

}  // namespace

BENCHMARK(BM_DecodeStep)->Args({1, 0})->Args({64, 0})->Args({64, 1})->Args({256, 0})->Unit(benchmark::kMillisecond);
// A fixed count: left to itself the benchmark would run past the requests' 4,096 tokens (steps with
// nothing to do).
BENCHMARK(BM_DeviceSampledStep)->Args({1, 0})->Args({64, 0})->Args({256, 0})->Iterations(3000)->Unit(benchmark::kMicrosecond);
BENCHMARK_MAIN();
