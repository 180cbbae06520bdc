#include "backends/cuda/attention.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/launch.cuh"
#include "backends/cuda/tensor_core.cuh"
#include "backends/cuda/device_math.cuh"

namespace striker::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kTargetRecords = 1024;       // split records wanted per launch (fills 132 SMs several times)
constexpr float kNegInf = -__builtin_huge_valf();

constexpr float kLog2e = 1.4426950408889634f;

// Scores live in the log2 domain (s·log2(e)) so every exponential is one exp2.
// 2^(m_old - m_new), taking an empty state (m_old = -inf) to a zero weight instead of NaN.
__device__ __forceinline__ float rescale(float m_old, float m_new) {
  return m_old == kNegInf ? 0.f : exp2f(m_old - m_new);
}

// One CTA = one (split of keys, KV head, query). A lane group of D/8 lanes owns one key at a
// time, each lane 8 of its D dims (one 16-byte load of k and of v); the G query heads of the
// KV head live in registers, so each key is read once for all of them.
// U: keys per lane group loaded before any is used (memory parallelism vs registers).
template <int D, int G, int U>
__global__ void __launch_bounds__(kWarps * 32) attention_split_kernel(
    const bf16_t* __restrict__ q, const bf16_t* __restrict__ kc, const bf16_t* __restrict__ vc, int nkv,
    int block_size, int window, const int32_t* __restrict__ positions, const int32_t* __restrict__ table_offset,
    const int32_t* __restrict__ block_tables, const int32_t* __restrict__ query_ids, int chunk, int num_splits,
    float* __restrict__ partials) {
  pdl_grid_start();  // see launch.cuh
  constexpr int LPK = D / 8;        // lanes per key
  constexpr int KPW = 32 / LPK;     // keys per warp per step
  constexpr int KEYS_PER_STEP = kWarps * KPW * U;
  const int split = blockIdx.x, kvh = blockIdx.y, z = blockIdx.z;
  const int qi = query_ids ? query_ids[z] : z;  // z indexes the split records
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int grp = lane / LPK, sub = lane % LPK;
  const int nh = nkv * G;
  const int p = positions[qi];
  const int lo = window > 0 ? max(0, p - window + 1) : 0;
  const int kbeg = lo + split * chunk;
  const int kend = min(kbeg + chunk, p + 1);
  const int32_t* table = block_tables + table_offset[qi];
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
  for (int idx = threadIdx.x; idx < G * D; idx += kWarps * 32) {
    const int h = idx / D, c = idx % D;
    float mn = kNegInf;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) mn = fmaxf(mn, sm_m[w][h]);
    float a = 0.f, lt = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float sc = rescale(sm_m[w][h], mn);
      a += sm_acc[w][h][c] * sc;
      lt += sm_l[w][h] * sc;
    }
    rec[G * 2 + idx] = a;
    if (c == 0) {
      rec[2 * h] = mn;
      rec[2 * h + 1] = lt;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Tensor-core variant for head_dim 128 and 8 query heads per KV head (Flint's shape). Each warp
// takes 16-key tiles: S = Q·Kᵀ with mma.sync m16n8k16 (the 8 query heads are rows 0-7 of A,
// rows 8-15 are zero), online softmax on the S fragments, then O += P·V with P reused from the
// S fragments as the A operand. The dot-product order over head dims is permuted (same
// permutation for Q and K) so every thread reads whole 16-byte chunks; V is read in 16-byte
// chunks too and paired across keys with byte permutes.

__device__ __forceinline__ void mma_bf16(float (&d)[4], uint32_t a0, uint32_t a2, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(0u), "r"(a2), "r"(0u), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t word(const uint4& q, int i) {
  return i == 0 ? q.x : i == 1 ? q.y : i == 2 ? q.z : q.w;
}

template <int kMinBlocks>
__global__ void __launch_bounds__(kWarps * 32, kMinBlocks) attention_mma_kernel(
    const bf16_t* __restrict__ q, const bf16_t* __restrict__ kc, const bf16_t* __restrict__ vc, int nkv,
    int block_size, int window, const int32_t* __restrict__ positions, const int32_t* __restrict__ table_offset,
    const int32_t* __restrict__ block_tables, const int32_t* __restrict__ query_ids, int chunk, int num_splits,
    float* __restrict__ partials) {
  pdl_grid_start();  // see launch.cuh
  constexpr int D = 128, G = 8;
  const int split = blockIdx.x, kvh = blockIdx.y, z = blockIdx.z;
  const int qi = query_ids ? query_ids[z] : z;  // z indexes the split records
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, c = lane & 3;  // mma group (query head / key / dim chunk) and thread in group
  const int p = positions[qi];
  const int lo = window > 0 ? max(0, p - window + 1) : 0;
  const int kbeg = lo + split * chunk;
  const int kend = min(kbeg + chunk, p + 1);
  const int32_t* table = block_tables + table_offset[qi];
  const float score_scale = kLog2e / sqrtf(float(D));
  auto row = [&](const bf16_t* cache, int key, int dim) {
    const int64_t blk = table[key / block_size];
    return cache + ((blk * nkv + kvh) * block_size + key % block_size) * D + dim;
  };

  // A fragments of Q (head g), dims 32p + 8c .. +7 for k-steps 2p and 2p+1.
  uint32_t qa[8][2];
  const bf16_t* qh = q + (int64_t(qi) * nkv * G + kvh * G + g) * D;
#pragma unroll
  for (int pp = 0; pp < 4; ++pp) {
    const uint4 v = load_cached(qh + 32 * pp + 8 * c);
    qa[2 * pp][0] = v.x;
    qa[2 * pp][1] = v.y;
    qa[2 * pp + 1][0] = v.z;
    qa[2 * pp + 1][1] = v.w;
  }
  float o[16][4];
#pragma unroll
  for (int j = 0; j < 16; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.f;
  float m = kNegInf, l = 0.f;  // for head g (identical across the 4 threads of a group, l partial)

  for (int base = kbeg + warp * 16; base < kend; base += kWarps * 16) {
    // K rows base+g and base+8+g (4 chunks each); V rows base+2c, +1, +8, +9 (chunks g, g+8).
    uint4 kq[2][4], vq[4][2];
#pragma unroll
    for (int t = 0; t < 2; ++t) {
      const int key = base + 8 * t + g;
      const bool ok = key < kend;
#pragma unroll
      for (int pp = 0; pp < 4; ++pp) kq[t][pp] = ok ? load_stream(row(kc, key, 32 * pp + 8 * c)) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int key = base + 2 * c + (r & 1) + 8 * (r >> 1);
      const bool ok = key < kend;
#pragma unroll
      for (int h = 0; h < 2; ++h) vq[r][h] = ok ? load_stream(row(vc, key, 64 * h + 8 * g)) : make_uint4(0, 0, 0, 0);
    }
    float s[2][4];
#pragma unroll
    for (int t = 0; t < 2; ++t) {
      s[t][0] = s[t][1] = s[t][2] = s[t][3] = 0.f;
#pragma unroll
      for (int pp = 0; pp < 4; ++pp) {
        mma_bf16(s[t], qa[2 * pp][0], qa[2 * pp][1], kq[t][pp].x, kq[t][pp].y);
        mma_bf16(s[t], qa[2 * pp + 1][0], qa[2 * pp + 1][1], kq[t][pp].z, kq[t][pp].w);
      }
    }
    // s[t][0..1]: head g, keys base + 8t + 2c + {0,1}.
    float sc[4];
    float mx = m;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int key = base + 8 * (i >> 1) + 2 * c + (i & 1);
      sc[i] = key < kend ? s[i >> 1][i & 1] * score_scale : kNegInf;
      mx = fmaxf(mx, sc[i]);
    }
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const float scale = rescale(m, mx);
    float pr[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) pr[i] = sc[i] == kNegInf ? 0.f : exp2f(sc[i] - mx);
    l = l * scale + (pr[0] + pr[1] + pr[2] + pr[3]);
    m = mx;
    const uint32_t pa0 = pack_bf16x2(pr[0], pr[1]), pa2 = pack_bf16x2(pr[2], pr[3]);
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      o[j][0] *= scale;
      o[j][1] *= scale;
      // n-tile j: dim 8n + j (j < 8) or 64 + 8n + (j-8), n = g for this thread's B fragment.
      const int h = j >> 3, e = j & 7;
      const uint32_t sel = (e & 1) ? 0x7632u : 0x5410u;
      const uint32_t b0 = __byte_perm(word(vq[0][h], e >> 1), word(vq[1][h], e >> 1), sel);
      const uint32_t b1 = __byte_perm(word(vq[2][h], e >> 1), word(vq[3][h], e >> 1), sel);
      mma_bf16(o[j], pa0, pa2, b0, b1);
    }
  }
  l += __shfl_xor_sync(0xffffffffu, l, 1);
  l += __shfl_xor_sync(0xffffffffu, l, 2);

  // Merge the warps through shared memory; o[j][0..1] = O[head g][dims of columns 2c, 2c+1].
  __shared__ float sm_m[kWarps][G], sm_l[kWarps][G];
  __shared__ float sm_acc[kWarps][G][D];
#pragma unroll
  for (int j = 0; j < 16; ++j) {
    const int h = j >> 3, e = j & 7;
    sm_acc[warp][g][64 * h + 8 * (2 * c) + e] = o[j][0];
    sm_acc[warp][g][64 * h + 8 * (2 * c + 1) + e] = o[j][1];
  }
  if (c == 0) {
    sm_m[warp][g] = m;
    sm_l[warp][g] = l;
  }
  __syncthreads();
  float* rec = partials + ((int64_t(z) * nkv + kvh) * num_splits + split) * (G * (D + 2));
  for (int idx = threadIdx.x; idx < G * D; idx += kWarps * 32) {
    const int h = idx / D, col = idx % D;
    float mn = kNegInf;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) mn = fmaxf(mn, sm_m[w][h]);
    float a = 0.f, lt = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float sc = rescale(sm_m[w][h], mn);
      a += sm_acc[w][h][col] * sc;
      lt += sm_l[w][h] * sc;
    }
    rec[G * 2 + idx] = a;
    if (col == 0) {
      rec[2 * h] = mn;
      rec[2 * h + 1] = lt;
    }
  }
}

