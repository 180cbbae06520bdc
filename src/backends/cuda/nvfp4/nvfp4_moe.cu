#include <algorithm>
#include <string>

#include "backends/cuda/common/cuda_check.h"
#include "backends/cuda/common/launch.cuh"
#include "backends/cuda/moe/moe.h"
#include "backends/cuda/nvfp4/nvfp4_decode.cuh"
#include "backends/cuda/nvfp4/nvfp4_moe.h"
#include "backends/cuda/nvfp4/nvfp4_moe_mma.h"
#include "backends/cuda/common/warp_dot.cuh"

namespace striker::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kMaxTopK = 8;

// Pointers to row `row` of expert `e` in a stack of [E, rows, in] weights.
__device__ __forceinline__ void stack_row(const Nvfp4Matrix& m, int64_t e, int64_t rows, int64_t row, int in,
                                          const uint8_t*& codes, const uint8_t*& scales) {
  const int64_t r = e * rows + row;
  codes = m.codes + r * (in / 2);
  scales = m.scales + r * (in / 16);
}

// grid (row pairs, T*K [+ T]): as moe.cu's moe_gate_up_kernel; slots >= T*K are the shared expert.
// The shared expert's warps load their first two chunks before pdl_wait; a routed slot's rows
// depend on the router's ids, read after it. Held to 2 CTAs per SM (≤ 128 registers; left alone,
// ptxas takes ~160, 1 CTA per SM), so the decode grid of 32 × 7 = 224 CTAs runs in one wave on
// 132 SMs instead of two.
template <bool kMma>
__global__ void __launch_bounds__(kWarps * 32, 2)
    nvfp4_moe_gate_up_kernel(const bf16_t* __restrict__ x, int T, int hidden, Nvfp4Stack wg, Nvfp4Stack wu, int inter,
                             const int32_t* __restrict__ ids, int K, bf16_t* __restrict__ act, Nvfp4Shared sh,
                             bf16_t* __restrict__ shared_act) {
  pdl_launch_dependents();  // see launch.cuh
  const int o0 = (blockIdx.x * kWarps + (threadIdx.x >> 5)) * 2;
  const int slot = blockIdx.y;
  const bool shared = slot >= T * K;
  const int rows = shared ? sh.inter : inter;
  if (o0 >= rows) return;
  const int t = shared ? slot - T * K : slot / K;
  const int o1 = min(o0 + 1, rows - 1);
  const uint8_t* cr[4];
  const uint8_t* sr[4];
  float s2g = 0.f, s2u = 0.f;
  if (shared) {
    const int64_t cb = hidden / 2, sb = hidden / 16;
    cr[0] = sh.gate.codes + o0 * cb, sr[0] = sh.gate.scales + o0 * sb;
    cr[1] = sh.up.codes + o0 * cb, sr[1] = sh.up.scales + o0 * sb;
    cr[2] = sh.gate.codes + o1 * cb, sr[2] = sh.gate.scales + o1 * sb;
    cr[3] = sh.up.codes + o1 * cb, sr[3] = sh.up.scales + o1 * sb;
    s2g = sh.s2_gate;
    s2u = sh.s2_up;
  }
  Nvfp4Prologue<4> pr;
  if (shared) {
    if constexpr (kMma) warp_dot_nvfp4_prologue_mma<4>(cr, sr, hidden, pr);
    else warp_dot_nvfp4_prologue<4>(cr, sr, hidden, pr);
  }
  pdl_wait();  // ids (router) and x (rmsnorm) are written by earlier kernels
  if (!shared) {
    const int64_t e = ids[slot];
    stack_row(wg.m, e, inter, o0, hidden, cr[0], sr[0]);
    stack_row(wu.m, e, inter, o0, hidden, cr[1], sr[1]);
    stack_row(wg.m, e, inter, o1, hidden, cr[2], sr[2]);
    stack_row(wu.m, e, inter, o1, hidden, cr[3], sr[3]);
    s2g = wg.scale2[e];
    s2u = wu.scale2[e];
    if constexpr (kMma) warp_dot_nvfp4_prologue_mma<4>(cr, sr, hidden, pr);
    else warp_dot_nvfp4_prologue<4>(cr, sr, hidden, pr);
  }
  float acc[4][1];
  if constexpr (kMma) warp_dot_nvfp4_early_mma<4>(pr, cr, sr, x + int64_t(t) * hidden, hidden, acc);
  else warp_dot_nvfp4_early<4, 1>(pr, cr, sr, x + int64_t(t) * hidden, 0, 1, hidden, acc);
  const int lane = threadIdx.x & 31;
  if (lane < 2 && o0 + lane < rows) {
    const float gv = round_bf16((lane == 0 ? acc[0][0] : acc[2][0]) * s2g);
    const float uv = round_bf16((lane == 0 ? acc[1][0] : acc[3][0]) * s2u);
    bf16_t* dst = shared ? shared_act + int64_t(t) * sh.inter : act + int64_t(slot) * inter;
    dst[o0 + lane] = __float2bfloat16_rn(silu_bf16(gv) * uv);
  }
}

