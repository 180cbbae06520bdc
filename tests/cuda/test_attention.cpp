// Fused QK-norm + RoPE + KV write, and paged attention (decode and prefill-shaped queries).
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "backends/cuda/attention/attention.h"
#include "backends/cuda/attention/qk_rope_kv.h"
#include "cuda_test_util.h"

namespace striker::cuda::testing {
namespace {

struct Geometry {
  int nh, nkv, d;
};

TEST(CudaQkRopeKv, NormRopeAndCacheWriteMatchReference) {
  std::mt19937 rng(31);
  for (Geometry g : {Geometry{32, 4, 128}, Geometry{8, 1, 32}}) {
    for (bool rope : {true, false}) {
      SCOPED_TRACE("d=" + std::to_string(g.d) + (rope ? " rope" : " nope"));
      const HeadShape hs{g.nh, g.nkv, g.d};
      const int B = 16, num_blocks = 40;
      const std::vector<int32_t> positions = {0, 7, 513, 100000, 262143, 131071};
      const int T = int(positions.size());
      std::vector<int64_t> slots;
      for (int t = 0; t < T; ++t) slots.push_back(int64_t(t * 37 + 5) % (num_blocks * B));
      auto qkv = random_bf16(rng, size_t(T) * (g.nh + 2 * g.nkv) * g.d, 2.f);
      auto qw = random_f32(rng, size_t(g.d), 1.f, 0.2f), kw = random_f32(rng, size_t(g.d), 1.f, 0.2f);
      const auto inv = rope_inv_freq(10000.f, g.d);
      const size_t cache_elems = size_t(num_blocks) * g.nkv * B * g.d;
      DeviceBuffer<bf16> d_qkv(qkv), d_k(cache_elems), d_v(cache_elems), d_q(size_t(T) * g.nh * g.d);
      DeviceBuffer<float> d_qw(qw), d_kw(kw), d_inv(inv);
      DeviceBuffer<int32_t> d_pos(positions);
      DeviceBuffer<int64_t> d_slots(slots);
      d_k.poison();
      d_v.poison();
      d_q.poison();
      std::vector<bf16> ref_k = d_k.download(), ref_v = d_v.download(), ref_q;
      qk_norm_rope_kv_write(d_qkv.get(), T, hs, d_qw.get(), d_kw.get(), 1e-6f, d_pos.get(),
                            rope ? d_inv.get() : nullptr, d_slots.get(), B, d_k.get(), d_v.get(), d_q.get(), nullptr);
      qk_norm_rope_kv_write_ref(qkv, T, hs, qw, kw, 1e-6f, positions, rope ? &inv : nullptr, slots, B, ref_k, ref_v,
                                ref_q);
      // Untouched cache slots stay NaN in both (compare treats NaN-vs-NaN as equal, NaN-vs-value as a failure).
      auto c = compare(d_q.download(), ref_q, 2 * kBf16Rtol, kBf16Atol);
      EXPECT_TRUE(c.ok()) << "q " << c.describe();
      c = compare(d_k.download(), ref_k, 2 * kBf16Rtol, kBf16Atol);
      EXPECT_TRUE(c.ok()) << "k cache " << c.describe();
      c = compare(d_v.download(), ref_v, 0.0, 0.0);  // v is copied as is
      EXPECT_TRUE(c.ok()) << "v cache " << c.describe();
    }
  }
}

// Steps of more than 64 tokens take the per-token kernel (two tokens per CTA, their cos/sin shared
// by their heads, d/8 lanes per head); it must give the per-head kernel's bits: the same tokens run
// 8 (or fewer) at a time through the per-head kernel, into their own poisoned buffers, must match q,
// the k cache and the v cache bit for bit, and both the CPU reference. 65 tokens (the first step on
// this kernel, a last CTA of one token) and 99 (no multiple of anything), positions up to 262,143,
// shuffled slots; head_dim 128 (Flint), 64 and 32, and odd head counts (a warp's heads then span two
// kinds or two tokens). 3001 tokens: a long step with a last CTA of one token.
TEST(CudaQkRopeKv, PrefillKernelBitIdenticalToDecodeKernel) {
  std::mt19937 rng(37);
  for (Geometry g : {Geometry{32, 4, 128}, Geometry{12, 3, 64}, Geometry{8, 1, 32}, Geometry{5, 2, 128},
                     Geometry{7, 1, 64}, Geometry{3, 1, 32}})
    for (int T : {65, 99, 3001})
      for (bool rope : {true, false}) {
        SCOPED_TRACE("d=" + std::to_string(g.d) + " heads " + std::to_string(g.nh) + "+2x" + std::to_string(g.nkv) +
                     " T=" + std::to_string(T) + (rope ? " rope" : " nope"));
        const HeadShape hs{g.nh, g.nkv, g.d};
        const int B = 16, num_blocks = std::max(8, T / B + 1), heads = g.nh + 2 * g.nkv;
        std::vector<int32_t> positions;
        std::uniform_int_distribution<int32_t> pos(0, 262143);
        for (int t = 0; t < T; ++t) positions.push_back(t == 0 ? 262143 : pos(rng));
        std::vector<int64_t> slots(size_t(num_blocks) * B);
        std::iota(slots.begin(), slots.end(), 0);
        std::shuffle(slots.begin(), slots.end(), rng);
        slots.resize(size_t(T));
        const auto qkv = random_bf16(rng, size_t(T) * heads * g.d, 2.f);
        const auto qw = random_f32(rng, size_t(g.d), 1.f, 0.2f), kw = random_f32(rng, size_t(g.d), 1.f, 0.2f);
        const auto inv = rope_inv_freq(1000000.f, g.d);
        const size_t cache_elems = size_t(num_blocks) * g.nkv * B * g.d;
        DeviceBuffer<bf16> d_qkv(qkv);
        DeviceBuffer<float> d_qw(qw), d_kw(kw), d_inv(inv);
        DeviceBuffer<int32_t> d_pos(positions);
        DeviceBuffer<int64_t> d_slots(slots);
        DeviceBuffer<bf16> k[2] = {DeviceBuffer<bf16>(cache_elems), DeviceBuffer<bf16>(cache_elems)};
        DeviceBuffer<bf16> v[2] = {DeviceBuffer<bf16>(cache_elems), DeviceBuffer<bf16>(cache_elems)};
        DeviceBuffer<bf16> q[2] = {DeviceBuffer<bf16>(size_t(T) * g.nh * g.d),
                                   DeviceBuffer<bf16>(size_t(T) * g.nh * g.d)};
        for (int r = 0; r < 2; ++r) k[r].poison(), v[r].poison(), q[r].poison();
        std::vector<bf16> ref_k = k[1].download(), ref_v = v[1].download(), ref_q;  // poisoned, as the GPU's start
        const float* inv_ptr = rope ? d_inv.get() : nullptr;
        qk_norm_rope_kv_write(d_qkv.get(), T, hs, d_qw.get(), d_kw.get(), 1e-6f, d_pos.get(), inv_ptr, d_slots.get(), B,
                              k[0].get(), v[0].get(), q[0].get(), nullptr);
        for (int t0 = 0; t0 < T; t0 += 8)  // the per-head kernel, at most 8 tokens per call
          qk_norm_rope_kv_write(d_qkv.get() + size_t(t0) * heads * g.d, std::min(8, T - t0), hs, d_qw.get(), d_kw.get(),
                                1e-6f, d_pos.get() + t0, inv_ptr, d_slots.get() + t0, B, k[1].get(), v[1].get(),
                                q[1].get() + size_t(t0) * g.nh * g.d, nullptr);
        STRIKER_CUDA_CHECK(cudaDeviceSynchronize());
        qk_norm_rope_kv_write_ref(qkv, T, hs, qw, kw, 1e-6f, positions, rope ? &inv : nullptr, slots, B, ref_k, ref_v,
                                  ref_q);
        const char* names[3] = {"q", "k cache", "v cache"};
        for (int m = 0; m < 3; ++m) {
          const std::vector<bf16> a = (m == 0 ? q[0] : m == 1 ? k[0] : v[0]).download();
          const std::vector<bf16> b = (m == 0 ? q[1] : m == 1 ? k[1] : v[1]).download();
          ASSERT_EQ(a.size(), b.size());
          size_t differ = 0;
          for (size_t i = 0; i < a.size(); ++i) differ += a[i].bits != b[i].bits;
          EXPECT_EQ(differ, 0u) << names[m] << ": per-token kernel vs per-head kernel";
          const auto c = compare(a,
                                 m == 0   ? ref_q
                                 : m == 1 ? ref_k
                                          : ref_v,
                                 m == 2 ? 0.0 : 2 * kBf16Rtol, m == 2 ? 0.0 : kBf16Atol);
          EXPECT_TRUE(c.ok()) << names[m] << " vs the CPU reference: " << c.describe();
        }
      }
}

// A paged cache with shuffled physical blocks and queries for several sequences.
struct AttnCase {
  Geometry g;
  int window;                  // 0 = full
  std::vector<int> seq_lens;   // one decode query per sequence at p = len-1
  int prefill_from = -1;       // if >= 0: sequence 0 also gets queries at positions prefill_from..len-1
  bool sinks;
  int block = 16;              // tokens per cache block
};

// Index of the first output whose bits differ (size if none; NaN == NaN only with equal bits).
size_t first_bit_difference(const std::vector<bf16>& a, const std::vector<bf16>& b) {
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].bits != b[i].bits) return i;
  return a.size();
}

