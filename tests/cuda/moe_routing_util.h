// Routings for the grouped-MoE tests: every token picks K distinct experts, drawn so that the
// sort and the tiles meet their edge cases (experts with no rows, one expert with every row).
#pragma once
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "cuda_test_util.h"

namespace striker::cuda::testing {

enum class RoutingKind {
  uniform,     // K distinct experts uniformly from all E
  skewed,      // expert 3 in every token; the rest from 8 experts, so most experts get no rows
  identical,   // every token picks experts 0..K-1 (each of them has all T rows)
};

inline std::string routing_name(RoutingKind k) {
  return k == RoutingKind::uniform ? "uniform" : k == RoutingKind::skewed ? "skewed" : "identical";
}

inline std::vector<int32_t> make_routing(std::mt19937& rng, RoutingKind kind, int T, int K, int E) {
  std::vector<int32_t> ids;
  ids.reserve(size_t(T) * K);
  std::vector<int32_t> pool(static_cast<size_t>(E));
  std::iota(pool.begin(), pool.end(), 0);
  for (int t = 0; t < T; ++t) {
    std::vector<int32_t> chosen;
    if (kind == RoutingKind::identical) {
      for (int k = 0; k < K; ++k) chosen.push_back(k);
    } else if (kind == RoutingKind::skewed) {
      std::vector<int32_t> few;
      for (int e = 8; e < std::min(E, 8 + std::max(K, 8)); ++e) few.push_back(e);
      std::shuffle(few.begin(), few.end(), rng);
      chosen.push_back(3);
      for (int k = 1; k < K; ++k) chosen.push_back(few[size_t(k - 1)]);
    } else {
      std::shuffle(pool.begin(), pool.end(), rng);
      chosen.assign(pool.begin(), pool.begin() + K);
    }
    std::shuffle(chosen.begin(), chosen.end(), rng);  // the router's order is by score, not by id
    ids.insert(ids.end(), chosen.begin(), chosen.end());
  }
  return ids;
}

// R device copies of uniform routings for T tokens, the first one `first`: benchmarks launch
// with routing i % R so the experts a few decode tokens read are not L2 hits from the launch before.
class RotatedRoutings {
 public:
  static constexpr int R = 8;
  RotatedRoutings(std::mt19937& rng, const std::vector<int32_t>& first, int T, int K, int E) {
    bufs_.emplace_back(first);
    for (int r = 1; r < R; ++r) bufs_.emplace_back(make_routing(rng, RoutingKind::uniform, T, K, E));
  }
  const int32_t* ids(int i) const { return bufs_[size_t(i % R)].get(); }

 private:
  std::vector<DeviceBuffer<int32_t>> bufs_;
};

}  // namespace striker::cuda::testing