// grid (row pairs, T): each warp produces two rows of the token's MoE output (as moe.cu's
// moe_down_kernel). Taken when inter or the fused shared expert's inter is above 512 (else the
// half-warp kernel below). All K experts' code chunks are loaded before any is used (K <= 8,
// unrolled), so a lane has up to 16 weight loads in flight instead of one expert's at a time.
__global__ void __launch_bounds__(kWarps * 32)
    nvfp4_moe_down_kernel(const bf16_t* __restrict__ act, int K, Nvfp4Stack wd, int inter, int hidden,
                          const int32_t* __restrict__ ids, const float* __restrict__ topk_w, Nvfp4Shared sh,
                          const bf16_t* __restrict__ shared_act, const bf16_t* __restrict__ y_shared,
                          bf16_t* __restrict__ h) {
  pdl_grid_start();  // see launch.cuh
  const int o0 = (blockIdx.x * kWarps + (threadIdx.x >> 5)) * 2;
  if (o0 >= hidden) return;
  const int t = blockIdx.y;
  const int o1 = min(o0 + 1, hidden - 1);
  const int lane = threadIdx.x & 31;
  const uint8_t *c0[kMaxTopK], *c1[kMaxTopK], *s0[kMaxTopK], *s1[kMaxTopK];
  const bf16_t* xa[kMaxTopK];
  float acc0[kMaxTopK], acc1[kMaxTopK];
#pragma unroll
  for (int k = 0; k < kMaxTopK; ++k) {
    const int slot = t * K + min(k, K - 1);  // k >= K: valid pointers, never loaded
    const int64_t e = ids[slot];
    stack_row(wd.m, e, hidden, o0, inter, c0[k], s0[k]);
    stack_row(wd.m, e, hidden, o1, inter, c1[k], s1[k]);
    xa[k] = act + int64_t(slot) * inter;
    acc0[k] = acc1[k] = 0.f;
  }
  for (int c = lane; c < inter / 32; c += 32) {  // 16-byte chunks: 32 weights, 2 scale bytes
    uint4 q0[kMaxTopK], q1[kMaxTopK];
    uint32_t sc0[kMaxTopK], sc1[kMaxTopK];
#pragma unroll
    for (int k = 0; k < kMaxTopK; ++k)
      if (k < K) {
        q0[k] = load_stream(c0[k] + int64_t(c) * 16);
        q1[k] = load_stream(c1[k] + int64_t(c) * 16);
        sc0[k] = __ldcs(reinterpret_cast<const unsigned short*>(s0[k] + int64_t(c) * 2));
        sc1[k] = __ldcs(reinterpret_cast<const unsigned short*>(s1[k] + int64_t(c) * 2));
      }
#pragma unroll
    for (int k = 0; k < kMaxTopK; ++k)
      if (k < K) {
        const bf16_t* xp = xa[k] + int64_t(c) * 32;
        acc0[k] += group_dot(q0[k].x, q0[k].y, sc0[k], xp) + group_dot(q0[k].z, q0[k].w, sc0[k] >> 8, xp + 16);
        acc1[k] += group_dot(q1[k].x, q1[k].y, sc1[k], xp) + group_dot(q1[k].z, q1[k].w, sc1[k] >> 8, xp + 16);
      }
  }
  float sum0 = 0.f, sum1 = 0.f;
#pragma unroll
  for (int k = 0; k < kMaxTopK; ++k)
    if (k < K) {
      const int slot = t * K + k;
      const float wk = topk_w[slot], s2 = wd.scale2[ids[slot]];
      sum0 = fmaf(wk, round_bf16(warp_sum(acc0[k]) * s2), sum0);  // Σ_k w_k·bf16(mm(act_k, Wd_e)), fp32
      sum1 = fmaf(wk, round_bf16(warp_sum(acc1[k]) * s2), sum1);
    }
  float y0 = round_bf16(sum0), y1 = round_bf16(sum1);
  if (shared_act != nullptr) {
    const int64_t cb = sh.inter / 2, sb = sh.inter / 16;
    const uint8_t* cr[2] = {sh.down.codes + o0 * cb, sh.down.codes + o1 * cb};
    const uint8_t* sr[2] = {sh.down.scales + o0 * sb, sh.down.scales + o1 * sb};
    float sacc[2][1];
    warp_dot_nvfp4<2, 1>(cr, sr, shared_act + int64_t(t) * sh.inter, 0, 1, sh.inter, sacc);
    y0 = round_bf16(y0 + round_bf16(sacc[0][0] * sh.s2_down));
    y1 = round_bf16(y1 + round_bf16(sacc[1][0] * sh.s2_down));
  } else if (y_shared != nullptr) {
    y0 = round_bf16(y0 + __bfloat162float(y_shared[int64_t(t) * hidden + o0]));
    y1 = round_bf16(y1 + __bfloat162float(y_shared[int64_t(t) * hidden + o1]));
  }
  if (lane < 2 && o0 + lane < hidden) {
    const int64_t idx = int64_t(t) * hidden + o0 + lane;
    h[idx] = __float2bfloat16_rn(__bfloat162float(h[idx]) + (lane == 0 ? y0 : y1));
  }
}