// One block of 4 warps per (query, head): merges the splits (warps take every 4th split, each
// lane D/32 dims) and adds the sink, whose logit enters the denominator once with no value.
template <int D, int G>
__global__ void __launch_bounds__(128) attention_combine_kernel(const float* __restrict__ partials,
                                                                const float* __restrict__ sinks, int nkv,
                                                                int num_splits,
                                                                const int32_t* __restrict__ query_ids,
                                                                bool records_by_id, bf16_t* __restrict__ out) {
  pdl_grid_start();  // see launch.cuh
  constexpr int E = D / 32, R = G * (D + 2);
  const int nh = nkv * G;
  const int z = blockIdx.x / nh, h = blockIdx.x % nh;
  const int qi = query_ids ? query_ids[z] : z;
  const int kvh = h / G, hh = h % G;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  // paged_attention stores the records of its z-th query at z; prefill_attention at the query's index.
  const float* recs = partials + (int64_t(records_by_id ? qi : z) * nkv + kvh) * num_splits * R;
  const float sink = sinks ? sinks[h] * kLog2e : kNegInf;
  __shared__ float red_m[4], red_l[4], red_a[4][D];
  float mx = kNegInf;
  for (int s = threadIdx.x; s < num_splits; s += 128) mx = fmaxf(mx, recs[int64_t(s) * R + 2 * hh]);
  mx = warp_max(mx);
  if (lane == 0) red_m[warp] = mx;
  __syncthreads();
  mx = fmaxf(fmaxf(fmaxf(red_m[0], red_m[1]), fmaxf(red_m[2], red_m[3])), sink);
  float a[E], den = 0.f;
#pragma unroll
  for (int e = 0; e < E; ++e) a[e] = 0.f;
#pragma unroll 4
  for (int s = warp; s < num_splits; s += 4) {
    const float* rec = recs + int64_t(s) * R;
    const float sc = rescale(rec[2 * hh], mx);
    den += rec[2 * hh + 1] * sc;
#pragma unroll
    for (int e = 0; e < E; ++e) a[e] += rec[G * 2 + hh * D + lane * E + e] * sc;
  }
#pragma unroll
  for (int e = 0; e < E; ++e) red_a[warp][lane * E + e] = a[e];
  if (lane == 0) red_l[warp] = den;
  __syncthreads();
  if (threadIdx.x < D) {
    const float total = red_a[0][threadIdx.x] + red_a[1][threadIdx.x] + red_a[2][threadIdx.x] + red_a[3][threadIdx.x];
    const float denom = rescale(sink, mx) + red_l[0] + red_l[1] + red_l[2] + red_l[3];
    // denom > 0: the query's own key is always in range.
    out[(int64_t(qi) * nh + h) * D + threadIdx.x] = __float2bfloat16_rn(total / denom);
  }
}