void run_attention_case(const AttnCase& ac, std::mt19937& rng) {
  const auto& g = ac.g;
  const int B = ac.block;
  std::vector<int32_t> tables, offsets, positions;
  std::vector<int32_t> seq_table_offset;
  int total_blocks = 0;
  for (int len : ac.seq_lens) total_blocks += (len + B - 1) / B;
  std::vector<int32_t> phys(size_t(total_blocks) + 3);
  std::iota(phys.begin(), phys.end(), 0);
  std::shuffle(phys.begin(), phys.end(), rng);
  size_t next = 0;
  int max_keys = 0;
  for (size_t s = 0; s < ac.seq_lens.size(); ++s) {
    const int len = ac.seq_lens[s];
    seq_table_offset.push_back(int32_t(tables.size()));
    for (int b = 0; b < (len + B - 1) / B; ++b) tables.push_back(phys[next++]);
    const int first = (s == 0 && ac.prefill_from >= 0) ? ac.prefill_from : len - 1;
    for (int p = first; p < len; ++p) {
      positions.push_back(p);
      offsets.push_back(seq_table_offset.back());
    }
    max_keys = std::max(max_keys, ac.window > 0 ? std::min(len, ac.window) : len);
  }
  const int NQ = int(positions.size());
  const size_t cache_elems = size_t(phys.size()) * g.nkv * B * g.d;
  auto kc = random_bf16(rng, cache_elems), vc = random_bf16(rng, cache_elems);
  auto q = random_bf16(rng, size_t(NQ) * g.nh * g.d, 0.3f);
  auto sinks = random_f32(rng, size_t(g.nh), 0.f, 2.f);
  const AttentionShape shape{g.nh, g.nkv, g.d, B, ac.window};
  std::vector<bf16> ref;
  paged_attention_ref(q, kc, vc, ac.sinks ? &sinks : nullptr, shape, positions, offsets, tables, ref);

  // The case's queries over the cache k, v in blocks of `block` tokens (tables tab, offsets off).
  const int64_t records = int64_t(NQ) * g.nkv * 300;
  auto run = [&](const std::vector<bf16>& k, const std::vector<bf16>& v, const std::vector<int32_t>& tab,
                 const std::vector<int32_t>& off, int block, int64_t target, int plan_keys = 0, int max_splits = 0) {
    const AttentionShape sh{g.nh, g.nkv, g.d, block, ac.window};
    DeviceBuffer<bf16> d_q(q), d_k(k), d_v(v), d_out(ref.size());
    DeviceBuffer<float> d_sinks(sinks);
    DeviceBuffer<int32_t> d_pos(positions), d_off(off), d_tab(tab);
    DeviceBuffer<float> d_scratch(size_t(records * attention_partial_floats(sh)));
    d_out.poison();
    d_scratch.poison();
    AttentionQueries qs{d_pos.get(), d_off.get(), d_tab.get(), NQ, plan_keys > 0 ? plan_keys : max_keys};
    qs.max_splits = max_splits;
    paged_attention(d_q.get(), d_k.get(), d_v.get(), ac.sinks ? d_sinks.get() : nullptr, sh, qs,
                    AttentionScratch{d_scratch.get(), records, target}, d_out.get(), nullptr);
    return d_out.download();
  };
  // Target split records: the default (one wave), few vs many splits, and 96 (16 splits for
  // Flint's 4 KV heads at one query).
  std::vector<bf16> got_default;
  for (int64_t target : {0, 3, 12, 96}) {
    const auto got = run(kc, vc, tables, offsets, B, target);
    const auto c = compare(got, ref, kBf16Rtol, kBf16Atol);
    EXPECT_TRUE(c.ok()) << "block " << B << " target " << target << " " << c.describe();
    if (target == 0) got_default = got;
  }
  // A cap on the splits (AttentionQueries::max_splits).
  {
    const auto got = run(kc, vc, tables, offsets, B, 0, 0, 5);
    const auto c = compare(got, ref, kBf16Rtol, kBf16Atol);
    EXPECT_TRUE(c.ok()) << "block " << B << " at most 5 splits: " << c.describe();
  }
  // Planned for a captured decode graph's key bucket (a power of two >= 1024, up to twice the
  // real count): the splits are sized for the bucket, each CTA takes its share of its query's own
  // keys (many splits of short queries are empty).
  {
    int bucket = 1024;
    while (bucket < max_keys) bucket *= 2;
    const auto got = run(kc, vc, tables, offsets, B, 0, bucket);
    const auto c = compare(got, ref, kBf16Rtol, kBf16Atol);
    EXPECT_TRUE(c.ok()) << "block " << B << " planned for " << bucket << " keys: " << c.describe();
  }
  // Flint's shape with blocks >= 16 takes the pipelined kernel; the same keys in blocks of 8 take
  // the register-load kernel, which does the same arithmetic in the same order: bit-identical
  // outputs under the same split plan (the pipelined kernel scales the target by 2/3).
  if (g.d == 128 && g.nh == 8 * g.nkv && B >= 16) {
    constexpr int B8 = 8;
    std::vector<int32_t> tables8, offsets8;
    std::vector<bf16> kc8, vc8;
    const size_t row = size_t(g.d);
    for (size_t s = 0; s < ac.seq_lens.size(); ++s) {  // sequence s: fresh blocks 0, 1, ... in order
      const int len = ac.seq_lens[s];
      const int32_t off8 = int32_t(tables8.size());
      for (int b = 0; b < (len + B8 - 1) / B8; ++b) {
        const int32_t phys8 = int32_t(tables8.size());
        tables8.push_back(phys8);
        kc8.resize(size_t(phys8 + 1) * g.nkv * B8 * row);
        vc8.resize(kc8.size());
        for (int kvh = 0; kvh < g.nkv; ++kvh)
          for (int j = b * B8; j < std::min(len, (b + 1) * B8); ++j) {
            const size_t src = ((size_t(tables[size_t(seq_table_offset[s] + j / B)]) * g.nkv + kvh) * B + j % B) * row;
            const size_t dst = ((size_t(phys8) * g.nkv + kvh) * B8 + j % B8) * row;
            std::copy_n(kc.begin() + long(src), row, kc8.begin() + long(dst));
            std::copy_n(vc.begin() + long(src), row, vc8.begin() + long(dst));
          }
      }
      for (size_t i = 0; i < offsets.size(); ++i)
        if (offsets[i] == seq_table_offset[s]) offsets8.push_back(off8);
    }
    for (auto [target, mma_target] : {std::pair<int64_t, int64_t>{0, 682}, {12, 8}}) {
      const auto got = target == 0 ? got_default : run(kc, vc, tables, offsets, B, target);
      const auto old = run(kc8, vc8, tables8, offsets8, B8, mma_target);
      const size_t at = first_bit_difference(got, old);
      EXPECT_EQ(at, got.size()) << "pipelined (block " << B << ", target " << target
                                << ") differs from the register kernel (block 8, target " << mma_target
                                << ") at output " << at << " (" << (at < got.size() ? bf16_to_float(got[at]) : 0.f)
                                << " vs " << (at < old.size() ? bf16_to_float(old[at]) : 0.f) << ")";
    }
  }
}

