// NVFP4 grouped expert GEMMs on Hopper with A and B swapped (moe_grouped_wgmma_nvfp4.h): per work
// item (128-token routing tile, block of 256 weight rows) the CTA computes
// outᵀ[weight rows, tokens] = W · Xᵀ with wgmma m64n128k16 (m64n64k16 for tiles of <= 64 tokens),
// A = weights from registers, B = the tile's activation rows from 128B-swizzled shared memory.
// Persistent CTAs, warp-specialised like moe_grouped_wgmma.cu:
//
//   warpgroup 0 (producer): per 64-wide k slice, cp.async of the 128 gathered activation rows
//     (16 KiB, swizzled as TMA would), of the 256 weight rows' raw codes (8 KiB) and scale bytes
//     (1 KiB); once its copies have landed, each thread decodes the scale bytes of its two rows to
//     bf16 (4 KiB of bf16x2 words) — once per row instead of once per consumer lane — and signals
//     "full".
//   warpgroups 1, 2 (consumers): 128 weight rows each, two m64 blocks; per k16 step each thread
//     builds its two A fragments from 2 × 2 code words and 2 × 2 scales (nvfp4_bf16_bits.h:
//     ~30 instructions per block, no shared-memory writes), then issues both blocks' wgmmas as
//     one group. Fragments are double-buffered: step kk+1 is decoded while step kk's group runs
//     (wgmma.wait_group 1 keeps the registers of the running group untouched).
//   epilogue: FLINT.md §4 rounding as moe_grouped_wgmma.cu, from the transposed accumulators
//     (a thread holds one column of 32 tokens; gated: g in d[.][0..1], u of the same column in
//     d[.][2..3]), through a padded 128 × 64 bf16 staging tile per warpgroup so the global
//     stores are 16-byte row chunks.
//
// Why: the scratch route decoded every expert stack into bf16 each step (0.4 GB read, 1.6 GB
// written and re-read per layer at 8K tokens, ~600 µs); an earlier in-kernel decode into the
// swizzled shared B tile was producer-bound (docs/performance.md). Here each weight is decoded in
// registers by the one thread that feeds it to the tensor cores, and the producer only moves
// 4.5x fewer weight bytes than the BF16 kernel.
#include "backends/cuda/moe/moe_grouped_wgmma_nvfp4.h"

#include <algorithm>
#include <string>
#include <type_traits>

#include "backends/cuda/common/cuda_check.h"
#include "backends/cuda/common/launch.cuh"
#include "backends/cuda/common/tensor_core.cuh"
#include "backends/cuda/common/tma_map.h"
#include "backends/cuda/common/warp_dot.cuh"
#include "backends/cuda/common/wgmma.cuh"
#include "backends/cuda/moe/moe_grouped_wgmma.h"
#include "backends/cuda/moe/moe_grouped_wgmma_nvfp4_layout.h"
#include "backends/cuda/nvfp4/nvfp4_bf16_bits.h"

namespace striker::cuda {
namespace {

struct NvArgs {
  const bf16_t* a;             // activations [rows, kdim]
  const int32_t* sorted_slot;  // non-null: activation row of sorted row r is sorted_slot[r] / slots_per_token
  int slots_per_token;
  int kdim;
  int n;                       // output columns (rows per expert of each matrix)
  int col_blocks;
  int experts;
  Nvfp4Matrix w[2];            // gated: gate, up; plain: down twice
  const float* scale2[2];
  const MoeTile* tiles;
  const int32_t* num_tiles;
  bf16_t* out;                 // [T·K, n] in sorted row order
};

// 4-byte global -> shared copy, zero-filled when !full.
__device__ __forceinline__ void cp_async4(void* smem, const void* gmem, bool full) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_u32(smem)), "l"(gmem), "r"(full ? 4 : 0)
               : "memory");
}

