#include "backends/cuda/attention/attention.h"
#include "backends/cuda/attention/attention_decode.cuh"

#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>

#include "backends/cuda/common/cuda_check.h"
#include "backends/cuda/common/launch.cuh"
#include "backends/cuda/common/stamps.cuh"
#include "backends/cuda/common/tensor_core.cuh"
#include "backends/cuda/common/device_math.cuh"

namespace striker::cuda {
namespace {

using decode::kLog2e;
using decode::kNegInf;
using decode::kWarps;
using decode::rescale;
constexpr int kTargetRecords = 1024;       // split records wanted per launch (fills 132 SMs several times)

// One CTA = one (split of keys, KV head, query). A lane group of D/8 lanes owns one key at a
// time, each lane 8 of its D dims (one 16-byte load of k and of v); the G query heads of the
// KV head live in registers, so each key is read once for all of them. For shapes the
// tensor-core kernels are not built for (head_dim 32/64, other group sizes).
constexpr int kKeysInFlight = 4;  // keys per lane group loaded before any is used (memory parallelism vs registers)
template <int D, int G>
__global__ void __launch_bounds__(kWarps * 32) attention_split_kernel(
    const bf16_t* __restrict__ q, const bf16_t* __restrict__ kc, const bf16_t* __restrict__ vc, int nkv,
    int block_size, int window, const int32_t* __restrict__ positions, const int32_t* __restrict__ table_offset,
    const int32_t* __restrict__ block_tables, const int32_t* __restrict__ query_ids, int num_splits,
    float* __restrict__ partials) {
  pdl_grid_start();  // see launch.cuh
  constexpr int U = kKeysInFlight;
  constexpr int LPK = D / 8;        // lanes per key
  constexpr int KPW = 32 / LPK;     // keys per warp per step
  constexpr int KEYS_PER_STEP = kWarps * KPW * U;
  const int split = blockIdx.x, kvh = blockIdx.y, z = blockIdx.z;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int grp = lane / LPK, sub = lane % LPK;
  const int nh = nkv * G;
  const decode::SplitKeys sk =
      decode::split_keys(positions, table_offset, block_tables, query_ids, z, split, num_splits, window);
  const int qi = sk.qi, kbeg = sk.kbeg, kend = sk.kend;
  const int32_t* table = sk.table;
  const float score_scale = kLog2e / sqrtf(float(D));

  float qf[G][8];
#pragma unroll
  for (int h = 0; h < G; ++h) unpack8(load_cached(q + (int64_t(qi) * nh + kvh * G + h) * D + sub * 8), qf[h]);
  float m[G], l[G], acc[G][8];
#pragma unroll
  for (int h = 0; h < G; ++h) {
    m[h] = kNegInf;
    l[h] = 0.f;
#pragma unroll
    for (int c = 0; c < 8; ++c) acc[h][c] = 0.f;
  }

  for (int base = kbeg; base < kend; base += KEYS_PER_STEP) {
    uint4 kq[U], vq[U];
    bool valid[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int j = base + (u * kWarps + warp) * KPW + grp;
      valid[u] = j < kend;
      kq[u] = vq[u] = make_uint4(0, 0, 0, 0);
      if (valid[u]) {
        const int64_t blk = table[j / block_size];
        const int64_t off = ((blk * nkv + kvh) * block_size + j % block_size) * D + sub * 8;
        kq[u] = load_stream(kc + off);
        vq[u] = load_stream(vc + off);
      }
    }
    float s[U][G];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      float kf[8];
      unpack8(kq[u], kf);
#pragma unroll
      for (int h = 0; h < G; ++h) {
        float dot = 0.f;
#pragma unroll
        for (int c = 0; c < 8; ++c) dot = fmaf(qf[h][c], kf[c], dot);
#pragma unroll
        for (int o = LPK / 2; o > 0; o >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
        s[u][h] = valid[u] ? dot * score_scale : kNegInf;
      }
    }
#pragma unroll
    for (int h = 0; h < G; ++h) {
      float mx = m[h];
#pragma unroll
      for (int u = 0; u < U; ++u) mx = fmaxf(mx, s[u][h]);
      const float c = rescale(m[h], mx);
      l[h] *= c;
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[h][e] *= c;
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const float pj = s[u][h] == kNegInf ? 0.f : exp2f(s[u][h] - mx);
        l[h] += pj;
        float vf[8];
        unpack8(vq[u], vf);
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[h][e] = fmaf(pj, vf[e], acc[h][e]);
      }
      m[h] = mx;
    }
  }

