// Tensor-core prefill attention (prefill_attention, Hopper wgmma) against the CPU reference
// paged_attention_ref: chunks of several sequences over cached prefixes, full and
// sliding windows, with and without sinks, shuffled physical blocks, NaN-poisoned outputs and
// NaN in the cache where no query may look, one CTA per tile and split key ranges.
#include <gtest/gtest.h>

#include <numeric>

#include "backends/cuda/attention/attention.h"
#include "cuda_test_util.h"

namespace striker::cuda::testing {
namespace {

struct Chunk {
  int start;  // cached prefix length (first query position)
  int n;      // queries in this step
};

struct PrefillCase {
  int window;  // 0 = full
  std::vector<Chunk> seqs;
  bool sinks;
  int block = 16;  // tokens per cache block (a power of two takes the kernels' shift path)
};

// Host copies of one step: cache, queries, metadata and the reference output.
struct PrefillData {
  AttentionShape shape;
  std::vector<int32_t> tables, offsets, positions, tiles;
  std::vector<bf16> q, kc, vc, ref;
  std::vector<float> sinks;
  int max_keys = 0;
};

PrefillData make_case(const PrefillCase& pc, std::mt19937& rng) {
  PrefillData d;
  const int B = pc.block, nh = 32, nkv = 4, hd = 128;
  d.shape = AttentionShape{nh, nkv, hd, B, pc.window};
  int total_blocks = 0;
  for (const Chunk& c : pc.seqs) total_blocks += (c.start + c.n + B - 1) / B;
  std::vector<int32_t> phys(size_t(total_blocks) + 5);
  std::iota(phys.begin(), phys.end(), 0);
  std::shuffle(phys.begin(), phys.end(), rng);
  size_t next = 0;
  for (const Chunk& c : pc.seqs) {
    const int len = c.start + c.n;
    const int32_t table_at = int32_t(d.tables.size());
    for (int b = 0; b < (len + B - 1) / B; ++b) d.tables.push_back(phys[next++]);
    append_prefill_tiles(int(d.positions.size()), c.n, d.tiles);
    for (int p = c.start; p < len; ++p) {
      d.positions.push_back(p);
      d.offsets.push_back(table_at);
    }
    d.max_keys = std::max(d.max_keys, pc.window > 0 ? std::min(len, pc.window) : len);
  }
  const size_t cache_elems = phys.size() * size_t(nkv) * B * hd;
  d.kc = random_bf16(rng, cache_elems);
  d.vc = random_bf16(rng, cache_elems);
  // NaN where no query may look (spare blocks, slots past a sequence's end in its last block,
  // which a real cache fills with stale bits, and whole blocks before a sliding window): a key
  // tile that reaches one must zero-fill or mask it by select, never multiply it by 0.
  std::vector<char> read(phys.size() * size_t(B), 0);
  size_t at = 0;
  for (const Chunk& c : pc.seqs) {
    const int len = c.start + c.n, lo = pc.window > 0 ? std::max(0, c.start - pc.window + 1) : 0;
    for (int p = lo / B * B; p < len; ++p) read[size_t(d.tables[at + size_t(p / B)]) * B + size_t(p % B)] = 1;
    at += size_t((len + B - 1) / B);
  }
  const bf16 nan{0x7FC0};
  for (size_t slot = 0; slot < read.size(); ++slot)
    if (!read[slot])
      for (int h = 0; h < nkv; ++h)
        for (int e = 0; e < hd; ++e) {
          const size_t i = ((slot / B * nkv + size_t(h)) * B + slot % B) * hd + size_t(e);
          d.kc[i] = nan;
          d.vc[i] = nan;
        }
  d.q = random_bf16(rng, d.positions.size() * size_t(nh) * hd, 0.3f);
  d.sinks = random_f32(rng, size_t(nh), 0.f, 2.f);
  paged_attention_ref(d.q, d.kc, d.vc, pc.sinks ? &d.sinks : nullptr, d.shape, d.positions, d.offsets, d.tables,
                      d.ref);
  return d;
}

std::string describe_case(const PrefillCase& pc) {
  std::string s = "window " + std::to_string(pc.window) + (pc.sinks ? " sinks" : " no sinks") + " block " +
                  std::to_string(pc.block) + " seqs";
  for (const Chunk& c : pc.seqs) s += " [" + std::to_string(c.start) + "+" + std::to_string(c.n) + "]";
  return s;
}

// Runs the case with one CTA per tile (no scratch) and with split key ranges (scratch, a large
// CTA target), each into a NaN-poisoned output.
void run_prefill_case(const PrefillCase& pc, std::mt19937& rng) {
  SCOPED_TRACE(describe_case(pc));
  const PrefillData d = make_case(pc, rng);
  const int NQ = int(d.positions.size());
  DeviceBuffer<bf16> d_q(d.q), d_k(d.kc), d_v(d.vc), d_out(d.ref.size());
  DeviceBuffer<float> d_sinks(d.sinks);
  DeviceBuffer<int32_t> d_pos(d.positions), d_off(d.offsets), d_tab(d.tables), d_tiles(d.tiles);
  const int64_t records = int64_t(NQ) * d.shape.n_kv_heads * 8;
  DeviceBuffer<float> d_scratch(size_t(records * attention_partial_floats(d.shape)));
  const AttentionQueries qs{d_pos.get(), d_off.get(), d_tab.get(), NQ, d.max_keys};
  const PrefillTiles tiles{d_tiles.get(), int(d.tiles.size() / 2)};
  struct Variant {
    const char* name;
    AttentionScratch scratch;
  };
  for (const Variant& v : {Variant{"one CTA per tile", AttentionScratch{}},
                           Variant{"split keys (up to 8)", AttentionScratch{d_scratch.get(), records, 1 << 20}},
                           Variant{"split keys (2)", AttentionScratch{d_scratch.get(), int64_t(NQ) * 4 * 2, 1 << 20}}}) {
    d_out.poison();
    d_scratch.poison();
    prefill_attention(d_q.get(), d_k.get(), d_v.get(), pc.sinks ? d_sinks.get() : nullptr, d.shape, qs, tiles,
                      v.scratch, d_out.get(), nullptr);
    const auto c = compare(d_out.download(), d.ref, kBf16Rtol, kBf16Atol);
    EXPECT_TRUE(c.ok()) << v.name << ": " << c.describe();
  }
}

TEST(CudaPrefillAttention, FullChunkLengthsFromZero) {
  std::mt19937 rng(41);
  for (int n : {1, 15, 16, 17, 300}) run_prefill_case({0, {{0, n}}, true}, rng);
}

TEST(CudaPrefillAttention, FullLongChunk) {
  std::mt19937 rng(42);
  run_prefill_case({0, {{0, 2049}}, true}, rng);
}

TEST(CudaPrefillAttention, ChunkOverCachedPrefix) {
  std::mt19937 rng(43);
  run_prefill_case({0, {{37, 300}}, true}, rng);  // prefix not a multiple of the 16-query tile
  run_prefill_case({0, {{1000, 17}}, false}, rng);
  run_prefill_case({0, {{20000, 17}}, true}, rng);  // two tiles, 20K keys: split key ranges
}

TEST(CudaPrefillAttention, SeveralSequencesInOneStep) {
  std::mt19937 rng(44);
  run_prefill_case({0, {{0, 17}, {5, 1}, {100, 64}, {0, 15}, {333, 45}}, true}, rng);
  run_prefill_case({513, {{600, 40}, {0, 33}, {10, 1}}, true}, rng);
}

TEST(CudaPrefillAttention, SlidingWindow513) {
  std::mt19937 rng(45);
  run_prefill_case({513, {{0, 2049}}, true}, rng);
  run_prefill_case({513, {{700, 300}}, false}, rng);  // every query's window starts mid-prefix
}

TEST(CudaPrefillAttention, SmallWindowCrossesTiles) {
  std::mt19937 rng(46);
  run_prefill_case({17, {{0, 300}}, true}, rng);
  run_prefill_case({17, {{5, 17}, {0, 1}}, true}, rng);
  run_prefill_case({17, {{90, 15}}, false}, rng);
}

// The backend's mixed step: long runs through prefill_attention (tiles and the list of their
// queries), the other queries through paged_attention with a query-id list, both writing one
// output. The decode kernel runs first: the prefill launch (split, so its combine runs too)
// must leave the decode queries' rows alone.
TEST(CudaPrefillAttention, MixedStepWithDecodeQueries) {
  std::mt19937 rng(47);
  for (int window : {0, 513}) {
    // Sequences 0 and 2 are prefill chunks; 1 and 3 are decodes (one query at the end of a context).
    const PrefillCase pc{window, {{10, 40}, {3000, 1}, {0, 20}, {700, 1}}, true};
    SCOPED_TRACE(describe_case(pc));
    PrefillData d = make_case(pc, rng);
    const int NQ = int(d.positions.size());
    // Tiles of the long runs only (queries 0..39 and 41..60); queries 40 and 61 go to the decode kernel.
    std::vector<int32_t> long_tiles, rest = {40, 61}, tiled(61);
    append_prefill_tiles(0, 40, long_tiles);
    append_prefill_tiles(41, 20, long_tiles);
    std::iota(tiled.begin(), tiled.end(), 0);
    tiled.erase(tiled.begin() + 40);
    DeviceBuffer<bf16> d_q(d.q), d_k(d.kc), d_v(d.vc), d_out(d.ref.size());
    DeviceBuffer<float> d_sinks(d.sinks);
    DeviceBuffer<int32_t> d_pos(d.positions), d_off(d.offsets), d_tab(d.tables), d_tiles(long_tiles), d_rest(rest),
        d_tiled(tiled);
    const int64_t records = int64_t(NQ) * 4 * 64;
    DeviceBuffer<float> d_scratch(size_t(records * attention_partial_floats(d.shape)));
    const AttentionScratch scratch{d_scratch.get(), records, 0};
    const AttentionQueries all{d_pos.get(), d_off.get(), d_tab.get(), NQ, d.max_keys};
    AttentionQueries decodes = all;
    decodes.num_queries = int(rest.size());
    decodes.query_ids = d_rest.get();
    d_out.poison();
    d_scratch.poison();
    paged_attention(d_q.get(), d_k.get(), d_v.get(), d_sinks.get(), d.shape, decodes, scratch, d_out.get(), nullptr);
    prefill_attention(d_q.get(), d_k.get(), d_v.get(), d_sinks.get(), d.shape, all,
                      PrefillTiles{d_tiles.get(), int(long_tiles.size() / 2), d_tiled.get(), int(tiled.size())},
                      scratch, d_out.get(), nullptr);
    const auto c = compare(d_out.download(), d.ref, kBf16Rtol, kBf16Atol);
    EXPECT_TRUE(c.ok()) << "mixed step: " << c.describe();
  }
}

// Tile edges (16-query tiles, 128-key tiles): lengths around the key tiles, chunks starting mid-block and mid-key-tile, window edges inside a key tile, and
// prefixes many key tiles long for one CTA.
TEST(CudaPrefillAttention, TileEdges) {
  std::mt19937 rng(48);
  for (int n : {63, 64, 65, 127, 128, 129, 255, 257}) run_prefill_case({0, {{0, n}}, true}, rng);
  for (int start : {5, 63, 64, 65, 120, 127, 128, 129, 250}) run_prefill_case({0, {{start, 33}}, true}, rng);
  run_prefill_case({0, {{4093, 131}}, false}, rng);    // a long prefix, a ragged chunk
  for (int window : {64, 65, 127, 128, 129, 513})      // window edges at and inside key tiles
    run_prefill_case({window, {{window + 37, 150}, {3 * window + 1, 16}, {0, 2 * window + 5}}, true}, rng);
  run_prefill_case({513, {{9000, 40}}, true}, rng);    // window far from position 0
}

TEST(CudaPrefillAttention, OtherBlockSizes) {
  std::mt19937 rng(49);
  // 8, 16 (the other tests), 32, 64, 128: whole blocks through TMA; 1, 12, 48: cp.async only
  // (and the division path).
  for (int block : {1, 8, 12, 32, 48, 64, 128}) {
    run_prefill_case({0, {{37, 150}, {0, 20}}, true, block}, rng);
    run_prefill_case({129, {{200, 70}}, false, block}, rng);
  }
}

// Sliding-window steps run one persistent CTA per SM over the work items: more items than SMs
// (44 query tiles × 4 KV heads, and × splits), so each CTA's ring runs on from item to item,
// through TMA (block 16, 64) and through cp.async only (block 12), with sinks and without.
TEST(CudaPrefillAttention, SlidingWindowCtasStrideOverItems) {
  std::mt19937 rng(50);
  for (int block : {16, 12, 64}) run_prefill_case({129, {{200, 700}}, block == 16, block}, rng);
  run_prefill_case({513, {{3000, 300}, {0, 37}, {40, 200}}, true}, rng);  // several sequences, ragged tiles
}

TEST(CudaPrefillAttention, RejectsOtherShapes) {
  AttentionQueries qs{};
  qs.num_queries = 1;
  const PrefillTiles tiles{nullptr, 1};
  EXPECT_THROW(prefill_attention(nullptr, nullptr, nullptr, nullptr, AttentionShape{8, 1, 64, 16, 0}, qs, tiles, {},
                                 nullptr, nullptr),
               Error);
  EXPECT_THROW(prefill_attention(nullptr, nullptr, nullptr, nullptr, AttentionShape{16, 4, 128, 16, 0}, qs, tiles, {},
                                 nullptr, nullptr),
               Error);
  int32_t id = 0;
  qs.query_ids = &id;
  EXPECT_THROW(prefill_attention(nullptr, nullptr, nullptr, nullptr, AttentionShape{32, 4, 128, 16, 0}, qs, tiles, {},
                                 nullptr, nullptr),
               Error);
}

}  // namespace
}  // namespace striker::cuda::testing
