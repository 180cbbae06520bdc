// Device-side routing sort and grouped expert GEMMs (moe_grouped.h).
#include "backends/cuda/moe/moe_grouped.h"

#include <cstdint>
#include <string>

#include "backends/cuda/common/cuda_check.h"
#include "backends/cuda/common/launch.cuh"
#include "backends/cuda/moe/moe_grouped_tile.cuh"
#include "backends/cuda/common/warp_dot.cuh"

namespace striker::cuda {
namespace {

// ---------------------------------------------------------------------------------------------
// Routing sort (counting sort by expert, stable: slots of one expert keep their slot order, so the
// result never depends on timing). A slot's rank inside its expert is
//   (rows of the expert before this pass's chunk) + (rows in earlier warps of the chunk) +
//   (earlier lanes of its warp with the same expert, from __match_any_sync).
// One launch for any step (moe_sort_fused_kernel below). It replaced one CTA for the whole step up
// to 8192 slots and four launches above (count per chunk, scan + tiles in one CTA, ranks per chunk,
// slot_row inverted): 16.9 → 10.8 µs at 8192 tokens, 22.9 → 6.2 at 1024 (docs/performance.md, eighth session).

// In-place exclusive scan of v[0..n) by warp 0; returns the total to every lane of warp 0.
__device__ int warp0_exclusive_scan(int* v, int n) {
  const int lane = threadIdx.x & 31;
  const int per = (n + 31) / 32;
  const int lo = min(n, lane * per), hi = min(n, lo + per);
  int local = 0;
  for (int i = lo; i < hi; ++i) local += v[i];
  int incl = local;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int other = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane >= o) incl += other;
  }
  int run = incl - local;
  for (int i = lo; i < hi; ++i) {
    const int c = v[i];
    v[i] = run;
    run += c;
  }
  return __shfl_sync(0xffffffffu, incl, 31);
}

// The bucket of slot s: its expert, or `experts` for an id outside 0..experts-1 (sorted last, no tile).
__device__ __forceinline__ int sort_bucket(const int32_t* __restrict__ ids, int s, int experts) {
  const int e = ids[s];
  return unsigned(e) < unsigned(experts) ? e : experts;
}

// Visits slots [begin, end) in chunks of kThreads (the block's size) and calls emit(s, e, rank) for
// each, rank = count[e] on entry + the slot's stable rank among this pass's earlier slots of e;
// count[] (shared, buckets entries) is advanced by the pass. warp_count must be zero on entry and
// is zero again on return.
template <int kThreads, class Emit>
__device__ __forceinline__ void stable_rank_pass(const int32_t* __restrict__ ids, int begin, int end, int experts,
                                                 int (*warp_count)[kMoeMaxExperts + 1], int* count, Emit emit) {
  constexpr int kWarpsPerBlock = kThreads / 32;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int buckets = experts + 1;
  const unsigned lanes_below = (1u << lane) - 1u;
  int e_next = begin + tid < end ? sort_bucket(ids, begin + tid, experts) : -1;  // loaded a chunk ahead
  for (int base = begin; base < end; base += kThreads) {
    const int s = base + tid;
    const bool valid = s < end;
    const int e = e_next;  // -1 past the end: those lanes match only each other and are never used
    e_next = s + kThreads < end ? sort_bucket(ids, s + kThreads, experts) : -1;
    const unsigned same = __match_any_sync(0xffffffffu, e);
    const int rank_in_warp = __popc(same & lanes_below);
    const bool leader = valid && rank_in_warp == 0;
    if (leader) warp_count[warp][e] = __popc(same);
    __syncthreads();
    if (valid) {
      int rank = count[e] + rank_in_warp;
      for (int w = 0; w < warp; ++w) rank += warp_count[w][e];
      emit(s, e, rank);
    }
    __syncthreads();  // every rank has read count[] before it moves on
    for (int b = tid; b < buckets; b += kThreads) {
      int add = 0;
#pragma unroll
      for (int w = 0; w < kWarpsPerBlock; ++w) add += warp_count[w][b];
      count[b] += add;
    }
    __syncthreads();  // the sums have read warp_count ...
    if (leader) warp_count[warp][e] = 0;  // ... so each leader clears its entry for the next chunk
    __syncwarp();     // (the next chunk's leader of this bucket may be another lane of this warp)
  }
  __syncthreads();
}

// first[0..buckets) = rows per bucket on entry, each bucket's first sorted row on return; writes
// the tile list (tiles of up to tile_rows rows per expert) and num_tiles. Shared-memory arrays.
// With tiles == nullptr only first[] is computed (the CTAs of the fused sort other than CTA 0).
__device__ __forceinline__ void write_tiles(int* first, int* tile_start, int experts, int tile_rows,
                                            MoeTile* __restrict__ tiles, int32_t* __restrict__ num_tiles) {
  const int tid = threadIdx.x, buckets = experts + 1;
  for (int b = tid; b < buckets; b += blockDim.x) tile_start[b] = b < experts ? (first[b] + tile_rows - 1) / tile_rows : 0;
  __syncthreads();
  if (tid < 32) {
    warp0_exclusive_scan(first, buckets);
    const int t = warp0_exclusive_scan(tile_start, buckets);
    if (tid == 0 && tiles != nullptr) *num_tiles = t;
  }
  __syncthreads();
  if (tiles == nullptr) return;
  for (int e = tid; e < experts; e += blockDim.x) {
    const int lo = first[e], hi = first[e + 1];
    int t = tile_start[e];
    for (int r = lo; r < hi; r += tile_rows, ++t) tiles[t] = MoeTile{e, r, min(tile_rows, hi - r), 0};
  }
}

