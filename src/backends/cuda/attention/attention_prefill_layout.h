// Tile shapes and index arithmetic of the tensor-core prefill attention (attention_prefill.cu),
// kept free of device code so host tests (tests/cuda/host) can replay one warp's ldmatrix/mma
// data flow against the PTX fragment definitions and check the key ranges and masks.
//
// A CTA takes up to kPrefillTokens consecutive queries of one sequence and one KV head: its
// kPrefillTokens × 8 query heads are the 128 rows of the mma M dimension, 16 rows per warp.
// Warp w owns tokens 2w (rows 0-7 of its m16 tile, one per query head) and 2w+1 (rows 8-15), so
// a thread's two accumulator rows g and g+8 are the same head g of two adjacent tokens.
//
// Why 16 tokens × 8 heads: the 8 heads of a KV head share every K/V row, so the tile reuses each
// key for 128 rows (16× fewer key reads than the decode kernel's one-token CTAs) while keeping
// the per-query causal waste small (at most 15 masked keys per row at the diagonal) and giving
// 512 CTAs per KV head for an 8K prefill. 64 tokens × 2 heads would reuse a key equally but waste
// more work at the diagonal and in the 513-key windows.
//
// K and V tiles hold kKeyTile keys × 128 dims (256 bytes = 16 chunks of 16 bytes per key). Chunk
// c of key r is stored at chunk c ^ (r & 7): the eight keys one ldmatrix phase reads then sit
// in eight different 16-byte bank groups, so fragment loads are conflict-free.
#pragma once

#include "backends/cuda/common/host_device.h"

