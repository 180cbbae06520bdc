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
// step). A ring stage (WgRing) holds one k slice: A 128 rows × kBK, B 256 rows × kBK, swizzled.
#pragma once

#include "backends/cuda/common/host_device.h"
#include "backends/cuda/common/wgmma_layout.h"

namespace striker::cuda {

constexpr int kWgTileRows = 128;                  // sorted rows per CTA (= MoeRouting::tile_rows of this path)
constexpr int kWgBRows = 256;                     // weight rows per stage (the wgmma N)
constexpr int kWgHalfBRows = kWgBRows / 2;        // one TMA box: 128 rows
constexpr int kWgProducerThreads = 128;           // warpgroup 0: the loads
constexpr int kWgConsumerWarpgroups = 2;          // warpgroups 1, 2: 64 rows each
constexpr int kWgThreads = kWgProducerThreads + 128 * kWgConsumerWarpgroups;
constexpr int kWgSmemLimit = 227 * 1024;          // opt-in dynamic shared memory of one sm_90 CTA
// The lag scheme (WgSignal::kLag): the producer signals stage g's A rows once its cp.async group of g
// has completed, kWgLag groups later (kWgLag < stages, so it never waits for a stage it has not signalled).
constexpr int kWgLag = 2;

// Output columns a CTA writes: 128 activations (gated) or 256 outputs (plain).
STRIKER_HOST_DEVICE constexpr int wg_out_cols(bool gated) { return gated ? kWgHalfBRows : kWgBRows; }

// The shared-memory ring: kStages stages of a kBK-wide k slice each.
//   kBK = 64: rows of 128 bytes, 128B swizzle (TMA SWIZZLE_128B, descriptor layout 1), 4 × 48 KiB;
//   kBK = 32: rows of 64 bytes, 64B swizzle (SWIZZLE_64B, layout 2), up to 9 × 24 KiB: more,
//             smaller stages in flight for the same shared memory.
template <int kBK_, int kStages_>
struct WgRing {
  static_assert(kBK_ == 64 || kBK_ == 32, "128- or 64-byte swizzled rows");
  static constexpr int kBK = kBK_;
  static constexpr int kStages = kStages_;
  static constexpr int kRowBytes = 2 * kBK;
  static constexpr int kAtomBytes = 8 * kRowBytes;         // the swizzle's repeat
  static constexpr int kChunks = kRowBytes / 16;           // 16-byte chunks per row
  static constexpr int kABytes = kWgTileRows * kRowBytes;  // 16 / 8 KiB
  static constexpr int kBBytes = kWgBRows * kRowBytes;     // 32 / 16 KiB
  static constexpr int kStageBytes = kABytes + kBBytes;
  static constexpr int kSmemBytes = kStages * kStageBytes + kSw128AtomBytes;  // + slack to align the ring to 1024 B
  static_assert(kWgLag < kStages, "the producer would wait on a stage it has not signalled");
  static_assert(kABytes % kSw128AtomBytes == 0 && kBBytes % kSw128AtomBytes == 0, "tiles stay 1024-aligned");
  // + per stage two mbarriers and the 16-byte item record, and a few words of static shared memory
  static constexpr int kStaticBytes = 32 * kStages + 64;
  static_assert(kSmemBytes + kStaticBytes <= kWgSmemLimit, "ring + barriers fit one CTA");

  // A rows are gathered by the producer's threads with 16-byte cp.async: in pass p thread t copies
  // chunk a_chunk(t) of tile row a_row(t, p). kChunks consecutive threads read one row's contiguous
  // bytes, so every 32-byte sector a warp requests is used whole.
  static constexpr int kAPasses = kWgTileRows * kChunks / kWgProducerThreads;
  STRIKER_HOST_DEVICE static constexpr int a_row(int t, int pass) {
    return t / kChunks + pass * (kWgProducerThreads / kChunks);
  }
  STRIKER_HOST_DEVICE static constexpr int a_chunk(int t) { return t % kChunks; }

  // Where (row, chunk) of a tile lies from its aligned base (as TMA writes it), the hardware's
  // XOR on an absolute address, the wgmma descriptor, and the address model the host test replays.
  STRIKER_HOST_DEVICE static constexpr uint32_t swizzled(int row, int chunk) {
    return kBK == 64 ? sw128_offset(row, chunk) : sw64_offset(row, chunk);
  }
  STRIKER_HOST_DEVICE static constexpr uint32_t hw_address(uint32_t addr) {
    return kBK == 64 ? sw128_address(addr) : sw64_address(addr);
  }
  STRIKER_HOST_DEVICE static constexpr uint64_t desc(uint32_t addr) {
    return kBK == 64 ? wgmma_desc_sw128(addr) : wgmma_desc_sw64(addr);
  }
  STRIKER_HOST_DEVICE static constexpr uint32_t operand_address(uint64_t d, int row, int k) {
    return kBK == 64 ? wgmma_operand_address(d, row, k) : wgmma_operand_address_sw64(d, row, k);
  }

  // Byte offsets inside the 1024-aligned ring: stage s's A tile, its B tile.
  STRIKER_HOST_DEVICE static constexpr uint32_t a_stage(int s) { return uint32_t(s) * kStageBytes; }
  STRIKER_HOST_DEVICE static constexpr uint32_t b_stage(int s) { return uint32_t(s) * kStageBytes + kABytes; }
  // Descriptors' start offsets (from the ring base) of consumer warpgroup `wg`'s k16 step kk of stage s.
  STRIKER_HOST_DEVICE static constexpr uint32_t a_desc_offset(int s, int wg, int kk) {
    return a_stage(s) + uint32_t(wg) * 64 * kRowBytes + uint32_t(kk) * 32;
  }
  STRIKER_HOST_DEVICE static constexpr uint32_t b_desc_offset(int s, int kk) {
    return b_stage(s) + uint32_t(kk) * 32;
  }
};
using WgRingK64 = WgRing<64, 4>;  // 4 × 48 KiB
using WgRingK32 = WgRing<32, 9>;  // 9 × 24 KiB

}  // namespace striker::cuda
