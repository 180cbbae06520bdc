// The BF16 skinny kernel (skinny_mma.cuh) and its launcher, shared by the dense decode GEMVs
// (gemv.cu).
#pragma once
#include "backends/cuda/linear/skinny_mma.cuh"

namespace striker::cuda {

// A lane's chunk of step s is the 8 weights s·32 + t·8 .. +7 of rows g and g + 8 (2 MMAs); U
// steps are in flight per warp, the first U requested before the wait when the Job allows it.
// Tiles past `rows` compute clamped rows and store nothing. W0/W1: the matrices (gate, up for
// GateUp) at the Job's w_row0.
// 3 CTAs per SM (80 registers) for the 4-deep ring of dense launches; 2 for the 8-deep ring and
// for the MoE jobs, whose routing state would spill at 80.
template <int S, int U, SkinnyTile K, GemvOut M, typename Job>
__global__ void __launch_bounds__(kSkinnyWarps * 32, U <= 4 && Job::kWeightsBeforeWait ? 3 : 2)
    skinny_bf16_kernel(const bf16_t* __restrict__ x, int in, const bf16_t* __restrict__ W0,
                       const bf16_t* __restrict__ W1, int rows, void* out, Job job) {
  pdl_launch_dependents();  // see launch.cuh
  if constexpr (!Job::kWeightsBeforeWait) pdl_wait();  // the rows to read come from earlier kernels
  const SkinnyWork wk = job.work((threadIdx.x & 31) >> 2);
  if (!wk.live) return;
  const SkinnyOperands<const bf16_t*> launch{x, W0, W1, out, in, rows};
  const SkinnyOperands<const bf16_t*> op = skinny_operands(job, wk, launch);
  const int in_ = op.in;
  const SkinnyLane l = skinny_lane<S, K>(op.rows, (in_ + 31) / 32);
  const int t = l.t, s0 = l.s0, s1 = l.s1;
  const bf16_t* wt = op.w0 + int64_t(wk.w_row0 + l.top) * in_ + t * 8;
  const bf16_t* wb = op.w1 + int64_t(wk.w_row0 + l.bottom) * in_ + t * 8;
  const bf16_t* xg = op.x + int64_t(wk.x_row) * in_ + t * 8;
  uint4 qt[U], qb[U];
  // in % 8 == 0, so a lane's chunk is wholly inside the row or wholly past it (then zeros).
  auto load = [&](int u, int s) {
    const bool live = s < s1 && s * 32 + t * 8 < in_;
    qt[u] = live ? load_stream(wt + int64_t(s) * 32) : make_uint4(0, 0, 0, 0);
    qb[u] = live ? load_stream(wb + int64_t(s) * 32) : make_uint4(0, 0, 0, 0);
  };
#pragma unroll
  for (int u = 0; u < U; ++u) load(u, s0 + u);
  if constexpr (Job::kWeightsBeforeWait) pdl_wait();  // x (and h in Residual mode) come from earlier kernels
  SkinnyAcc acc;
  for (int s = s0; s < s1; s += U) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (s + u < s1) {  // warp-uniform: the MMAs run on converged warps
        const uint4 xq = (s + u) * 32 + t * 8 < in_ ? load_cached(xg + int64_t(s + u) * 32) : make_uint4(0, 0, 0, 0);
        skinny_mma(acc.c[0], qt[u].x, qb[u].x, qt[u].y, qb[u].y, xq.x, xq.y);
        skinny_mma(acc.c[1], qt[u].z, qb[u].z, qt[u].w, qb[u].w, xq.z, xq.w);
        load(u, s + u + U);  // refill the slot just consumed
      }
    }
  }
  skinny_store<S, K, M>(acc, wk.out_row0, wk.nt, op.rows, [](int) { return 1.f; }, op.out);
}

// CTAs below which a split-8 dense launch keeps 8 steps in flight per warp instead of 4 (one CTA
// per SM would otherwise hold ~32 KiB of loads: o_proj and dense down have 128 CTAs).
constexpr unsigned kSkinnyDeepRingCtas = 264;

// grid.y = items (the Job's work items). Shapes are checked by the callers (in % 8 == 0, 16-byte
// aligned rows).
// grid_rows: the most output rows of any work item (rows, unless the Job's alt has more).
template <SkinnyTile K, GemvOut M, typename Job>
void launch_skinny_bf16(const bf16_t* x, int in, const bf16_t* W0, const bf16_t* W1, int rows, void* out, int items,
                        Job job, cudaStream_t stream, int grid_rows = 0) {
  const int S = skinny_split((in + 31) / 32, 4);
  const dim3 grid = skinny_grid<K>(grid_rows > 0 ? grid_rows : rows, S, items);
  // The MoE jobs (weights after the wait, thousands of CTAs) never take the deep ring.
  skinny_dispatch<Job::kWeightsBeforeWait>(S, grid.x * grid.y < kSkinnyDeepRingCtas, [&](auto s, auto u) {
    launch_pdl(skinny_bf16_kernel<decltype(s)::value, decltype(u)::value, K, M, Job>, grid, dim3(kSkinnyWarps * 32),
               0, stream, x, in, W0, W1, rows, out, job);
  });
}

}  // namespace striker::cuda