TEST(CudaAttention, DecodeFullAttentionWithSinks) {
  std::mt19937 rng(32);
  run_attention_case({{32, 4, 128}, 0, {1, 50, 1000, 4099}, -1, true}, rng);
}

TEST(CudaAttention, DecodeSlidingWindow) {
  std::mt19937 rng(33);
  run_attention_case({{32, 4, 128}, 513, {1, 513, 514, 3000}, -1, true}, rng);
  run_attention_case({{8, 1, 32}, 17, {5, 17, 18, 100}, -1, true}, rng);
}

// KV cache blocks of 32, 64 and 128 tokens (serve's --block-size): 16-key tiles inside one block,
// full and sliding layers, Flint's shape and the CUDA-core one, a prefill chunk, shuffled blocks.
TEST(CudaAttention, DecodeWithLargerCacheBlocks) {
  std::mt19937 rng(42);
  for (int block : {32, 64, 128}) {
    SCOPED_TRACE("blocks of " + std::to_string(block) + " tokens");
    run_attention_case({{32, 4, 128}, 0, {1, 50, 1000, 4099}, -1, true, block}, rng);
    run_attention_case({{32, 4, 128}, 513, {1, 513, 514, 3000}, -1, true, block}, rng);
    run_attention_case({{8, 1, 32}, 17, {5, 17, 18, 100}, -1, true, block}, rng);
    run_attention_case({{32, 4, 128}, 0, {8193}, -1, true, block}, rng);
    run_attention_case({{32, 4, 128}, 0, {90}, 40, true, block}, rng);
  }
}

TEST(CudaAttention, NoSinks) {
  std::mt19937 rng(34);
  run_attention_case({{32, 4, 128}, 0, {77, 300}, -1, false}, rng);
}

TEST(CudaAttention, PrefillChunkOverCachedPrefix) {
  std::mt19937 rng(35);
  // Sequence 0 has a cached prefix of 40 tokens and a chunk at positions 40..89 (causal per query).
  run_attention_case({{32, 4, 128}, 0, {90}, 40, true}, rng);
  run_attention_case({{32, 4, 128}, 33, {90}, 0, true}, rng);
  run_attention_case({{8, 1, 32}, 17, {60, 9}, 20, true}, rng);
}

