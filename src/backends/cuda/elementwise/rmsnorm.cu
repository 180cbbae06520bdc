#include "backends/cuda/elementwise/rmsnorm.h"


#include "backends/cuda/common/cuda_check.h"
#include "backends/cuda/common/launch.cuh"
#include "backends/cuda/common/device_math.cuh"
#include "backends/cuda/elementwise/rmsnorm_row.cuh"

namespace striker::cuda {
namespace {

constexpr int kThreads = kRmsnormRowThreads;

// One block per row (decode steps, and rows the warp-per-row kernel below does not take). The row
// is read twice (sum of squares, then scale); the second read hits L1/L2 since a row is at most a
// few KiB. The arithmetic is rmsnorm_row.cuh's.
template <bool kAdd>
__global__ void __launch_bounds__(kThreads) rmsnorm_kernel(bf16_t* h, const bf16_t* __restrict__ delta,
                                                           const float* __restrict__ w, bf16_t* out, int hidden,
                                                           float eps) {
  pdl_grid_start();  // see launch.cuh
  const int64_t row = blockIdx.x;
  bf16_t* x = h + row * hidden;
  const bf16_t* d = kAdd ? delta + row * hidden : nullptr;
  bf16_t* y = out + row * hidden;
  const float ss = rmsnorm_partial(hidden, [&](int i) {
    float v = __bfloat162float(x[i]);
    if constexpr (kAdd) {
      v = round_bf16(v + __bfloat162float(d[i]));
      x[i] = __float2bfloat16_rn(v);
    }
    return v;
  });
  __shared__ float partial[kThreads / 32];
  const float r = rmsnorm_scale(ss, hidden, eps, partial);
  // Each thread re-reads only the elements it wrote itself, so no barrier is needed here.
  for (int i = threadIdx.x; i < hidden; i += kThreads)
    y[i] = __float2bfloat16_rn(rmsnorm_apply(__bfloat162float(x[i]), r, w[i]));
}

// Steps of more than kWarpMinRows rows (prefill): one warp per row, the whole row in registers.
// Lane p loads the row's 16-byte vectors p, p + 32, ... (vector q: elements 8q..8q+7), all issued
// before any is used (kVecs × 16 B per lane in flight; no shared memory, no barrier), and stores
// the normalised row the same way. The row kernel's bits, order for order: its thread v (0..255)
// sums elements v, v + 256, ... in that order; element 8q + e belongs to thread 8q % 256 + e, trip
// q / 32, so lane p holds threads 8p..8p+7 (part[e]) and adds their elements trip by trip; then
// rmsnorm_r_of_lanes rebuilds the kernel's butterfly and warp order. The earlier form (4 rows per
// CTA staged through shared memory, 2-byte accesses there) ran 27 µs at 8192 × 2048, 47 µs with
// the residual: its phases were serial within a CTA.
constexpr int kWarpMinRows = 9;  // decode steps (<= 8 tokens) keep the row kernel
constexpr int kWarpRows = 4;     // rows (warps) per CTA: 5 CTAs per SM at add_rmsnorm's 88 registers
constexpr int kWarpMaxVecs = 8;  // 16-byte vectors per lane: hidden <= 2048 (Flint's)

template <bool kAdd, int kVecs>
__global__ void __launch_bounds__(kWarpRows * 32) rmsnorm_warp_kernel(bf16_t* h, const bf16_t* __restrict__ delta,
                                                                      const float* __restrict__ w, bf16_t* out,
                                                                      int rows, int hidden, float eps) {
  pdl_grid_start();  // see launch.cuh
  const int lane = int(threadIdx.x & 31);
  const int64_t row = int64_t(blockIdx.x) * kWarpRows + (threadIdx.x >> 5);
  if (row >= rows) return;
  const int n8 = hidden / 8;
  auto* hr = reinterpret_cast<uint4*>(h + row * hidden);
  const auto* dr = reinterpret_cast<const uint4*>(kAdd ? delta + row * hidden : nullptr);
  uint4 v[kVecs], dv[kAdd ? kVecs : 1];
#pragma unroll
  for (int j = 0; j < kVecs; ++j)
    if (lane + 32 * j < n8) {
      v[j] = hr[lane + 32 * j];
      if constexpr (kAdd) dv[j] = dr[lane + 32 * j];
    }
  float part[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
#pragma unroll
  for (int j = 0; j < kVecs; ++j)
    if (lane + 32 * j < n8) {
      float f[8];
      unpack8(v[j], f);
      if constexpr (kAdd) {
        float d[8];
        unpack8(dv[j], d);
#pragma unroll
        for (int e = 0; e < 8; ++e) f[e] = round_bf16(f[e] + d[e]);
        v[j] = pack8(f);  // exact: the values are bf16 already
      }
#pragma unroll
      for (int e = 0; e < 8; ++e) part[e] += f[e] * f[e];  // rmsnorm_partial's `ss += v * v`
    }
  const float r = rmsnorm_r_of_lanes(part, hidden, eps);
  auto* orow = reinterpret_cast<uint4*>(out + row * hidden);
  const auto* w4 = reinterpret_cast<const float4*>(w);
#pragma unroll
  for (int j = 0; j < kVecs; ++j) {
    const int q = lane + 32 * j;
    if (q < n8) {
      float f[8], y[8];
      unpack8(v[j], f);
      const float4 w0 = __ldg(w4 + 2 * q), w1 = __ldg(w4 + 2 * q + 1);
      const float wf[8] = {w0.x, w0.y, w0.z, w0.w, w1.x, w1.y, w1.z, w1.w};
#pragma unroll
      for (int e = 0; e < 8; ++e) y[e] = rmsnorm_apply(f[e], r, wf[e]);
      if constexpr (kAdd) hr[q] = v[j];
      orow[q] = pack8(y);
    }
  }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// 16-byte vectors per lane of the warp-per-row kernel for this shape, or 0 where the row kernel runs.
int warp_vecs(int rows, int hidden, bool add, const void* h, const void* delta, const float* w, const void* out) {
  if (rows < kWarpMinRows || hidden % 8 != 0 || hidden > kWarpMaxVecs * 32 * 8 || !aligned16(h) || !aligned16(out) ||
      !aligned16(w) || (add && !aligned16(delta)))
    return 0;
  const int per_lane = (hidden / 8 + 31) / 32;
  return per_lane <= 2 ? 2 : per_lane <= 4 ? 4 : 8;
}

template <bool kAdd>
void launch_rmsnorm(bf16_t* h, const bf16_t* delta, const float* w, bf16_t* out, int rows, int hidden, float eps,
                    cudaStream_t stream) {
  const dim3 grid(unsigned((rows + kWarpRows - 1) / kWarpRows)), block(kWarpRows * 32);
  switch (warp_vecs(rows, hidden, kAdd, h, delta, w, out)) {
    case 2: launch_pdl(rmsnorm_warp_kernel<kAdd, 2>, grid, block, 0, stream, h, delta, w, out, rows, hidden, eps); return;
    case 4: launch_pdl(rmsnorm_warp_kernel<kAdd, 4>, grid, block, 0, stream, h, delta, w, out, rows, hidden, eps); return;
    case 8: launch_pdl(rmsnorm_warp_kernel<kAdd, 8>, grid, block, 0, stream, h, delta, w, out, rows, hidden, eps); return;
    default: launch_pdl(rmsnorm_kernel<kAdd>, dim3(rows), dim3(kThreads), 0, stream, h, delta, w, out, hidden, eps);
  }
}

}  // namespace

void check_input_norm(const char* what, const InputNorm& norm, int T, int hidden) {
  if (T != 1 || hidden <= 0 || hidden % 8 != 0 || hidden > kBlockNormMaxHidden || norm.gamma == nullptr ||
      !aligned16(norm.gamma))
    throw Error(std::string(what) + ": the input norm inside the kernel takes one token, a width that is a multiple "
                "of 8 up to " + std::to_string(kBlockNormMaxHidden) + " and 16-byte aligned weights");
}

void rmsnorm(const bf16* x, const float* w, bf16* out, int rows, int hidden, float eps, cudaStream_t stream) {
  if (rows <= 0) return;
  launch_rmsnorm<false>(const_cast<bf16_t*>(reinterpret_cast<const bf16_t*>(x)), nullptr, w,
                        reinterpret_cast<bf16_t*>(out), rows, hidden, eps, stream);
  STRIKER_CUDA_CHECK_LAUNCH("rmsnorm");
}

void add_rmsnorm(bf16* h, const bf16* delta, const float* w, bf16* out, int rows, int hidden, float eps,
                 cudaStream_t stream) {
  if (rows <= 0) return;
  launch_rmsnorm<true>(reinterpret_cast<bf16_t*>(h), reinterpret_cast<const bf16_t*>(delta), w,
                       reinterpret_cast<bf16_t*>(out), rows, hidden, eps, stream);
  STRIKER_CUDA_CHECK_LAUNCH("add_rmsnorm");
}

}  // namespace striker::cuda