  // Merge the lane groups of this warp (partners hold the same dims).
#pragma unroll
  for (int o = LPK; o < 32; o <<= 1) {
#pragma unroll
    for (int h = 0; h < G; ++h) {
      const float m2 = __shfl_xor_sync(0xffffffffu, m[h], o);
      const float l2 = __shfl_xor_sync(0xffffffffu, l[h], o);
      const float mn = fmaxf(m[h], m2);
      const float c1 = rescale(m[h], mn), c2 = rescale(m2, mn);
      l[h] = l[h] * c1 + l2 * c2;
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        const float a2 = __shfl_xor_sync(0xffffffffu, acc[h][e], o);
        acc[h][e] = acc[h][e] * c1 + a2 * c2;
      }
      m[h] = mn;
    }
  }

  // Merge the warps through shared memory and write this split's record.
  __shared__ float sm_m[kWarps][G], sm_l[kWarps][G];
  __shared__ float sm_acc[kWarps][G][D];
  if (grp == 0) {
#pragma unroll
    for (int h = 0; h < G; ++h) {
#pragma unroll
      for (int e = 0; e < 8; ++e) sm_acc[warp][h][sub * 8 + e] = acc[h][e];
      if (sub == 0) {
        sm_m[warp][h] = m[h];
        sm_l[warp][h] = l[h];
      }
    }
  }
  __syncthreads();
  float* rec = partials + ((int64_t(z) * nkv + kvh) * num_splits + split) * (G * (D + 2));
  decode::merge_warps_into_record<G, D>(&sm_acc[0][0][0], G * D, sm_m, sm_l, rec);
}

// ---------------------------------------------------------------------------------------------
// Tensor-core kernel for head_dim 128 and 8 query heads per KV head (Flint's shape) when cache
// blocks are smaller than the pipelined kernel's 16-key tiles. Each warp takes 16-key tiles (keys
// kbeg + 16·warp + 64·i), loads its K and V pieces straight into registers and folds them in with
// decode::tile_update (attention_decode.cuh, the math shared with the pipelined kernel of
// attention_pipe.cu). Sized for 3 CTAs per SM.
__global__ void __launch_bounds__(kWarps * 32, 3) attention_mma_kernel(
    const bf16_t* __restrict__ q, const bf16_t* __restrict__ kc, const bf16_t* __restrict__ vc, int nkv,
    int block_size, int window, const int32_t* __restrict__ positions, const int32_t* __restrict__ table_offset,
    const int32_t* __restrict__ block_tables, const int32_t* __restrict__ query_ids, int num_splits,
    float* __restrict__ partials) {
  constexpr int D = 128, G = 8;
  pdl_launch_dependents();  // see launch.cuh
  const int split = blockIdx.x, kvh = blockIdx.y, z = blockIdx.z;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const decode::SplitKeys sk =
      decode::split_keys(positions, table_offset, block_tables, query_ids, z, split, num_splits, window);
  const int qi = sk.qi, kbeg = sk.kbeg, kend = sk.kend;
  const int32_t* table = sk.table;
  // Metadata only above, so it runs before the wait (attention_decode.cuh, "Metadata before the
  // PDL wait"); q and the KV cache, written by the kernel in front, only below.
  pdl_wait();
  const float score_scale = kLog2e / sqrtf(float(D));
  auto row = [&](const bf16_t* cache, int key, int dim) {
    const int64_t blk = table[key / block_size];
    return cache + ((blk * nkv + kvh) * block_size + key % block_size) * D + dim;
  };

  uint32_t qa[8][2];
  decode::load_q_fragments(q, qi, nkv, kvh, lane, qa);
  decode::WarpState st;
  decode::init_state(st);

  for (int base = kbeg + warp * 16; base < kend; base += kWarps * 16) {
    uint4 kq[2][4], vq[4][2];
#pragma unroll
    for (int t = 0; t < 2; ++t) {
      const int key = base + decode::k_frag_row(lane, t);
      const bool ok = key < kend;
#pragma unroll
      for (int pp = 0; pp < 4; ++pp)
        kq[t][pp] = ok ? load_stream(row(kc, key, 8 * decode::k_frag_chunk(lane, pp))) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int key = base + decode::v_frag_row(lane, r);
      const bool ok = key < kend;
#pragma unroll
      for (int h = 0; h < 2; ++h)
        vq[r][h] = ok ? load_stream(row(vc, key, 8 * decode::v_frag_chunk(lane, h))) : make_uint4(0, 0, 0, 0);
    }
    decode::tile_update(st, qa, kq, vq, base, kend, score_scale, lane);
  }

  __shared__ float sm_m[kWarps][G], sm_l[kWarps][G];
  __shared__ float sm_acc[kWarps][G][D];
  float* rec = partials + ((int64_t(z) * nkv + kvh) * num_splits + split) * (G * (D + 2));
  decode::write_split_record(st, &sm_acc[0][0][0], G * D, sm_m, sm_l, rec, lane, warp);
}

