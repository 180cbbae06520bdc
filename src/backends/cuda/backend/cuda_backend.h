// The CUDA backend: Flint's forward pass (FLINT.md §4) on one GPU, BF16 and/or NVFP4 (W4A16)
// linear weights, paged BF16 KV cache. Decode steps (<= 8 tokens) use the bandwidth-bound GEMV
// kernels; larger chunks use cuBLASLt for the dense projections and grouped tensor-core kernels
// for the routed experts. Every buffer is allocated up front: a step allocates nothing and
// synchronises only to return the logits; steps of up to 256 tokens can replay captured CUDA graphs.
#pragma once
#include <cuda_runtime_api.h>

#include <deque>
#include <map>
#include <memory>
#include <tuple>

#include "backends/backend.h"
#include "backends/cuda/backend/device_model.h"
#include "backends/cuda/elementwise/rmsnorm.h"
#include "backends/cuda/sampling/logprobs.h"
#include "backends/cuda/sampling/sampling.h"
#include "backends/cuda/sampling/sampling_masks.h"

namespace striker::cuda {

struct CudaBackendOptions {
  int max_tokens = 8192;          // tokens per forward() call
  int max_logit_rows = 512;       // logits rows per call (all_logits chunks count every token)
  int64_t max_table_entries = int64_t(1) << 20;  // block-table entries per call and pool
  // Replay steps of up to 256 tokens (decode batches) from captured CUDA graphs. Off by default:
  // at batch 1 with PDL launches both measured within a few per cent (docs/performance.md).
  bool use_graphs = false;
  // Draw tokens on the GPU (forward_sampled): only sampled ids and logprob rows come back.
  bool device_sampling = true;
  int64_t max_sample_edits = int64_t(1) << 20;  // penalty/bias edits per upload (more: several, with a sync)
  // Captured graphs kept at once (use_graphs); the least recently replayed is destroyed first.
  int max_captured_graphs = 64;
  // Last, so positional initialisers ({max_tokens, max_logit_rows, ...}) keep their meaning.
  // Rows of the pinned host buffer the logits cross to the host through (0: max_logit_rows):
  // forward() and forward_sampled's return_rows need no more than this; forward_streamed hands
  // larger steps over through it in blocks (perplexity: 600 KB per row at Flint's vocabulary).
  int max_host_logit_rows = 0;

  // Buffer sizes for an engine with these limits (serve, bench throughput): a step's token budget,
  // a logits row per sequence plus a prompt_logprobs chunk (capped at 256 tokens), and a full block
  // table for every sequence.
  static CudaBackendOptions for_engine(int max_num_batched_tokens, int max_num_seqs, int64_t max_model_len,
                                       int block_size) {
    CudaBackendOptions o;
    o.max_tokens = max_num_batched_tokens > 8 ? max_num_batched_tokens : 8;
    o.max_logit_rows = max_num_seqs + 256 > 512 ? max_num_seqs + 256 : 512;
    const int64_t blocks_per_seq = (max_model_len + block_size - 1) / block_size + 1;
    const int64_t entries = int64_t(max_num_seqs) * blocks_per_seq;
    if (entries > o.max_table_entries) o.max_table_entries = entries;
    return o;
  }
};

class CudaBackend : public Backend {
 public:
  CudaBackend(DeviceModel model, const CudaBackendOptions& options);
  ~CudaBackend() override;

  std::string name() const override { return "cuda"; }
  int64_t full_block_bytes(int32_t block_size) const override;
  int64_t sliding_block_bytes(int32_t block_size) const override;
  void allocate_kv_cache(const KvCacheSpec& spec) override;
  void forward(const ForwardBatch& batch, std::vector<float>& logits) override;
  void forward_streamed(const ForwardBatch& batch, int64_t max_block_rows, const LogitsSink& sink) override;
  bool samples_on_device() const override { return options_.device_sampling; }
  DeviceLogprobLimits device_logprobs() const override {
    return sampling_ ? DeviceLogprobLimits{kMaxDeviceTopLogprobs, kMaxDeviceLogprobRows, options_.max_logit_rows}
                     : DeviceLogprobLimits{};
  }
  void forward_sampled(const ForwardBatch& batch, const DeviceSampling& sampling, SampledStep& out) override;
  // Async scheduling (cuda_backend_sampling.cpp): forward_sampled as launch + collect, up to two
  // launched steps uncollected, the second one's tokens patched in from the first one's draws.
  bool supports_async_steps() const override { return options_.device_sampling; }
  void launch_sampled(const ForwardBatch& batch, const DeviceSampling& sampling) override;
  void collect_sampled(SampledStep& out) override;
  void warm_up() override;  // cuda_warm_up.cpp