template <int D, int G>
void launch(const bf16* q, const bf16* k_cache, const bf16* v_cache, const float* sinks, const AttentionShape& s,
            const AttentionQueries& qs, const AttentionScratch& scratch, bf16* out, int unroll, cudaStream_t stream) {
  const int64_t heads_total = int64_t(qs.num_queries) * s.n_kv_heads;
  if (scratch.max_partials < heads_total)
    throw Error("paged_attention: scratch holds " + std::to_string(scratch.max_partials) + " records, needs at least " +
                std::to_string(heads_total));
  const int keys = std::max(1, qs.max_keys);
  const int64_t target = scratch.target_records > 0 ? scratch.target_records : kTargetRecords;
  const int64_t wanted = std::clamp<int64_t>(target / heads_total, 1, scratch.max_partials / heads_total);
  // Chunks are whole 64-key steps (4 warps x 16-key tiles).
  int chunk = std::max<int>(64, int((keys + wanted - 1) / wanted));
  chunk = (chunk + 63) / 64 * 64;
  int splits = (keys + chunk - 1) / chunk;
  if (heads_total * splits > scratch.max_partials) {  // only reachable when wanted was clamped to 1-ish sizes
    chunk = keys;
    splits = 1;
  }
  const dim3 grid(unsigned(splits), unsigned(s.n_kv_heads), unsigned(qs.num_queries));
  auto* kernel = unroll == 2 ? attention_split_kernel<D, G, 2> : attention_split_kernel<D, G, 4>;
  if constexpr (D == 128 && G == 8)
    if (unroll == 0) kernel = attention_mma_kernel<2>;
    else if (unroll == 1) kernel = attention_mma_kernel<3>;
  launch_pdl(kernel, dim3(grid), dim3(kWarps * 32), 0, stream, reinterpret_cast<const bf16_t*>(q), reinterpret_cast<const bf16_t*>(k_cache),
                                           reinterpret_cast<const bf16_t*>(v_cache), s.n_kv_heads, s.block_size,
                                           s.window, qs.positions, qs.table_offset, qs.block_tables, qs.query_ids,
                                           chunk, splits, scratch.data);
  STRIKER_CUDA_CHECK_LAUNCH("attention_split_kernel");
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

void paged_attention(const bf16* q, const bf16* k_cache, const bf16* v_cache, const float* sinks,
                     const AttentionShape& s, const AttentionQueries& qs, const AttentionScratch& scratch, bf16* out,
                     cudaStream_t stream, int unroll) {
  if (unroll < 0 || unroll > 4 || unroll == 3)
    throw Error("paged_attention: variant must be 0/1 (tensor cores where built), 2 or 4, got " + std::to_string(unroll));
  if (unroll <= 1 && !(s.head_dim == 128 && s.n_heads == 8 * s.n_kv_heads)) unroll = 4;
  if (qs.num_queries <= 0) return;
  if (qs.num_queries > 65535)
    throw Error("paged_attention: " + std::to_string(qs.num_queries) + " queries exceed one launch (65535)");
  if (s.n_kv_heads <= 0 || s.n_heads % s.n_kv_heads != 0 || s.block_size <= 0)
    throw Error("paged_attention: bad head shape " + std::to_string(s.n_heads) + "/" + std::to_string(s.n_kv_heads) +
                " or block size " + std::to_string(s.block_size));
  const int G = s.n_heads / s.n_kv_heads;
  // The query heads of a KV head live in registers together: G is a template parameter.
  auto by_group = [&](auto d_tag) {
    constexpr int D = decltype(d_tag)::value;
    switch (G) {
      case 1: return launch<D, 1>(q, k_cache, v_cache, sinks, s, qs, scratch, out, unroll, stream);
      case 2: return launch<D, 2>(q, k_cache, v_cache, sinks, s, qs, scratch, out, unroll, stream);
      case 4: return launch<D, 4>(q, k_cache, v_cache, sinks, s, qs, scratch, out, unroll, stream);
      case 8: return launch<D, 8>(q, k_cache, v_cache, sinks, s, qs, scratch, out, unroll, stream);
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