// ---- The fused sort: one launch for any step ----
// CTA c ranks slots [c·chunk, (c+1)·chunk). It needs, per bucket, the rows of the whole step (for
// the buckets' first rows) and the rows before its chunk: every CTA counts all the step's ids
// itself (shared-memory histograms; the ids are L2 hits after the first CTA: 192 KiB at 8K
// tokens), so no scratch, scan kernel or grid-wide wait is needed. Then the stable rank pass of
// its chunk writes sorted_slot and slot_row together (the inversion needs no pass of its own), and
// CTA 0 writes the tiles. The chunk grows past kFusedChunk only to keep the grid at most
// kFusedMaxCtas CTAs (the counting is repeated per CTA, so more CTAs would cost L2 traffic, not time).
constexpr int kFusedThreads = 512;
constexpr int kFusedChunk = 1024;
constexpr int kFusedMaxCtas = 128;
constexpr int kFusedBatch = 8;  // 16-byte id loads per thread in flight

// hist[bucket] += 1 for every slot of [lo, hi) (shared-memory atomics): 16-byte loads, kFusedBatch
// of them in flight per thread, when ids + lo is 16-byte aligned; the rest one id per load.
__device__ __forceinline__ void count_buckets(const int32_t* __restrict__ ids, int lo, int hi, int experts,
                                              int* hist) {
  const int tid = threadIdx.x;
  int s0 = lo;
  if ((reinterpret_cast<uintptr_t>(ids + lo) & 15) == 0) {
    const int n4 = (hi - lo) / 4;
    const int4* p = reinterpret_cast<const int4*>(ids + lo);
    for (int base = 0; base < n4; base += kFusedThreads * kFusedBatch) {
      int4 v[kFusedBatch];
#pragma unroll
      for (int j = 0; j < kFusedBatch; ++j) {
        const int i = base + j * kFusedThreads + tid;
        if (i < n4) v[j] = __ldg(p + i);
      }
#pragma unroll
      for (int j = 0; j < kFusedBatch; ++j)
        if (base + j * kFusedThreads + tid < n4) {
          const int q[4] = {v[j].x, v[j].y, v[j].z, v[j].w};
#pragma unroll
          for (int k = 0; k < 4; ++k) atomicAdd(&hist[unsigned(q[k]) < unsigned(experts) ? q[k] : experts], 1);
        }
    }
    s0 = lo + n4 * 4;
  }
  for (int s = s0 + tid; s < hi; s += kFusedThreads) atomicAdd(&hist[sort_bucket(ids, s, experts)], 1);
}

__global__ void __launch_bounds__(kFusedThreads) moe_sort_fused_kernel(const int32_t* __restrict__ ids, int slots,
                                                                       int experts, int tile_rows, int chunk,
                                                                       int K, int shared_rows,
                                                                       int32_t* __restrict__ sorted_slot,
                                                                       int32_t* __restrict__ slot_row,
                                                                       MoeTile* __restrict__ tiles,
                                                                       int32_t* __restrict__ num_tiles) {
  __shared__ int warp_count[kFusedThreads / 32][kMoeMaxExperts + 1];  // rows per (warp, bucket) in a pass
  __shared__ int before[kMoeMaxExperts + 1];  // rows per bucket before the chunk, then the chunk's next row
  __shared__ int total[kMoeMaxExperts + 1];   // rows per bucket from the chunk on, then all, then first rows
  __shared__ int tile_start[kMoeMaxExperts + 1];
  const int tid = threadIdx.x, buckets = experts + 1;
  for (int i = tid; i < (kFusedThreads / 32) * (kMoeMaxExperts + 1); i += kFusedThreads) (&warp_count[0][0])[i] = 0;
  for (int b = tid; b < buckets; b += kFusedThreads) before[b] = total[b] = 0;
  __syncthreads();
  pdl_grid_start();  // the ids are the router's output
  const int begin = int(blockIdx.x) * chunk, end = min(slots, begin + chunk);
  count_buckets(ids, 0, begin, experts, before);
  count_buckets(ids, begin, slots, experts, total);
  __syncthreads();
  for (int b = tid; b < buckets; b += kFusedThreads) total[b] += before[b];
  __syncthreads();
  write_tiles(total, tile_start, experts, tile_rows, blockIdx.x == 0 ? tiles : nullptr, num_tiles);
  if (blockIdx.x == 0 && shared_rows > 0) {  // the shared expert's rows after the routed ones (moe_route_sort)
    const int routed = tile_start[experts];  // write_tiles' scan: the routed tiles in all
    const int shared_tiles = (shared_rows + tile_rows - 1) / tile_rows;
    for (int i = tid; i < shared_tiles; i += kFusedThreads)
      tiles[routed + i] = MoeTile{experts, slots + i * tile_rows, min(tile_rows, shared_rows - i * tile_rows), 0};
    for (int t = tid; t < shared_rows; t += kFusedThreads) sorted_slot[slots + t] = t * K;  // gathers token t
    if (tid == 0) *num_tiles = routed + shared_tiles;
  }
  __syncthreads();
  for (int b = tid; b < buckets; b += kFusedThreads) before[b] += total[b];
  __syncthreads();
  stable_rank_pass<kFusedThreads>(ids, begin, end, experts, warp_count, before, [&](int s, int, int row) {
    sorted_slot[row] = s;
    slot_row[s] = row;
  });
}

