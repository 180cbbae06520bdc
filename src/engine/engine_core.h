// The synchronous engine: one step = schedule, forward, update. No threads here; the
// threaded Engine (engine.cpp) drives it, and tests drive it step by step.
#pragma once
#include <cstdint>
#include <future>
#include <map>
#include <optional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/choice_output.h"
#include "engine/engine.h"
#include "engine/kv_block_manager.h"
#include "engine/sampler.h"
#include "engine/scheduler.h"

namespace striker {

class ThreadPool;

// Limits every request is checked against before it is queued.
struct RequestLimits {
  int64_t max_model_len = 0;
  int64_t vocab_size = 0;
  int32_t max_n = 256;
  // EngineConfig::reasoning when it is known (thinking budgets can run), else null.
  std::shared_ptr<const ReasoningDelimiters> reasoning;
  std::vector<int32_t> eos_token_ids;  // masked out below a request's min_tokens unless it ignores EOS
};
// Throws striker::Error with a user-facing one-line message when the request cannot run.
void validate_request(const GenerationRequest& req, const RequestLimits& limits);

// EngineConfig with the defaults resolved against the model, checked; throws on bad values.
EngineConfig resolve_engine_config(const EngineConfig& config, const FlintConfig& model);

class EngineCore {
 public:
  // `backend` must outlive the core. The KV pools are sized and allocated here.
  EngineCore(const EngineConfig& config, const FlintConfig& model, Backend& backend, TextStreamFactory text);
  ~EngineCore();

  const RequestLimits& limits() const { return limits_; }
  // Queues a validated request (validate_request is called again here).
  void add_request(GenerationRequest req, OutputCallback on_output);
  // Finishes every unfinished choice with Abort and frees its blocks; unknown ids are ignored.
  // `error` non-empty: the request ends because of an engine failure (RequestOutput::error).
  void abort_request(const std::string& request_id, const std::string& error = {});
  void abort_all(const std::string& error = {});
  bool has_work() const;
  void step();
  EngineStats stats() const;
  bool reset_prefix_cache();
  std::vector<KvEvent> take_kv_events() { return kv_->take_events(); }

  // Read-only views for tests and benches.
  const Scheduler& scheduler() const { return *scheduler_; }
  const KvBlockManager& kv() const { return *kv_; }
  const KvPoolPlan& kv_plan() const { return plan_; }
  const StepPlan& last_plan() const { return last_plan_; }

  // Opaque outside the engine (engine_core_state.h); public so its helpers there can name them.
  struct Request;
  struct Choice;

