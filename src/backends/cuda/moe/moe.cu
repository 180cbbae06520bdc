#include "backends/cuda/moe/moe.h"

#include <algorithm>
#include <string>

#include "backends/cuda/common/cuda_check.h"
#include "backends/cuda/common/launch.cuh"
#include "backends/cuda/common/stamps.cuh"
#include "backends/cuda/common/tensor_core.cuh"
#include "backends/cuda/common/warp_dot.cuh"
#include "backends/cuda/elementwise/rmsnorm_row.cuh"

namespace striker::cuda {
namespace {

constexpr int kWarps = 8;

constexpr int kMaxTopK = 8;

// grid (row-pair groups, T*K [+ T]): each group of kGateUpSplit warps computes gate and up of two
// rows of one slot, each warp over 1/kGateUpSplit of the input (split-K, the parts summed in shared
// memory in part order). Slots t*K+k are routed experts; slots T*K+t (when a shared expert is given)
// are token t's shared expert.
// Why split: a warp holding the whole input of 4 weight rows (32 chunks per lane) issues them in two
// rounds of 16 (the loop's unroll), two dependent DRAM round trips; halved, each lane's 16 loads go
// out at once (448 CTAs of a Flint token, one wave at 64 registers, 4 per SM); quartered, 8 loads
// per lane and 896 CTAs. Measured at T = 1 (H200, BF16 8K step): whole rows 2.656 ms, halves 2.579
// (thirteenth session), quarters 2.455 against halves 2.491 (fourteenth; batch 8 6.653 vs 6.642,
// noise). Every T takes the same split, so a step of T tokens gives the bits of T one-token steps.
constexpr int kGateUpSplit = 4;
constexpr int kGateUpRowsPerCta = kWarps / kGateUpSplit * 2;

__global__ void __launch_bounds__(kWarps * 32) moe_gate_up_kernel(
    const bf16_t* __restrict__ x, int T, int hidden, const bf16_t* __restrict__ wg, const bf16_t* __restrict__ wu,
    int inter, const int32_t* __restrict__ ids, int K, bf16_t* __restrict__ act, const bf16_t* __restrict__ sg,
    const bf16_t* __restrict__ su, int shared_inter, bf16_t* __restrict__ shared_act) {
  constexpr int kPre = 2;  // shared-expert chunks per lane loaded before the wait
  constexpr int S = kGateUpSplit;
  STRIKER_STAMPS_CTA(kMoeGateUp);
  pdl_launch_dependents();  // see launch.cuh
  const int warp = threadIdx.x >> 5, part = warp % S;
  const int o0 = (blockIdx.x * (kWarps / S) + warp / S) * 2;
  const int slot = blockIdx.y;
  const bool shared = slot >= T * K;
  const int rows = shared ? shared_inter : inter;
  const bool live = o0 < rows;  // (dead warps still reach the barrier below)
  const int t = shared ? slot - T * K : slot / K;
  const int o1 = min(o0 + 1, rows - 1);
  auto rows_of = [&](const bf16_t* g, const bf16_t* u, const bf16_t* (&w)[4]) {
    w[0] = g + int64_t(o0) * hidden, w[1] = u + int64_t(o0) * hidden;
    w[2] = g + int64_t(o1) * hidden, w[3] = u + int64_t(o1) * hidden;
  };
  const bf16_t* xt = x + int64_t(t) * hidden;
  const bf16_t* xr[4] = {xt, xt, xt, xt};
  float acc[4][1];
  const bf16_t* w[4];
  if (shared) {  // the shared expert's rows do not depend on the routing: start them before the wait
    rows_of(sg, su, w);
    WarpDotPrologue<4, kPre> pr;
    if (live) warp_dot_prologue<4, kPre>(w, hidden, pr, part, S);
    pdl_wait();  // x comes from the previous kernel
    STRIKER_STAMP(1);
    if (live) warp_dot_after_prologue<4, 1, kPre>(pr, w, xr, 0, 1, hidden, acc, part, S);
  } else {
    pdl_wait();  // x and the routing come from earlier kernels
    STRIKER_STAMP(1);
    rows_of(wg + int64_t(ids[slot]) * inter * hidden, wu + int64_t(ids[slot]) * inter * hidden, w);
    if (live) warp_dot<4, 1>(w, xr, 0, 1, hidden, acc, part, S);
  }
  __shared__ float red[kWarps][4];  // the S parts of each row group, summed in part order
  if ((threadIdx.x & 31) == 0)
#pragma unroll
    for (int r = 0; r < 4; ++r) red[warp][r] = live ? acc[r][0] : 0.f;
  __syncthreads();
  if (part != 0 || !live) return;
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    float v = 0.f;
#pragma unroll
    for (int p = 0; p < S; ++p) v += red[warp + p][r];
    acc[r][0] = v;
  }
  const int lane = threadIdx.x & 31;
  if (lane < 2 && o0 + lane < rows) {
    const float gv = round_bf16(lane == 0 ? acc[0][0] : acc[2][0]);
    const float uv = round_bf16(lane == 0 ? acc[1][0] : acc[3][0]);
    bf16_t* dst = shared ? shared_act + int64_t(t) * shared_inter : act + int64_t(slot) * inter;
    dst[o0 + lane] = __float2bfloat16_rn(silu_bf16(gv) * uv);
  }
}

// The down kernels' shared steps (moe_down_kernel, moe_down_one_round_kernel: the same bits).
// One 16-byte chunk of the warp's two down rows (w0, w1) times the act chunk x, added to acc[0], acc[1].
__device__ __forceinline__ void moe_down_add_chunk(const uint4& w0, const uint4& w1, const uint4& x, float (&acc)[2]) {
  float f0[8], f1[8], fx[8];
  unpack8(w0, f0);
  unpack8(w1, f1);
  unpack8(x, fx);
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    acc[0] = fmaf(f0[i], fx[i], acc[0]);
    acc[1] = fmaf(f1[i], fx[i], acc[1]);
  }
}