// ---------------------------------------------------------------------------------------------
// Grouped GEMM: one CTA = one tile of TM expert-sorted rows × kBN output columns of NB weight
// matrices (NB = 2: gate and up, SwiGLU fused; NB = 1: down). See moe_grouped_tile.cuh for the
// shared-memory layout, the weight-tile loader policy and the warp-level MMA.

struct GroupedArgs {
  const bf16_t* a;             // activations [rows of A, kdim]
  const int32_t* sorted_slot;  // non-null: A row of sorted row r is sorted_slot[r] / slots_per_token (gather)
  int slots_per_token;
  int kdim;                    // reduction width
  int n;                       // output columns per matrix
  const MoeTile* tiles;
  const int32_t* num_tiles;
  bf16_t* out;                 // [T·K, n] in sorted row order
};

// Epilogue of one CTA's output block (columns n0..n0+kBN-1 of the tile's rows): elements half*2 and
// half*2+1 of each m16n8 C fragment are two adjacent columns of one row.
template <int TM, int NB, class WeightTile>
__device__ __forceinline__ void store_tile(const GroupedArgs& args, const WeightTile& weights, const MoeTile& tile,
                                           int n0, int warp, int lane, const float (&acc)[TM / 16][NB][2][4]) {
  float scale[NB];
#pragma unroll
  for (int j = 0; j < NB; ++j) scale[j] = weights.output_scale(tile.expert, j);
#pragma unroll
  for (int m = 0; m < TM / 16; ++m)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int r = m * 16 + c_frag_row(lane, half * 2);
      if (r >= tile.rows) continue;
      bf16_t* orow = args.out + int64_t(tile.first + r) * args.n;
#pragma unroll
      for (int t = 0; t < 2; ++t) {
        const int col = n0 + warp * 16 + t * 8 + c_frag_col(lane, 0);
        if (col >= args.n) continue;  // n % 8 == 0, so col + 1 < n as well
        float v[2];
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          if constexpr (NB == 2) {
            const float gv = round_bf16(acc[m][0][t][half * 2 + i] * scale[0]);
            const float uv = round_bf16(acc[m][1][t][half * 2 + i] * scale[1]);
            v[i] = silu_bf16(gv) * uv;
          } else {
            v[i] = acc[m][0][t][half * 2 + i] * scale[0];
          }
        }
        *reinterpret_cast<__nv_bfloat162*>(orow + col) = __floats2bfloat162_rn(v[0], v[1]);
      }
    }
}

