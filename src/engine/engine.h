// The engine: request queue, continuous-batching scheduler, KV-block manager, sampler,
// incremental detokenization and stop handling. Knows nothing of CUDA or HTTP.
// CONTRACT header: the server codes against these declarations.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "engine/block_hash.h"
#include "engine/kv_events.h"
#include "engine/ngram_proposer.h"
#include "engine/sampling_params.h"
#include "engine/thinking_budget.h"
#include "tokenizer/tokenizer.h"

namespace striker {

struct EngineConfig {
  int64_t max_model_len = 0;            // 0 = the model's max_position_embeddings
  int32_t max_num_seqs = 256;
  int32_t max_num_batched_tokens = 2048;
  int32_t block_size = 16;
  int64_t kv_cache_bytes = 0;           // budget for both KV pools
  std::vector<int32_t> eos_token_ids;   // from generation_config.json
  uint64_t seed = 0;                    // --seed: base for requests without a seed
  int32_t sampler_threads = 0;          // CPU threads drawing tokens; 0 = min(8, hardware threads)
  // Automatic prefix caching (vLLM's --enable-prefix-caching, on by default): full KV blocks are
  // named by a chained hash of their tokens and reused by later requests with the same prefix.
  bool enable_prefix_caching = true;
  HashAlgo prefix_caching_hash_algo = HashAlgo::Sha256;
  // Root of the hash chain: H(seed) when set (vLLM: PYTHONHASHSEED), else random per process.
  std::optional<std::string> prefix_caching_hash_seed;
  bool enable_kv_events = false;        // record KvEvents for Engine::take_kv_events()
  // N-gram speculation (vLLM's --speculative-config with method "ngram"); off by default.
  SpeculativeConfig speculative;
  // vLLM's --async-scheduling: the next step is planned and launched while the current one runs,
  // its sequences' next tokens taken on the backend from the current step's draws, so the host's
  // bookkeeping hides behind the device's work. Needs a backend that runs steps asynchronously
  // (Backend::supports_async_steps); not with speculation. Outputs are the same as without it.
  bool async_scheduling = false;
  // Where reasoning starts and ends (vLLM's --reasoning-config, or the reasoning parser's
  // delimiters): what a request's thinking_token_budget counts. Unknown: budgets are refused.
  ReasoningDelimiters reasoning;
};

enum class FinishReason { Stop, Length, Abort };

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;  // top-N alternatives, best first
  // vLLM's rank of `token`: how many logits of the row are >= its logit (1 for the best; ties
  // count; 0 for a NaN logit). Served with prompt logprobs; 0 when a backend did not compute it
  // (sampled tokens' logprobs: the OpenAI formats have no rank).
  int64_t rank = 0;
};

// What happened to one choice since the previous callback.
struct ChoiceDelta {
  int32_t index = 0;
  std::vector<int32_t> new_tokens;
  std::string new_text;                 // detokenized, stop strings held back/removed
  std::vector<TokenLogprob> logprobs;   // one per new token when requested
  std::optional<FinishReason> finish;
  std::optional<std::string> stop_reason;  // the stop string, or the stop token id as text
};

// When the engine queued a request and first scheduled any of its tokens (vLLM's queued and
// scheduled timestamps): the server derives vLLM's request phase-time metrics from them.
struct RequestTimes {
  std::chrono::steady_clock::time_point queued{};
  std::chrono::steady_clock::time_point scheduled{};  // the clock's epoch until first scheduled
  bool was_scheduled() const { return scheduled != std::chrono::steady_clock::time_point{}; }
};

struct RequestOutput {
  std::string request_id;
  std::vector<ChoiceDelta> choices;     // only choices that changed
  bool finished = false;                // every choice has finished
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;        // so far, all choices
  int64_t num_cached_tokens = 0;        // prompt tokens whose KV came from the prefix cache
  std::vector<std::optional<TokenLogprob>> prompt_logprobs;  // first output only, when asked
  RequestTimes times;
  // Non-empty when the request was ended by an engine failure (a backend error, an undecodable
  // output) rather than by its client: the server answers 500 with this message.
  std::string error;
};

struct GenerationRequest {
  std::string request_id;
  std::vector<int32_t> prompt;
  SamplingParams params;
  // vLLM's cache_salt: requests share cached blocks only with requests of the same salt.
  std::optional<std::string> cache_salt;
};

// Called on the engine thread; must not block for long.
using OutputCallback = std::function<void(const RequestOutput&)>;

// Prefix caching's counters in tokens (vLLM's vllm:prefix_cache_queries / _hits): prompt tokens
// looked up, and those found cached.
struct EngineStats {
  int64_t num_running = 0;
  int64_t num_waiting = 0;
  double kv_usage = 0;                  // 0..1 of the full-attention pool held by requests (vLLM: cached
                                        // blocks nobody holds count as free)
  int64_t kv_capacity_tokens = 0;
  int64_t max_concurrency = 0;          // max_model_len-sized requests that fit at once
  int64_t num_preemptions = 0;
  int64_t prompt_tokens_total = 0;
  int64_t generation_tokens_total = 0;
  // Prefix cache lookups when a sequence is first scheduled, in tokens (vLLM's counters; the
  // re-lookups of preempted sequences are left out, as in vLLM).
  int64_t prefix_cache_queries = 0;
  int64_t prefix_cache_hits = 0;
  // Speculation (vLLM's vllm:spec_decode_* counters): sequences' steps that checked guesses, the
  // guesses checked, those accepted, and those accepted by position (index i: the (i+1)-th guess
  // of a step). num_speculative_tokens is 0 when speculation is off.
  int32_t num_speculative_tokens = 0;
  int64_t spec_num_drafts = 0;
  int64_t spec_num_draft_tokens = 0;
  int64_t spec_num_accepted_tokens = 0;
  std::vector<int64_t> spec_accepted_per_pos;
  // Async scheduling (EngineConfig::async_scheduling): steps launched, and of those the ones
  // launched before the previous step's tokens were read (0 and 0 when it is off).
  int64_t async_steps = 0;
  int64_t async_ahead_steps = 0;
};

// Share of queried tokens found in the prefix cache between two snapshots (the periodic stats
// line's "Prefix cache hit rate"); 0 when nothing was queried.
inline double prefix_cache_hit_rate(const EngineStats& now, const EngineStats& before = {}) {
  const int64_t q = now.prefix_cache_queries - before.prefix_cache_queries;
  return q > 0 ? double(now.prefix_cache_hits - before.prefix_cache_hits) / double(q) : 0.0;
}

class Engine {
 public:
  virtual ~Engine() = default;
  // Validates (prompt length vs max_model_len, ...) and throws striker::Error with a
  // user-facing message on rejection. The callback fires until an output has finished=true.
  virtual void add_request(GenerationRequest request, OutputCallback on_output) = 0;
  // Frees the request's KV blocks at the next step; the callback then gets finish=Abort.
  virtual void abort_request(const std::string& request_id) = 0;
  virtual EngineStats stats() const = 0;
  // Drops every cached block (POST /reset_prefix_cache). False, nothing dropped, while any
  // request holds blocks (vLLM refuses the same way). True when caching is off.
  virtual bool reset_prefix_cache() = 0;
  // KV events recorded since the last call, oldest first (empty unless enable_kv_events).
  virtual std::vector<KvEvent> take_kv_events() = 0;
  virtual void shutdown() = 0;
};

// Starts the engine loop on its own thread.
std::unique_ptr<Engine> make_engine(const EngineConfig& config, const FlintConfig& model,
                                    std::unique_ptr<Backend> backend, const Tokenizer& tokenizer);

}  // namespace striker
