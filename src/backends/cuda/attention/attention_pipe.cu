// Pipelined tensor-core split-KV decode attention (paged_attention's kernel for Flint's shape and
// cache blocks of >= 16 tokens): the register kernel's tiles and math (attention_decode.cuh), with
// K and V staged through a per-warp 3-stage cp.async ring in shared memory
// (attention_decode_layout.h says why).
//
// Bytes in flight: a warp always has its next 2 tiles (8 KiB each: 16 keys × 256 bytes of K and
// of V) outstanding while it computes one. 3 stages × 2 CTAs × 4 warps keep ~128 KiB per SM in
// flight, against the ~32 KiB that 4.1 TB/s × ~1 µs / 132 SMs needs, so DRAM latency is covered
// even when it doubles under load.
//
// Warps never wait for each other inside the loop: each reads only its own ring, so __syncwarp
// orders its lanes' cp.async writes and reads (no __syncthreads until the final merge, which
// reuses the ring memory for the warp accumulators).
#include <cooperative_groups.h>

#include <string>

#include "backends/cuda/attention/attention.h"
#include "backends/cuda/attention/attention_decode.cuh"
#include "backends/cuda/common/cuda_check.h"
#include "backends/cuda/common/launch.cuh"
#include "backends/cuda/common/stamps.cuh"
#include "backends/cuda/common/tensor_core.cuh"