template <int TM, int NB, class WeightTile>
__global__ void __launch_bounds__(kGroupedThreads, WeightTile::kMinBlocks) grouped_gemm_kernel(GroupedArgs args, WeightTile weights) {
  pdl_grid_start();  // see launch.cuh; the routing comes from the previous kernel
  if (int(blockIdx.x) >= *args.num_tiles) return;  // the grid is an upper bound on the tiles
  const MoeTile tile = args.tiles[blockIdx.x];
  const int n0 = blockIdx.y * kBN;
  constexpr int kStages = grouped_stages(TM, NB);
  constexpr int kAStages = grouped_a_stages(TM, NB, WeightTile::kPath, WeightTile::kFetchAhead);
  extern __shared__ uint4 smem_raw[];
  bf16_t* sa = reinterpret_cast<bf16_t*>(smem_raw);  // [kAStages][TM][kBK], then the B ring if the policy has one
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;

  // This thread's A chunks: rows tid/8 + 16i of the tile, 16-byte column chunk tid%8 of each k tile.
  constexpr int kARows = TM / (kGroupedThreads / 8);
  const int chunk = stage_chunk(tid);
  const bf16_t* a_src[kARows];
  bool a_ok[kARows];
#pragma unroll
  for (int i = 0; i < kARows; ++i) {
    const int r = stage_row(tid, i);
    a_ok[i] = r < tile.rows;
    int src = tile.first + (a_ok[i] ? r : 0);
    if (args.sorted_slot) src = args.sorted_slot[src] / args.slots_per_token;
    a_src[i] = args.a + int64_t(src) * args.kdim;
  }
  // Issues the A tile of k tile kt into stage `stage` by cp.async (its commit is left to the caller).
  auto issue_a = [&](int stage, int kt) {
    const int k = kt * kBK + chunk * 8;
    const bool k_ok = k < args.kdim;
    bf16_t* dst = sa + stage * TM * kBK;
#pragma unroll
    for (int i = 0; i < kARows; ++i) {
      cp_async16(dst + swizzled(stage_row(tid, i), chunk), a_ok[i] && k_ok ? a_src[i] + k : args.a, a_ok[i] && k_ok);
    }
  };
  float acc[TM / 16][NB][2][4];
#pragma unroll
  for (int m = 0; m < TM / 16; ++m)
#pragma unroll
    for (int j = 0; j < NB; ++j)
#pragma unroll
      for (int t = 0; t < 2; ++t) acc[m][j][t][0] = acc[m][j][t][1] = acc[m][j][t][2] = acc[m][j][t][3] = 0.f;

  const int k_tiles = (args.kdim + kBK - 1) / kBK;
  using Staged = typename WeightTile::Staged;
  if constexpr (WeightTile::kPath == WeightPath::SharedRing) {
    // kStages-deep cp.async ring of A and B tiles: stage kt+kStages-1 is filled while stage kt is multiplied.
    bf16_t* sb = sa + kAStages * TM * kBK;  // [kStages][NB][kBN][kBK]
    auto fill_stage = [&](int stage, int kt) {
      Staged staged;
      issue_a(stage, kt);
      weights.template fetch<NB>(staged, sb + stage * NB * kBN * kBK, tile.expert, n0, kt * kBK, args.n, args.kdim);
    };
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
      if (s < k_tiles) fill_stage(s, s);
      cp_async_commit();
    }
    for (int kt = 0; kt < k_tiles; ++kt) {
      cp_async_wait<kStages - 2>();  // stage kt has landed (for this thread) ...
      __syncthreads();               // ... for every thread, and stage kt-1 is no longer read
      const int next = kt + kStages - 1;
      if (next < k_tiles) fill_stage(next % kStages, next);
      cp_async_commit();
      const int stage = kt % kStages;
      warp_tile_mma<TM, NB>(sa + stage * TM * kBK, sb + stage * NB * kBN * kBK, warp * 16, lane, acc);
    }
  } else if constexpr (WeightTile::kPath == WeightPath::DecodedTiles) {
    bf16_t* sb = sa + kAStages * TM * kBK;  // [kStages][NB][kBN][kBK]
    auto fetch_b = [&](Staged& staged, int stage, int kt) {
      weights.template fetch<NB>(staged, sb + stage * NB * kBN * kBK, tile.expert, n0, kt * kBK, args.n, args.kdim);
    };
    auto commit_b = [&](const Staged& staged, int stage) {
      weights.template commit<NB>(staged, sb + stage * NB * kBN * kBK);
    };
    // Register fetch-ahead: k tile t's weights are loaded into slot t % kF kF tiles before the
    // iteration that decodes them, so each decode finds its loads landed. The loop is unrolled by
    // kF so every slot index is a constant and the slots stay in registers.
    // The A tiles (cp.async, one commit group per k tile) run kAStages - 1 tiles ahead in their own ring.
    constexpr int kF = WeightTile::kFetchAhead;
    Staged slot[kF];
    {
#pragma unroll
      for (int s = 0; s < kAStages - 1; ++s) {
        if (s < k_tiles) issue_a(s, s);
        cp_async_commit();
      }
      Staged first[kStages - 1];
#pragma unroll
      for (int s = 0; s < kStages - 1; ++s)
        if (s < k_tiles) fetch_b(first[s], s, s);
#pragma unroll
      for (int f = 0; f < kF; ++f)
        if (kStages - 1 + f < k_tiles) fetch_b(slot[(kStages - 1 + f) % kF], 0, kStages - 1 + f);
#pragma unroll
      for (int s = 0; s < kStages - 1; ++s)
        if (s < k_tiles) commit_b(first[s], s);
    }
    for (int kt0 = 0; kt0 < k_tiles; kt0 += kF) {
#pragma unroll
      for (int i = 0; i < kF; ++i) {
        const int kt = kt0 + i;  // kt0 % kF == 0, so tile kt + kStages - 1 is in slot (i + kStages - 1) % kF
        if (kt < k_tiles) {
          cp_async_wait<kAStages - 2>();  // A tile kt has landed (for this thread) ...
          __syncthreads();                // ... for every thread; B tile kt is decoded; A stage kt-1 is free
          const int next_a = kt + kAStages - 1;
          if (next_a < k_tiles) issue_a(next_a % kAStages, next_a);
          cp_async_commit();
          const int next = kt + kStages - 1;
          warp_tile_mma<TM, NB>(sa + (kt % kAStages) * TM * kBK, sb + (kt % kStages) * NB * kBN * kBK, warp * 16,
                                lane, acc);
          if (next < k_tiles) {
            Staged& st = slot[(i + kStages - 1) % kF];
            commit_b(st, next % kStages);
            if (next + kF < k_tiles) fetch_b(st, 0, next + kF);
          }
        }
      }
    }
  } else {  // WeightPath::Fragments
    // Weights in registers: k tile t's codes are loaded into slot t % kF kF tiles before the
    // iteration that decodes them into this warp's B fragments, so each decode finds its loads
    // landed; the loop is unrolled by kF so every slot index is a constant and the slots stay in
    // registers. The A tiles (cp.async, one commit group per k tile) run kAStages - 1 tiles ahead
    // in their own ring; the barrier of each k tile guards that ring alone.
    constexpr int kF = WeightTile::kFetchAhead;
    const int wn = n0 + warp * 16;
    Staged slot[kF];
#pragma unroll
    for (int s = 0; s < kAStages - 1; ++s) {
      if (s < k_tiles) issue_a(s, s);
      cp_async_commit();
    }
#pragma unroll
    for (int f = 0; f < kF; ++f)
      if (f < k_tiles) weights.template fetch_fragments<NB>(slot[f], tile.expert, wn, f * kBK, args.n, args.kdim);
    for (int kt0 = 0; kt0 < k_tiles; kt0 += kF) {
#pragma unroll
      for (int i = 0; i < kF; ++i) {
        const int kt = kt0 + i;  // kt0 % kF == 0, so tile kt is in slot i
        if (kt < k_tiles) {
          cp_async_wait<kAStages - 2>();  // A tile kt has landed (for this thread) ...
          __syncthreads();                // ... for every thread, and A stage kt-1 is no longer read
          const int next_a = kt + kAStages - 1;
          if (next_a < k_tiles) issue_a(next_a % kAStages, next_a);
          cp_async_commit();
          weights.template mma<TM, NB>(sa + (kt % kAStages) * TM * kBK, slot[i], lane, acc);
          if (kt + kF < k_tiles)
            weights.template fetch_fragments<NB>(slot[i], tile.expert, wn, (kt + kF) * kBK, args.n, args.kdim);
        }
      }
    }
  }
  cp_async_wait<0>();
  store_tile<TM, NB>(args, weights, tile, n0, warp, lane, acc);
}

