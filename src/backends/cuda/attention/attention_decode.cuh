// Device code the two tensor-core decode attention kernels share (attention_mma_kernel in
// attention.cu, attention_pipe_kernel in attention_pipe.cu): the Q fragments, the per-tile
// S = Q·Kᵀ / online softmax / O += P·V update, and the merge of the CTA's warps into one split
// record. Both kernels call the same code with the same fragment values, so their records are
// bit-identical; they differ only in where K and V come from (registers loaded from global
// memory, or a cp.async ring in shared memory).
//
// Tile math (head_dim 128, 8 query heads per KV head): S = Q·Kᵀ with mma.sync m16n8k16 (the 8
// query heads are rows 0-7 of A, rows 8-15 are zero), online softmax on the S fragments, then
// O += P·V with P reused from the S fragments as the A operand. The dot-product order over head
// dims is permuted (same permutation for Q and K) so every thread reads whole 16-byte chunks; V
// is read in 16-byte chunks too and paired across keys with byte permutes.
#pragma once
#include <cstdint>

#include "backends/cuda/attention/attention_decode_layout.h"
#include "backends/cuda/attention/qk_rope_kv.cuh"
#include "backends/cuda/common/device_math.cuh"
#include "backends/cuda/common/launch.cuh"
#include "backends/cuda/common/stamps.cuh"
#include "backends/cuda/common/tensor_core.cuh"

