// CudaBackend: the step planner (host metadata, validation) and the layer loop, which reads
// like FLINT.md §4.
#include "backends/cuda/cuda_backend.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "backends/cuda/attention.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device_info.h"
#include "backends/cuda/elementwise.h"
#include "backends/cuda/embedding.h"
#include "backends/cuda/gemm_lt.h"
#include "backends/cuda/gemv.h"
#include "backends/cuda/moe.h"
#include "backends/cuda/moe_grouped.h"
#include "backends/cuda/nvfp4_linear.h"
#include "backends/cuda/nvfp4_moe.h"
#include "backends/cuda/nvfp4_prefill.h"
#include "backends/cuda/qk_rope_kv.h"
#include "backends/cuda/rmsnorm.h"
#include "backends/cuda/router.h"

namespace striker::cuda {
namespace {

constexpr int kGemvMaxTokens = 8;  // up to this many tokens the weights are streamed by GEMV kernels
// Steps up to this many tokens may replay captured graphs (use_graphs): nothing in a step reads
// device data back on the host, so only the launch shapes (T, rows, key buckets) key a graph.
constexpr int kGraphMaxTokens = 256;
// Sequences with at least this many queries in a step take the tensor-core prefill attention
// (one tile of 16 queries reads each key once); shorter ones, decodes above all, keep the
// split-KV decode kernel, which spreads one query's long context over many CTAs.
constexpr int kPrefillMinRun = kPrefillTileTokens;

// One device allocation, freed with the workspace.
struct DeviceArena {
  std::vector<void*> blocks;
  ~DeviceArena() {
    for (void* p : blocks) cudaFree(p);
  }
  template <typename T>
  T* get(int64_t count) {
    void* p = nullptr;
    const cudaError_t err = cudaMalloc(&p, size_t(std::max<int64_t>(count, 1)) * sizeof(T));
    if (err != cudaSuccess)
      throw Error("CUDA backend: cannot allocate a " + std::to_string((count * int64_t(sizeof(T))) >> 20) +
                  " MiB work buffer: " + cudaGetErrorString(err));
    blocks.push_back(p);
    return static_cast<T*>(p);
  }
};

size_t align16(size_t n) { return (n + 15) & ~size_t(15); }

}  // namespace

struct CudaBackend::Workspace {
  DeviceArena arena;
  LtGemm lt;
  bf16 *h, *x, *qkv, *q, *attn, *tmp, *gate, *up, *act, *moe_act, *shared_act, *logit_x, *logits_bf16;
  float *router_logits, *topk_w, *logits, *inv_freq;
  int32_t* topk_ids;
  AttentionScratch scratch;
  // Step metadata: one pinned host buffer, one device buffer, one copy per step.
  size_t meta_bytes = 0;
  size_t sliding_base = 0;  // offset of the sliding block tables in the metadata buffers
  std::byte* meta_host = nullptr;
  std::byte* meta_dev = nullptr;
  float* logits_host = nullptr;  // pinned
  // Routed experts of steps above 8 tokens (moe_grouped.h), BF16 or NVFP4: the routing sorted by
  // expert on the device (tile_rows is chosen per step), SwiGLU activations and expert outputs
  // in sorted order.
  MoeRouting routing;
  bf16 *a_sorted = nullptr, *y_sorted = nullptr;
  Nvfp4Scratch nv_scratch;  // dequantised NVFP4 dense/shared weights of prefill chunks (none without NVFP4)
  ~Workspace() {
    if (meta_host) cudaFreeHost(meta_host);
    if (logits_host) cudaFreeHost(logits_host);
  }
};

// Host-side description of one step; device pointers point into ws_->meta_dev.
struct CudaBackend::StepPlan {
  int T = 0, rows = 0;
  int max_keys_full = 0, max_keys_sliding = 0;
  // Prefill attention: tiles of the sequences with >= kPrefillMinRun queries, and the indices of
  // the other queries with their key bounds. Used only when use_prefill (set by forward()).
  int num_prefill_tiles = 0, num_tiled = 0, num_rest = 0, max_keys_full_rest = 0, max_keys_sliding_rest = 0;
  bool use_prefill = false;
  const int32_t *prefill_tiles = nullptr, *tiled_queries = nullptr, *rest_queries = nullptr;
  size_t bytes = 0;          // metadata bytes used from offset 0
  size_t sliding_bytes = 0;  // and from sliding_base
  const int32_t *tokens = nullptr, *positions = nullptr, *off_full = nullptr, *off_sliding = nullptr,
                *tables_full = nullptr, *tables_sliding = nullptr, *logit_rows = nullptr;
  const int64_t *slots_full = nullptr, *slots_sliding = nullptr;
};

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
  STRIKER_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  STRIKER_CUDA_CHECK(cudaEventCreate(&ev_start_));
  STRIKER_CUDA_CHECK(cudaEventCreate(&ev_end_));
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
  w.logit_x = w.arena.get<bf16>(int64_t(options_.max_logit_rows) * H);
  w.router_logits = w.arena.get<float>(Tm * c.n_routed_experts);
  w.topk_w = w.arena.get<float>(Tm * K);
  w.topk_ids = w.arena.get<int32_t>(Tm * K);
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
  // The prefill tiles (at most T pairs), tiled and other query lists (T in all) follow the full
  // tables: their sizes depend on the batch, but they are only used in steps never captured.
  w.sliding_base = align16(size_t(Tm) * 4) * 4 + align16(size_t(Tm) * 8) * 2 +
                   align16(size_t(options_.max_logit_rows) * 4) + align16(size_t(options_.max_table_entries) * 4) +
                   align16(size_t(Tm) * 8) + align16(size_t(Tm) * 4) * 2;
  w.meta_bytes = w.sliding_base + align16(size_t(options_.max_table_entries) * 4);
  STRIKER_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&w.meta_host), w.meta_bytes));
  w.meta_dev = w.arena.get<std::byte>(int64_t(w.meta_bytes));
  STRIKER_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&w.logits_host),
                                    size_t(options_.max_logit_rows) * size_t(c.vocab_size) * 4));
  if (options_.device_sampling)
    sampling_ = std::make_unique<SamplingBuffers>(options_.max_logit_rows, options_.max_sample_edits);
  if (Tm > kGemvMaxTokens) {
    const int64_t slots = Tm * K, I = c.moe_intermediate_size;
    const int E = int(c.n_routed_experts);
    if (E > kMoeMaxExperts)
      throw Error("CUDA backend: n_routed_experts " + std::to_string(E) + " above " + std::to_string(kMoeMaxExperts) +
                  " is not supported by the grouped MoE kernels");
    w.routing.experts = E;
    w.routing.sorted_slot = w.arena.get<int32_t>(slots);
    w.routing.slot_row = w.arena.get<int32_t>(slots);
    w.routing.tiles = w.arena.get<MoeTile>(moe_max_tiles(slots, E, 16));  // 16-row tiles need the most
    w.routing.num_tiles = w.arena.get<int32_t>(1);
    w.a_sorted = w.arena.get<bf16>(slots * I);
    w.y_sorted = w.arena.get<bf16>(slots * H);
    w.nv_scratch.elems = nvfp4_scratch_elems(model_);
    if (w.nv_scratch.elems > 0) w.nv_scratch.data = w.arena.get<bf16>(w.nv_scratch.elems);
  }
}