// NVFP4 down of 16-row tiles (NB = 1, reduction I = 512 for Flint). The grouped kernel gives each
// (tile, 64-column block) its own CTA: 8 k tiles long, its prologue (the first codes requested,
// the A ring's first L2 gathers) a large share of it, and the tile's 16 A rows gathered again by
// each of its 32 column blocks. Here a CTA keeps the tile's A rows resident in shared memory
// (16 × kdim bf16, loaded once) for kResidentBlocks column blocks and runs one fetch-ahead over its
// (column block, k tile) pairs, so the next block's codes are in flight while this one finishes;
// with A resident and the weights in registers, the main loop has no barrier.
// Which steps take it: nvfp4_down_resident_a (moe_grouped_layout.h).
constexpr int kResidentBlocks = kNvfp4ResidentBlocks;

template <class WeightTile>
__global__ void __launch_bounds__(kGroupedThreads) grouped_down_resident_a_kernel(GroupedArgs args, WeightTile weights) {
  constexpr int TM = 16, NB = 1;
  static_assert(WeightTile::kPath == WeightPath::Fragments && kGroupedThreads == TM * 8,
                "one 16-byte chunk of one A row per thread and k tile");
  pdl_grid_start();  // see launch.cuh; the routing and the activations come from earlier kernels
  if (int(blockIdx.x) >= *args.num_tiles) return;  // the grid is an upper bound on the tiles
  const MoeTile tile = args.tiles[blockIdx.x];
  extern __shared__ uint4 smem_raw[];
  bf16_t* sa = reinterpret_cast<bf16_t*>(smem_raw);  // [k_tiles][TM][kBK], each k tile swizzled
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int k_tiles = args.kdim / kBK;  // NVFP4: kdim % 64 == 0
  {
    const int r = stage_row(tid, 0), chunk = stage_chunk(tid);
    const bool ok = r < tile.rows;
    const bf16_t* a_row = args.a + int64_t(tile.first + (ok ? r : 0)) * args.kdim;  // down: rows in sorted order
    for (int kt = 0; kt < k_tiles; ++kt)
      cp_async16(sa + kt * TM * kBK + swizzled(r, chunk), ok ? a_row + kt * kBK + chunk * 8 : args.a, ok);
    cp_async_commit();
  }
  const int cb0 = int(blockIdx.y) * kResidentBlocks;
  const int blocks = min(kResidentBlocks, (args.n + kBN - 1) / kBN - cb0);
  const int total = blocks * k_tiles;  // (column block, k tile) pairs, block-major
  constexpr int kF = WeightTile::kFetchAhead;
  using Staged = typename WeightTile::Staged;
  // The (column block, k tile) pair the next fetch loads, advanced without divisions.
  int fetch_cb = cb0, fetch_kt = 0;
  auto fetch_next = [&](Staged& st) {
    weights.template fetch_fragments<NB>(st, tile.expert, fetch_cb * kBN + warp * 16, fetch_kt * kBK, args.n,
                                         args.kdim);
    if (++fetch_kt == k_tiles) fetch_kt = 0, ++fetch_cb;
  };
  Staged slot[kF];
#pragma unroll
  for (int f = 0; f < kF; ++f)
    if (f < total) fetch_next(slot[f]);
  float acc[TM / 16][NB][2][4] = {};
  cp_async_wait<0>();
  __syncthreads();  // the A rows have landed for every thread
  int cb = cb0, kt = 0;  // the pair computed now
  for (int f0 = 0; f0 < total; f0 += kF) {
#pragma unroll
    for (int i = 0; i < kF; ++i) {
      const int f = f0 + i;  // f0 % kF == 0, so pair f is in slot i
      if (f < total) {
        weights.template mma<TM, NB>(sa + kt * TM * kBK, slot[i], lane, acc);
        if (f + kF < total) fetch_next(slot[i]);
        if (++kt == k_tiles) {  // this column block's sums are complete
          store_tile<TM, NB>(args, weights, tile, cb * kBN, warp, lane, acc);
#pragma unroll
          for (int t = 0; t < 2; ++t) acc[0][0][t][0] = acc[0][0][t][1] = acc[0][0][t][2] = acc[0][0][t][3] = 0.f;
          kt = 0, ++cb;
        }
      }
    }
  }
}