namespace striker::cuda::decode {

constexpr float kNegInf = -__builtin_huge_valf();
constexpr float kLog2e = 1.4426950408889634f;

// Scores live in the log2 domain (s·log2(e)) so every exponential is one exp2.
// 2^(m_old - m_new), taking an empty state (m_old = -inf) to a zero weight instead of NaN.
__device__ __forceinline__ float rescale(float m_old, float m_new) {
  return m_old == kNegInf ? 0.f : exp2f(m_old - m_new);
}

// d += a·b with A rows 8-15 zero (only the 8 query heads are real rows).
__device__ __forceinline__ void mma_rows8(float (&d)[4], uint32_t a0, uint32_t a2, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(0u), "r"(a2), "r"(0u), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t word(const uint4& q, int i) {
  return i == 0 ? q.x : i == 1 ? q.y : i == 2 ? q.z : q.w;
}

// A fragments of Q (head g = lane/4 of KV head kvh), dims 32p + 8c .. +7 for k-steps 2p and 2p+1.
__device__ __forceinline__ void load_q_fragments(const bf16_t* q, int qi, int nkv, int kvh, int lane,
                                                 uint32_t (&qa)[8][2]) {
  const bf16_t* qh = q + (int64_t(qi) * nkv * kGroup + kvh * kGroup + (lane >> 2)) * kHeadDim;
#pragma unroll
  for (int pp = 0; pp < 4; ++pp) {
    const uint4 v = load_cached(qh + 32 * pp + 8 * (lane & 3));
    qa[2 * pp][0] = v.x;
    qa[2 * pp][1] = v.y;
    qa[2 * pp + 1][0] = v.z;
    qa[2 * pp + 1][1] = v.w;
  }
}

// The same fragments from the CTA's own normalised q heads in shared memory ([kGroup][kHeadDim]).
__device__ __forceinline__ void q_fragments_from_shared(const bf16_t* qs, int lane, uint32_t (&qa)[8][2]) {
  const bf16_t* qh = qs + (lane >> 2) * kHeadDim;
#pragma unroll
  for (int pp = 0; pp < 4; ++pp) {
    const uint4 v = *reinterpret_cast<const uint4*>(qh + 32 * pp + 8 * (lane & 3));
    qa[2 * pp][0] = v.x;
    qa[2 * pp][1] = v.y;
    qa[2 * pp + 1][0] = v.z;
    qa[2 * pp + 1][1] = v.w;
  }
}

// One warp's online-softmax state for head g: O columns (o[j][0..1], see store below), running
// max m and the thread's partial denominator l (summed over the 4 threads of a group at the end).
struct WarpState {
  float o[16][4];
  float m, l;
};

__device__ __forceinline__ void init_state(WarpState& st) {
#pragma unroll
  for (int j = 0; j < 16; ++j) st.o[j][0] = st.o[j][1] = st.o[j][2] = st.o[j][3] = 0.f;
  st.m = kNegInf;
  st.l = 0.f;
}

// Folds the tile of keys base..base+15 into the state. kq[t][pp]: K piece (t, pp), vq[r][h]: V
// piece (r, h) as attention_decode_layout.h numbers them; pieces of keys >= kend must be zeros.
__device__ __forceinline__ void tile_update(WarpState& st, const uint32_t (&qa)[8][2], const uint4 (&kq)[2][4],
                                            const uint4 (&vq)[4][2], int base, int kend, float score_scale,
                                            int lane) {
  const int c = lane & 3;
  float s[2][4];
#pragma unroll
  for (int t = 0; t < 2; ++t) {
    s[t][0] = s[t][1] = s[t][2] = s[t][3] = 0.f;
#pragma unroll
    for (int pp = 0; pp < 4; ++pp) {
      mma_rows8(s[t], qa[2 * pp][0], qa[2 * pp][1], kq[t][pp].x, kq[t][pp].y);
      mma_rows8(s[t], qa[2 * pp + 1][0], qa[2 * pp + 1][1], kq[t][pp].z, kq[t][pp].w);
    }
  }
  // s[t][0..1]: head g, keys base + 8t + 2c + {0,1}.
  float sc[4];
  float mx = st.m;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int key = base + 8 * (i >> 1) + 2 * c + (i & 1);
    sc[i] = key < kend ? s[i >> 1][i & 1] * score_scale : kNegInf;
    mx = fmaxf(mx, sc[i]);
  }
  mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
  mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
  const float scale = rescale(st.m, mx);
  float pr[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) pr[i] = sc[i] == kNegInf ? 0.f : exp2f(sc[i] - mx);
  st.l = st.l * scale + (pr[0] + pr[1] + pr[2] + pr[3]);
  st.m = mx;
  const uint32_t pa0 = pack_bf16x2(pr[0], pr[1]), pa2 = pack_bf16x2(pr[2], pr[3]);
#pragma unroll
  for (int j = 0; j < 16; ++j) {
    st.o[j][0] *= scale;
    st.o[j][1] *= scale;
    // n-tile j: dim 8n + j (j < 8) or 64 + 8n + (j-8), n = g for this thread's B fragment.
    const int h = j >> 3, e = j & 7;
    const uint32_t sel = (e & 1) ? 0x7632u : 0x5410u;
    const uint32_t b0 = __byte_perm(word(vq[0][h], e >> 1), word(vq[1][h], e >> 1), sel);
    const uint32_t b1 = __byte_perm(word(vq[2][h], e >> 1), word(vq[3][h], e >> 1), sel);
    mma_rows8(st.o[j], pa0, pa2, b0, b1);
  }
}

// The CTA's kWarps per-warp softmax states (max m and sum l per head in sm_m / sm_l, warp w's
// accumulator of head h, dim c at acc[w·acc_stride + h·D + c]), published by a __syncthreads, merged
// into one split record at rec: G·2 floats of (m, l) per head, then G·D accumulators. Shared by the
// tensor-core kernels and the CUDA-core kernel of attention.cu, so their records merge alike.
template <int G, int D>
__device__ __forceinline__ void merge_warps_into_record(const float* acc, int acc_stride,
                                                       const float (&sm_m)[kWarps][G],
                                                       const float (&sm_l)[kWarps][G], float* rec) {
  for (int idx = threadIdx.x; idx < G * D; idx += kWarps * 32) {
    const int h = idx / D, col = idx % D;
    float mn = kNegInf;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) mn = fmaxf(mn, sm_m[w][h]);
    float a = 0.f, lt = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float sc = rescale(sm_m[w][h], mn);
      a += acc[w * acc_stride + h * D + col] * sc;
      lt += sm_l[w][h] * sc;
    }
    rec[G * 2 + idx] = a;
    if (col == 0) {
      rec[2 * h] = mn;
      rec[2 * h + 1] = lt;
    }
  }
}

// Merges the CTA's kWarps warp states through shared memory and writes the split record at rec
// (G·2 floats of (m, l) per head, then G·D accumulators). Warp w's G×D accumulators go to
// acc + w·acc_stride floats; the caller guarantees nothing else uses that memory now.
// kStamp (the kernels with a stamps scope, stamps.cuh): stamp point 3 once every warp's state is
// published, so a profile tells the wait for the CTA's slowest warp from the merge itself.
template <bool kStamp = false>
__device__ __forceinline__ void write_split_record(WarpState& st, float* acc, int acc_stride,
                                                  float (&sm_m)[kWarps][kGroup], float (&sm_l)[kWarps][kGroup],
                                                  float* rec, int lane, int warp) {
  constexpr int D = kHeadDim, G = kGroup;
  const int g = lane >> 2, c = lane & 3;
  st.l += __shfl_xor_sync(0xffffffffu, st.l, 1);
  st.l += __shfl_xor_sync(0xffffffffu, st.l, 2);
  // o[j][0..1] = O[head g][dims of columns 2c, 2c+1].
  float* mine = acc + warp * acc_stride + g * D;
#pragma unroll
  for (int j = 0; j < 16; ++j) {
    const int h = j >> 3, e = j & 7;
    mine[64 * h + 8 * (2 * c) + e] = st.o[j][0];
    mine[64 * h + 8 * (2 * c + 1) + e] = st.o[j][1];
  }
  if (c == 0) {
    sm_m[warp][g] = st.m;
    sm_l[warp][g] = st.l;
  }
  __syncthreads();
  if constexpr (kStamp) STRIKER_STAMP(3);  // (every warp's tiles done)
  merge_warps_into_record<G, D>(acc, acc_stride, sm_m, sm_l, rec);
}