// y of the two rows: the fp32 weighted sum, in k order, of each routed expert's bf16 row output.
template <int KM>
__device__ __forceinline__ void moe_down_weighted_sum(const float (&acc)[KM][2], int K, const float* __restrict__ tw,
                                                      float& y0, float& y1) {
  float sum0 = 0.f, sum1 = 0.f;
#pragma unroll
  for (int k = 0; k < KM; ++k)
    if (k < K) {
      sum0 = fmaf(tw[k], round_bf16(warp_sum(acc[k][0])), sum0);
      sum1 = fmaf(tw[k], round_bf16(warp_sum(acc[k][1])), sum1);
    }
  y0 = round_bf16(sum0), y1 = round_bf16(sum1);
}

// h[t, o0 + lane] = bf16(h + y) for lanes 0 and 1 (y0, y1).
__device__ __forceinline__ void moe_down_add_residual(bf16_t* __restrict__ h, int t, int hidden, int o0, int lane,
                                                      float y0, float y1) {
  if (lane < 2 && o0 + lane < hidden) {
    const int64_t idx = int64_t(t) * hidden + o0 + lane;
    h[idx] = __float2bfloat16_rn(__bfloat162float(h[idx]) + (lane == 0 ? y0 : y1));
  }
}

// One warp's two output rows o0, o0 + 1 of token blockIdx.y (moe_down_kernel).
__device__ __forceinline__ void moe_down_rows(const bf16_t* __restrict__ act, int K, const bf16_t* __restrict__ wd,
                                              int inter, int hidden, const int32_t* __restrict__ ids,
                                              const float* __restrict__ topk_w, const bf16_t* __restrict__ shared_act,
                                              const bf16_t* __restrict__ wd_shared, int shared_inter,
                                              bf16_t* __restrict__ h, int o0) {
  const int t = blockIdx.y;
  const int o1 = min(o0 + 1, hidden - 1);
  const int lane = threadIdx.x & 31;
  const bf16_t* w0[kMaxTopK];
  const bf16_t* w1[kMaxTopK];
  const bf16_t* xa[kMaxTopK];
  float acc[kMaxTopK][2];
#pragma unroll
  for (int k = 0; k < kMaxTopK; ++k) {
    const int slot = t * K + min(k, K - 1);
    const int64_t base = int64_t(ids[slot]) * hidden;
    w0[k] = wd + (base + o0) * inter;
    w1[k] = wd + (base + o1) * inter;
    xa[k] = act + int64_t(slot) * inter;
    acc[k][0] = acc[k][1] = 0.f;
  }
  for (int c = lane; c < inter / 8; c += 32) {
    uint4 q0[kMaxTopK], q1[kMaxTopK], qx[kMaxTopK];
#pragma unroll
    for (int k = 0; k < kMaxTopK; ++k)
      if (k < K) {
        q0[k] = load_stream(w0[k] + c * 8);
        q1[k] = load_stream(w1[k] + c * 8);
        qx[k] = load_cached(xa[k] + c * 8);
      }
#pragma unroll
    for (int k = 0; k < kMaxTopK; ++k)
      if (k < K) moe_down_add_chunk(q0[k], q1[k], qx[k], acc[k]);
  }
  float y0, y1;
  moe_down_weighted_sum<kMaxTopK>(acc, K, topk_w + t * K, y0, y1);
  if (shared_act != nullptr) {
    const bf16_t* w[2] = {wd_shared + int64_t(o0) * shared_inter, wd_shared + int64_t(o1) * shared_inter};
    const bf16_t* xs = shared_act + int64_t(t) * shared_inter;
    const bf16_t* xr[2] = {xs, xs};
    float sacc[2][1];
    warp_dot<2, 1>(w, xr, 0, 1, shared_inter, sacc);
    y0 = round_bf16(y0 + round_bf16(sacc[0][0]));
    y1 = round_bf16(y1 + round_bf16(sacc[1][0]));
  }
  moe_down_add_residual(h, t, hidden, o0, lane, y0, y1);
}

