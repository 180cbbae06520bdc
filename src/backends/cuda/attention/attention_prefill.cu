// Tensor-core prefill attention (flash-attention style), see attention.h and the tile layout in
// attention_prefill_layout.h: the host checks and split plan both prefill kernels share
// (plan_prefill, finish_prefill), the entry point, and the mma.sync kernel. Per CTA (tile of
// queries, KV head, key split):
//   Q fragments in registers; for each 64-key tile of the CTA's key range (cp.async double
//   buffered into swizzled shared memory): S = Q·Kᵀ (mma.sync m16n8k16), mask (causal, window,
//   split end), online softmax in fp32 (scores in the log2 domain, one fma + exp2 each), O += P·V.
//   The sink joins the denominator once at the end (or in the split combine).
// Rounding: like the decode tensor-core kernel, P is rounded to bf16 for the P·V mma (the
// denominator sums the fp32 P); FLINT.md §4 keeps P in fp32, the difference is within the bf16
// output tolerance (docs/performance.md).
#include <algorithm>
#include <string>

#include "backends/cuda/attention/attention.h"
#include "backends/cuda/attention/attention_prefill_common.cuh"
#include "backends/cuda/attention/attention_prefill_layout.h"
#include "backends/cuda/common/cuda_check.h"
#include "backends/cuda/common/device_math.cuh"
#include "backends/cuda/common/launch.cuh"
#include "backends/cuda/common/tensor_core.cuh"

