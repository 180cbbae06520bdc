// The MoE block of a one-token NVFP4 decode step in one launch (nvfp4_moe.h, nvfp4_moe_one_launch):
// the gate/up kernel's CTAs (nvfp4_moe.cu: 32 CTAs per slot, 8 warps of two rows each, the same warp
// computation) go on, once every CTA of their slot has written its act rows, to their share of that
// slot's down rows (nvfp4_down_rows.cuh: the down kernel's warp computation), and the last of the K + 1
// slots to finish a block of output rows forms h there (the down kernel's combine, operation for
// operation). Same bits as nvfp4_moe_gate_up + nvfp4_moe_down_combine, one kernel boundary fewer.
//
// The two waits inside are counters in global memory, never reset: each launch adds exactly gridDim.x
// to a slot's counter and K + 1 to a row block's, so a CTA finds its launch's target from its own
// ticket. A CTA waits only for CTAs of its own slot, all of which are resident by then: the launch is
// refused unless the whole grid fits the GPU at once (nvfp4_moe_one_launch_fits), and nothing can take
// their place — the kernels in front finish without this one, and the kernel behind is launched only
// when every CTA of this grid has started (pdl_launch_dependents at the top).
#include <string>

#include "backends/cuda/common/cuda_check.h"
#include "backends/cuda/common/launch.cuh"
#include "backends/cuda/common/warp_dot.cuh"
#include "backends/cuda/nvfp4/nvfp4_decode.cuh"
#include "backends/cuda/nvfp4/nvfp4_down_rows.cuh"
#include "backends/cuda/nvfp4/nvfp4_moe.h"

