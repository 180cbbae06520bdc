// Tile shapes and index arithmetic of the NVFP4 grouped expert GEMM with A and B swapped
// (moe_grouped_wgmma_nvfp4.cu), free of device code so
// tests/cuda/host/test_moe_grouped_wgmma_nvfp4_layout.cpp can replay it on the host.
//
// The kernel computes the transposed product outᵀ[weight rows, tokens] = W · Xᵀ so that the
// NVFP4 weights are wgmma's A operand, which may live in registers: each consumer thread decodes
// only its own A fragment (nvfp4_bf16_bits.h), straight from the raw codes and scales staged in
// shared memory, and the expert-sorted activation rows are B (gathered by cp.async into the same
// 128B-swizzled K-major tile the BF16 kernel uses for its A).
//
// One CTA: 128 tokens (a routing tile, wgmma N = 128) × 256 weight rows, per 64-wide k slice.
// Consumer warpgroup wg (0, 1) owns 128 weight rows as two m64 blocks mb (0, 1); warp w of the
// warpgroup owns 16 rows of each block, fragment rows f = 0..15 (a thread: f = lane/4, lane/4 + 8).
//   gated (gate/up): staged rows 0..127 are gate rows n0..n0+127, rows 128..255 the same up rows;
//     fragment row f < 8 is gate column j, f + 8 the up row of the same j, so a thread's
//     accumulators d[.][0..1] (g) and d[.][2..3] (u) pair up: SwiGLU in registers; 128 columns.
//   plain (down): staged rows 0..255 are W_down rows n0..n0+255; 256 columns.
#pragma once

#include "backends/cuda/common/host_device.h"
#include "backends/cuda/common/wgmma_layout.h"