namespace striker::cuda::decode {
namespace {

template <int kStages, int kMinBlocks, bool kFront>
__global__ void __launch_bounds__(kWarps * 32, kMinBlocks) attention_pipe_kernel(
    const bf16_t* __restrict__ q, const bf16_t* __restrict__ kc, const bf16_t* __restrict__ vc, int nkv,
    int block_size, int window, const int32_t* __restrict__ positions, const int32_t* __restrict__ table_offset,
    const int32_t* __restrict__ block_tables, const int32_t* __restrict__ query_ids, int step_queries, int num_splits,
    float* __restrict__ partials, FrontArgs front) {
  STRIKER_STAMPS_CTA(kAttentionSplit);  // points 1-3 in pipe_split_record
  extern __shared__ __align__(16) unsigned char pipe_smem[];
  __shared__ float sm_m[kWarps][kGroup], sm_l[kWarps][kGroup];
  __shared__ __align__(16) bf16_t q_s[kFront ? (kGroup + 2) * kHeadDim : 8];  // the front's q heads, new k, v
  const int split = blockIdx.x, kvh = blockIdx.y, z = blockIdx.z;
  float* rec = partials + ((int64_t(z) * nkv + kvh) * num_splits + split) * (kGroup * (kHeadDim + 2));
  pipe_split_record<kStages, kFront>(q, kc, vc, nkv, block_size, window, positions, table_offset, block_tables,
                                     query_ids, split, num_splits, kvh, z, step_queries, pipe_smem, sm_m, sm_l, rec,
                                     front, q_s);
  STRIKER_STAMP(4);  // the record written
}

// The front's steps of one query whose splits of a KV head fit one cluster (grid.x = S = the cluster):
// each CTA merges its warps into a record in its own shared memory (warp 0's ring, past the
// accumulators the merge reads), one cluster barrier, then CTA r merges query heads r, r + S, ... from
// the S records through distributed shared memory (cluster_combine_head: the wide combine kernel's
// bits) and writes attention's output itself: no record round trip through L2 and no combine launch.
// A second barrier keeps every record alive until the cluster has read it. Only for one query: at 2-16
// sequences (clusters of 9-10 CTAs per query and KV head) the step lost 0.05-0.55 ms (H100, session 41,
// docs/performance.md), where the combine kernel's many small CTAs fill the GPU around the split CTAs.
constexpr int kClusterRecordOffset = kGroup * kHeadDim * 4;  // bytes: after warp 0's accumulators
static_assert(kClusterRecordOffset + kGroup * (kHeadDim + 2) * 4 <= warp_ring_bytes(kPipeStages),
              "the record fits warp 0's ring beside its accumulators");
template <int kStages, int kMinBlocks>
__global__ void __launch_bounds__(kWarps * 32, kMinBlocks) attention_pipe_cluster_kernel(
    const bf16_t* __restrict__ kc, const bf16_t* __restrict__ vc, int nkv, int block_size, int window,
    const int32_t* __restrict__ positions, const int32_t* __restrict__ table_offset,
    const int32_t* __restrict__ block_tables, FrontArgs front, const float* __restrict__ sinks,
    bf16_t* __restrict__ out) {
  STRIKER_STAMPS_CTA(kAttentionCluster);  // points 1-3 in pipe_split_record
  namespace cg = cooperative_groups;
  extern __shared__ __align__(16) unsigned char pipe_smem[];
  __shared__ float sm_m[kWarps][kGroup], sm_l[kWarps][kGroup];
  __shared__ __align__(16) bf16_t q_s[(kGroup + 2) * kHeadDim];  // the front's q heads, new k, v
  const int split = blockIdx.x, S = gridDim.x, kvh = blockIdx.y;
  float* rec = reinterpret_cast<float*>(pipe_smem + kClusterRecordOffset);
  pipe_split_record<kStages, true>(nullptr, kc, vc, nkv, block_size, window, positions, table_offset, block_tables,
                                   nullptr, split, S, kvh, 0, 1, pipe_smem, sm_m, sm_l, rec, front, q_s);
  STRIKER_STAMP(4);  // the record written
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();  // every record of the (query, KV head) written
  STRIKER_STAMP(5);
  const float* recs[kMaxClusterSplits];
#pragma unroll
  for (int s = 0; s < kMaxClusterSplits; ++s) recs[s] = s < S ? cluster.map_shared_rank(rec, unsigned(s)) : rec;
  for (int hh = split; hh < kGroup; hh += S) {
    const int h = kvh * kGroup + hh;
    cluster_combine_head(recs, S, hh, sink_log2(sinks, h), out + int64_t(h) * kHeadDim);
  }
  STRIKER_STAMP(6);
  cluster.sync();  // no CTA leaves while another may still read its record
}

template <int kStages, int kMinBlocks, bool kFront>
void launch_stages(dim3 grid, const bf16_t* q, const bf16_t* kc, const bf16_t* vc, int nkv, int block_size,
                   int window, const int32_t* positions, const int32_t* table_offset, const int32_t* block_tables,
                   const int32_t* query_ids, int step_queries, int num_splits, float* partials, const FrontArgs& front,
                   cudaStream_t stream) {
  auto* kernel = attention_pipe_kernel<kStages, kMinBlocks, kFront>;
  constexpr int smem = cta_ring_bytes(kStages);
  // kMinBlocks rings per SM need the largest shared-memory carveout.
  static const bool ready = allow_dynamic_smem(kernel, smem, true);
  (void)ready;
  launch_pdl(kernel, grid, dim3(kWarps * 32), size_t(smem), stream, q, kc, vc, nkv, block_size, window, positions,
             table_offset, block_tables, query_ids, step_queries, num_splits, partials, front);
  STRIKER_CUDA_CHECK_LAUNCH("attention_pipe_kernel");
}

}  // namespace

void launch_attention_pipe(dim3 grid, const bf16_t* q, const bf16_t* kc, const bf16_t* vc, int nkv,
                           int block_size, int window, const int32_t* positions, const int32_t* table_offset,
                           const int32_t* block_tables, const int32_t* query_ids, int step_queries, int num_splits,
                           float* partials, cudaStream_t stream, const FrontArgs* front) {
  if (block_size < kMinBlockSize)
    throw Error("attention_pipe: block size " + std::to_string(block_size) + " is below " +
                std::to_string(kMinBlockSize) + " (a 16-key tile must span at most two blocks)");
  if (front != nullptr) {
    if (int(grid.z) != step_queries || query_ids != nullptr)
      throw Error("attention_pipe: the front runs in the split kernel for all of a step's queries in one launch, "
                  "without query ids (got " + std::to_string(grid.z) + " of " + std::to_string(step_queries) + ")");
    launch_stages<kPipeStages, kPipeCtasPerSm, true>(grid, q, kc, vc, nkv, block_size, window, positions, table_offset,
                                                     block_tables, query_ids, step_queries, num_splits, partials,
                                                     *front, stream);
    return;
  }
  launch_stages<kPipeStages, kPipeCtasPerSm, false>(grid, q, kc, vc, nkv, block_size, window, positions, table_offset,
                                                    block_tables, query_ids, step_queries, num_splits, partials,
                                                    FrontArgs{}, stream);
}

void launch_attention_pipe_cluster(dim3 grid, const bf16_t* kc, const bf16_t* vc, int nkv, int block_size, int window,
                                   const int32_t* positions, const int32_t* table_offset, const int32_t* block_tables,
                                   const FrontArgs& front, const float* sinks, bf16_t* out, cudaStream_t stream) {
  const int S = int(grid.x);
  if (block_size < kMinBlockSize || S < 1 || S > kMaxClusterSplits || grid.z != 1)
    throw Error("attention_pipe_cluster: one query in 1 to " + std::to_string(kMaxClusterSplits) +
                " splits with cache blocks of >= " + std::to_string(kMinBlockSize) + " tokens (got " +
                std::to_string(grid.z) + " queries, " + std::to_string(S) + " splits, blocks of " +
                std::to_string(block_size) + ")");
  auto* kernel = attention_pipe_cluster_kernel<kPipeStages, kPipeCtasPerSm>;
  constexpr int smem = cta_ring_bytes(kPipeStages);
  static const bool ready = [&] {
    allow_dynamic_smem(kernel, smem, true);
    // Clusters of 9-16 CTAs (the 9 splits of a sliding layer's window) are sm_90's non-portable sizes.
    STRIKER_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    return true;
  }();
  (void)ready;
  launch_pdl_cluster(kernel, grid, dim3(kWarps * 32), size_t(smem), S, stream, kc, vc, nkv, block_size, window,
                     positions, table_offset, block_tables, front, sinks, out);
  STRIKER_CUDA_CHECK_LAUNCH("attention_pipe_cluster_kernel");
}

}  // namespace striker::cuda::decode