// One block of 4 warps per (query, head): merges the splits and adds the sink
// (decode::combine_head).
template <int D, int G>
__global__ void __launch_bounds__(128) attention_combine_kernel(const float* __restrict__ partials,
                                                                const float* __restrict__ sinks, int nkv,
                                                                int num_splits,
                                                                const int32_t* __restrict__ query_ids,
                                                                bool records_by_id, bf16_t* __restrict__ out) {
  STRIKER_STAMPS_CTA(kAttentionCombine);
  pdl_launch_dependents();  // see launch.cuh
  constexpr int R = G * (D + 2);
  const int nh = nkv * G;
  const int z = blockIdx.x / nh, h = blockIdx.x % nh;
  const int qi = query_ids ? query_ids[z] : z;
  const int kvh = h / G, hh = h % G;
  const float sink = decode::sink_log2(sinks, h);
  // Query ids (step metadata) and sinks (weights) only above, so they are read before the wait
  // (attention_decode.cuh, "Metadata before the PDL wait"); the partials come from the split kernel.
  pdl_wait();
  STRIKER_STAMP(1);
  // paged_attention stores the records of its z-th query at z; prefill_attention at the query's index.
  const float* recs = partials + (int64_t(records_by_id ? qi : z) * nkv + kvh) * num_splits * R;
  decode::combine_head<D, G>([&](int s) { return recs + int64_t(s) * R; }, num_splits, hh, sink,
                             out + (int64_t(qi) * nh + h) * D);
}

// One query (a batch-1 decode step): combine_head_wide over kWideWarps warps, one batch of loads. Only
// there: with 8 queries the combine's gain went to the o_proj behind it, whose weight stream it had been
// hiding, and the step lost 0.02–0.07 ms (seventeenth session). kWideWarps·32 threads × ≤ 80 registers
// (the 3-CTA bound), so a combine CTA still fits beside the two split CTAs of an SM.
constexpr int kWideWarps = decode::kWideCombineWarps, kWideBatch = 9;
template <int D, int G>
__global__ void __launch_bounds__(kWideWarps * 32, 3) attention_combine_wide_kernel(
    const float* __restrict__ partials, const float* __restrict__ sinks, int nkv, int num_splits,
    bf16_t* __restrict__ out) {
  STRIKER_STAMPS_CTA(kAttentionCombine);
  pdl_launch_dependents();  // see launch.cuh
  constexpr int R = G * (D + 2);
  const int h = blockIdx.x, kvh = h / G, hh = h % G;
  const float sink = decode::sink_log2(sinks, h);
  pdl_wait();  // the partials come from the split kernel
  STRIKER_STAMP(1);
  const float* recs = partials + int64_t(kvh) * num_splits * R;
  decode::combine_head_wide<D, G, kWideWarps, kWideBatch>([&](int s) { return recs + int64_t(s) * R; }, num_splits,
                                                          hh, sink, out + int64_t(h) * D);
}

