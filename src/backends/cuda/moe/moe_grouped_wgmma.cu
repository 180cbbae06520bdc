// Hopper grouped expert GEMMs (moe_grouped_wgmma.h): persistent CTAs (one per SM) walking the
// work items (128-row tile of one expert, column block), warp-specialised.
//
//   warpgroup 0 (producer, 88 registers): per k slice (WgRing: 64 wide in a 4 × 48 KiB ring with the
//     128B swizzle, or 32 wide in a 9 × 24 KiB ring with the 64B swizzle), thread 0 issues two TMA
//     loads of 128 weight rows each (the gate and up rows of the column block, or 256 rows of
//     W_down) and all 128 threads gather the tile's 128 activation rows with 16-byte cp.async into
//     the same swizzled layout TMA writes; the stage's "full" barrier completes when both have
//     landed (WgSignal: the copies' own mbarrier arrivals, or the older lag-2 wait_group scheme).
//   warpgroups 1, 2 (consumers, 208 registers): rows 0-63 and 64-127 of the tile; per stage one
//     wgmma m64n256k16 per k16 step into 128 fp32 registers, then release the previous stage's
//     "empty" barrier once its wgmma group has completed. A warpgroup whose 64 rows are all past
//     the expert's end skips the MMAs (still keeps the barrier protocol).
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
#include <cstdlib>
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

// How the producer tells the consumers that a stage's gathered A rows have landed.
//   kLag:   after issuing stage g it blocks in cp.async.wait_group until the copies of stage
//           g - kWgLag have landed, fences them for the async proxy and arrives on that stage's
//           full barrier: A runs at most kWgLag + 1 stages ahead, and a slow copy stalls the issue
//           of every later stage.
//   kNoinc: each producer thread ends a stage with cp.async.mbarrier.arrive.noinc on its full
//           barrier (the arrival fires when the thread's copies land) and goes on issuing while
//           the ring has free stages; the consumers fence after their wait instead.
// TEMPORARY: both are built for one comparison on the H200 (docs/performance.md); the loser goes.
enum class WgSignal { kLag, kNoinc };

// The weight tiles: thread 0 issues two TMA boxes of 128 rows × Ring::kBK k per stage; their
// bytes complete on the stage's full barrier. B row br of the tile: gated, gate row n0 + br
// (br < 128) or up row n0 + br - 128; plain, row n0 + br of expert e's [n, kdim] matrix; rows
// past the stack (E·n) read zeros, rows past n inside it belong to the next expert and only reach
// columns the epilogue does not store.
struct TmaWeights {
  CUtensorMap map[2];
  static constexpr uint32_t kFullArrivals = kWgProducerThreads + 1;  // + thread 0's expect_tx arrival
  __device__ __forceinline__ void prefetch() const {
    tma_prefetch_map(&map[0]);
    tma_prefetch_map(&map[1]);
  }
  template <bool kGated, class Ring>
  __device__ __forceinline__ void issue(int kt, uint8_t* b_dst, uint64_t* full, int t, int b_row0) const {
    if (t != 0) return;
    mbar_arrive_expect_tx(full, Ring::kBBytes);  // both boxes, zero-filled parts included
    tma_load_2d(b_dst, &map[0], full, kt * Ring::kBK, b_row0);
    tma_load_2d(b_dst + kWgHalfBRows * Ring::kRowBytes, &map[1], full, kt * Ring::kBK,
                kGated ? b_row0 : b_row0 + kWgHalfBRows);
  }
};

// Which item a CTA takes next (item = row tile · col_blocks + column block, so the column blocks
// of one row tile and the row tiles of one expert are neighbours). Each CTA starts with item
// blockIdx.x; then
//   static:  blockIdx.x + gridDim.x, + 2·gridDim.x, ...: CTAs that drew short items (64-row
//            tiles) drift rounds ahead of others, and an expert's two row tiles can then run far
//            apart in time, its weights leaving L2 in between;
//   dynamic: the next unclaimed item (an atomic counter), so the items in flight stay one
//            window of ~gridDim.x neighbours.
// TEMPORARY: both are built for one comparison on the H200. g_wg_work: [0] items handed out past
// the first round, [1] CTAs done; the last CTA done zeroes both for the next launch (launches of
// these kernels on one device must not overlap: one stream per backend, which is the case).
__device__ int g_wg_work[2];
__device__ __forceinline__ void wg_work_done() {
  __threadfence();  // this CTA's last claim is ordered before its "done"
  if (atomicAdd(&g_wg_work[1], 1) == int(gridDim.x) - 1) {
    atomicExch(&g_wg_work[0], 0);
    atomicExch(&g_wg_work[1], 0);
  }
}