// One token at Flint's widths (inter = shared_inter = 512: two 16-byte chunks per lane and row, K <= 6):
// moe_down_kernel's work with every load of a warp issued in one round — the shared expert's down
// rows before the wait, then both chunks of all K routed rows and their act — instead of two rounds
// of the routed rows and a third of the shared expert's. The same per-lane fma order (chunk lane, then
// lane + 32, each accumulator on its own) and the same reductions: moe_down_kernel's bits, so a step
// of T tokens (the slot kernel below) still gives the bits of T one-token steps. 192 registers, so one
// 64-register QKV CTA would fit beside it; the launch reserves kOneRoundSmem of shared memory it never
// uses to keep it off (see moe_down_kernel on why). Measured (H200, thirteenth session, BF16 8K step):
// 2.582 -> 2.508 ms, 2.495 with the reservation.
constexpr int kOneRoundTopK = 6;
constexpr int kOneRoundInter = 512;
constexpr size_t kOneRoundSmem = 216 * 1024;

__global__ void __launch_bounds__(kWarps * 32) moe_down_one_round_kernel(
    const bf16_t* __restrict__ act, int K, const bf16_t* __restrict__ wd, int inter, int hidden,
    const int32_t* __restrict__ ids, const float* __restrict__ topk_w, const bf16_t* __restrict__ shared_act,
    const bf16_t* __restrict__ wd_shared, int shared_inter, bf16_t* __restrict__ h) {
  constexpr int kChunks = 2;  // per lane and row: 512 / 8 / 32
  STRIKER_STAMPS_CTA(kMoeDown);
  pdl_launch_dependents();  // see launch.cuh
  const int o0 = (blockIdx.x * kWarps + (threadIdx.x >> 5)) * 2;
  const int t = blockIdx.y;
  const int o1 = min(o0 + 1, hidden - 1);
  const int lane = threadIdx.x & 31;
  const bool live = o0 < hidden, has_sh = shared_act != nullptr;
  uint4 sw[2][kChunks];
  if (live && has_sh)
#pragma unroll
    for (int j = 0; j < kChunks; ++j) {
      sw[0][j] = load_stream(wd_shared + int64_t(o0) * shared_inter + (lane + 32 * j) * 8);
      sw[1][j] = load_stream(wd_shared + int64_t(o1) * shared_inter + (lane + 32 * j) * 8);
    }
  pdl_wait();  // ids, weights, act, shared act and h come from earlier kernels
  STRIKER_STAMP(1);
  if (!live) return;
  // The routing weights and h now, so their L2 round trips overlap the dot products (seventeenth
  // session, with the one-token GEMVs' residual: −0.02 ms per step).
  float tw[kOneRoundTopK], hv = 0.f;
#pragma unroll
  for (int k = 0; k < kOneRoundTopK; ++k) tw[k] = k < K ? topk_w[t * K + k] : 0.f;
  if (lane < 2 && o0 + lane < hidden) hv = __bfloat162float(h[int64_t(t) * hidden + o0 + lane]);
  uint4 q0[kChunks][kOneRoundTopK], q1[kChunks][kOneRoundTopK], qx[kChunks][kOneRoundTopK], sx[kChunks];
#pragma unroll
  for (int k = 0; k < kOneRoundTopK; ++k)
    if (k < K) {
      const int slot = t * K + k;
      const int64_t base = int64_t(ids[slot]) * hidden;
      const bf16_t* w0 = wd + (base + o0) * inter;
      const bf16_t* w1 = wd + (base + o1) * inter;
      const bf16_t* xa = act + int64_t(slot) * inter;
#pragma unroll
      for (int j = 0; j < kChunks; ++j) {
        q0[j][k] = load_stream(w0 + (lane + 32 * j) * 8);
        q1[j][k] = load_stream(w1 + (lane + 32 * j) * 8);
        qx[j][k] = load_cached(xa + (lane + 32 * j) * 8);
      }
    }
  if (has_sh)
#pragma unroll
    for (int j = 0; j < kChunks; ++j) sx[j] = load_cached(shared_act + int64_t(t) * shared_inter + (lane + 32 * j) * 8);
  float acc[kOneRoundTopK][2];
#pragma unroll
  for (int k = 0; k < kOneRoundTopK; ++k) acc[k][0] = acc[k][1] = 0.f;
#pragma unroll
  for (int j = 0; j < kChunks; ++j)
#pragma unroll
    for (int k = 0; k < kOneRoundTopK; ++k)
      if (k < K) moe_down_add_chunk(q0[j][k], q1[j][k], qx[j][k], acc[k]);
  float y0, y1;
  moe_down_weighted_sum<kOneRoundTopK>(acc, K, tw, y0, y1);
  if (has_sh) {  // (the two rows one after the other: this order keeps the measured schedule)
    float s0 = 0.f, s1 = 0.f;
#pragma unroll
    for (int j = 0; j < kChunks; ++j) {
      float f0[8], f1[8], fx[8];
      unpack8(sw[0][j], f0);
      unpack8(sx[j], fx);
#pragma unroll
      for (int i = 0; i < 8; ++i) s0 = fmaf(f0[i], fx[i], s0);
      unpack8(sw[1][j], f1);
#pragma unroll
      for (int i = 0; i < 8; ++i) s1 = fmaf(f1[i], fx[i], s1);
    }
    y0 = round_bf16(y0 + round_bf16(warp_sum(s0)));
    y1 = round_bf16(y1 + round_bf16(warp_sum(s1)));
  }
  if (lane < 2 && o0 + lane < hidden) h[int64_t(t) * hidden + o0 + lane] = __float2bfloat16_rn(hv + (lane == 0 ? y0 : y1));
}

