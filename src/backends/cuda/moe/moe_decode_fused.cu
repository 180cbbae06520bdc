// The MoE block of a 1-token decode step in one launch (moe_decode_fused.h). Three launches
// (router_topk with its input norm, moe_gate_up, moe_down_combine) put three grid drains and two
// weight-request round trips in series; here 128 co-resident CTAs run the phases and meet through
// tagged 64-bit words in global memory instead of kernel boundaries:
//   before griddepcontrol.wait: warps 0-1 of CTA b hold router rows 2b, 2b+1 in registers; gamma
//     and bias into shared memory; the shared expert's gate/up rows 4b..4b+3 and down rows
//     16b..16b+15 prefetched into L2 (cp.async.bulk.prefetch: no registers held).
//   1. warp 0 normalises h (the rmsnorm kernel's bits, as the decode router does) into shared
//      memory; warps 0-1 compute their logits (the router's lane order) and publish them as words
//      {launch number, fp32 bits}.
//   2. warp 0 of every CTA polls the E words and selects the top K itself (router_select_warp_redux:
//      the decode router's ids and weight bits; 2 KB of L2 reads per CTA, no extra hop to hand the
//      ids out) and prefetches its down rows of the K experts into L2 at once. Meanwhile warp 7
//      computes the shared expert's SwiGLU rows (from L2).
//   3. warp k computes rows 4b..4b+3 of routed slot k's SwiGLU (moe_gate_up's lane order and
//      roundings) and publishes them as words {launch number, two bf16}.
//   4. each warp requests its two down rows of every slot (in L2 by then) into registers, then all
//      threads poll the (K + 1)·I/2 SwiGLU words into shared memory; one barrier; each warp forms
//      y of its rows (moe_down_combine's order: per expert bf16(row · act), fp32 weighted sum in k
//      order, bf16, + the shared expert's bf16 row, bf16) and h = bf16(h + y).
// No fences: a word carries its value and its tag together (one 64-bit store), as in the decode
// router. The tag is the launch's number, from a per-CTA counter in the same buffer (every CTA
// runs once per launch, so the counters agree), so no word is ever reset. Progress: every CTA
// calls griddepcontrol.launch_dependents first, so the next kernel is launched (and takes SM
// space) only once all 128 CTAs are resident; the kernels in front never wait on this one.
#include "backends/cuda/moe/moe_decode_fused.h"

#include <string>

#include "backends/cuda/common/cuda_check.h"
#include "backends/cuda/common/device_math.cuh"
#include "backends/cuda/common/launch.cuh"
#include "backends/cuda/common/warp_dot.cuh"
#include "backends/cuda/elementwise/rmsnorm_row.cuh"
#include "backends/cuda/moe/router_math.cuh"

namespace striker::cuda {
namespace {

constexpr int kCtas = 128;
constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kMaxHidden = 2048;
constexpr int kHeld = kMaxHidden / 8 / 32;  // 8-value chunks of a hidden row per lane
constexpr int kRouterRows = 2;              // router rows per CTA: warps 0, 1
constexpr int kMaxExperts = kCtas * kRouterRows;
constexpr int kActRows = 4;  // SwiGLU rows per CTA and slot
constexpr int kMaxInter = kCtas * kActRows;
constexpr int kInterHeld = kMaxInter / 8 / 32;  // 8-value chunks of an inter row per lane
constexpr int kDownRows = 2;                    // h rows per warp
constexpr int kCtaDownRows = kDownRows * kWarps;
constexpr int kSlots = kWarps;           // routed slot k: warp k; the shared expert: the last warp
constexpr int kSharedSlot = kSlots - 1;
constexpr int kActStride = kMaxInter / 2;  // words per slot
constexpr int kLogitWords = kCtas, kActWords = kCtas + kMaxExperts;
// Arrival counters (variant bit 1): [parity][16] u32 counters, one 128-byte line each: 8 for the logits
// (32 experts each), 8 for the SwiGLU slots. Launch n counts in parity n & 1 and zeroes parity n + 1.
constexpr int kCounterWords = kActWords + kSlots * kActStride, kCounterStride = 32;  // u32 per line
constexpr int kLogitGroups = kMaxExperts / 32;
constexpr int kIdWords = kCounterWords + 2 * 16 * 16;  // variant bit 2: CTA 0's K words {tag, id, weight}
static_assert(kIdWords + 16 == kMoeFusedSyncWords, "the sync buffer's layout");
static_assert(kCtaDownRows * kCtas == kMaxHidden, "down rows cover the hidden width");
static_assert(kRouterRows < kSharedSlot, "the shared expert's warp computes no logits");

__device__ __forceinline__ unsigned long long ld_relaxed_u64(const unsigned long long* p) {
  unsigned long long v;
  asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void st_relaxed_u64(unsigned long long* p, unsigned long long v) {
  asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ void prefetch_l2(const void* p, unsigned bytes) {
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(bytes) : "memory");
}
__device__ __forceinline__ unsigned long long tagged(unsigned tag, unsigned payload) {
  return (static_cast<unsigned long long>(tag) << 32) | payload;
}
__device__ __forceinline__ unsigned bf16_bits(float v) { return __float_as_uint(v) >> 16; }  // v bf16-exact
__device__ __forceinline__ void bar_arrive(int id, int count) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(count) : "memory");
}
__device__ __forceinline__ void bar_sync(int id, int count) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(count) : "memory");
}

