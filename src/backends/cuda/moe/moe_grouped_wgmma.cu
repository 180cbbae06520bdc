// Hopper grouped expert GEMMs (moe_grouped_wgmma.h): one CTA per (128-row tile of one expert,
// column block), warp-specialised.
//
//   warpgroup 0 (producer, 56 registers): per 64-wide k slice, thread 0 issues two TMA loads of
//     128 weight rows each (the gate and up rows of the column block, or 256 rows of W_down) and
//     all 128 threads gather the tile's 128 activation rows with 16-byte cp.async into the same
//     128B-swizzled layout TMA writes; each thread signals the stage's "full" barrier once its
//     copies have landed (cp.async.wait_group + fence.proxy.async: wgmma reads through the async
//     proxy), kWgLag stages behind its issue, so loads of kWgLag + 1 stages are in flight.
//   warpgroups 1, 2 (consumers, 224 registers): rows 0-63 and 64-127 of the tile; per stage four
//     wgmma m64n256k16 (k16 steps) into 128 fp32 registers, then release the previous stage's
//     "empty" barrier once its wgmma group has completed. A warpgroup whose 64 rows are all past
//     the expert's end skips the MMAs (still keeps the barrier protocol).
//   epilogue (consumers, from registers): FLINT.md §4 rounding exactly as moe_grouped.cu:
//     g, u = bf16(scale2·acc), act = bf16(bf16(g·sigmoid(g))·u); y = bf16(scale2·acc).
//
// Why gathered rows by cp.async instead of a gather pass + TMA: Hopper's TMA has no row gather,
// and a pass writing x in expert order would write and re-read T·K·hidden·2 bytes (201 MB at 8K
// tokens, ~50 µs of HBM per layer, a quarter of this kernel's budget) to save only the producer's
// address arithmetic; the 33 MB of x stay L2-resident while its tiles are gathered, and eight
// threads per row keep every 32-byte sector whole. The down GEMM reads act_sorted the same way
// (identity gather) so both share one producer.
#include "backends/cuda/moe/moe_grouped_wgmma.h"

#include <cuda.h>

#include <initializer_list>
#include <string>

#include "backends/cuda/common/cuda_check.h"
#include "backends/cuda/common/launch.cuh"
#include "backends/cuda/common/tensor_core.cuh"
#include "backends/cuda/common/tma_map.h"
#include "backends/cuda/common/warp_dot.cuh"
#include "backends/cuda/common/wgmma.cuh"
#include "backends/cuda/moe/moe_grouped_wgmma_layout.h"
#include "backends/cuda/nvfp4/nvfp4_linear.h"

namespace striker::cuda {
namespace {

struct WgmmaArgs {
  const bf16_t* a;             // activations [rows, kdim]
  const int32_t* sorted_slot;  // non-null: A row of sorted row r is sorted_slot[r] / slots_per_token (gather)
  int slots_per_token;
  int kdim;                    // reduction width
  int n;                       // output columns (per matrix)
  int col_blocks;              // CTAs per tile
  const float* scale2[2];      // device [E] or null (= 1)
  const MoeTile* tiles;
  const int32_t* num_tiles;
  bf16_t* out;                 // [T·K, n] in sorted row order
};

template <bool kGated>
__global__ void __launch_bounds__(kWgThreads, 1)
    grouped_wgmma_kernel(const __grid_constant__ CUtensorMap map0, const __grid_constant__ CUtensorMap map1,
                         WgmmaArgs args) {
  pdl_grid_start();  // see launch.cuh; the routing and A come from earlier kernels
  const int tile_index = int(blockIdx.x) / args.col_blocks;
  if (tile_index >= *args.num_tiles) return;  // the grid is an upper bound on the tiles
  const MoeTile tile = args.tiles[tile_index];
  const int cb = int(blockIdx.x) % args.col_blocks;
  const int n0 = cb * wg_out_cols(kGated);

  __shared__ uint64_t full[kWgStages], empty[kWgStages];
  extern __shared__ uint8_t wg_smem[];
  // The 128B swizzle keys on address bits 7-9: the ring starts on a 1024-byte boundary.
  const uint32_t raw = smem_u32(wg_smem);
  uint8_t* ring = wg_smem + (((raw + kSw128AtomBytes - 1) & ~uint32_t(kSw128AtomBytes - 1)) - raw);
  const uint32_t ring_s = smem_u32(ring);

  const int k_tiles = (args.kdim + kWgBK - 1) / kWgBK;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kWgStages; ++s) {
      mbar_init(&full[s], kWgProducerThreads + 1);  // every producer thread + thread 0's expect_tx arrival
      mbar_init(&empty[s], kWgConsumerWarpgroups * 4);  // one arrival per consumer warp
    }
    mbar_fence_init();
    tma_prefetch_map(&map0);
    tma_prefetch_map(&map1);
  }
  __syncthreads();

