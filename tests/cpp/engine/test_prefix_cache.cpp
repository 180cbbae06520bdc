// Prefix caching below the engine: block hashes (vLLM's sha256_cbor byte for byte), the block
// pool's reference counts and LRU eviction, and the hybrid (full + sliding) longest-hit search.
#include <gtest/gtest.h>

#include "core/error.h"
#include "engine/block_hash.h"
#include "engine/block_pool.h"
#include "engine/kv_block_manager.h"

using namespace striker;

namespace {

// Expected digests come from Python: hashlib.sha256(cbor2.dumps(obj, canonical=True)) with
// cbor2 5.6.5, i.e. vLLM's sha256_cbor, NONE_HASH = sha256_cbor("0") (PYTHONHASHSEED=0).
constexpr const char* kNone0 = "4e1195df020de59e0d65a33a4279f1183e7ae4e5d980e309f8b55adff2e61c3e";

KvLayout layout(int64_t full, int64_t sliding, int64_t window, int32_t block = 4) {
  KvLayout L;
  L.block_size = block;
  L.num_full_blocks = full;
  L.num_sliding_blocks = sliding;
  L.use_full = full > 0;
  L.use_sliding = sliding > 0;
  L.sliding_window = window;
  return L;
}

std::unique_ptr<BlockHasher> hasher() { return std::make_unique<BlockHasher>(HashAlgo::Sha256Cbor, "0"); }

std::vector<int32_t> ids(int n, int salt) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back((i * 13 + salt) % 97);
  return t;
}

// Computes `tokens` in one go into a sequence, as a scheduled prefill would, and caches it.
SeqBlockTables compute(KvBlockManager& kv, const std::vector<int32_t>& tokens) {
  SeqBlockTables t;
  kv.allocate_up_to(t, int64_t(tokens.size()));
  kv.hash_blocks(tokens, {}, t);
  kv.cache_computed_blocks(tokens, t, int64_t(tokens.size()));
  return t;
}

}  // namespace

TEST(BlockHash, Sha256CborMatchesVllm) {
  BlockHasher h(HashAlgo::Sha256Cbor, "0");
  EXPECT_EQ(hash_hex(h.none_hash()), kNone0);
  const BlockHash b0 = h.hash_block(h.none_hash(), std::vector<int32_t>{1, 2, 3, 4}, {});
  EXPECT_EQ(hash_hex(b0), "c9d58ba695280d69b243e1e0df813136ca9196b286fb1a021e0b2e028ef071cb");
  EXPECT_EQ(hash_hex(h.hash_block(b0, std::vector<int32_t>{5, 6, 100000, 24}, {})),
            "13f07fb1721b724083e39d916edde0e17418677d356d4344d6712d17dea3b922");
  EXPECT_EQ(hash_hex(h.hash_block(h.none_hash(), std::vector<int32_t>{1, 2, 3, 4}, {"tenant-a"})),
            "5188afdf425172363edc325e9600bdb55cfc0950138d1c11b71ec2ac150962f4");
  // Every CBOR integer head width (1, 2, 3, 5 bytes).
  EXPECT_EQ(hash_hex(h.hash_block(h.none_hash(), std::vector<int32_t>{0, 23, 24, 255, 256, 65535, 65536, 151551}, {})),
            "a2e6832ad6fc3e2aa7237aaefe2585306e5f42656db8067e2acc18f9e09a1c81");
}

TEST(BlockHash, ChainCoversFullBlocksOnlyAndSaltChangesEveryBlock) {
  BlockHasher h(HashAlgo::Sha256, "7");
  std::vector<BlockHash> a, b, salted;
  const auto t = ids(11, 1);
  h.extend(t, 4, {}, a);
  ASSERT_EQ(a.size(), 2u);  // 11 tokens: two full blocks
  EXPECT_EQ(a[1], h.hash_block(a[0], std::span(t).subspan(4, 4), {}));
  auto longer = t;
  longer.push_back(5);
  h.extend(longer, 4, {}, a);  // incremental: only the new full block
  EXPECT_EQ(a.size(), 3u);
  h.extend(longer, 4, {}, b);
  EXPECT_EQ(a, b);
  h.extend(longer, 4, {"salt"}, salted);
  for (size_t i = 0; i < 3; ++i) EXPECT_NE(salted[i], a[i]) << i;
  // Without a seed every hasher has its own random root.
  EXPECT_NE(BlockHasher(HashAlgo::Sha256, std::nullopt).none_hash(), BlockHasher(HashAlgo::Sha256, std::nullopt).none_hash());
  EXPECT_THROW(parse_hash_algo("md5"), Error);
  EXPECT_EQ(parse_hash_algo("sha256_cbor"), HashAlgo::Sha256Cbor);
}

