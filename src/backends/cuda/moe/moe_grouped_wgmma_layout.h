// Tile shapes and index arithmetic of the Hopper grouped expert GEMM (moe_grouped_wgmma.cu), free
// of device code so tests/cuda/host/test_moe_grouped_wgmma_layout.cpp can replay a CTA's data flow
// (hand-swizzled A rows, TMA-swizzled B rows, wgmma descriptors, accumulator fragments, epilogue
// columns) on the host.
//
// One CTA computes a tile of up to kWgTileRows expert-sorted rows against kWgBRows weight rows:
//   gated (gate/up): B rows 0..127 are gate rows n0..n0+127 and rows 128..255 the same up rows, so
//     a thread's registers i and i + 64 hold g and u of the same (row, column): SwiGLU in registers;
//     the CTA writes 128 activation columns;
//   plain (down):    B rows 0..255 are rows n0..n0+255 of W_down; the CTA writes 256 columns.
// Each of the two consumer warpgroups owns 64 of the tile's rows (one wgmma m64n256k16 per k16
// step); a stage holds a 64-wide k slice: A 128 rows × 128 B, B 256 rows × 128 B, both 128B-swizzled.
#pragma once

#include "backends/cuda/common/host_device.h"
#include "backends/cuda/common/wgmma_layout.h"

namespace striker::cuda {

constexpr int kWgTileRows = 128;                  // sorted rows per CTA (= MoeRouting::tile_rows of this path)
constexpr int kWgBK = kSw128RowElems;             // 64: k per stage
constexpr int kWgBRows = 256;                     // weight rows per stage (the wgmma N)
constexpr int kWgHalfBRows = kWgBRows / 2;        // one TMA box: 128 rows
constexpr int kWgStages = 4;                      // 4 × 48 KiB of the 227 KiB an SM offers one CTA
constexpr int kWgProducerThreads = 128;           // warpgroup 0: the loads
constexpr int kWgConsumerWarpgroups = 2;          // warpgroups 1, 2: 64 rows each
constexpr int kWgThreads = kWgProducerThreads + 128 * kWgConsumerWarpgroups;
constexpr int kWgABytes = kWgTileRows * kSw128RowBytes;   // 16 KiB
constexpr int kWgBBytes = kWgBRows * kSw128RowBytes;      // 32 KiB
constexpr int kWgStageBytes = kWgABytes + kWgBBytes;
constexpr int kWgSmemBytes = kWgStages * kWgStageBytes + kSw128AtomBytes;  // + slack to align the ring to 1024 B
static_assert(kWgABytes % kSw128AtomBytes == 0 && kWgBBytes % kSw128AtomBytes == 0, "tiles stay 1024-aligned");

// Output columns a CTA writes: 128 activations (gated) or 256 outputs (plain).
STRIKER_HOST_DEVICE constexpr int wg_out_cols(bool gated) { return gated ? kWgHalfBRows : kWgBRows; }

// A rows are gathered by the producer's threads with 16-byte cp.async: in pass p (0..7) thread t
// copies chunk wg_a_chunk(t) of tile row wg_a_row(t, p). Eight consecutive threads read one row's
// 128 contiguous bytes, so every 32-byte sector a warp requests is used whole.
constexpr int kWgAPasses = kWgTileRows * 8 / kWgProducerThreads;
STRIKER_HOST_DEVICE constexpr int wg_a_row(int t, int pass) { return t / 8 + pass * (kWgProducerThreads / 8); }
STRIKER_HOST_DEVICE constexpr int wg_a_chunk(int t) { return t % 8; }

// Byte offsets inside the 1024-aligned ring: stage s's A tile, its B tile.
STRIKER_HOST_DEVICE constexpr uint32_t wg_a_stage(int s) { return uint32_t(s) * kWgStageBytes; }
STRIKER_HOST_DEVICE constexpr uint32_t wg_b_stage(int s) { return uint32_t(s) * kWgStageBytes + kWgABytes; }

// Descriptors' start offsets (from the ring base) of consumer warpgroup `wg`'s k16 step kk of stage s.
STRIKER_HOST_DEVICE constexpr uint32_t wg_a_desc_offset(int s, int wg, int kk) {
  return wg_a_stage(s) + uint32_t(wg) * 64 * kSw128RowBytes + uint32_t(kk) * 32;
}
STRIKER_HOST_DEVICE constexpr uint32_t wg_b_desc_offset(int s, int kk) { return wg_b_stage(s) + uint32_t(kk) * 32; }

}  // namespace striker::cuda