void check_grouped(const char* what, int T, int K, int kdim, int n, const MoeRouting& r) {
  auto fail = [&](const std::string& why) { throw Error(std::string(what) + ": " + why); };
  if (kdim <= 0 || kdim % 8 != 0) fail("reduction width " + std::to_string(kdim) + " is not a positive multiple of 8");
  if (n <= 0 || n % 8 != 0) fail("output width " + std::to_string(n) + " is not a positive multiple of 8");
  if (r.tile_rows != 16 && r.tile_rows != 64) fail("tile_rows " + std::to_string(r.tile_rows) + " is not 16 or 64");
  if (r.experts <= 0 || r.experts > kMoeMaxExperts)
    fail(std::to_string(r.experts) + " experts (1.." + std::to_string(kMoeMaxExperts) + " supported)");
  if (K <= 0 || int64_t(T) * K > (int64_t(1) << 30)) fail("bad routing size T=" + std::to_string(T));
  if ((n + kBN - 1) / kBN > 65535) fail("output width " + std::to_string(n) + " needs too many column blocks");
}

template <int TM, int NB, class WeightTile>
void launch_grouped(const GroupedArgs& args, const WeightTile& w, int T, int K, const MoeRouting& r,
                    cudaStream_t stream) {
  auto kernel = grouped_gemm_kernel<TM, NB, WeightTile>;
  constexpr int smem = grouped_smem_bytes(TM, NB, WeightTile::kPath, WeightTile::kFetchAhead);
  static_assert(smem <= 48 * 1024, "above 48 KiB a launch needs the opt-in attribute");
  const dim3 grid(unsigned(moe_max_tiles(int64_t(T) * K, r.experts, TM, w.shared_expert >= 0 ? T : 0)),
                  unsigned((args.n + kBN - 1) / kBN));
  launch_pdl(kernel, grid, dim3(kGroupedThreads), smem, stream, args, w);
}

template <int NB, class WeightTile>
void launch_grouped_any(const GroupedArgs& args, const WeightTile& w, int T, int K, const MoeRouting& r,
                        cudaStream_t stream) {
  if (r.tile_rows == 16) launch_grouped<16, NB>(args, w, T, K, r, stream);
  else launch_grouped<64, NB>(args, w, T, K, r, stream);
}

// NVFP4: 16-row gate/up tiles decode into register fragments (with the shallower fetch-ahead where
// the grid is wider than the machine: nvfp4_gate_up_many_ctas), 64-row tiles into shared-memory tiles
// (WeightPath: each measured the faster at its height); the 16-row down as nvfp4_down_resident_a says.
template <int NB, bool kShared>
void launch_grouped_nvfp4(const GroupedArgs& args, const Nvfp4Stacks& w, int T, int K, const MoeRouting& r,
                          cudaStream_t stream) {
  if (r.tile_rows != 16) {
    launch_grouped<64, NB>(args, Nvfp4TileWeights<kShared>{{w}}, T, K, r, stream);
  } else if constexpr (NB == 2) {
    if (nvfp4_gate_up_many_ctas(int64_t(T) * K))
      launch_grouped<16, NB>(args, Nvfp4FragmentWeightsWide<kShared>{{{w}}}, T, K, r, stream);
    else launch_grouped<16, NB>(args, Nvfp4FragmentWeights<kShared>{{w}}, T, K, r, stream);
  } else if (!nvfp4_down_resident_a(16, int64_t(T) * K, args.kdim)) {
    launch_grouped<16, NB>(args, Nvfp4FragmentWeightsWide<kShared>{{{w}}}, T, K, r, stream);
  } else {  // down: the A rows resident, several column blocks per CTA
    const int col_groups = ((args.n + kBN - 1) / kBN + kResidentBlocks - 1) / kResidentBlocks;
    const dim3 grid(unsigned(moe_max_tiles(int64_t(T) * K, r.experts, 16, w.shared_expert >= 0 ? T : 0)),
                    unsigned(col_groups));
    launch_pdl(grouped_down_resident_a_kernel<Nvfp4FragmentWeights<kShared>>, grid, dim3(kGroupedThreads),
               16 * args.kdim * int(sizeof(bf16_t)), stream, args, Nvfp4FragmentWeights<kShared>{{w}});
  }
}