  // Benchmarks: random KV contents (a long context without running its prefill), and the
  // device time of the last forward() measured with CUDA events.
  void fill_kv_random(uint64_t seed);
  float last_forward_device_ms() const { return last_device_ms_; }
  // Kernels in the step graph captured last (use_graphs), 0 before any capture.
  int captured_step_kernels() const { return captured_kernels_; }
  // The routed expert ids [T, K] the last MoE layer of the last step chose (waits for the step).
  std::vector<int32_t> last_layer_routing(int T) const;
  const DeviceModel& model() const { return model_; }

 private:
  struct Workspace;
  struct StepPlan;
  // Plans the batch, uploads its metadata and enqueues the layers (no sync); returns the
  // number of logits rows, left in logits_device() as fp32 [rows, vocab].
  int launch_forward(const ForwardBatch& batch);
  float* logits_device() const;
  float* logits_pinned() const;  // pinned host buffer of host_logit_rows() rows
  int host_logit_rows() const;
  void plan(const ForwardBatch& batch, StepPlan& plan) const;
  // The layer loop, FLINT.md §4 step by step (flint_forward.cpp), and the ops it calls, each
  // choosing its kernels by weight format and token count (ops_linear.cpp, ops_attention.cpp,
  // ops_moe.cpp). All work on ws_ and enqueue on stream_.
  void flint_forward(const StepPlan& plan);
  // y = bf16(mm(x, W)); h = bf16(h + bf16(mm(x, W))) (BF16 W). With `norm_w`, also
  // ws_->x = rmsnorm(h, norm_w): above kGemvMaxTokens in the residual's own pass (add_rmsnorm).
  // With `in_norm` (linear, swiglu_front), the op's input is h and it computes mm(rmsnorm(h, in_norm), W):
  // at one token inside the GEMV's CTAs (no rmsnorm launch), else rmsnorm into ws_->x first.
  void linear(const bf16* x, int T, int in, const bf16* W, int out, bf16* y, const float* in_norm = nullptr);
  void linear_residual(const bf16* x, int T, int in, const bf16* W, int out, bf16* h, const float* norm_w = nullptr);
  // The same for a weight in either format: `W` when BF16, `q` when NVFP4 (q.present()).
  void linear(const bf16* x, int T, int in, const bf16* W, const Nvfp4Linear& q, int out, bf16* y,
              const float* in_norm = nullptr);
  void linear_residual(const bf16* x, int T, int in, const bf16* W, const Nvfp4Linear& q, int out, bf16* h,
                       const float* norm_w = nullptr);
  // h = bf16(h + ws_->tmp) (a GEMM's rounded output), with norm_w also ws_->x = rmsnorm(h).
  void add_tmp_residual(bf16* h, int T, int out, const float* norm_w);
  void attention(const StepPlan& plan, int64_t layer);  // ws_->attn = attention over ws_->q and the cache
  // h = bf16(h + swiglu(x)), x = ws_->x, or with `in_norm` x = rmsnorm(h, in_norm) formed by the
  // op (as linear's). `next_norm`: the next layer's input norm weights; x = rmsnorm(h) is then
  // written in the residual's pass (above kGemvMaxTokens) or by the rmsnorm kernel after it.
  void swiglu_dense(const DeviceLayer& layer, int T, const float* in_norm, const float* next_norm);
  // act = bf16(bf16(g·sigmoid(g))·u), g/u = bf16(mm(x, gate/up)), each weight BF16 or NVFP4.
  void swiglu_front(const bf16* x, int T, int in, const bf16* Wg, const Nvfp4Linear& qg, const bf16* Wu,
                    const Nvfp4Linear& qu, int inter, bf16* act, const float* in_norm = nullptr);
  // The InputNorm a one-token GEMV (`gemv`: the op's kernel can take one) runs in front for
  // `in_norm`, or null: then x = rmsnorm(x, in_norm) is written to ws_->x by the rmsnorm kernel
  // first and `x` points there.
  const InputNorm* input_norm_for(const bf16*& x, int T, int in, const float* in_norm, bool gemv, InputNorm& storage);
  // x = rmsnorm(h) (above kGemvMaxTokens already written by the o_proj residual); h = bf16(h + routed
  // + shared experts of x).
  // `next_norm` as for swiglu_dense: written by the combine (moe_batched; decode steps of 2-8
  // tokens: the combine kernel; 1 token: the rmsnorm kernel after the one-launch down).
  void moe(const DeviceLayer& layer, int T, const float* next_norm = nullptr);
  void moe_decode_bf16(const DeviceLayer& layer, int T, const float* next_norm);
  void moe_decode_nvfp4(const DeviceLayer& layer, int T, const float* next_norm);
  void moe_batched(const DeviceLayer& layer, int T, const float* next_norm);
  void lm_head_logits(const StepPlan& plan);            // fp32 logits of the plan's rows

