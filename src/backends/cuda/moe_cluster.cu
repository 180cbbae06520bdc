// Decode MoE (T <= 8, BF16 experts) in ONE launch per layer (moe.h, moe_cluster): the CTAs of one
// (token, expert slot) form a thread-block cluster.
//
// Why: moe_gate_up and moe_down_combine are two dependent launches (~3.6-4 us of launch latency
// each at batch 1), yet an expert's down rows only need the 512 SwiGLU activations of that same
// expert. Here cluster rank r computes its slice of the expert's activations with the gate/up
// kernel's dot code (bit-identical act), leaves it in its shared memory, and after a cluster
// barrier every CTA gathers the whole activation row through distributed shared memory and
// computes its slice of the expert's down rows with the down kernel's per-expert dot order
// (bit-identical bf16(act·Wd_e)). The weighted combine and the residual add need all K+1 slots of
// a token, so they are left to the next kernel, which runs anyway (moe_combine_rmsnorm /
// moe_combine in rmsnorm.h). A second barrier keeps every CTA's slice alive until all remote
// reads are done; every CTA reaches both barriers, including CTAs with no rows.
#include <cooperative_groups.h>

#include <algorithm>
#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/launch.cuh"
#include "backends/cuda/moe.h"
#include "backends/cuda/warp_dot.cuh"