// Per-query lookups of a decode CTA (split `split` of `num_splits` of query record z): its query
// index, key range [kbeg, kend) (its share of the query's own keys: split_key_range) and block
// table. These read only step metadata (positions, table offsets, block tables, query ids), which
// the step's host→device memcpy writes before the step's first kernel starts, so they run before
// pdl_wait() (see "Metadata before the PDL wait" below).
struct SplitKeys {
  int qi, kbeg, kend;
  const int32_t* table;
};
__device__ __forceinline__ SplitKeys split_keys(const int32_t* positions, const int32_t* table_offset,
                                                const int32_t* block_tables, const int32_t* query_ids, int z,
                                                int split, int num_splits, int window) {
  SplitKeys sk;
  sk.qi = query_ids ? query_ids[z] : z;  // z indexes the split records
  const int p = positions[sk.qi];
  const int lo = window > 0 ? max(0, p - window + 1) : 0;
  const KeyRange r = split_key_range(p + 1 - lo, split, num_splits);
  sk.kbeg = lo + r.begin;
  sk.kend = lo + r.end;
  sk.table = block_tables + table_offset[sk.qi];
  return sk;
}

// Metadata before the PDL wait: every tensor-core decode attention kernel (split and combine) does
// its metadata lookups first and calls pdl_wait() only after them. Why that is safe: positions,
// table offsets, block tables and query ids are written only by the step's metadata
// cudaMemcpyAsync, which is stream-ordered before the step's first kernel (PDL relaxes only
// kernel→kernel edges: a kernel after a memcpy starts after the copy has completed), and every kernel of a step starts after the step's first kernel started; the next
// step's memcpy waits for this step's last kernel, which completes only after every earlier kernel
// (each one's pdl_wait returns only when its predecessor has completed). So the metadata is
// constant for the whole lifetime of every attention CTA. q and the KV cache rows of the step's
// tokens are written by the qk-norm/RoPE/KV-write kernel just before: they are read after the wait
// (older keys may be copied before it: pipe_split_record).
// The split partials of the combine kernel are written by the split kernel: after the wait too.

// The attention front of a one-token step run by the split CTAs themselves (FLINT.md §4: q, k =
// per-head RMSNorm, RoPE on sliding layers; k, v into the cache), so no front kernel and no q
// buffer sit between the QKV projection and attention. Every CTA normalises and rotates its KV
// head's kGroup query heads from the raw q|k|v row into shared memory (warp w: heads 2w, 2w+1); the
// one CTA whose keys include the token's own position p computes the token's k (warp 0) and v
// (warp 1), writes them into the cache for later steps and patches them into its own tile, whose
// copy zero-fills row p: every tile of the step is requested before the wait. The math is the
// front kernel's (qk_rope_kv.cuh): the same bits. Only where each query is its sequence's one new
// token: then no CTA reads a new key but its own query's.
struct FrontArgs {
  const bf16_t* qkv = nullptr;  // each query's q | k | v, rows of (nkv·kGroup + 2·nkv)·kHeadDim values
  const float* q_norm_w = nullptr;
  const float* k_norm_w = nullptr;
  float eps = 0.f;
  const float* inv_freq = nullptr;  // nullptr: NoPE layer
  const int64_t* slot = nullptr;    // [queries] each query's cache slot
  bf16_t* k_cache = nullptr;        // the caches the split kernel reads
  bf16_t* v_cache = nullptr;
};
constexpr int kFrontLane = kHeadDim / 32;  // a lane's elements of a head in the front math
static_assert(kGroup == 2 * kWarps, "the front: two query heads per warp");

