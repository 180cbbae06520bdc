// Device side of the QKV projection's attention-front epilogue (qkv_front.h says how it works):
// rows into the cluster's first CTA, the cluster barrier, then qk_rope_kv.cuh's per-(token, head)
// code in that CTA — the same code as qk_rope_kv_kernel, so the same bits.
#pragma once
#include <cooperative_groups.h>

#include <cstdint>

#include "backends/cuda/attention/qk_rope_kv.cuh"
#include "backends/cuda/common/device_math.cuh"

namespace striker::cuda::front {

constexpr int kFrontHeadDim = 128;  // 32 lanes × 4 values (qk_rope_kv.cuh's E = 4)
constexpr int kFrontTokens = 8;

// AttentionFront on the device, plus the optional raw projection output.
struct FrontArgs {
  int nh, nkv;
  const float* q_norm_w;
  const float* k_norm_w;
  float eps;
  const int32_t* positions;
  const float* inv_freq;
  const int64_t* slots;
  int block_size;
  bf16_t* k_cache;
  bf16_t* v_cache;
  bf16_t* q_out;
  bf16_t* qkv;  // nullable
};

// Shared memory of the cluster's first CTA: the head's values of the step's tokens, and each
// token's norm weights and RoPE cos/sin by lane (in shared memory rather than registers, which the
// projection's loop needs: 12 more live registers spilled).
struct HeadBuffer {
  bf16_t v[kFrontTokens][kFrontHeadDim];
  Prep<4> prep[kFrontTokens][32];
};

// At the kernel's start: arrives on the cluster barrier that head_put waits on (every CTA of the
// cluster has started before any writes another's shared memory), and before griddepcontrol.wait
// (norm weights, RoPE cos/sin: weights and step metadata only, see qk_rope_kv_kernel) warp w of
// the cluster's first CTA prepares token t0 + w (w < nt) of `head`.
__device__ __forceinline__ void head_prepare(HeadBuffer& buf, const FrontArgs& a, int head, int t0, int nt) {
  asm volatile("barrier.cluster.arrive.relaxed;" ::: "memory");
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (cooperative_groups::this_cluster().block_rank() == 0 && warp < nt)
    prepare<4>(buf.prep[warp][lane], t0 + warp, head, a.nh, a.nkv, a.q_norm_w, a.k_norm_w, a.positions, a.inv_freq);
}

// Before the first head_put of a thread: the first CTA has started (head_prepare's arrival).
__device__ __forceinline__ void head_started() { asm volatile("barrier.cluster.wait;" ::: "memory"); }

// Token tok's projection row o (y already rounded to bf16) into the first CTA's buffer (and a.qkv).
__device__ __forceinline__ void head_put(HeadBuffer& buf, const FrontArgs& a, int rows, int t0, int tok, int o,
                                         float y) {
  bf16_t* first = cooperative_groups::this_cluster().map_shared_rank(&buf.v[0][0], 0);
  first[tok * kFrontHeadDim + o % kFrontHeadDim] = __float2bfloat16_rn(y);
  if (a.qkv != nullptr) a.qkv[int64_t(t0 + tok) * rows + o] = __float2bfloat16_rn(y);
}

// After every thread's head_put: the cluster barrier (release / acquire: the first CTA then sees
// every CTA's rows), and the first CTA's warp w runs the front of token t0 + w. Called by every
// thread of every CTA of the cluster.
__device__ __forceinline__ void head_finish(const HeadBuffer& buf, const FrontArgs& a, int head, int t0, int nt) {
  cooperative_groups::this_cluster().sync();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (cooperative_groups::this_cluster().block_rank() != 0 || warp >= nt) return;
  float x[4];
  lane_to_float<4>(*reinterpret_cast<const LaneVec<4>::T*>(&buf.v[warp][lane * 4]), x);
  finish<4>(x, buf.prep[warp][lane], t0 + warp, head, a.nh, a.nkv, a.eps, a.inv_freq, a.slots, a.block_size,
            a.k_cache, a.v_cache, a.q_out);
}

}  // namespace striker::cuda::front