namespace striker::cuda {
namespace {

namespace cg = cooperative_groups;

constexpr int kWarps = 8;
constexpr int kDownRows = 8;  // down rows per warp pass: 8 rows x 2 unrolled chunks = 16 loads in flight per lane
constexpr int kMaxTopK = 8;
constexpr int kMaxClusterSize = 16;  // non-portable above 8 (cudaFuncAttributeNonPortableClusterSizeAllowed)

// Activation rows per cluster rank: ceil(rows / C) rounded up to even (gate/up works in row pairs).
__host__ __device__ inline int act_rows_per_rank(int rows, int C) { return (((rows + C - 1) / C) + 1) & ~1; }

// grid.x = slots x C, cluster (C, 1, 1). Slot s = blockIdx.x / C: s < T*K is token s/K's routed
// expert s%K; s >= T*K is token s - T*K's shared expert. act_stride: shared-memory elements of the
// gathered activation row (max width of the launch's experts); the rank's slice follows it.
__global__ void __launch_bounds__(kWarps * 32) moe_cluster_kernel(
    const bf16_t* __restrict__ x, int T, int hidden, const bf16_t* __restrict__ wg, const bf16_t* __restrict__ wu,
    const bf16_t* __restrict__ wd, int inter, const int32_t* __restrict__ ids, int K, const bf16_t* __restrict__ sg,
    const bf16_t* __restrict__ su, const bf16_t* __restrict__ sd, int shared_inter, int act_stride,
    bool prefetch_down, bf16_t* __restrict__ y_slots) {
  extern __shared__ __align__(16) unsigned char moe_smem[];
  bf16_t* act_full = reinterpret_cast<bf16_t*>(moe_smem);  // [act_stride]: the expert's whole act row
  bf16_t* act_part = act_full + act_stride;                // this rank's slice
  pdl_grid_start();  // see launch.cuh (x and ids come from earlier kernels of the step)
  cg::cluster_group cluster = cg::this_cluster();
  const int C = int(cluster.num_blocks());
  const int rank = int(cluster.block_rank());
  const int slot = int(blockIdx.x) / C;
  const bool shared = slot >= T * K;
  const int rows = shared ? shared_inter : inter;
  const int t = shared ? slot - T * K : slot / K;
  const int k = shared ? K : slot % K;
  const int64_t e = shared ? 0 : int64_t(ids[slot]);
  const int warp = int(threadIdx.x >> 5), lane = int(threadIdx.x & 31);

  // This rank's down rows [dlo, dhi) of the expert: one contiguous block of (dhi - dlo) x rows bf16.
  const int hper = (hidden + C - 1) / C;
  const int dlo = min(rank * hper, hidden), dhi = min(dlo + hper, hidden);
  const bf16_t* d = shared ? sd : wd + e * hidden * inter;
  if (prefetch_down) {
    // Ask L2 for the whole block now (fire and forget, no registers): DRAM keeps streaming it
    // while phase 1 runs and across the barrier + gather seam, where no demand loads are in flight.
    const char* block = reinterpret_cast<const char*>(d + int64_t(dlo) * rows);
    const int64_t bytes = int64_t(dhi - dlo) * rows * int64_t(sizeof(bf16_t));
    for (int64_t off = int64_t(threadIdx.x) * 128; off < bytes; off += int64_t(kWarps) * 32 * 128)
      asm volatile("prefetch.global.L2 [%0];" ::"l"(block + off));
  }

  // Phase 1: act rows [lo, hi) of this rank, exactly as moe_gate_up_kernel computes them.
  const int per = act_rows_per_rank(rows, C);
  const int lo = rank * per, hi = min(lo + per, rows);
  const bf16_t* g = shared ? sg : wg + e * inter * hidden;
  const bf16_t* u = shared ? su : wu + e * inter * hidden;
  const bf16_t* xt = x + int64_t(t) * hidden;
  for (int o0 = lo + 2 * warp; o0 < hi; o0 += 2 * kWarps) {
    const int o1 = min(o0 + 1, hi - 1);
    const bf16_t* w[4] = {g + int64_t(o0) * hidden, u + int64_t(o0) * hidden, g + int64_t(o1) * hidden,
                          u + int64_t(o1) * hidden};
    const bf16_t* xr[4] = {xt, xt, xt, xt};
    float acc[4][1];
    warp_dot<4, 1>(w, xr, 0, 1, hidden, acc);
    if (lane < 2 && o0 + lane < hi) {
      const float gv = round_bf16(lane == 0 ? acc[0][0] : acc[2][0]);
      const float uv = round_bf16(lane == 0 ? acc[1][0] : acc[3][0]);
      act_part[o0 + lane - lo] = __float2bfloat16_rn(silu_bf16(gv) * uv);
    }
  }
  cluster.sync();  // every rank's slice is complete and visible cluster-wide

  // Gather the whole activation row: element i lives in rank i / per's slice.
  for (int i = int(threadIdx.x); i < rows; i += kWarps * 32) {
    const int owner = i / per;
    act_full[i] = cluster.map_shared_rank(act_part, unsigned(owner))[i - owner * per];
  }
  __syncthreads();

  // Phase 2: the down rows [dlo, dhi), each with moe_down_kernel's per-expert order
  // (lane's 16-byte chunks lane, lane+32, ...; fmaf over the 8 values; warp_sum; bf16).
  bf16_t* y = y_slots + (int64_t(t) * (K + 1) + k) * hidden;
  const int chunks = rows / 8;
  for (int o0 = dlo + warp * kDownRows; o0 < dhi; o0 += kWarps * kDownRows) {
    const bf16_t* w[kDownRows];
    float acc[kDownRows];
#pragma unroll
    for (int j = 0; j < kDownRows; ++j) {
      w[j] = d + int64_t(min(o0 + j, dhi - 1)) * rows;
      acc[j] = 0.f;
    }
#pragma unroll 2
    for (int c = lane; c < chunks; c += 32) {
      uint4 q[kDownRows];
#pragma unroll
      for (int j = 0; j < kDownRows; ++j) q[j] = load_stream(w[j] + int64_t(c) * 8);
      float fx[8];
      unpack8(*reinterpret_cast<const uint4*>(act_full + c * 8), fx);
#pragma unroll
      for (int j = 0; j < kDownRows; ++j) {
        float f[8];
        unpack8(q[j], f);
#pragma unroll
        for (int i = 0; i < 8; ++i) acc[j] = fmaf(f[i], fx[i], acc[j]);
      }
    }
#pragma unroll
    for (int j = 0; j < kDownRows; ++j) {
      const float s = round_bf16(warp_sum(acc[j]));
      if (lane == j && o0 + j < dhi) y[o0 + j] = __float2bfloat16_rn(s);
    }
  }
  cluster.sync();  // no CTA exits (freeing its slice) while another may still read it
}

void check_width(const char* what, int width) {
  if (width <= 0 || width % 8 != 0)
    throw Error(std::string("moe_cluster: ") + what + " " + std::to_string(width) +
                " is not a positive multiple of 8");
}

}  // namespace

void moe_cluster(const bf16* x, int T, int hidden, const bf16* w_gate, const bf16* w_up, const bf16* w_down,
                 int inter, const int32_t* topk_ids, int K, const bf16* shared_gate, const bf16* shared_up,
                 const bf16* shared_down, int shared_inter, bf16* y_slots, int cluster_size, bool prefetch_down,
                 cudaStream_t stream) {
  if (T <= 0) return;
  check_width("hidden", hidden);
  check_width("inter", inter);
  const bool has_shared = shared_gate != nullptr;
  if (has_shared) check_width("shared_inter", shared_inter);
  if (K <= 0 || K > kMaxTopK) throw Error("moe_cluster: top-k " + std::to_string(K) + " is not in 1..8");
  if (cluster_size < 1 || cluster_size > kMaxClusterSize)
    throw Error("moe_cluster: cluster size " + std::to_string(cluster_size) + " is not in 1..16");
  if (T > kMaxClusterTokens)
    throw Error("moe_cluster: " + std::to_string(T) + " tokens exceed the decode limit of " +
                std::to_string(kMaxClusterTokens));
  const int slots = T * K + (has_shared ? T : 0);
  const int act_stride = std::max(inter, has_shared ? shared_inter : 0);
  const int smem = int(sizeof(bf16_t)) * (act_stride + act_rows_per_rank(act_stride, cluster_size));
  auto* kernel = moe_cluster_kernel;
  static const bool configured = [&] {  // function attribute, set once (see attention_cluster.cu)
    STRIKER_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    return true;
  }();
  (void)configured;
  launch_pdl_cluster(kernel, dim3(unsigned(slots * cluster_size)), dim3(kWarps * 32), size_t(smem), cluster_size,
                     stream, reinterpret_cast<const bf16_t*>(x), T, hidden, reinterpret_cast<const bf16_t*>(w_gate),
                     reinterpret_cast<const bf16_t*>(w_up), reinterpret_cast<const bf16_t*>(w_down), inter, topk_ids, K,
                     reinterpret_cast<const bf16_t*>(shared_gate), reinterpret_cast<const bf16_t*>(shared_up),
                     reinterpret_cast<const bf16_t*>(shared_down), has_shared ? shared_inter : 0, act_stride,
                     prefetch_down, reinterpret_cast<bf16_t*>(y_slots));
  STRIKER_CUDA_CHECK_LAUNCH("moe_cluster_kernel");
}

}  // namespace striker::cuda