// Before the wait: the norm gammas and the RoPE cos/sin at position p (weights and step metadata).
struct FrontPrep {
  qk_front::Prep<kFrontLane> q, k;
};
__device__ __forceinline__ void front_prepare(FrontPrep& fp, const FrontArgs& fa, int p) {
  qk_front::prepare_gamma<kFrontLane>(fp.q, fa.q_norm_w);
  qk_front::prepare_gamma<kFrontLane>(fp.k, fa.k_norm_w);
  if (fa.inv_freq != nullptr) {
    qk_front::prepare_rope<kFrontLane>(fp.q, p, fa.inv_freq);
#pragma unroll
    for (int e = 0; e < kFrontLane; ++e) fp.k.cs[e] = fp.q.cs[e], fp.k.sn[e] = fp.q.sn[e];
  }
}
// After the wait: query qi's q heads into qs[0..kGroup) (rows of kHeadDim bf16 in shared memory);
// when `writes_kv`, its token's k and v into the cache and into qs[kGroup], qs[kGroup + 1] (the
// caller patches them into its tile: the cache copy is for later steps). The caller's
// __syncthreads publishes qs to the CTA.
__device__ __forceinline__ void front_run(const FrontPrep& fp, const FrontArgs& fa, int nkv, int kvh, int block_size,
                                          bool writes_kv, bf16_t* qs, int qi) {
  constexpr int D = kHeadDim, E = kFrontLane;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const bool rope = fa.inv_freq != nullptr;
  const bool kv = writes_kv && warp < 2;  // warp 0: k, warp 1: v
  const bf16_t* qkv = fa.qkv + int64_t(qi) * (kGroup + 2) * nkv * D;
  float x0[E], x1[E], xkv[E];
  qk_front::load_lane<E>(qkv + (kvh * kGroup + 2 * warp) * D, x0);
  qk_front::load_lane<E>(qkv + (kvh * kGroup + 2 * warp + 1) * D, x1);
  if (kv) qk_front::load_lane<E>(qkv + (nkv * kGroup + warp * nkv + kvh) * D, xkv);
  qk_front::norm_rotate<E>(x0, fp.q, rope, fa.eps);
  qk_front::norm_rotate<E>(x1, fp.q, rope, fa.eps);
  qk_front::store_lane<E>(qs + (2 * warp) * D + lane * E, x0);
  qk_front::store_lane<E>(qs + (2 * warp + 1) * D + lane * E, x1);
  if (kv) {
    if (warp == 0) qk_front::norm_rotate<E>(xkv, fp.k, rope, fa.eps);
    bf16_t* row = qk_front::cache_row(warp == 0 ? fa.k_cache : fa.v_cache, fa.slot[qi], block_size, nkv, kvh, D);
    qk_front::store_lane<E>(row + lane * E, xkv);                      // for later steps
    qk_front::store_lane<E>(qs + (kGroup + warp) * D + lane * E, xkv);  // for this CTA's tile
  }
}