namespace striker::cuda {
namespace {

constexpr int kWarps = 8;          // the gate/up kernel's: two gate/up rows per warp, 16 per CTA
constexpr int kRowsPerCta = 2 * kWarps;
constexpr int kMaxTopK = 8;
constexpr int kHidden = 2048;  // one pair of code chunks per lane (nvfp4_one_pair_per_lane): Flint's
static_assert(nvfp4_one_pair_per_lane(kHidden, 1), "the gate/up kernel's one-pair form");
// The grid's width at Flint's inter: each CTA's share of the down rows is whole 16-row warp tiles, one per
// warp at most, and every row block has a counter after the slots'.
constexpr int kBlocks = nvfp4_down::kFullIn / kRowsPerCta;
static_assert(kHidden % (16 * kBlocks) == 0 && kHidden / kBlocks <= 16 * kWarps, "down rows per CTA: whole warp tiles");
static_assert(kMaxTopK + 1 + kBlocks <= kNvfp4MoeSyncWords, "a counter per slot and per row block");

__device__ __forceinline__ unsigned long long load_acquire(const unsigned long long* p) {
  unsigned long long v;
  asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ float load_bf16_from_l2(const bf16_t* p) {
  unsigned short v;
  asm volatile("ld.global.cg.u16 %0, [%1];" : "=h"(v) : "l"(p) : "memory");
  return __bfloat162float(__ushort_as_bfloat16(v));
}

// Thread 0 takes a ticket on `counter`, to which each launch adds `per_launch` tickets; returns the
// ticket. The CTA's writes before the call are visible GPU-wide before the ticket is taken.
__device__ __forceinline__ unsigned long long take_ticket(unsigned long long* counter) {
  __threadfence();
  return atomicAdd(counter, 1ull);
}

// grid (inter / 16, K + 1): CTA (x, slot) — slot K is the shared expert — computes act rows
// [16x, 16x + 16) of its slot, then down rows [x·R, x·R + R) of its slot's expert (R = kHidden / gridDim.x,
// a multiple of 16: warps 0 .. R/16 - 1), then, if last of the K + 1 slots there, h at those rows.
__global__ void __launch_bounds__(kWarps * 32, 2)
    nvfp4_moe_one_launch_kernel(const bf16_t* __restrict__ x, Nvfp4Stack wg, Nvfp4Stack wu,
                                Nvfp4Stack wd, int inter, const int32_t* __restrict__ ids,
                                const float* __restrict__ topk_w, int K, Nvfp4Shared sh, bf16_t* act,
                                bf16_t* shared_act, bf16_t* ys, unsigned long long* sync, bf16_t* __restrict__ h) {
  using namespace nvfp4_down;
  pdl_launch_dependents();  // see launch.cuh, and the file's header on why this must come first
  const int slot = blockIdx.y, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const bool shared = slot == K;
  const int o0 = blockIdx.x * kRowsPerCta + 2 * warp;  // this warp's gate/up rows o0, o0 + 1
  const int64_t cb = kHidden / 2, sb = kHidden / 16;
  const uint8_t* cr[4];
  const uint8_t* sr[4];
  float s2g = 0.f, s2u = 0.f;
  Nvfp4Prologue<4> pr;
  if (shared) {  // the shared expert's rows do not depend on the routing: requested before the wait
    cr[0] = sh.gate.codes + o0 * cb, sr[0] = sh.gate.scales + o0 * sb;
    cr[1] = sh.up.codes + o0 * cb, sr[1] = sh.up.scales + o0 * sb;
    cr[2] = sh.gate.codes + (o0 + 1) * cb, sr[2] = sh.gate.scales + (o0 + 1) * sb;
    cr[3] = sh.up.codes + (o0 + 1) * cb, sr[3] = sh.up.scales + (o0 + 1) * sb;
    s2g = sh.s2_gate;
    s2u = sh.s2_up;
    warp_dot_nvfp4_prologue_mma<4, true>(cr, sr, kHidden, pr);
  }
  pdl_wait();  // ids, weights (router), x (the router's norm) and h (o_proj) come from earlier kernels
  int64_t e = 0;
  if (!shared) {
    e = ids[slot];
    const int64_t r0 = e * inter + o0;
    cr[0] = wg.m.codes + r0 * cb, sr[0] = wg.m.scales + r0 * sb;
    cr[1] = wu.m.codes + r0 * cb, sr[1] = wu.m.scales + r0 * sb;
    cr[2] = wg.m.codes + (r0 + 1) * cb, sr[2] = wg.m.scales + (r0 + 1) * sb;
    cr[3] = wu.m.codes + (r0 + 1) * cb, sr[3] = wu.m.scales + (r0 + 1) * sb;
    s2g = wg.scale2[e];
    s2u = wu.scale2[e];
    warp_dot_nvfp4_prologue_mma<4, true>(cr, sr, kHidden, pr);
  }
  // This CTA's down rows into L2 behind its gate/up rows (the two-launch form's prefetch, its own rows).
  const int rows = kHidden / int(gridDim.x), d0 = blockIdx.x * rows;
  const int64_t dcb = inter / 2, dsb = inter / 16;
  const uint8_t* dcodes = shared ? sh.down.codes : wd.m.codes + e * kHidden * dcb;
  const uint8_t* dscales = shared ? sh.down.scales : wd.m.scales + e * kHidden * dsb;
  prefetch_l2_part(dcodes + d0 * dcb, rows * dcb, 0, 1);
  prefetch_l2_part(dscales + d0 * dsb, rows * dsb, 0, 1);

  // x into shared memory from L2: read through the read-only path (as the gate/up kernel's warps read
  // it), ptxas scheduled this kernel's x loads above the wait (scripts/sass_prewait_loads.py).
  __shared__ __align__(16) bf16_t xs[kHidden];
  for (int i = threadIdx.x; i < kHidden / 8; i += blockDim.x)
    reinterpret_cast<uint4*>(xs)[i] = load_from_l2(x + int64_t(i) * 8);
  __syncthreads();

  // Gate/up + SwiGLU (nvfp4_moe_gate_up_kernel's one-pair warp computation and rounding).
  float acc[4][1];
  warp_dot_nvfp4_early_mma<4, true, E2m1Pairs::kMultiply, true>(pr, cr, sr, xs, kHidden, acc);
  bf16_t* a = shared ? shared_act : act + int64_t(slot) * inter;
  if (lane < 2) {
    const float gv = round_bf16((lane == 0 ? acc[0][0] : acc[2][0]) * s2g);
    const float uv = round_bf16((lane == 0 ? acc[1][0] : acc[3][0]) * s2u);
    a[o0 + lane] = __float2bfloat16_rn(silu_bf16(gv) * uv);
  }

  // The down rows' weights requested now, so their L2 round trip overlaps the wait for the slot.
  const bool down_warp = warp * 16 < rows;
  const int g = lane >> 2, t = lane & 3;
  const int top = d0 + warp * 16 + g, bottom = top + 8;
  MmaRows r;
  if (down_warp)
    load_rows<true>(dcodes + top * dcb, dscales + top * dsb, dcodes + bottom * dcb, dscales + bottom * dsb, inter, t,
                    0, kSteps, r);
  __syncthreads();  // the CTA's act rows are written
  if (threadIdx.x == 0) {
    const unsigned long long n = gridDim.x, ticket = take_ticket(sync + slot);
    const unsigned long long target = (ticket / n + 1) * n;
    while (load_acquire(sync + slot) < target) {
    }
  }
  __syncthreads();  // every act row of the slot is written

  if (down_warp) {
    float c0[4] = {0.f, 0.f, 0.f, 0.f}, c1[4] = {0.f, 0.f, 0.f, 0.f};
    dot_rows<true, true>(r, a, inter, t, 0, kSteps, c0, c1);
    if (t == 0) {  // the down kernel's bf16(scale2·2^8 · sum) of rows top and bottom
      const float coef = (shared ? sh.s2_down : wd.scale2[e]) * kNvfp4PairUnscale;
      bf16_t* y = ys + int64_t(slot) * kHidden;
      y[top] = __float2bfloat16_rn((c0[0] + c1[0]) * coef);
      y[bottom] = __float2bfloat16_rn((c0[2] + c1[2]) * coef);
    }
  }
  __syncthreads();  // the CTA's down rows are written
  __shared__ bool last;
  if (threadIdx.x == 0) {
    const unsigned long long n = K + 1;
    last = take_ticket(sync + (kMaxTopK + 1) + blockIdx.x) % n == n - 1;
    if (last) __threadfence();
  }
  __syncthreads();
  if (!last) return;
  for (int i = threadIdx.x; i < rows; i += blockDim.x) {  // the down kernel's combine, in k order
    const int o = d0 + i;
    float sum = 0.f;
    for (int k = 0; k < K; ++k) sum = fmaf(topk_w[k], load_bf16_from_l2(ys + int64_t(k) * kHidden + o), sum);
    const float y = round_bf16(round_bf16(sum) + load_bf16_from_l2(ys + int64_t(K) * kHidden + o));
    h[o] = __float2bfloat16_rn(__bfloat162float(h[o]) + y);
  }
}

// CTAs of the kernel that fit the GPU at once (0 when it cannot be asked).
int resident_ctas() {
  static const int n = [] {
    int per_sm = 0, sms = 0, dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, nvfp4_moe_one_launch_kernel, kWarps * 32, 0) !=
            cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
      return 0;
    return per_sm * sms;
  }();
  return n;
}

}  // namespace

bool nvfp4_moe_one_launch_fits(int T, int hidden, int inter, int K, const Nvfp4Shared* shared) {
  if (T != 1 || K < 1 || K > kMaxTopK || shared == nullptr || shared->inter != inter ||
      inter != nvfp4_down::kFullIn || hidden != kHidden)
    return false;
  return resident_ctas() >= kBlocks * (K + 1);
}

void nvfp4_moe_one_launch(const bf16* x, int hidden, Nvfp4Stack gate, Nvfp4Stack up, Nvfp4Stack down, int inter,
                          const int32_t* topk_ids, const float* topk_w, int K, const Nvfp4Shared& shared, bf16* act,
                          bf16* shared_act, bf16* y_scratch, unsigned long long* sync, bf16* h,
                          cudaStream_t stream, bool cooperative) {
  if (!nvfp4_moe_one_launch_fits(1, hidden, inter, K, &shared))
    throw Error("nvfp4_moe_one_launch: one token with hidden " + std::to_string(hidden) + ", inter " +
                std::to_string(inter) + " (shared " + std::to_string(shared.inter) + "), top-" + std::to_string(K) +
                " is not a shape it takes, or its grid does not fit the GPU at once");
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(unsigned(kBlocks), unsigned(K + 1));
  cfg.blockDim = dim3(kWarps * 32);
  cfg.stream = stream;
  cudaLaunchAttribute attr[2];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  // TEMPORARY (session 45's open question): with `cooperative` the driver itself refuses a grid that
  // cannot be resident at once, instead of the occupancy estimate above — if it takes it beside PDL.
  attr[1].id = cudaLaunchAttributeCooperative;
  attr[1].val.cooperative = 1;
  cfg.attrs = attr;
  cfg.numAttrs = cooperative ? 2 : 1;
  STRIKER_CUDA_CHECK(cudaLaunchKernelEx(&cfg, nvfp4_moe_one_launch_kernel, reinterpret_cast<const bf16_t*>(x), gate,
                                        up, down, inter, topk_ids, topk_w, K, shared,
                                        reinterpret_cast<bf16_t*>(act), reinterpret_cast<bf16_t*>(shared_act),
                                        reinterpret_cast<bf16_t*>(y_scratch), sync, reinterpret_cast<bf16_t*>(h)));
  STRIKER_CUDA_CHECK_LAUNCH("nvfp4_moe_one_launch");
}

}  // namespace striker::cuda
