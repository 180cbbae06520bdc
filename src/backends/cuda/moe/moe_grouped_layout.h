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

// NVFP4 weight tiles (Nvfp4ExpertWeights): thread tid decodes k half nvfp4_tile_half(tid)
// (32 weights = 16 code bytes, 16-byte chunks 4·half..4·half+3) of tile row nvfp4_tile_row(tid);
// the kGroupedThreads = 2·kBN threads cover the kBN × kBK tile exactly once.
STRIKER_HOST_DEVICE constexpr int nvfp4_tile_row(int tid) { return tid >> 1; }
STRIKER_HOST_DEVICE constexpr int nvfp4_tile_half(int tid) { return tid & 1; }
static_assert(kGroupedThreads == 2 * kBN && kBK == 64, "NVFP4 tiles: one thread per (row, 32-weight half)");

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