  // Warpgroup index broadcast from lane 0: provably warp-uniform, so ptxas does not treat the
  // wgmma paths as divergent (it would serialise the wgmmas, warning C7518).
  const int warpgroup = __shfl_sync(0xffffffffu, int(threadIdx.x) / 128, 0);
  if (warpgroup == 0) {
    // ---------------- producer ----------------
    warpgroup_reg_dealloc<56>();
    const int t = threadIdx.x;
    const int chunk = wg_a_chunk(t);
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
    const int b_row1 = kGated ? b_row0 : b_row0 + kWgHalfBRows;
    for (int kt = 0; kt < k_tiles; ++kt) {
      const int s = kt % kWgStages;
      if (kt >= kWgStages) mbar_wait(&empty[s], uint32_t((kt / kWgStages - 1) & 1));
      uint8_t* a_dst = ring + wg_a_stage(s);
      uint8_t* b_dst = ring + wg_b_stage(s);
      if (t == 0) {
        mbar_arrive_expect_tx(&full[s], kWgBBytes);  // both boxes, zero-filled parts included
        tma_load_2d(b_dst, &map0, &full[s], kt * kWgBK, b_row0);
        tma_load_2d(b_dst + kWgHalfBRows * kSw128RowBytes, &map1, &full[s], kt * kWgBK, b_row1);
      }
      const int k = kt * kWgBK + chunk * 8;
      const bool k_ok = k < args.kdim;
#pragma unroll
      for (int p = 0; p < kWgAPasses; ++p) {
        const bool ok = k_ok && src[p] >= 0;
        cp_async16(reinterpret_cast<bf16_t*>(a_dst + sw128_offset(wg_a_row(t, p), chunk)),
                   ok ? args.a + int64_t(src[p]) * args.kdim + k : args.a, ok);
      }
      cp_async_commit();
      if (kt >= kWgLag) {
        cp_async_wait<kWgLag>();  // the group of stage kt - kWgLag has landed
        fence_proxy_async_shared();
        mbar_arrive(&full[(kt - kWgLag) % kWgStages]);
      }
    }
    cp_async_wait<0>();
    fence_proxy_async_shared();
    for (int kt = k_tiles > kWgLag ? k_tiles - kWgLag : 0; kt < k_tiles; ++kt) mbar_arrive(&full[kt % kWgStages]);
    return;
  }