namespace striker::cuda::prefill {

constexpr int kHeadDim = 128;
constexpr int kGroup = 8;                          // query heads per KV head
constexpr int kTokens = 16;                        // queries per CTA
constexpr int kWarps = kTokens / 2;                // each warp: 2 tokens × 8 heads = 16 rows
constexpr int kThreads = kWarps * 32;
constexpr int kKeyTile = 64;                       // keys per pipeline stage
constexpr int kStages = 2;                         // cp.async double buffering
constexpr int kChunks = kHeadDim / 8;              // 16-byte chunks per key row
constexpr int kTileElems = kKeyTile * kHeadDim;    // bf16 elements of one K (or V) stage
constexpr int kSmemBytes = kStages * 2 * kTileElems * 2;  // K and V, all stages: 64 KiB

// Element offset of (key, 16-byte chunk) in a swizzled [kKeyTile][kHeadDim] tile.
STRIKER_HOST_DEVICE constexpr int kv_swizzled(int key, int chunk) {
  return key * kHeadDim + ((chunk ^ (key & 7)) << 3);
}

// cp.async staging: in pass i (0 .. kStagePasses-1) thread tid copies chunk stage_chunk(tid) of
// tile key stage_key(tid, i); 16 consecutive threads read one key's 256 contiguous bytes.
constexpr int kStagePasses = kKeyTile * kChunks / kThreads;
STRIKER_HOST_DEVICE constexpr int stage_key(int tid, int pass) { return (tid + pass * kThreads) / kChunks; }
STRIKER_HOST_DEVICE constexpr int stage_chunk(int tid) { return tid % kChunks; }

// Token (0..kTokens-1) of the CTA and query head (0..7) of accumulator row half `half` (0: row
// g, 1: row g+8) of `lane` in `warp`.
STRIKER_HOST_DEVICE constexpr int row_token(int warp, int half) { return 2 * warp + half; }
STRIKER_HOST_DEVICE constexpr int row_head(int lane) { return lane >> 2; }

// Q as the A operand of k step ks (head dims 16ks..16ks+15), loaded straight from global memory:
// register i (two bf16) holds row q_frag_row, dims q_frag_dim and q_frag_dim+1.
STRIKER_HOST_DEVICE constexpr int q_frag_half(int i) { return i & 1; }  // 0: row g, 1: row g+8
STRIKER_HOST_DEVICE constexpr int q_frag_dim(int lane, int ks, int i) { return 16 * ks + 2 * (lane & 3) + 8 * (i >> 1); }

// S = Q·Kᵀ: ldmatrix.x4 (no transpose) row address of `lane` for keys 16np..16np+15 and k step
// ks. Matrices (keys 0-7, dims 0-7), (keys 0-7, dims 8-15), (keys 8-15, dims 0-7), (keys 8-15,
// dims 8-15) = b0, b1 of key n tile 2np, then b0, b1 of key n tile 2np+1.
STRIKER_HOST_DEVICE constexpr int k_ldm_key(int lane, int np) { return 16 * np + (lane & 7) + ((lane >> 4) << 3); }
STRIKER_HOST_DEVICE constexpr int k_ldm_chunk(int lane, int ks) { return 2 * ks + ((lane >> 3) & 1); }

// O += P·V: ldmatrix.x4.trans row address of `lane` for keys 16kt..16kt+15 (k step kt) and head
// dims 16dp..16dp+15. Matrices (keys 0-7, dims 0-7), (keys 8-15, dims 0-7), (keys 0-7, dims
// 8-15), (keys 8-15, dims 8-15); transposed they are b0, b1 of dim n tile 2dp, then of 2dp+1.
STRIKER_HOST_DEVICE constexpr int v_ldm_key(int lane, int kt) { return 16 * kt + (lane & 7) + (((lane >> 3) & 1) << 3); }
STRIKER_HOST_DEVICE constexpr int v_ldm_chunk(int lane, int dp) { return 2 * dp + (lane >> 4); }

// Accumulator element i (0..3) of `lane` in an m16n8 tile: row half (0: g, 1: g+8) and column.
STRIKER_HOST_DEVICE constexpr int acc_half(int i) { return i >> 1; }
STRIKER_HOST_DEVICE constexpr int acc_col(int lane, int i) { return 2 * (lane & 3) + (i & 1); }

// The S accumulators of key n tiles 2kt and 2kt+1 are, element for element, the A operand of
// P·V k step kt (FA2's register reuse): A register r = S tile 2kt + (r >> 1), elements
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

// Whether a warp (or warpgroup) must process key tile [kb, kb + key_tile): some key in it is
// visible to one of its rows (positions pos0 < pos1, the second possibly past the chunk's end:
// harmless extra work).
STRIKER_HOST_DEVICE constexpr bool warp_tile_needed(int kb, int pos0, int pos1, int window, int key_tile = kKeyTile) {
  return kb <= pos1 && kb + key_tile - 1 >= key_lo(pos0, window);
}

// Host-side split of each CTA's key range: the CTA reads at most `key_bound` keys (the step's
// max keys per query plus kTokens-1); splits·chunk covers that, chunk a whole number of key
// tiles (of key_tile keys). Splits only when the tiles give fewer than target_ctas CTAs, and only
// as far as max_splits (scratch records) allows.
struct SplitPlan {
  int64_t splits, chunk;
};
inline SplitPlan plan_key_splits(int64_t key_bound, int64_t ctas, int64_t target_ctas, int64_t max_splits,
                                 int64_t key_tile = kKeyTile) {
  int64_t splits = 1;
  if (ctas < target_ctas && max_splits >= 2) {
    splits = (target_ctas + ctas - 1) / ctas;
    const int64_t cap_tiles = (key_bound + key_tile - 1) / key_tile;
    const int64_t cap = max_splits < cap_tiles ? max_splits : cap_tiles;
    splits = splits < cap ? splits : cap;
    splits = splits < 65535 ? splits : 65535;
    splits = splits > 1 ? splits : 1;
  }
  int64_t chunk = (key_bound + splits - 1) / splits;
  chunk = (chunk + key_tile - 1) / key_tile * key_tile;
  return {(key_bound + chunk - 1) / chunk, chunk};
}

}  // namespace striker::cuda::prefill