namespace striker::cuda {
namespace prefill {

constexpr int kDefaultTargetCtas = 1024;

bool plan_prefill(const bf16* q, const bf16* k_cache, const bf16* v_cache, const float* sinks,
                  const AttentionShape& s, const AttentionQueries& qs, const PrefillTiles& tiles,
                  const AttentionScratch& scratch, bf16* out, int key_tile, PrefillArgs& args) {
  static_assert(kTokens == kPrefillTileTokens, "attention.h and the layout disagree on the tile size");
  if (s.head_dim != kHeadDim || s.n_kv_heads <= 0 || s.n_heads != kGroup * s.n_kv_heads)
    throw Error("prefill_attention: only head_dim 128 with 8 query heads per KV head is built (got head_dim " +
                std::to_string(s.head_dim) + ", heads " + std::to_string(s.n_heads) + "/" +
                std::to_string(s.n_kv_heads) + ")");
  if (s.block_size <= 0) throw Error("prefill_attention: bad block size " + std::to_string(s.block_size));
  if (qs.query_ids) throw Error("prefill_attention: query_ids is a paged_attention option; pass tiles instead");
  if (qs.num_queries <= 0 || tiles.num_tiles <= 0) return false;
  if (tiles.query_ids && (tiles.num_queries <= 0 || tiles.num_queries > qs.num_queries))
    throw Error("prefill_attention: " + std::to_string(tiles.num_queries) + " tiled queries of " +
                std::to_string(qs.num_queries));
  if (tiles.num_tiles > qs.num_queries)
    throw Error("prefill_attention: " + std::to_string(tiles.num_tiles) + " tiles for " +
                std::to_string(qs.num_queries) + " queries");
  if (s.n_kv_heads > 65535) throw Error("prefill_attention: too many KV heads for one launch");
  // Keys one CTA may read: a window (or the full prefix) plus the tile's other 15 positions.
  const int64_t keys = std::max<int64_t>(1, int64_t(qs.max_keys) + kTokens - 1);
  const int64_t ctas = int64_t(tiles.num_tiles) * s.n_kv_heads;
  const int64_t target = scratch.target_records > 0 ? scratch.target_records : kDefaultTargetCtas;
  const int64_t per_split = int64_t(qs.num_queries) * s.n_kv_heads;  // records one split needs
  const auto [splits, chunk] =
      plan_key_splits(keys, ctas, target, scratch.data ? scratch.max_partials / per_split : 0, key_tile);
  if (chunk > (int64_t(1) << 30)) throw Error("prefill_attention: key range " + std::to_string(keys) + " too large");
  args = PrefillArgs{reinterpret_cast<const bf16_t*>(q), reinterpret_cast<const bf16_t*>(k_cache),
                     reinterpret_cast<const bf16_t*>(v_cache), sinks, qs.positions, qs.table_offset,
                     qs.block_tables, tiles.tiles, tiles.num_tiles, s.n_kv_heads, s.block_size, s.window,
                     int(chunk), int(splits), splits > 1 ? scratch.data : nullptr,
                     reinterpret_cast<bf16_t*>(out), -1};
  if ((s.block_size & (s.block_size - 1)) == 0)
    for (args.block_shift = 0; (1 << args.block_shift) < s.block_size;) ++args.block_shift;
  return true;
}

void finish_prefill(const PrefillArgs& args, const AttentionShape& s, const AttentionQueries& qs,
                    const PrefillTiles& tiles, bf16* out, cudaStream_t stream) {
  if (args.num_splits > 1)
    attention_combine_splits(args.partials, args.sinks, s, tiles.query_ids ? tiles.num_queries : qs.num_queries,
                             tiles.query_ids, args.num_splits, out, stream);
}

namespace {

__global__ void __launch_bounds__(kThreads, 1) attention_prefill_kernel(const PrefillArgs a) {
  pdl_grid_start();  // see launch.cuh
  extern __shared__ __align__(128) unsigned char smem_raw[];
  bf16_t* k_tiles = reinterpret_cast<bf16_t*>(smem_raw);  // [kStages][kKeyTile][kHeadDim], swizzled
  bf16_t* v_tiles = k_tiles + kStages * kTileElems;
  // Tiles are listed in sequence order, so later tiles of a chunk have more keys: start those first.
  const int tile = a.num_tiles - 1 - int(blockIdx.x);
  const int kvh = blockIdx.y, split = blockIdx.z;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = row_head(lane);
  const int q0 = a.tiles[2 * tile], n = a.tiles[2 * tile + 1];
  const int p0 = a.positions[q0];
  const int32_t* table = a.block_tables + a.table_offset[q0];
  const KeyRange range = cta_key_range(p0, n, a.window, split, a.chunk);
  const float score_scale = kLog2e / sqrtf(float(kHeadDim));  // as the decode kernels

  // This thread's accumulator rows: head g of tokens tok[0] (row g) and tok[1] (row g + 8).
  const int tok[2] = {row_token(warp, 0), row_token(warp, 1)};
  const int pos[2] = {p0 + tok[0], p0 + tok[1]};

  uint32_t qa[kHeadDim / 16][4];
  load_q_fragments(a, q0, n, kvh, g, lane, tok, qa);

  auto stage = [&](int buf, int kb) {
    const int chunk = stage_chunk(tid);
#pragma unroll
    for (int i = 0; i < kStagePasses; ++i) {
      const int kk = stage_key(tid, i), key = kb + kk;
      const bool ok = key < range.end;
      int64_t off = 0;
      if (ok) off = kv_row_offset(a, table, key, kvh);
      off += chunk * 8;
      cp_async16(k_tiles + buf * kTileElems + kv_swizzled(kk, chunk), a.kc + off, ok);
      cp_async16(v_tiles + buf * kTileElems + kv_swizzled(kk, chunk), a.vc + off, ok);
    }
  };

  float o[kHeadDim / 8][4];
#pragma unroll
  for (int j = 0; j < kHeadDim / 8; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.f;
  float m[2] = {kNegInf, kNegInf}, l[2] = {0.f, 0.f};  // l: this thread's partial row sums

  const int num_kt = range.end > range.begin ? (range.end - range.begin + kKeyTile - 1) / kKeyTile : 0;
  const bool warp_has_rows = tok[0] < n;
  if (num_kt > 0) stage(0, range.begin);
  cp_async_commit();
  for (int it = 0; it < num_kt; ++it) {
    const int buf = it & 1;
    if (it + 1 < num_kt) stage(buf ^ 1, range.begin + (it + 1) * kKeyTile);
    cp_async_commit();
    cp_async_wait<1>();  // this thread's copies of tile `it` have landed ...
    __syncthreads();           // ... and everyone's
    const int kb = range.begin + it * kKeyTile;
    if (warp_has_rows && warp_tile_needed(kb, pos[0], pos[1], a.window)) {
      const bf16_t* kt_s = k_tiles + buf * kTileElems;
      const bf16_t* vt_s = v_tiles + buf * kTileElems;
      float s[kKeyTile / 8][4];
#pragma unroll
      for (int j = 0; j < kKeyTile / 8; ++j) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.f;
#pragma unroll
      for (int ks = 0; ks < kHeadDim / 16; ++ks)
#pragma unroll
        for (int np = 0; np < kKeyTile / 16; ++np) {
          uint32_t b[4];
          ldmatrix_x4(b, kt_s + kv_swizzled(k_ldm_key(lane, np), k_ldm_chunk(lane, ks)));
          mma_m16n8k16(s[2 * np], qa[ks], b[0], b[1]);
          mma_m16n8k16(s[2 * np + 1], qa[ks], b[2], b[3]);
        }
#pragma unroll
      for (int j = 0; j < kKeyTile / 8; ++j)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int key = kb + 8 * j + acc_col(lane, i);
          if (!key_visible(key, pos[acc_half(i)], a.window, range)) s[j][i] = kNegInf;
        }
      online_softmax_step(s, score_scale, m, l, o);
#pragma unroll
      for (int kt = 0; kt < kKeyTile / 16; ++kt) {
        uint32_t pa[4];
        pack_p(s, kt, pa);
#pragma unroll
        for (int dp = 0; dp < kHeadDim / 16; ++dp) {
          uint32_t b[4];
          ldmatrix_x4_trans(b, vt_s + kv_swizzled(v_ldm_key(lane, kt), v_ldm_chunk(lane, dp)));
          mma_m16n8k16(o[2 * dp], pa, b[0], b[1]);
          mma_m16n8k16(o[2 * dp + 1], pa, b[2], b[3]);
        }
      }
    }
    __syncthreads();  // the next iteration refills this buffer
  }
  cp_async_wait<0>();
  store_rows(a, q0, n, kvh, split, g, lane, tok, m, l, o);
}

}  // namespace
}  // namespace prefill

void append_prefill_tiles(int first, int count, std::vector<int32_t>& tiles) {
  for (int i = 0; i < count; i += prefill::kTokens) {
    tiles.push_back(first + i);
    tiles.push_back(std::min(prefill::kTokens, count - i));
  }
}

void prefill_attention(const bf16* q, const bf16* k_cache, const bf16* v_cache, const float* sinks,
                       const AttentionShape& s, const AttentionQueries& qs, const PrefillTiles& tiles,
                       const AttentionScratch& scratch, bf16* out, cudaStream_t stream, PrefillKernel kernel) {
  if (kernel == PrefillKernel::kWgmma) {
    prefill_attention_wgmma(q, k_cache, v_cache, sinks, s, qs, tiles, scratch, out, stream);
    return;
  }
  using namespace prefill;
  PrefillArgs args{};
  if (!plan_prefill(q, k_cache, v_cache, sinks, s, qs, tiles, scratch, out, kKeyTile, args)) return;
  // 64 KiB of dynamic shared memory needs the opt-in. This path is never graph-captured
  // (CudaBackend::forward sends captured steps to paged_attention).
  STRIKER_CUDA_CHECK(
      cudaFuncSetAttribute(attention_prefill_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
  launch_pdl(attention_prefill_kernel,
             dim3(unsigned(tiles.num_tiles), unsigned(s.n_kv_heads), unsigned(args.num_splits)), dim3(kThreads),
             size_t(kSmemBytes), stream, args);
  STRIKER_CUDA_CHECK_LAUNCH("attention_prefill_kernel");
  finish_prefill(args, s, qs, tiles, out, stream);
}

}  // namespace striker::cuda