  // ---------------- consumers ----------------
  warpgroup_reg_alloc<224>();
  const int wg = warpgroup - 1;
  const int t = int(threadIdx.x) % 128;
  const bool active = __shfl_sync(0xffffffffu, wg * 64 < tile.rows ? 1 : 0, 0) != 0;
  if (!active) {  // keep the barrier protocol: wait for each stage, release the one before
    for (int kt = 0; kt < k_tiles; ++kt) {
      mbar_wait(&full[kt % kWgStages], uint32_t((kt / kWgStages) & 1));
      if (kt > 0 && t % 32 == 0) mbar_arrive(&empty[(kt - 1) % kWgStages]);
    }
    return;
  }
  float acc[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) acc[i] = 0.f;
  wgmma_fence_operands(acc);
  for (int kt = 0; kt < k_tiles; ++kt) {
    const int s = kt % kWgStages;
    mbar_wait(&full[s], uint32_t((kt / kWgStages) & 1));
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kWgBK / 16; ++kk)
      wgmma_m64n256k16_bf16(acc, wgmma_desc_sw128(ring_s + wg_a_desc_offset(s, wg, kk)),
                            wgmma_desc_sw128(ring_s + wg_b_desc_offset(s, kk)), 1);
    wgmma_commit();
    wgmma_wait<1>();  // the group of stage kt - 1 has completed: its buffers may be refilled
    if (kt > 0 && t % 32 == 0) mbar_arrive(&empty[(kt - 1) % kWgStages]);
  }
  wgmma_wait<0>();
  wgmma_fence_operands(acc);

  const float s0 = args.scale2[0] ? __ldg(args.scale2[0] + tile.expert) : 1.f;
  const float s1 = args.scale2[1] ? __ldg(args.scale2[1] + tile.expert) : 1.f;
  constexpr int kOutRegs = kGated ? 64 : 128;  // gated: registers i + 64 are the up columns of i
#pragma unroll
  for (int i = 0; i < kOutRegs; i += 2) {
    const int r = wg * 64 + wgmma_acc_row(t, i);
    const int col = n0 + wgmma_acc_col(t, i);
    if (r >= tile.rows || col >= args.n) continue;  // n % 8 == 0 and col is even: col + 1 < n too
    float v[2];
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      if constexpr (kGated) {
        const float g = round_bf16(acc[i + j] * s0);
        const float u = round_bf16(acc[i + j + 64] * s1);
        v[j] = silu_bf16(g) * u;
      } else {
        v[j] = acc[i + j] * s0;
      }
    }
    *reinterpret_cast<__nv_bfloat162*>(args.out + int64_t(tile.first + r) * args.n + col) =
        __floats2bfloat162_rn(v[0], v[1]);
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

template <bool kGated>
void launch_wgmma(const char* what, const WgmmaArgs& args, const bf16* w0, const bf16* w1, int T, int K,
                  const MoeRouting& r, cudaStream_t stream) {
  const int64_t stack_rows = int64_t(r.experts) * args.n;
  const CUtensorMap m0 = make_tma_map_bf16_sw128(w0, stack_rows, args.kdim, kWgHalfBRows, what);
  const CUtensorMap m1 = make_tma_map_bf16_sw128(w1, stack_rows, args.kdim, kWgHalfBRows, what);
  auto* kernel = grouped_wgmma_kernel<kGated>;
  // Above 48 KiB of dynamic shared memory needs the opt-in: a function attribute (allowed while a
  // graph is being captured), set once per instantiation (thread-safe static).
  static const bool configured = [&] {
    STRIKER_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kWgSmemBytes));
    return true;
  }();
  (void)configured;
  const int64_t ctas = moe_max_tiles(int64_t(T) * K, r.experts, kWgTileRows) * args.col_blocks;
  if (ctas > (int64_t(1) << 31) - 1) throw Error(std::string(what) + ": too many tiles for one launch");
  launch_pdl(kernel, dim3(unsigned(ctas)), dim3(kWgThreads), size_t(kWgSmemBytes), stream, m0, m1, args);
  STRIKER_CUDA_CHECK_LAUNCH(what);
}

// The decode scratch of `matrices` stacks of experts × rows × in values.
void check_nvfp4_scratch(const char* what, const MoeRouting& r, int rows, int in, int matrices,
                         const bf16* scratch, int64_t scratch_elems, std::initializer_list<const Nvfp4Stack*> stacks) {
  const int64_t need = int64_t(matrices) * r.experts * rows * in;
  if (scratch == nullptr || scratch_elems < need)
    throw Error(std::string(what) + ": decode scratch of " + std::to_string(scratch_elems) + " values, " +
                std::to_string(need) + " needed");
  for (const Nvfp4Stack* s : stacks)
    if (!s->m.codes || !s->m.scales || !s->scale2)
      throw Error(std::string(what) + ": NVFP4 stack with a null codes, scales or scale2 pointer");
}

}  // namespace