// The pipelined split computation of one CTA (attention_pipe_kernel):
// every warp streams its tiles (keys kbeg + 16·warp + 64·i) through its kStages-deep cp.async ring
// (ring = this warp's warp_ring_bytes(kStages) bytes of shared memory at smem + warp·that), folds
// them in with tile_update, and the CTA's warps are merged into the split record at rec (global
// or shared memory; G·2 + G·D floats). Calls pdl_launch_dependents() / pdl_wait() itself: the
// query's key range and the block ids of the first kStages tiles are looked up before the wait.
// No early return: every thread reaches the final __syncthreads.
template <int kStages, bool kFront = false>
__device__ __forceinline__ void pipe_split_record(const bf16_t* __restrict__ q, const bf16_t* __restrict__ kc,
                                                  const bf16_t* __restrict__ vc, int nkv, int block_size, int window,
                                                  const int32_t* __restrict__ positions,
                                                  const int32_t* __restrict__ table_offset,
                                                  const int32_t* __restrict__ block_tables,
                                                  const int32_t* __restrict__ query_ids, int split, int num_splits,
                                                  int kvh, int z, int step_queries, unsigned char* smem,
                                                  float (&sm_m)[kWarps][kGroup], float (&sm_l)[kWarps][kGroup],
                                                  float* rec, const FrontArgs& fa = FrontArgs{},
                                                  bf16_t* q_smem = nullptr) {
  static_assert(kStages >= 2, "a ring of one stage would not overlap loads with math");
  static_assert(warp_ring_bytes(kStages) >= kGroup * kHeadDim * 4, "the warp's ring holds its accumulators at the end");
  constexpr int D = kHeadDim;
  pdl_launch_dependents();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const SplitKeys sk =
      split_keys(positions, table_offset, block_tables, query_ids, z, split, num_splits, window);
  const int kbeg = sk.kbeg, kend = sk.kend;
  const int32_t* table = sk.table;
  const int p_new = positions[sk.qi];  // with the front: the one new key (never read from the cache)
  const float score_scale = kLog2e / sqrtf(float(D));
  bf16_t* ring = reinterpret_cast<bf16_t*>(smem + warp * warp_ring_bytes(kStages));
  const int first = kbeg + kTileKeys * warp;  // this warp's tile i: keys first + 64·i .. +15
  const int ntiles = warp_tiles(kbeg, kend, warp);

  // Physical cache blocks of tile i (its first block, and the next one if the tile reaches it).
  // Loaded one tile before the copies that use them, so the table lookup is off the critical path.
  auto fetch_blocks = [&](int i, int32_t& b0, int32_t& b1) {
    if (i < ntiles) {
      const TileBlocks tb = tile_blocks(first + kStepKeys * i, block_size, kend);
      b0 = table[tb.first_block];
      b1 = tb.second_needed ? table[tb.first_block + 1] : b0;
    }
  };
  // cp.async of tile i into its stage; rows past kend are zero-filled without a read. Always
  // commits a group (empty past the last tile) so wait_group counts tiles.
  auto issue = [&](int i, int32_t b0, int32_t b1) {
    if (i < ntiles) {
      const int base = first + kStepKeys * i;
      const TileBlocks tb = tile_blocks(base, block_size, kend);
      bf16_t* ks = ring + (i % kStages) * 2 * kTileElems;
      bf16_t* vs = ks + kTileElems;
      const int ch = stage_chunk(lane);
#pragma unroll
      for (int j = 0; j < kStagePasses; ++j) {
        const int r = stage_row(lane, j);
        // With the front, the token's own key p is not read: its row is zero-filled here and
        // patched from shared memory once the front has computed it (patch_new_key below).
        const bool ok = base + r < kend && (!kFront || base + r != p_new);
        const int64_t blk = row_in_second(tb, r, block_size) ? b1 : b0;
        const int64_t off = ((blk * nkv + kvh) * block_size + row_slot(tb, r, block_size)) * D + ch * 8;
        cp_async16(ks + k_swizzled(r, ch), ok ? kc + off : kc, ok);
        cp_async16(vs + v_swizzled(r, ch), ok ? vc + off : vc, ok);
      }
    }
    cp_async_commit();
  };

  // Block ids of the first kStages tiles together (one latency; metadata only). Then the copies of
  // the first kStages-1 tiles: before the wait for tiles whose keys all predate this step, after
  // it for the rest. Only the step's own tokens are written by the kernel in front (k/v of each
  // query's newest keys); a sequence has at most as many new keys as the step has queries in
  // this kernel (step_queries: gridDim.z, or the total when the host slices a launch of more than
  // kMaxGridYZ queries), so keys below p + 1 - step_queries were written by earlier steps, whose
  // kernels have all completed. Old tiles come first (keys ascend with i), so the commit order is unchanged.
  int32_t pb0[kStages - 1] = {}, pb1[kStages - 1] = {};
#pragma unroll
  for (int i = 0; i < kStages - 1; ++i) fetch_blocks(i, pb0[i], pb1[i]);
  int32_t nb0 = 0, nb1 = 0;  // block ids of the next tile to issue
  fetch_blocks(kStages - 1, nb0, nb1);
  // Keys at or above fresh_from may be this step's. With the front, every tile goes out before the
  // wait: its rows are older keys, the new key (zero-filled, patched in) or past kend (zero-filled).
  const int fresh_from = p_new + 1 - step_queries;
  int early = 0;
#pragma unroll
  for (int i = 0; i < kStages - 1; ++i)
    if (early == i && (kFront || first + kStepKeys * i + kTileKeys <= fresh_from)) {
      issue(i, pb0[i], pb1[i]);
      ++early;
    }
  uint32_t qa[8][2];
  if constexpr (kFront) {
    FrontPrep fp;
    front_prepare(fp, fa, p_new);
    pdl_wait();  // qkv comes from the QKV projection in front; every tile is already requested
    STRIKER_STAMP(1);
    front_run(fp, fa, nkv, kvh, block_size, kbeg <= p_new && p_new < kend, q_smem, sk.qi);
    __syncthreads();  // q heads and the new key's k, v rows in shared memory
    STRIKER_STAMP(2);
    q_fragments_from_shared(q_smem, lane, qa);
  } else {
    pdl_wait();  // metadata and old keys only above (see "Metadata before the PDL wait"); q and new keys below
    STRIKER_STAMP(1);
#pragma unroll
    for (int i = 0; i < kStages - 1; ++i)
      if (i >= early) issue(i, pb0[i], pb1[i]);
    load_q_fragments(q, sk.qi, nkv, kvh, lane, qa);
  }
  WarpState st;
  init_state(st);

  for (int i = 0; i < ntiles; ++i) {
    __syncwarp();  // every lane has read stage (i-1) % kStages, which tile i+kStages-1 refills
    issue(i + kStages - 1, nb0, nb1);
    fetch_blocks(i + kStages, nb0, nb1);
    cp_async_wait<kStages - 1>();  // this lane's copies of tile i have landed
    __syncwarp();                  // ... and every other lane's
    bf16_t* ks = ring + (i % kStages) * 2 * kTileElems;
    bf16_t* vs = ks + kTileElems;
    if constexpr (kFront) {
      const int r = p_new - (first + kStepKeys * i);
      // The new key's row (zero-filled by its copy) from the front's rows: k from lanes 0-15, v from 16-31.
      if (r >= 0 && r < kTileKeys && p_new < kend) {
        const int ch = lane & 15;
        bf16_t* dst = lane < 16 ? ks + k_swizzled(r, ch) : vs + v_swizzled(r, ch);
        *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(q_smem + (kGroup + lane / 16) * D + 8 * ch);
        __syncwarp();
      }
    }
    uint4 kq[2][4], vq[4][2];
#pragma unroll
    for (int t = 0; t < 2; ++t)
#pragma unroll
      for (int pp = 0; pp < 4; ++pp)
        kq[t][pp] = *reinterpret_cast<const uint4*>(ks + k_swizzled(k_frag_row(lane, t), k_frag_chunk(lane, pp)));
#pragma unroll
    for (int r = 0; r < 4; ++r)
#pragma unroll
      for (int h = 0; h < 2; ++h)
        vq[r][h] = *reinterpret_cast<const uint4*>(vs + v_swizzled(v_frag_row(lane, r), v_frag_chunk(lane, h)));
    tile_update(st, qa, kq, vq, first + kStepKeys * i, kend, score_scale, lane);
  }
  cp_async_wait<0>();  // only empty groups can remain; the ring is reused below
  __syncwarp();
  write_split_record<true>(st, reinterpret_cast<float*>(smem), warp_ring_bytes(kStages) / 4, sm_m, sm_l, rec, lane, warp);
}