  DeviceModel model_;
  CudaBackendOptions options_;
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<Workspace> ws_;
  std::unique_ptr<SamplingBuffers> sampling_;  // null unless options.device_sampling
  std::unique_ptr<TokenMaskBuffers> masks_;    // structured-output masks; with sampling_
  std::unique_ptr<LogprobBuffers> logprobs_;   // sampled tokens' logprobs; with sampling_
  KvCacheSpec kv_spec_;
  std::vector<bf16*> k_cache_, v_cache_;  // per layer (null until allocate_kv_cache)
  std::vector<void*> kv_allocations_;
  struct CapturedStep {
    cudaGraphExec_t exec = nullptr;
    uint64_t last_use = 0;  // graph_uses_ at the last replay (least recently used goes first)
  };
  // (T, rows, key buckets, one query per sequence) -> graph; at most options_.max_captured_graphs
  // (every decode batch size and context bucket would otherwise keep its own graph for the life of
  // the server).
  std::map<std::tuple<int, int, int, int, bool>, CapturedStep> graphs_;
  uint64_t graph_uses_ = 0;
  cudaEvent_t ev_start_ = nullptr, ev_end_ = nullptr;
  // Launched device-sampling steps not yet collected (at most two), oldest first: where their
  // results land and how many there are.
  struct LaunchedSampling {
    int slot = 0;          // result_slots_ index
    int samples = 0;
    size_t rows_back = 0;  // raw rows copied to logits_pinned()
    int n_scored = 0;      // prompt logprob records, from record 0
    int lp_n = 0, lp_first = 0;  // sampled tokens' logprob records
    bool masks = false;    // read grammar masks (their pinned buffers)
  };
  struct ResultSlot {
    int32_t* tokens = nullptr;  // pinned: the step's draws
    LogprobRecord* records = nullptr;  // pinned: its logprob records
    bool owned = false;
    cudaEvent_t start = nullptr, end = nullptr;  // the step's device time
  };
  std::deque<LaunchedSampling> launched_;
  ResultSlot result_slots_[2];
  // The last launch's metadata and sampling parameters have left their pinned buffers: a launch
  // made while another is uncollected waits for these before it rewrites them.
  cudaEvent_t meta_uploaded_ = nullptr, params_uploaded_ = nullptr;
  float last_device_ms_ = 0.f;
  int captured_kernels_ = 0;
};

// Uploads a loaded BF16 checkpoint. Throws striker::Error when no GPU is present or a weight
// cannot be used by this backend.
std::unique_ptr<Backend> make_cuda_backend(const LoadedModel& model, const CudaBackendOptions& options = {});
// --load-format dummy: random weights for `config` made on the GPU (no host copy).
std::unique_ptr<Backend> make_cuda_backend_dummy(const FlintConfig& config, uint64_t seed, WeightFormat format,
                                                 const CudaBackendOptions& options = {});

}  // namespace striker::cuda