// front: the pipelined kernel runs the attention front itself (paged_attention_with_front).
template <int D, int G>
void launch(const bf16* q, const bf16* k_cache, const bf16* v_cache, const float* sinks, const AttentionShape& s,
            const AttentionQueries& qs, const AttentionScratch& scratch, bf16* out, cudaStream_t stream,
            const decode::FrontArgs* front = nullptr) {
  const int64_t heads_total = int64_t(qs.num_queries) * s.n_kv_heads;
  if (scratch.max_partials < heads_total)
    throw Error("paged_attention: scratch holds " + std::to_string(scratch.max_partials) + " records, needs at least " +
                std::to_string(heads_total));
  constexpr bool tensor_cores = D == 128 && G == 8;
  const bool pipelined = tensor_cores && s.block_size >= decode::kMinBlockSize;
  int64_t target = scratch.target_records > 0 ? scratch.target_records : kTargetRecords;
  if (pipelined) target = std::max<int64_t>(1, target * decode::kPipeCtasPerSm / 3);
  // The number of splits per (query, KV head); each CTA takes its share of its own query's keys
  // (decode::split_key_range), so a bound above the real key counts (a graph's key bucket) leaves
  // no split empty.
  const int planned = decode::plan_decode_split_count(decode::plan_keys(qs.max_keys, s.window), heads_total, target,
                                                      scratch.max_partials);
  const int splits = qs.max_splits > 0 ? std::min(planned, qs.max_splits) : planned;
  const auto* kb = reinterpret_cast<const bf16_t*>(k_cache);
  const auto* vb = reinterpret_cast<const bf16_t*>(v_cache);
  // Queries go on grid.z: more than kMaxGridYZ are split into launches of consecutive queries. A
  // launch sees its queries as z = 0..n-1 and finds query z through query_ids (shifted to the
  // slice) or, without ids, at index z of positions / table offsets / q (shifted); its records go
  // to the slice's place, so the combine below reads them at the step-wide z as always.
  const int64_t record_floats = int64_t(s.n_kv_heads) * splits * attention_partial_floats(s);
  bool combined = false;
  for (int first = 0; first < qs.num_queries; first += kMaxGridYZ) {
    const int n = std::min(qs.num_queries - first, kMaxGridYZ);
    const bool by_id = qs.query_ids != nullptr;
    const int32_t* ids = by_id ? qs.query_ids + first : nullptr;
    const int32_t* positions = by_id ? qs.positions : qs.positions + first;
    const int32_t* offsets = by_id ? qs.table_offset : qs.table_offset + first;
    const auto* qb = reinterpret_cast<const bf16_t*>(q) + (by_id ? 0 : int64_t(first) * s.n_heads * D);
    float* records = scratch.data + int64_t(first) * record_floats;
    const dim3 grid(unsigned(splits), unsigned(s.n_kv_heads), unsigned(n));
    if (pipelined && front != nullptr && qs.merge_in_cluster && qs.num_queries == 1 &&
        splits <= decode::kMaxClusterSplits) {
      // The combine inside the split kernel (one launch; the wide combine's bits: attention_pipe.cu).
      decode::launch_attention_pipe_cluster(grid, kb, vb, s.n_kv_heads, s.block_size, s.window, positions, offsets,
                                            qs.block_tables, *front, sinks, reinterpret_cast<bf16_t*>(out), stream);
      combined = true;
    } else if (pipelined) {
      decode::launch_attention_pipe(grid, qb, kb, vb, s.n_kv_heads, s.block_size, s.window, positions, offsets,
                                    qs.block_tables, ids, qs.num_queries, splits, records, stream, front);
    } else if (front != nullptr) {
      throw Error("paged_attention: the front runs only in the pipelined kernel");
    } else if constexpr (tensor_cores) {  // cache blocks below 16 tokens
      launch_pdl(attention_mma_kernel, dim3(grid), dim3(kWarps * 32), 0, stream, qb, kb, vb, s.n_kv_heads,
                 s.block_size, s.window, positions, offsets, qs.block_tables, ids, splits, records);
    } else {  // CUDA-core kernel (other shapes; not on Flint's decode path): waits first
      launch_pdl(attention_split_kernel<D, G>, dim3(grid), dim3(kWarps * 32), 0, stream, qb, kb, vb, s.n_kv_heads,
                 s.block_size, s.window, positions, offsets, qs.block_tables, ids, splits, records);
    }
    STRIKER_CUDA_CHECK_LAUNCH("attention_split_kernel");
  }
  if (combined) return;
  if (qs.num_queries == 1 && qs.query_ids == nullptr)
    launch_pdl(attention_combine_wide_kernel<D, G>, dim3(unsigned(s.n_heads)), dim3(kWideWarps * 32), 0, stream,
               scratch.data, sinks, s.n_kv_heads, splits, reinterpret_cast<bf16_t*>(out));
  else
    launch_pdl(attention_combine_kernel<D, G>, dim3(unsigned(qs.num_queries * s.n_heads)), dim3(128), 0, stream,
               scratch.data, sinks, s.n_kv_heads, splits, qs.query_ids, false, reinterpret_cast<bf16_t*>(out));
  STRIKER_CUDA_CHECK_LAUNCH("attention_combine_kernel");
}

}  // namespace

int64_t attention_partial_floats(const AttentionShape& s) {
  const int G = s.n_kv_heads > 0 ? s.n_heads / s.n_kv_heads : 0;
  return int64_t(G) * (s.head_dim + 2);
}