// Sum over the 16 lanes of a half warp (xor 8, 4, 2, 1): the last four steps of warp_sum. When
// the other half holds zeros, warp_sum's first step (xor 16) adds 0 exactly, so for a partial
// that lives in lanes 0–15 only this gives warp_sum's value bit for bit.
__device__ __forceinline__ float half_warp_sum(float v) {
#pragma unroll
  for (int o = 8; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// For inter <= 512 and a shared inter <= 512 (Flint's; a row is at most 16 chunks): the two-row
// kernel above gives each lane chunk `lane` of both rows, so lanes 16–31 would idle and every lane
// decode 2·K chunks. Here lanes 0–15 take row o0 and lanes 16–31 row o1, one chunk each per expert:
// half the decode work per lane, the same partial per (row, chunk), and half_warp_sum in place of
// warp_sum — the same sums bit for bit. The shared expert's down chunk is loaded before pdl_wait
// (it does not depend on the routing), the routed ones after.
__global__ void __launch_bounds__(kWarps * 32)
    nvfp4_moe_down_half_warp_kernel(const bf16_t* __restrict__ act, int K, Nvfp4Stack wd, int inter, int hidden,
                                    const int32_t* __restrict__ ids, const float* __restrict__ topk_w,
                                    Nvfp4Shared sh, const bf16_t* __restrict__ shared_act,
                                    const bf16_t* __restrict__ y_shared, bf16_t* __restrict__ h) {
  pdl_launch_dependents();  // see launch.cuh
  const int o0 = (blockIdx.x * kWarps + (threadIdx.x >> 5)) * 2;
  if (o0 >= hidden) return;
  const int t = blockIdx.y;
  const int lane = threadIdx.x & 31;
  const int c = lane & 15;                                    // this lane's chunk of its row
  const int o = lane < 16 ? o0 : min(o0 + 1, hidden - 1);    // this lane's row
  const bool fused = shared_act != nullptr;
  const bool has_shared_chunk = fused && c < sh.inter / 32;
  Nvfp4Chunk<1> shq;
  const uint8_t* scr[1] = {sh.down.codes + int64_t(o) * (sh.inter / 2)};
  const uint8_t* ssr[1] = {sh.down.scales + int64_t(o) * (sh.inter / 16)};
  if (has_shared_chunk) load_chunk<1>(scr, ssr, c, shq);
  pdl_wait();  // ids, weights of the routing, act and h come from earlier kernels
  const bool has_chunk = c < inter / 32;
  uint4 q[kMaxTopK];
  uint32_t sc[kMaxTopK];
#pragma unroll
  for (int k = 0; k < kMaxTopK; ++k)
    if (k < K && has_chunk) {
      const uint8_t *cp, *sp;
      stack_row(wd.m, ids[t * K + k], hidden, o, inter, cp, sp);
      q[k] = load_stream(cp + int64_t(c) * 16);
      sc[k] = __ldcs(reinterpret_cast<const unsigned short*>(sp + int64_t(c) * 2));
    }
  float sum = 0.f;
#pragma unroll
  for (int k = 0; k < kMaxTopK; ++k)
    if (k < K) {
      const int slot = t * K + k;
      float acc = 0.f;
      if (has_chunk) {
        const bf16_t* xp = act + int64_t(slot) * inter + int64_t(c) * 32;
        acc += group_dot(q[k].x, q[k].y, sc[k], xp) + group_dot(q[k].z, q[k].w, sc[k] >> 8, xp + 16);
      }
      const float wk = topk_w[slot], s2 = wd.scale2[ids[slot]];
      sum = fmaf(wk, round_bf16(half_warp_sum(acc) * s2), sum);  // Σ_k w_k·bf16(mm(act_k, Wd_e)), fp32
    }
  float y = round_bf16(sum);
  if (fused) {
    float sacc[1][1] = {{0.f}};
    if (has_shared_chunk) accumulate_chunk<1, 1>(shq, shared_act + int64_t(t) * sh.inter, 0, 1, c, sacc);
    y = round_bf16(y + round_bf16(half_warp_sum(sacc[0][0]) * sh.s2_down));
  } else if (y_shared != nullptr) {
    y = round_bf16(y + __bfloat162float(y_shared[int64_t(t) * hidden + o]));
  }
  if ((lane == 0 || lane == 16) && (lane == 0 || o0 + 1 < hidden)) {
    const int64_t idx = int64_t(t) * hidden + o;
    h[idx] = __float2bfloat16_rn(__bfloat162float(h[idx]) + y);
  }
}

// Decode steps of 2-8 tokens (the half-warp shapes: inter and the shared inter <= 512): the down
// projection slot by slot, y[s] = bf16(scale2·(act_s·Wd_e)) for routed slot s (the shared expert's
// slots T*K + t after them), then moe_combine_sorted in slot order forms h (moe.h) — as moe.cu's
// moe_down_slots_kernel does for BF16. A warp owns 4 rows of one slot: lanes 0-15 rows o0, o0 + 2,
// lanes 16-31 rows o0 + 1, o0 + 3, one 16-byte chunk of each per lane, loaded with the lane's
// activations in one batch. Per row the same partials and half-warp sums as the kernel above, and
// the combine adds the rounded outputs in k order: the same bits.
__device__ __forceinline__ float group_dot_loaded(uint32_t w0, uint32_t w1, uint32_t sb, const uint4& x0,
                                                  const uint4& x1) {  // group_dot with x already loaded
  float wf[16], xf[16];
  decode16(w0, w1, wf);
  unpack8(x0, xf);
  unpack8(x1, xf + 8);
  float p = 0.f;
#pragma unroll
  for (int i = 0; i < 16; ++i) p = fmaf(wf[i], xf[i], p);
  return ue4m3_x2p14(sb & 0xFFu) * p;
}

__global__ void __launch_bounds__(kWarps * 32)
    nvfp4_moe_down_slots_kernel(const bf16_t* __restrict__ act, int T, int K, Nvfp4Stack wd, int inter, int hidden,
                                const int32_t* __restrict__ ids, Nvfp4Shared sh, const bf16_t* __restrict__ shared_act,
                                bf16_t* __restrict__ y) {
  pdl_launch_dependents();  // see launch.cuh
  const int o0 = (blockIdx.x * kWarps + (threadIdx.x >> 5)) * 4;
  if (o0 >= hidden) return;
  const int s = blockIdx.y;
  const bool shared = s >= T * K;
  const int lane = threadIdx.x & 31;
  const int c = lane & 15;
  const int in = shared ? sh.inter : inter;
  const bool has_chunk = c < in / 32;
  int o[2];
  const uint8_t* cr[2];
  const uint8_t* sr[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) o[r] = min(o0 + (lane >> 4) + 2 * r, hidden - 1);
  Nvfp4Chunk<2> q;
  if (shared) {  // the shared expert's rows do not depend on the routing: load them before the wait
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      cr[r] = sh.down.codes + int64_t(o[r]) * (sh.inter / 2);
      sr[r] = sh.down.scales + int64_t(o[r]) * (sh.inter / 16);
    }
    if (has_chunk) load_chunk<2>(cr, sr, c, q);
    pdl_wait();
  } else {
    pdl_wait();  // ids and act come from earlier kernels
    const int64_t e = ids[s];
#pragma unroll
    for (int r = 0; r < 2; ++r) stack_row(wd.m, e, hidden, o[r], inter, cr[r], sr[r]);
    if (has_chunk) load_chunk<2>(cr, sr, c, q);
  }
  float out[2];
  if (shared) {
    const bf16_t* xs = shared_act + int64_t(s - T * K) * sh.inter;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float sacc[1][1] = {{0.f}};
      if (has_chunk) {
        Nvfp4Chunk<1> one;
        one.q[0] = q.q[r], one.sc[0] = q.sc[r];
        accumulate_chunk<1, 1>(one, xs, 0, 1, c, sacc);
      }
      out[r] = round_bf16(half_warp_sum(sacc[0][0]) * sh.s2_down);
    }
  } else {
    uint4 xq[4];
    const bf16_t* xp = act + int64_t(s) * inter + int64_t(c) * 32;
    if (has_chunk)
#pragma unroll
      for (int i = 0; i < 4; ++i) xq[i] = load_cached(xp + 8 * i);
    const float s2 = wd.scale2[ids[s]];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float a = 0.f;
      if (has_chunk)
        a += group_dot_loaded(q.q[r].x, q.q[r].y, q.sc[r], xq[0], xq[1]) +
             group_dot_loaded(q.q[r].z, q.q[r].w, q.sc[r] >> 8, xq[2], xq[3]);
      out[r] = round_bf16(half_warp_sum(a) * s2);
    }
  }
  if (c == 0)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = o0 + (lane >> 4) + 2 * r;
      if (row < hidden) y[int64_t(s) * hidden + row] = __float2bfloat16_rn(out[r]);
    }
}

