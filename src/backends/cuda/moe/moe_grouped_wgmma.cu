// Hopper grouped expert GEMMs (moe_grouped_wgmma.h): persistent CTAs (one per SM) walking the
// work items (128-row tile of one expert, column block), warp-specialised.
//
//   warpgroup 0 (producer, 88 registers): per 64-wide k slice, thread 0 issues two TMA loads of
//     128 weight rows each (the gate and up rows of the column block, or 256 rows of W_down) and
//     all 128 threads gather the tile's 128 activation rows with 16-byte cp.async into the same
//     128B-swizzled layout TMA writes; each thread then arrives on the stage's "full" barrier with
//     cp.async.mbarrier.arrive.noinc (the arrival lands once its copies have), so the producer
//     goes straight on to the next free stage: every stage the consumers do not hold is loading.
//   warpgroups 1, 2 (consumers, 208 registers): rows 0-63 and 64-127 of the tile; per stage a
//     fence.proxy.async after the full barrier's wait (the cp.async rows were written through the
//     generic proxy, wgmma reads through the async proxy), four wgmma m64n256k16 (k16 steps) into
//     128 fp32 registers, then release the previous stage's "empty" barrier once its wgmma group
//     has completed. A warpgroup whose 64 rows are all past the expert's end skips the MMAs (still
//     keeps the barrier protocol).
//   epilogue (consumers, from registers): FLINT.md §4 rounding exactly as moe_grouped.cu:
//     g, u = bf16(scale2·acc), act = bf16(bf16(g·sigmoid(g))·u); y = bf16(scale2·acc).
//
// Why gathered rows by cp.async instead of a gather pass + TMA: Hopper's TMA has no row gather,
// and a pass writing x in expert order would write and re-read T·K·hidden·2 bytes (201 MB at 8K
// tokens, ~50 µs of HBM per layer, ~8 % of the layer's predicted 600-800 µs) to save only the
// producer's address arithmetic; the 33 MB of x stay L2-resident while its tiles are gathered,
// and eight threads per row keep every 32-byte sector whole. The down GEMM reads act_sorted the same way
// (identity gather) so both share one producer.
#include "backends/cuda/moe/moe_grouped_wgmma.h"

#include <cuda.h>

#include <algorithm>
#include <initializer_list>
#include <string>

#include "backends/cuda/common/cuda_check.h"
#include "backends/cuda/common/launch.cuh"
#include "backends/cuda/common/tensor_core.cuh"
#include "backends/cuda/common/tma_map.h"
#include "backends/cuda/common/warp_dot.cuh"
#include "backends/cuda/common/wgmma.cuh"
#include "backends/cuda/moe/moe_grouped_wgmma_layout.h"