// More queries than one grid dimension holds (65,535): the split kernel's launches are sliced over
// the queries. 70,000 queries of one sequence over a 16-key window keep the host reference and the
// scratch small; Flint's tensor-core shape (pipelined kernel) and the CUDA-core one (d 32), queries
// given directly and through query_ids (in reverse order).
TEST(CudaAttention, DecodeKernelTakesMoreQueriesThanOneGridDimension) {
  std::mt19937 rng(39);
  const int NQ = 70000, W = 16, B = 16, first = W;
  std::vector<int32_t> positions(NQ), offsets(NQ, 0), tables((first + NQ + B - 1) / B), ids(NQ);
  std::iota(tables.begin(), tables.end(), 0);
  for (int i = 0; i < NQ; ++i) positions[size_t(i)] = first + i, ids[size_t(i)] = NQ - 1 - i;
  for (Geometry g : {Geometry{8, 1, 128}, Geometry{8, 1, 32}}) {
    SCOPED_TRACE("d=" + std::to_string(g.d));
    const AttentionShape shape{g.nh, g.nkv, g.d, B, W};
    const size_t cache_elems = tables.size() * g.nkv * B * g.d;
    const auto kc = random_bf16(rng, cache_elems), vc = random_bf16(rng, cache_elems);
    const auto q = random_bf16(rng, size_t(NQ) * g.nh * g.d, 0.3f);
    const auto sinks = random_f32(rng, size_t(g.nh), 0.f, 2.f);
    std::vector<bf16> ref;
    paged_attention_ref(q, kc, vc, &sinks, shape, positions, offsets, tables, ref);
    DeviceBuffer<bf16> d_q(q), d_k(kc), d_v(vc), d_out(ref.size());
    DeviceBuffer<float> d_sinks(sinks);
    DeviceBuffer<int32_t> d_pos(positions), d_off(offsets), d_tab(tables), d_ids(ids);
    const int64_t records = int64_t(NQ) * g.nkv * 2;
    DeviceBuffer<float> d_scratch(size_t(records * attention_partial_floats(shape)));
    for (bool by_id : {false, true}) {
      d_out.poison();
      AttentionQueries qs{d_pos.get(), d_off.get(), d_tab.get(), NQ, W};
      if (by_id) qs.query_ids = d_ids.get();
      paged_attention(d_q.get(), d_k.get(), d_v.get(), d_sinks.get(), shape, qs,
                      AttentionScratch{d_scratch.get(), records, 0}, d_out.get(), nullptr);
      const auto c = compare(d_out.download(), ref, kBf16Rtol, kBf16Atol);
      EXPECT_TRUE(c.ok()) << (by_id ? "through query_ids: " : "queries 0..NQ-1: ") << c.describe();
    }
  }
}

TEST(CudaAttention, LongContextSplitsAcrossManyCtas) {
  std::mt19937 rng(36);
  run_attention_case({{32, 4, 128}, 0, {20000}, -1, true}, rng);
}

// One sequence at Flint's decode sizes: full attention over 8K (one key either side of 8192) and
// ~100K keys, sliding layers at W = 513 with the window edge crossed, batch 8 of each, at the
// split targets of run_attention_case (the backend's 3 × 132 gives 66 splits at one query).
TEST(CudaAttention, OneSequenceAtDecodeContexts) {
  std::mt19937 rng(41);
  run_attention_case({{32, 4, 128}, 0, {8191}, -1, true}, rng);
  run_attention_case({{32, 4, 128}, 0, {8193}, -1, true}, rng);
  run_attention_case({{32, 4, 128}, 0, {100003}, -1, true}, rng);
  run_attention_case({{32, 4, 128}, 513, {8193}, -1, true}, rng);
  run_attention_case({{32, 4, 128}, 513, {514}, -1, true}, rng);
  run_attention_case({{32, 4, 128}, 0, {8193, 8000, 7001, 8192, 20, 8191, 5000, 4097}, -1, true}, rng);  // batch 8
  run_attention_case({{32, 4, 128}, 513, {8193, 8000, 7001, 8192, 20, 8191, 5000, 4097}, -1, true}, rng);
}

// One query with one KV head: up to 264 splits per KV head at the default target, past the one batch
// (8 warps × 9 splits) of the one-query combine, whose later splits fold one by one; and few splits
// (targets 3, 12), where most of its warps hold none.
TEST(CudaAttention, OneQueryCombineBeyondOneBatchOfSplits) {
  std::mt19937 rng(43);
  run_attention_case({{8, 1, 128}, 0, {20000}, -1, true}, rng);
  run_attention_case({{8, 1, 128}, 513, {3000}, -1, true}, rng);
}

// NaN never passes: a NaN in one cached value inside the window reaches exactly that dim of the
// KV head's 8 query heads through the split records and the combine (9 splits),
// so a merge that dropped or masked a split could not pass unseen.
TEST(CudaAttention, NaNValuePropagatesThroughTheCombine) {
  std::mt19937 rng(42);
  const Geometry g{32, 4, 128};
  const int B = 16, len = 600, W = 513;
  std::vector<int32_t> tables((len + B - 1) / B), offsets{0}, positions{len - 1};
  std::iota(tables.begin(), tables.end(), 0);
  const size_t cache_elems = tables.size() * g.nkv * B * g.d;
  auto kc = random_bf16(rng, cache_elems), vc = random_bf16(rng, cache_elems);
  const auto q = random_bf16(rng, size_t(g.nh) * g.d, 0.3f);
  const auto sinks = random_f32(rng, size_t(g.nh), 0.f, 2.f);
  const AttentionShape shape{g.nh, g.nkv, g.d, B, W};
  std::vector<bf16> ref;
  paged_attention_ref(q, kc, vc, &sinks, shape, positions, offsets, tables, ref);
  // Key 300 of KV head 1 (inside the window), value dim 5: NaN.
  const int key = 300, kvh = 1;
  vc[((size_t(tables[key / B]) * g.nkv + kvh) * B + key % B) * g.d + 5] = float_to_bf16(std::nanf(""));
  DeviceBuffer<bf16> d_q(q), d_k(kc), d_v(vc), d_out(ref.size());
  DeviceBuffer<float> d_sinks(sinks);
  DeviceBuffer<int32_t> d_pos(positions), d_off(offsets), d_tab(tables);
  const int64_t records = int64_t(g.nkv) * 64;
  DeviceBuffer<float> d_scratch(size_t(records * attention_partial_floats(shape)));
  d_out.poison();
  d_scratch.poison();
  const AttentionScratch scratch{d_scratch.get(), records, 396};
  paged_attention(d_q.get(), d_k.get(), d_v.get(), d_sinks.get(), shape,
                  AttentionQueries{d_pos.get(), d_off.get(), d_tab.get(), 1, W}, scratch, d_out.get(), nullptr);
  const auto got = d_out.download();
  EXPECT_FALSE(compare(got, ref, kBf16Rtol, kBf16Atol).ok()) << "a NaN value row passed";
  size_t nan_outputs = 0;
  for (size_t i = 0; i < got.size(); ++i) nan_outputs += std::isnan(bf16_to_float(got[i])) ? 1 : 0;
  // Dim 5 of the 8 query heads of KV head 1 (every other output finite).
  EXPECT_EQ(nan_outputs, 8u);
  for (int h = 8; h < 16; ++h) EXPECT_TRUE(std::isnan(bf16_to_float(got[size_t(h) * g.d + 5]))) << "head " << h;
}