struct Params {
  bf16_t* h;
  const float* gamma;
  float eps;
  int hidden, E, K;
  const void* router;
  const float* bias;
  bool norm;
  float rsf;
  const bf16_t *wg, *wu, *wd;
  int inter;
  const bf16_t *sg, *su, *sd;
  int shared_inter;
  unsigned long long* sync;
  int32_t* ids_out;
  float* w_out;
  bool prefetch_down;  // TEMPORARY A/B variant (issue 11): L2 prefetch of the routed down rows at the ids
  bool counters;       // TEMPORARY A/B variant (issue 11): wait on arrival counters, then read the words once
  bool one_selector;   // TEMPORARY A/B variant (issue 11): CTA 0 selects and publishes the ids
};

__device__ __forceinline__ unsigned ld_relaxed_u32(const unsigned* p) {
  unsigned v;
  asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void red_add_relaxed(unsigned* p, unsigned v) {
  asm volatile("red.relaxed.gpu.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
// Lanes i < n wait until counter i reaches want(i) (the whole warp returns together).
template <typename Want>
__device__ __forceinline__ void wait_counters(const unsigned* c, int n, Want want) {
  const int lane = int(threadIdx.x & 31);
  bool done = lane >= n;
  while (!__all_sync(0xffffffffu, done))
    if (!done) done = ld_relaxed_u32(c + lane * kCounterStride) >= unsigned(want(lane));
}

// SwiGLU rows o0..o0+3 of one expert (gate g, up u [rows, H]) on x (shared memory): moe_gate_up's
// bits (a lane's chunks lane, lane + 32, ... in order, warp_sum, bf16 gate and up, bf16(silu·u)).
// Two passes of two rows, each pass's 32 loads per lane issued before its first use.
__device__ __forceinline__ void swiglu_rows4(const bf16_t* __restrict__ g, const bf16_t* __restrict__ u, int H,
                                             const bf16_t* xs, int o0, float (&a)[kActRows]) {
  const int lane = int(threadIdx.x & 31), chunks = H / 8;
#pragma unroll
  for (int pass = 0; pass < kActRows / 2; ++pass) {
    const int o = o0 + 2 * pass;
    const bf16_t* rows[4] = {g + int64_t(o) * H, u + int64_t(o) * H, g + int64_t(o + 1) * H, u + int64_t(o + 1) * H};
    uint4 q[4][kHeld];
#pragma unroll
    for (int i = 0; i < kHeld; ++i)
      if (lane + 32 * i < chunks)
#pragma unroll
        for (int r = 0; r < 4; ++r) q[r][i] = load_stream(rows[r] + (lane + 32 * i) * 8);
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int i = 0; i < kHeld; ++i)
      if (lane + 32 * i < chunks) {
        float xf[8];
        unpack8(*reinterpret_cast<const uint4*>(xs + (lane + 32 * i) * 8), xf);
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          float wf[8];
          unpack8(q[r][i], wf);
#pragma unroll
          for (int j = 0; j < 8; ++j) acc[r] = fmaf(wf[j], xf[j], acc[r]);
        }
      }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float gv = round_bf16(warp_sum(acc[2 * r])), uv = round_bf16(warp_sum(acc[2 * r + 1]));
      a[2 * pass + r] = round_bf16(silu_bf16(gv) * uv);
    }
  }
}