// An item as the producer hands it to the consumers in shared memory (trivial: no dynamic init).
struct WgWork {
  int item;  // -1: no more items
  int expert, first, rows;
};

// Persistent CTAs walk their work items. The ring and its barriers carry over from item to item:
// stage g (counted over all of the CTA's items) lives in slot g % kStages and its phases have
// parity (g / kStages) & 1, so the producer fills the next item's first stages while the
// consumers run the previous item's epilogue. The producer writes each item (and its tile, which
// it has read already) next to the item's first stage and ends with a stage carrying item -1, so
// the consumers follow whatever order the producer took without a global load of their own.
template <bool kGated, class Ring, WgSignal kSignal, bool kDynamic>
__global__ void __launch_bounds__(kWgThreads, 1)
    grouped_wgmma_kernel(const __grid_constant__ TmaWeights weights, const WgmmaArgs args) {
  pdl_grid_start();  // see launch.cuh; the routing and A come from earlier kernels
  const int items = *args.num_tiles * args.col_blocks;
  if (int(blockIdx.x) >= items) {
    if constexpr (kDynamic)
      if (threadIdx.x == 0) wg_work_done();
    return;
  }
  constexpr int kStages = Ring::kStages;

  __shared__ uint64_t full[kStages], empty[kStages];
  __shared__ WgWork stage_work[kStages];  // the item a stage starts (kt = 0)
  __shared__ int claimed;              // kDynamic: the producer's newest claim
  extern __shared__ uint8_t wg_smem[];
  // The swizzles key on address bits 7-9 (128B) or 7-8 (64B): the ring starts on a 1024-byte boundary.
  const uint32_t raw = smem_u32(wg_smem);
  uint8_t* ring = wg_smem + (((raw + kSw128AtomBytes - 1) & ~uint32_t(kSw128AtomBytes - 1)) - raw);
  const uint32_t ring_s = smem_u32(ring);

  const int k_tiles = (args.kdim + Ring::kBK - 1) / Ring::kBK;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(&full[s], TmaWeights::kFullArrivals);
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
    const int chunk = Ring::a_chunk(t);
    // kLag: stage g's copies have landed; make the generic-proxy writes visible to wgmma (async
    // proxy), signal.
    auto signal = [&](int g) {
      fence_proxy_async_shared();
      mbar_arrive(&full[g % kStages]);
    };
    // kDynamic: thread 0 claims the CTA's next item as it starts an item (the atomic's latency
    // hides behind the item's loads) and hands it to the warpgroup at the item's end.
    int upcoming = 0;
    auto next = [&](int item) {
      if constexpr (!kDynamic) {
        return item + int(gridDim.x);
      } else {
        named_barrier_sync(1, kWgProducerThreads);  // everyone has read the previous claim
        if (t == 0) {
          claimed = upcoming;
          if (upcoming >= items) wg_work_done();
        }
        named_barrier_sync(1, kWgProducerThreads);
        return claimed;
      }
    };
    int g = 0;
    for (int item = blockIdx.x; item < items; item = next(item)) {
      if constexpr (kDynamic)
        if (t == 0) upcoming = int(gridDim.x) + atomicAdd(&g_wg_work[0], 1);
      const MoeTile tile = args.tiles[item / args.col_blocks];
      const int n0 = (item % args.col_blocks) * wg_out_cols(kGated);
      int src[Ring::kAPasses];  // A row of each of this thread's tile rows; -1 past the expert's rows
#pragma unroll
      for (int p = 0; p < Ring::kAPasses; ++p) {
        const int r = Ring::a_row(t, p);
        int row = -1;
        if (r < tile.rows) {
          row = tile.first + r;
          if (args.sorted_slot) row = args.sorted_slot[row] / args.slots_per_token;
        }
        src[p] = row;
      }
      const int b_row0 = tile.expert * args.n + n0;
      for (int kt = 0; kt < k_tiles; ++kt, ++g) {
        const int s = g % kStages;
        if (g >= kStages) mbar_wait(&empty[s], uint32_t((g / kStages - 1) & 1));
        if (kt == 0 && t == 0) stage_work[s] = WgWork{item, tile.expert, tile.first, tile.rows};  // published by thread 0's arrival on full[s]
        weights.template issue<kGated, Ring>(kt, ring + Ring::b_stage(s), &full[s], t, b_row0);
        uint8_t* a_dst = ring + Ring::a_stage(s);
        const int k = kt * Ring::kBK + chunk * 8;
        const bool k_ok = k < args.kdim;
#pragma unroll
        for (int p = 0; p < Ring::kAPasses; ++p) {
          const bool ok = k_ok && src[p] >= 0;
          cp_async16(reinterpret_cast<bf16_t*>(a_dst + Ring::swizzled(Ring::a_row(t, p), chunk)),
                     ok ? args.a + int64_t(src[p]) * args.kdim + k : args.a, ok);
        }
        if constexpr (kSignal == WgSignal::kNoinc) {
          cp_async_mbar_arrive_noinc(&full[s]);
        } else {
          cp_async_commit();
          if (g >= kWgLag) {
            cp_async_wait<kWgLag>();  // the group of stage g - kWgLag has landed
            signal(g - kWgLag);
          }
        }
      }
    }
    cp_async_commit();  // kNoinc: leave only once the copies (and with them the arrivals) have landed
    cp_async_wait<0>();
    if constexpr (kSignal == WgSignal::kLag)
      for (int r = g > kWgLag ? g - kWgLag : 0; r < g; ++r) signal(r);
    // One more stage, carrying no data and item -1: the consumers leave.
    const int s = g % kStages;
    if (g >= kStages) mbar_wait(&empty[s], uint32_t((g / kStages - 1) & 1));
    if (t == 0) {
      stage_work[s].item = -1;
      mbar_arrive(&full[s]);  // in place of the expect_tx arrival
    }
    mbar_arrive(&full[s]);
    return;
  }

  // ---------------- consumers ----------------
  warpgroup_reg_alloc<208>();  // 88·128 + 208·256 = 64512 = the 168·384 the CTA launched with
  const int wg = warpgroup - 1;
  const int t = int(threadIdx.x) % 128;
  const bool releaser = t % 32 == 0;  // one arrival per warp on the empty barriers
  for (int g = 0;;) {
    // The item's first stage names the item (lane 0's read broadcast: provably warp-uniform).
    mbar_wait(&full[g % kStages], uint32_t((g / kStages) & 1));
    const int item = __shfl_sync(0xffffffffu, stage_work[g % kStages].item, 0);
    if (item < 0) break;
    const WgWork tile = stage_work[g % kStages];
    const int n0 = (item % args.col_blocks) * wg_out_cols(kGated);
    const bool active = __shfl_sync(0xffffffffu, wg * 64 < tile.rows ? 1 : 0, 0) != 0;
    if (!active) {  // keep the barrier protocol: wait for each stage, release it
      for (int kt = 0; kt < k_tiles; ++kt, ++g) {
        if (kt > 0) mbar_wait(&full[g % kStages], uint32_t((g / kStages) & 1));
        if (releaser) mbar_arrive(&empty[g % kStages]);
      }
      continue;
    }
    float acc[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) acc[i] = 0.f;
    wgmma_fence_operands(acc);
    for (int kt = 0; kt < k_tiles; ++kt, ++g) {
      const int s = g % kStages;
      if (kt > 0) mbar_wait(&full[s], uint32_t((g / kStages) & 1));
      // kNoinc: the A rows were written through the generic proxy by other threads' cp.async,
      // made visible to this thread by the barrier; fence them for this thread's wgmma reads.
      if constexpr (kSignal == WgSignal::kNoinc) fence_proxy_async_shared();
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < Ring::kBK / 16; ++kk)
        wgmma_m64n256k16_bf16(acc, Ring::desc(ring_s + Ring::a_desc_offset(s, wg, kk)),
                              Ring::desc(ring_s + Ring::b_desc_offset(s, kk)), 1);
      wgmma_commit();
      wgmma_wait<1>();  // the group of stage g - 1 has completed: its buffers may be refilled
      if (kt > 0 && releaser) mbar_arrive(&empty[(g - 1) % kStages]);
    }
    wgmma_wait<0>();
    wgmma_fence_operands(acc);
    if (releaser) mbar_arrive(&empty[(g - 1) % kStages]);  // the item's last stage
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

