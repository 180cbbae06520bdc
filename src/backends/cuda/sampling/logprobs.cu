#include "backends/cuda/sampling/logprobs.h"

#include <cfloat>
#include <climits>
#include <cmath>
#include <limits>
#include <string>

#include "backends/cuda/common/cuda_check.h"
#include "backends/cuda/common/launch.cuh"
#include "backends/cuda/sampling/sampling_block.cuh"
#include "backends/sample_math.h"
#include "backends/sample_split.h"
#include "core/error.h"

namespace striker::cuda {
namespace {

namespace sm = sample_math;
namespace ss = sample_split;
using namespace sampling_detail;
constexpr int kSliceThreads = ss::kSliceThreads;
constexpr int kFinishThreads = 256;
constexpr int kTop = kMaxDeviceTopLogprobs;

__device__ __forceinline__ int64_t slice_slot(int j, int slice) { return int64_t(j) * ss::kMaxSplits + slice; }

// The block's maximum of m (every thread gets it); NaN never reaches here.
template <int NT>
__device__ float block_max(float m, Shared& sh) {
  int32_t unused = 0;
  block_argmax<NT>(m, unused, sh);
  return m;
}

// The row maximum from its slices' maxima (any order gives the same value).
template <int NT>
__device__ float row_max(int j, const ss::SplitPlan& plan, const LogprobScratch& s, Shared& sh) {
  float m = -std::numeric_limits<float>::infinity();
  for (int k = threadIdx.x; k < plan.splits; k += NT) m = fmaxf(m, s.slice_max[slice_slot(j, k)]);
  return block_max<NT>(m, sh);
}

// Grid (rows, splits). The CTA of (row j, slice) copies a sampled row's slice into snapshot j, stores
// its maximum (NaN skipped, as max_value) and its best top_n tokens (sample_math::order_key, NaN
// excluded, -inf included; ties to the lower id), in id order.
__global__ void __launch_bounds__(kSliceThreads) logprob_slices_kernel(const float* logits, int32_t V, LogprobRows rows,
                                                                        ss::SplitPlan plan, LogprobScratch s) {
  pdl_grid_start();
  const int j = int(blockIdx.x), slice = int(blockIdx.y);
  const LogprobRow lr = rows.r[j];
  __shared__ uint32_t keys[ss::kMaxSlice];
  __shared__ uint32_t thread_max[kSliceThreads];
  __shared__ Shared sh;
  const float* x = logits + int64_t(lr.row) * V;
  float* snap = lr.sample >= 0 ? s.snapshot + int64_t(j) * V : nullptr;
  const int32_t begin = min(V, slice * plan.slice);
  const int n = min(V - begin, plan.slice);
  // A given token's rank counts the logits >= its own (NaN: none); a sampled row has none yet.
  const float token_v = lr.sample < 0 ? x[lr.token] : std::numeric_limits<float>::quiet_NaN();
  float m = -std::numeric_limits<float>::infinity();
  uint32_t tmax = 0;
  int32_t at_least = 0;
  for (int i = threadIdx.x; i < n; i += kSliceThreads) {
    const float v = x[begin + i];
    if (snap) snap[begin + i] = v;
    m = v > m ? v : m;
    at_least += v >= token_v;
    const uint32_t key = v == v ? sm::order_key(v) : 0u;  // 0: not a candidate
    keys[i] = key;
    tmax = max(tmax, key);
  }
  thread_max[threadIdx.x] = tmax;
  __syncthreads();
  m = block_max<kSliceThreads>(m, sh);
  int32_t slice_at_least;
  block_exclusive_scan<kSliceThreads>(at_least, sh, slice_at_least);
  if (threadIdx.x == 0) s.slice_max[slice_slot(j, slice)] = m, s.slice_rank[slice_slot(j, slice)] = slice_at_least;
  if (lr.top_n <= 0) return;  // block-uniform
  const TopRule rule = select_top_pruned<kSliceThreads>(keys, n, thread_max, lr.top_n, lr.top_n, sh);
  const int64_t out = slice_slot(j, slice) * kTop;
  const int32_t kept = gather_kept<kSliceThreads>(keys, n, rule, sh, [&](int i, int32_t pos) {
    s.cand_key[out + pos] = keys[i];
    s.cand_id[out + pos] = begin + i;
  });
  if (threadIdx.x == 0) s.cand_n[slice_slot(j, slice)] = kept;
}

// Grid (rows, splits): each slice's sum of float exp(v - m) in double against the row maximum m
// (NaN or an infinite m make it NaN, as on the CPU). Per thread in index order, then a fixed tree:
// the same bits every run.
__global__ void __launch_bounds__(kSliceThreads) logprob_sums_kernel(const float* logits, int32_t V, LogprobRows rows,
                                                                      ss::SplitPlan plan, LogprobScratch s) {
  pdl_grid_start();
  const int j = int(blockIdx.x), slice = int(blockIdx.y);
  __shared__ Shared sh;
  __shared__ double warp_sum[kSliceThreads / 32];
  const float m = row_max<kSliceThreads>(j, plan, s, sh);
  const float* x = logits + int64_t(rows.r[j].row) * V;
  const int32_t begin = min(V, slice * plan.slice), end = min(V, begin + plan.slice);
  double sum = 0;
  for (int32_t i = begin + int32_t(threadIdx.x); i < end; i += kSliceThreads) sum += double(expf(sm::fsub(x[i], m)));
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(kFull, sum, o);
  if ((threadIdx.x & 31) == 0) warp_sum[threadIdx.x >> 5] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    double total = 0;
    for (int w = 0; w < kSliceThreads / 32; ++w) total += warp_sum[w];
    s.slice_sum[slice_slot(j, slice)] = total;
  }
}

struct FinishShared {
  uint32_t key[ss::kMaxSplits * kTop];  // the slices' candidates, slice by slice (id order); 0: empty
  int32_t id[ss::kMaxSplits * kTop];
  int32_t kept_id[kTop];
  float kept_v[kTop];
  double lse;
};

// One CTA per row: the token's logprob and the best top_n of the slices' candidates, from the raw
// row (a sampled row's snapshot: the sampler has edited the logits since).
__global__ void __launch_bounds__(kFinishThreads) logprob_finish_kernel(const float* logits, int32_t V, LogprobRows rows,
                                                                        ss::SplitPlan plan, const int32_t* tokens,
                                                                        LogprobScratch s) {
  pdl_grid_start();
  const int j = int(blockIdx.x);
  const LogprobRow lr = rows.r[j];
  __shared__ Shared sh;
  __shared__ FinishShared fs;
  const float m = row_max<kFinishThreads>(j, plan, s, sh);
  const float* snap = lr.sample >= 0 ? s.snapshot + int64_t(j) * V : logits + int64_t(lr.row) * V;
  LogprobRecord* rec = s.records + rows.first_record + j;
  if (threadIdx.x == 0) {
    double sum = 0;
    for (int k = 0; k < plan.splits; ++k) sum += s.slice_sum[slice_slot(j, k)];
    const double lse = double(m) + log(sum);
    fs.lse = lse;
    const int32_t token = lr.sample >= 0 ? tokens[lr.sample] : lr.token;
    int32_t rank = 0;
    if (lr.sample < 0)
      for (int k = 0; k < plan.splits; ++k) rank += s.slice_rank[slice_slot(j, k)];
    rec->rank = rank;
    rec->logprob = token >= 0 && token < V ? float(double(snap[token]) - lse) : -std::numeric_limits<float>::infinity();
  }
  const int n = plan.splits * lr.top_n;
  for (int k = threadIdx.x; k < n; k += kFinishThreads) {
    const int slice = k / lr.top_n, c = k - slice * lr.top_n;
    const bool present = c < s.cand_n[slice_slot(j, slice)];
    fs.key[k] = present ? s.cand_key[slice_slot(j, slice) * kTop + c] : 0u;
    fs.id[k] = present ? s.cand_id[slice_slot(j, slice) * kTop + c] : INT_MAX;
  }
  __syncthreads();
  int32_t kept = 0;
  if (lr.top_n > 0) {  // block-uniform
    const TopRule rule = select_top<kFinishThreads>(fs.key, n, lr.top_n, lr.top_n, sh);
    kept = gather_kept<kFinishThreads>(fs.key, n, rule, sh, [&](int k, int32_t pos) { fs.kept_id[pos] = fs.id[k]; });
    __syncthreads();
    if (threadIdx.x < kept) fs.kept_v[threadIdx.x] = snap[fs.kept_id[threadIdx.x]];
    __syncthreads();
  }
  if (threadIdx.x < kept) {  // rank by counting: kept <= kTop
    const float v = fs.kept_v[threadIdx.x];
    const int32_t id = fs.kept_id[threadIdx.x];
    int rank = 0;
    for (int u = 0; u < kept; ++u) rank += better(fs.kept_v[u], fs.kept_id[u], v, id);
    rec->id[rank] = id;
    rec->value[rank] = float(double(v) - fs.lse);
  }
  if (threadIdx.x == 0) rec->n = kept;
}

ss::SplitPlan plan_for(int64_t vocab, const char* what) {
  const ss::SplitPlan plan = ss::split_plan(vocab);
  if (plan.splits <= 0 || vocab > INT_MAX)
    throw Error(std::string(what) + ": vocabulary size " + std::to_string(vocab) + " outside 1.." +
                std::to_string(ss::kMaxVocab));
  return plan;
}

void check_rows(const LogprobRows& rows, const LogprobBuffers& b, const char* what) {
  if (rows.n < 0 || rows.n > kMaxDeviceLogprobRows)
    throw Error(std::string(what) + ": " + std::to_string(rows.n) + " rows, at most " +
                std::to_string(kMaxDeviceLogprobRows));
  if (rows.first_record < 0 || rows.first_record + rows.n > b.max_records())
    throw Error(std::string(what) + ": records " + std::to_string(rows.first_record) + ".." +
                std::to_string(rows.first_record + rows.n - 1) + " beyond the " + std::to_string(b.max_records()) +
                " the buffers hold");
  for (int j = 0; j < rows.n; ++j) {
    const LogprobRow& r = rows.r[j];
    if (r.top_n < 0 || r.top_n > kMaxDeviceTopLogprobs)
      throw Error(std::string(what) + ": row " + std::to_string(j) + " asks top_n " + std::to_string(r.top_n) +
                  ", at most " + std::to_string(kMaxDeviceTopLogprobs));
    if (r.row < 0 || (r.sample < 0 && (r.token < 0 || r.token >= b.vocab())))
      throw Error(std::string(what) + ": row " + std::to_string(j) + " has logits row " + std::to_string(r.row) +
                  ", sample " + std::to_string(r.sample) + " and token " + std::to_string(r.token));
  }
}

}  // namespace