TEST(BlockPool, HandsOutLowIdsFirstAndReusesLastReleased) {
  BlockPool pool(4);
  EXPECT_EQ(pool.allocate(), 0);
  EXPECT_EQ(pool.allocate(), 1);
  EXPECT_EQ(pool.allocate(), 2);
  EXPECT_EQ(pool.num_free(), 1);
  pool.release(0);
  pool.release(2);
  EXPECT_EQ(pool.allocate(), 2);
  EXPECT_EQ(pool.allocate(), 0);
  EXPECT_EQ(pool.allocate(), 3);
  EXPECT_EQ(pool.num_free(), 0);
  EXPECT_EQ(pool.num_used(), 4);
}

TEST(BlockPool, CachedBlocksAreEvictedLeastRecentlyUsedAndOnlyWhenNeeded) {
  KvEventLog log{true, {}};
  BlockPool pool(4, KvPoolKind::Full, &log, 4);
  BlockHasher h(HashAlgo::Sha256, "0");
  std::vector<BlockHash> names;
  for (int i = 0; i < 3; ++i) names.push_back(h.hash_block(h.none_hash(), std::vector<int32_t>{i}, {}));
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(pool.allocate(), i);
    ASSERT_TRUE(pool.store(i, names[size_t(i)]));
  }
  EXPECT_FALSE(pool.store(1, names[1]));  // stored already
  pool.release(1);
  pool.release(0);
  pool.release(2);  // LRU order now 1, 0, 2 (after the never-used block 3)
  EXPECT_EQ(pool.num_free(), 4);
  EXPECT_EQ(pool.num_cached(), 3);
  pool.touch(0);  // a hit: leaves the free queue
  EXPECT_EQ(pool.num_free(), 3);
  pool.release(0);  // now the most recently used
  EXPECT_EQ(pool.allocate(), 3);  // empty blocks go first
  EXPECT_TRUE(log.events.empty());
  EXPECT_EQ(pool.allocate(), 1);  // then the least recently used cached block, evicted
  EXPECT_FALSE(pool.lookup(names[1]));
  ASSERT_EQ(log.events.size(), 1u);
  EXPECT_EQ(log.events[0].type, KvEvent::Type::BlockRemoved);
  EXPECT_EQ(log.events[0].block_hashes, std::vector<BlockHash>{names[1]});
  EXPECT_EQ(pool.allocate(), 2);
  EXPECT_EQ(pool.lookup(names[0]), 0);
  // A second block with a hash already cached stays unnamed.
  EXPECT_FALSE(pool.store(2, names[0]));
  EXPECT_FALSE(pool.reset());  // blocks in use
  EXPECT_EQ(pool.num_cached(), 1);
  pool.release(1);
  pool.release(2);
  pool.release(3);
  EXPECT_TRUE(pool.reset());
  EXPECT_EQ(pool.num_cached(), 0);
  EXPECT_THROW(pool.release(3), std::logic_error);
}

TEST(PrefixCacheHit, FullOnlyTakesTheRunFromBlockZeroCappedBelowTheLastToken) {
  KvBlockManager kv(layout(20, 0, 0), hasher());
  const auto a = ids(16, 3);
  SeqBlockTables t = compute(kv, a);
  kv.release_all(t);
  SeqBlockTables b;
  kv.hash_blocks(a, {}, b);
  // The same 16 tokens again: the last token must be computed, so 3 blocks (12 tokens) hit.
  CacheHit hit = kv.find_cached_prefix(b.hashes, 15);
  EXPECT_EQ(hit.tokens, 12);
  EXPECT_EQ(hit.full, (std::vector<int32_t>{0, 1, 2}));
  // Diverging in block 1: only block 0.
  auto c = a;
  c[5] += 1;
  SeqBlockTables ct;
  kv.hash_blocks(c, {}, ct);
  EXPECT_EQ(kv.find_cached_prefix(ct.hashes, 15).tokens, 4);
  // A salt keeps requests apart.
  SeqBlockTables salted;
  kv.hash_blocks(a, {"x"}, salted);
  EXPECT_EQ(kv.find_cached_prefix(salted.hashes, 15).tokens, 0);
}