// Folds one split record into a lane's running sums at the merged maximum mx: den += l·2^(m - mx) and
// the lane's E = D/32 accumulators a += v·2^(m - mx) (query head hh of the record's G heads).
template <int D, int G, int E>
__device__ __forceinline__ void fold_split(const float* rec, int hh, int lane, float mx, float (&a)[E], float& den) {
  const float sc = rescale(rec[2 * hh], mx);
  den = __fmaf_rn(rec[2 * hh + 1], sc, den);
#pragma unroll
  for (int e = 0; e < E; ++e) a[e] = __fmaf_rn(rec[G * 2 + hh * D + lane * E + e], sc, a[e]);
}

// Merges num_splits records of one query head (head hh of its KV head's group) and adds the sink
// (log2 domain; -inf = none), whose logit enters the denominator once with no value; writes the
// D outputs at out_row. record(s) gives split s's record. Block of 128 threads (4 warps take
// every 4th split, each lane D/32 dims); every multiply-add is an explicit fma so the result does
// not depend on how the compiler contracts. Ends with __syncthreads: the caller may call it again
// for another head.
template <int D, int G, class RecordAt>
__device__ __forceinline__ void combine_head(RecordAt record, int num_splits, int hh, float sink,
                                             bf16_t* __restrict__ out_row) {
  constexpr int E = D / 32;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __shared__ float red_m[4], red_l[4], red_a[4][D];
  float mx = kNegInf;
  for (int s = threadIdx.x; s < num_splits; s += 128) mx = fmaxf(mx, record(s)[2 * hh]);
  mx = warp_max(mx);
  if (lane == 0) red_m[warp] = mx;
  __syncthreads();
  mx = fmaxf(fmaxf(fmaxf(red_m[0], red_m[1]), fmaxf(red_m[2], red_m[3])), sink);
  float a[E], den = 0.f;
#pragma unroll
  for (int e = 0; e < E; ++e) a[e] = 0.f;
#pragma unroll 4
  for (int s = warp; s < num_splits; s += 4) fold_split<D, G>(record(s), hh, lane, mx, a, den);
#pragma unroll
  for (int e = 0; e < E; ++e) red_a[warp][lane * E + e] = a[e];
  if (lane == 0) red_l[warp] = den;
  __syncthreads();
  if (threadIdx.x < D) {
    const float total = red_a[0][threadIdx.x] + red_a[1][threadIdx.x] + red_a[2][threadIdx.x] + red_a[3][threadIdx.x];
    const float denom = rescale(sink, mx) + red_l[0] + red_l[1] + red_l[2] + red_l[3];
    // denom > 0: the query's own key is always in range.
    out_row[threadIdx.x] = __float2bfloat16_rn(total / denom);
  }
  __syncthreads();  // red_m / red_a / red_l are reused by the next call
}