LogprobBuffers::LogprobBuffers(int64_t vocab, int max_records) : vocab_(vocab), max_records_(max_records) {
  plan_for(vocab, "LogprobBuffers");
  if (max_records < kMaxDeviceLogprobRows)
    throw Error("LogprobBuffers: " + std::to_string(max_records) + " records, at least " +
                std::to_string(kMaxDeviceLogprobRows));
  const size_t rows = kMaxDeviceLogprobRows, slices = rows * ss::kMaxSplits, cands = slices * kTop;
  const size_t records = size_t(max_records) * sizeof(LogprobRecord);
  const size_t bytes = slices * 8 + records + rows * size_t(vocab) * 4 + slices * 4 + cands * 8 + slices * 4 + slices * 4;
  STRIKER_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&dev_), bytes));
  std::byte* at = dev_;  // 8-byte fields first: every array stays aligned
  scratch_.slice_sum = reinterpret_cast<double*>(at);
  scratch_.records = reinterpret_cast<LogprobRecord*>(at += slices * 8);
  scratch_.snapshot = reinterpret_cast<float*>(at += records);
  scratch_.slice_max = reinterpret_cast<float*>(at += rows * size_t(vocab) * 4);
  scratch_.cand_key = reinterpret_cast<uint32_t*>(at += slices * 4);
  scratch_.cand_id = reinterpret_cast<int32_t*>(at += cands * 4);
  scratch_.cand_n = reinterpret_cast<int32_t*>(at += cands * 4);
  scratch_.slice_rank = reinterpret_cast<int32_t*>(at += slices * 4);
  const cudaError_t err = cudaMallocHost(reinterpret_cast<void**>(&records_host_), records);
  if (err != cudaSuccess) {
    cudaFree(dev_);
    STRIKER_CUDA_CHECK(err);
  }
}

