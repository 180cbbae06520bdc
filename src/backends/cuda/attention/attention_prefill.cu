// Prefill attention on Hopper's warpgroup MMA (wgmma), see attention.h and the tile layout in
// attention_prefill_layout.h. Per CTA (tile of 16 queries × 8 heads, KV head, key split), a
// producer warpgroup and two consumer warpgroups of 64 rows each (FA3's structure):
//   the producer loads each 128-key K/V tile of the CTA's key range from the paged cache
//   (through the block table; whole cache blocks by TMA, the rest by cp.async) into a 3-stage
//   ring of 128-byte-swizzled shared memory and publishes it on the stage's `full` mbarrier;
//   the consumers compute S = Q·Kᵀ (8 × wgmma m64n128k16, Q from registers, K from shared
//   memory), mask only on boundary tiles, run the online softmax in fp32 (log2 domain, one fma +
//   ex2 each), round P to bf16 in registers and accumulate O += P·V (8 × wgmma m64n128k16, V
//   read N-major), releasing the stage on its `empty` mbarrier. S of tile j+1 is issued with
//   P·V of tile j, so a warpgroup's softmax runs while its previous P·V is in the tensor cores,
//   and the two consumer warpgroups take turns to issue (ping-pong), so one's softmax overlaps
//   the other's MMAs. The sink joins the denominator once at the end (or in the split combine).
// Work items (query tile, KV head, key split) are one per CTA on causal layers; on sliding-window
// layers one CTA per SM strides over them, its ring running on from one item into the next.
// Rounding: like the decode tensor-core kernel, P is rounded to bf16 for the P·V MMA (the
// denominator sums the fp32 P); FLINT.md §4 keeps P in fp32, the difference is within the bf16
// output tolerance (docs/performance.md).
#include <algorithm>
#include <string>

#include "backends/cuda/attention/attention.h"
#include "backends/cuda/attention/attention_prefill_layout.h"
#include "backends/cuda/common/cuda_check.h"
#include "backends/cuda/common/device_math.cuh"
#include "backends/cuda/common/launch.cuh"
#include "backends/cuda/common/tma_map.h"
#include "backends/cuda/common/tensor_core.cuh"
#include "backends/cuda/common/wgmma.cuh"