constexpr int kWideCombineWarps = 8;  // attention_combine_wide_kernel's warps (W below)

// combine_head for a step of one query (attention_combine_wide_kernel): 8 warps (W) and every load issued
// right after the wait — thread s's split maximum and each warp's splits w, w + W, … (up to kBatch of
// them: (m, l) and the lane's D/32 values) — so the merge costs one L2 round trip. combine_head's warps
// loop over every 4th split with an unroll of 4: at one sequence (66 splits per KV head from 8K to 100K
// keys) that is ~5 dependent round trips after the maxima' (seventeenth session, docs/performance.md:
// −0.03 to −0.045 ms per batch-1 step). Splits past W·kBatch fold one by one after the batch. The W
// partial sums are added in warp order (other fp32 summation order than combine_head).
template <int D, int G, int W, int kBatch, class RecordAt>
__device__ __forceinline__ void combine_head_wide(RecordAt record, int num_splits, int hh, float sink,
                                                  bf16_t* __restrict__ out_row) {
  constexpr int E = D / 32;
  constexpr bool kVector = E == 4 && G % 2 == 0;  // records of G·(D + 2) floats stay 16-byte aligned
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __shared__ float red_m[W], red_l[W], red_a[W][D];
  // Thread s's split maximum and the warp's batch, all requested before any is used.
  float mx = int(threadIdx.x) < num_splits ? record(threadIdx.x)[2 * hh] : kNegInf;
  float m[kBatch], l[kBatch], v[kBatch][E];
#pragma unroll
  for (int i = 0; i < kBatch; ++i) {
    const int s = warp + W * i;
    if (s < num_splits) {
      const float* rec = record(s);
      if constexpr (kVector) {
        const float2 ml = *reinterpret_cast<const float2*>(rec + 2 * hh);
        const float4 q = *reinterpret_cast<const float4*>(rec + G * 2 + hh * D + lane * E);
        m[i] = ml.x, l[i] = ml.y;
        v[i][0] = q.x, v[i][1] = q.y, v[i][2] = q.z, v[i][3] = q.w;
      } else {
        m[i] = rec[2 * hh];
        l[i] = rec[2 * hh + 1];
#pragma unroll
        for (int e = 0; e < E; ++e) v[i][e] = rec[G * 2 + hh * D + lane * E + e];
      }
    }
  }
  for (int s = threadIdx.x + 32 * W; s < num_splits; s += 32 * W) mx = fmaxf(mx, record(s)[2 * hh]);
  mx = warp_max(mx);
  if (lane == 0) red_m[warp] = mx;
  __syncthreads();
  mx = sink;
#pragma unroll
  for (int w = 0; w < W; ++w) mx = fmaxf(mx, red_m[w]);
  float a[E], den = 0.f;
#pragma unroll
  for (int e = 0; e < E; ++e) a[e] = 0.f;
#pragma unroll
  for (int i = 0; i < kBatch; ++i)
    if (warp + W * i < num_splits) {
      const float sc = rescale(m[i], mx);
      den = __fmaf_rn(l[i], sc, den);
#pragma unroll
      for (int e = 0; e < E; ++e) a[e] = __fmaf_rn(v[i][e], sc, a[e]);
    }
  for (int s = warp + W * kBatch; s < num_splits; s += W) fold_split<D, G>(record(s), hh, lane, mx, a, den);
#pragma unroll
  for (int e = 0; e < E; ++e) red_a[warp][lane * E + e] = a[e];
  if (lane == 0) red_l[warp] = den;
  __syncthreads();
  for (int d = threadIdx.x; d < D; d += 32 * W) {
    float total = 0.f, denom = rescale(sink, mx);
#pragma unroll
    for (int w = 0; w < W; ++w) total += red_a[w][d];
#pragma unroll
    for (int w = 0; w < W; ++w) denom += red_l[w];
    out_row[d] = __float2bfloat16_rn(total / denom);  // denom > 0: the query's own key is always in range
  }
  __syncthreads();
}

