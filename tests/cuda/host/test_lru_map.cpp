// LruMap (linear/lru_map.h), the bound on the cuBLASLt plans: a miss makes the value once, a full
// map forgets the least recently used entry, and a failing make leaves the map unchanged.
#include "backends/cuda/linear/lru_map.h"

#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <tuple>

namespace striker::cuda {
namespace {

TEST(LruMap, MakesEachKeyOnceWhileItStays) {
  LruMap<int, int> m(4);
  int made = 0;
  for (int round = 0; round < 3; ++round)
    for (int k = 0; k < 4; ++k) EXPECT_EQ(m.get_or_make(k, [&] { ++made; return k * 10; }), k * 10);
  EXPECT_EQ(made, 4);
  EXPECT_EQ(m.size(), 4u);
}

TEST(LruMap, ForgetsTheLeastRecentlyUsedWhenFull) {
  LruMap<std::tuple<int, int>, std::unique_ptr<int>> m(3);
  auto make = [](int v) { return [v] { return std::make_unique<int>(v); }; };
  m.get_or_make({1, 0}, make(1));
  m.get_or_make({2, 0}, make(2));
  m.get_or_make({3, 0}, make(3));
  m.get_or_make({1, 0}, make(-1));  // a hit: 1 becomes the most recent, 2 the oldest
  EXPECT_EQ(*m.get_or_make({4, 0}, make(4)), 4);
  EXPECT_EQ(m.size(), 3u);
  EXPECT_FALSE(m.contains({2, 0}));
  EXPECT_TRUE(m.contains({1, 0}));
  EXPECT_TRUE(m.contains({3, 0}));
  EXPECT_EQ(*m.get_or_make({1, 0}, make(-1)), 1);  // kept, not remade
  int made = 0;
  EXPECT_EQ(*m.get_or_make({2, 0}, [&] { ++made; return std::make_unique<int>(22); }), 22);  // remade after eviction
  EXPECT_EQ(made, 1);
  EXPECT_FALSE(m.contains({3, 0}));  // 3 was the oldest then
}

TEST(LruMap, AFailingMakeLeavesTheMapAsItWas) {
  LruMap<int, int> m(2);
  m.get_or_make(1, [] { return 1; });
  m.get_or_make(2, [] { return 2; });
  EXPECT_THROW(m.get_or_make(3, []() -> int { throw std::runtime_error("no algorithm"); }), std::runtime_error);
  EXPECT_EQ(m.size(), 2u);
  EXPECT_TRUE(m.contains(1));
  EXPECT_TRUE(m.contains(2));
}

TEST(LruMap, CapacityBelowOneHoldsOne) {
  LruMap<int, int> m(0);
  EXPECT_EQ(m.capacity(), 1u);
  m.get_or_make(1, [] { return 1; });
  m.get_or_make(2, [] { return 2; });
  EXPECT_EQ(m.size(), 1u);
  EXPECT_TRUE(m.contains(2));
}

}  // namespace
}  // namespace striker::cuda