void check_width(const char* what, int width) {
  if (width <= 0 || width % 64 != 0)
    throw Error(std::string(what) + ": width " + std::to_string(width) + " is not a positive multiple of 64");
}

}  // namespace

void nvfp4_moe_gate_up(const bf16* x, int T, int hidden, Nvfp4Stack gate, Nvfp4Stack up, int inter,
                       const int32_t* topk_ids, int K, bf16* act, const Nvfp4Shared* shared, bf16* shared_act,
                       cudaStream_t stream) {
  if (T <= 0) return;
  check_width("nvfp4_moe_gate_up", hidden);
  const bool has_shared = shared != nullptr && shared_act != nullptr;
  if (int64_t(T) * (K + 1) > 65535)
    throw Error("nvfp4_moe_gate_up: " + std::to_string(T) + " tokens x " + std::to_string(K + 1) +
                " slots exceed one launch (65535); split the batch");
  const Nvfp4Shared sh = has_shared ? *shared : Nvfp4Shared{};
  const int rows = std::max(inter, has_shared ? sh.inter : 0);
  const dim3 grid(unsigned((rows + 2 * kWarps - 1) / (2 * kWarps)), unsigned(T * K + (has_shared ? T : 0)));
  launch_pdl(nvfp4_moe_mma_gate_up_enabled() ? nvfp4_moe_gate_up_kernel<true> : nvfp4_moe_gate_up_kernel<false>, grid, dim3(kWarps * 32), 0, stream, reinterpret_cast<const bf16_t*>(x), T,
             hidden, gate, up, inter, topk_ids, K, reinterpret_cast<bf16_t*>(act), sh,
             reinterpret_cast<bf16_t*>(has_shared ? shared_act : nullptr));
  STRIKER_CUDA_CHECK_LAUNCH("nvfp4_moe_gate_up");
}