// Both matrices of a gated launch (or the one of a plain launch, twice) as TMA maps of the
// [E·n, kdim] stacks, 128-row boxes of the ring's k slice and swizzle.
template <class Ring>
TmaWeights tma_weights(const char* what, const bf16* w0, const bf16* w1, const WgmmaArgs& args) {
  const int64_t rows = int64_t(args.experts) * args.n;
  auto map = [&](const bf16* w) {
    return Ring::kBK == 64 ? make_tma_map_bf16_sw128(w, rows, args.kdim, kWgHalfBRows, what)
                           : make_tma_map_bf16_sw64(w, rows, args.kdim, kWgHalfBRows, what);
  };
  return TmaWeights{{map(w0), map(w1)}};
}

template <bool kGated, class Ring, WgSignal kSignal, bool kDynamic = false>
void launch_ring(const char* what, const WgmmaArgs& args, const bf16* w0, const bf16* w1, int T, int K,
                 const MoeRouting& r, cudaStream_t stream) {
  auto* kernel = grouped_wgmma_kernel<kGated, Ring, kSignal, kDynamic>;
  // Above 48 KiB of dynamic shared memory needs the opt-in: a function attribute (allowed while a
  // graph is being captured), set once per instantiation (thread-safe static).
  static const bool configured = [&] {
    STRIKER_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Ring::kSmemBytes));
    return true;
  }();
  (void)configured;
  // Persistent CTAs, one per SM (one fits: 193-217 KiB of shared memory, 384 threads × 168
  // registers), never more than the work items of the largest routing of T tokens.
  int device = 0, sms = 0;
  STRIKER_CUDA_CHECK(cudaGetDevice(&device));
  STRIKER_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const int64_t items = moe_max_tiles(int64_t(T) * K, r.experts, kWgTileRows) * args.col_blocks;
  if (items > (int64_t(1) << 31) - 1) throw Error(std::string(what) + ": too many tiles for one launch");
  const int64_t ctas = std::min<int64_t>(items, std::max(sms, 1));
  launch_pdl(kernel, dim3(unsigned(ctas)), dim3(kWgThreads), size_t(Ring::kSmemBytes), stream,
             tma_weights<Ring>(what, w0, w1, args), args);
  STRIKER_CUDA_CHECK_LAUNCH(what);
}

