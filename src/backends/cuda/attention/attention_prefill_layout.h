// Tile shapes and index arithmetic of the Hopper prefill attention (attention_prefill.cu), kept
// free of device code so host tests (tests/cuda/host) can check them against the PTX ISA's
// definitions of wgmma's operands, and the key ranges and masks.
//
// A CTA takes up to kTokens = 16 consecutive queries of one sequence and one KV head: its
// 16 × 8 query heads are 128 rows, split over two consumer warpgroups of 64 rows (one wgmma M
// each; a third, producer warpgroup loads the key tiles). Consumer warp w (0..7) owns tokens 2w
// (rows 0-7 of its 16, one per query head) and 2w+1 (rows 8-15), so a thread's two accumulator
// rows g and g+8 are the same head g of two adjacent tokens, and warpgroup wg holds tokens
// 8wg..8wg+7.
//
// Why 16 tokens × 8 heads: the 8 heads of a KV head share every K/V row, so the tile reuses each
// key for 128 rows (16× fewer key reads than the decode kernel's one-token CTAs) while keeping
// the per-query causal waste small (at most 15 masked keys per row at the diagonal) and giving
// 512 CTAs per KV head for an 8K prefill. 64 tokens × 2 heads would reuse a key equally but waste
// more work at the diagonal and in the 513-key windows.
//
// Per 128-key tile both warpgroups multiply against the same K and V tiles in shared memory:
//   S  = Q·Kᵀ: wgmma.m64n128k16, A = Q from registers (the m16n8k16 A fragment), B = K tile,
//        K-major (head dims contiguous), 8 k steps of 16 dims;
//   O += P·V:  wgmma.m64n128k16, A = P from registers (the S accumulators rounded to bf16, FA2's
//        register reuse), B = V tile, N-major (imm-trans-b: dims contiguous), 8 k steps of 16 keys.
// The accumulator layout of m64nN is mma.sync's m16n8 layout repeated over N/8 column tiles, per
// warp over its 16 rows.
//
// Shared memory: a K or V tile is two 64-dim halves, each [128 keys][128 bytes] in the canonical
// 128-byte swizzle (wgmma_layout.h: 16-byte chunk c of key r at chunk c ^ (r & 7), atoms of 8
// keys = 1024 bytes), 1024-byte aligned so the descriptors' base offset is 0.
#pragma once

#include <cstdint>

#include "backends/cuda/common/host_device.h"
#include "backends/cuda/common/wgmma_layout.h"