bool misaligned(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes != 0; }

// The shared expert as expert E of a grouped GEMM: all its matrices given, and its width the experts'.
void check_shared(const char* what, bool matrices, int shared_inter, int inter) {
  if (!matrices) throw Error(std::string(what) + ": the shared expert has a null matrix");
  if (shared_inter != inter)
    throw Error(std::string(what) + ": shared expert width " + std::to_string(shared_inter) +
                " differs from the experts' " + std::to_string(inter) + " (it cannot be one more expert)");
}

// NVFP4 stacks: the reduction width must be whole 64-weight blocks (FLINT.md §3) and the code
// rows 16-byte aligned (one vector load per 32 weights).
void check_nvfp4_stack(const char* what, const char* name, const Nvfp4Stack& s, int kdim) {
  if (kdim % 64 != 0)
    throw Error(std::string(what) + ": NVFP4 reduction width " + std::to_string(kdim) + " is not a multiple of 64");
  if (!s.m.codes || !s.m.scales || !s.scale2)
    throw Error(std::string(what) + ": NVFP4 " + name + " stack has a null codes, scales or scale2 pointer");
  if (misaligned(s.m.codes, 16) || misaligned(s.m.scales, 4))
    throw Error(std::string(what) + ": NVFP4 " + name + " codes must be 16-byte and scales 4-byte aligned");
}

}  // namespace

void moe_route_sort(const int32_t* topk_ids, int T, int K, const MoeRouting& r, cudaStream_t stream, int shared_rows) {
  if (T <= 0) return;
  if (r.experts <= 0 || r.experts > kMoeMaxExperts)
    throw Error("moe_route_sort: " + std::to_string(r.experts) + " experts (1.." + std::to_string(kMoeMaxExperts) +
                " supported)");
  if (r.tile_rows != 16 && r.tile_rows != 64 && r.tile_rows != 128)
    throw Error("moe_route_sort: tile_rows " + std::to_string(r.tile_rows) + " is not 16, 64 or 128");
  if (K <= 0 || int64_t(T) * K >= (int64_t(1) << kMoeRankBits))
    throw Error("moe_route_sort: T=" + std::to_string(T) + " x K=" + std::to_string(K) + " slots exceed " +
                std::to_string(1 << kMoeRankBits));
  if (shared_rows < 0 || shared_rows > T)
    throw Error("moe_route_sort: " + std::to_string(shared_rows) + " shared-expert rows for " + std::to_string(T) +
                " tokens");
  const int slots = T * K;
  const int pieces = (slots + kFusedChunk - 1) / kFusedChunk;
  const int chunk = kFusedChunk * ((pieces + kFusedMaxCtas - 1) / kFusedMaxCtas);
  launch_pdl(moe_sort_fused_kernel, dim3(unsigned((slots + chunk - 1) / chunk)), dim3(kFusedThreads), 0, stream,
             topk_ids, slots, r.experts, r.tile_rows, chunk, K, shared_rows, r.sorted_slot, r.slot_row, r.tiles,
             r.num_tiles);
  STRIKER_CUDA_CHECK_LAUNCH("moe_route_sort");
}

void moe_grouped_gate_up(const bf16* x, int T, int K, int hidden, const bf16* w_gate, const bf16* w_up, int inter,
                         const MoeRouting& r, bf16* act_sorted, cudaStream_t stream, const Bf16SharedExpert* shared) {
  if (T <= 0) return;
  check_grouped("moe_grouped_gate_up", T, K, hidden, inter, r);
  const GroupedArgs args{reinterpret_cast<const bf16_t*>(x), r.sorted_slot, K, hidden, inter, r.tiles, r.num_tiles,
                         reinterpret_cast<bf16_t*>(act_sorted)};
  const bf16_t* m[2] = {reinterpret_cast<const bf16_t*>(w_gate), reinterpret_cast<const bf16_t*>(w_up)};
  if (shared != nullptr) {
    check_shared("moe_grouped_gate_up", shared->gate != nullptr && shared->up != nullptr, shared->inter, inter);
    const Bf16ExpertWeights<true> w{{m[0], m[1]},
                                    {reinterpret_cast<const bf16_t*>(shared->gate),
                                     reinterpret_cast<const bf16_t*>(shared->up)},
                                    r.experts};
    launch_grouped_any<2>(args, w, T, K, r, stream);
  } else {
    launch_grouped_any<2>(args, Bf16ExpertWeights<>{{m[0], m[1]}}, T, K, r, stream);
  }
  STRIKER_CUDA_CHECK_LAUNCH("moe_grouped_gate_up");
}

