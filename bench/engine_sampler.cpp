// Cost of sampling one token from a Flint-sized logits row (151552) on the CPU.
#include <benchmark/benchmark.h>

#include <cmath>
#include <random>

#include "engine/sampler.h"

using namespace striker;

namespace {

std::vector<float> random_logits(size_t vocab) {
  std::mt19937 rng(1);
  std::normal_distribution<float> d(0.f, 3.f);
  std::vector<float> v(vocab);
  for (auto& x : v) x = d(rng);
  return v;
}

void run(benchmark::State& state, SamplingParams p) {
  const auto logits = random_logits(151552);
  std::vector<float> scratch;
  SampleContext ctx;
  ctx.params = &p;
  ctx.seed = 3;
  int64_t step = 0;
  for (auto _ : state) {
    ctx.step = step++;
    benchmark::DoNotOptimize(sample_token(logits, ctx, scratch));
  }
}

void BM_Greedy(benchmark::State& s) {
  SamplingParams p;
  p.temperature = 0;
  run(s, p);
}
void BM_FlintDefaults(benchmark::State& s) {  // temperature 1, top_k 20, top_p 0.95
  SamplingParams p;
  p.top_k = 20;
  p.top_p = 0.95f;
  run(s, p);
}
void BM_TopPOnly(benchmark::State& s) {
  SamplingParams p;
  p.top_p = 0.9f;
  run(s, p);
}
void BM_Plain(benchmark::State& s) { run(s, SamplingParams{}); }
void BM_Logprobs20(benchmark::State& s) {
  const auto logits = random_logits(151552);
  for (auto _ : s) benchmark::DoNotOptimize(token_logprob(logits, 5, 20));
}

}  // namespace

BENCHMARK(BM_Greedy);
BENCHMARK(BM_FlintDefaults);
BENCHMARK(BM_TopPOnly);
BENCHMARK(BM_Plain);
BENCHMARK(BM_Logprobs20);
BENCHMARK_MAIN();