// A hybrid pool with block 4 and window 9: a query at a block boundary L reads positions
// L-8..L-1, the two blocks before L. Sequence A (32 tokens, 8 blocks) runs in chunks of 4,
// releasing sliding blocks that leave its window (they stay cached), then finishes.
struct HybridCase {
  KvBlockManager kv{layout(40, 10, 9), hasher()};
  std::vector<int32_t> a = ids(32, 5);
  HybridCase() {
    SeqBlockTables t;
    for (int64_t start = 0; start < 32; start += 4) {
      kv.release_out_of_window(t, start);
      kv.allocate_up_to(t, start + 4);
      kv.hash_blocks(a, {}, t);
      kv.cache_computed_blocks(a, t, start + 4);
    }
    kv.release_all(t);
  }
  // Another sequence takes `n` blocks of each pool: the full pool has 32 empty blocks, the
  // sliding pool 2, so past 2 it evicts cached sliding blocks, least recently used first.
  void take_blocks(int n) { kv.allocate_up_to(other, 4 * n); }
  CacheHit probe(const std::vector<int32_t>& tokens) {
    SeqBlockTables t;
    kv.hash_blocks(tokens, {}, t);
    hashes = t.hashes;
    return kv.find_cached_prefix(t.hashes, int64_t(tokens.size()) - 1);
  }
  SeqBlockTables other;
  std::vector<BlockHash> hashes;  // of the last probe
};

TEST(PrefixCacheHit, SlidingNeedsOnlyTheWindowBeforeTheHit) {
  HybridCase c;
  EXPECT_EQ(c.kv.sliding_pool().num_cached(), 8);
  EXPECT_EQ(c.kv.sliding_pool().num_used(), 0);
  // Evict sliding blocks 0..3 (released first, so least recently used) after the 2 empty ones.
  c.take_blocks(6);
  EXPECT_EQ(c.kv.sliding_pool().num_cached(), 4);
  // A again: the full pool has all 8 blocks; the hit (at most 31 -> 28 tokens) needs only
  // sliding blocks 5 and 6, which are cached; blocks below are not needed (-1).
  CacheHit hit = c.probe(c.a);
  EXPECT_EQ(hit.tokens, 28);
  EXPECT_EQ(hit.full.size(), 7u);
  ASSERT_EQ(hit.sliding.size(), 7u);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(hit.sliding[size_t(i)], -1) << i;
  EXPECT_GE(hit.sliding[5], 0);
  EXPECT_GE(hit.sliding[6], 0);
  // B shares A's first 16 tokens: the full pool could serve 16, but the window before 16
  // (sliding blocks 2, 3) is gone, and so are blocks 0, 1: nothing hits.
  auto b = c.a;
  b[17] += 1;
  EXPECT_EQ(c.probe(b).tokens, 0);
}

TEST(PrefixCacheHit, ShorterHitWhenOnlyAnOlderWindowIsCached) {
  HybridCase c;
  c.take_blocks(4);  // evicts sliding blocks 0 and 1 only
  auto b = c.a;
  b[17] += 1;  // shares blocks 0..3
  CacheHit hit = c.probe(b);
  EXPECT_EQ(hit.tokens, 16);
  EXPECT_EQ(hit.full.size(), 4u);
  EXPECT_EQ(hit.sliding, (std::vector<int32_t>{-1, -1, *c.kv.sliding_pool().lookup(c.hashes[2]),
                                               *c.kv.sliding_pool().lookup(c.hashes[3])}));
  // Taking the hit holds those blocks: an allocation can no longer evict them.
  SeqBlockTables t;
  c.kv.take_cached_prefix(t, hit);
  EXPECT_EQ(c.kv.sliding_pool().ref_count(hit.sliding[2]), 1);
  EXPECT_EQ(c.kv.full_pool().ref_count(hit.full[0]), 1);
  c.kv.release_all(t);
  EXPECT_EQ(c.kv.sliding_pool().num_used(), 4);  // only `other`'s
}
