// Prefill attention on Hopper's warpgroup MMA (wgmma), see attention.h and the layout in
// attention_prefill_wgmma_layout.h. Same work unit, key ranges, masks, rounding points and split
// records as the mma.sync kernel (attention_prefill.cu); per CTA (tile of 16 queries × 8 heads,
// KV head, key split), two warpgroups of 64 rows each:
//   Q fragments in registers; for each 128-key tile of the CTA's key range (a 3-stage cp.async
//   ring, all 256 threads copying, into 128-byte-swizzled shared memory):
//   S = Q·Kᵀ (8 × wgmma m64n128k16, K from shared memory), mask only on boundary tiles, online
//   softmax in fp32 (log2 domain, one fma + ex2 each), P rounded to bf16 in registers, O += P·V
//   (8 × wgmma m64n128k16, V read N-major from shared memory). The sink joins the denominator
//   once at the end (or in the split combine).
// One __syncthreads per key tile: after it, this tile's copies have landed (each thread waited
// for its own and fenced them to the async proxy) and every warpgroup has finished the previous
// tile, whose buffer the next copies overwrite. A named barrier orders the two warpgroups'
// S = Q·Kᵀ (ping-pong), so one's softmax overlaps the other's MMAs.
#include <algorithm>

#include "backends/cuda/attention/attention.h"
#include "backends/cuda/attention/attention_prefill_common.cuh"
#include "backends/cuda/attention/attention_prefill_wgmma_layout.h"
#include "backends/cuda/attention/wgmma_sm90.cuh"
#include "backends/cuda/common/cuda_check.h"
#include "backends/cuda/common/launch.cuh"
#include "backends/cuda/common/tensor_core.cuh"