// The pipelined kernel at longer contexts (many tiles per warp, so the cp.async ring wraps many
// times), several sequences per launch, lengths off the tile and block grid, and block sizes
// where 16-key tiles straddle two cache blocks (24, 40) or take the register-load kernel (8).
TEST(CudaAttention, PipelinedLongContextsAndBlockSizes) {
  std::mt19937 rng(38);
  run_attention_case({{32, 4, 128}, 0, {20011, 5000, 77, 1}, -1, true}, rng);
  run_attention_case({{32, 4, 128}, 513, {30001, 514, 1000}, -1, true}, rng);
  run_attention_case({{32, 4, 128}, 0, {3001, 700}, -1, true, 24}, rng);
  run_attention_case({{32, 4, 128}, 513, {2999, 530}, -1, false, 40}, rng);
  run_attention_case({{32, 4, 128}, 0, {1001, 33}, -1, true, 8}, rng);
  run_attention_case({{16, 2, 128}, 0, {90}, 40, true, 32}, rng);
}

// Only the listed queries are computed; the others' outputs stay untouched (NaN poison).
TEST(CudaAttention, PipelinedQueryIdsSubset) {
  std::mt19937 rng(39);
  const Geometry g{32, 4, 128};
  const int B = 16, NQ = 3;
  const std::vector<int> lens = {4100, 900, 1500};
  std::vector<int32_t> tables, offsets, positions;
  for (int len : lens) {
    offsets.push_back(int32_t(tables.size()));
    for (int b = 0; b < (len + B - 1) / B; ++b) tables.push_back(int32_t(tables.size()));
    positions.push_back(len - 1);
  }
  std::shuffle(tables.begin(), tables.end(), rng);
  const size_t cache_elems = tables.size() * g.nkv * B * g.d;
  auto kc = random_bf16(rng, cache_elems), vc = random_bf16(rng, cache_elems);
  auto q = random_bf16(rng, size_t(NQ) * g.nh * g.d, 0.3f);
  auto sinks = random_f32(rng, size_t(g.nh), 0.f, 2.f);
  const AttentionShape shape{g.nh, g.nkv, g.d, B, 0};
  std::vector<bf16> ref;
  paged_attention_ref(q, kc, vc, &sinks, shape, positions, offsets, tables, ref);
  const std::vector<int32_t> ids = {2, 0};
  DeviceBuffer<bf16> d_q(q), d_k(kc), d_v(vc), d_out(ref.size());
  DeviceBuffer<float> d_sinks(sinks);
  DeviceBuffer<int32_t> d_pos(positions), d_off(offsets), d_tab(tables), d_ids(ids);
  const int64_t records = int64_t(ids.size()) * g.nkv * 300;
  DeviceBuffer<float> d_scratch(size_t(records * attention_partial_floats(shape)));
  AttentionQueries qs{d_pos.get(), d_off.get(), d_tab.get(), int(ids.size()), 4100, d_ids.get()};
  {
    d_out.poison();
    d_scratch.poison();
    paged_attention(d_q.get(), d_k.get(), d_v.get(), d_sinks.get(), shape, qs, AttentionScratch{d_scratch.get(), records, 0},
                    d_out.get(), nullptr);
    const auto got = d_out.download();
    const size_t row = size_t(g.nh) * g.d;
    for (int qi = 0; qi < NQ; ++qi) {
      const std::vector<bf16> got_q(got.begin() + qi * row, got.begin() + (qi + 1) * row);
      const std::vector<bf16> ref_q(ref.begin() + qi * row, ref.begin() + (qi + 1) * row);
      if (qi == 1) {  // not listed: must still be the poison
        size_t touched = 0;
        for (bf16 v : got_q) touched += v.bits != 0xFFFF;
        EXPECT_EQ(touched, 0u) << "wrote " << touched << " outputs of unlisted query 1";
      } else {
        const auto c = compare(got_q, ref_q, kBf16Rtol, kBf16Atol);
        EXPECT_TRUE(c.ok()) << "query " << qi << " " << c.describe();
      }
    }
  }
}

// Short key ranges on Flint's shape: windows 17, 100 and 513, contexts shorter than, equal to and
// longer than the window, one and several queries per launch, a prefill-shaped run, full
// attention up to 2000 keys, block sizes that straddle tiles (24) or take the register-load kernel (8).
TEST(CudaAttention, ShortKeyRanges) {
  std::mt19937 rng(40);
  run_attention_case({{32, 4, 128}, 513, {600}, -1, true}, rng);
  run_attention_case({{32, 4, 128}, 513, {1, 100, 512, 513, 514, 3000, 20000}, -1, true}, rng);
  run_attention_case({{32, 4, 128}, 100, {5, 99, 100, 101, 1000}, -1, true}, rng);
  run_attention_case({{32, 4, 128}, 17, {1, 16, 17, 18, 333}, -1, false}, rng);
  run_attention_case({{32, 4, 128}, 513, {1500, 40}, -1, true, 24}, rng);
  run_attention_case({{32, 4, 128}, 513, {700}, 650, true}, rng);  // 50 queries of one sequence
  run_attention_case({{32, 4, 128}, 0, {1, 64, 65, 1000, 1024}, -1, true}, rng);
  run_attention_case({{32, 4, 128}, 0, {2000}, -1, true}, rng);
  run_attention_case({{8, 1, 128}, 513, {900, 3}, -1, true, 8}, rng);
}

// Models with 1, 2 or 4 query heads per KV head (e.g. the toolcall fixture: 4 heads, 1 KV head,
// head_dim 32) take the CUDA-core kernel.
TEST(CudaAttention, OtherGroupSizes) {
  std::mt19937 rng(37);
  run_attention_case({{4, 1, 32}, 33, {5, 33, 34, 200}, -1, true}, rng);
  run_attention_case({{4, 1, 32}, 0, {70}, 20, true}, rng);
  run_attention_case({{4, 2, 64}, 0, {1, 300}, -1, true}, rng);
  run_attention_case({{3, 3, 128}, 17, {40}, 10, false}, rng);
}