// TEMPORARY, for one comparison run on the H200 (docs/performance.md, "more stages in flight"):
// STRIKER_MOE_WGMMA_RING picks the ring and the producer's signal: "lag64" (4 × 48 KiB stages,
// lag-2 signal: the kernel before this change), "noinc64" (4 × 48 KiB, noinc arrivals) or
// "noinc32" (9 × 24 KiB, noinc arrivals; the default), "noinc32dyn" (the same with the dynamic
// item order). The losers are deleted after the run.
enum class WgVariant { kLag64, kNoinc64, kNoinc32, kNoinc32Dyn };
WgVariant wg_variant() {
  static const WgVariant v = [] {
    const char* e = std::getenv("STRIKER_MOE_WGMMA_RING");
    const std::string s = e ? e : "noinc32";
    if (s == "lag64") return WgVariant::kLag64;
    if (s == "noinc64") return WgVariant::kNoinc64;
    if (s == "noinc32") return WgVariant::kNoinc32;
    if (s == "noinc32dyn") return WgVariant::kNoinc32Dyn;
    throw Error("STRIKER_MOE_WGMMA_RING=" + s + ": expected lag64, noinc64, noinc32 or noinc32dyn");
  }();
  return v;
}

template <bool kGated>
void launch_wgmma(const char* what, const WgmmaArgs& args, const bf16* w0, const bf16* w1, int T, int K,
                  const MoeRouting& r, cudaStream_t stream) {
  switch (wg_variant()) {
    case WgVariant::kLag64:
      return launch_ring<kGated, WgRingK64, WgSignal::kLag>(what, args, w0, w1, T, K, r, stream);
    case WgVariant::kNoinc64:
      return launch_ring<kGated, WgRingK64, WgSignal::kNoinc>(what, args, w0, w1, T, K, r, stream);
    case WgVariant::kNoinc32:
      return launch_ring<kGated, WgRingK32, WgSignal::kNoinc>(what, args, w0, w1, T, K, r, stream);
    case WgVariant::kNoinc32Dyn:
      return launch_ring<kGated, WgRingK32, WgSignal::kNoinc, true>(what, args, w0, w1, T, K, r, stream);
  }
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
  launch_wgmma<true>(what, args, w_gate, w_up, T, K, r, stream);
}

void moe_grouped_down_wgmma(const bf16* act_sorted, int T, int K, int inter, const bf16* w_down, int hidden,
                            const float* scale2_down, const MoeRouting& r, bf16* y_sorted, cudaStream_t stream) {
  if (T <= 0) return;
  constexpr const char* what = "moe_grouped_down_wgmma";
  check_wgmma(what, T, K, inter, hidden, r, act_sorted, w_down, w_down, y_sorted);
  const WgmmaArgs args = make_args(act_sorted, nullptr, K, inter, hidden, false, scale2_down, nullptr, r, y_sorted);
  launch_wgmma<false>(what, args, w_down, w_down, T, K, r, stream);
}

}  // namespace striker::cuda