namespace striker::cuda {
namespace {

struct WgmmaArgs {
  const bf16_t* a;             // activations [rows, kdim]
  const int32_t* sorted_slot;  // non-null: A row of sorted row r is sorted_slot[r] / slots_per_token (gather)
  int slots_per_token;
  int kdim;                    // reduction width
  int n;                       // output columns (per matrix)
  int col_blocks;              // CTAs per tile
  int experts;
  const float* scale2[2];      // device [E] or null (= 1)
  const MoeTile* tiles;
  const int32_t* num_tiles;
  bf16_t* out;                 // [T·K, n] in sorted row order
};

// Weight-tile policy of the producer warpgroup (one today; an NVFP4 policy decoding in the
// producer was measured slower than decoding into a scratch first and removed, docs/performance.md).
// For k slice kt of an item, the CTA's stage g (ring slot s = g % kWgStages):
//   issue(kt, g, b_dst, full, ...)  starts the loads (before the thread's A copies of the stage).
// B row br of the tile: gated, gate row n0 + br (br < 128) or up row n0 + br - 128; plain, row
// n0 + br of expert e's [n, kdim] matrix; rows past the stack (E·n) read zeros, rows past n inside
// it belong to the next expert and only reach columns the epilogue does not store.

// BF16 stacks: thread 0 issues two TMA boxes of 128 rows × 64 k; their bytes complete on full[s].
struct TmaWeights {
  CUtensorMap map[2];
  // the producer threads' noinc cp.async arrivals + thread 0's expect_tx arrival
  static constexpr uint32_t kFullArrivals = kWgProducerThreads + 1;
  static constexpr int kSmemBytes = kWgSmemBytes;
  __device__ __forceinline__ void prefetch() const {
    tma_prefetch_map(&map[0]);
    tma_prefetch_map(&map[1]);
  }
  template <bool kGated>
  __device__ __forceinline__ void issue(int kt, int /*g*/, uint8_t* b_dst, uint8_t*, uint64_t* full, int t,
                                        int b_row0, const WgmmaArgs&) const {
    if (t != 0) return;
    mbar_arrive_expect_tx(full, kWgBBytes);  // both boxes, zero-filled parts included
    tma_load_2d(b_dst, &map[0], full, kt * kWgBK, b_row0);
    tma_load_2d(b_dst + kWgHalfBRows * kSw128RowBytes, &map[1], full, kt * kWgBK,
                kGated ? b_row0 : b_row0 + kWgHalfBRows);
  }
};

// Persistent: CTA b takes the work items b, b + gridDim.x, ... (item = row tile · col_blocks +
// column block, so the column blocks of one row tile and the row tiles of one expert stay close in
// time) until the device-side tile count runs out. The ring and its barriers carry over from item
// to item: stage g (counted over all of the CTA's items) lives in slot g % kWgStages and its
// phases have parity (g / kWgStages) & 1, so the producer fills the next item's first stages while
// the consumers run the previous item's epilogue.
template <bool kGated, class Weights>
__global__ void __launch_bounds__(kWgThreads, 1)
    grouped_wgmma_kernel(const __grid_constant__ Weights weights, const WgmmaArgs args) {
  pdl_grid_start();  // see launch.cuh; the routing and A come from earlier kernels
  const int items = *args.num_tiles * args.col_blocks;
  if (int(blockIdx.x) >= items) return;

  __shared__ uint64_t full[kWgStages], empty[kWgStages];
  extern __shared__ uint8_t wg_smem[];
  // The 128B swizzle keys on address bits 7-9: the ring starts on a 1024-byte boundary.
  const uint32_t raw = smem_u32(wg_smem);
  uint8_t* ring = wg_smem + (((raw + kSw128AtomBytes - 1) & ~uint32_t(kSw128AtomBytes - 1)) - raw);
  const uint32_t ring_s = smem_u32(ring);

  const int k_tiles = (args.kdim + kWgBK - 1) / kWgBK;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kWgStages; ++s) {
      mbar_init(&full[s], Weights::kFullArrivals);
      mbar_init(&empty[s], kWgConsumerWarpgroups * 4);  // one arrival per consumer warp
    }
    mbar_fence_init();
    weights.prefetch();
  }
  __syncthreads();

  // Warpgroup index broadcast from lane 0: provably warp-uniform, so ptxas does not treat the
  // wgmma paths as divergent (it would serialise the wgmmas, warning C7518).
  const int warpgroup = __shfl_sync(0xffffffffu, int(threadIdx.x) / 128, 0);
  if (warpgroup == 0) {
    // ---------------- producer ----------------
    warpgroup_reg_dealloc<88>();
    const int t = threadIdx.x;
    const int chunk = wg_a_chunk(t);
    int g = 0;
    for (int item = blockIdx.x; item < items; item += gridDim.x) {
      const MoeTile tile = args.tiles[item / args.col_blocks];
      const int n0 = (item % args.col_blocks) * wg_out_cols(kGated);
      int src[kWgAPasses];  // A row of each of this thread's tile rows; -1 past the expert's rows
#pragma unroll
      for (int p = 0; p < kWgAPasses; ++p) {
        const int r = wg_a_row(t, p);
        int row = -1;
        if (r < tile.rows) {
          row = tile.first + r;
          if (args.sorted_slot) row = args.sorted_slot[row] / args.slots_per_token;
        }
        src[p] = row;
      }
      const int b_row0 = tile.expert * args.n + n0;
      for (int kt = 0; kt < k_tiles; ++kt, ++g) {
        const int s = g % kWgStages;
        if (g >= kWgStages) mbar_wait(&empty[s], uint32_t((g / kWgStages - 1) & 1));
        weights.template issue<kGated>(kt, g, ring + wg_b_stage(s), ring, &full[s], t, b_row0, args);
        uint8_t* a_dst = ring + wg_a_stage(s);
        const int k = kt * kWgBK + chunk * 8;
        const bool k_ok = k < args.kdim;
#pragma unroll
        for (int p = 0; p < kWgAPasses; ++p) {
          const bool ok = k_ok && src[p] >= 0;
          cp_async16(reinterpret_cast<bf16_t*>(a_dst + sw128_offset(wg_a_row(t, p), chunk)),
                     ok ? args.a + int64_t(src[p]) * args.kdim + k : args.a, ok);
        }
        cp_async_mbar_arrive_noinc(smem_u32(&full[s]));  // one of full[s]'s arrivals, once the copies land
      }
    }
    cp_async_wait<0>();
    return;
  }

