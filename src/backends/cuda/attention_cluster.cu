// Single-launch split-KV decode attention for short key ranges (attention.h,
// paged_attention_cluster): the splits of one (query, KV head) form a thread-block cluster.
//
// Why: a sliding-window decode query reads only 513 keys × 4 KV heads (~1 MiB), yet the two-launch
// path (split kernel, then combine kernel) costs two dependent launches whose latency dominates.
// Here each CTA computes its split record exactly as attention_pipe_kernel does, but into its own
// shared memory; a cluster barrier (barrier.cluster.arrive.release / wait.acquire: the records
// written before it are visible to every CTA of the cluster after it) then lets CTA r merge query
// heads r, r + S, ... (S = splits = cluster size) by reading all S records through distributed
// shared memory with the combine kernel's code (decode::combine_head), and write the bf16 outputs.
// A second barrier keeps every CTA (and so its shared memory) alive until all remote reads of its
// record are done.
#include <cooperative_groups.h>

#include <algorithm>
#include <string>

#include "backends/cuda/attention.h"
#include "backends/cuda/attention_decode.cuh"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/launch.cuh"

namespace striker::cuda::decode {
namespace {

namespace cg = cooperative_groups;

// The ring depth of kDecodePipe3Stage, whose records this kernel reproduces bit for bit. With
// the clamped 16-way plan's chunks of up to 128 keys every warp has at most 2 tiles, all issued in
// the prologue; the two-launch plans of many-query launches wrap the ring as that kernel does.
constexpr int kClusterStages = 3;
constexpr int kRecordFloats = kGroup * (kHeadDim + 2);

// grid (S, KV heads, queries), cluster (S, 1, 1): blockIdx.x is the split and the cluster rank.
__global__ void __launch_bounds__(kWarps * 32, 1) attention_cluster_kernel(
    const bf16_t* __restrict__ q, const bf16_t* __restrict__ kc, const bf16_t* __restrict__ vc, int nkv,
    int block_size, int window, const int32_t* __restrict__ positions, const int32_t* __restrict__ table_offset,
    const int32_t* __restrict__ block_tables, const int32_t* __restrict__ query_ids, int chunk, int num_splits,
    const float* __restrict__ sinks, bool meta_before_wait, bf16_t* __restrict__ out) {
  extern __shared__ __align__(16) unsigned char pipe_smem[];
  __shared__ float sm_m[kWarps][kGroup], sm_l[kWarps][kGroup];
  __shared__ __align__(16) float sm_record[kRecordFloats];
  const int split = blockIdx.x, kvh = blockIdx.y, z = blockIdx.z;
  pipe_split_record<kClusterStages>(q, kc, vc, nkv, block_size, window, positions, table_offset, block_tables,
                                    query_ids, split, kvh, z, chunk, MetaOrder{meta_before_wait}, pipe_smem, sm_m,
                                    sm_l, sm_record);

  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();  // every CTA's record is complete and visible cluster-wide
  const int qi = query_ids ? query_ids[z] : z;
  const int nh = nkv * kGroup;
  // Records of split s live in the shared memory of cluster rank s (== blockIdx.x = s).
  const auto record = [&](int s) -> const float* { return cluster.map_shared_rank(&sm_record[0], unsigned(s)); };
  for (int hh = int(cluster.block_rank()); hh < kGroup; hh += num_splits) {
    const int h = kvh * kGroup + hh;
    combine_head<kHeadDim, kGroup>(record, num_splits, hh, sink_log2(sinks, h), out + (int64_t(qi) * nh + h) * kHeadDim);
  }
  cluster.sync();  // no CTA exits (freeing its record) while another may still read it
}

// The launch plan; false when the shape is not built or the keys do not fit (plan_cluster_splits).
bool plan_for(const AttentionShape& s, const AttentionQueries& qs, const AttentionScratch& scratch, int max_chunk,
              DecodeSplitPlan& plan) {
  plan = {1, 1};
  const bool built = s.head_dim == kHeadDim && s.n_kv_heads > 0 && s.n_heads == kGroup * s.n_kv_heads &&
                     s.block_size >= kMinBlockSize && qs.num_queries > 0 && qs.num_queries <= 65535;
  if (!built) return false;
  const int64_t heads_total = int64_t(qs.num_queries) * s.n_kv_heads;
  // The same target as paged_attention(kDecodePipe3Stage): its records come from the same code.
  const int64_t target3 = scratch.target_records > 0 ? scratch.target_records : 1024;
  const int64_t target = std::max<int64_t>(1, target3 * attention_pipe_ctas_per_sm(kDecodePipe3Stage) / 3);
  return plan_cluster_splits(plan_keys(qs.max_keys, s.window), heads_total, target, max_chunk, plan);
}

}  // namespace
}  // namespace striker::cuda::decode

namespace striker::cuda {

bool cluster_attention_fits(const AttentionShape& s, const AttentionQueries& qs, const AttentionScratch& scratch,
                            int max_chunk) {
  decode::DecodeSplitPlan plan;
  return decode::plan_for(s, qs, scratch, max_chunk, plan);
}

void paged_attention_cluster(const bf16* q, const bf16* k_cache, const bf16* v_cache, const float* sinks,
                             const AttentionShape& s, const AttentionQueries& qs, const AttentionScratch& scratch,
                             bf16* out, cudaStream_t stream, bool meta_before_wait, int max_chunk) {
  using namespace decode;
  DecodeSplitPlan plan;
  if (!plan_for(s, qs, scratch, max_chunk, plan))
    throw Error("paged_attention_cluster: not built for head_dim " + std::to_string(s.head_dim) + ", heads " +
                std::to_string(s.n_heads) + "/" + std::to_string(s.n_kv_heads) + ", block size " +
                std::to_string(s.block_size) + ", " + std::to_string(qs.num_queries) + " queries of up to " +
                std::to_string(qs.max_keys) + " keys (chunk " + std::to_string(plan.chunk) + " > " +
                std::to_string(max_chunk) + "); check cluster_attention_fits first");
  auto* kernel = attention_cluster_kernel;
  constexpr int smem = cta_ring_bytes(kClusterStages);
  static const bool configured = [&] {  // function attributes, set once (see attention_pipe.cu)
    STRIKER_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    STRIKER_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared));
    STRIKER_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));  // up to 16
    return true;
  }();
  (void)configured;
  launch_pdl_cluster(kernel, dim3(unsigned(plan.splits), unsigned(s.n_kv_heads), unsigned(qs.num_queries)),
                     dim3(kWarps * 32), size_t(smem), plan.splits, stream, reinterpret_cast<const bf16_t*>(q),
                     reinterpret_cast<const bf16_t*>(k_cache), reinterpret_cast<const bf16_t*>(v_cache), s.n_kv_heads,
                     s.block_size, s.window, qs.positions, qs.table_offset, qs.block_tables, qs.query_ids, plan.chunk,
                     plan.splits, sinks, meta_before_wait, reinterpret_cast<bf16_t*>(out));
  STRIKER_CUDA_CHECK_LAUNCH("attention_cluster_kernel");
}

}  // namespace striker::cuda