CudaBackend::~CudaBackend() {
  for (auto& [key, exec] : graphs_) cudaGraphExecDestroy(exec);
  ws_.reset();
  sampling_.reset();
  for (void* p : kv_allocations_) cudaFree(p);
  if (ev_start_) cudaEventDestroy(ev_start_);
  if (ev_end_) cudaEventDestroy(ev_end_);
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
  for (auto& [key, exec] : graphs_) cudaGraphExecDestroy(exec);
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

void CudaBackend::plan(const ForwardBatch& batch, StepPlan& p) const {
  const FlintConfig& c = model_.config;
  const int B = kv_spec_.block_size;
  if (k_cache_.empty()) throw Error("CUDA backend: forward() called before allocate_kv_cache()");
  const bool has_full = c.num_full_layers() > 0, has_sliding = c.num_sliding_layers() > 0;
  const int64_t W = c.sliding_window;
  std::vector<int32_t> tokens, positions, off_full, off_sliding, tables_full, tables_sliding, rows, tiles, tiled, rest;
  std::vector<int64_t> slots_full, slots_sliding;
  for (size_t s = 0; s < batch.seqs.size(); ++s) {
    const SequenceChunk& seq = batch.seqs[s];
    const std::string where = "sequence " + std::to_string(s) + ": ";
    const int64_t n = int64_t(seq.tokens.size());
    if (n == 0) throw Error("CUDA backend: " + where + "empty token chunk");
    if (seq.start_pos < 0 || seq.start_pos + n > c.max_position_embeddings)
      throw Error("CUDA backend: " + where + "positions " + std::to_string(seq.start_pos) + ".." +
                  std::to_string(seq.start_pos + n - 1) + " outside the model's " +
                  std::to_string(c.max_position_embeddings));
    const int64_t last = seq.start_pos + n - 1;
    const int64_t last_block = last / B;
    if (has_full) {
      if (int64_t(seq.full_block_table.size()) <= last_block)
        throw Error("CUDA backend: " + where + "full block table has " + std::to_string(seq.full_block_table.size()) +
                    " entries, position " + std::to_string(last) + " needs " + std::to_string(last_block + 1));
      for (int64_t b = 0; b <= last_block; ++b)
        if (seq.full_block_table[size_t(b)] < 0 || seq.full_block_table[size_t(b)] >= kv_spec_.num_full_blocks)
          throw Error("CUDA backend: " + where + "full block id " + std::to_string(seq.full_block_table[size_t(b)]) +
                      " outside the pool of " + std::to_string(kv_spec_.num_full_blocks));
    }
    if (has_sliding) {
      if (int64_t(seq.sliding_block_table.size()) <= last_block)
        throw Error("CUDA backend: " + where + "sliding block table has " +
                    std::to_string(seq.sliding_block_table.size()) + " entries, position " + std::to_string(last) +
                    " needs " + std::to_string(last_block + 1));
      // Blocks any query of this chunk can see must be real; older ones may be freed (-1).
      for (int64_t b = std::max<int64_t>(0, seq.start_pos - W + 1) / B; b <= last_block; ++b)
        if (seq.sliding_block_table[size_t(b)] < 0 || seq.sliding_block_table[size_t(b)] >= kv_spec_.num_sliding_blocks)
          throw Error("CUDA backend: " + where + "sliding block id " +
                      std::to_string(seq.sliding_block_table[size_t(b)]) + " (logical block " + std::to_string(b) +
                      ") outside the pool of " + std::to_string(kv_spec_.num_sliding_blocks));
    }
    const int32_t of = int32_t(tables_full.size()), os = int32_t(tables_sliding.size());
    if (has_full) tables_full.insert(tables_full.end(), seq.full_block_table.begin(), seq.full_block_table.begin() + last_block + 1);
    if (has_sliding)
      tables_sliding.insert(tables_sliding.end(), seq.sliding_block_table.begin(),
                            seq.sliding_block_table.begin() + last_block + 1);
    if (n >= kPrefillMinRun) {
      append_prefill_tiles(int(tokens.size()), int(n), tiles);
      for (int64_t i = 0; i < n; ++i) tiled.push_back(int32_t(tokens.size() + size_t(i)));
    } else {
      for (int64_t i = 0; i < n; ++i) rest.push_back(int32_t(tokens.size() + size_t(i)));
      p.max_keys_full_rest = std::max<int>(p.max_keys_full_rest, int(last + 1));
      p.max_keys_sliding_rest = std::max<int>(p.max_keys_sliding_rest, int(std::min<int64_t>(last + 1, W)));
    }
    for (int64_t i = 0; i < n; ++i) {
      const int32_t tok = seq.tokens[size_t(i)];
      if (tok < 0 || tok >= c.vocab_size)
        throw Error("CUDA backend: " + where + "token id " + std::to_string(tok) + " outside the vocabulary of " +
                    std::to_string(c.vocab_size));
      const int64_t pos = seq.start_pos + i;
      if (seq.all_logits || i == n - 1) rows.push_back(int32_t(tokens.size()));
      tokens.push_back(tok);
      positions.push_back(int32_t(pos));
      off_full.push_back(of);
      off_sliding.push_back(os);
      slots_full.push_back(has_full ? int64_t(seq.full_block_table[size_t(pos / B)]) * B + pos % B : 0);
      slots_sliding.push_back(has_sliding ? int64_t(seq.sliding_block_table[size_t(pos / B)]) * B + pos % B : 0);
    }
    p.max_keys_full = std::max<int>(p.max_keys_full, int(last + 1));
    p.max_keys_sliding = std::max<int>(p.max_keys_sliding, int(std::min<int64_t>(last + 1, W)));
  }
  p.T = int(tokens.size());
  p.rows = int(rows.size());
  if (p.T == 0) throw Error("CUDA backend: empty batch");
  if (p.T > options_.max_tokens)
    throw Error("CUDA backend: " + std::to_string(p.T) + " tokens in one step, at most " +
                std::to_string(options_.max_tokens));
  if (p.rows > options_.max_logit_rows)
    throw Error("CUDA backend: " + std::to_string(p.rows) + " logits rows in one step, at most " +
                std::to_string(options_.max_logit_rows));
  if (int64_t(std::max(tables_full.size(), tables_sliding.size())) > options_.max_table_entries)
    throw Error("CUDA backend: block tables of this step exceed " + std::to_string(options_.max_table_entries) +
                " entries per pool");
  // Pack everything into the pinned buffer; device pointers mirror the offsets.
  std::byte* host = ws_->meta_host;
  size_t off = 0;
  auto put = [&](const auto& v, auto*& dev_ptr) {
    using T = typename std::decay_t<decltype(v)>::value_type;
    std::memcpy(host + off, v.data(), v.size() * sizeof(T));
    dev_ptr = reinterpret_cast<std::remove_reference_t<decltype(dev_ptr)>>(ws_->meta_dev + off);
    off += align16(v.size() * sizeof(T));
  };
  put(tokens, p.tokens);
  put(positions, p.positions);
  put(off_full, p.off_full);
  put(off_sliding, p.off_sliding);
  put(rows, p.logit_rows);
  put(slots_full, p.slots_full);
  put(slots_sliding, p.slots_sliding);
  put(tables_full, p.tables_full);
  put(tiles, p.prefill_tiles);
  put(tiled, p.tiled_queries);
  put(rest, p.rest_queries);
  p.num_prefill_tiles = int(tiles.size() / 2);
  p.num_tiled = int(tiled.size());
  p.num_rest = int(rest.size());
  p.bytes = off;
  off = ws_->sliding_base;
  put(tables_sliding, p.tables_sliding);
  p.sliding_bytes = tables_sliding.size() * 4;
}

void CudaBackend::linear(const bf16* x, int T, int in, const bf16* W, int out, bf16* y) {
  if (T <= kGemvMaxTokens) gemv_bf16(x, T, in, W, out, y, stream_);
  else ws_->lt.gemm_bf16(x, T, in, W, out, y, stream_);
}

void CudaBackend::linear_residual(const bf16* x, int T, int in, const bf16* W, int out, bf16* h) {
  if (T <= kGemvMaxTokens) {
    gemv_residual(x, T, in, W, out, h, stream_);
  } else {
    ws_->lt.gemm_bf16(x, T, in, W, out, ws_->tmp, stream_);
    residual_add(h, ws_->tmp, int64_t(T) * out, stream_);
  }
}

void CudaBackend::linear(const bf16* x, int T, int in, const bf16* W, const Nvfp4Linear& q, int out, bf16* y) {
  if (!q.present()) return linear(x, T, in, W, out, y);
  if (T <= kGemvMaxTokens) nvfp4_gemv(x, T, in, q.matrix(), q.scale2, out, y, stream_);
  else nvfp4_gemm(ws_->lt, x, T, in, q.matrix(), q.scale2, out, y, out, ws_->nv_scratch, stream_);
}

void CudaBackend::linear_residual(const bf16* x, int T, int in, const bf16* W, const Nvfp4Linear& q, int out,
                                  bf16* h) {
  if (!q.present()) return linear_residual(x, T, in, W, out, h);
  if (T <= kGemvMaxTokens) {
    nvfp4_gemv_residual(x, T, in, q.matrix(), q.scale2, out, h, stream_);
  } else {
    nvfp4_gemm(ws_->lt, x, T, in, q.matrix(), q.scale2, out, ws_->tmp, out, ws_->nv_scratch, stream_);
    residual_add(h, ws_->tmp, int64_t(T) * out, stream_);
  }
}

// NVFP4 routed experts of a decode step (T <= 8): the selected-experts kernels, with an NVFP4
// shared expert fused into them, or a BF16 one run first by the BF16 GEMV kernels and added as a
// bf16 vector. (Larger steps take moe_batched, as BF16 experts do.)
void CudaBackend::moe_nvfp4(const DeviceLayer& L, int T) {
  const FlintConfig& c = model_.config;
  Workspace& w = *ws_;
  const int H = int(c.hidden_size), I = int(c.moe_intermediate_size), Is = int(c.shared_expert_intermediate_size),
            K = int(c.num_experts_per_tok);
  const bool shared_nv = L.nv_sh_gate.present();
  const Nvfp4Shared sh{L.nv_sh_gate.matrix(), L.nv_sh_up.matrix(), L.nv_sh_down.matrix(), L.nv_sh_gate.scale2.s[0],
                       L.nv_sh_up.scale2.s[0], L.nv_sh_down.scale2.s[0], Is};
  const bf16* y_shared = nullptr;
  if (L.sh_gate) {  // BF16 shared expert: y_shared = bf16(mm(act, Wd_shared)) into w.tmp
    gemv_gate_up(w.x, T, H, L.sh_gate, L.sh_up, Is, w.act, stream_);
    gemv_bf16(w.act, T, Is, L.sh_down, H, w.tmp, stream_);
    y_shared = w.tmp;
  }
  nvfp4_moe_gate_up(w.x, T, H, L.nv_exp_gate.stack(), L.nv_exp_up.stack(), I, w.topk_ids, K, w.moe_act,
                    shared_nv ? &sh : nullptr, shared_nv ? w.shared_act : nullptr, stream_);
  nvfp4_moe_down_combine(w.moe_act, T, K, L.nv_exp_down.stack(), I, H, w.topk_ids, w.topk_w, shared_nv ? &sh : nullptr,
                         shared_nv ? w.shared_act : nullptr, y_shared, w.h, stream_);  // h = bf16(h + y)
}

// Routed experts of a step above 8 tokens (batched decode or prefill), all on the device: the
// routing is counting-sorted by expert, then two grouped tensor-core launches (gate/up with
// SwiGLU, down) stream each routed expert's weights once per tile of rows, BF16 or NVFP4 (the
// NVFP4 kernels decode the weight tiles in shared memory and apply the expert's scale2). No host
// sync, so the step can be graph-captured.
void CudaBackend::moe_batched(const DeviceLayer& L, int T) {
  const FlintConfig& c = model_.config;
  Workspace& w = *ws_;
  const int H = int(c.hidden_size), I = int(c.moe_intermediate_size), Is = int(c.shared_expert_intermediate_size),
            K = int(c.num_experts_per_tok), E = int(c.n_routed_experts);
  MoeRouting r = w.routing;
  r.tile_rows = moe_tile_rows_for(int64_t(T) * K, E);
  moe_route_sort(w.topk_ids, T, K, r, stream_);
  if (L.nv_exp_gate.present()) {
    moe_grouped_gate_up_nvfp4(w.x, T, K, H, L.nv_exp_gate.stack(), L.nv_exp_up.stack(), I, r, w.a_sorted, stream_);
    moe_grouped_down_nvfp4(w.a_sorted, T, K, I, L.nv_exp_down.stack(), H, r, w.y_sorted, stream_);
  } else {
    moe_grouped_gate_up(w.x, T, K, H, L.exp_gate, L.exp_up, I, r, w.a_sorted, stream_);
    moe_grouped_down(w.a_sorted, T, K, I, L.exp_down, H, r, w.y_sorted, stream_);  // bf16(mm(a, Wd)) per row
  }
  // Shared expert, in its own format (NVFP4: dequantise + cuBLASLt with alpha = scale2; BF16:
  // cuBLASLt): plain SwiGLU over the chunk, output in w.tmp.
  const bool shared = L.sh_gate != nullptr || L.nv_sh_gate.present();
  if (shared) {
    linear(w.x, T, H, L.sh_gate, L.nv_sh_gate, Is, w.gate);
    linear(w.x, T, H, L.sh_up, L.nv_sh_up, Is, w.up);
    swiglu_act(w.gate, w.up, w.act, int64_t(T) * Is, stream_);
    linear(w.act, T, Is, L.sh_down, L.nv_sh_down, H, w.tmp);
  }
  moe_combine_sorted(w.y_sorted, r.slot_row, w.topk_w, shared ? w.tmp : nullptr, T, K, H, w.h, stream_);
}

void CudaBackend::run_layers(const StepPlan& p) {
  const FlintConfig& c = model_.config;
  Workspace& w = *ws_;
  const int T = p.T, H = int(c.hidden_size), d = int(c.head_dim), nh = int(c.num_attention_heads),
            nkv = int(c.num_key_value_heads), K = int(c.num_experts_per_tok), B = kv_spec_.block_size;
  const int qkv_dim = (nh + 2 * nkv) * d, I = int(c.moe_intermediate_size),
            Is = int(c.shared_expert_intermediate_size), Id = int(c.intermediate_size);
  const float eps = c.rms_norm_eps;
  const HeadShape hs{nh, nkv, d};
  const RouterShape rs{H, int(c.n_routed_experts), K, c.norm_topk_prob, c.routed_scaling_factor};

  embedding_gather(model_.embed, c.vocab_size, H, p.tokens, T, w.h, stream_);  // h = E[token]
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const DeviceLayer& L = model_.layers[size_t(l)];
    const bool sliding = c.is_sliding_layer(l);
    rmsnorm(w.h, L.input_norm, w.x, T, H, eps, stream_);                             // x = rmsnorm(h)
    linear(w.x, T, H, L.wqkv, L.nv_qkv, qkv_dim, w.qkv);                             // q|k|v = bf16(mm(x, Wqkv))
    qk_norm_rope_kv_write(w.qkv, T, hs, L.q_norm, L.k_norm, eps, p.positions,        // per-head norm, RoPE on
                          sliding ? w.inv_freq : nullptr,                            // sliding layers, k/v into
                          sliding ? p.slots_sliding : p.slots_full, B,               // the paged cache
                          k_cache_[size_t(l)], v_cache_[size_t(l)], w.q, stream_);
    const AttentionShape shape{nh, nkv, d, B, sliding ? int(c.sliding_window) : 0};
    const AttentionQueries queries{p.positions, sliding ? p.off_sliding : p.off_full,
                                   sliding ? p.tables_sliding : p.tables_full, T,
                                   sliding ? p.max_keys_sliding : p.max_keys_full};
    if (p.use_prefill) {                                                             // o = softmax with sinks · v
      prefill_attention(w.q, k_cache_[size_t(l)], v_cache_[size_t(l)], L.sinks, shape, queries,
                        PrefillTiles{p.prefill_tiles, p.num_prefill_tiles, p.tiled_queries, p.num_tiled}, w.scratch,
                        w.attn, stream_);
      if (p.num_rest > 0) {  // the step's short runs (decodes): split-KV decode kernel
        AttentionQueries rest = queries;
        rest.num_queries = p.num_rest;
        rest.max_keys = sliding ? p.max_keys_sliding_rest : p.max_keys_full_rest;
        rest.query_ids = p.rest_queries;
        paged_attention(w.q, k_cache_[size_t(l)], v_cache_[size_t(l)], L.sinks, shape, rest, w.scratch, w.attn,
                        stream_, /*variant: tensor cores, 3 CTAs per SM*/ 1);
      }
    } else {
      paged_attention(w.q, k_cache_[size_t(l)], v_cache_[size_t(l)], L.sinks, shape, queries, w.scratch, w.attn,
                      stream_, /*variant: tensor cores, 3 CTAs per SM*/ 1);
    }
    linear_residual(w.attn, T, nh * d, L.wo, L.nv_o, H, w.h);                        // h = bf16(h + bf16(mm(o, Wo)))
    rmsnorm(w.h, L.post_norm, w.x, T, H, eps, stream_);                              // x = rmsnorm(h)
    if (c.is_dense_layer(l)) {                                                       // y = swiglu_dense(x)
      if (T <= kGemvMaxTokens && L.gate && L.up) {
        gemv_gate_up(w.x, T, H, L.gate, L.up, Id, w.act, stream_);
      } else if (T <= kGemvMaxTokens && L.nv_gate.present() && L.nv_up.present()) {
        nvfp4_gemv_gate_up(w.x, T, H, L.nv_gate.matrix(), L.nv_gate.scale2.s[0], L.nv_up.matrix(),
                           L.nv_up.scale2.s[0], Id, w.act, stream_);
      } else {  // prefill, or gate and up in different formats
        linear(w.x, T, H, L.gate, L.nv_gate, Id, w.gate);
        linear(w.x, T, H, L.up, L.nv_up, Id, w.up);
        swiglu_act(w.gate, w.up, w.act, int64_t(T) * Id, stream_);
      }
      linear_residual(w.act, T, Id, L.down, L.nv_down, H, w.h);                      // h = bf16(h + y)
    } else {                                                                         // routed top-K + shared
      router_topk(w.x, T, rs, L.router_bf16, L.router_f32, L.router_bias, w.router_logits, w.topk_ids, w.topk_w,
                  stream_);
      if (T > kGemvMaxTokens) {
        moe_batched(L, T);                                                           // h = bf16(h + y)
      } else if (L.nv_exp_gate.present()) {
        moe_nvfp4(L, T);                                                             // h = bf16(h + y)
      } else {  // decode: read only the selected experts' rows
        moe_gate_up(w.x, T, H, L.exp_gate, L.exp_up, I, w.topk_ids, K, w.moe_act, L.sh_gate, L.sh_up, Is,
                    L.sh_gate ? w.shared_act : nullptr, stream_);
        moe_down_combine(w.moe_act, T, K, L.exp_down, I, H, w.topk_ids, w.topk_w, L.sh_gate ? w.shared_act : nullptr,
                         L.sh_down, Is, w.h, stream_);                               // h = bf16(h + y)
      }
    }
  }
  // logits = bf16(mm(rmsnorm(h), lm_head)) for the requested rows only.
  embedding_gather(w.h, T, H, p.logit_rows, p.rows, w.logit_x, stream_);
  rmsnorm(w.logit_x, model_.final_norm, w.logit_x, p.rows, H, eps, stream_);
  if (model_.nv_lm_head.present()) {
    const Nvfp4Linear& q = model_.nv_lm_head;
    if (p.rows <= kGemvMaxTokens) {
      nvfp4_gemv_logits(w.logit_x, p.rows, H, q.matrix(), q.scale2, int(c.vocab_size), w.logits, stream_);
    } else {
      nvfp4_gemm(w.lt, w.logit_x, p.rows, H, q.matrix(), q.scale2, int(c.vocab_size), w.logits_bf16,
                 int(c.vocab_size), w.nv_scratch, stream_);
      bf16_to_f32(w.logits_bf16, w.logits, int64_t(p.rows) * c.vocab_size, stream_);
    }
  } else if (p.rows <= kGemvMaxTokens) {
    gemv_logits(w.logit_x, p.rows, H, model_.lm_head, int(c.vocab_size), w.logits, stream_);
  } else {
    w.lt.gemm_bf16(w.logit_x, p.rows, H, model_.lm_head, int(c.vocab_size), w.logits_bf16, stream_);
    bf16_to_f32(w.logits_bf16, w.logits, int64_t(p.rows) * c.vocab_size, stream_);
  }
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
  StepPlan p;
  plan(batch, p);
  // Decode batches (one logits row per token) up to 256 tokens; prefill chunks of other shapes
  // would each capture a graph of their own for little gain.
  const bool graph = options_.use_graphs && p.T <= kGraphMaxTokens && (p.T <= kGemvMaxTokens || p.rows == p.T);
  // Captured steps keep the decode kernel for every query: it handles any mix of sequences with
  // launch shapes that depend only on (T, rows, key buckets), which the graph key covers.
  const FlintConfig& c = model_.config;
  p.use_prefill = !graph && p.num_prefill_tiles > 0 && c.head_dim == 128 &&
                  c.num_attention_heads == 8 * c.num_key_value_heads;
  if (graph) {
    p.max_keys_full = key_bucket(p.max_keys_full);
    p.max_keys_sliding = key_bucket(p.max_keys_sliding);
  }
  STRIKER_CUDA_CHECK(cudaEventRecord(ev_start_, stream_));
  STRIKER_CUDA_CHECK(cudaMemcpyAsync(ws_->meta_dev, ws_->meta_host, p.bytes, cudaMemcpyHostToDevice, stream_));
  if (p.sliding_bytes > 0)
    STRIKER_CUDA_CHECK(cudaMemcpyAsync(ws_->meta_dev + ws_->sliding_base, ws_->meta_host + ws_->sliding_base,
                                       p.sliding_bytes, cudaMemcpyHostToDevice, stream_));
  if (graph) {
    const auto key = std::make_tuple(p.T, p.rows, p.max_keys_full, p.max_keys_sliding);
    auto it = graphs_.find(key);
    if (it == graphs_.end()) {
      // One uncaptured run first: cuBLASLt (steps above 8 tokens) chooses and caches its algorithm
      // for each new shape outside the capture, where any setup it does is allowed. The step is
      // recomputed by the graph below; rewriting the same K/V into the same slots is harmless.
      if (p.T > kGemvMaxTokens) run_layers(p);
      cudaGraph_t g = nullptr;
      STRIKER_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
      try {
        run_layers(p);
      } catch (...) {
        cudaStreamEndCapture(stream_, &g);
        if (g) cudaGraphDestroy(g);
        throw;
      }
      STRIKER_CUDA_CHECK(cudaStreamEndCapture(stream_, &g));
      cudaGraphExec_t exec = nullptr;
      const cudaError_t err = cudaGraphInstantiate(&exec, g, 0);
      cudaGraphDestroy(g);
      STRIKER_CUDA_CHECK(err);
      it = graphs_.emplace(key, exec).first;
    }
    STRIKER_CUDA_CHECK(cudaGraphLaunch(it->second, stream_));
  } else {
    run_layers(p);
  }
  return p.rows;
}

float* CudaBackend::logits_device() const { return ws_->logits; }
float* CudaBackend::logits_pinned() const { return ws_->logits_host; }

void CudaBackend::forward(const ForwardBatch& batch, std::vector<float>& logits) {
  const int rows = launch_forward(batch);
  const int64_t V = model_.config.vocab_size;
  STRIKER_CUDA_CHECK(cudaMemcpyAsync(ws_->logits_host, ws_->logits, size_t(rows) * size_t(V) * 4,
                                     cudaMemcpyDeviceToHost, stream_));
  STRIKER_CUDA_CHECK(cudaEventRecord(ev_end_, stream_));
  STRIKER_CUDA_CHECK(cudaStreamSynchronize(stream_));
  STRIKER_CUDA_CHECK(cudaEventElapsedTime(&last_device_ms_, ev_start_, ev_end_));
  logits.assign(ws_->logits_host, ws_->logits_host + size_t(rows) * size_t(V));
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
