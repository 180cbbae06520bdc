#include "backends/cuda/elementwise/rmsnorm.h"

#include <algorithm>

#include "backends/cuda/common/cuda_check.h"
#include "backends/cuda/common/launch.cuh"
#include "backends/cuda/common/device_math.cuh"
#include "backends/cuda/elementwise/rmsnorm_row.cuh"

namespace striker::cuda {
namespace {

constexpr int kThreads = kRmsnormRowThreads;

// One block per row (decode steps, and rows the staged kernel below does not take). The row is read twice (sum of squares, then scale); the second read
// hits L1/L2 since a row is at most a few KiB. The arithmetic is rmsnorm_row.cuh's.
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

// Steps of more than kStagedMinRows rows (prefill): `rows_per_cta` consecutive rows, one
// contiguous range, staged into shared memory with 16-byte loads all issued before any is used,
// then each row normalised by the threads in rmsnorm_row.cuh's assignment and order (thread i:
// elements i, i + 256, ...; warp_sum; the 8 warp partials in order: the row kernel's bits), the
// results written back through shared memory with 16-byte stores. The row kernel moves 2 bytes per
// access and kept a thread's 8 loads one loop trip apart: 27-34 µs at 8192 × 2048, 0.3-0.4 of the
// bandwidth. kAdd: the deltas are staged too, h = bf16(h + delta) is written back with x.
constexpr int kStagedMinRows = 9;      // decode steps (<= 8 tokens) keep the row kernel
constexpr int kStagedMaxRows = 4;      // rows per CTA
constexpr int kStagedMaxBytes = 40 * 1024;  // dynamic shared memory, under the 48 KiB default with `partial`
constexpr int kStagedUnroll = 4;       // 16-byte loads per thread in flight (per staged array)

template <bool kAdd>
__global__ void __launch_bounds__(kThreads) rmsnorm_staged_kernel(bf16_t* h, const bf16_t* __restrict__ delta,
                                                                  const float* __restrict__ w, bf16_t* out, int rows,
                                                                  int hidden, float eps, int rows_per_cta) {
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ float partial[kStagedMaxRows][kThreads / 32];
  pdl_grid_start();  // see launch.cuh
  const int64_t row0 = int64_t(blockIdx.x) * rows_per_cta;
  const int nr = int(std::min<int64_t>(rows_per_cta, rows - row0));
  const int n8 = nr * hidden / 8;  // 16-byte vectors of the CTA's rows
  auto* hs = reinterpret_cast<uint4*>(smem);
  auto* ds = hs + rows_per_cta * hidden / 8;  // kAdd: the deltas, overwritten by the normalised rows
  const auto* hg = reinterpret_cast<const uint4*>(h + row0 * hidden);
  const auto* dg = reinterpret_cast<const uint4*>(kAdd ? delta + row0 * hidden : nullptr);
  for (int c0 = int(threadIdx.x); c0 < n8; c0 += kStagedUnroll * kThreads) {
    uint4 a[kStagedUnroll], b[kStagedUnroll];
#pragma unroll
    for (int u = 0; u < kStagedUnroll; ++u) {
      const int c = c0 + u * kThreads;
      if (c < n8) {
        a[u] = hg[c];
        if constexpr (kAdd) b[u] = dg[c];
      }
    }
#pragma unroll
    for (int u = 0; u < kStagedUnroll; ++u) {
      const int c = c0 + u * kThreads;
      if (c < n8) {
        hs[c] = a[u];
        if constexpr (kAdd) ds[c] = b[u];
      }
    }
  }
  __syncthreads();
  auto* hrows = reinterpret_cast<bf16_t*>(hs);
  auto* drows = reinterpret_cast<bf16_t*>(ds);
  for (int r = 0; r < nr; ++r) {  // each thread touches only its own elements: no barrier inside
    bf16_t* x = hrows + r * hidden;
    const bf16_t* d = drows + r * hidden;
    float ss = rmsnorm_partial(hidden, [&](int i) {
      float v = __bfloat162float(x[i]);
      if constexpr (kAdd) {
        v = round_bf16(v + __bfloat162float(d[i]));
        x[i] = __float2bfloat16_rn(v);
      }
      return v;
    });
    ss = warp_sum(ss);
    if ((threadIdx.x & 31) == 0) partial[r][threadIdx.x >> 5] = ss;
  }
  __syncthreads();
  bf16_t* yrows = kAdd ? drows : hrows;  // each thread overwrites only elements it alone has read
  for (int r = 0; r < nr; ++r) {
    const float rr = rmsnorm_r(partial[r], hidden, eps);
    const bf16_t* x = hrows + r * hidden;
    bf16_t* y = yrows + r * hidden;
    for (int i = int(threadIdx.x); i < hidden; i += kThreads)
      y[i] = __float2bfloat16_rn(rmsnorm_apply(__bfloat162float(x[i]), rr, w[i]));
  }
  __syncthreads();
  auto* og = reinterpret_cast<uint4*>(out + row0 * hidden);
  auto* hw = reinterpret_cast<uint4*>(h + row0 * hidden);
  const uint4* ys = kAdd ? ds : hs;
  for (int c = int(threadIdx.x); c < n8; c += kThreads) {
    og[c] = ys[c];
    if constexpr (kAdd) hw[c] = hs[c];
  }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Rows per CTA of the staged kernel for this shape, or 0 where the row kernel runs.
int staged_rows(int rows, int hidden, bool add, const void* h, const void* delta, const void* out) {
  const int64_t row_bytes = int64_t(hidden) * 2 * (add ? 2 : 1);
  if (rows < kStagedMinRows || hidden % 8 != 0 || row_bytes > kStagedMaxBytes || !aligned16(h) ||
      !aligned16(out) || (add && !aligned16(delta)))
    return 0;
  return int(std::min<int64_t>(kStagedMaxRows, kStagedMaxBytes / row_bytes));
}

template <bool kAdd>
void launch_rmsnorm(bf16_t* h, const bf16_t* delta, const float* w, bf16_t* out, int rows, int hidden, float eps,
                    cudaStream_t stream) {
  const int per = staged_rows(rows, hidden, kAdd, h, delta, out);
  if (per == 0) {
    launch_pdl(rmsnorm_kernel<kAdd>, dim3(rows), dim3(kThreads), 0, stream, h, delta, w, out, hidden, eps);
    return;
  }
  const size_t smem = size_t(per) * hidden * 2 * (kAdd ? 2 : 1);
  launch_pdl(rmsnorm_staged_kernel<kAdd>, dim3(unsigned((rows + per - 1) / per)), dim3(kThreads), smem, stream, h,
             delta, w, out, rows, hidden, eps, per);
}

}  // namespace

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