// Rows o0..o0+3 of slot `slot` as two words {tag, bf16 pair} (lanes 0 and 1).
__device__ __forceinline__ void publish_act(unsigned long long* actw, int slot, int o0, const float (&a)[kActRows],
                                            unsigned tag) {
  const int lane = int(threadIdx.x & 31);
  if (lane < 2)
    st_relaxed_u64(actw + slot * kActStride + o0 / 2 + lane,
                   tagged(tag, bf16_bits(a[2 * lane]) | (bf16_bits(a[2 * lane + 1]) << 16)));
}

template <typename W>
__global__ void __launch_bounds__(kThreads, 1) moe_decode_fused_kernel(const Params p) {
  __shared__ __align__(16) bf16_t xs[kMaxHidden];  // x = rmsnorm(h)
  __shared__ __align__(16) bf16_t hs[kMaxHidden];  // h as read
  __shared__ __align__(16) float gs[kMaxHidden];
  __shared__ float bs[kMaxExperts];
  __shared__ float ls[kMaxExperts];
  __shared__ __align__(16) bf16_t acts[kSlots * kMaxInter];
  __shared__ int32_t s_ids[kRouterMaxTopK];
  __shared__ float s_w[kRouterMaxTopK];
  __shared__ unsigned s_tag;
  pdl_launch_dependents();  // every CTA resident before the next kernel takes SM space (see the top)
  using RW = RouterWeight<W>;
  const int warp = int(threadIdx.x >> 5), lane = int(threadIdx.x & 31);
  const int b = int(blockIdx.x);
  const int H = p.hidden, E = p.E, K = p.K, I = p.inter, Is = p.shared_inter;
  const int chunks = H / 8;
  const bool has_shared = p.sg != nullptr;
  const int act_row0 = b * kActRows, down_row0 = b * kCtaDownRows;
  const bool routed_rows = act_row0 < I, shared_rows = has_shared && act_row0 < Is;
  const bool has_down = down_row0 < H;
  const bool needs_ids = has_down || routed_rows || b == 0;
  unsigned long long* const gen = p.sync;
  unsigned long long* const lw = p.sync + kLogitWords;
  unsigned long long* const actw = p.sync + kActWords;
  unsigned* const counters = reinterpret_cast<unsigned*>(p.sync + kCounterWords);  // [parity][16] lines
  unsigned long long* const idw = p.sync + kIdWords;

  // ---- before the wait: nothing here is written by an earlier kernel ----
  const int e = b * kRouterRows + warp;
  const bool dots = warp < kRouterRows && e < E;
  const W* wrow = static_cast<const W*>(p.router) + int64_t(min(e, E - 1)) * H;
  typename RW::Chunk held[kHeld];
  if (dots) {
#pragma unroll
    for (int i = 0; i < kHeld; ++i)
      if (lane + 32 * i < chunks) held[i] = RW::load(wrow + (lane + 32 * i) * 8);
  }
  for (int i = int(threadIdx.x); i < H; i += kThreads) gs[i] = p.gamma[i];
  if (needs_ids)
    for (int i = int(threadIdx.x); i < E; i += kThreads) bs[i] = p.bias != nullptr ? p.bias[i] : 0.f;
  if (warp == kSharedSlot && lane == 0 && has_shared) {
    if (shared_rows) {
      const unsigned bytes = unsigned(min(kActRows, Is - act_row0) * H * 2);
      prefetch_l2(p.sg + int64_t(act_row0) * H, bytes);
      prefetch_l2(p.su + int64_t(act_row0) * H, bytes);
    }
    if (has_down) prefetch_l2(p.sd + int64_t(down_row0) * Is, unsigned(min(kCtaDownRows, H - down_row0) * Is * 2));
  }
  __syncthreads();  // gamma in shared memory
  pdl_wait();       // h is the previous kernel's output

  // This launch's number: the CTA's counter + 1 (0 never: the words' initial tag); by the last warp,
  // so the round trip stays off warp 0's path to h.
  if (threadIdx.x == kThreads - 32) {
    unsigned t = unsigned(*static_cast<volatile unsigned long long*>(gen + b)) + 1u;
    if (t == 0u) t = 1u;
    gen[b] = t;
    s_tag = t;
  }
  if (warp == 0) {  // x = rmsnorm(h): the decode router's norm (rmsnorm kernel bits), h kept as read
    uint4 hq[kHeld];
#pragma unroll
    for (int i = 0; i < kHeld; ++i)
      if (lane + 32 * i < chunks) hq[i] = *reinterpret_cast<const uint4*>(p.h + (lane + 32 * i) * 8);
    float part[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int i = 0; i < kHeld; ++i)
      if (lane + 32 * i < chunks) {
        float f[8];
        unpack8(hq[i], f);
#pragma unroll
        for (int k = 0; k < 8; ++k) part[k] += f[k] * f[k];
      }
    const float r = rmsnorm_r_of_lanes(part, H, p.eps);
#pragma unroll
    for (int i = 0; i < kHeld; ++i) {
      const int c = lane + 32 * i;
      if (c < chunks) {
        float f[8], y[8];
        unpack8(hq[i], f);
        const float4 g0 = reinterpret_cast<const float4*>(gs)[2 * c], g1 = reinterpret_cast<const float4*>(gs)[2 * c + 1];
        const float g[8] = {g0.x, g0.y, g0.z, g0.w, g1.x, g1.y, g1.z, g1.w};
#pragma unroll
        for (int k = 0; k < 8; ++k) y[k] = rmsnorm_apply(f[k], r, g[k]);
        reinterpret_cast<uint4*>(xs)[c] = pack8(y);
        reinterpret_cast<uint4*>(hs)[c] = hq[i];
      }
    }
  }
  __syncthreads();  // x, h and the tag in shared memory
  const unsigned tag = s_tag;
  unsigned* const lcnt = counters + (tag & 1u) * 16 * kCounterStride;  // this launch's logit counters
  unsigned* const acnt = lcnt + kLogitGroups * kCounterStride;          // and SwiGLU slot counters
  if (b == 0 && threadIdx.x < 16)  // the next launch's counters (the last user has completed)
    counters[((tag + 1u) & 1u) * 16 * kCounterStride + threadIdx.x * kCounterStride] = 0u;

  // ---- 1. logits ----
  if (dots) {
    float acc = 0.f;
#pragma unroll
    for (int i = 0; i < kHeld; ++i)
      if (lane + 32 * i < chunks) {
        float wf[8], xf[8];
        RW::unpack(held[i], wf);
        unpack8(*reinterpret_cast<const uint4*>(xs + (lane + 32 * i) * 8), xf);
#pragma unroll
        for (int j = 0; j < 8; ++j) acc = fmaf(xf[j], wf[j], acc);
      }
    const float v = warp_sum(acc);
    if (lane == 0) {
      st_relaxed_u64(lw + e, tagged(tag, __float_as_uint(v)));
      if (p.counters) red_add_relaxed(lcnt + (e / 32) * kCounterStride, 1u);  // unordered with the word: tags check
    }
  }
  // Barrier 1: warp 0 hands the ids to the other warps (but the shared expert's, which gets them
  // through barrier 2 once its own rows are done).
  const int ids_threads = has_shared ? kThreads - 32 : kThreads;
  if (warp == 0) {
    // ---- 2. every CTA selects the top K itself (variant bit 2: CTA 0 only, the others read its words) ----
    if (needs_ids && p.one_selector && b != 0) {  // CTA 0 selected: its K words {tag, id, weight}
      if (lane < K) {
        const unsigned want = tag & 0xffffffu;
        unsigned long long v = ld_relaxed_u64(idw + lane);
        while (unsigned(v >> 40) != want) v = ld_relaxed_u64(idw + lane);
        s_ids[lane] = int32_t((v >> 32) & 0xffu);
        s_w[lane] = __uint_as_float(unsigned(v));
      }
    } else if (needs_ids) {
      constexpr int P = kMaxExperts / 32;
      if (p.counters) wait_counters(lcnt, (E + 31) / 32, [&](int g) { return min(32, E - 32 * g); });
      unsigned long long v[P];
#pragma unroll
      for (int i = 0; i < P; ++i) v[i] = lane + 32 * i < E ? ld_relaxed_u64(lw + lane + 32 * i) : tagged(tag, 0u);
      for (;;) {
        bool ready = true;
#pragma unroll
        for (int i = 0; i < P; ++i) ready = ready && unsigned(v[i] >> 32) == tag;
        if (__all_sync(0xffffffffu, ready)) break;
#pragma unroll
        for (int i = 0; i < P; ++i)
          if (unsigned(v[i] >> 32) != tag) v[i] = ld_relaxed_u64(lw + lane + 32 * i);  // only experts < E wait
      }
#pragma unroll
      for (int i = 0; i < P; ++i)
        if (lane + 32 * i < E) ls[lane + 32 * i] = __uint_as_float(unsigned(v[i]));
      __syncwarp();
      router_select_warp_redux<P>([&](int ex) { return ls[ex]; }, 0, E, K, bs, p.norm, p.rsf, s_ids, s_w);
      __syncwarp();
      if (p.one_selector && lane < K)  // ids < 256: {24-bit tag, 8-bit id, fp32 weight}
        st_relaxed_u64(idw + lane, (static_cast<unsigned long long>(((tag & 0xffffffu) << 8) | unsigned(s_ids[lane])) << 32) |
                                       __float_as_uint(s_w[lane]));
    }
    __syncwarp();
    if (needs_ids && lane < K) {
      if (has_down && p.prefetch_down)  // this CTA's down rows of the expert, into L2 while the SwiGLU rows stream
        prefetch_l2(p.wd + (int64_t(s_ids[lane]) * H + down_row0) * I, unsigned(min(kCtaDownRows, H - down_row0) * I * 2));
      if (b == 0 && p.ids_out != nullptr) p.ids_out[lane] = s_ids[lane];
      if (b == 0 && p.w_out != nullptr) p.w_out[lane] = s_w[lane];
    }
    bar_arrive(1, ids_threads);
    if (has_shared) bar_arrive(2, 64);
  } else if (warp == kSharedSlot && has_shared) {
    if (shared_rows) {  // the shared expert's SwiGLU rows need no ids: before them
      float a[kActRows];
      swiglu_rows4(p.sg, p.su, H, xs, act_row0, a);
      publish_act(actw, kSharedSlot, act_row0, a, tag);
      if (p.counters && lane == 0) red_add_relaxed(acnt + kSharedSlot * kCounterStride, 1u);
    }
    bar_sync(2, 64);
  } else {
    bar_sync(1, ids_threads);
  }

  // ---- 3. routed SwiGLU rows ----
  if (warp < K && routed_rows) {
    const int64_t off = int64_t(s_ids[warp]) * I * H;
    float a[kActRows];
    swiglu_rows4(p.wg + off, p.wu + off, H, xs, act_row0, a);
    publish_act(actw, warp, act_row0, a, tag);
    if (p.counters && lane == 0) red_add_relaxed(acnt + warp * kCounterStride, 1u);
  }

  // ---- 4. down rows, weighted sum, residual ----
  const int o0 = down_row0 + kDownRows * warp;
  const bool rows_here = o0 < H;  // H is even: o0 + 1 < H too
  uint4 q[kSlots][kDownRows][kInterHeld];
  if (rows_here) {  // every slot's two rows into registers (from L2) before the SwiGLU words arrive
#pragma unroll
    for (int k = 0; k < kSlots; ++k) {
      const bool routed = k < K, shared = k == kSharedSlot && has_shared;
      if (routed || shared) {
        const int in = routed ? I : Is;
        const bf16_t* base = routed ? p.wd + (int64_t(s_ids[k]) * H + o0) * I : p.sd + int64_t(o0) * Is;
#pragma unroll
        for (int r = 0; r < kDownRows; ++r)
#pragma unroll
          for (int c = 0; c < kInterHeld; ++c)
            if (lane + 32 * c < in / 8) q[k][r][c] = load_stream(base + int64_t(r) * in + (lane + 32 * c) * 8);
      }
    }
  }
  if (has_down && p.counters) {  // warp 0 waits for every producing CTA of every slot, then all read once
    if (warp == 0)
      wait_counters(acnt, kSlots, [&](int s) {
        const int in = s < K ? I : (s == kSharedSlot && has_shared ? Is : 0);
        return (in + kActRows - 1) / kActRows;  // CTAs with rows of slot s
      });
    __syncthreads();
  }
  if (has_down) {  // every slot's SwiGLU words into shared memory: thread i polls word i of each slot
#pragma unroll
    for (int s = 0; s < kSlots; ++s) {
      const int in = s < K ? I : (s == kSharedSlot && has_shared ? Is : 0);
      const int j = int(threadIdx.x);
      if (j < in / 2) {
        unsigned long long v = ld_relaxed_u64(actw + s * kActStride + j);
        while (unsigned(v >> 32) != tag) v = ld_relaxed_u64(actw + s * kActStride + j);
        reinterpret_cast<unsigned*>(acts + s * kMaxInter)[j] = unsigned(v);
      }
    }
  }
  __syncthreads();  // every SwiGLU row in shared memory
  if (!rows_here) return;
  float sum[kDownRows] = {0.f, 0.f};
#pragma unroll
  for (int k = 0; k < kSlots; ++k)
    if (k < K) {
      float acc[kDownRows] = {0.f, 0.f};
#pragma unroll
      for (int c = 0; c < kInterHeld; ++c)
        if (lane + 32 * c < I / 8) {
          float xf[8];
          unpack8(*reinterpret_cast<const uint4*>(acts + k * kMaxInter + (lane + 32 * c) * 8), xf);
#pragma unroll
          for (int r = 0; r < kDownRows; ++r) {
            float wf[8];
            unpack8(q[k][r][c], wf);
#pragma unroll
            for (int i = 0; i < 8; ++i) acc[r] = fmaf(wf[i], xf[i], acc[r]);
          }
        }
#pragma unroll
      for (int r = 0; r < kDownRows; ++r) sum[r] = fmaf(s_w[k], round_bf16(warp_sum(acc[r])), sum[r]);
    }
  float y[kDownRows];
#pragma unroll
  for (int r = 0; r < kDownRows; ++r) y[r] = round_bf16(sum[r]);
  if (has_shared) {
    float acc[kDownRows] = {0.f, 0.f};
#pragma unroll
    for (int c = 0; c < kInterHeld; ++c)
      if (lane + 32 * c < Is / 8) {
        float xf[8];
        unpack8(*reinterpret_cast<const uint4*>(acts + kSharedSlot * kMaxInter + (lane + 32 * c) * 8), xf);
#pragma unroll
        for (int r = 0; r < kDownRows; ++r) {
          float wf[8];
          unpack8(q[kSharedSlot][r][c], wf);
#pragma unroll
          for (int i = 0; i < 8; ++i) acc[r] = fmaf(wf[i], xf[i], acc[r]);
        }
      }
#pragma unroll
    for (int r = 0; r < kDownRows; ++r) y[r] = round_bf16(y[r] + round_bf16(warp_sum(acc[r])));
  }
  if (lane < kDownRows) {
    const int o = o0 + lane;
    p.h[o] = __float2bfloat16_rn(__bfloat162float(hs[o]) + (lane == 0 ? y[0] : y[1]));
  }
}