TEST(CudaAttention, RejectsUnbuiltGroupSize) {
  const AttentionShape shape{12, 4, 128, 16, 0};
  AttentionQueries qs{};
  qs.num_queries = 1;
  EXPECT_THROW(paged_attention(nullptr, nullptr, nullptr, nullptr, shape, qs, {}, nullptr, nullptr), Error);
}


// One attention step's host inputs for the front-in-split comparisons below.
struct FrontStep {
  HeadShape hs;
  AttentionShape shape;
  std::vector<bf16> kc, vc, qkv;  // caches (each query's own rows NaN), the step's q|k|v rows
  std::vector<float> qw, kw, sinks;
  std::vector<int32_t> positions, offsets, tables;
  std::vector<int64_t> slots;
  const std::vector<float>* inv = nullptr;  // RoPE's inverse frequencies, null without
  int max_keys = 0;
  int max_splits = 0;             // AttentionQueries::max_splits (0: the planner's count)
  bool merge_in_cluster = false;  // AttentionQueries::merge_in_cluster
};

// Runs the step twice — the front kernel then paged_attention, and paged_attention_with_front — and
// expects the same output bits, the same k, v bits in the cache, no NaN left, and the CPU reference.
// Several queries take the front in the split kernel only as one token per sequence. One query in at
// most kMaxClusterSplits splits with merge_in_cluster: the front's launch also merges them (the cluster
// kernel, one launch) where paged_attention runs the split kernel and the combine kernel: the same bits.
void expect_front_in_split_matches_front_kernel(const FrontStep& st) {
  const int n = int(st.positions.size()), nh = st.hs.n_heads, d = st.hs.head_dim;
  DeviceBuffer<bf16> d_qkv(st.qkv), d_q(size_t(n) * nh * d);
  DeviceBuffer<float> d_qw(st.qw), d_kw(st.kw), d_sinks(st.sinks);
  DeviceBuffer<float> d_inv(st.inv != nullptr ? *st.inv : std::vector<float>(1));
  DeviceBuffer<int32_t> d_pos(st.positions), d_off(st.offsets), d_tab(st.tables);
  DeviceBuffer<int64_t> d_slots(st.slots);
  const int64_t records = int64_t(n) * st.hs.n_kv_heads * 300;
  DeviceBuffer<float> d_scratch(size_t(records * attention_partial_floats(st.shape)));
  AttentionQueries qs{d_pos.get(), d_off.get(), d_tab.get(), n, st.max_keys};
  qs.max_splits = st.max_splits;
  qs.merge_in_cluster = st.merge_in_cluster;
  if (n > 1) {
    EXPECT_FALSE(attention_front_in_split_kernel(st.shape, qs)) << "several queries of unknown sequences";
    qs.one_query_per_sequence = true;
  }
  ASSERT_TRUE(attention_front_in_split_kernel(st.shape, qs));
  const float* inv_ptr = st.inv != nullptr ? d_inv.get() : nullptr;
  const int B = st.shape.block_size;

  DeviceBuffer<bf16> k_a(st.kc), v_a(st.vc), out_a(size_t(n) * nh * d);
  out_a.poison();
  d_scratch.poison();
  qk_norm_rope_kv_write(d_qkv.get(), n, st.hs, d_qw.get(), d_kw.get(), 1e-6f, d_pos.get(), inv_ptr, d_slots.get(), B,
                        k_a.get(), v_a.get(), d_q.get(), nullptr);
  paged_attention(d_q.get(), k_a.get(), v_a.get(), d_sinks.get(), st.shape, qs,
                  AttentionScratch{d_scratch.get(), records, 0}, out_a.get(), nullptr);
  DeviceBuffer<bf16> k_b(st.kc), v_b(st.vc), out_b(size_t(n) * nh * d);
  out_b.poison();
  d_scratch.poison();
  const AttentionFront front{d_qkv.get(), d_qw.get(), d_kw.get(), 1e-6f, inv_ptr, d_slots.get()};
  paged_attention_with_front(front, k_b.get(), v_b.get(), d_sinks.get(), st.shape, qs,
                             AttentionScratch{d_scratch.get(), records, 0}, out_b.get(), nullptr);
  STRIKER_CUDA_CHECK(cudaDeviceSynchronize());

  const auto oa = out_a.download(), ob = out_b.download();
  size_t nan_out = 0;
  for (const bf16& x : ob) nan_out += (x.bits & 0x7FFF) > 0x7F80;
  EXPECT_EQ(nan_out, 0u) << "outputs left NaN (poisoned, or a new key read before it was written)";
  EXPECT_EQ(first_bit_difference(ob, oa), ob.size()) << "output: front in the split kernel vs the front kernel";
  EXPECT_EQ(first_bit_difference(k_b.download(), k_a.download()), st.kc.size()) << "k cache";
  EXPECT_EQ(first_bit_difference(v_b.download(), v_a.download()), st.vc.size()) << "v cache";

  std::vector<bf16> ref_k = st.kc, ref_v = st.vc, ref_q, ref_out;
  qk_norm_rope_kv_write_ref(st.qkv, n, st.hs, st.qw, st.kw, 1e-6f, st.positions, st.inv, st.slots, B, ref_k, ref_v,
                            ref_q);
  paged_attention_ref(ref_q, ref_k, ref_v, &st.sinks, st.shape, st.positions, st.offsets, st.tables, ref_out);
  const auto c = compare(ob, ref_out, kBf16Rtol, kBf16Atol);
  EXPECT_TRUE(c.ok()) << "vs the CPU reference: " << c.describe();
}

