// The engine: request queue, continuous-batching scheduler, KV-block manager, sampler,
// incremental detokenization and stop handling. Knows nothing of CUDA or HTTP.
// CONTRACT header: the server codes against these declarations.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "engine/sampling_params.h"
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
};

enum class FinishReason { Stop, Length, Abort };

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;  // top-N alternatives, best first
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

struct RequestOutput {
  std::string request_id;
  std::vector<ChoiceDelta> choices;     // only choices that changed
  bool finished = false;                // every choice has finished
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;        // so far, all choices
  std::vector<std::optional<TokenLogprob>> prompt_logprobs;  // first output only, when asked
  // Non-empty when the request was ended by an engine failure (a backend error, an undecodable
  // output) rather than by its client: the server answers 500 with this message.
  std::string error;
};

struct GenerationRequest {
  std::string request_id;
  std::vector<int32_t> prompt;
  SamplingParams params;
};

// Called on the engine thread; must not block for long.
using OutputCallback = std::function<void(const RequestOutput&)>;

// Prefix caching's counters in tokens (vLLM's vllm:prefix_cache_queries / _hits): prompt tokens
// looked up, and those found cached.
struct PrefixCacheCounters {
  int64_t queries = 0;
  int64_t hits = 0;
};

struct EngineStats {
  int64_t num_running = 0;
  int64_t num_waiting = 0;
  double kv_usage = 0;                  // 0..1 of the full-attention pool
  int64_t kv_capacity_tokens = 0;
  int64_t max_concurrency = 0;          // max_model_len-sized requests that fit at once
  int64_t num_preemptions = 0;
  int64_t prompt_tokens_total = 0;
  int64_t generation_tokens_total = 0;
  // Empty while the engine has no prefix cache; the stats line shows the hit rate once it is set.
  std::optional<PrefixCacheCounters> prefix_cache;
};

class Engine {
 public:
  virtual ~Engine() = default;
  // Validates (prompt length vs max_model_len, ...) and throws striker::Error with a
  // user-facing message on rejection. The callback fires until an output has finished=true.
  virtual void add_request(GenerationRequest request, OutputCallback on_output) = 0;
  // Frees the request's KV blocks at the next step; the callback then gets finish=Abort.
  virtual void abort_request(const std::string& request_id) = 0;
  virtual EngineStats stats() const = 0;
  virtual void shutdown() = 0;
};

// Starts the engine loop on its own thread.
std::unique_ptr<Engine> make_engine(const EngineConfig& config, const FlintConfig& model,
                                    std::unique_ptr<Backend> backend, const Tokenizer& tokenizer);

}  // namespace striker
