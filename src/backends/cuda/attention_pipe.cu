// Pipelined tensor-core split-KV decode attention (paged_attention variants kDecodePipe3Stage and
// kDecodePipe2Stage): the register kernel's tiles and math (attention_decode.cuh), with K and V
// staged through a per-warp cp.async ring in shared memory (attention_decode_layout.h says why).
//
// Bytes in flight: a warp always has its next kStages-1 tiles (8 KiB each: 16 keys × 256 bytes
// of K and of V) outstanding while it computes one. 3 stages × 2 CTAs × 4 warps keep ~128 KiB
// per SM in flight, 2 stages × 3 CTAs ~96 KiB, against the ~32 KiB that 4.1 TB/s × ~1 µs / 132
// SMs needs, so DRAM latency is covered even when it doubles under load.
//
// Warps never wait for each other inside the loop: each reads only its own ring, so __syncwarp
// orders its lanes' cp.async writes and reads (no __syncthreads until the final merge, which
// reuses the ring memory for the warp accumulators).
#include <string>

#include "backends/cuda/attention.h"
#include "backends/cuda/attention_decode.cuh"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/launch.cuh"
#include "backends/cuda/tensor_core.cuh"

namespace striker::cuda::decode {
namespace {

template <int kStages, int kMinBlocks>
__global__ void __launch_bounds__(kWarps * 32, kMinBlocks) attention_pipe_kernel(
    const bf16_t* __restrict__ q, const bf16_t* __restrict__ kc, const bf16_t* __restrict__ vc, int nkv,
    int block_size, int window, const int32_t* __restrict__ positions, const int32_t* __restrict__ table_offset,
    const int32_t* __restrict__ block_tables, const int32_t* __restrict__ query_ids, int chunk, int num_splits,
    float* __restrict__ partials) {
  static_assert(kStages >= 2, "a ring of one stage would not overlap loads with math");
  static_assert(warp_ring_bytes(kStages) >= kGroup * kHeadDim * 4, "the warp's ring holds its accumulators at the end");
  pdl_grid_start();  // see launch.cuh
  constexpr int D = kHeadDim, G = kGroup;
  extern __shared__ __align__(16) unsigned char pipe_smem[];
  const int split = blockIdx.x, kvh = blockIdx.y, z = blockIdx.z;
  const int qi = query_ids ? query_ids[z] : z;  // z indexes the split records
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int p = positions[qi];
  const int lo = window > 0 ? max(0, p - window + 1) : 0;
  const int kbeg = lo + split * chunk;
  const int kend = min(kbeg + chunk, p + 1);
  const int32_t* table = block_tables + table_offset[qi];
  const float score_scale = kLog2e / sqrtf(float(D));
  bf16_t* ring = reinterpret_cast<bf16_t*>(pipe_smem + warp * warp_ring_bytes(kStages));
  const int first = kbeg + kTileKeys * warp;  // this warp's tile i: keys first + 64·i .. +15
  const int ntiles = warp_tiles(kbeg, kend, warp);

  // Physical cache blocks of tile i (its first block, and the next one if the tile reaches it).
  // Loaded one tile before the copies that use them, so the table lookup is off the critical path.
  auto fetch_blocks = [&](int i, int32_t& b0, int32_t& b1) {
    if (i < ntiles) {
      const TileBlocks tb = tile_blocks(first + kStepKeys * i, block_size, kend);
      b0 = table[tb.first_block];
      b1 = tb.second_needed ? table[tb.first_block + 1] : b0;
    }
  };
  // cp.async of tile i into its stage; rows past kend are zero-filled without a read. Always
  // commits a group (empty past the last tile) so wait_group counts tiles.
  auto issue = [&](int i, int32_t b0, int32_t b1) {
    if (i < ntiles) {
      const int base = first + kStepKeys * i;
      const TileBlocks tb = tile_blocks(base, block_size, kend);
      bf16_t* ks = ring + (i % kStages) * 2 * kTileElems;
      bf16_t* vs = ks + kTileElems;
      const int ch = stage_chunk(lane);
#pragma unroll
      for (int j = 0; j < kStagePasses; ++j) {
        const int r = stage_row(lane, j);
        const bool ok = base + r < kend;
        const int64_t blk = row_in_second(tb, r, block_size) ? b1 : b0;
        const int64_t off = ((blk * nkv + kvh) * block_size + row_slot(tb, r, block_size)) * D + ch * 8;
        cp_async16(ks + k_swizzled(r, ch), ok ? kc + off : kc, ok);
        cp_async16(vs + v_swizzled(r, ch), ok ? vc + off : vc, ok);
      }
    }
    cp_async_commit();
  };

  // Prologue: block ids of the first kStages-1 tiles together (one latency), then their copies.
  int32_t pb0[kStages - 1] = {}, pb1[kStages - 1] = {};
#pragma unroll
  for (int i = 0; i < kStages - 1; ++i) fetch_blocks(i, pb0[i], pb1[i]);
#pragma unroll
  for (int i = 0; i < kStages - 1; ++i) issue(i, pb0[i], pb1[i]);
  int32_t nb0 = 0, nb1 = 0;  // block ids of the next tile to issue
  fetch_blocks(kStages - 1, nb0, nb1);

  uint32_t qa[8][2];
  load_q_fragments(q, qi, nkv, kvh, lane, qa);
  WarpState st;
  init_state(st);

  for (int i = 0; i < ntiles; ++i) {
    __syncwarp();  // every lane has read stage (i-1) % kStages, which tile i+kStages-1 refills
    issue(i + kStages - 1, nb0, nb1);
    fetch_blocks(i + kStages, nb0, nb1);
    cp_async_wait<kStages - 1>();  // this lane's copies of tile i have landed
    __syncwarp();                  // ... and every other lane's
    const bf16_t* ks = ring + (i % kStages) * 2 * kTileElems;
    const bf16_t* vs = ks + kTileElems;
    uint4 kq[2][4], vq[4][2];
#pragma unroll
    for (int t = 0; t < 2; ++t)
#pragma unroll
      for (int pp = 0; pp < 4; ++pp)
        kq[t][pp] = *reinterpret_cast<const uint4*>(ks + k_swizzled(k_frag_row(lane, t), k_frag_chunk(lane, pp)));
#pragma unroll
    for (int r = 0; r < 4; ++r)
#pragma unroll
      for (int h = 0; h < 2; ++h)
        vq[r][h] = *reinterpret_cast<const uint4*>(vs + v_swizzled(v_frag_row(lane, r), v_frag_chunk(lane, h)));
    tile_update(st, qa, kq, vq, first + kStepKeys * i, kend, score_scale, lane);
  }
  cp_async_wait<0>();  // only empty groups can remain; the ring is reused below
  __syncwarp();

  __shared__ float sm_m[kWarps][G], sm_l[kWarps][G];
  float* rec = partials + ((int64_t(z) * nkv + kvh) * num_splits + split) * (G * (D + 2));
  write_split_record(st, reinterpret_cast<float*>(pipe_smem), warp_ring_bytes(kStages) / 4, sm_m, sm_l, rec, lane,
                     warp);
}

template <int kStages, int kMinBlocks>
void launch_stages(dim3 grid, const bf16_t* q, const bf16_t* kc, const bf16_t* vc, int nkv, int block_size,
                   int window, const int32_t* positions, const int32_t* table_offset, const int32_t* block_tables,
                   const int32_t* query_ids, int chunk, int num_splits, float* partials, cudaStream_t stream) {
  auto* kernel = attention_pipe_kernel<kStages, kMinBlocks>;
  constexpr int smem = cta_ring_bytes(kStages);
  // Over 48 KiB of dynamic shared memory needs the opt-in, and kMinBlocks rings per SM need the
  // largest shared-memory carveout. Both are function attributes (allowed while a graph is being
  // captured); set once per kernel instantiation (a thread-safe static), so uncaptured launches
  // (bench rows, prefill steps) do not pay two extra driver calls each.
  static const bool configured = [&] {
    STRIKER_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    STRIKER_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared));
    return true;
  }();
  (void)configured;
  launch_pdl(kernel, grid, dim3(kWarps * 32), size_t(smem), stream, q, kc, vc, nkv, block_size, window, positions,
             table_offset, block_tables, query_ids, chunk, num_splits, partials);
  STRIKER_CUDA_CHECK_LAUNCH("attention_pipe_kernel");
}

}  // namespace

int attention_pipe_ctas_per_sm(int variant) { return variant == kDecodePipe2Stage ? 3 : 2; }

void launch_attention_pipe(int variant, dim3 grid, const bf16_t* q, const bf16_t* kc, const bf16_t* vc, int nkv,
                           int block_size, int window, const int32_t* positions, const int32_t* table_offset,
                           const int32_t* block_tables, const int32_t* query_ids, int chunk, int num_splits,
                           float* partials, cudaStream_t stream) {
  if (block_size < kMinBlockSize)
    throw Error("attention_pipe: block size " + std::to_string(block_size) + " is below " +
                std::to_string(kMinBlockSize) + " (a 16-key tile must span at most two blocks)");
  if (variant == kDecodePipe3Stage)
    launch_stages<3, 2>(grid, q, kc, vc, nkv, block_size, window, positions, table_offset, block_tables, query_ids,
                        chunk, num_splits, partials, stream);
  else if (variant == kDecodePipe2Stage)
    launch_stages<2, 3>(grid, q, kc, vc, nkv, block_size, window, positions, table_offset, block_tables, query_ids,
                        chunk, num_splits, partials, stream);
  else
    throw Error("attention_pipe: unknown variant " + std::to_string(variant));
}

}  // namespace striker::cuda::decode