  // ---------------- consumers ----------------
  warpgroup_reg_alloc<208>();  // 88·128 + 208·256 = 64512 = the 168·384 the CTA launched with
  const int wg = warpgroup - 1;
  const int t = int(threadIdx.x) % 128;
  const bool releaser = t % 32 == 0;  // one arrival per warp on the empty barriers
  int g = 0;
  for (int item = blockIdx.x; item < items; item += gridDim.x) {
    const MoeTile tile = args.tiles[item / args.col_blocks];
    const int n0 = (item % args.col_blocks) * wg_out_cols(kGated);
    const bool active = __shfl_sync(0xffffffffu, wg * 64 < tile.rows ? 1 : 0, 0) != 0;
    if (!active) {  // keep the barrier protocol: wait for each stage, release it
      for (int kt = 0; kt < k_tiles; ++kt, ++g) {
        mbar_wait(&full[g % kWgStages], uint32_t((g / kWgStages) & 1));
        if (releaser) mbar_arrive(&empty[g % kWgStages]);
      }
      continue;
    }
    float acc[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) acc[i] = 0.f;
    wgmma_fence_operands(acc);
    for (int kt = 0; kt < k_tiles; ++kt, ++g) {
      const int s = g % kWgStages;
      mbar_wait(&full[s], uint32_t((g / kWgStages) & 1));
      fence_proxy_async_shared();  // the producer's cp.async rows (generic proxy), for wgmma (async proxy)
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kWgBK / 16; ++kk)
        wgmma_m64n256k16_bf16(acc, wgmma_desc_sw128(ring_s + wg_a_desc_offset(s, wg, kk)),
                              wgmma_desc_sw128(ring_s + wg_b_desc_offset(s, kk)), 1);
      wgmma_commit();
      wgmma_wait<1>();  // the group of stage g - 1 has completed: its buffers may be refilled
      if (kt > 0 && releaser) mbar_arrive(&empty[(g - 1) % kWgStages]);
    }
    wgmma_wait<0>();
    wgmma_fence_operands(acc);
    if (releaser) mbar_arrive(&empty[(g - 1) % kWgStages]);  // the item's last stage

    const float s0 = args.scale2[0] ? __ldg(args.scale2[0] + tile.expert) : 1.f;
    const float s1 = args.scale2[1] ? __ldg(args.scale2[1] + tile.expert) : 1.f;
    // Per row half h (rows r and r + 8 of the fragment) and 4 n8 blocks at a time: the values,
    // rounded as FLINT.md §4 says, transposed across the quad so each thread stores 8 whole columns.
    constexpr int kBlocks = wg_out_cols(kGated) / 8;  // gated: registers of block j + 16 are the up columns of j
    const int q = t & 3;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = wg * 64 + wgmma_acc_row(t, 2 * h);
      const bool row_ok = r < tile.rows;
      bf16_t* orow = args.out + int64_t(tile.first + r) * args.n;  // written only when row_ok
#pragma unroll
      for (int j0 = 0; j0 < kBlocks; j0 += 4) {
        uint32_t m[4];
#pragma unroll
        for (int b = 0; b < 4; ++b) {
          const int i = 4 * (j0 + b) + 2 * h;  // registers i, i + 1: columns 8(j0 + b) + 2q, + 1 of row r
          float v[2];
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            if constexpr (kGated) {
              const float gv = round_bf16(acc[i + e] * s0);
              const float uv = round_bf16(acc[i + e + 64] * s1);
              v[e] = silu_bf16(gv) * uv;
            } else {
              v[e] = acc[i + e] * s0;
            }
          }
          m[b] = pack_bf16x2(v[0], v[1]);
        }
        quad_transpose(m);  // now columns 8(j0 + q) .. + 7
        const int col = n0 + 8 * (j0 + q);
        if (row_ok && col < args.n)  // n % 8 == 0: a block is inside or outside as a whole
          *reinterpret_cast<uint4*>(orow + col) = make_uint4(m[0], m[1], m[2], m[3]);
      }
    }
  }
}