// Staged row r (0..255) of the item's weight block: matrix and row of the [E·n, ·] stack, or -1
// past the stack (zero-filled; rows past n inside the stack belong to the next expert and only
// reach columns the epilogue does not store).
template <bool kGated>
__device__ __forceinline__ int64_t stack_row(int r, int b_row0, const NvArgs& args) {
  const int64_t row = int64_t(b_row0) + (kGated ? r % (kNvWRows / 2) : r);
  return row < int64_t(args.experts) * args.n ? row : -1;
}

// The code stacks as TMA maps ([E·n rows, kdim/2 bytes], boxes of 128 rows × 32 bytes = one
// stage's codes of 128 rows): gated, the gate and up stacks; plain, the down stack twice.
struct NvCodeMaps {
  CUtensorMap m[2];
};

template <bool kGated>
__global__ void __launch_bounds__(kNvThreads, 1)
    grouped_nvfp4_kernel(const __grid_constant__ NvCodeMaps maps, const NvArgs args) {
  pdl_grid_start();
  const int items = *args.num_tiles * args.col_blocks;
  if (int(blockIdx.x) >= items) return;

  __shared__ uint64_t full[kNvStages], empty[kNvStages];
  extern __shared__ uint8_t nv_smem[];
  const uint32_t raw = smem_u32(nv_smem);
  uint8_t* ring = nv_smem + (((raw + kSw128AtomBytes - 1) & ~uint32_t(kSw128AtomBytes - 1)) - raw);
  const uint32_t ring_s = smem_u32(ring);

  const int k_tiles = args.kdim / kNvBK;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kNvStages; ++s) {
      mbar_init(&full[s], kNvProducerThreads + 1);  // + thread 0's expect_tx arrival (the code boxes)
      mbar_init(&empty[s], kNvConsumerWarpgroups * 4);
    }
    mbar_fence_init();
    tma_prefetch_map(&maps.m[0]);
    tma_prefetch_map(&maps.m[1]);
  }
  __syncthreads();

  const int warpgroup = __shfl_sync(0xffffffffu, int(threadIdx.x) / 128, 0);
  if (warpgroup == 0) {
    // ---------------- producer ----------------
    warpgroup_reg_dealloc<88>();
    const int t = threadIdx.x;
    const int scale_stride = args.kdim / 16;
    // The thread's scale rows have landed: decode them to bf16 for the consumers, fence the
    // activation tile for wgmma (async proxy), signal.
    auto signal = [&](int g) {
      const int s = g % kNvStages;
#pragma unroll
      for (int p = 0; p < 2; ++p) {
        const int r = nv_scale_row(t, p);
        const uint32_t b = *reinterpret_cast<const uint32_t*>(ring + nv_scales_stage(s) + r * kNvScaleRowBytes);
        uint32_t h[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) h[i] = ue4m3_bf16x2_bits((b >> (8 * i)) & 0xFFu);
        *reinterpret_cast<uint4*>(ring + nv_scales_bf16_stage(s) + r * kNvScaleWordRowBytes) =
            make_uint4(h[0], h[1], h[2], h[3]);
      }
      fence_proxy_async_shared();
      mbar_arrive(&full[s]);
    };
    int g = 0;
    for (int item = blockIdx.x; item < items; item += gridDim.x) {
      const NvItem it = nv_item(item, args.col_blocks);
      const MoeTile tile = args.tiles[it.tile];
      const int rows = tile.rows, first = tile.first;
      const int n0 = it.col_block * nv_out_cols(kGated);
      const int b_row0 = tile.expert * args.n + n0;
      // Per item, once: each copy's source (advanced by one k slice per stage) and whether it
      // reads (rows past the tile or the stack are zero-filled).
      const bf16_t* x_src[kNvXPasses];
      uint32_t x_ok = 0;  // bit p: pass p reads
#pragma unroll
      for (int p = 0; p < kNvXPasses; ++p) {
        const int r = nv_x_row(t, p);
        int row = 0;
        if (r < rows) {
          row = first + r;
          if (args.sorted_slot) row = args.sorted_slot[row] / args.slots_per_token;
          x_ok |= 1u << p;
        }
        x_src[p] = args.a + int64_t(row) * args.kdim + nv_x_chunk(t) * 8;
      }
      const uint8_t* scale_src[2];
      uint32_t scale_ok = 0;
#pragma unroll
      for (int p = 0; p < 2; ++p) {
        const int64_t row = stack_row<kGated>(nv_scale_row(t, p), b_row0, args);
        const Nvfp4Matrix& m = args.w[kGated ? p : 0];
        scale_src[p] = m.scales + (row < 0 ? 0 : row) * scale_stride;
        if (row >= 0) scale_ok |= 1u << p;
      }
      for (int kt = 0; kt < k_tiles; ++kt, ++g) {
        const int s = g % kNvStages;
        if (g >= kNvStages) mbar_wait(&empty[s], uint32_t((g / kNvStages - 1) & 1));
        if (t == 0) {  // the 256 rows' codes: two TMA boxes (rows past the stack read zeros)
          mbar_arrive_expect_tx(&full[s], kNvCodeBytes);
          uint8_t* c_dst = ring + nv_codes_stage(s);
          tma_load_2d(c_dst, &maps.m[0], &full[s], kt * kNvCodeRowBytes, b_row0);
          tma_load_2d(c_dst + (kNvWRows / 2) * kNvCodeRowBytes, &maps.m[1], &full[s], kt * kNvCodeRowBytes,
                      kGated ? b_row0 : b_row0 + kNvWRows / 2);
        }
        uint8_t* x_dst = ring + nv_x_stage(s);
#pragma unroll
        for (int p = 0; p < kNvXPasses; ++p)
          cp_async16(reinterpret_cast<bf16_t*>(x_dst + sw128_offset(nv_x_row(t, p), nv_x_chunk(t))),
                     x_src[p] + kt * kNvBK, (x_ok >> p) & 1u);
#pragma unroll
        for (int p = 0; p < 2; ++p)
          cp_async4(ring + nv_scales_stage(s) + nv_scale_row(t, p) * kNvScaleRowBytes,
                    scale_src[p] + kt * kNvScaleRowBytes, (scale_ok >> p) & 1u);
        cp_async_commit();
        if (g >= kNvLag) {
          cp_async_wait<kNvLag>();
          signal(g - kNvLag);
        }
      }
    }
    cp_async_wait<0>();
    for (int r = g > kNvLag ? g - kNvLag : 0; r < g; ++r) signal(r);
    return;
  }

  // ---------------- consumers ----------------
  warpgroup_reg_alloc<208>();
  const int wg = warpgroup - 1;
  const int t = int(threadIdx.x) % 128;
  const int warp = t / 32, lane = t % 32, f = lane / 4, c = lane % 4;
  const bool releaser = lane == 0;
  // Staged row of the thread's fragment row f in block 0; rows f + 8 and those of block 1 are
  // fixed distances away (immediate offsets: one address register).
  const int wrow0 = nv_frag_wrow(kGated, wg, 0, warp, f);
  constexpr int kHalfRows = nv_frag_wrow(kGated, 0, 0, 0, 8) - nv_frag_wrow(kGated, 0, 0, 0, 0);
  constexpr int kBlockRows = nv_frag_wrow(kGated, 0, 1, 0, 0) - nv_frag_wrow(kGated, 0, 0, 0, 0);
  const uint32_t code_off = uint32_t(wrow0) * kNvCodeRowBytes, scale_off = uint32_t(wrow0) * kNvScaleWordRowBytes;
  int g = 0;
  for (int item = blockIdx.x; item < items; item += gridDim.x) {
    float acc0[16][4], acc1[16][4];
#pragma unroll
    for (int j = 0; j < 16; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc0[j][i] = acc1[j][i] = 0.f;
    wgmma_fence_operands(acc0);
    wgmma_fence_operands(acc1);
    // A tile of at most 64 tokens (an expert's last, or T = 2048's only one) multiplies only B
    // rows 0-63: m64n64, half the tensor work. Warp-uniform (broadcast), two separate loops:
    // ptxas sees no wgmma under divergent control flow.
    const NvItem it = nv_item(item, args.col_blocks);
    const int rows = __shfl_sync(0xffffffffu, args.tiles[it.tile].rows, 0);
    const bool narrow = rows <= 64;
    auto main_loop = [&](auto narrow_tag) {
      constexpr bool kNarrow = decltype(narrow_tag)::value;
      uint32_t frag[2][2][4];  // [buffer][block][register]
      for (int kt = 0; kt < k_tiles; ++kt, ++g) {
        const int s = g % kNvStages;
        mbar_wait(&full[s], uint32_t((g / kNvStages) & 1));
        const uint8_t* codes = ring + nv_codes_stage(s) + code_off;
        const uint8_t* scales = ring + nv_scales_bf16_stage(s) + scale_off;
#pragma unroll
        for (int kk = 0; kk < kNvBK / 16; ++kk) {
          // Buffer kk % 2 was last read by the group of step kk - 2, retired by the wait below at
          // step kk - 1: step kk is decoded while step kk - 1's group runs.
          uint32_t(&fr)[2][4] = frag[kk % 2];
#pragma unroll
          for (int mb = 0; mb < 2; ++mb) {
            const uint8_t* cr = codes + mb * kBlockRows * kNvCodeRowBytes + kk * 8;
            const uint8_t* sr = scales + mb * kBlockRows * kNvScaleWordRowBytes + kk * 4;
            const uint2 wa = *reinterpret_cast<const uint2*>(cr);
            const uint2 wb = *reinterpret_cast<const uint2*>(cr + kHalfRows * kNvCodeRowBytes);
            const uint32_t sa = *reinterpret_cast<const uint32_t*>(sr);
            const uint32_t sb = *reinterpret_cast<const uint32_t*>(sr + kHalfRows * kNvScaleWordRowBytes);
            nvfp4_a_fragment(wa.x, wa.y, wb.x, wb.y, sa, sb, c, fr[mb]);
          }
          wgmma_fence();
          const uint64_t desc = wgmma_desc_sw128(ring_s + nv_x_stage(s) + uint32_t(kk) * 32);
          if constexpr (kNarrow) {  // n8 blocks 0-7 of the accumulators: tokens 0-63
            wgmma_m64n64k16_bf16_rs<0>(reinterpret_cast<float(&)[8][4]>(acc0), fr[0], desc, 1);
            wgmma_m64n64k16_bf16_rs<0>(reinterpret_cast<float(&)[8][4]>(acc1), fr[1], desc, 1);
          } else {
            wgmma_m64n128k16_bf16_rs<0>(acc0, fr[0], desc, 1);
            wgmma_m64n128k16_bf16_rs<0>(acc1, fr[1], desc, 1);
          }
          wgmma_commit();
          wgmma_wait<1>();  // step kk - 1's group has completed
          // At kk = 0 that was the previous stage's last group: release it.
          if (kk == 0 && kt > 0 && releaser) mbar_arrive(&empty[(g - 1) % kNvStages]);
        }
      }
    };
    if (narrow) main_loop(std::true_type{});
    else main_loop(std::false_type{});
    wgmma_wait<0>();
    wgmma_fence_operands(acc0);
    wgmma_fence_operands(acc1);
    if (releaser) mbar_arrive(&empty[(g - 1) % kNvStages]);

    // The item's tile is read only now: nothing but `item` stays live across the main loop.
    const MoeTile tile = args.tiles[it.tile];
    const int first = tile.first;
    const int n0 = it.col_block * nv_out_cols(kGated);
    const float s0 = __ldg(args.scale2[0] + tile.expert);
    const float s1 = kGated ? __ldg(args.scale2[1] + tile.expert) : s0;
    // Register (j, e) of row half h is token 8j + 2c + e of fragment row f + 8h. The values go to
    // the warpgroup's staging tile column-wise, then out as 16-byte row chunks: thread t copies
    // chunk t % 8 of tokens t / 8 + 16 i.
    uint8_t* epi = ring + nv_epi_offset(wg);
    auto stage_out = [&](int col0) {
      named_barrier_sync(1 + wg, 128);  // the staging tile's writes are complete
      const int q = t % 8;
      const int col = n0 + col0 + 8 * q;
#pragma unroll
      for (int i = 0; i < kNvTokens * 8 / 128; ++i) {
        const int tok = t / 8 + 16 * i;
        const uint4 v = *reinterpret_cast<const uint4*>(epi + tok * kNvEpiPitch + q * 16);
        if (tok < rows && col < args.n)  // n % 8 == 0: a chunk is inside or outside as a whole
          *reinterpret_cast<uint4*>(args.out + int64_t(first + tok) * args.n + col) = v;
      }
      named_barrier_sync(1 + wg, 128);  // read back before the next pass overwrites it
    };
    auto put = [&](int tok, int col, float v) {
      *reinterpret_cast<bf16_t*>(epi + tok * kNvEpiPitch + col * 2) = __float2bfloat16_rn(v);
    };
    // Block mb's values into the staging tile.
    auto put_block = [&](const float (&acc)[16][4], int mb) {
      if constexpr (kGated) {
        const int col = nv_epi_col(true, mb, warp, f);
#pragma unroll
        for (int j = 0; j < 16; ++j)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const float gv = round_bf16(acc[j][e] * s0);
            const float uv = round_bf16(acc[j][2 + e] * s1);
            put(8 * j + 2 * c + e, col, silu_bf16(gv) * uv);
          }
      } else {
        const int col = nv_epi_col(false, mb, warp, f);  // row half 1: col + 8
#pragma unroll
        for (int j = 0; j < 16; ++j)
#pragma unroll
          for (int i = 0; i < 4; ++i) put(8 * j + 2 * c + i % 2, col + 8 * (i / 2), acc[j][i] * s0);
      }
    };
    put_block(acc0, 0);
    if (!kGated) stage_out(nv_epi_col0(false, wg, 0));  // plain: 64 columns per block
    put_block(acc1, 1);
    stage_out(nv_epi_col0(kGated, wg, 1));  // gated: both blocks' 64 columns at once
  }
}

