// CudaBackend: construction (the workspace), the KV cache, and forward() with its captured
// graphs. The step planner is in cuda_step_plan.cpp, the layer loop (FLINT.md §4) in flint_forward.cpp.
#include "backends/cuda/backend/cuda_backend.h"

#include <algorithm>
#include <string>

#include "backends/cuda/backend/cuda_backend_state.h"
#include "backends/cuda/common/cuda_check.h"
#include "backends/cuda/common/device_info.h"
#include "backends/cuda/common/stamps.h"
#include "backends/cuda/elementwise/elementwise.h"
#include "backends/cuda/elementwise/embedding.h"
#include "backends/cuda/attention/qk_rope_kv.h"
#include "backends/cuda/moe/moe_grouped.h"
#include "backends/cuda/moe/moe_grouped_wgmma.h"
#include "backends/cuda/moe/router.h"
#include "backends/sample_split.h"

namespace striker::cuda {
namespace {

// Steps up to this many tokens may replay captured graphs (use_graphs): nothing in a step reads
// device data back on the host, so only the launch shapes (T, rows, key buckets) key a graph.
constexpr int kGraphMaxTokens = 256;

}  // namespace

CudaBackend::CudaBackend(DeviceModel model, const CudaBackendOptions& options)
    : model_(std::move(model)), options_(options), ws_(std::make_unique<Workspace>()) {
  const FlintConfig& c = model_.config;
  if (!c.use_qk_norm) throw Error("CUDA backend: use_qk_norm=false is not supported");
  if (c.num_experts_per_tok > 8) throw Error("CUDA backend: num_experts_per_tok above 8 is not supported");
  // Shapes the attention kernels are built for: refuse at load rather than fail every request.
  const int64_t group = c.num_key_value_heads > 0 ? c.num_attention_heads / c.num_key_value_heads : 0;
  if (group != 1 && group != 2 && group != 4 && group != 8)
    throw Error("CUDA backend: " + std::to_string(c.num_attention_heads) + " attention heads over " +
                std::to_string(c.num_key_value_heads) + " KV heads (1, 2, 4 or 8 query heads per KV head are built)");
  if (c.head_dim != 32 && c.head_dim != 64 && c.head_dim != 128)
    throw Error("CUDA backend: head_dim " + std::to_string(c.head_dim) + " is not 32, 64 or 128");
  // Every launch covers a step of any length (token and query grids stride or are sliced past
  // kMaxGridYZ); the one bound left is the MoE routing sort's slot rank. Refused here, at startup,
  // so that no request can fail on it.
  const bool has_moe = c.num_hidden_layers > c.first_k_dense_replace && c.num_experts_per_tok > 0;
  if (has_moe && options_.max_tokens > moe_max_step_tokens(int(c.num_experts_per_tok)))
    throw Error("CUDA backend: a step of " + std::to_string(options_.max_tokens) + " tokens is more than it can run (" +
                std::to_string(moe_max_step_tokens(int(c.num_experts_per_tok))) + " at top-" +
                std::to_string(c.num_experts_per_tok) + ": the MoE routing sort ranks tokens x top-k in " +
                std::to_string(kMoeRankBits) + " bits); lower --max-num-batched-tokens or the chunk size");
  STRIKER_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  stamps_begin();  // a profiling build only (stamps.h); nothing otherwise
  STRIKER_CUDA_CHECK(cudaEventCreate(&ev_start_));
  STRIKER_CUDA_CHECK(cudaEventCreate(&ev_end_));
  STRIKER_CUDA_CHECK(cudaEventCreateWithFlags(&meta_uploaded_, cudaEventDisableTiming));
  STRIKER_CUDA_CHECK(cudaEventCreateWithFlags(&params_uploaded_, cudaEventDisableTiming));
  const int64_t Tm = options_.max_tokens, H = c.hidden_size, d = c.head_dim, nh = c.num_attention_heads,
                nkv = c.num_key_value_heads, K = c.num_experts_per_tok;
  const int64_t qkv_dim = (nh + 2 * nkv) * d;
  const int64_t wide = std::max({H, nh * d, c.intermediate_size, c.moe_intermediate_size,
                                 c.shared_expert_intermediate_size});
  Workspace& w = *ws_;
  w.h = w.arena.get<bf16>(Tm * H);
  w.x = w.arena.get<bf16>(Tm * H);
  w.qkv = w.arena.get<bf16>(Tm * qkv_dim);
  w.q = w.arena.get<bf16>(Tm * nh * d);
  w.attn = w.arena.get<bf16>(Tm * nh * d);
  w.tmp = w.arena.get<bf16>(Tm * wide);
  w.gate = w.arena.get<bf16>(Tm * wide);
  w.up = w.arena.get<bf16>(Tm * wide);
  w.act = w.arena.get<bf16>(Tm * wide);
  w.moe_act = w.arena.get<bf16>(Tm * K * c.moe_intermediate_size);
  w.shared_act = w.arena.get<bf16>(Tm * std::max<int64_t>(c.shared_expert_intermediate_size, 8));
  w.moe_y = w.arena.get<bf16>(std::min<int64_t>(Tm, kMoePerSlotMaxTokensNvfp4) * (K + 1) * c.hidden_size);
  w.logit_x = w.arena.get<bf16>(int64_t(options_.max_logit_rows) * H);
  w.router_logits = w.arena.get<float>(Tm * c.n_routed_experts);
  w.topk_w = w.arena.get<float>(Tm * K);
  w.topk_ids = w.arena.get<int32_t>(Tm * K);
  w.router_counter = w.arena.get<unsigned int>(kRouterSyncWords);  // the decode router's exchange words
  STRIKER_CUDA_CHECK(cudaMemset(w.router_counter, 0, kRouterSyncWords * sizeof(unsigned int)));
  w.logits = w.arena.get<float>(int64_t(options_.max_logit_rows) * c.vocab_size);
  w.logits_bf16 = w.arena.get<bf16>(int64_t(options_.max_logit_rows) * c.vocab_size);
  const auto inv = rope_inv_freq(c.rope_theta, int(d));
  w.inv_freq = w.arena.get<float>(int64_t(inv.size()));
  STRIKER_CUDA_CHECK(cudaMemcpy(w.inv_freq, inv.data(), inv.size() * 4, cudaMemcpyHostToDevice));
  const AttentionShape shape{int(nh), int(nkv), int(d), 16, 0};
  w.scratch.max_partials = std::max<int64_t>(Tm * nkv * 2, 4096);
  int sms = 0;
  STRIKER_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  w.scratch.target_records = int64_t(sms) * 3;  // one wave of the 3-CTAs-per-SM tensor-core kernel
  w.scratch.data = w.arena.get<float>(w.scratch.max_partials * attention_partial_floats(shape));
  // [per-token arrays | logit rows | full tables] packed from 0; sliding tables at a fixed base,
  // so every device pointer depends only on (T, rows) and a captured graph can be replayed.
  // The prefill tiles (at most T pairs), tiled and other query lists (T in all) and the taken
  // tokens' pairs (at most T) follow the full tables: their sizes depend on the batch, but they
  // are only used in steps never captured (or, the pairs, before the graph's launch).
  w.sliding_base = align16(size_t(Tm) * 4) * 4 + align16(size_t(Tm) * 8) * 2 +
                   align16(size_t(options_.max_logit_rows) * 4) + align16(size_t(options_.max_table_entries) * 4) +
                   align16(size_t(Tm) * 8) + align16(size_t(Tm) * 4) * 2 + align16(size_t(Tm) * 8);
  w.meta_bytes = w.sliding_base + align16(size_t(options_.max_table_entries) * 4);
  STRIKER_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&w.meta_host), w.meta_bytes));
  w.meta_dev = w.arena.get<std::byte>(int64_t(w.meta_bytes));
  STRIKER_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&w.logits_host),
                                    size_t(host_logit_rows()) * size_t(c.vocab_size) * 4));
  if (options_.device_sampling) {
    if (c.vocab_size > sample_split::kMaxVocab)
      throw Error("CUDA backend: device sampling splits vocabularies of up to " + std::to_string(sample_split::kMaxVocab) +
                  " tokens, the model has " + std::to_string(c.vocab_size));
    sampling_ = std::make_unique<SamplingBuffers>(options_.max_logit_rows, options_.max_sample_edits);
    masks_ = std::make_unique<TokenMaskBuffers>(options_.max_logit_rows, c.vocab_size);
    logprobs_ = std::make_unique<LogprobBuffers>(c.vocab_size, options_.max_logit_rows + kMaxDeviceLogprobRows);
    // Two launched steps may be uncollected at once (async scheduling): each lands its draws and
    // logprob records in its own pinned buffers, the buffers' own (slot 0) or these (slot 1).
    result_slots_[0].tokens = sampling_->tokens_host();
    result_slots_[0].records = logprobs_->records_host();
    ResultSlot& second = result_slots_[1];
    second.owned = true;
    STRIKER_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&second.tokens), size_t(options_.max_logit_rows) * 4));
    STRIKER_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&second.records),
                                      size_t(logprobs_->max_records()) * sizeof(LogprobRecord)));
    for (ResultSlot& r : result_slots_) {
      STRIKER_CUDA_CHECK(cudaEventCreate(&r.start));
      STRIKER_CUDA_CHECK(cudaEventCreate(&r.end));
    }
  }
  if (Tm > kGemvMaxTokens) {  // the routing sort of the grouped MoE (decode steps run per slot)
    const int64_t slots = Tm * K, I = c.moe_intermediate_size;
    const int E = int(c.n_routed_experts);
    if (E > kMoeMaxExperts)
      throw Error("CUDA backend: n_routed_experts " + std::to_string(E) + " above " + std::to_string(kMoeMaxExperts) +
                  " is not supported by the grouped MoE kernels");
    // Batched decode steps sort the shared expert in as one more expert (ops_moe.cpp): a row per token.
    const int64_t shared_rows = std::min<int64_t>(Tm, kMoeSharedTileMaxTokens);
    w.routing.experts = E;
    w.routing.sorted_slot = w.arena.get<int32_t>(slots + shared_rows);
    w.routing.slot_row = w.arena.get<int32_t>(slots);
    w.routing.tiles = w.arena.get<MoeTile>(moe_max_tiles(slots, E, 16, shared_rows));  // 16-row tiles: the most
    w.routing.num_tiles = w.arena.get<int32_t>(1);
    w.a_sorted = w.arena.get<bf16>((slots + shared_rows) * I);
    w.y_sorted = w.arena.get<bf16>((slots + shared_rows) * H);
  }
  if (Tm > kGemvMaxTokens) {  // NVFP4 weights dequantised for the cuBLASLt GEMMs of longer steps
    w.nv_scratch.elems = nvfp4_scratch_elems(model_);  // routed experts decode in registers: no scratch
    if (w.nv_scratch.elems > 0) w.nv_scratch.data = w.arena.get<bf16>(w.nv_scratch.elems);
  }
}