// grid (row pairs, T): each warp produces two rows of the token's MoE output (the shapes
// moe_down_one_round_kernel does not take). All K experts' rows are loaded together (K <= 8,
// unrolled) so a lane has up to 24 loads in flight; the fp32 weighted sum of bf16 expert outputs is
// followed by the shared expert and the residual.
// Its 202 registers (1 CTA per SM) are load-bearing: compiled for K <= 6 (119 registers) two of the
// next layer's QKV CTAs fit beside it and stream their weights before their wait, and the step got
// 0.18 ms slower at BF16 8K (thirteenth session, docs/performance.md).
__global__ void __launch_bounds__(kWarps * 32) moe_down_kernel(
    const bf16_t* __restrict__ act, int K, const bf16_t* __restrict__ wd, int inter, int hidden,
    const int32_t* __restrict__ ids, const float* __restrict__ topk_w, const bf16_t* __restrict__ shared_act,
    const bf16_t* __restrict__ wd_shared, int shared_inter, bf16_t* __restrict__ h) {
  STRIKER_STAMPS_CTA(kMoeDown);
  pdl_grid_start();  // see launch.cuh
  STRIKER_STAMP(1);
  const int o0 = (blockIdx.x * kWarps + (threadIdx.x >> 5)) * 2;
  if (o0 < hidden) moe_down_rows(act, K, wd, inter, hidden, ids, topk_w, shared_act, wd_shared, shared_inter, h, o0);
}

