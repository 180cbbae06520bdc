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

#include "backends/cuda/attention_decode_layout.h"
#include "backends/cuda/device_math.cuh"
#include "backends/cuda/tensor_core.cuh"

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

// Merges the CTA's kWarps warp states through shared memory and writes the split record at rec
// (G·2 floats of (m, l) per head, then G·D accumulators). Warp w's G×D accumulators go to
// acc + w·acc_stride floats; the caller guarantees nothing else uses that memory now.
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

// attention_pipe.cu: launches attention_pipe_kernel (kStages-deep ring, kMinBlocks CTAs per SM)
// over the grid (splits, KV heads, queries) with the given chunk; writes split records only (the
// caller launches the combine). variant: kDecodePipe3Stage or kDecodePipe2Stage (attention.h).
void launch_attention_pipe(int variant, dim3 grid, const bf16_t* q, const bf16_t* kc, const bf16_t* vc, int nkv,
                           int block_size, int window, const int32_t* positions, const int32_t* table_offset,
                           const int32_t* block_tables, const int32_t* query_ids, int chunk, int num_splits,
                           float* partials, cudaStream_t stream);
// CTAs per SM the variant is built for (sizes its split plan: one wave).
int attention_pipe_ctas_per_sm(int variant);

}  // namespace striker::cuda::decode