namespace striker::cuda {
namespace prefill {
namespace {

constexpr float kNegInf = -__builtin_huge_valf();
constexpr float kLog2e = 1.4426950408889634f;

struct PrefillArgs {
  const bf16_t* q;
  const bf16_t* kc;
  const bf16_t* vc;
  const float* sinks;            // [n_heads] or nullptr
  const int32_t* positions;      // [NQ]
  const int32_t* table_offset;   // [NQ]
  const int32_t* block_tables;
  const int32_t* tiles;          // [num_tiles][2]: first query, count
  int num_tiles, nkv, block_size, window, chunk, num_splits;
  int items;                     // num_tiles · nkv · num_splits
  float* partials;               // split records, or nullptr: normalise and write `out` here
  bf16_t* out;
  int block_shift;               // log2(block_size) when a power of two (shifts, not divisions), else -1
  bool tma;                      // KvMaps are valid: block_size is a multiple of 8 dividing kKeyTile
};

// TMA views of the K and V caches for the warp-specialised kernel: rows of kHeadDim bf16 (row
// (block·nkv + kvh)·block_size + slot), boxes of block_size rows × 64 dims into the
// 128B-swizzled tiles, so one block's keys of one 64-dim half are one TMA load.
struct KvMaps {
  CUtensorMap k, v;
};

// 2^(m_old - m_new), taking an empty state (m_old = -inf) to a zero weight instead of NaN.
__device__ __forceinline__ float rescale(float m_old, float m_new) {
  return m_old == kNegInf ? 0.f : exp2f(m_old - m_new);
}

// Element offset of key `key`'s row (KV head kvh) in the paged cache, through the sequence's
// block table.
__device__ __forceinline__ int64_t kv_row_offset(const PrefillArgs& a, const int32_t* table, int key, int kvh) {
  int blk, in;
  if (a.block_shift >= 0) {
    blk = key >> a.block_shift;
    in = key & ((1 << a.block_shift) - 1);
  } else {
    blk = key / a.block_size;
    in = key - blk * a.block_size;
  }
  return ((int64_t(table[blk]) * a.nkv + kvh) * a.block_size + in) * kHeadDim;
}

// Q rows of this thread (head g of tokens tok[0], tok[1]) as the A operand of the 8 k steps
// (the mma.sync m16n8k16 A fragment layout, which is wgmma's register A layout); zeros past n.
__device__ __forceinline__ void load_q_fragments(const PrefillArgs& a, int q0, int n, int kvh, int g, int lane,
                                                 const int (&tok)[2], uint32_t (&qa)[kHeadDim / 16][4]) {
  const int nh = a.nkv * kGroup;
#pragma unroll
  for (int ks = 0; ks < kHeadDim / 16; ++ks)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int t = tok[q_frag_half(i)];
      qa[ks][i] = 0u;
      if (t < n) {
        const bf16_t* src = a.q + (int64_t(q0 + t) * nh + kvh * kGroup + g) * kHeadDim + q_frag_dim(lane, ks, i);
        qa[ks][i] = __ldg(reinterpret_cast<const unsigned int*>(src));
      }
    }
}

// 2^x in one MUFU.EX2 (ex2.approx.ftz; exp2f's non-ftz form adds denormal fix-ups around it).
// 2^-inf = +0; results below 2^-126 flush to 0, far under P's bf16 rounding.
__device__ __forceinline__ float exp2_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// One online-softmax step over NT 8-key column tiles of raw scores s (Q·K, masked keys = -inf):
// new row maxima m (log2 domain: score · scale, scale = log2(e)/sqrt(d)), P = 2^(s·scale - m)
// in place with the scale folded into one fma, the running sums l (this thread's columns only)
// and the factor corr by which the accumulators must be rescaled (rescale_o_if_moved, once the
// previous P·V has completed: this part runs while it is still in the tensor cores). m is exactly the
// maximum of the rounded scaled scores (rounding is monotonic), as when the scores are scaled
// first. Masked keys give 2^-inf = 0 without a branch: a row with no visible key yet (m = -inf)
// subtracts 0 instead of m.
template <int NT>
__device__ __forceinline__ void softmax_scores(float (&s)[NT][4], float scale, float (&m)[2], float (&l)[2],
                                               float (&corr)[2]) {
  float mx[2] = {kNegInf, kNegInf};
#pragma unroll
  for (int j = 0; j < NT; ++j)
#pragma unroll
    for (int i = 0; i < 4; ++i) mx[acc_half(i)] = fmaxf(mx[acc_half(i)], s[j][i]);
  float rs[2] = {0.f, 0.f};
#pragma unroll
  for (int h = 0; h < 2; ++h) {  // the 4 threads of a group hold one row's columns
    mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
    mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
    mx[h] = fmaxf(m[h], mx[h] * scale);
    corr[h] = rescale(m[h], mx[h]);
    m[h] = mx[h];
    mx[h] = mx[h] == kNegInf ? 0.f : mx[h];
  }
#pragma unroll
  for (int j = 0; j < NT; ++j)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int h = acc_half(i);
      s[j][i] = exp2_ftz(fmaf(s[j][i], scale, -mx[h]));
      rs[h] += s[j][i];
    }
  l[0] = l[0] * corr[0] + rs[0];
  l[1] = l[1] * corr[1] + rs[1];
}

__device__ __forceinline__ void rescale_o(float (&o)[kHeadDim / 8][4], const float (&corr)[2]) {
#pragma unroll
  for (int j = 0; j < kHeadDim / 8; ++j) {
    o[j][0] *= corr[0];
    o[j][1] *= corr[0];
    o[j][2] *= corr[1];
    o[j][3] *= corr[1];
  }
}

// rescale_o only when some row of the warp has a new maximum (corr != 1): × 1 is exact, so
// skipping it is bit-identical, and over a long prefix the running maxima rarely move. The
// branch is warp-uniform.
__device__ __forceinline__ void rescale_o_if_moved(float (&o)[kHeadDim / 8][4], const float (&corr)[2]) {
  if (__any_sync(0xffffffffu, corr[0] != 1.f || corr[1] != 1.f)) rescale_o(o, corr);
}

// P of k step kt (keys 16kt..16kt+15) as a bf16 A operand: the S accumulators of column tiles
// 2kt and 2kt+1 (p_reg_tile / p_reg_elem), each pair rounded to nearest-even by one
// cvt.rn.bf16x2 (the same rounding as pack_bf16x2, in one instruction instead of four).
template <int NT>
__device__ __forceinline__ void pack_p(const float (&s)[NT][4], int kt, uint32_t (&pa)[4]) {
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const __nv_bfloat162 v =
        __floats2bfloat162_rn(s[p_reg_tile(kt, r)][p_reg_elem(r)], s[p_reg_tile(kt, r)][p_reg_elem(r) + 1]);
    pa[r] = *reinterpret_cast<const uint32_t*>(&v);
  }
}

