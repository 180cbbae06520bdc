// Random sampling cases shared by the CPU mirror of the GPU sampler
// (tests/cpp/engine/test_sampler_gpu_mirror.cpp) and the GPU sampler test
// (tests/cuda/test_sampling.cpp), so both check the same kinds of rows and requests.
#pragma once
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <random>
#include <set>
#include <vector>

#include "backends/backend.h"
#include "core/bf16.h"

namespace striker::sampling_cases {

inline float bf16r(float f) { return bf16_to_float(float_to_bf16(f)); }

// Kinds of rows: 0 plain, 1 coarse (steps of 0.25: ties everywhere, also on every cut),
// 2 peaked (a tied group well above the rest), 3 with -inf and NaN entries, 4 a tied group of
// 300 tokens spread over the row near the top (top_k cuts inside it, across slices), 5 only a
// dozen finite logits (top_k above the number of candidates), the rest -inf and a NaN.
inline std::vector<float> make_row(std::mt19937& rng, int64_t V, int kind) {
  std::normal_distribution<float> nd(0.f, kind == 2 ? 1.f : 3.f);
  std::vector<float> x(static_cast<size_t>(V));
  for (auto& v : x) v = bf16r(kind == 1 ? std::round(nd(rng) * 4.f) / 4.f : nd(rng));
  if (kind == 2) {
    const float top = bf16r(12.f + float(rng() % 4));
    for (int j = 0; j < 5; ++j) x[rng() % size_t(V)] = top;
    for (int j = 0; j < 20; ++j) x[rng() % size_t(V)] = bf16r(top - 1.f - float(rng() % 3));
  }
  if (kind == 3) {
    for (int j = 0; j < 50; ++j) x[rng() % size_t(V)] = -std::numeric_limits<float>::infinity();
    x[rng() % size_t(V)] = std::numeric_limits<float>::quiet_NaN();
  }
  if (kind == 4) {
    const float tied = bf16r(9.f + float(rng() % 3));
    for (int j = 0; j < 300; ++j) x[rng() % size_t(V)] = tied;
    for (int j = 0; j < 3; ++j) x[rng() % size_t(V)] = bf16r(tied + 1.f + float(j));
  }
  if (kind == 5) {
    for (auto& v : x) v = -std::numeric_limits<float>::infinity();
    for (int j = 0; j < 12; ++j) x[rng() % size_t(V)] = bf16r(nd(rng));
    x[rng() % size_t(V)] = std::numeric_limits<float>::quiet_NaN();
  }
  return x;
}

template <typename T>
inline T pick(std::mt19937& rng, std::initializer_list<T> options) {
  return *(options.begin() + rng() % options.size());
}

inline std::vector<int32_t> unique_ids(std::mt19937& rng, int64_t V, int n) {
  n = int(std::min<int64_t>(n, V / 2));  // a small vocabulary cannot hold n distinct ids
  std::set<int32_t> s;
  while (int(s.size()) < n) s.insert(int32_t(rng() % uint64_t(V)));
  return {s.begin(), s.end()};
}

inline SampleRequest random_request(std::mt19937& rng, int64_t V, int32_t row) {
  SampleRequest r;
  r.row = row;
  r.temperature = pick(rng, {0.f, 0.3f, 0.7f, 1.f, 1.f, 1.5f});
  r.top_k = pick<int32_t>(rng, {0, 0, 1, 2, 7, 20, 20, 50, 128, 129, 256, 600, int32_t(V) + 5});
  r.top_p = pick(rng, {1.f, 1.f, 0.95f, 0.8f, 0.5f, 0.2f, 0.01f});
  r.min_p = pick(rng, {0.f, 0.f, 0.02f, 0.2f});
  r.repetition_penalty = pick(rng, {1.f, 1.f, 1.2f, 0.8f});
  r.frequency_penalty = pick(rng, {0.f, 0.5f, -0.3f});
  r.presence_penalty = pick(rng, {0.f, 0.4f});
  r.seed = rng();
  r.choice = int32_t(rng() % 4);
  r.step = int64_t(rng() % 1000);
  for (int32_t id : unique_ids(rng, V, int(rng() % 6)))
    r.logit_bias.emplace_back(id, float(int(rng() % 21) - 10) * 0.5f);
  for (int32_t id : unique_ids(rng, V, int(rng() % 20))) r.output_counts.emplace_back(id, int32_t(1 + rng() % 4));
  if (r.repetition_penalty != 1.f) r.prompt_tokens = unique_ids(rng, V, int(rng() % 50));
  r.suppressed = unique_ids(rng, V, int(rng() % 4));
  return r;
}

}  // namespace striker::sampling_cases