// Decode steps of 2-8 tokens: the down projection slot by slot, y[s] = bf16(act_s·Wd_e) for routed
// slot s (and bf16(shared_act_t·Wd_shared) for the shared expert's slots T*K + t), then the combine
// kernel below (identity slot order) forms h. Each warp owns 4 rows of one slot and loads all their
// chunks at once (inter 512: 8 weight loads per lane); a CTA reads 32 consecutive rows (32 KB) of
// one expert. moe_down_kernel instead has each warp gather 2 rows of all K experts of a token at
// 202 registers (one CTA per SM, ~8 waves of two dependent round trips each at T = 8: 0.51 of the
// bandwidth). Per row the chunks are added in moe_down_kernel's order and the combine adds the
// K rounded outputs in k order: the same bits.
constexpr int kSlotRows = 4;  // rows per warp

__global__ void __launch_bounds__(kWarps * 32) moe_down_slots_kernel(
    const bf16_t* __restrict__ act, int T, int K, const bf16_t* __restrict__ wd, int inter, int hidden,
    const int32_t* __restrict__ ids, const bf16_t* __restrict__ shared_act, const bf16_t* __restrict__ wd_shared,
    int shared_inter, bf16_t* __restrict__ y) {
  pdl_grid_start();  // see launch.cuh
  const int o0 = (blockIdx.x * kWarps + (threadIdx.x >> 5)) * kSlotRows;
  if (o0 >= hidden) return;
  const int s = blockIdx.y;
  const bool shared = s >= T * K;
  const int in = shared ? shared_inter : inter;
  const bf16_t* base = shared ? wd_shared : wd + int64_t(ids[s]) * hidden * inter;
  const bf16_t* xs = shared ? shared_act + int64_t(s - T * K) * shared_inter : act + int64_t(s) * inter;
  const bf16_t* w[kSlotRows];
  const bf16_t* xr[kSlotRows];
#pragma unroll
  for (int r = 0; r < kSlotRows; ++r) {
    w[r] = base + int64_t(min(o0 + r, hidden - 1)) * in;
    xr[r] = xs;
  }
  float acc[kSlotRows][1];
  warp_dot<kSlotRows, 1>(w, xr, 0, 1, in, acc);
  const int lane = threadIdx.x & 31;
  if (lane < kSlotRows && o0 + lane < hidden) {
    float v = acc[0][0];
#pragma unroll
    for (int r = 1; r < kSlotRows; ++r)
      if (lane == r) v = acc[r][0];
    y[int64_t(s) * hidden + o0 + lane] = __float2bfloat16_rn(v);
  }
}