// Epilogue of this thread's two rows: a split record (m, l, unnormalised o) as
// attention_combine_kernel reads it, or, with the whole key range in this CTA, the sink added
// to the denominator and the normalised bf16 output.
__device__ __forceinline__ void store_rows(const PrefillArgs& a, int q0, int n, int kvh, int split, int g, int lane,
                                           const int (&tok)[2], float (&m)[2], float (&l)[2],
                                           const float (&o)[kHeadDim / 8][4]) {
  const int nh = a.nkv * kGroup;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
  }
  const int c2 = acc_col(lane, 0);  // this thread's first column in each 8-dim n tile
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    if (tok[h] >= n) continue;
    const int64_t qi = q0 + tok[h];
    if (a.partials) {
      float* rec = a.partials + ((qi * a.nkv + kvh) * a.num_splits + split) * (kGroup * (kHeadDim + 2));
      if ((lane & 3) == 0) {
        rec[2 * g] = m[h];
        rec[2 * g + 1] = l[h];
      }
      float* acc = rec + 2 * kGroup + g * kHeadDim;
#pragma unroll
      for (int j = 0; j < kHeadDim / 8; ++j)
        *reinterpret_cast<float2*>(acc + 8 * j + c2) = make_float2(o[j][2 * h], o[j][2 * h + 1]);
    } else {
      const float sink = a.sinks ? a.sinks[kvh * kGroup + g] * kLog2e : kNegInf;
      const float mf = fmaxf(m[h], sink);  // finite: the query's own key is in range
      const float cm = rescale(m[h], mf);
      const float f = cm / (l[h] * cm + rescale(sink, mf));
      bf16_t* dst = a.out + (qi * nh + kvh * kGroup + g) * kHeadDim;
#pragma unroll
      for (int j = 0; j < kHeadDim / 8; ++j)
        *reinterpret_cast<uint32_t*>(dst + 8 * j + c2) = pack_bf16x2(o[j][2 * h] * f, o[j][2 * h + 1] * f);
    }
  }
}

constexpr int kDefaultTargetCtas = 1024;

// Checks the arguments (throws striker::Error) and plans the key splits; false when there is
// nothing to do.
bool plan_prefill(const bf16* q, const bf16* k_cache, const bf16* v_cache, const float* sinks,
                  const AttentionShape& s, const AttentionQueries& qs, const PrefillTiles& tiles,
                  const AttentionScratch& scratch, bf16* out, PrefillArgs& args) {
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
      plan_key_splits(keys, ctas, target, scratch.data ? scratch.max_partials / per_split : 0);
  if (chunk > (int64_t(1) << 30)) throw Error("prefill_attention: key range " + std::to_string(keys) + " too large");
  const int64_t items = ctas * splits;
  if (items > (int64_t(1) << 31) - 1) throw Error("prefill_attention: too many work items for one launch");
  args = PrefillArgs{reinterpret_cast<const bf16_t*>(q), reinterpret_cast<const bf16_t*>(k_cache),
                     reinterpret_cast<const bf16_t*>(v_cache), sinks, qs.positions, qs.table_offset,
                     qs.block_tables, tiles.tiles, tiles.num_tiles, s.n_kv_heads, s.block_size, s.window,
                     int(chunk), int(splits), int(items), splits > 1 ? scratch.data : nullptr,
                     reinterpret_cast<bf16_t*>(out), -1, false};
  if ((s.block_size & (s.block_size - 1)) == 0)
    for (args.block_shift = 0; (1 << args.block_shift) < s.block_size;) ++args.block_shift;
  return true;
}

constexpr int kKeyCols = kKeyTile / 8;  // 8-key column tiles of S