namespace striker::cuda {
namespace prefill::wg {
namespace {

constexpr int kKeyCols = kKeyTile / 8;  // 8-key column tiles of S
constexpr int kPingPongBarrier = 1;     // named barrier 0 is __syncthreads

__global__ void __launch_bounds__(kThreads, 1) attention_prefill_wgmma_kernel(const PrefillArgs a) {
  pdl_grid_start();  // see launch.cuh
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  // The 128-byte swizzle pattern repeats every 1024 bytes: align the tiles to that (kSmemBytes
  // has the slack) so the descriptors' base offset is 0.
  const uint32_t raw = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
  const uint32_t base = (raw + kSwizzleAtomBytes - 1) & ~uint32_t(kSwizzleAtomBytes - 1);
  unsigned char* smem = smem_raw + (base - raw);
  // Tiles are listed in sequence order, so later tiles of a chunk have more keys: start those first.
  const int tile = a.num_tiles - 1 - int(blockIdx.x);
  const int kvh = blockIdx.y, split = blockIdx.z;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wgi = warp >> 2;
  const int g = row_head(lane);
  const int q0 = a.tiles[2 * tile], n = a.tiles[2 * tile + 1];
  const int p0 = a.positions[q0];
  const int32_t* table = a.block_tables + a.table_offset[q0];
  const KeyRange range = cta_key_range(p0, n, a.window, split, a.chunk);
  const float score_scale = kLog2e / sqrtf(float(kHeadDim));  // as the decode kernels

  // This thread's accumulator rows: head g of tokens tok[0] (row g) and tok[1] (row g + 8).
  const int tok[2] = {row_token(warp, 0), row_token(warp, 1)};
  const KeyInterval vis[2] = {visible_keys(p0 + tok[0], a.window, range), visible_keys(p0 + tok[1], a.window, range)};
  // The warpgroup's rows, for its (uniform) skip and mask decisions.
  const bool wg_has_rows = wg_first_token(wgi) < n;
  const int pos_first = p0 + wg_first_token(wgi), pos_last = p0 + wg_last_token(wgi);

  // Copies key tile [kb, kb + kKeyTile) into stage buf; keys past the range are zero-filled.
  auto stage = [&](int buf, int kb) {
    const int chunk = stage_chunk(tid);
    unsigned char* k_tile = smem + buf * kStageBytes;
#pragma unroll
    for (int i = 0; i < kStagePasses; ++i) {
      const int kk = stage_key(tid, i), key = kb + kk;
      const bool ok = key < range.end;
      int64_t off = 0;
      if (ok) off = kv_row_offset(a, table, key, kvh);
      off += chunk * 8;
      const int at = tile_offset(kk, chunk);
      cp_async16(reinterpret_cast<bf16_t*>(k_tile + at), a.kc + off, ok);
      cp_async16(reinterpret_cast<bf16_t*>(k_tile + kTileBytes + at), a.vc + off, ok);
    }
  };

  float o[kHeadDim / 8][4];
#pragma unroll
  for (int j = 0; j < kHeadDim / 8; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.f;
  float m[2] = {kNegInf, kNegInf}, l[2] = {0.f, 0.f};  // l: this thread's partial row sums

  const int num_kt = range.end > range.begin ? (range.end - range.begin + kKeyTile - 1) / kKeyTile : 0;
  // One cp.async group per key tile (empty past the end), kStages - 1 tiles ahead.
#pragma unroll
  for (int t = 0; t < kStages - 1; ++t) {
    if (t < num_kt) stage(t, range.begin + t * kKeyTile);
    cp_async_commit();
  }
  uint32_t qa[kHeadDim / 16][4];  // Q after the first copies are under way (its loads overlap them)
  load_q_fragments(a, q0, n, kvh, g, lane, tok, qa);
  // Per key tile: one __syncthreads (the tile has landed; the buffer of tile it-1 is free), the
  // copies of tile it+kStages-1 issued while this one's MMAs run, S, mask, softmax, P·V.
  for (int it = 0; it < num_kt; ++it) {
    const int buf = it % kStages;
    cp_async_wait<kStages - 2>();         // this thread's copies of tile `it` have landed,
    wgmma::fence_proxy_async_shared();    // are visible to wgmma's reads,
    __syncthreads();                      // and everyone's are; tile it-1's buffer is free
    const int kb = range.begin + it * kKeyTile;
    const bool active = wg_has_rows && warp_tile_needed(kb, pos_first, pos_last, a.window, kKeyTile);
    const uint32_t k_tile = base + uint32_t(buf * kStageBytes), v_tile = k_tile + kTileBytes;
    float s[kKeyCols][4];
    auto scores = [&] {  // S = Q·Kᵀ
      if (!active) return;
#pragma unroll
      for (int j = 0; j < kKeyCols; ++j) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.f;
      wgmma::fence();
#pragma unroll
      for (int ks = 0; ks < kHeadDim / 16; ++ks)
        wgmma::mma_m64n128k16_rs<0>(s, qa[ks], smem_desc(k_desc_start(k_tile, ks), kKLbo, kSbo), ks > 0 ? 1 : 0);
      wgmma::commit_group();
      wgmma::wait_group<0>();
      wgmma::fence_operands(s);
    };
    auto stage_next = [&] {
      const int next = it + kStages - 1;
      if (next < num_kt) stage(next % kStages, range.begin + next * kKeyTile);
      cp_async_commit();
    };
    // Ping-pong: warpgroup 1 starts its S only when warpgroup 0's is done, so warpgroup 0's
    // softmax overlaps warpgroup 1's MMAs (and warpgroup 1's softmax warpgroup 0's P·V) instead
    // of both warpgroups' softmax leaving the tensor cores idle together. Both meet the named
    // barrier every tile, skipped or not. (Issue and wait stay in one block: split across the
    // `active` branch, ptxas serialises every wgmma.)
    if (wgi == 1) {
      stage_next();
      wgmma::named_barrier_sync(kPingPongBarrier, kThreads);
    }
    scores();
    if (wgi == 0) {
      wgmma::named_barrier_arrive(kPingPongBarrier, kThreads);
      stage_next();
    }
    if (!active) continue;

    if (!tile_unmasked(kb, pos_first, pos_last, a.window, range)) {
#pragma unroll
      for (int j = 0; j < kKeyCols; ++j)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int key = kb + 8 * j + acc_col(lane, i);
          const KeyInterval& v = vis[acc_half(i)];
          if (key < v.lo || key > v.hi) s[j][i] = kNegInf;
        }
    }
    online_softmax_step(s, score_scale, m, l, o);

    uint32_t pa[kKeyTile / 16][4];
#pragma unroll
    for (int kt = 0; kt < kKeyTile / 16; ++kt) pack_p(s, kt, pa[kt]);
    wgmma::fence_operands(o);
    wgmma::fence();
#pragma unroll
    for (int kt = 0; kt < kKeyTile / 16; ++kt)
      wgmma::mma_m64n128k16_rs<1>(o, pa[kt], smem_desc(v_desc_start(v_tile, kt), kVLbo, kSbo), 1);
    wgmma::commit_group();
    wgmma::wait_group<0>();
    wgmma::fence_operands(o);
  }
  cp_async_wait<0>();
  store_rows(a, q0, n, kvh, split, g, lane, tok, m, l, o);
}

}  // namespace
}  // namespace prefill::wg

void prefill_attention_wgmma(const bf16* q, const bf16* k_cache, const bf16* v_cache, const float* sinks,
                             const AttentionShape& s, const AttentionQueries& qs, const PrefillTiles& tiles,
                             const AttentionScratch& scratch, bf16* out, cudaStream_t stream) {
  using namespace prefill;
  PrefillArgs args{};
  if (!plan_prefill(q, k_cache, v_cache, sinks, s, qs, tiles, scratch, out, wg::kKeyTile, args)) return;
  // 193 KiB of dynamic shared memory needs the opt-in. This path is never graph-captured
  // (CudaBackend::forward sends captured steps to paged_attention).
  STRIKER_CUDA_CHECK(cudaFuncSetAttribute(wg::attention_prefill_wgmma_kernel,
                                          cudaFuncAttributeMaxDynamicSharedMemorySize, wg::kSmemBytes));
  launch_pdl(wg::attention_prefill_wgmma_kernel,
             dim3(unsigned(tiles.num_tiles), unsigned(s.n_kv_heads), unsigned(args.num_splits)), dim3(wg::kThreads),
             size_t(wg::kSmemBytes), stream, args);
  STRIKER_CUDA_CHECK_LAUNCH("attention_prefill_wgmma_kernel");
  finish_prefill(args, s, qs, tiles, out, stream);
}

}  // namespace striker::cuda