// A one-token step runs the attention front inside the split kernel (paged_attention_with_front):
// against the front kernel followed by paged_attention (the path of every other step) it must give
// the same output bits and write the same k, v bits into the cache, and match the CPU reference
// (qk_norm_rope_kv_write_ref then paged_attention_ref). The token's cache row is NaN before
// either run, so a split that read the new key before the front wrote it cannot pass. Flint's
// shape; full and sliding layers, with and without RoPE, the window edge, positions inside and at
// the ends of cache blocks, blocks of 16 and 64 tokens, the default split plan and a graph bucket.
TEST(CudaAttention, OneTokenFrontInSplitKernelMatchesFrontKernel) {
  std::mt19937 rng(47);
  const Geometry g{32, 4, 128};
  const HeadShape hs{g.nh, g.nkv, g.d};
  const int heads = g.nh + 2 * g.nkv;
  const auto inv = rope_inv_freq(10000.f, g.d);
  struct Case {
    int window, p, block;
    bool rope;
    int plan_keys;   // 0: the real key count
    int max_splits;  // 0: the planner's
  };
  // Split counts: 1 (a few keys), 3, 5, 9 (the planner's on a 513-key window), 16 (the largest cluster):
  // with merge_in_cluster the combine inside the split kernel; 17 and the planner's 128+ on long
  // contexts: two launches either way.
  const std::vector<Case> cases = {
      {0, 0, 16, false, 0, 0},         {0, 15, 16, false, 0, 0},   {0, 8191, 16, false, 0, 0},
      {0, 8192, 64, true, 16384, 0},   {0, 20000, 16, false, 0, 0}, {513, 0, 16, true, 0, 0},
      {513, 512, 16, true, 0, 0},      {513, 513, 16, true, 0, 0},  {513, 8200, 64, true, 1024, 0},
      {513, 30000, 16, true, 0, 0},    {513, 30000, 16, true, 0, 5}, {513, 700, 64, true, 1024, 5},
      {0, 3000, 16, false, 0, 16},     {0, 3000, 16, false, 0, 17}, {0, 1000, 16, true, 0, 3}};
  for (const Case& cs : cases) {
    SCOPED_TRACE("window " + std::to_string(cs.window) + " p " + std::to_string(cs.p) + " block " +
                 std::to_string(cs.block) + (cs.rope ? " rope" : " nope") + " plan " + std::to_string(cs.plan_keys) +
                 " max splits " + std::to_string(cs.max_splits));
    const int B = cs.block, len = cs.p + 1, nblocks = (len + B - 1) / B;
    std::vector<int32_t> table(size_t(nblocks) + 2);
    std::iota(table.begin(), table.end(), 0);
    std::shuffle(table.begin(), table.end(), rng);
    table.resize(size_t(nblocks));
    const int32_t phys_blocks = nblocks + 2;
    const size_t cache_elems = size_t(phys_blocks) * g.nkv * B * g.d;
    auto kc = random_bf16(rng, cache_elems), vc = random_bf16(rng, cache_elems);
    const int64_t slot = int64_t(table[size_t(cs.p / B)]) * B + cs.p % B;
    for (int kvh = 0; kvh < g.nkv; ++kvh)  // the token's own rows: NaN until the front writes them
      for (int e = 0; e < g.d; ++e) {
        const size_t at = ((size_t(slot / B) * g.nkv + kvh) * B + size_t(slot % B)) * g.d + size_t(e);
        kc[at].bits = vc[at].bits = 0xFFFF;
      }
    FrontStep st{hs, AttentionShape{g.nh, g.nkv, g.d, B, cs.window}, kc, vc, random_bf16(rng, size_t(heads) * g.d, 2.f),
                 random_f32(rng, size_t(g.d), 1.f, 0.2f), random_f32(rng, size_t(g.d), 1.f, 0.2f),
                 random_f32(rng, size_t(g.nh), 0.f, 2.f), {cs.p}, {0}, table, {slot}, cs.rope ? &inv : nullptr,
                 cs.plan_keys > 0 ? cs.plan_keys : (cs.window > 0 ? std::min(len, cs.window) : len), cs.max_splits};
    for (const bool merge : {false, true}) {  // the split kernel + the combine; the cluster kernel where it fits
      SCOPED_TRACE(merge ? "merge in cluster" : "two launches");
      st.merge_in_cluster = merge;
      expect_front_in_split_matches_front_kernel(st);
    }
  }
}

// Decode steps of several sequences, one new token each (AttentionQueries::one_query_per_sequence),
// also run the front inside the split kernel: each CTA takes its own query's q|k|v row and cache
// slot. Against the front kernel + paged_attention on the same step: the same output bits, the same
// k, v bits in the cache, and the CPU reference. Every sequence's own cache row is NaN before either
// run (a split that read a new key from the cache before its front wrote it cannot pass). The
// sequences share one pool of shuffled blocks and have different lengths (one key, across the
// window edge, up to 9,000); full layers without RoPE, sliding layers with it; 2, 5 and 16 sequences.
TEST(CudaAttention, FrontInSplitKernelForOneTokenPerSequence) {
  std::mt19937 rng(48);
  const Geometry g{32, 4, 128};
  const HeadShape hs{g.nh, g.nkv, g.d};
  const int heads = g.nh + 2 * g.nkv, B = 16;
  const auto inv = rope_inv_freq(10000.f, g.d);
  for (int nseq : {2, 5, 16})
    for (int window : {0, 513}) {
      const bool rope = window > 0;
      SCOPED_TRACE(std::to_string(nseq) + " sequences, window " + std::to_string(window));
      std::uniform_int_distribution<int> len_dist(1, 9000);
      std::vector<int> lens;
      int total_blocks = 0, max_keys = 0;
      for (int s = 0; s < nseq; ++s) {
        const int len = s == 0 ? 1 : s == 1 ? 514 : len_dist(rng);
        lens.push_back(len);
        total_blocks += (len + B - 1) / B;
        max_keys = std::max(max_keys, window > 0 ? std::min(len, window) : len);
      }
      std::vector<int32_t> phys(size_t(total_blocks) + 3);
      std::iota(phys.begin(), phys.end(), 0);
      std::shuffle(phys.begin(), phys.end(), rng);
      std::vector<int32_t> positions, offsets, tables;
      std::vector<int64_t> slots;
      for (int s = 0, next = 0; s < nseq; ++s) {
        const int off = int(tables.size()), p = lens[size_t(s)] - 1;
        offsets.push_back(off);
        for (int b = 0; b < (lens[size_t(s)] + B - 1) / B; ++b) tables.push_back(phys[size_t(next++)]);
        positions.push_back(p);
        slots.push_back(int64_t(tables[size_t(off + p / B)]) * B + p % B);
      }
      const size_t cache_elems = phys.size() * g.nkv * B * g.d;
      auto kc = random_bf16(rng, cache_elems), vc = random_bf16(rng, cache_elems);
      for (const int64_t slot : slots)  // each token's own rows: NaN until its front writes them
        for (int kvh = 0; kvh < g.nkv; ++kvh)
          for (int e = 0; e < g.d; ++e) {
            const size_t at = ((size_t(slot / B) * g.nkv + kvh) * B + size_t(slot % B)) * g.d + size_t(e);
            kc[at].bits = vc[at].bits = 0xFFFF;
          }
      FrontStep st{hs, AttentionShape{g.nh, g.nkv, g.d, B, window}, kc, vc,
                   random_bf16(rng, size_t(nseq) * heads * g.d, 2.f), random_f32(rng, size_t(g.d), 1.f, 0.2f),
                   random_f32(rng, size_t(g.d), 1.f, 0.2f), random_f32(rng, size_t(g.nh), 0.f, 2.f), positions, offsets,
                   tables, slots, rope ? &inv : nullptr, max_keys};
      expect_front_in_split_matches_front_kernel(st);
    }
}