// Each thread combines 8 consecutive columns of one token with 16-byte loads (K expert rows, the
// shared expert's row and h); a prefill step streams ~K·T·hidden·2 bytes here, so scalar 2-byte
// loads (the first version: 191 µs at T = 8192, 0.31 of the roofline) left most of HBM idle.
// grid (column blocks, min(T, 65535)): tokens stride over grid.y, so a prefill step of any length
// (up to the model's 262,144-token context) is one launch.
constexpr int kCombineThreads = 128;
constexpr int kCombineCols = 8;  // bf16 per 16-byte vector

__device__ __forceinline__ void load8(const bf16_t* p, float (&v)[kCombineCols]) {
  const uint4 u = *reinterpret_cast<const uint4*>(p);
  const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    v[2 * i] = __uint_as_float(w[i] << 16);
    v[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
  }
}

// h[t, o..o+8) = bf16(h + bf16(bf16(Σ_k w·y) + y_shared)) of one token's 8 columns, written back;
// returns the new h values.
__device__ __forceinline__ uint4 combine8(const bf16_t* __restrict__ ys, const int32_t* __restrict__ inv,
                                          const float* __restrict__ topk_w, const bf16_t* __restrict__ ysh, int t,
                                          int K, int hidden, int o, bf16_t* __restrict__ h) {
  const int64_t slot = int64_t(t) * K;
  float sum[kCombineCols] = {};
  for (int k = 0; k < K; ++k) {
    float y[kCombineCols];
    load8(ys + (inv != nullptr ? int64_t(inv[slot + k]) : slot + k) * hidden + o, y);
    const float wk = topk_w[slot + k];
#pragma unroll
    for (int i = 0; i < kCombineCols; ++i) sum[i] = fmaf(wk, y[i], sum[i]);
  }
  const int64_t idx = int64_t(t) * hidden + o;
  float sh[kCombineCols], hv[kCombineCols];
  if (ysh != nullptr) load8(ysh + idx, sh);
  load8(h + idx, hv);
  uint32_t out[4];
#pragma unroll
  for (int i = 0; i < kCombineCols; i += 2) {
    float r[2];
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      float y = round_bf16(sum[i + j]);
      if (ysh != nullptr) y = round_bf16(y + sh[i + j]);
      r[j] = hv[i + j] + y;
    }
    out[i / 2] = pack_bf16x2(r[0], r[1]);
  }
  const uint4 v = make_uint4(out[0], out[1], out[2], out[3]);
  *reinterpret_cast<uint4*>(h + idx) = v;
  return v;
}

__global__ void __launch_bounds__(kCombineThreads) moe_combine_sorted_kernel(
    const bf16_t* __restrict__ ys, const int32_t* __restrict__ inv, const float* __restrict__ topk_w,
    const bf16_t* __restrict__ ysh, int T, int K, int hidden, bf16_t* __restrict__ h) {
  pdl_grid_start();  // see launch.cuh
  const int o = (blockIdx.x * kCombineThreads + threadIdx.x) * kCombineCols;
  if (o >= hidden) return;
  for (int t = blockIdx.y; t < T; t += gridDim.y) combine8(ys, inv, topk_w, ysh, t, K, hidden, o, h);
}