LogprobBuffers::~LogprobBuffers() {
  if (dev_) cudaFree(dev_);
  if (records_host_) cudaFreeHost(records_host_);
}

void logprob_prepare(const float* logits, const LogprobRows& rows, const LogprobBuffers& b, cudaStream_t stream) {
  check_rows(rows, b, "logprob_prepare");
  if (rows.n == 0) return;
  const ss::SplitPlan plan = plan_for(b.vocab(), "logprob_prepare");
  const dim3 grid(unsigned(rows.n), unsigned(plan.splits));
  const int32_t V = int32_t(b.vocab());
  launch_pdl(logprob_slices_kernel, grid, dim3(kSliceThreads), 0, stream, logits, V, rows, plan, b.scratch());
  launch_pdl(logprob_sums_kernel, grid, dim3(kSliceThreads), 0, stream, logits, V, rows, plan, b.scratch());
}

void logprob_finish(const float* logits, const LogprobRows& rows, const int32_t* tokens, const LogprobBuffers& b,
                    cudaStream_t stream, LogprobRecord* host_records) {
  check_rows(rows, b, "logprob_finish");
  if (rows.n == 0) return;
  for (int j = 0; j < rows.n; ++j)
    if (rows.r[j].sample >= 0 && tokens == nullptr)
      throw Error("logprob_finish: row " + std::to_string(j) + " is sampled but no sampled tokens were given");
  const ss::SplitPlan plan = plan_for(b.vocab(), "logprob_finish");
  launch_pdl(logprob_finish_kernel, dim3(unsigned(rows.n)), dim3(kFinishThreads), 0, stream, logits, int32_t(b.vocab()),
             rows, plan, tokens, b.scratch());
  LogprobRecord* host = host_records ? host_records : b.records_host();
  STRIKER_CUDA_CHECK(cudaMemcpyAsync(host + rows.first_record, b.scratch().records + rows.first_record,
                                     size_t(rows.n) * sizeof(LogprobRecord), cudaMemcpyDeviceToHost, stream));
}

}  // namespace striker::cuda