TEST(CudaAttention, OneTokenFrontRejectsOtherShapes) {
  const AttentionQueries one{nullptr, nullptr, nullptr, 1, 100}, two{nullptr, nullptr, nullptr, 2, 100};
  EXPECT_TRUE(attention_front_in_split_kernel({32, 4, 128, 16, 0}, one));
  EXPECT_FALSE(attention_front_in_split_kernel({32, 4, 128, 16, 0}, two));
  AttentionQueries two_sequences = two;
  two_sequences.one_query_per_sequence = true;
  EXPECT_TRUE(attention_front_in_split_kernel({32, 4, 128, 16, 0}, two_sequences));
  const int32_t ids[2] = {0, 1};
  two_sequences.query_ids = ids;
  EXPECT_FALSE(attention_front_in_split_kernel({32, 4, 128, 16, 0}, two_sequences)) << "query ids";
  EXPECT_FALSE(attention_front_in_split_kernel({32, 4, 128, 8, 0}, one));
  EXPECT_FALSE(attention_front_in_split_kernel({8, 1, 32, 16, 0}, one));
  EXPECT_FALSE(attention_front_in_split_kernel({16, 4, 128, 16, 0}, one));
  EXPECT_THROW(paged_attention_with_front(AttentionFront{}, nullptr, nullptr, nullptr, {32, 4, 128, 16, 0}, two,
                                         AttentionScratch{}, nullptr, nullptr),
               Error);
}

// The front really runs inside the split kernel, and with merge_in_cluster for one query the combine
// too where a KV head's splits fit a cluster: a one-token attention captured into a graph is then one
// kernel at up to 16 splits, two (split with its front, combine) above, without merge_in_cluster or with
// several queries, where the front kernel + paged_attention are three. The bit tests above
// would also pass if paged_attention_with_front fell back to the separate kernels. One query, and three
// sequences of one token each (one_query_per_sequence); 101 keys (2 splits) and 2,001 (32 splits: one
// per 64-key step).
TEST(CudaAttention, OneTokenFrontAddsNoKernel) {
  const AttentionShape shape{32, 4, 128, 16, 0};
  const HeadShape hs{32, 4, 128};
  for (const int nq : {1, 3})
    for (const int p : {100, 2000})
      for (const bool merge : {false, true}) {
        SCOPED_TRACE("queries " + std::to_string(nq) + ", position " + std::to_string(p) +
                     (merge ? ", merge in cluster" : ""));
        const int nblocks = p / 16 + 1;  // every sequence at position p, blocks of its own
        std::vector<int32_t> table(size_t(nq) * nblocks), positions(size_t(nq), p), seq_offsets(size_t(nq), 0);
        std::vector<int64_t> kv_slots(static_cast<size_t>(nq));
        std::iota(table.begin(), table.end(), 0);
        for (int i = 0; i < nq; ++i) {
          seq_offsets[size_t(i)] = i * nblocks;
          kv_slots[size_t(i)] = int64_t(i) * nblocks * 16 + p;
        }
        DeviceBuffer<bf16> qkv(size_t(nq) * 40 * 128), q(size_t(nq) * 32 * 128), out(size_t(nq) * 32 * 128);
        DeviceBuffer<bf16> kc(table.size() * 4 * 16 * 128), vc(table.size() * 4 * 16 * 128);
        DeviceBuffer<float> qw(std::vector<float>(128, 1.f)), kw(std::vector<float>(128, 1.f));
        DeviceBuffer<int32_t> pos(positions), off(seq_offsets), tab(table);
        DeviceBuffer<int64_t> slots(kv_slots);
        const int64_t records = int64_t(nq) * 4 * 300;
        DeviceBuffer<float> scratch(size_t(records * attention_partial_floats(shape)));
        AttentionQueries qs{pos.get(), off.get(), tab.get(), nq, p + 1};
        qs.one_query_per_sequence = nq > 1;
        qs.merge_in_cluster = merge;
        const AttentionScratch sc{scratch.get(), records, 0};
        ASSERT_TRUE(attention_front_in_split_kernel(shape, qs));
        cudaStream_t s = nullptr;
        STRIKER_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        auto kernels = [&](auto&& launches) {
          launches();  // once outside the capture (function attributes)
          STRIKER_CUDA_CHECK(cudaStreamSynchronize(s));
          cudaGraph_t g = nullptr;
          STRIKER_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
          launches();
          STRIKER_CUDA_CHECK(cudaStreamEndCapture(s, &g));
          size_t n = 0;
          STRIKER_CUDA_CHECK(cudaGraphGetNodes(g, nullptr, &n));
          STRIKER_CUDA_CHECK(cudaGraphDestroy(g));
          return n;
        };
        const size_t fused = kernels([&] {
          const AttentionFront front{qkv.get(), qw.get(), kw.get(), 1e-6f, nullptr, slots.get()};
          paged_attention_with_front(front, kc.get(), vc.get(), nullptr, shape, qs, sc, out.get(), s);
        });
        const size_t separate = kernels([&] {
          qk_norm_rope_kv_write(qkv.get(), nq, hs, qw.get(), kw.get(), 1e-6f, pos.get(), nullptr, slots.get(), 16,
                                kc.get(), vc.get(), q.get(), s);
          paged_attention(q.get(), kc.get(), vc.get(), nullptr, shape, qs, sc, out.get(), s);
        });
        STRIKER_CUDA_CHECK(cudaStreamDestroy(s));
        const bool one_launch = merge && nq == 1 && p < 1000;
        EXPECT_EQ(fused, one_launch ? 1u : 2u) << (one_launch ? "one cluster launch: the split kernel with the front "
                                                                 "and the combine"
                                                               : "split kernel with the front + combine");
        EXPECT_EQ(separate, 3u) << "front kernel + split kernel + combine";
      }
}

}  // namespace
}  // namespace striker::cuda::testing