void nvfp4_moe_down_combine(const bf16* act, int T, int K, Nvfp4Stack down, int inter, int hidden,
                            const int32_t* topk_ids, const float* topk_w, const Nvfp4Shared* shared,
                            const bf16* shared_act, const bf16* y_shared, bf16* h, cudaStream_t stream,
                            bf16* y_scratch, const RowNorm* next_norm) {
  if (T <= 0) return;
  if (K <= 0 || K > kMaxTopK) throw Error("nvfp4_moe_down_combine: top-k " + std::to_string(K) + " is not in 1..8");
  if (T > 65535) throw Error("nvfp4_moe_down_combine: " + std::to_string(T) + " tokens exceed one launch");
  check_width("nvfp4_moe_down_combine", inter);
  const bool fused_shared = shared != nullptr && shared_act != nullptr;
  if (fused_shared) check_width("nvfp4_moe_down_combine (shared)", shared->inter);
  const Nvfp4Shared sh = fused_shared ? *shared : Nvfp4Shared{};
  if (y_scratch != nullptr && T >= 2 && inter <= 512 && (!fused_shared || sh.inter <= 512)) {
    const int slots = T * K + (fused_shared ? T : 0);
    if (slots > kMaxGridYZ) throw Error("nvfp4_moe_down_combine: " + std::to_string(slots) + " slots exceed one launch");
    const dim3 sgrid(unsigned((hidden + 4 * kWarps - 1) / (4 * kWarps)), unsigned(slots));
    launch_pdl(nvfp4_moe_down_slots_kernel, sgrid, dim3(kWarps * 32), 0, stream, reinterpret_cast<const bf16_t*>(act),
               T, K, down, inter, hidden, topk_ids, sh,
               reinterpret_cast<const bf16_t*>(fused_shared ? shared_act : nullptr),
               reinterpret_cast<bf16_t*>(y_scratch));
    STRIKER_CUDA_CHECK_LAUNCH("nvfp4_moe_down_slots");
    moe_combine_sorted(y_scratch, nullptr, topk_w, fused_shared ? y_scratch + int64_t(T) * K * hidden : y_shared, T,
                       K, hidden, h, stream, next_norm);
    return;
  }
  const dim3 grid(unsigned((hidden + 2 * kWarps - 1) / (2 * kWarps)), unsigned(T));
  if (inter <= 512 && (!fused_shared || sh.inter <= 512)) {
    // One token: the launch reserves 200 KiB of shared memory the kernel never uses, so one of the
    // next layer's QKV CTAs (80 registers, 13 KiB) fits beside each down CTA instead of two (by
    // registers) — fewer early weight streams competing with this kernel's, one still resident early.
    // Measured (H200, thirteenth session, NVFP4 8K step): 2.300 ms with none reserved, 2.122 with 200
    // KiB, 2.210 with 216 KiB (no QKV CTA beside it).
    constexpr size_t kOneTokenSmem = 200 * 1024;
    static const bool ready = allow_dynamic_smem(nvfp4_moe_down_half_warp_kernel, int(kOneTokenSmem));
    (void)ready;
    if (nvfp4_moe_mma_down_enabled() && nvfp4_moe_down_mma_fits(K, inter, fused_shared ? sh.inter : 0)) {
      launch_nvfp4_moe_down_mma(act, T, K, down, inter, hidden, topk_ids, topk_w, shared, shared_act, y_shared, h,
                                T == 1 ? kOneTokenSmem : size_t(0), stream);
      if (next_norm != nullptr) rmsnorm(h, next_norm->gamma, next_norm->out, T, hidden, next_norm->eps, stream);
      return;
    }
    launch_pdl(nvfp4_moe_down_half_warp_kernel, grid, dim3(kWarps * 32), T == 1 ? kOneTokenSmem : size_t(0), stream,
               reinterpret_cast<const bf16_t*>(act), K, down, inter, hidden, topk_ids, topk_w, sh,
               reinterpret_cast<const bf16_t*>(fused_shared ? shared_act : nullptr),
               reinterpret_cast<const bf16_t*>(fused_shared ? nullptr : y_shared), reinterpret_cast<bf16_t*>(h));
    STRIKER_CUDA_CHECK_LAUNCH("nvfp4_moe_down_combine");
    if (next_norm != nullptr) rmsnorm(h, next_norm->gamma, next_norm->out, T, hidden, next_norm->eps, stream);
    return;
  }
  launch_pdl(nvfp4_moe_down_kernel, grid, dim3(kWarps * 32), 0, stream, reinterpret_cast<const bf16_t*>(act), K, down,
             inter, hidden, topk_ids, topk_w, sh, reinterpret_cast<const bf16_t*>(fused_shared ? shared_act : nullptr),
             reinterpret_cast<const bf16_t*>(fused_shared ? nullptr : y_shared), reinterpret_cast<bf16_t*>(h));
  STRIKER_CUDA_CHECK_LAUNCH("nvfp4_moe_down_combine");
  if (next_norm != nullptr) rmsnorm(h, next_norm->gamma, next_norm->out, T, hidden, next_norm->eps, stream);
}

}  // namespace striker::cuda