// The split combine of one query head where the S split records sit in the shared memory of one
// thread-block cluster (attention_pipe_cluster_kernel, a step of one query): thread d of the CTA's 128
// merges dim d of head hh from recs[0..S) (distributed shared memory; all loads issued before any is
// used), adds the sink and writes out_row[d]. The arithmetic is combine_head_wide's (the combine kernel
// of a one-query step's two launches), operation for operation, so the bits are its bits: split s folds
// into virtual warp s % kWideCombineWarps in ascending s (fold_split's fmas), then the warps' sums are
// added in warp order from 0. The maximum is order-free (fmaxf; a zero's sign cannot change 2^(m − mx)).
constexpr int kMaxClusterSplits = 16;  // sm_90's largest (non-portable) cluster
__device__ __forceinline__ void cluster_combine_head(const float* const (&recs)[kMaxClusterSplits], int S, int hh,
                                                     float sink, bf16_t* __restrict__ out_row) {
  constexpr int D = kHeadDim, G = kGroup, W = kWideCombineWarps;
  static_assert(D == 128, "one dim per thread of a 128-thread CTA");
  const int d = int(threadIdx.x);
  float m[kMaxClusterSplits], l[kMaxClusterSplits], v[kMaxClusterSplits];
#pragma unroll
  for (int s = 0; s < kMaxClusterSplits; ++s)
    if (s < S) {
      m[s] = recs[s][2 * hh];
      l[s] = recs[s][2 * hh + 1];
      v[s] = recs[s][G * 2 + hh * D + d];
    }
  float mx = sink;
#pragma unroll
  for (int s = 0; s < kMaxClusterSplits; ++s)
    if (s < S) mx = fmaxf(mx, m[s]);
  float a[W], den[W];
#pragma unroll
  for (int w = 0; w < W; ++w) a[w] = den[w] = 0.f;
#pragma unroll
  for (int s = 0; s < kMaxClusterSplits; ++s)
    if (s < S) {
      const float sc = rescale(m[s], mx);
      den[s % W] = __fmaf_rn(l[s], sc, den[s % W]);
      a[s % W] = __fmaf_rn(v[s], sc, a[s % W]);
    }
  float total = 0.f, denom = rescale(sink, mx);
#pragma unroll
  for (int w = 0; w < W; ++w) total += a[w];
#pragma unroll
  for (int w = 0; w < W; ++w) denom += den[w];
  out_row[d] = __float2bfloat16_rn(total / denom);  // denom > 0: the query's own key is always in range
}

// Sink logit of query head h in the log2 domain (an explicit rounded multiply: see combine_head).
__device__ __forceinline__ float sink_log2(const float* sinks, int h) {
  return sinks ? __fmul_rn(sinks[h], kLog2e) : kNegInf;
}

// attention_pipe.cu: launches attention_pipe_kernel (kPipeStages-deep ring, kPipeCtasPerSm CTAs
// per SM) over the grid (splits, KV heads, queries); writes split records
// only (the caller launches the combine). step_queries: the queries of the whole step in this
// kernel (grid.z, or more when the caller slices them into launches of at most kMaxGridYZ).
constexpr int kPipeStages = 3;
constexpr int kPipeCtasPerSm = 2;  // sizes its split plan: one wave
// front: run the attention front in the kernel (one query, grid.z = 1, no query_ids; q unused).
void launch_attention_pipe(dim3 grid, const bf16_t* q, const bf16_t* kc, const bf16_t* vc, int nkv,
                           int block_size, int window, const int32_t* positions, const int32_t* table_offset,
                           const int32_t* block_tables, const int32_t* query_ids, int step_queries, int num_splits,
                           float* partials, cudaStream_t stream, const FrontArgs* front = nullptr);

// The front's split kernel with the combine inside for a step of one query (attention_pipe_cluster_kernel):
// grid (S splits, KV heads, 1) with S <= kMaxClusterSplits, one cluster per KV head; writes attention's
// output (bf16, [heads][kHeadDim]) with the sinks added: the bits of the split kernel + the wide combine.
void launch_attention_pipe_cluster(dim3 grid, const bf16_t* kc, const bf16_t* vc, int nkv, int block_size, int window,
                                   const int32_t* positions, const int32_t* table_offset, const int32_t* block_tables,
                                   const FrontArgs& front, const float* sinks, bf16_t* out, cudaStream_t stream);

}  // namespace striker::cuda::decode