void check_args(const char* what, int T, int K, int kdim, int n, const MoeRouting& r, const void* a,
                std::initializer_list<const Nvfp4Stack*> stacks, const void* out) {
  auto fail = [&](const std::string& why) { throw Error(std::string(what) + ": " + why); };
  if (kdim <= 0 || kdim % 64 != 0) fail("NVFP4 reduction width " + std::to_string(kdim) + " is not a positive multiple of 64");
  if (n <= 0 || n % 8 != 0) fail("output width " + std::to_string(n) + " is not a positive multiple of 8");
  if (r.tile_rows != kNvTokens)
    fail("the routing was sorted with tile_rows " + std::to_string(r.tile_rows) + ", this path needs " +
         std::to_string(kNvTokens));
  if (r.experts <= 0 || r.experts > kMoeMaxExperts)
    fail(std::to_string(r.experts) + " experts (1.." + std::to_string(kMoeMaxExperts) + " supported)");
  if (K <= 0 || int64_t(T) * K > (int64_t(1) << 30)) fail("bad routing size T=" + std::to_string(T));
  if (int64_t(r.experts) * n > (int64_t(1) << 31) - kNvWRows) fail("expert stack too tall for TMA coordinates");
  if (reinterpret_cast<uintptr_t>(a) % 16 != 0 || reinterpret_cast<uintptr_t>(out) % 16 != 0)
    fail("activations and outputs must be 16-byte aligned");
  for (const Nvfp4Stack* s : stacks) {
    if (!s->m.codes || !s->m.scales || !s->scale2) fail("NVFP4 stack with a null codes, scales or scale2 pointer");
    if (reinterpret_cast<uintptr_t>(s->m.codes) % 16 != 0 || reinterpret_cast<uintptr_t>(s->m.scales) % 4 != 0)
      fail("NVFP4 codes must be 16-byte and scales 4-byte aligned");
  }
}