template <typename W>
bool co_resident() {
  static const bool ok = [] {
    int dev = 0, sms = 0, per_sm = 0;
    STRIKER_CUDA_CHECK(cudaGetDevice(&dev));
    STRIKER_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    STRIKER_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, moe_decode_fused_kernel<W>, kThreads, 0));
    return int64_t(per_sm) * sms >= kCtas;
  }();
  return ok;
}

}  // namespace

bool moe_decode_fused_fits(const RouterShape& rs, int inter, int shared_inter, bool has_shared) {
  const int slots = rs.top_k + (has_shared ? 1 : 0);
  const bool shape = rs.hidden > 0 && rs.hidden % 8 == 0 && rs.hidden <= kMaxHidden && rs.n_experts > 0 &&
                     rs.n_experts <= kMaxExperts && rs.top_k > 0 && rs.top_k <= rs.n_experts &&
                     rs.top_k <= kRouterMaxTopK && (has_shared ? rs.top_k <= kSharedSlot : slots <= kSlots) &&
                     inter > 0 && inter % 8 == 0 && inter <= kMaxInter &&
                     (!has_shared || (shared_inter > 0 && shared_inter % 8 == 0 && shared_inter <= kMaxInter));
  return shape && co_resident<bf16_t>() && co_resident<float>();
}

