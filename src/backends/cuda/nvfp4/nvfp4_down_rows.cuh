// A warp's 16 rows of an NVFP4 MoE down projection on tensor cores (the fragment use is
// nvfp4_moe_mma.cu's header's): the weights of rows (g, g + 8) of every lane group loaded in one batch,
// then summed against the expert's activations by mma.sync. Shared by the one-token and per-slot down
// kernels (nvfp4_moe_mma.cu) and the one-launch MoE (nvfp4_moe_one_launch.cu), so all give the same bits.
#pragma once
#include <cstdint>

#include "backends/cuda/common/device_math.cuh"
#include "backends/cuda/nvfp4/nvfp4_decode.cuh"

namespace striker::cuda::nvfp4_down {

constexpr int kSteps = 4;  // 128-weight steps a warp loads in one batch

// A warp's share of one dot product of rows (top, bottom) over `in` weights: steps s0, s0 + 1, ...
// below s1, all loaded in one batch (kSteps at most; the callers' shapes keep it so).
struct MmaRows {
  uint4 qt[kSteps], qb[kSteps];
  uint32_t st[kSteps], sb[kSteps];
};

// in % 64 == 0: a lane's 32-weight chunk of a step is wholly inside the row or wholly past it (the
// last step of in % 128 == 64), and then its weights, scales and activations are zeros.
// kFull: in == kFullIn (Flint's inter), so s0 = 0, s1 = kSteps and every chunk is live: the same loads
// and MMAs without the predicates and zero fills.
constexpr int kFullIn = 128 * kSteps;
template <bool kFull = false>
__device__ __forceinline__ void load_rows(const uint8_t* ct, const uint8_t* stp, const uint8_t* cb, const uint8_t* sbp,
                                          int in, int t, int s0, int s1, MmaRows& r) {
#pragma unroll
  for (int u = 0; u < kSteps; ++u)
    if (kFull || s0 + u < s1) {
      const int64_t s = kFull ? u : s0 + u;
      const bool live = kFull || s * 128 + t * 32 < in;
      r.qt[u] = live ? load_stream(ct + s * 64 + t * 16) : make_uint4(0, 0, 0, 0);
      r.qb[u] = live ? load_stream(cb + s * 64 + t * 16) : make_uint4(0, 0, 0, 0);
      r.st[u] = live ? __ldcs(reinterpret_cast<const unsigned short*>(stp + s * 8 + t * 2)) : 0u;
      r.sb[u] = live ? __ldcs(reinterpret_cast<const unsigned short*>(sbp + s * 8 + t * 2)) : 0u;
    }
}

// kActFromL2: the activations were written by other CTAs of the same launch (the one-launch MoE), so
// they are read from L2 (load_from_l2), never through the read-only path.
template <bool kFull = false, bool kActFromL2 = false>
__device__ __forceinline__ void dot_rows(const MmaRows& r, const bf16_t* x, int in, int t, int s0, int s1,
                                         float (&c0)[4], float (&c1)[4]) {
  if constexpr (kFull) s0 = 0, s1 = kSteps;
  uint4 xq[kSteps][4];
#pragma unroll
  for (int u = 0; u < kSteps; ++u)
    if (s0 + u < s1) {
      const bool live = kFull || (s0 + u) * 128 + t * 32 < in;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        if constexpr (kActFromL2)
          xq[u][i] = live ? load_from_l2(x + int64_t(s0 + u) * 128 + t * 32 + i * 8) : make_uint4(0, 0, 0, 0);
        else
          xq[u][i] = live ? load_cached(x + int64_t(s0 + u) * 128 + t * 32 + i * 8) : make_uint4(0, 0, 0, 0);
      }
    }
#pragma unroll
  for (int u = 0; u < kSteps; ++u)
    if (s0 + u < s1) mma_chunk_pair(r.qt[u], r.st[u], r.qb[u], r.sb[u], xq[u], c0, c1);
}

}  // namespace striker::cuda::nvfp4_down