template <bool kGated>
void launch(const char* what, const NvArgs& args, int T, int K, const MoeRouting& r, cudaStream_t stream) {
  const int64_t stack_rows = int64_t(args.experts) * args.n;
  auto map = [&](const Nvfp4Matrix& m) {
    return make_tma_map_u8(m.codes, stack_rows, args.kdim / 2, kNvWRows / 2, kNvCodeRowBytes, what);
  };
  const NvCodeMaps maps{{map(args.w[0]), map(args.w[1])}};
  auto* kernel = grouped_nvfp4_kernel<kGated>;
  static const bool ready = allow_dynamic_smem(kernel, int(kNvSmemBytes));
  (void)ready;
  int device = 0, sms = 0;
  STRIKER_CUDA_CHECK(cudaGetDevice(&device));
  STRIKER_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const int64_t items = moe_max_tiles(int64_t(T) * K, r.experts, r.tile_rows) * args.col_blocks;
  if (items > (int64_t(1) << 31) - 1) throw Error(std::string(what) + ": too many tiles for one launch");
  const int64_t ctas = std::min<int64_t>(items, std::max(sms, 1));
  launch_pdl(kernel, dim3(unsigned(ctas)), dim3(kNvThreads), size_t(kNvSmemBytes), stream, maps, args);
  STRIKER_CUDA_CHECK_LAUNCH(what);
}

