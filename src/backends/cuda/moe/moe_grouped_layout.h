// Tile shapes and index arithmetic of the grouped expert GEMM (moe_grouped_tile.cuh), kept free
// of device code so a host test (tests/cuda/host) can replay one warp's ldmatrix/mma data flow
// against the PTX fragment definitions.
//
// Shared-memory tiles hold rows of kBK = 64 bf16 (128 bytes = eight 16-byte chunks). Chunk c of
// row r is stored at chunk c ^ (r & 7): the eight rows one ldmatrix phase reads then sit in
// eight different bank groups, so fragment loads are conflict-free.
#pragma once

#include "backends/cuda/common/host_device.h"

namespace striker::cuda {

constexpr int kBK = 64;               // reduction elements per pipeline stage
constexpr int kBN = 64;               // output columns per CTA (per weight matrix)
constexpr int kGroupedThreads = 128;  // 4 warps, each owning 16 of the kBN columns

// Element offset of (row, 16-byte chunk) in a swizzled [rows][kBK] tile.
STRIKER_HOST_DEVICE constexpr int swizzled(int row, int chunk) { return row * kBK + ((chunk ^ (row & 7)) << 3); }

// cp.async staging: in pass i, thread tid copies 16-byte chunk stage_chunk(tid) of tile row
// stage_row(tid, i); TM/16 passes fill an A tile of TM rows, kBN/16 passes a B tile.
STRIKER_HOST_DEVICE constexpr int stage_row(int tid, int pass) { return (tid >> 3) + pass * (kGroupedThreads / 8); }
STRIKER_HOST_DEVICE constexpr int stage_chunk(int tid) { return tid & 7; }

// NVFP4 weight tiles (Nvfp4TileWeights): thread tid decodes k half nvfp4_tile_half(tid)
// (32 weights = 16 code bytes, 16-byte chunks 4·half..4·half+3) of tile row nvfp4_tile_row(tid);
// the kGroupedThreads = 2·kBN threads cover the kBN × kBK tile exactly once.
STRIKER_HOST_DEVICE constexpr int nvfp4_tile_row(int tid) { return tid >> 1; }
STRIKER_HOST_DEVICE constexpr int nvfp4_tile_half(int tid) { return tid & 1; }
static_assert(kGroupedThreads == 2 * kBN && kBK == 64, "NVFP4 tiles: one thread per (row, 32-weight half)");

// NVFP4 weights decoded straight into mma.m16n8k16 B fragments (Nvfp4FragmentWeights: no shared-memory
// tile). In a k tile, lane (g = lane / 4, c = lane % 4) of the warp owning weight rows wn..wn+15 holds
// scale group c of rows wn+g and wn+8+g — k 16c..16c+15: 8 contiguous code bytes (two words of 8
// weights) and one scale byte, one load each. It decodes weights j and j + 4 of a code word into one
// bf16x2 (nvfp4_pair_bf16<j>: an AND, an IMAD and an AND per pair, no table), so MMA step ks = 2p + q takes
// word p: b0 = weights 2q, 2q+4 (slots 2c, 2c+1), b1 = weights 2q+1, 2q+5 (slots 2c+8, 2c+9). The A
// halves of those slots are words q and q+2 of the 16-byte chunk nvfp4_frag_a_chunk(lane, p) of each
// row, low halves for a0/a1 and high halves for a2/a3 (one prmt each). So step ks, slot s multiplies
// reduction index nvfp4_pair_frag_k(ks, s) of the k tile; the products are the same as in k order,
// their fp32 sums run in this one.
STRIKER_HOST_DEVICE constexpr int nvfp4_pair_frag_k(int ks, int slot) {
  return 16 * ((slot & 7) >> 1) + 8 * (ks >> 1) + 2 * (ks & 1) + (slot >> 3) + 4 * (slot & 1);
}
static_assert(nvfp4_pair_frag_k(0, 0) == 0 && nvfp4_pair_frag_k(0, 1) == 4 && nvfp4_pair_frag_k(0, 8) == 1 &&
                  nvfp4_pair_frag_k(1, 9) == 7 && nvfp4_pair_frag_k(2, 0) == 8 && nvfp4_pair_frag_k(3, 15) == 63,
              "slot 2c+i -> 16c+8p+2q+4i, slot 2c+8+i -> 16c+8p+2q+1+4i");
// The 16-byte chunk (k 8·chunk..8·chunk+7) of an activation row that holds lane's A fragment halves
// for MMA steps 2p and 2p+1: k 16c+8p.. (c = lane % 4).
STRIKER_HOST_DEVICE constexpr int nvfp4_frag_a_chunk(int lane, int p) { return 2 * (lane & 3) + p; }
// The scale group of a k tile (16 weights, 8 code bytes) that lane decodes for its two weight rows.
STRIKER_HOST_DEVICE constexpr int nvfp4_frag_group(int lane) { return lane & 3; }

// The NVFP4 down of 16-row tiles, both in register fragments: with enough (token, expert) pairs a CTA
// keeps its tile's A rows resident in shared memory for kNvfp4ResidentBlocks column blocks
// (grouped_down_resident_a_kernel); with few, one CTA per (tile, column block) at 5 CTAs per SM
// (Nvfp4FragmentWeightsWide) keeps more CTAs in flight. Measured (H100, session 33, K = 6, µs; the
// shared-memory tile decode that ran below 384 pairs before in brackets): wide fragments at T = 9 / 16 /
// 32 / 48 / 64 20.0 / 35.3 / 53.0 / 69.6 / 79.3 (24.2 / 41.8 / 62.4 / 83.6 / 93.3), resident-A 39.1 /
// 48.2 / 50.3 / 65.9 / 76.5; steps at 32 sequences 12.48 (wide) / 12.41 (resident-A). Reductions wider
// than 16 resident rows of bf16 in 48 KiB take the wide kernel.
constexpr int kNvfp4ResidentBlocks = 4;
constexpr int kNvfp4ResidentMaxKdim = 48 * 1024 / (16 * 2);  // 1536
constexpr int64_t kNvfp4ResidentMinPairs = 32 * 6;
STRIKER_HOST_DEVICE constexpr bool nvfp4_down_resident_a(int tile_rows, int64_t pairs, int kdim) {
  return tile_rows == 16 && pairs >= kNvfp4ResidentMinPairs && kdim <= kNvfp4ResidentMaxKdim;
}

// The 16-row NVFP4 gate/up: with four k tiles of codes in flight the fragment kernel took 160
// registers (3 CTAs per SM; 126, 4 per SM, since the pair decode), with two 96 (5 per SM,
// Nvfp4FragmentWeightsWide). Measured with the table decode (H100, session 32, K = 6, µs): at T = 9
// (~49 experts x 8 column blocks: one round either way) the deeper fetch wins, 46.2 against 59.5; from
// T = 16 the wider residency, 85.5 / 118.6 / 186.7 against 79.9 / 100.4 / 151.8 at T = 16 / 32 / 64
// (with the pair decode: deep T = 9 43.4, wide T = 16 / 32 / 64 74.1 / 100.3 / 144.2). The routing is on
// the device, so the rule goes by (token, expert) pairs.
constexpr int64_t kNvfp4GateUpDeepFetchMaxPairs = 60;  // T <= 10 at K = 6
STRIKER_HOST_DEVICE constexpr bool nvfp4_gate_up_many_ctas(int64_t pairs) { return pairs > kNvfp4GateUpDeepFetchMaxPairs; }

// ldmatrix.x4 row address supplied by `lane`. A (rows m-major, k contiguous): matrices
// (rows 0-7 | 8-15) × (k 0-7 | 8-15) of m tile m, k step ks = fragment registers a0..a3.
STRIKER_HOST_DEVICE constexpr int a_ldm_row(int lane, int m) { return m * 16 + (lane & 15); }
STRIKER_HOST_DEVICE constexpr int a_ldm_chunk(int lane, int ks) { return ks * 2 + (lane >> 4); }
// B stored n-major with k contiguous (= the .col operand): matrices (n 0-7, k 0-7), (n 0-7,
// k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15) of the 16 columns at wn = b0, b1 of n tile 0, then
// b0, b1 of n tile 1.
STRIKER_HOST_DEVICE constexpr int b_ldm_row(int lane, int wn) { return wn + (lane & 7) + ((lane >> 4) << 3); }
STRIKER_HOST_DEVICE constexpr int b_ldm_chunk(int lane, int ks) { return ks * 2 + ((lane >> 3) & 1); }

// Row and column inside the m16n8 tile of accumulator element i (0..3) held by `lane`.
STRIKER_HOST_DEVICE constexpr int c_frag_row(int lane, int i) { return (lane >> 2) + (i >= 2 ? 8 : 0); }
STRIKER_HOST_DEVICE constexpr int c_frag_col(int lane, int i) { return 2 * (lane & 3) + (i & 1); }

}  // namespace striker::cuda
