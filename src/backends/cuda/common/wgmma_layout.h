// Shared-memory layout arithmetic of the Hopper (sm_90a) tensor-core path: the 128-byte swizzle
// that TMA writes and wgmma reads, and the 64-bit wgmma matrix descriptor. Kept free of device
// code so a host test (tests/cuda/host/test_wgmma_layout.cpp) can check it without a GPU.
//
// Every operand tile here is "K-major": one row per M (or N) index, 64 bf16 of the reduction
// dimension per row = 128 bytes = eight 16-byte chunks. With the 128-byte swizzle (TMA's
// CU_TENSOR_MAP_SWIZZLE_128B, descriptor layout 1) the hardware XORs address bits [4:6] with bits
// [7:9]: chunk c of row r lands at chunk c ^ (r % 8), so the eight rows an 8×8 core matrix spans
// sit in eight different bank groups. The pattern repeats every 8 rows (1024 bytes), so a tile
// must start on a 1024-byte boundary for the XOR to use the row index (PTX ISA, "Shared memory
// matrix layout", swizzling modes).
#pragma once

#include <cstdint>

#include "backends/cuda/common/host_device.h"

namespace striker::cuda {

constexpr int kSw128RowBytes = 128;            // one row of a swizzled tile: 64 bf16
constexpr int kSw128AtomBytes = 8 * 128;       // the swizzle's repeat: 8 rows
constexpr int kSw128RowElems = kSw128RowBytes / 2;

// What the hardware does to a shared-memory byte address inside a 128B-swizzled region.
STRIKER_HOST_DEVICE constexpr uint32_t sw128_address(uint32_t addr) { return addr ^ (((addr >> 7) & 7u) << 4); }

// Byte offset of (row, 16-byte chunk) from a 1024-byte-aligned tile base: where TMA puts it and
// where a thread copying by hand (cp.async) must put it so wgmma reads the same matrix.
STRIKER_HOST_DEVICE constexpr uint32_t sw128_offset(int row, int chunk) {
  return uint32_t(row) * kSw128RowBytes + ((uint32_t(chunk) ^ (uint32_t(row) & 7u)) << 4);
}

// wgmma matrix descriptor (PTX ISA "Matrix Descriptor Format") of a K-major 128B-swizzled operand
// starting at shared address `addr` (a byte address in the shared window, < 256 KiB):
//   bits  0-13  start address >> 4
//   bits 16-29  leading-dimension byte offset >> 4: unused for swizzled K-major layouts (one
//               k16 step, 32 bytes, never leaves the 128-byte row); set to 1 as by convention
//   bits 32-45  stride-dimension byte offset >> 4: from one 8-row group to the next = 1024 B
//   bits 49-51  base offset: 0, tiles start 1024-aligned
//   bits 62-63  layout: 1 = 128-byte swizzle
// The k16 step kk inside the 64-wide row starts at addr + 32·kk: the hardware applies the XOR to
// the full address, so the step's chunks 2kk, 2kk+1 are found where sw128_offset put them.
STRIKER_HOST_DEVICE constexpr uint64_t wgmma_desc_sw128(uint32_t addr) {
  return uint64_t((addr & 0x3FFFFu) >> 4) | (uint64_t(1) << 16) | (uint64_t(kSw128AtomBytes >> 4) << 32) |
         (uint64_t(1) << 62);
}

// Byte address the hardware reads for element (row, k) (k < 16) of an m64/nN × k16 K-major operand
// whose descriptor is `desc`: the model the host test replays (8-row groups SBO apart, rows of
// 128 bytes inside a group, then the swizzle on the absolute address).
STRIKER_HOST_DEVICE constexpr uint32_t wgmma_operand_address(uint64_t desc, int row, int k) {
  const uint32_t start = uint32_t(desc & 0x3FFFu) << 4;
  const uint32_t sbo = uint32_t((desc >> 32) & 0x3FFFu) << 4;
  return sw128_address(start + uint32_t(row / 8) * sbo + uint32_t(row % 8) * kSw128RowBytes + uint32_t(k) * 2);
}

// Descriptor of an MN-major (N-major B, imm-trans-b = 1) 128B-swizzled operand: rows of 64 bf16
// along MN (128 bytes), 8 rows along K per swizzle atom. Stride byte offset: from one 8-row group
// along K to the next (1024 B); leading byte offset `lbo`: from one 64-element block along MN to
// the next (PTX ISA canonical layout ((T,8,m),(8,k)) : ((1,T,LBO),(8T,SBO))).
STRIKER_HOST_DEVICE constexpr uint64_t wgmma_desc_sw128_mn(uint32_t addr, uint32_t lbo) {
  return uint64_t((addr & 0x3FFFFu) >> 4) | (uint64_t((lbo & 0x3FFFFu) >> 4) << 16) |
         (uint64_t(kSw128AtomBytes >> 4) << 32) | (uint64_t(1) << 62);
}
// Byte address the hardware reads for element (mn, k) (k < 16) of such an operand.
STRIKER_HOST_DEVICE constexpr uint32_t wgmma_operand_address_mn(uint64_t desc, int mn, int k) {
  const uint32_t start = uint32_t(desc & 0x3FFFu) << 4;
  const uint32_t lbo = uint32_t((desc >> 16) & 0x3FFFu) << 4;
  const uint32_t sbo = uint32_t((desc >> 32) & 0x3FFFu) << 4;
  return sw128_address(start + uint32_t(mn / 64) * lbo + uint32_t(k / 8) * sbo + uint32_t(k % 8) * kSw128RowBytes +
                       uint32_t(mn % 64) * 2);
}

// Accumulator fragment of wgmma .m64nNk16 with f32 D (PTX ISA "Register fragments, matrix D"):
// warp w of the warpgroup owns rows 16w..16w+15; register i of a thread is in the n8 block i/4,
// element i%4 laid out as mma.m16n8's C fragment.
STRIKER_HOST_DEVICE constexpr int wgmma_acc_row(int thread_in_wg, int i) {
  return (thread_in_wg / 32) * 16 + ((thread_in_wg % 32) / 4) + ((i % 4) >= 2 ? 8 : 0);
}
STRIKER_HOST_DEVICE constexpr int wgmma_acc_col(int thread_in_wg, int i) {
  return (i / 4) * 8 + 2 * (thread_in_wg % 4) + (i % 2);
}

// Epilogue stores: in an accumulator fragment, the 4 threads of a quad (t % 4 = q) hold the 4
// column pairs (2q, 2q+1) of one row in each n8 block. Transposing 4 consecutive blocks across the
// quad gives thread q the whole 8 columns (16 bytes) of block q: one vector store instead of four
// 4-byte ones spread over 4 lines. Two exchange steps (partner q ^ 2, then q ^ 1); in each, thread
// q sends its entries quad_exchange_index(q, mask, 0/1) and overwrites the same entries with what
// the partner sent (PTX shfl.bfly). Host-tested in tests/cuda/host/test_wgmma_layout.cpp.
STRIKER_HOST_DEVICE constexpr int quad_exchange_index(int q, int mask, int x) {
  return ((q & mask) ? 0 : mask) + x * (mask == 2 ? 1 : 2);
}

}  // namespace striker::cuda
