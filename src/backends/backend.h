// The contract between the engine and a compute backend (cpu reference, cuda).
// The engine owns scheduling and KV-block bookkeeping (integer block ids only); a backend
// owns the KV memory and runs the Flint forward pass (FLINT.md §4) over a batch of chunks.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "model/weights.h"

namespace striker {

// KV cache geometry chosen by the engine. Full-attention layers and sliding layers have
// separate block pools; every layer of a kind shares the block ids of its pool.
struct KvCacheSpec {
  int32_t block_size = 16;          // tokens per block
  int64_t num_full_blocks = 0;      // pool for full-attention layers
  int64_t num_sliding_blocks = 0;   // pool for sliding layers (window-bounded per sequence)
};

// One sequence's work in a step: tokens at positions start_pos .. start_pos+tokens.size()-1.
// KV for positions < start_pos is already in the cache.
struct SequenceChunk {
  std::vector<int32_t> tokens;
  int64_t start_pos = 0;
  // Logical block i (positions i*B .. i*B+B-1) -> physical block id in the pool.
  std::vector<int32_t> full_block_table;
  // Same for sliding layers; blocks wholly outside every query's window may be -1 (freed).
  std::vector<int32_t> sliding_block_table;
  // Return logits for every token of the chunk (perplexity, prompt_logprobs), or only the last.
  bool all_logits = false;
  // Async scheduling (Backend::launch_sampled): >= 0 when the chunk's one token is not known yet
  // on the host: it is the token the previously launched step draws for its sample of this index
  // (tokens[0] is then a stand-in, never read). -1: tokens are as given.
  int32_t token_from_sample = -1;
};

struct ForwardBatch {
  std::vector<SequenceChunk> seqs;
};

// One token to draw on the device, with everything the CPU sampler would use (engine/sampler.h
// is the reference: the device must pick the same token from the same logits).
struct SampleRequest {
  int32_t row = 0;  // the step's logits row (batch order, as forward() would return them)
  float temperature = 1.0f;  // < 1e-5: greedy
  int32_t top_k = 0;         // <= 0: off
  float top_p = 1.0f;
  float min_p = 0.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  float repetition_penalty = 1.0f;
  uint64_t seed = 0;
  int32_t choice = 0;
  int64_t step = 0;  // index of the output token being sampled
  std::vector<std::pair<int32_t, float>> logit_bias;
  std::vector<std::pair<int32_t, int32_t>> output_counts;  // token -> times generated so far
  std::vector<int32_t> prompt_tokens;  // for the repetition penalty only (empty when it is 1)
  std::vector<int32_t> suppressed;     // ids masked to -inf (stop ids while below min_tokens)
  // Structured outputs: a packed bitset over the vocabulary (bit i of word i/32 set = token i
  // may be drawn; ceil(vocab/32) words), applied first, before every other edit: a cleared
  // bit makes the logit -inf. Null: every token may be drawn. Owned by the engine; valid for
  // the forward_sampled call, but only read after DeviceSampling::wait_for_masks() returns.
  const uint32_t* allowed = nullptr;
  // >= 0: the backend also returns this sample's logprobs (SampledStep::logprobs): the log-softmax
  // of the row's raw logits (before any edit or mask) at the sampled token, and its top_logprobs
  // best tokens. At most Backend::device_logprobs().max_top; -1: none (the engine asks for the
  // row in DeviceSampling::return_rows instead).
  int32_t top_logprobs = -1;
};

// A logits row scored at a given token (prompt logprobs: row k of a chunk scores the prompt's next
// token): its logprob and the row's top_n best come back computed (SampledStep::prompt_logprobs).
struct RowLogprobRequest {
  int32_t row = 0;
  int32_t token = 0;
  int32_t top_n = 0;  // at most Backend::device_logprobs().max_top
};

struct DeviceSampling {
  std::vector<SampleRequest> samples;
  // Rows whose raw logits (before any penalty) come back to the host: prompt logprobs and
  // sampled tokens that asked for logprobs, where the backend does not compute them itself.
  std::vector<int32_t> return_rows;
  // Rows whose logprobs the backend computes (at most Backend::device_logprobs().prompt_rows).
  std::vector<RowLogprobRequest> prompt_logprobs;
  // Grammar masks (SampleRequest::allowed) are computed on the host while the forward pass
  // runs: a backend enqueues the forward first, then calls this (when set, before forward_sampled
  // or launch_sampled returns) and only then reads the masks, so their CPU time hides behind the
  // GPU's. With async scheduling it may collect the previously launched step first
  // (Backend::collect_sampled, from inside the launch): the masks follow that step's tokens, and
  // it may complete `samples` (a penalty's output counts): a backend reads `samples` for its draws
  // only after this returns.
  std::function<void()> wait_for_masks;
};

// Receives a step's logits in blocks: `count` float rows [count, vocab] for the step's rows
// first .. first+count-1 (numbered as forward() orders them), in order. The pointer is valid
// only during the call: copy what is kept.
using LogitsSink = std::function<void(int64_t first, const float* rows, int64_t count)>;

// One sample's logprobs computed where its row is (SampleRequest::top_logprobs), with the values
// of the engine's token_logprob (engine/sampler.h, the reference) up to the order of its sums.
struct SampledLogprobs {
  float logprob = 0;                            // of the sampled (or the given) token
  std::vector<std::pair<int32_t, float>> top;   // best first: higher logit, then lower id
  int64_t rank = 0;  // given tokens only: logits >= the token's (TokenLogprob::rank); 0 for sampled ones
};

struct SampledStep {
  std::vector<int32_t> tokens;  // one per DeviceSampling::samples, same order
  std::vector<float> logits;    // [return_rows.size(), vocab], in return_rows order
  std::vector<SampledLogprobs> logprobs;  // one per sample with top_logprobs >= 0, in sample order
  std::vector<SampledLogprobs> prompt_logprobs;  // one per DeviceSampling::prompt_logprobs, same order
};

// What forward_sampled can compute of a step's logprobs itself: top_n <= max_top, for at most
// `rows` samples and `prompt_rows` scored rows per step (the engine sends other rows back).
struct DeviceLogprobLimits {
  int32_t max_top = -1;  // -1: none
  int32_t rows = 0;
  int32_t prompt_rows = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // Bytes one block takes in each pool (summed over the layers of that kind), so the engine
  // can size the pools from a memory budget.
  virtual int64_t full_block_bytes(int32_t block_size) const = 0;
  virtual int64_t sliding_block_bytes(int32_t block_size) const = 0;
  // (Re)allocates the KV pools; contents are undefined afterwards.
  virtual void allocate_kv_cache(const KvCacheSpec& spec) = 0;
  // Runs one step. `logits` receives float rows [rows, vocab] in batch order: for each
  // sequence, tokens.size() rows when all_logits, else 1 row.
  virtual void forward(const ForwardBatch& batch, std::vector<float>& logits) = 0;
  // forward() for steps with many logits rows (perplexity's all_logits chunks): the same rows,
  // bit for bit, handed to `sink` in blocks of at most max_block_rows, so the host holds one
  // block of [rows, vocab] at a time however many rows the step has (150K-vocab rows are 600 KB).
  virtual void forward_streamed(const ForwardBatch& /*batch*/, int64_t /*max_block_rows*/, const LogitsSink& /*sink*/) {
    throw Error("backend " + name() + " cannot hand logits over in blocks (forward_streamed)");
  }
  // Runs once, after allocate_kv_cache and before serving, the shapes a server's first requests
  // meet (prefill chunks of several sizes over a cached prefix, decode steps of 1-8 sequences), so
  // their one-time costs (lazily loaded kernels, GEMM plans, captured graphs) are not paid inside a
  // request's time to first token, as vLLM's start-up profile run and graph capture do. The pools'
  // contents are undefined afterwards, as after allocate_kv_cache. Default: nothing to warm.
  virtual void warm_up() {}
  // Device sampling: the engine calls forward_sampled instead of forward when this is true, so
  // only the sampled ids (and the rows in return_rows) cross to the host.
  virtual bool samples_on_device() const { return false; }
  virtual DeviceLogprobLimits device_logprobs() const { return {}; }
  virtual void forward_sampled(const ForwardBatch& /*batch*/, const DeviceSampling& /*sampling*/, SampledStep& /*out*/) {
    throw Error("backend " + name() + " cannot sample on the device (samples_on_device() is false)");
  }
  // Async scheduling (vLLM's --async-scheduling): forward_sampled split in two, so the engine can
  // plan and enqueue step n + 1 while step n runs. launch_sampled enqueues a step and returns;
  // collect_sampled waits for the oldest uncollected step and returns what forward_sampled would
  // have. The engine keeps at most two steps uncollected: launch(n), launch(n + 1), collect(n),
  // launch(n + 2), collect(n + 1), ... A step launched while another is uncollected may take its
  // chunks' tokens from that step's draws (SequenceChunk::token_from_sample) and asks for no rows
  // back (DeviceSampling::return_rows empty: the host buffer is the uncollected step's); when it
  // reads its grammar masks (after DeviceSampling::wait_for_masks) the other step has been
  // collected, or reads none. `sampling` need not outlive the launch. A collect that throws has
  // consumed its step all the same.
  virtual bool supports_async_steps() const { return false; }
  virtual void launch_sampled(const ForwardBatch& /*batch*/, const DeviceSampling& /*sampling*/) {
    throw Error("backend " + name() + " cannot run steps asynchronously (supports_async_steps() is false)");
  }
  virtual void collect_sampled(SampledStep& /*out*/) {
    throw Error("backend " + name() + " cannot run steps asynchronously (supports_async_steps() is false)");
  }
};

}  // namespace striker