// Copies keys kb + first .. kb + kKeyTile - 1 of K and V into the stage at `k_tile` (V
// kTileBytes after K), by producer thread tid; keys past the range are zero-filled.
__device__ __forceinline__ void stage_tile(const PrefillArgs& a, const int32_t* table, KeyRange range, int kvh,
                                           unsigned char* k_tile, int kb, int tid, int first = 0) {
  // Unrolled by 4 only: the producer runs on kProducerRegs registers, and fully unrolled, ptxas
  // hoists every pass's addressing out of the loop and spills it.
  const int chunk = stage_chunk(tid);
#pragma unroll 4
  for (int i = 0; i < kProducerPasses; ++i) {
    const int kk = stage_key(tid, i), key = kb + kk;
    if (kk < first) continue;  // loaded by TMA
    const bool ok = key < range.end;
    int64_t off = 0;
    if (ok) off = kv_row_offset(a, table, key, kvh);
    off += chunk * 8;
    const int at = tile_offset(kk, chunk);
    cp_async16(reinterpret_cast<bf16_t*>(k_tile + at), a.kc + off, ok);
    cp_async16(reinterpret_cast<bf16_t*>(k_tile + kTileBytes + at), a.vc + off, ok);
  }
}

// Masks the scores of key tile kb (keys outside each row's visible interval become -inf; select,
// never ×0) unless the tile is visible to every row of the warpgroup.
__device__ __forceinline__ void mask_tile(float (&s)[kKeyCols][4], int kb, int lane, const KeyInterval (&vis)[2],
                                          bool unmasked) {
  if (unmasked) return;
#pragma unroll
  for (int j = 0; j < kKeyCols; ++j)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int key = kb + 8 * j + acc_col(lane, i);
      const KeyInterval& v = vis[acc_half(i)];
      if (key < v.lo || key > v.hi) s[j][i] = kNegInf;
    }
}

// S = Q·Kᵀ of one warpgroup into s (issued, committed as one group; the caller waits).
__device__ __forceinline__ void issue_scores(float (&s)[kKeyCols][4], const uint32_t (&qa)[kHeadDim / 16][4],
                                             uint32_t k_tile) {
#pragma unroll
  for (int j = 0; j < kKeyCols; ++j) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.f;
  wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < kHeadDim / 16; ++ks) wgmma_m64n128k16_bf16_rs<0>(s, qa[ks], k_desc(k_tile, ks), ks > 0 ? 1 : 0);
  wgmma_commit();
}

// O += P·V of one warpgroup (issued, committed as one group; the caller waits). The caller
// pins o (wgmma_fence_operands) before the first wgmma of the pipeline stage: touching o between
// S's issue and this one would make ptxas serialise the wgmmas.
__device__ __forceinline__ void issue_values(float (&o)[kHeadDim / 8][4], const uint32_t (&pa)[kKeyTile / 16][4],
                                             uint32_t v_tile) {
  wgmma_fence();
#pragma unroll
  for (int kt = 0; kt < kKeyTile / 16; ++kt) wgmma_m64n128k16_bf16_rs<1>(o, pa[kt], v_desc(v_tile, kt), 1);
  wgmma_commit();
}

// Warpgroup 0 is the producer (setmaxnreg down to kProducerRegs), warpgroups 1 and 2 the
// consumers; no CTA-wide barrier in the loop. Turns (named barriers kTurnBarrier + consumer
// warpgroup): a warpgroup waits for its turn, issues its wgmma groups, hands the turn to the
// other and only then waits for completion, so the tensor cores run one warpgroup's MMAs right
// behind the other's (ordered by issue, not completion). Within a warpgroup, S of tile j+1 is
// issued together with P·V of tile j (the P registers of tile j stay live across it).
constexpr int kProducerRegs = 24;   // 24·128 + 240·256 = 64512 = the 168·384 the CTA launched with
constexpr int kConsumerRegs = 240;
constexpr int kTurnBarrier = 1;     // + consumer warpgroup index (named barrier 0 is __syncthreads)

