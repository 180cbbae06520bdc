// Index arithmetic of the pipelined tensor-core decode attention (attention.cu,
// attention_pipe_kernel), kept free of device code so host tests (tests/cuda/host) can check the
// staging coverage, the shared-memory swizzles (bank conflicts), the block-table lookups of a
// 16-key tile and the split plan without a GPU.
//
// Why a pipeline: the register-only kernel (attention_mma_kernel) loads one 16-key tile per warp,
// waits for it, computes, and only then looks up the next tile's block id and loads it, so each
// warp has bytes in flight only part of the time and the block-table lookup sits on the critical
// path of every tile. Here each warp owns a ring of kStages tiles in shared memory: while it
// computes tile i, the cp.async copies of tiles i+1 .. i+kStages-1 are in flight, and the block
// ids of tile i+kStages are already being loaded into registers.
//
// The warp takes exactly the tiles the register kernel's warp takes (keys kbeg + 16·warp + 64·i)
// and reads the same 16-byte pieces of K and V into the same fragment registers (only from
// shared memory instead of global memory), so its arithmetic, and its output, are bit-identical.
#pragma once

#include <cstdint>

#include "backends/cuda/common/host_device.h"

namespace striker::cuda::decode {

constexpr int kHeadDim = 128;
constexpr int kGroup = 8;                        // query heads per KV head
constexpr int kWarps = 4;                        // per CTA (as attention_mma_kernel)
constexpr int kTileKeys = 16;                    // keys per warp tile (one mma k step of P·V)
constexpr int kStepKeys = kWarps * kTileKeys;    // keys the CTA advances per step: chunks are multiples
constexpr int kChunks = kHeadDim / 8;            // 16-byte chunks per key row
constexpr int kTileElems = kTileKeys * kHeadDim; // bf16 elements of one K (or V) tile
constexpr int kMinBlockSize = kTileKeys;         // a tile then spans at most two cache blocks

// Shared memory of one warp's ring (K and V tiles of every stage), and of the CTA.
STRIKER_HOST_DEVICE constexpr int warp_ring_bytes(int stages) { return stages * 2 * kTileElems * 2; }
STRIKER_HOST_DEVICE constexpr int cta_ring_bytes(int stages) { return kWarps * warp_ring_bytes(stages); }

// Element offsets of (key row, 16-byte chunk) in a swizzled [kTileKeys][kHeadDim] tile. Each
// swizzle permutes the chunks within a row, chosen so the 8 lanes of every quarter-warp phase of
// the fragment reads below hit 8 different 16-byte bank groups:
//  K reads rows {2i, 2i+1} × chunks {4pp..4pp+3}: odd rows flip chunk bit 2.
//  V reads rows {R, R+2, R+4, R+6} × chunks {n, n+1}: row bits 1-2 flip chunk bits 1-2.
STRIKER_HOST_DEVICE constexpr int k_swizzled(int row, int chunk) {
  return row * kHeadDim + ((chunk ^ ((row & 1) << 2)) << 3);
}
STRIKER_HOST_DEVICE constexpr int v_swizzled(int row, int chunk) {
  return row * kHeadDim + ((chunk ^ (((row >> 1) & 3) << 1)) << 3);
}

// cp.async staging of one tile: in pass j (0..kStagePasses-1) `lane` copies chunk
// stage_chunk(lane) of row stage_row(lane, j) of K and of V; 16 consecutive lanes read one key's
// 256 contiguous bytes, so each pass reads two whole rows.
constexpr int kStagePasses = kTileKeys * kChunks / 32;
STRIKER_HOST_DEVICE constexpr int stage_row(int lane, int pass) { return 2 * pass + (lane >> 4); }
STRIKER_HOST_DEVICE constexpr int stage_chunk(int lane) { return lane & 15; }

// Fragment reads (the register kernel's global-load pattern, g = lane/4, c = lane%4):
//  K piece (t, pp): row 8t + g, chunk 4pp + c (B operand of S = Q·Kᵀ, keys 8t..8t+7)
//  V piece (r, h):  row 2c + (r&1) + 8(r>>1), chunk 8h + g (paired into B of O += P·V)
STRIKER_HOST_DEVICE constexpr int k_frag_row(int lane, int t) { return 8 * t + (lane >> 2); }
STRIKER_HOST_DEVICE constexpr int k_frag_chunk(int lane, int pp) { return 4 * pp + (lane & 3); }
STRIKER_HOST_DEVICE constexpr int v_frag_row(int lane, int r) { return 2 * (lane & 3) + (r & 1) + 8 * (r >> 1); }
STRIKER_HOST_DEVICE constexpr int v_frag_chunk(int lane, int h) { return 8 * h + (lane >> 2); }

// The cache blocks of the tile of keys base..base+15 (block_size >= kMinBlockSize): logical
// block first_block holds keys from offset first_offset on; the rest are in the next block.
// second_needed: some key of the tile below `kend` lies in that next block (only then may its
// table entry be read: past the sequence's last block the table has no entry).
struct TileBlocks {
  int first_block, first_offset;
  bool second_needed;
};
STRIKER_HOST_DEVICE constexpr TileBlocks tile_blocks(int base, int block_size, int kend) {
  const int b = base / block_size;
  const int off = base - b * block_size;
  const int last = (base + kTileKeys < kend ? base + kTileKeys : kend) - 1;  // last key read
  return {b, off, last >= (b + 1) * block_size};
}
// Row r of the tile: whether it is in the second block, and its slot in its block.
STRIKER_HOST_DEVICE constexpr bool row_in_second(const TileBlocks& tb, int r, int block_size) {
  return tb.first_offset + r >= block_size;
}
STRIKER_HOST_DEVICE constexpr int row_slot(const TileBlocks& tb, int r, int block_size) {
  return tb.first_offset + r - (row_in_second(tb, r, block_size) ? block_size : 0);
}

// Tiles warp `warp` processes of the CTA key range [kbeg, kend): keys kbeg + 16·warp + 64·i.
STRIKER_HOST_DEVICE constexpr int warp_tiles(int kbeg, int kend, int warp) {
  const int first = kbeg + kTileKeys * warp;
  return first < kend ? (kend - first + kStepKeys - 1) / kStepKeys : 0;
}

// Keys to plan the splits for: no query of a sliding layer sees more than `window` keys, however
// large the caller's bound (captured decode graphs round max_keys up to a power of two >= 1024,
// which would give W = 513 16 splits of 64 keys, 7 of them empty).
STRIKER_HOST_DEVICE constexpr int plan_keys(int max_keys, int window) {
  return window > 0 && window < max_keys ? window : max_keys;
}

// Split plan. The host picks only the number of splits per (query, KV head), `splits`: about one
// wave of CTAs (target_records in all), within the scratch's max_partials records, and no more
// splits than `keys` has 64-key CTA steps. Each CTA then takes its share of its own query's keys
// (split_key_range), so the plan does not depend on how far `keys` overstates the queries' real
// key counts: a captured decode graph plans for its key bucket (a power of two >= 1024, up to
// twice the real count), and a fixed chunk of bucket / splits keys left half the splits empty
// (8 sequences at 8K: 4 of 8 splits of 2,048 keys busy, one CTA per SM).
inline int plan_decode_split_count(int keys, int64_t heads_total, int64_t target_records, int64_t max_partials) {
  int64_t wanted = target_records / heads_total;
  const int64_t cap = max_partials / heads_total;
  wanted = wanted < cap ? wanted : cap;
  const int64_t steps = (int64_t(keys > 1 ? keys : 1) + kStepKeys - 1) / kStepKeys;
  wanted = wanted < steps ? wanted : steps;
  return int(wanted > 1 ? wanted : 1);
}

// Keys [begin, end) (offsets from the query's first key) that split `split` of `splits` takes of a
// query's n keys: whole 16-key tiles, as even as possible (tile counts differ by at most one;
// the last split holds the partial tile). Empty when the query has fewer tiles than splits.
struct KeyRange {
  int begin, end;
};
STRIKER_HOST_DEVICE constexpr KeyRange split_key_range(int n, int split, int splits) {
  const int64_t tiles = (int64_t(n) + kTileKeys - 1) / kTileKeys;
  const int b = int(tiles * split / splits) * kTileKeys;
  const int e = int(tiles * (split + 1) / splits) * kTileKeys;
  return {b < n ? b : n, e < n ? e : n};
}

}  // namespace striker::cuda::decode