namespace striker::cuda {

constexpr int kNvTokens = 128;                       // wgmma N = MoeRouting::tile_rows
constexpr int kNvBK = kSw128RowElems;                // 64: k per stage
constexpr int kNvWRows = 256;                        // weight rows per CTA
constexpr int kNvStages = 6;
constexpr int kNvLag = 3;                            // cp.async groups in flight before a stage is signalled
constexpr int kNvProducerThreads = 128;
constexpr int kNvConsumerWarpgroups = 2;
constexpr int kNvThreads = kNvProducerThreads + 128 * kNvConsumerWarpgroups;
constexpr int kNvXBytes = kNvTokens * kSw128RowBytes;  // 16 KiB: activation tile, 128B-swizzled
constexpr int kNvCodeRowBytes = kNvBK / 2;             // 32: one row's codes of a stage
constexpr int kNvCodeBytes = kNvWRows * kNvCodeRowBytes;  // 8 KiB
constexpr int kNvScaleRowBytes = kNvBK / 16;           // 4 UE4M3 bytes per row and stage
constexpr int kNvScaleBytes = kNvWRows * kNvScaleRowBytes;  // 1 KiB raw
// Decoded scales: per row and k16 step the bf16 scale in both halves of a word (what a bf16x2
// multiply takes), 16 bytes per row.
constexpr int kNvScaleWordRowBytes = kNvScaleRowBytes * 4;
constexpr int kNvScaleBf16Bytes = kNvWRows * kNvScaleWordRowBytes;  // 4 KiB
constexpr int kNvStageBytes = kNvXBytes + kNvCodeBytes + kNvScaleBytes + kNvScaleBf16Bytes;
// Epilogue staging, one per consumer warpgroup: 128 tokens × 64 columns of bf16, the transposed
// accumulators written column-wise (2 bytes per thread and register pair) and read back as
// 16-byte row chunks for coalesced global stores. Rows padded by 16 bytes: the 4 tokens of one
// warp store (2c + e, c = 0..3, 2 rows apart) land in 4 different bank groups.
constexpr int kNvEpiCols = 64;
constexpr int kNvEpiPitch = kNvEpiCols * 2 + 16;
constexpr int kNvEpiBytes = kNvTokens * kNvEpiPitch;
constexpr int kNvSmemBytes = kNvStages * kNvStageBytes + kNvConsumerWarpgroups * kNvEpiBytes +
                             kSw128AtomBytes;  // + slack to align to 1024 B
static_assert(kNvStageBytes % kSw128AtomBytes == 0, "every stage's activation tile stays 1024-aligned");
static_assert(kNvLag < kNvStages, "the producer would wait on a stage it has not signalled");
static_assert(kNvSmemBytes <= 227 * 1024, "one CTA per SM");

// Work items: one per (routing tile of up to 128 rows, column block); the routing is sorted with
// 128-row tiles, as for the BF16 kernels (256-row tall tiles were measured slower and deleted).
// Item order: routing tile, column block (fastest) — an expert's items stay together.
struct NvItem {
  int tile;       // index into MoeRouting::tiles
  int col_block;  // column block (n0 = col_block · nv_out_cols)
};
STRIKER_HOST_DEVICE constexpr NvItem nv_item(int item, int col_blocks) {
  return NvItem{item / col_blocks, item % col_blocks};
}

// Output columns a CTA writes.
STRIKER_HOST_DEVICE constexpr int nv_out_cols(bool gated) { return gated ? kNvWRows / 2 : kNvWRows; }

// Byte offsets of stage s's parts from the 1024-aligned ring base.
STRIKER_HOST_DEVICE constexpr uint32_t nv_x_stage(int s) { return uint32_t(s) * kNvStageBytes; }
STRIKER_HOST_DEVICE constexpr uint32_t nv_codes_stage(int s) { return nv_x_stage(s) + kNvXBytes; }
STRIKER_HOST_DEVICE constexpr uint32_t nv_scales_stage(int s) { return nv_codes_stage(s) + kNvCodeBytes; }
STRIKER_HOST_DEVICE constexpr uint32_t nv_scales_bf16_stage(int s) { return nv_scales_stage(s) + kNvScaleBytes; }
// Consumer warpgroup wg's epilogue staging, after the ring.
STRIKER_HOST_DEVICE constexpr uint32_t nv_epi_offset(int wg) {
  return uint32_t(kNvStages) * kNvStageBytes + uint32_t(wg) * kNvEpiBytes;
}
// Column (0..63) of the staging tile of fragment row f: gated, the warpgroup's 64 columns (both
// blocks at once); plain, the 64 columns of block mb (one pass per block).
STRIKER_HOST_DEVICE constexpr int nv_epi_col(bool gated, int mb, int w, int f) {
  return gated ? mb * 32 + w * 8 + f % 8 : w * 16 + f;
}
// First output column (from n0) of a staging pass: gated, warpgroup wg's 64; plain, block mb's.
STRIKER_HOST_DEVICE constexpr int nv_epi_col0(bool gated, int wg, int mb) { return gated ? wg * 64 : wg * 128 + mb * 64; }

// Staged weight row (0..255) of fragment row f (0..15) of warp w in block mb of warpgroup wg.
STRIKER_HOST_DEVICE constexpr int nv_frag_wrow(bool gated, int wg, int mb, int w, int f) {
  return gated ? (f < 8 ? 0 : kNvWRows / 2) + wg * 64 + mb * 32 + w * 8 + f % 8
               : wg * 128 + mb * 64 + w * 16 + f;
}
// Output column (from n0) of a fragment row: gated, the activation column of the gate/up pair
// (rows f and f + 8 share it); plain, the W_down row.
STRIKER_HOST_DEVICE constexpr int nv_frag_col(bool gated, int wg, int mb, int w, int f) {
  return gated ? wg * 64 + mb * 32 + w * 8 + f % 8 : nv_frag_wrow(false, wg, mb, w, f);
}

// Producer copies per stage: the codes come as two TMA boxes of 128 rows × 32 bytes (staged rows
// 0-127, then 128-255, row after row); thread t copies the 4 scale bytes of staged rows t and
// t + 128 (cp.async: a TMA box is at least 16 bytes wide).
STRIKER_HOST_DEVICE constexpr int nv_scale_row(int t, int p) { return t + kNvProducerThreads * p; }

// Activation rows: gathered as the BF16 kernel gathers its A (moe_grouped_wgmma_layout.h): pass
// p (0..7) of thread t copies chunk t % 8 of token row t / 8 + 16·p.
constexpr int kNvXPasses = kNvTokens * 8 / kNvProducerThreads;
STRIKER_HOST_DEVICE constexpr int nv_x_row(int t, int pass) { return t / 8 + pass * (kNvProducerThreads / 8); }
STRIKER_HOST_DEVICE constexpr int nv_x_chunk(int t) { return t % 8; }

}  // namespace striker::cuda