namespace striker::cuda::prefill {

constexpr int kHeadDim = 128;
constexpr int kGroup = 8;                                    // query heads per KV head
constexpr int kTokens = 16;                                  // queries per CTA
constexpr int kWarpgroups = 2;
constexpr int kThreads = kWarpgroups * 128;                  // consumers (+ a producer warpgroup: kCtaThreads)
constexpr int kTokensPerWarpgroup = kTokens / kWarpgroups;  // 8 tokens × 8 heads = 64 rows
constexpr int kChunks = kHeadDim / 8;                        // 16-byte chunks per key row
constexpr int kKeyTile = 128;                                // keys per stage = wgmma N of S
constexpr int kStages = 3;                                   // ring of K/V stages (TMA / cp.async)
constexpr int kHalfBytes = kKeyTile * kSw128RowBytes;        // one 64-dim half of a K or V tile
constexpr int kTileBytes = 2 * kHalfBytes;                   // a K (or V) tile: 32 KiB
constexpr int kStageBytes = 2 * kTileBytes;                  // K and V: 64 KiB
constexpr int kSmemBytes = kStages * kStageBytes + kSw128AtomBytes;  // + slack to align the base

static_assert(kThreads / 32 * 2 == kTokens, "each warp owns two tokens");

// cp.async staging by the producer warpgroup: in pass i (0 .. kProducerPasses-1) producer
// thread tid copies chunk stage_chunk(tid) of tile key stage_key(tid, i); 16 consecutive threads
// read one key's 256 contiguous bytes.
constexpr int kProducerThreads = 128;
constexpr int kCtaThreads = kProducerThreads + kThreads;
constexpr int kProducerPasses = kKeyTile * kChunks / kProducerThreads;
STRIKER_HOST_DEVICE constexpr int stage_key(int tid, int pass) { return (tid + pass * kProducerThreads) / kChunks; }
STRIKER_HOST_DEVICE constexpr int stage_chunk(int tid) { return tid % kChunks; }

// Byte offset of 16-byte chunk `chunk` (dims 8chunk..8chunk+7) of tile key `key`: its 64-dim
// half, then the 128-byte swizzle within it (wgmma_layout.h).
STRIKER_HOST_DEVICE constexpr uint32_t tile_offset(int key, int chunk) {
  return uint32_t((chunk >> 3) * kHalfBytes) + sw128_offset(key, chunk & 7);
}

// Descriptors (wgmma_layout.h). K, K-major: k step ks reads dims 16ks..16ks+15 = half ks/4,
// 32 bytes in per k step inside the 128-byte row. V, N-major: k step kt reads keys
// 16kt..16kt+15 = two 8-key swizzle atoms; the leading byte offset steps from dims 0-63 to
// 64-127 (the next 64-element block along N).
STRIKER_HOST_DEVICE constexpr uint32_t k_desc_start(uint32_t k_tile, int ks) {
  return k_tile + uint32_t((ks >> 2) * kHalfBytes + (ks & 3) * 32);
}
STRIKER_HOST_DEVICE constexpr uint64_t k_desc(uint32_t k_tile, int ks) { return wgmma_desc_sw128(k_desc_start(k_tile, ks)); }
STRIKER_HOST_DEVICE constexpr uint32_t v_desc_start(uint32_t v_tile, int kt) {
  return v_tile + uint32_t(kt * 2 * kSw128AtomBytes);
}
STRIKER_HOST_DEVICE constexpr uint64_t v_desc(uint32_t v_tile, int kt) {
  return wgmma_desc_sw128_mn(v_desc_start(v_tile, kt), kHalfBytes);
}

// Token (0..kTokens-1) of the CTA and query head (0..7) of accumulator row half `half` (0: row
// g, 1: row g+8) of `lane` in `warp`.
STRIKER_HOST_DEVICE constexpr int row_token(int warp, int half) { return 2 * warp + half; }
STRIKER_HOST_DEVICE constexpr int row_head(int lane) { return lane >> 2; }
// Warpgroup wg's first and last token of the CTA (its rows, tokens past the chunk included).
STRIKER_HOST_DEVICE constexpr int wg_first_token(int wg) { return wg * kTokensPerWarpgroup; }
STRIKER_HOST_DEVICE constexpr int wg_last_token(int wg) { return wg * kTokensPerWarpgroup + kTokensPerWarpgroup - 1; }

// Q as the A operand of k step ks (head dims 16ks..16ks+15), loaded straight from global memory:
// register i (two bf16) holds row q_frag_row, dims q_frag_dim and q_frag_dim+1.
STRIKER_HOST_DEVICE constexpr int q_frag_half(int i) { return i & 1; }  // 0: row g, 1: row g+8
STRIKER_HOST_DEVICE constexpr int q_frag_dim(int lane, int ks, int i) { return 16 * ks + 2 * (lane & 3) + 8 * (i >> 1); }

// Accumulator element i (0..3) of `lane` in an 8-column tile: row half (0: g, 1: g+8) and column.
STRIKER_HOST_DEVICE constexpr int acc_half(int i) { return i >> 1; }
STRIKER_HOST_DEVICE constexpr int acc_col(int lane, int i) { return 2 * (lane & 3) + (i & 1); }

// The S accumulators of key column tiles 2kt and 2kt+1 are, element for element, the A operand
// of P·V k step kt (FA2's register reuse): A register r = S tile 2kt + (r >> 1), elements
// 2(r & 1) and 2(r & 1)+1. This is the PTX A layout: registers 0/1 are rows g/g+8 at columns
// 2c, registers 2/3 the same rows at columns 2c+8.
STRIKER_HOST_DEVICE constexpr int p_reg_tile(int kt, int r) { return 2 * kt + (r >> 1); }
STRIKER_HOST_DEVICE constexpr int p_reg_elem(int r) { return 2 * (r & 1); }

// Keys a query at position p sees: lo(p) .. p (FLINT.md §4).
STRIKER_HOST_DEVICE constexpr int key_lo(int p, int window) {
  return window > 0 ? (p - window + 1 > 0 ? p - window + 1 : 0) : 0;
}

// Keys a CTA reads: the union of its queries' ranges (positions p0 .. p0+n-1) is lo(p0) ..
// p0+n-1; split s of that takes `chunk` keys from lo(p0) + s·chunk. Keys outside every query's
// range (above the diagonal, before the first query's window) are never loaded.
struct KeyRange {
  int begin, end;  // [begin, end)
};
STRIKER_HOST_DEVICE constexpr KeyRange cta_key_range(int p0, int n, int window, int split, int chunk) {
  const int first = key_lo(p0, window) + split * chunk;
  const int last = p0 + n;
  return {first, first + chunk < last ? first + chunk : last};
}

// Whether key j enters the softmax of the query at position p inside a CTA's key range.
STRIKER_HOST_DEVICE constexpr bool key_visible(int j, int p, int window, KeyRange r) {
  return j >= r.begin && j < r.end && j <= p && j >= key_lo(p, window);
}

// The same as an interval: key j is visible to the query at p iff lo <= j <= hi (empty when
// lo > hi), so a kernel can mask a tile with two compares per key.
struct KeyInterval {
  int lo, hi;
};
STRIKER_HOST_DEVICE constexpr KeyInterval visible_keys(int p, int window, KeyRange r) {
  const int lo = key_lo(p, window) > r.begin ? key_lo(p, window) : r.begin;
  return {lo, p < r.end - 1 ? p : r.end - 1};
}

// Whether a warpgroup must process key tile [kb, kb + kKeyTile): some key in it is visible to
// one of its rows (positions pos_first..pos_last, the last possibly past the chunk's end:
// harmless extra work).
STRIKER_HOST_DEVICE constexpr bool tile_needed(int kb, int pos_first, int pos_last, int window) {
  return kb <= pos_last && kb + kKeyTile - 1 >= key_lo(pos_first, window);
}

// Whether every key of tile [kb, kb + kKeyTile) is visible to every row of a warpgroup whose
// positions run pos_first..pos_last: the tile needs no mask (most tiles of a long prefix).
STRIKER_HOST_DEVICE constexpr bool tile_unmasked(int kb, int pos_first, int pos_last, int window, KeyRange r) {
  return kb >= r.begin && kb + kKeyTile <= r.end && kb + kKeyTile - 1 <= pos_first && kb >= key_lo(pos_last, window);
}

// Host-side split of each CTA's key range: the CTA reads at most `key_bound` keys (the step's
// max keys per query plus kTokens-1); splits·chunk covers that, chunk a whole number of key
// tiles. Splits only when the tiles give fewer than target_ctas CTAs, and only as far as
// max_splits (scratch records) allows.
struct SplitPlan {
  int64_t splits, chunk;
};
inline SplitPlan plan_key_splits(int64_t key_bound, int64_t ctas, int64_t target_ctas, int64_t max_splits) {
  int64_t splits = 1;
  if (ctas < target_ctas && max_splits >= 2) {
    splits = (target_ctas + ctas - 1) / ctas;
    const int64_t cap_tiles = (key_bound + kKeyTile - 1) / kKeyTile;
    const int64_t cap = max_splits < cap_tiles ? max_splits : cap_tiles;
    splits = splits < cap ? splits : cap;
    splits = splits < 65535 ? splits : 65535;
    splits = splits > 1 ? splits : 1;
  }
  int64_t chunk = (key_bound + splits - 1) / splits;
  chunk = (chunk + kKeyTile - 1) / kKeyTile * kKeyTile;
  return {(key_bound + chunk - 1) / chunk, chunk};
}

}  // namespace striker::cuda::prefill