void attention_combine_splits(const float* partials, const float* sinks, const AttentionShape& s, int num_queries,
                              const int32_t* query_ids, int num_splits, bf16* out, cudaStream_t stream) {
  if (s.head_dim != 128 || s.n_heads != 8 * s.n_kv_heads)
    throw Error("attention_combine_splits: only head_dim 128 with 8 query heads per KV head is built (got " +
                std::to_string(s.head_dim) + ", " + std::to_string(s.n_heads) + "/" + std::to_string(s.n_kv_heads) + ")");
  if (num_queries <= 0) return;
  launch_pdl(attention_combine_kernel<128, 8>, dim3(unsigned(num_queries * s.n_heads)), dim3(128), 0, stream, partials,
             sinks, s.n_kv_heads, num_splits, query_ids, true, reinterpret_cast<bf16_t*>(out));
  STRIKER_CUDA_CHECK_LAUNCH("attention_combine_kernel");
}

bool attention_front_in_split_kernel(const AttentionShape& s, const AttentionQueries& qs) {
  const bool queries = qs.num_queries == 1 || (qs.one_query_per_sequence && qs.num_queries >= 1 &&
                                               qs.num_queries <= kMaxGridYZ);
  return queries && qs.query_ids == nullptr && s.head_dim == decode::kHeadDim &&
         s.n_heads == decode::kGroup * s.n_kv_heads && s.block_size >= decode::kMinBlockSize;
}

void paged_attention_with_front(const AttentionFront& f, bf16* k_cache, bf16* v_cache, const float* sinks,
                                const AttentionShape& s, const AttentionQueries& qs, const AttentionScratch& scratch,
                                bf16* out, cudaStream_t stream) {
  if (!attention_front_in_split_kernel(s, qs))
    throw Error("paged_attention_with_front: needs one query (or one per sequence, at most 65,535), no query ids, "
                "head_dim 128, 8 query heads per KV head and cache "
                "blocks of >= 16 tokens (got " + std::to_string(qs.num_queries) + " queries, head_dim " +
                std::to_string(s.head_dim) + ", " + std::to_string(s.n_heads) + "/" + std::to_string(s.n_kv_heads) +
                " heads, block " + std::to_string(s.block_size) + ")");
  decode::FrontArgs fa;
  fa.qkv = reinterpret_cast<const bf16_t*>(f.qkv);
  fa.q_norm_w = f.q_norm_w;
  fa.k_norm_w = f.k_norm_w;
  fa.eps = f.eps;
  fa.inv_freq = f.inv_freq;
  fa.slot = f.slots;
  fa.k_cache = reinterpret_cast<bf16_t*>(k_cache);
  fa.v_cache = reinterpret_cast<bf16_t*>(v_cache);
  launch<128, 8>(nullptr, k_cache, v_cache, sinks, s, qs, scratch, out, stream, &fa);
}

void paged_attention(const bf16* q, const bf16* k_cache, const bf16* v_cache, const float* sinks,
                     const AttentionShape& s, const AttentionQueries& qs, const AttentionScratch& scratch, bf16* out,
                     cudaStream_t stream) {
  if (qs.num_queries <= 0) return;
  if (s.n_kv_heads <= 0 || s.n_heads % s.n_kv_heads != 0 || s.block_size <= 0)
    throw Error("paged_attention: bad head shape " + std::to_string(s.n_heads) + "/" + std::to_string(s.n_kv_heads) +
                " or block size " + std::to_string(s.block_size));
  const int G = s.n_heads / s.n_kv_heads;
  // The query heads of a KV head live in registers together: G is a template parameter.
  auto by_group = [&](auto d_tag) {
    constexpr int D = decltype(d_tag)::value;
    switch (G) {
      case 1: return launch<D, 1>(q, k_cache, v_cache, sinks, s, qs, scratch, out, stream);
      case 2: return launch<D, 2>(q, k_cache, v_cache, sinks, s, qs, scratch, out, stream);
      case 4: return launch<D, 4>(q, k_cache, v_cache, sinks, s, qs, scratch, out, stream);
      case 8: return launch<D, 8>(q, k_cache, v_cache, sinks, s, qs, scratch, out, stream);
      default:
        throw Error("paged_attention: " + std::to_string(G) + " query heads per KV head (1, 2, 4 or 8 are built)");
    }
  };
  switch (s.head_dim) {
    case 32: by_group(std::integral_constant<int, 32>{}); break;
    case 64: by_group(std::integral_constant<int, 64>{}); break;
    case 128: by_group(std::integral_constant<int, 128>{}); break;
    default: throw Error("paged_attention: head_dim " + std::to_string(s.head_dim) + " is not 32, 64 or 128");
  }
}

}  // namespace striker::cuda
