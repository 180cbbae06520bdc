// Tile shapes and index arithmetic of the Hopper prefill attention (attention_prefill_wgmma.cu),
// free of device code so host tests (tests/cuda/host) can check them against the PTX ISA's
// definitions of wgmma's shared-memory operands.
//
// A CTA takes the same work unit as the mma.sync kernel (attention_prefill_layout.h): up to 16
// consecutive queries of one sequence × the 8 query heads of one KV head = 128 rows, so the
// tiles, key ranges, masks, split plan and combine are shared. The rows are split over two
// warpgroups (64 rows each = one wgmma M): warp w (0..7) still owns tokens 2w and 2w+1 (rows g
// and g+8 of its 16), so warpgroup wg holds tokens 8wg..8wg+7. Both warpgroups multiply against
// the same 128-key K and V tiles in shared memory:
//   S  = Q·Kᵀ: wgmma.m64n128k16, A = Q from registers (the mma.sync A fragment), B = K tile,
//        K-major (head dims contiguous), 8 k steps of 16 dims;
//   O += P·V:  wgmma.m64n128k16, A = P from registers (the S accumulators rounded to bf16, the
//        same register reuse as FA2), B = V tile, MN-major (imm-trans-b: dims contiguous), 8 k
//        steps of 16 keys.
// The accumulator layout of m64nN is the m16n8 layout of mma.sync repeated over N/8 column
// tiles, per warp over its 16 rows, so the softmax and epilogue code is the mma.sync kernel's.
//
// Shared memory: a K or V tile is two 64-dim halves, each [128 keys][128 bytes] in the canonical
// 128-byte-swizzle layout (16-byte chunk c of key r at chunk c ^ (r & 7), atoms of 8 keys =
// 1024 bytes), 1024-byte aligned so the descriptors' base offset is 0.
#pragma once

#include <cstdint>

#include "backends/cuda/attention/attention_prefill_layout.h"
#include "backends/cuda/common/host_device.h"

namespace striker::cuda::prefill::wg {

constexpr int kWarpgroups = 2;
constexpr int kThreads = kWarpgroups * 128;
constexpr int kWarps = kThreads / 32;
constexpr int kTokensPerWarpgroup = kTokens / kWarpgroups;  // 8 tokens × 8 heads = 64 rows
constexpr int kKeyTile = 128;                                // keys per stage = wgmma N of S
constexpr int kStages = 3;                                   // cp.async ring, 2 tiles ahead
constexpr int kRowBytes = 128;                               // one swizzled row: 64 dims
constexpr int kHalfBytes = kKeyTile * kRowBytes;             // one 64-dim half of a K or V tile
constexpr int kTileBytes = 2 * kHalfBytes;                   // a K (or V) tile: 32 KiB
constexpr int kStageBytes = 2 * kTileBytes;                  // K and V: 64 KiB
constexpr int kSwizzleAtomBytes = 1024;                      // 8 rows of 128 bytes
constexpr int kSmemBytes = kStages * kStageBytes + kSwizzleAtomBytes;  // + slack to align the base
constexpr int kStagePasses = kKeyTile * kChunks / kThreads;

static_assert(kThreads == prefill::kThreads, "stage_key/stage_chunk assume the mma.sync kernel's 256 threads");
static_assert(kWarps * 2 == kTokens, "each warp owns two tokens");

// Byte offset of 16-byte chunk `chunk` (dims 8chunk..8chunk+7) of tile key `key`.
STRIKER_HOST_DEVICE constexpr int tile_offset(int key, int chunk) {
  return (chunk >> 3) * kHalfBytes + key * kRowBytes + (((chunk & 7) ^ (key & 7)) << 4);
}

// wgmma shared-memory matrix descriptor (PTX ISA "Matrix Descriptor Format"): start address,
// leading and stride byte offsets (each >> 4, 14 bits), base offset 0, swizzle mode 1 = 128-byte.
STRIKER_HOST_DEVICE constexpr uint64_t smem_desc(uint32_t start, uint32_t lbo, uint32_t sbo) {
  return uint64_t((start & 0x3FFFF) >> 4) | (uint64_t((lbo & 0x3FFFF) >> 4) << 16) |
         (uint64_t((sbo & 0x3FFFF) >> 4) << 32) | (uint64_t(1) << 62);
}

// Both operands: 8-row groups (keys for K, keys along K for V) are one swizzle atom apart.
constexpr uint32_t kSbo = kSwizzleAtomBytes;
// K (K-major, swizzled): the leading byte offset is unused ("assumed 1", i.e. 16 bytes). K step
// ks reads dims 16ks..16ks+15: half ks/4, 32 bytes in per k step inside the 128-byte row.
constexpr uint32_t kKLbo = 16;
STRIKER_HOST_DEVICE constexpr uint32_t k_desc_start(uint32_t k_tile, int ks) {
  return k_tile + uint32_t((ks >> 2) * kHalfBytes + (ks & 3) * 32);
}
// V (MN-major, swizzled): the leading byte offset steps from dims 0-63 to 64-127 (the next
// 64-element block along N); k step kt reads keys 16kt..16kt+15 = two 8-key atoms.
constexpr uint32_t kVLbo = kHalfBytes;
STRIKER_HOST_DEVICE constexpr uint32_t v_desc_start(uint32_t v_tile, int kt) {
  return v_tile + uint32_t(kt * 2 * kSwizzleAtomBytes);
}

// The PTX ISA's canonical 128-byte-swizzle layouts, as the hardware addresses them (an atom
// must start on a 1024-byte boundary): bits 4-6 of the byte address are XORed with bits 7-9.
STRIKER_HOST_DEVICE constexpr uint32_t swizzle128(uint32_t addr) { return addr ^ (((addr >> 7) & 7) << 4); }
// K-major operand, element (mn, k) of a k16 step (k < 16) whose descriptor starts at `start`:
// rows of 128 bytes along k, 8-row groups `sbo` apart along MN.
STRIKER_HOST_DEVICE constexpr uint32_t kmajor_address(uint32_t start, uint32_t sbo, int mn, int k) {
  return swizzle128(start + uint32_t(mn / 8) * sbo + uint32_t(mn % 8) * 128 + uint32_t(k) * 2);
}
// MN-major operand, element (mn, k): rows of 64 elements along MN, 8 rows (k) per atom, atoms
// `sbo` apart along k and `lbo` apart along MN.
STRIKER_HOST_DEVICE constexpr uint32_t mnmajor_address(uint32_t start, uint32_t lbo, uint32_t sbo, int mn, int k) {
  return swizzle128(start + uint32_t(mn / 64) * lbo + uint32_t(k / 8) * sbo + uint32_t(k % 8) * 128 +
                    uint32_t(mn % 64) * 2);
}

// Warpgroup wg's first and last token of the CTA (its rows, tokens past the chunk included).
STRIKER_HOST_DEVICE constexpr int wg_first_token(int wg) { return wg * kTokensPerWarpgroup; }
STRIKER_HOST_DEVICE constexpr int wg_last_token(int wg) { return wg * kTokensPerWarpgroup + kTokensPerWarpgroup - 1; }

// Whether every key of tile [kb, kb + kKeyTile) is visible to every row of a warpgroup whose
// positions run pos_first..pos_last: the tile needs no mask (most tiles of a long prefix).
STRIKER_HOST_DEVICE constexpr bool tile_unmasked(int kb, int pos_first, int pos_last, int window, KeyRange r) {
  return kb >= r.begin && kb + kKeyTile <= r.end && kb + kKeyTile - 1 <= pos_first && kb >= key_lo(pos_last, window);
}

}  // namespace striker::cuda::prefill::wg