 private:
  // A step's logits rows as update() reads them: all rows (pos null) or, after device
  // sampling, only the returned ones (pos maps a step row to its index, -1 = not returned),
  // with the tokens the device drew (one per sampling chunk, batch order).
  struct StepRows {
    const std::vector<float>* logits;
    const std::vector<int64_t>* pos;
    const std::vector<int32_t>* tokens;
    const std::vector<const SampledLogprobs*>* logprobs;  // by draw: computed by the backend, or null
    const std::vector<const SampledLogprobs*>* prompt_logprobs;  // by step row: computed by the backend, or null
    std::span<const float> row(size_t r, size_t vocab) const;
  };
  void update(const StepPlan& plan, const StepRows& rows, const std::vector<bool>& all_logits);
  // A step handed to a device-sampling backend: what reading its results back needs.
  struct LaunchedStep {
    StepPlan plan;
    std::vector<bool> all_logits;  // per chunk: a logits row per token
    int64_t rows = 0;
    DeviceSampling ds;
    int32_t device_lp_rows = 0;    // samples whose logprobs the backend computes
    bool marked = false;           // scheduler_->mark_computed(plan) already done (async: before the next plan)
    bool collected = false;        // async: its results were read (perhaps inside the next launch's mask wait)
  };
  // The step's chunks as the backend reads them (and each request's first-scheduled time).
  ForwardBatch build_batch(LaunchedStep& s) const;
  // What the backend draws and computes of logprobs, or sends back as rows (needs the masks' sizes:
  // start_masks first).
  void build_device_sampling(LaunchedStep& s) const;
  // The backend's results in sampled_: checked, mapped to the step's rows, then update().
  void finish_device_step(LaunchedStep& s);
  // Async scheduling (engine_core_async.cpp): one step may run on the backend while the host
  // plans and launches the next. step_async() collects the step launched by the previous call,
  // after launching the next one when that one can go ahead without its results.
  void step_async();
  std::optional<LaunchedStep> launch_scheduled();
  bool can_go_ahead(const LaunchedStep& s) const;
  std::optional<LaunchedStep> launch_ahead(LaunchedStep& s);
  void collect(LaunchedStep& s);
  void launch(const ForwardBatch& batch, LaunchedStep& s);
  // Late masks (a step launched ahead with grammars): sized before the launch, made after the
  // previous step is collected. size_late_masks says whether the plan has any.
  bool size_late_masks(const StepPlan& plan);
  void fill_late_masks(const StepPlan& plan);
  // Late counts (a step launched ahead with penalties): the samples of sequences drawing after a
  // stand-in made again once the previous step is collected.
  void complete_late_counts(LaunchedStep& next) const;
  void drop_in_flight() noexcept;
  // The draw of a choice's row after `guesses` of this step's guesses (its mask; the rest is the
  // choice's state as it stands).
  SampleContext sample_context(const Choice& ch, size_t guesses = 0) const;
  void start_masks(const StepPlan& plan);
  void wait_masks();
  // One token to draw: filled in parallel, then committed in batch order.
  struct Draw {
    Choice* choice;
    std::span<const float> row;  // empty when the device sampled and no logprobs are wanted
    int32_t token;
    std::optional<TokenLogprob> logprob;
    bool sampled;  // token already drawn by the backend
    size_t guesses;  // the row follows this many of the step's guesses (0: the first drawn row)
  };
  void draw_tokens(std::vector<Draw>& draws);
  // The draw of step row `row` (device sampling: sample index `sample`), not yet drawn on the host.
  Draw draw_at(Choice& ch, const StepRows& rows, size_t row, size_t sample, size_t guesses) const;
  void propose_drafts();
  void commit_token(Draw& d, RequestOutput& out);
  void emit(Request& req, RequestOutput& out);
  // The chunks of `plan` whose sequences have not finished since it was scheduled (async: aborted, or
  // stopped by the step before).
  StepPlan live_chunks(const StepPlan& plan) const;

  EngineConfig config_;
  RequestLimits limits_;
  Backend& backend_;
  TextStreamFactory text_;
  KvPoolPlan plan_;
  std::unique_ptr<KvBlockManager> kv_;
  std::unique_ptr<Scheduler> scheduler_;
  std::map<std::string, std::unique_ptr<Request>> requests_;
  StepPlan last_plan_;
  std::vector<float> logits_;
  SampledStep sampled_;          // device sampling: tokens and returned rows of the last step
  std::vector<int64_t> row_pos_;
  std::vector<const SampledLogprobs*> device_lp_;  // sample -> its entry of sampled_.logprobs (or null)
  std::vector<const SampledLogprobs*> device_prompt_lp_;  // step row -> its entry of sampled_.prompt_logprobs  // step row -> index in sampled_.logits (-1 = not returned)
  std::future<void> masks_;                 // this step's grammar masks, while the forward runs
  std::unique_ptr<ThreadPool> pool_;        // parallel sampling; null with one thread
  std::vector<std::vector<float>> scratch_;  // one logits buffer per sampling thread
  int64_t next_seq_id_ = 0;
  uint64_t request_counter_ = 0;
  int64_t prompt_tokens_total_ = 0;
  int64_t generation_tokens_total_ = 0;
  int64_t spec_num_drafts_ = 0;
  int64_t spec_num_draft_tokens_ = 0;
  int64_t spec_num_accepted_tokens_ = 0;
  std::vector<int64_t> spec_accepted_per_pos_;  // num_speculative_tokens entries
  // Async scheduling state: the step launched by the previous step() call, not yet collected;
  // how many steps the backend holds uncollected; finished requests kept alive while a launched
  // step still names their sequences.
  std::optional<LaunchedStep> in_flight_;
  int uncollected_ = 0;
  std::vector<std::unique_ptr<Request>> retired_;
  int64_t ahead_launches_ = 0;  // EngineStats::async_ahead_steps
  int64_t async_steps_ = 0;     // EngineStats::async_steps
};

// make_engine with a custom token-to-text stream (tests; make_engine uses the tokenizer's).
std::unique_ptr<Engine> make_engine_with_text(const EngineConfig& config, const FlintConfig& model,
                                              std::unique_ptr<Backend> backend, TextStreamFactory text);

}  // namespace striker