CudaBackend::~CudaBackend() {
  stamps_end();
  for (auto& [key, step] : graphs_) cudaGraphExecDestroy(step.exec);
  ws_.reset();
  sampling_.reset();
  for (void* p : kv_allocations_) cudaFree(p);
  if (ev_start_) cudaEventDestroy(ev_start_);
  if (ev_end_) cudaEventDestroy(ev_end_);
  for (cudaEvent_t e : {meta_uploaded_, params_uploaded_})
    if (e) cudaEventDestroy(e);
  for (ResultSlot& r : result_slots_) {
    if (r.start) cudaEventDestroy(r.start);
    if (r.end) cudaEventDestroy(r.end);
    if (r.tokens && r.owned) cudaFreeHost(r.tokens);
    if (r.records && r.owned) cudaFreeHost(r.records);
  }
  if (stream_) cudaStreamDestroy(stream_);
}

int64_t CudaBackend::full_block_bytes(int32_t block_size) const {
  const FlintConfig& c = model_.config;
  return c.num_full_layers() * 2 * c.kv_dim() * block_size * 2;
}

int64_t CudaBackend::sliding_block_bytes(int32_t block_size) const {
  const FlintConfig& c = model_.config;
  return c.num_sliding_layers() * 2 * c.kv_dim() * block_size * 2;
}