void moe_decode_fused(bf16* h, const RouterShape& rs, const MoeFusedWeights& w, unsigned long long* sync,
                      int32_t* topk_ids, float* topk_w, cudaStream_t stream, int variant) {
  const bool has_shared = w.shared_gate != nullptr;
  if (!moe_decode_fused_fits(rs, w.inter, w.shared_inter, has_shared))
    throw Error("moe_decode_fused: unsupported shape (hidden " + std::to_string(rs.hidden) + ", experts " +
                std::to_string(rs.n_experts) + ", top-k " + std::to_string(rs.top_k) + ", inter " +
                std::to_string(w.inter) + "/" + std::to_string(w.shared_inter) + ")");
  if ((w.router_bf16 == nullptr) == (w.router_f32 == nullptr) || w.post_gamma == nullptr || sync == nullptr ||
      (has_shared && (w.shared_up == nullptr || w.shared_down == nullptr)))
    throw Error("moe_decode_fused: needs one router matrix, the norm's weights, the sync words and a whole shared expert");
  Params p{};
  p.h = reinterpret_cast<bf16_t*>(h);
  p.gamma = w.post_gamma;
  p.eps = w.eps;
  p.hidden = rs.hidden, p.E = rs.n_experts, p.K = rs.top_k;
  p.router = w.router_bf16 != nullptr ? static_cast<const void*>(w.router_bf16) : static_cast<const void*>(w.router_f32);
  p.bias = w.router_bias;
  p.norm = rs.norm_topk_prob;
  p.rsf = rs.routed_scaling_factor;
  p.wg = reinterpret_cast<const bf16_t*>(w.gate);
  p.wu = reinterpret_cast<const bf16_t*>(w.up);
  p.wd = reinterpret_cast<const bf16_t*>(w.down);
  p.inter = w.inter;
  p.sg = has_shared ? reinterpret_cast<const bf16_t*>(w.shared_gate) : nullptr;
  p.su = has_shared ? reinterpret_cast<const bf16_t*>(w.shared_up) : nullptr;
  p.sd = has_shared ? reinterpret_cast<const bf16_t*>(w.shared_down) : nullptr;
  p.shared_inter = has_shared ? w.shared_inter : 0;
  p.sync = sync;
  p.ids_out = topk_ids;
  p.w_out = topk_w;
  p.prefetch_down = (variant & 1) != 0;
  p.counters = (variant & 2) != 0;
  p.one_selector = (variant & 4) != 0;
  if (w.router_bf16 != nullptr)
    launch_pdl(moe_decode_fused_kernel<bf16_t>, dim3(kCtas), dim3(kThreads), 0, stream, p);
  else
    launch_pdl(moe_decode_fused_kernel<float>, dim3(kCtas), dim3(kThreads), 0, stream, p);
  STRIKER_CUDA_CHECK_LAUNCH("moe_decode_fused");
}

}  // namespace striker::cuda
