// SegmentCache (ids of long segments seen recently): LRU order, the byte budget, the
// at_text_start key, and that a tokenizer answering from it gives the ids a fresh tokenizer
// computes, also with several threads encoding at once.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <random>
#include <thread>

#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/segment_cache.h"
#include "tokenizer/tokenizer.h"

namespace fs = std::filesystem;
using striker::tok::SegmentCache;

namespace {

std::string text_of(size_t bytes, uint32_t seed) {
  static const char* kWords[] = {"time", "year", "people", "way", "day",  "man",   "thing", "woman", "life",
                                 "child", "world", "school", "42",  "3.14", "naïve", "日本語", "\n\n", "  ", "!?"};
  std::mt19937 rng(seed);
  std::string s;
  while (s.size() < bytes) {
    s += kWords[rng() % (sizeof(kWords) / sizeof(kWords[0]))];
    s += ' ';
  }
  return s;
}

std::vector<int32_t> cached(const SegmentCache& c, const std::string& text, bool start) {
  std::vector<int32_t> out{-7};  // appended after what is there
  if (!c.append(text, start, out)) return {};
  return {out.begin() + 1, out.end()};
}

fs::path tokenizer_dir() {
  const char* env = std::getenv("STRIKER_SHARED_DIR");
  return (env ? fs::path(env) : fs::path(STRIKER_SHARED_DIR)) / "fixtures" / "flint-tokenizer";
}

}  // namespace

TEST(SegmentCache, ReturnsWhatWasPutKeyedByTextAndStartFlag) {
  SegmentCache c;
  const std::string a = text_of(5000, 1), b = text_of(5000, 2);
  c.put(a, false, std::vector<int32_t>{1, 2, 3});
  c.put(a, true, std::vector<int32_t>{4});
  EXPECT_EQ(cached(c, a, false), (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(cached(c, a, true), (std::vector<int32_t>{4}));
  EXPECT_TRUE(cached(c, b, false).empty());
  std::vector<int32_t> out;
  EXPECT_FALSE(c.append(a.substr(1), false, out));  // a different text of the same length class
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(c.entries(), 2u);
}

TEST(SegmentCache, EvictsLeastRecentlyUsedBeyondTheBudget) {
  const std::string a = text_of(5000, 1), b = text_of(5000, 2), d = text_of(5000, 3);
  const std::vector<int32_t> ids(100, 9);
  const size_t entry = a.size() + ids.size() * sizeof(int32_t);  // all three texts are 5000-5010 bytes
  SegmentCache c(2 * entry + 64);
  c.put(a, false, ids);
  c.put(b, false, ids);
  EXPECT_FALSE(cached(c, a, false).empty());  // a is now the most recent
  c.put(d, false, ids);                       // over budget: b goes
  EXPECT_FALSE(cached(c, a, false).empty());
  EXPECT_TRUE(cached(c, b, false).empty());
  EXPECT_FALSE(cached(c, d, false).empty());
  EXPECT_EQ(c.entries(), 2u);
  EXPECT_LE(c.bytes(), 2 * entry + 64);
  SegmentCache tiny(100);  // an entry larger than the whole budget is not kept
  tiny.put(a, false, ids);
  EXPECT_EQ(tiny.entries(), 0u);
}

TEST(SegmentCache, TokenizerHitsGiveTheIdsOfAFreshTokenizer) {
  const auto warm = striker::Tokenizer::from_dir(tokenizer_dir());
  const std::string history = text_of(40000, 5);  // one long message, resent every turn
  ASSERT_GE(history.size(), SegmentCache::kMinBytes);
  std::vector<std::string> turns;
  for (int t = 0; t < 4; ++t)
    turns.push_back("[gMASK]<sop><|user|>\n" + history + "<|assistant|>\nanswer " + std::to_string(t) + "<|user|>\n" +
                    text_of(300 + 50 * size_t(t), 10 + uint32_t(t)) + "<|assistant|>");
  turns.push_back(history);  // the same text at the start of the input: a different key
  for (const auto& t : turns) (void)warm->encode(t);  // fills the cache
  // The history, inside a turn and at the start of the input: two entries the later encodes hit.
  const auto* hf = dynamic_cast<const striker::tok::HfTokenizer*>(warm.get());
  ASSERT_NE(hf, nullptr);
  EXPECT_EQ(hf->cached_segments(), 2u);
  std::vector<std::thread> threads;
  std::vector<std::vector<std::vector<int32_t>>> got(4);
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&, i] {
      for (const auto& t : turns) got[size_t(i)].push_back(warm->encode(t));
    });
  for (auto& th : threads) th.join();
  for (size_t k = 0; k < turns.size(); ++k) {
    const auto fresh = striker::Tokenizer::from_dir(tokenizer_dir());  // nothing cached
    const std::vector<int32_t> want = fresh->encode(turns[k]);
    ASSERT_GT(want.size(), 5000u);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(got[size_t(i)][k], want) << "turn " << k << " thread " << i;
  }
}