void CudaBackend::allocate_kv_cache(const KvCacheSpec& spec) {
  if (spec.block_size <= 0 || spec.num_full_blocks < 0 || spec.num_sliding_blocks < 0)
    throw Error("CUDA backend: bad KV cache spec (block size " + std::to_string(spec.block_size) + ")");
  STRIKER_CUDA_CHECK(cudaStreamSynchronize(stream_));
  for (auto& [key, step] : graphs_) cudaGraphExecDestroy(step.exec);
  graphs_.clear();  // captured graphs hold the old cache pointers
  for (void* p : kv_allocations_) cudaFree(p);
  kv_allocations_.clear();
  const FlintConfig& c = model_.config;
  k_cache_.assign(size_t(c.num_hidden_layers), nullptr);
  v_cache_.assign(size_t(c.num_hidden_layers), nullptr);
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const int64_t blocks = c.is_sliding_layer(l) ? spec.num_sliding_blocks : spec.num_full_blocks;
    const size_t bytes = size_t(blocks) * size_t(c.kv_dim()) * size_t(spec.block_size) * 2;
    for (auto* cache : {&k_cache_, &v_cache_}) {
      void* p = nullptr;
      const cudaError_t err = cudaMalloc(&p, std::max<size_t>(bytes, 16));
      if (err != cudaSuccess)
        throw Error("CUDA backend: cannot allocate " + std::to_string(bytes >> 20) + " MiB of KV cache for layer " +
                    std::to_string(l) + ": " + cudaGetErrorString(err));
      kv_allocations_.push_back(p);
      (*cache)[size_t(l)] = static_cast<bf16*>(p);
    }
  }
  kv_spec_ = spec;
}