NvArgs make_args(const bf16* a, const int32_t* sorted_slot, int K, int kdim, int n, bool gated, const Nvfp4Stack& w0,
                 const Nvfp4Stack& w1, const MoeRouting& r, bf16* out) {
  return NvArgs{reinterpret_cast<const bf16_t*>(a),
                sorted_slot,
                K,
                kdim,
                n,
                (n + nv_out_cols(gated) - 1) / nv_out_cols(gated),
                r.experts,
                {w0.m, w1.m},
                {w0.scale2, w1.scale2},
                r.tiles,
                r.num_tiles,
                reinterpret_cast<bf16_t*>(out)};
}

}  // namespace

void moe_grouped_gate_up_nvfp4_direct(const bf16* x, int T, int K, int hidden, const Nvfp4Stack& gate,
                                      const Nvfp4Stack& up, int inter, const MoeRouting& r, bf16* act_sorted,
                                      cudaStream_t stream) {
  if (T <= 0) return;
  constexpr const char* what = "moe_grouped_gate_up_nvfp4_direct";
  check_args(what, T, K, hidden, inter, r, x, {&gate, &up}, act_sorted);
  launch<true>(what, make_args(x, r.sorted_slot, K, hidden, inter, true, gate, up, r, act_sorted), T, K, r, stream);
}

void moe_grouped_down_nvfp4_direct(const bf16* act_sorted, int T, int K, int inter, const Nvfp4Stack& down,
                                   int hidden, const MoeRouting& r, bf16* y_sorted, cudaStream_t stream) {
  if (T <= 0) return;
  constexpr const char* what = "moe_grouped_down_nvfp4_direct";
  check_args(what, T, K, inter, hidden, r, act_sorted, {&down}, y_sorted);
  launch<false>(what, make_args(act_sorted, nullptr, K, inter, hidden, false, down, down, r, y_sorted), T, K, r,
                stream);
}

}  // namespace striker::cuda