// The combine with the next RMSNorm in the same pass: one CTA of kRmsnormRowThreads per token row
// (rows stride over grid.x); the new h row also goes into shared memory, from where x = rmsnorm(h)
// is computed in rmsnorm_row.cuh's thread assignment and order (the rmsnorm kernel's bits).
__global__ void __launch_bounds__(kRmsnormRowThreads) moe_combine_sorted_norm_kernel(
    const bf16_t* __restrict__ ys, const int32_t* __restrict__ inv, const float* __restrict__ topk_w,
    const bf16_t* __restrict__ ysh, int T, int K, int hidden, bf16_t* __restrict__ h,
    const float* __restrict__ gamma, float eps, bf16_t* __restrict__ x_out) {
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ float partial[kRmsnormRowThreads / 32];
  pdl_launch_dependents();  // see launch.cuh
  // The norm's weights (no earlier kernel writes them) are pulled into L2 while the kernel in front
  // drains: one 128-byte line per thread, so a cold gamma does not add an HBM round trip at the end.
  for (int i = int(threadIdx.x) * 32; i < hidden; i += kRmsnormRowThreads * 32)
    asm volatile("prefetch.global.L2 [%0];" ::"l"(gamma + i));
  pdl_wait();
  auto* row = reinterpret_cast<bf16_t*>(smem);
  for (int t = blockIdx.x; t < T; t += gridDim.x) {
    for (int o = int(threadIdx.x) * kCombineCols; o < hidden; o += kRmsnormRowThreads * kCombineCols)
      *reinterpret_cast<uint4*>(row + o) = combine8(ys, inv, topk_w, ysh, t, K, hidden, o, h);
    __syncthreads();
    const float ss = rmsnorm_partial(hidden, [&](int i) { return __bfloat162float(row[i]); });
    const float r = rmsnorm_scale(ss, hidden, eps, partial);  // its barriers also free `row` for the next t
    bf16_t* x = x_out + int64_t(t) * hidden;
    for (int i = int(threadIdx.x); i < hidden; i += kRmsnormRowThreads)
      x[i] = __float2bfloat16_rn(rmsnorm_apply(__bfloat162float(row[i]), r, gamma[i]));
    __syncthreads();
  }
}

void check_width(const char* what, int width) {
  if (width <= 0 || width % 8 != 0)
    throw Error(std::string(what) + ": width " + std::to_string(width) + " is not a positive multiple of 8");
}

}  // namespace

void moe_gate_up(const bf16* x, int T, int hidden, const bf16* w_gate, const bf16* w_up, int inter,
                 const int32_t* topk_ids, int K, bf16* act, const bf16* shared_gate, const bf16* shared_up,
                 int shared_inter, bf16* shared_act, cudaStream_t stream) {
  if (T <= 0) return;
  check_width("moe_gate_up", hidden);
  const bool has_shared = shared_act != nullptr;
  if (int64_t(T) * (K + 1) > 65535)
    throw Error("moe_gate_up: " + std::to_string(T) + " tokens x " + std::to_string(K + 1) +
                " slots exceed one launch (65535); split the batch");
  const int rows = std::max(inter, has_shared ? shared_inter : 0);
  const dim3 grid(unsigned((rows + kGateUpRowsPerCta - 1) / kGateUpRowsPerCta), unsigned(T * K + (has_shared ? T : 0)));
  launch_pdl(moe_gate_up_kernel, dim3(grid), dim3(kWarps * 32), 0, stream, reinterpret_cast<const bf16_t*>(x), T,
             hidden, reinterpret_cast<const bf16_t*>(w_gate), reinterpret_cast<const bf16_t*>(w_up), inter, topk_ids,
             K, reinterpret_cast<bf16_t*>(act), reinterpret_cast<const bf16_t*>(shared_gate),
             reinterpret_cast<const bf16_t*>(shared_up), shared_inter, reinterpret_cast<bf16_t*>(shared_act));
  STRIKER_CUDA_CHECK_LAUNCH("moe_gate_up");
}