void CudaBackend::fill_kv_random(uint64_t seed) {
  const FlintConfig& c = model_.config;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const int64_t blocks = c.is_sliding_layer(l) ? kv_spec_.num_sliding_blocks : kv_spec_.num_full_blocks;
    const int64_t n = blocks * c.kv_dim() * kv_spec_.block_size;
    fill_random_bf16(k_cache_[size_t(l)], n, seed * 7919 + uint64_t(l) * 2, 0.f, 1.f, stream_);
    fill_random_bf16(v_cache_[size_t(l)], n, seed * 7919 + uint64_t(l) * 2 + 1, 0.f, 1.f, stream_);
  }
  STRIKER_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

namespace {
// Decode graphs are keyed by the attention key bound rounded up to a power of two, so one
// captured graph serves every step until the context doubles (splits past a query's own
// keys do no work).
int key_bucket(int keys) {
  int b = 1024;
  while (b < keys) b *= 2;
  return b;
}
}  // namespace

int CudaBackend::launch_forward(const ForwardBatch& batch) {
  // A launched, uncollected step (async scheduling) may not have uploaded its metadata yet: the
  // pinned buffer is rewritten only after it has.
  if (!launched_.empty()) STRIKER_CUDA_CHECK(cudaEventSynchronize(meta_uploaded_));
  StepPlan p;
  plan(batch, p);
  // Decode batches (one logits row per token) up to 256 tokens; prefill chunks of other shapes
  // would each capture a graph of their own for little gain.
  const bool graphable = p.T <= kGraphMaxTokens && (p.T <= kGemvMaxTokens || p.rows == p.T);
  const bool graph = options_.use_graphs && graphable;
  // Capturable steps keep the decode kernel for every query: it handles any mix of sequences with
  // launch shapes that depend only on (T, rows, key buckets), which the graph key covers. They are
  // planned the same way with graphs off, so graph replay and eager launches give the same bits.
  const FlintConfig& c = model_.config;
  p.use_prefill = !graphable && p.num_prefill_tiles > 0 && c.head_dim == 128 &&
                  c.num_attention_heads == 8 * c.num_key_value_heads;
  if (graphable) {
    p.max_keys_full = key_bucket(p.max_keys_full);
    p.max_keys_sliding = key_bucket(p.max_keys_sliding);
  }
  STRIKER_CUDA_CHECK(cudaEventRecord(ev_start_, stream_));
  STRIKER_CUDA_CHECK(cudaMemcpyAsync(ws_->meta_dev, ws_->meta_host, p.bytes, cudaMemcpyHostToDevice, stream_));
  if (p.sliding_bytes > 0)
    STRIKER_CUDA_CHECK(cudaMemcpyAsync(ws_->meta_dev + ws_->sliding_base, ws_->meta_host + ws_->sliding_base,
                                       p.sliding_bytes, cudaMemcpyHostToDevice, stream_));
  STRIKER_CUDA_CHECK(cudaEventRecord(meta_uploaded_, stream_));  // the pinned buffer is free again after it
  if (p.num_take > 0) {
    if (launched_.empty() || !sampling_)
      throw Error("CUDA backend: a chunk takes its token from the previous step's draws, but no launched step is uncollected");
    take_drawn_tokens(const_cast<int32_t*>(p.tokens), p.take_pairs, p.num_take, sampling_->tokens_dev(), stream_);
  }
  if (graph) {
    const auto key = std::make_tuple(p.T, p.rows, p.max_keys_full, p.max_keys_sliding, p.one_query_per_sequence);
    auto it = graphs_.find(key);
    if (it == graphs_.end()) {
      // One uncaptured run first: cuBLASLt (steps above 8 tokens) chooses and caches its algorithm
      // for each new shape outside the capture, where any setup it does is allowed. The step is
      // recomputed by the graph below; rewriting the same K/V into the same slots is harmless.
      if (p.T > kGemvMaxTokens) flint_forward(p);
      cudaGraph_t g = nullptr;
      STRIKER_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
      try {
        flint_forward(p);
      } catch (...) {
        cudaStreamEndCapture(stream_, &g);
        if (g) cudaGraphDestroy(g);
        throw;
      }
      STRIKER_CUDA_CHECK(cudaStreamEndCapture(stream_, &g));
      size_t nodes = 0;
      STRIKER_CUDA_CHECK(cudaGraphGetNodes(g, nullptr, &nodes));
      captured_kernels_ = int(nodes);  // every node of a step is a kernel launch
      cudaGraphExec_t exec = nullptr;
      const cudaError_t err = cudaGraphInstantiate(&exec, g, 0);
      cudaGraphDestroy(g);
      STRIKER_CUDA_CHECK(err);
      if (!graphs_.empty() && graphs_.size() >= size_t(std::max(1, options_.max_captured_graphs))) {
        // A replay still in flight is not cut short: CUDA frees a destroyed graph after it completes.
        auto lru = std::min_element(graphs_.begin(), graphs_.end(), [](const auto& a, const auto& b) {
          return a.second.last_use < b.second.last_use;
        });
        cudaGraphExecDestroy(lru->second.exec);
        graphs_.erase(lru);
      }
      it = graphs_.emplace(key, CapturedStep{exec, 0}).first;
    }
    it->second.last_use = ++graph_uses_;
    STRIKER_CUDA_CHECK(cudaGraphLaunch(it->second.exec, stream_));
  } else {
    flint_forward(p);
  }
  return p.rows;
}