__global__ void __launch_bounds__(kCtaThreads, 1)
    attention_prefill_kernel(const __grid_constant__ KvMaps maps, const PrefillArgs a) {
  pdl_grid_start();  // see launch.cuh
  __shared__ uint64_t full[kStages], empty[kStages];
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t raw = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
  const uint32_t base = (raw + kSw128AtomBytes - 1) & ~uint32_t(kSw128AtomBytes - 1);
  unsigned char* smem = smem_raw + (base - raw);
  // Work items (query tile, KV head, key split), item = x + num_tiles·(kvh + nkv·split) with the
  // query tile num_tiles - 1 - x (the longest first); CTA b takes items b, b + grid, ... (one
  // each when the grid is the item count).
  struct Item {
    int kvh, split, q0, n, p0, tile0, num_kt;
    KeyRange range;
  };
  auto item_at = [&](int item) {
    Item w;
    const int tile = a.num_tiles - 1 - item % a.num_tiles, rest = item / a.num_tiles;
    w.kvh = rest % a.nkv;
    w.split = rest / a.nkv;
    w.q0 = a.tiles[2 * tile];
    w.n = a.tiles[2 * tile + 1];
    w.p0 = a.positions[w.q0];
    w.range = cta_key_range(w.p0, w.n, a.window, w.split, a.chunk);
    // Key tiles start at tile0: with TMA, the range's start rounded down to a cache block (the keys
    // before range.begin are masked like any invisible key, and they are finite: earlier slots of
    // a block the sequence reaches), so every tile is whole blocks; otherwise at range.begin.
    w.tile0 = a.tma ? w.range.begin & ~(a.block_size - 1) : w.range.begin;
    w.num_kt = w.range.end > w.range.begin ? (w.range.end - w.tile0 + kKeyTile - 1) / kKeyTile : 0;
    return w;
  };
  if (threadIdx.x == 0) {
    for (int st = 0; st < kStages; ++st) {
      mbar_init(&full[st], kProducerThreads);
      mbar_init(&empty[st], kThreads / 32);  // one arrival per consumer warp
    }
    mbar_fence_init();
  }
  __syncthreads();
  // Warpgroup index broadcast from lane 0: provably warp-uniform, so ptxas does not treat the
  // wgmma paths as divergent (it would serialise them).
  const int warpgroup = __shfl_sync(0xffffffffu, int(threadIdx.x) / 128, 0);

  if (warpgroup == 0) {
    // ---------------- producer ----------------
    warpgroup_reg_dealloc<kProducerRegs>();
    const int tid = threadIdx.x;
    // The CTA's tiles are numbered across its items (gt): tile gt goes to stage gt % kStages once
    // the consumers released that stage's previous tile, so the ring runs on from one item into
    // the next (the next item's first tiles load while the consumers finish the previous one).
    // TMA (block size a multiple of 8 dividing the key tile; tiles start on block boundaries,
    // tile0): the whole blocks of a tile that end inside the range are TMA boxes (producer
    // thread 2j + h: block j, 64-dim half h, K and V), their bytes expected on the stage's full
    // barrier; the keys of the block the range ends in, and keys past the range, are cp.async
    // (zero-filled: a box would bring in stale or NaN slots, and 0 × NaN is NaN in P·V), waited
    // for at once (only a range's last tile has any). Each thread then arrives.
    // Otherwise, cp.async only: a tile is published as soon as it has landed (before blocking
    // on a stage's release everything issued is waited for and published; while the ring is
    // first filled, tile it - 1 is published as tile it streams in).
    const int bs = a.block_size;
    const bool tma = a.tma;
    int published = 0, gt = 0;
    auto publish_up_to = [&](int end) {
      fence_proxy_async_shared();  // this thread's landed copies, visible to wgmma
      for (; published < end; ++published) mbar_arrive(&full[published % kStages]);
    };
    for (int item = int(blockIdx.x); item < a.items; item += int(gridDim.x)) {
      const Item w = item_at(item);
      const KeyRange range = w.range;
      const int kvh = w.kvh;
      const int32_t* table = a.block_tables + a.table_offset[w.q0];
      for (int it = 0; it < w.num_kt; ++it, ++gt) {
        const int st = gt % kStages;
        unsigned char* k_tile = smem + st * kStageBytes;
        const int kb = w.tile0 + it * kKeyTile;
        if (gt >= kStages) {
          if (!tma) {
            cp_async_wait<0>();
            publish_up_to(gt);
          }
          mbar_wait(&empty[st], uint32_t((gt / kStages - 1) & 1));
        }
        if (tma) {
          const int whole = min(max(range.end - kb, 0) / bs, kKeyTile / bs);  // whole blocks in range
          if (tid == 0 && whole > 0) mbar_expect_tx(&full[st], uint32_t(whole * bs * 2 * kHeadDim * 2));
          if (tid < whole * 2) {  // block tid / 2 (at most 16), 64-dim half tid % 2, K and V
            const int j = tid >> 1, half = tid & 1;
            const int row = (table[(kb >> a.block_shift) + j] * a.nkv + kvh) * bs;  // bs: a power of two
            unsigned char* dst = k_tile + half * kHalfBytes + j * bs * kSw128RowBytes;
            tma_load_2d(dst, &maps.k, &full[st], half * kSw128RowElems, row);
            tma_load_2d(dst + kTileBytes, &maps.v, &full[st], half * kSw128RowElems, row);
          }
          stage_tile(a, table, range, kvh, k_tile, kb, tid, whole * bs);
          cp_async_commit();
          cp_async_wait<0>();
          fence_proxy_async_shared();
          mbar_arrive(&full[st]);
          published = gt + 1;
        } else {
          stage_tile(a, table, range, kvh, k_tile, kb, tid);
          cp_async_commit();
          if (gt >= 1 && gt < kStages) {
            cp_async_wait<1>();
            publish_up_to(gt);
          }
        }
      }
    }
    cp_async_wait<0>();
    publish_up_to(gt);
    return;
  }

  // ---------------- consumers ----------------
  warpgroup_reg_alloc<kConsumerRegs>();
  const int ctid = int(threadIdx.x) - kProducerThreads;
  const int lane = ctid & 31, warp = ctid >> 5, wgi = warpgroup - 1;
  const int g = row_head(lane);
  const float score_scale = kLog2e / sqrtf(float(kHeadDim));  // as the decode kernels
  const int tok[2] = {row_token(warp, 0), row_token(warp, 1)};

  // Every tile is computed by both warpgroups (no per-warpgroup skip: issue and wait of a group
  // must stay in one block, and a tile no row of a warpgroup sees — only in chunk tails of <= 8
  // queries — is fully masked, P = 0). Turns: warpgroup 1 hands warpgroup 0 its first turn; they
  // alternate from then on across the CTA's items (an item's first turn is warpgroup 0's).
  auto turn_wait = [&] { named_barrier_sync(kTurnBarrier + wgi, kThreads); };
  auto turn_pass = [&] { named_barrier_arrive(kTurnBarrier + (1 - wgi), kThreads); };
  auto release = [&](int it) {
    if (lane == 0) mbar_arrive(&empty[it % kStages]);
  };
  auto tile_addr = [&](int it) { return base + uint32_t((it % kStages) * kStageBytes); };
  if (wgi == 1) turn_pass();

  int gt = 0;  // the CTA's tiles before this item (the producer's numbering)
  for (int item = int(blockIdx.x); item < a.items; item += int(gridDim.x)) {
    const Item w = item_at(item);
    const int q0 = w.q0, n = w.n, p0 = w.p0, kvh = w.kvh, split = w.split, tile0 = w.tile0, num_kt = w.num_kt;
    const KeyRange range = w.range;
    const KeyInterval vis[2] = {visible_keys(p0 + tok[0], a.window, range), visible_keys(p0 + tok[1], a.window, range)};
    const int pos_first = p0 + wg_first_token(wgi), pos_last = p0 + wg_last_token(wgi);

    float o[kHeadDim / 8][4];
#pragma unroll
    for (int j = 0; j < kHeadDim / 8; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.f;
    float m[2] = {kNegInf, kNegInf}, l[2] = {0.f, 0.f};  // l: this thread's partial row sums
    uint32_t qa[kHeadDim / 16][4];
    load_q_fragments(a, q0, n, kvh, g, lane, tok, qa);

    float s[kKeyCols][4];
    uint32_t pa[kKeyTile / 16][4];
    float corr[2];
    if (num_kt > 0) {
      // Softmax of tile `it` (mask, P, the rescale of O once P·V of tile it - 1 has completed).
      auto softmax_tile = [&](int it) {
        const int kb = tile0 + it * kKeyTile;
        mask_tile(s, kb, lane, vis, tile_unmasked(kb, pos_first, pos_last, a.window, range));
        softmax_scores(s, score_scale, m, l, corr);
      };
      // Tile 0: S alone (peeled, so the loop's issue and waits run without branches between them).
      mbar_wait(&full[gt % kStages], uint32_t((gt / kStages) & 1));
      turn_wait();
      issue_scores(s, qa, tile_addr(gt));
      turn_pass();
      wgmma_wait<0>();
      wgmma_fence_operands(s);
      softmax_tile(0);
      rescale_o_if_moved(o, corr);
#pragma unroll
      for (int kt = 0; kt < kKeyTile / 16; ++kt) pack_p(s, kt, pa[kt]);
      for (int it = 1; it < num_kt; ++it) {
        mbar_wait(&full[(gt + it) % kStages], uint32_t(((gt + it) / kStages) & 1));
        wgmma_fence_operands(o);
        turn_wait();
        issue_scores(s, qa, tile_addr(gt + it));
        issue_values(o, pa, tile_addr(gt + it - 1) + kTileBytes);  // P·V of the previous tile
        turn_pass();
        wgmma_wait<1>();  // S has completed; P·V of tile it - 1 may still run
        wgmma_fence_operands(s);
        softmax_tile(it);
        wgmma_wait<0>();  // P·V of tile it - 1 has completed: O may be rescaled, its stage released
        wgmma_fence_operands(o);
        release(gt + it - 1);
        rescale_o_if_moved(o, corr);
#pragma unroll
        for (int kt = 0; kt < kKeyTile / 16; ++kt) pack_p(s, kt, pa[kt]);
      }
      // P·V of the last tile.
      wgmma_fence_operands(o);
      turn_wait();
      issue_values(o, pa, tile_addr(gt + num_kt - 1) + kTileBytes);
      turn_pass();
      wgmma_wait<0>();
      wgmma_fence_operands(o);
      release(gt + num_kt - 1);
    }
    store_rows(a, q0, n, kvh, split, g, lane, tok, m, l, o);
    gt += num_kt;
  }
  if (wgi == 0) turn_wait();  // the turn warpgroup 1 passed last: leave no barrier pending
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
                       const AttentionScratch& scratch, bf16* out, cudaStream_t stream) {
  using namespace prefill;
  PrefillArgs args{};
  if (!plan_prefill(q, k_cache, v_cache, sinks, s, qs, tiles, scratch, out, args)) return;
  // 193 KiB of dynamic shared memory needs the opt-in. This path is never graph-captured
  // (CudaBackend::forward sends captured steps to paged_attention).
  KvMaps maps{};
  // TMA boxes are whole cache blocks: a multiple of 8 rows (the swizzle atom), dividing the key
  // tile (else the producer copies everything with cp.async). The maps span 2^31 - 1 rows: the
  // kernel only asks for rows of blocks in the sequences' tables (the cache's true length is not
  // an argument here).
  const int bs = s.block_size;
  args.tma = bs % 8 == 0 && kKeyTile % bs == 0;
  if (args.tma) {
    const int64_t rows = (int64_t(1) << 31) - 1;
    maps.k = make_tma_map_bf16_sw128(k_cache, rows, kHeadDim, bs, "prefill_attention K cache");
    maps.v = make_tma_map_bf16_sw128(v_cache, rows, kHeadDim, bs, "prefill_attention V cache");
  }
  static const bool ready = allow_dynamic_smem(attention_prefill_kernel, int(kSmemBytes));
  (void)ready;
  // Sliding-window layers: one persistent CTA per SM striding over the items (all of about the
  // same length, a window), so an SM's next item streams into the ring while its consumers finish
  // the previous one, instead of a CTA launch, a cold ring and a Q load per 5-tile item (W = 513
  // at 8192 tokens: 273 -> 230 µs, docs/performance.md, eighth session). Causal
  // layers keep one CTA per item (their lengths run from 1 to T / 128 tiles, longest first: the
  // hardware's greedy order balances them).
  int ctas = args.items;
  if (s.window > 0) {
    int device = 0, sms = 0;
    STRIKER_CUDA_CHECK(cudaGetDevice(&device));
    STRIKER_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    ctas = std::min(ctas, std::max(sms, 1));
  }
  launch_pdl(attention_prefill_kernel, dim3(unsigned(ctas)), dim3(kCtaThreads), size_t(kSmemBytes), stream, maps,
             args);
  STRIKER_CUDA_CHECK_LAUNCH("attention_prefill_kernel");
  if (args.num_splits > 1)
    attention_combine_splits(args.partials, sinks, s, tiles.query_ids ? tiles.num_queries : qs.num_queries,
                             tiles.query_ids, args.num_splits, out, stream);
}

}  // namespace striker::cuda