void check_wgmma(const char* what, int T, int K, int kdim, int n, const MoeRouting& r, const void* a,
                 const void* w0, const void* w1, const void* out) {
  auto fail = [&](const std::string& why) { throw Error(std::string(what) + ": " + why); };
  if (kdim <= 0 || kdim % 8 != 0) fail("reduction width " + std::to_string(kdim) + " is not a positive multiple of 8");
  if (n <= 0 || n % 8 != 0) fail("output width " + std::to_string(n) + " is not a positive multiple of 8");
  if (r.tile_rows != kMoeWgmmaTileRows)
    fail("the routing was sorted with tile_rows " + std::to_string(r.tile_rows) + ", this path needs " +
         std::to_string(kMoeWgmmaTileRows));
  if (r.experts <= 0 || r.experts > kMoeMaxExperts)
    fail(std::to_string(r.experts) + " experts (1.." + std::to_string(kMoeMaxExperts) + " supported)");
  if (K <= 0 || int64_t(T) * K > (int64_t(1) << 30)) fail("bad routing size T=" + std::to_string(T));
  if (int64_t(r.experts) * n > (int64_t(1) << 31) - kWgBRows) fail("expert stack too tall for TMA coordinates");
  for (const void* p : {a, w0, w1, out})
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) fail("activations, weights and outputs must be 16-byte aligned");
}

template <bool kGated, class Weights>
void launch_wgmma(const char* what, const WgmmaArgs& args, const Weights& w, int T, int K, const MoeRouting& r,
                  cudaStream_t stream) {
  auto* kernel = grouped_wgmma_kernel<kGated, Weights>;
  static const bool ready = allow_dynamic_smem(kernel, int(Weights::kSmemBytes));
  (void)ready;
  // Persistent CTAs, one per SM (one fits: 193-220 KiB of shared memory, 384 threads × 168
  // registers), never more than the work items of the largest routing of T tokens.
  int device = 0, sms = 0;
  STRIKER_CUDA_CHECK(cudaGetDevice(&device));
  STRIKER_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const int64_t items = moe_max_tiles(int64_t(T) * K, r.experts, kWgTileRows) * args.col_blocks;
  if (items > (int64_t(1) << 31) - 1) throw Error(std::string(what) + ": too many tiles for one launch");
  const int64_t ctas = std::min<int64_t>(items, std::max(sms, 1));
  launch_pdl(kernel, dim3(unsigned(ctas)), dim3(kWgThreads), size_t(Weights::kSmemBytes), stream, w, args);
  STRIKER_CUDA_CHECK_LAUNCH(what);
}

// Both matrices of a gated launch (or the one of a plain launch, twice) as TMA maps of the
// [E·n, kdim] stacks, 128-row boxes.
TmaWeights tma_weights(const char* what, const bf16* w0, const bf16* w1, const WgmmaArgs& args) {
  const int64_t stack_rows = int64_t(args.experts) * args.n;
  return TmaWeights{{make_tma_map_bf16_sw128(w0, stack_rows, args.kdim, kWgHalfBRows, what),
                     make_tma_map_bf16_sw128(w1, stack_rows, args.kdim, kWgHalfBRows, what)}};
}

WgmmaArgs make_args(const bf16* a, const int32_t* sorted_slot, int K, int kdim, int n, bool gated,
                    const float* s0, const float* s1, const MoeRouting& r, bf16* out) {
  return WgmmaArgs{reinterpret_cast<const bf16_t*>(a),
                   sorted_slot,
                   K,
                   kdim,
                   n,
                   (n + wg_out_cols(gated) - 1) / wg_out_cols(gated),
                   r.experts,
                   {s0, s1},
                   r.tiles,
                   r.num_tiles,
                   reinterpret_cast<bf16_t*>(out)};
}

}  // namespace

void moe_grouped_gate_up_wgmma(const bf16* x, int T, int K, int hidden, const bf16* w_gate, const bf16* w_up,
                               int inter, const float* scale2_gate, const float* scale2_up, const MoeRouting& r,
                               bf16* act_sorted, cudaStream_t stream) {
  if (T <= 0) return;
  constexpr const char* what = "moe_grouped_gate_up_wgmma";
  check_wgmma(what, T, K, hidden, inter, r, x, w_gate, w_up, act_sorted);
  const WgmmaArgs args = make_args(x, r.sorted_slot, K, hidden, inter, true, scale2_gate, scale2_up, r, act_sorted);
  launch_wgmma<true>(what, args, tma_weights(what, w_gate, w_up, args), T, K, r, stream);
}

void moe_grouped_down_wgmma(const bf16* act_sorted, int T, int K, int inter, const bf16* w_down, int hidden,
                            const float* scale2_down, const MoeRouting& r, bf16* y_sorted, cudaStream_t stream) {
  if (T <= 0) return;
  constexpr const char* what = "moe_grouped_down_wgmma";
  check_wgmma(what, T, K, inter, hidden, r, act_sorted, w_down, w_down, y_sorted);
  const WgmmaArgs args = make_args(act_sorted, nullptr, K, inter, hidden, false, scale2_down, nullptr, r, y_sorted);
  launch_wgmma<false>(what, args, tma_weights(what, w_down, w_down, args), T, K, r, stream);
}

}  // namespace striker::cuda