std::vector<int32_t> CudaBackend::last_layer_routing(int T) const {
  std::vector<int32_t> ids(size_t(T) * size_t(model_.config.num_experts_per_tok));
  STRIKER_CUDA_CHECK(cudaStreamSynchronize(stream_));
  STRIKER_CUDA_CHECK(cudaMemcpy(ids.data(), ws_->topk_ids, ids.size() * sizeof(int32_t), cudaMemcpyDeviceToHost));
  return ids;
}

float* CudaBackend::logits_device() const { return ws_->logits; }
float* CudaBackend::logits_pinned() const { return ws_->logits_host; }
int CudaBackend::host_logit_rows() const {
  const int rows = options_.max_host_logit_rows;
  return rows > 0 && rows < options_.max_logit_rows ? rows : options_.max_logit_rows;
}

void CudaBackend::forward(const ForwardBatch& batch, std::vector<float>& logits) {
  // Steps above max_logit_rows are refused by launch_forward; this is the smaller host buffer.
  int64_t wanted = 0;
  for (const auto& s : batch.seqs) wanted += s.all_logits ? int64_t(s.tokens.size()) : 1;
  if (wanted > host_logit_rows() && host_logit_rows() < options_.max_logit_rows)
    throw Error("CUDA backend: " + std::to_string(wanted) + " logits rows in one forward(), the host buffer holds " +
                std::to_string(host_logit_rows()) + " (forward_streamed hands more over in blocks)");
  const int rows = launch_forward(batch);
  const int64_t V = model_.config.vocab_size;
  STRIKER_CUDA_CHECK(cudaMemcpyAsync(ws_->logits_host, ws_->logits, size_t(rows) * size_t(V) * 4,
                                     cudaMemcpyDeviceToHost, stream_));
  STRIKER_CUDA_CHECK(cudaEventRecord(ev_end_, stream_));
  STRIKER_CUDA_CHECK(cudaStreamSynchronize(stream_));
  STRIKER_CUDA_CHECK(cudaEventElapsedTime(&last_device_ms_, ev_start_, ev_end_));
  logits.assign(ws_->logits_host, ws_->logits_host + size_t(rows) * size_t(V));
}