void moe_grouped_gate_up_wgmma(const bf16* x, int T, int K, int hidden, const bf16* w_gate, const bf16* w_up,
                               int inter, const float* scale2_gate, const float* scale2_up, const MoeRouting& r,
                               bf16* act_sorted, cudaStream_t stream) {
  if (T <= 0) return;
  constexpr const char* what = "moe_grouped_gate_up_wgmma";
  check_wgmma(what, T, K, hidden, inter, r, x, w_gate, w_up, act_sorted);
  const WgmmaArgs args{reinterpret_cast<const bf16_t*>(x),
                       r.sorted_slot,
                       K,
                       hidden,
                       inter,
                       (inter + wg_out_cols(true) - 1) / wg_out_cols(true),
                       {scale2_gate, scale2_up},
                       r.tiles,
                       r.num_tiles,
                       reinterpret_cast<bf16_t*>(act_sorted)};
  launch_wgmma<true>(what, args, w_gate, w_up, T, K, r, stream);
}

void moe_grouped_down_wgmma(const bf16* act_sorted, int T, int K, int inter, const bf16* w_down, int hidden,
                            const float* scale2_down, const MoeRouting& r, bf16* y_sorted, cudaStream_t stream) {
  if (T <= 0) return;
  constexpr const char* what = "moe_grouped_down_wgmma";
  check_wgmma(what, T, K, inter, hidden, r, act_sorted, w_down, w_down, y_sorted);
  const WgmmaArgs args{reinterpret_cast<const bf16_t*>(act_sorted),
                       nullptr,
                       K,
                       inter,
                       hidden,
                       (hidden + wg_out_cols(false) - 1) / wg_out_cols(false),
                       {scale2_down, nullptr},
                       r.tiles,
                       r.num_tiles,
                       reinterpret_cast<bf16_t*>(y_sorted)};
  launch_wgmma<false>(what, args, w_down, w_down, T, K, r, stream);
}

void moe_grouped_gate_up_nvfp4_wgmma(const bf16* x, int T, int K, int hidden, const Nvfp4Stack& gate,
                                     const Nvfp4Stack& up, int inter, const MoeRouting& r, bf16* scratch,
                                     int64_t scratch_elems, bf16* act_sorted, cudaStream_t stream) {
  if (T <= 0) return;
  check_nvfp4_scratch("moe_grouped_gate_up_nvfp4_wgmma", r, inter, hidden, 2, scratch, scratch_elems, {&gate, &up});
  const int64_t rows = int64_t(r.experts) * inter;
  bf16* wg = scratch;
  bf16* wu = scratch + rows * hidden;
  nvfp4_dequantize(gate.m, rows, hidden, wg, stream);
  nvfp4_dequantize(up.m, rows, hidden, wu, stream);
  moe_grouped_gate_up_wgmma(x, T, K, hidden, wg, wu, inter, gate.scale2, up.scale2, r, act_sorted, stream);
}

void moe_grouped_down_nvfp4_wgmma(const bf16* act_sorted, int T, int K, int inter, const Nvfp4Stack& down, int hidden,
                                  const MoeRouting& r, bf16* scratch, int64_t scratch_elems, bf16* y_sorted,
                                  cudaStream_t stream) {
  if (T <= 0) return;
  check_nvfp4_scratch("moe_grouped_down_nvfp4_wgmma", r, hidden, inter, 1, scratch, scratch_elems, {&down});
  nvfp4_dequantize(down.m, int64_t(r.experts) * hidden, inter, scratch, stream);
  moe_grouped_down_wgmma(act_sorted, T, K, inter, scratch, hidden, down.scale2, r, y_sorted, stream);
}

}  // namespace striker::cuda