void moe_down_combine(const bf16* act, int T, int K, const bf16* w_down, int inter, int hidden,
                      const int32_t* topk_ids, const float* topk_w, const bf16* shared_act,
                      const bf16* w_down_shared, int shared_inter, bf16* h, cudaStream_t stream, bf16* y_scratch,
                      const RowNorm* next_norm) {
  if (T <= 0) return;
  if (K <= 0 || K > kMaxTopK) throw Error("moe_down_combine: top-k " + std::to_string(K) + " is not in 1..8");
  check_width("moe_down_combine", inter);
  if (shared_act) check_width("moe_down_combine (shared)", shared_inter);
  if (y_scratch != nullptr && T >= 2) {
    const int slots = T * K + (shared_act ? T : 0);
    if (slots > kMaxGridYZ) throw Error("moe_down_combine: " + std::to_string(slots) + " slots exceed one launch");
    check_width("moe_down_combine (hidden)", hidden);
    const dim3 grid(unsigned((hidden + kSlotRows * kWarps - 1) / (kSlotRows * kWarps)), unsigned(slots));
    launch_pdl(moe_down_slots_kernel, grid, dim3(kWarps * 32), 0, stream, reinterpret_cast<const bf16_t*>(act), T, K,
               reinterpret_cast<const bf16_t*>(w_down), inter, hidden, topk_ids,
               reinterpret_cast<const bf16_t*>(shared_act), reinterpret_cast<const bf16_t*>(w_down_shared),
               shared_act ? shared_inter : 0, reinterpret_cast<bf16_t*>(y_scratch));
    STRIKER_CUDA_CHECK_LAUNCH("moe_down_slots");
    moe_combine_sorted(y_scratch, nullptr, topk_w, shared_act ? y_scratch + int64_t(T) * K * hidden : nullptr, T, K,
                       hidden, h, stream, next_norm);
    return;
  }
  const dim3 grid(unsigned((hidden + 2 * kWarps - 1) / (2 * kWarps)), unsigned(T));
  const bool one_round = T == 1 && K <= kOneRoundTopK && inter == kOneRoundInter &&
                         (shared_act == nullptr || shared_inter == kOneRoundInter);
  if (one_round) {
    static const bool ready = allow_dynamic_smem(moe_down_one_round_kernel, int(kOneRoundSmem));
    (void)ready;
  }
  launch_pdl(one_round ? moe_down_one_round_kernel : moe_down_kernel, dim3(grid), dim3(kWarps * 32),
             one_round ? kOneRoundSmem : size_t(0), stream, 
      reinterpret_cast<const bf16_t*>(act), K, reinterpret_cast<const bf16_t*>(w_down), inter, hidden, topk_ids, topk_w,
      reinterpret_cast<const bf16_t*>(shared_act), reinterpret_cast<const bf16_t*>(w_down_shared), shared_inter,
      reinterpret_cast<bf16_t*>(h));
  STRIKER_CUDA_CHECK_LAUNCH("moe_down_combine");
  if (next_norm != nullptr) rmsnorm(h, next_norm->gamma, next_norm->out, T, hidden, next_norm->eps, stream);
}

void moe_combine_sorted(const bf16* y_sorted, const int32_t* inv, const float* topk_w, const bf16* y_shared, int T,
                        int K, int hidden, bf16* h, cudaStream_t stream, const RowNorm* next_norm) {
  if (T <= 0) return;
  check_width("moe_combine_sorted", hidden);
  const auto* ys = reinterpret_cast<const bf16_t*>(y_sorted);
  const auto* ysh = reinterpret_cast<const bf16_t*>(y_shared);
  auto* hb = reinterpret_cast<bf16_t*>(h);
  if (next_norm != nullptr) {
    const size_t smem = size_t(hidden) * 2;
    if (next_norm->gamma == nullptr || next_norm->out == nullptr || smem > 40 * 1024)
      throw Error("moe_combine_sorted: the fused norm needs its weights, an output and a row of at most 20480");
    launch_pdl(moe_combine_sorted_norm_kernel, dim3(unsigned(std::min(T, 1 << 20))), dim3(kRmsnormRowThreads), smem,
               stream, ys, inv, topk_w, ysh, T, K, hidden, hb, next_norm->gamma, next_norm->eps,
               reinterpret_cast<bf16_t*>(next_norm->out));
    STRIKER_CUDA_CHECK_LAUNCH("moe_combine_sorted_norm");
    return;
  }
  const int blocks = (hidden / kCombineCols + kCombineThreads - 1) / kCombineThreads;
  launch_pdl(moe_combine_sorted_kernel, dim3(unsigned(blocks), unsigned(std::min(T, kMaxGridYZ))),
             dim3(kCombineThreads), 0, stream, ys, inv, topk_w, ysh, T, K, hidden, hb);
  STRIKER_CUDA_CHECK_LAUNCH("moe_combine_sorted");
}

}  // namespace striker::cuda