// The step's logits stay on the device as forward() computes them (one lm_head over every row,
// so the bits are forward()'s); only the copy to the host goes block by block through the
// pinned buffer, each block handed to `sink` before the next overwrites it.
void CudaBackend::forward_streamed(const ForwardBatch& batch, int64_t max_block_rows, const LogitsSink& sink) {
  if (max_block_rows < 1)
    throw Error("CUDA backend: forward_streamed needs max_block_rows >= 1, got " + std::to_string(max_block_rows));
  const int rows = launch_forward(batch);
  const int64_t V = model_.config.vocab_size;
  const int64_t block = std::min<int64_t>(max_block_rows, host_logit_rows());
  STRIKER_CUDA_CHECK(cudaEventRecord(ev_end_, stream_));
  for (int64_t first = 0; first < rows; first += block) {
    const int64_t count = std::min<int64_t>(block, rows - first);
    STRIKER_CUDA_CHECK(cudaMemcpyAsync(ws_->logits_host, ws_->logits + first * V, size_t(count) * size_t(V) * 4,
                                       cudaMemcpyDeviceToHost, stream_));
    STRIKER_CUDA_CHECK(cudaStreamSynchronize(stream_));
    if (first == 0) STRIKER_CUDA_CHECK(cudaEventElapsedTime(&last_device_ms_, ev_start_, ev_end_));
    sink(first, ws_->logits_host, count);
  }
}

std::unique_ptr<Backend> make_cuda_backend(const LoadedModel& model, const CudaBackendOptions& options) {
  if (device_count() == 0) throw Error("CUDA backend: " + device_summary());
  return std::make_unique<CudaBackend>(DeviceModel::upload(model), options);
}

std::unique_ptr<Backend> make_cuda_backend_dummy(const FlintConfig& config, uint64_t seed, WeightFormat format,
                                                 const CudaBackendOptions& options) {
  if (device_count() == 0) throw Error("CUDA backend: " + device_summary());
  return std::make_unique<CudaBackend>(DeviceModel::random(config, seed, format), options);
}

}  // namespace striker::cuda