void moe_grouped_down(const bf16* act_sorted, int T, int K, int inter, const bf16* w_down, int hidden,
                      const MoeRouting& r, bf16* y_sorted, cudaStream_t stream, const Bf16SharedExpert* shared) {
  if (T <= 0) return;
  check_grouped("moe_grouped_down", T, K, inter, hidden, r);
  const GroupedArgs args{reinterpret_cast<const bf16_t*>(act_sorted), nullptr, K, inter, hidden, r.tiles, r.num_tiles,
                         reinterpret_cast<bf16_t*>(y_sorted)};
  const bf16_t* md = reinterpret_cast<const bf16_t*>(w_down);
  if (shared != nullptr) {
    check_shared("moe_grouped_down", shared->down != nullptr, shared->inter, inter);
    const Bf16ExpertWeights<true> w{{md, nullptr}, {reinterpret_cast<const bf16_t*>(shared->down), nullptr}, r.experts};
    launch_grouped_any<1>(args, w, T, K, r, stream);
  } else {
    launch_grouped_any<1>(args, Bf16ExpertWeights<>{{md, nullptr}}, T, K, r, stream);
  }
  STRIKER_CUDA_CHECK_LAUNCH("moe_grouped_down");
}

void moe_grouped_gate_up_nvfp4(const bf16* x, int T, int K, int hidden, const Nvfp4Stack& gate, const Nvfp4Stack& up,
                               int inter, const MoeRouting& r, bf16* act_sorted, cudaStream_t stream,
                               const Nvfp4Shared* shared) {
  if (T <= 0) return;
  check_grouped("moe_grouped_gate_up_nvfp4", T, K, hidden, inter, r);
  check_nvfp4_stack("moe_grouped_gate_up_nvfp4", "gate", gate, hidden);
  check_nvfp4_stack("moe_grouped_gate_up_nvfp4", "up", up, hidden);
  const GroupedArgs args{reinterpret_cast<const bf16_t*>(x), r.sorted_slot, K, hidden, inter, r.tiles, r.num_tiles,
                         reinterpret_cast<bf16_t*>(act_sorted)};
  Nvfp4Stacks w{{gate.m.codes, up.m.codes}, {gate.m.scales, up.m.scales}, {gate.scale2, up.scale2}};
  if (shared != nullptr) {
    check_shared("moe_grouped_gate_up_nvfp4", shared->gate.codes && shared->gate.scales && shared->up.codes &&
                 shared->up.scales, shared->inter, inter);
    w.shared_codes[0] = shared->gate.codes, w.shared_codes[1] = shared->up.codes;
    w.shared_scales[0] = shared->gate.scales, w.shared_scales[1] = shared->up.scales;
    w.shared_scale2[0] = shared->s2_gate, w.shared_scale2[1] = shared->s2_up;
    w.shared_expert = r.experts;
    launch_grouped_nvfp4<2, true>(args, w, T, K, r, stream);
  } else {
    launch_grouped_nvfp4<2, false>(args, w, T, K, r, stream);
  }
  STRIKER_CUDA_CHECK_LAUNCH("moe_grouped_gate_up_nvfp4");
}

void moe_grouped_down_nvfp4(const bf16* act_sorted, int T, int K, int inter, const Nvfp4Stack& down, int hidden,
                            const MoeRouting& r, bf16* y_sorted, cudaStream_t stream, const Nvfp4Shared* shared) {
  if (T <= 0) return;
  check_grouped("moe_grouped_down_nvfp4", T, K, inter, hidden, r);
  check_nvfp4_stack("moe_grouped_down_nvfp4", "down", down, inter);
  const GroupedArgs args{reinterpret_cast<const bf16_t*>(act_sorted), nullptr, K, inter, hidden, r.tiles, r.num_tiles,
                         reinterpret_cast<bf16_t*>(y_sorted)};
  Nvfp4Stacks w{{down.m.codes, nullptr}, {down.m.scales, nullptr}, {down.scale2, nullptr}};
  if (shared != nullptr) {
    check_shared("moe_grouped_down_nvfp4", shared->down.codes && shared->down.scales, shared->inter, inter);
    w.shared_codes[0] = shared->down.codes;
    w.shared_scales[0] = shared->down.scales;
    w.shared_scale2[0] = shared->s2_down;
    w.shared_expert = r.experts;
    launch_grouped_nvfp4<1, true>(args, w, T, K, r, stream);
  } else {
    launch_grouped_nvfp4<1, false>(args, w, T, K, r, stream);
  }
  STRIKER_CUDA_CHECK_LAUNCH("moe_grouped_down_nvfp4");
}

}  // namespace striker::cuda
