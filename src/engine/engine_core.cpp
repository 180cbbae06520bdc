#include "engine/engine_core.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <set>
#include <thread>
#include <utility>
#include <stdexcept>

#include "core/error.h"
#include "core/log.h"
#include "core/thread_pool.h"
#include "engine/engine_core_state.h"

namespace striker {

namespace {

// Tokens per step while a prompt's logprobs are collected (x vocab floats of logits).
constexpr int64_t kPromptLogprobsChunk = 256;

std::string num(double v) {
  std::string s = std::to_string(v);
  s.erase(s.find_last_not_of('0') + 1);
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

void check(bool ok, const std::string& message) {
  if (!ok) throw Error(message);
}

// The draw that follows `first`'s once `guesses` were drawn: one step later for each, with them
// in the output counts, and the stop ids suppressed only while still below min_tokens.
SampleRequest after_guesses(const SampleRequest& first, std::span<const int32_t> guesses,
                            const std::vector<int32_t>& suppressed, int32_t min_tokens) {
  SampleRequest r = first;
  for (int32_t t : guesses) {
    auto it = std::lower_bound(r.output_counts.begin(), r.output_counts.end(), std::make_pair(t, 0));
    if (it != r.output_counts.end() && it->first == t) ++it->second;
    else r.output_counts.insert(it, {t, 1});
  }
  r.step += int64_t(guesses.size());
  if (r.step < min_tokens) r.suppressed = suppressed;
  else r.suppressed.clear();
  return r;
}

}  // namespace

void validate_request(const GenerationRequest& req, const RequestLimits& lim) {
  const SamplingParams& p = req.params;
  check(!req.prompt.empty(), "the prompt is empty");
  // The message is built only for a bad id: built for every token it cost ~4 ms per call at 32K tokens.
  for (int32_t t : req.prompt)
    if (t < 0 || t >= lim.vocab_size)
      throw Error("prompt token id " + std::to_string(t) + " is outside the vocabulary (0.." +
                  std::to_string(lim.vocab_size - 1) + ")");
  check(p.n >= 1 && p.n <= lim.max_n, "n must be between 1 and " + std::to_string(lim.max_n) + ", got " + std::to_string(p.n));
  check(p.max_tokens >= 1, "max_tokens must be at least 1, got " + std::to_string(p.max_tokens));
  check(p.min_tokens >= 0 && p.min_tokens <= p.max_tokens,
        "min_tokens must be between 0 and max_tokens (" + std::to_string(p.max_tokens) + "), got " + std::to_string(p.min_tokens));
  const int64_t total = int64_t(req.prompt.size()) + p.max_tokens;
  check(total <= lim.max_model_len,
        "This model's maximum context length is " + std::to_string(lim.max_model_len) + " tokens. However, you requested " +
            std::to_string(total) + " tokens (" + std::to_string(req.prompt.size()) + " in the prompt, " +
            std::to_string(p.max_tokens) + " in the completion). Please reduce the prompt or max_tokens.");
  check(std::isfinite(p.temperature) && p.temperature >= 0, "temperature must be >= 0, got " + num(p.temperature));
  check(p.top_p > 0 && p.top_p <= 1, "top_p must be in (0, 1], got " + num(p.top_p));
  check(p.top_k >= -1, "top_k must be -1 (off), 0 (off) or positive, got " + std::to_string(p.top_k));
  check(p.min_p >= 0 && p.min_p <= 1, "min_p must be in [0, 1], got " + num(p.min_p));
  check(std::isfinite(p.repetition_penalty) && p.repetition_penalty > 0,
        "repetition_penalty must be > 0, got " + num(p.repetition_penalty));
  check(p.presence_penalty >= -2 && p.presence_penalty <= 2, "presence_penalty must be in [-2, 2], got " + num(p.presence_penalty));
  check(p.frequency_penalty >= -2 && p.frequency_penalty <= 2,
        "frequency_penalty must be in [-2, 2], got " + num(p.frequency_penalty));
  for (const auto& [id, bias] : p.logit_bias) {
    if (id < 0 || id >= lim.vocab_size)
      throw Error("logit_bias token id " + std::to_string(id) + " is outside the vocabulary");
    if (!std::isfinite(bias)) throw Error("logit_bias for token " + std::to_string(id) + " is not a finite number");
  }
  for (int32_t id : p.stop_token_ids)
    if (id < 0 || id >= lim.vocab_size)
      throw Error("stop_token_ids entry " + std::to_string(id) + " is outside the vocabulary");
  if (p.logprobs)
    check(*p.logprobs >= 0 && *p.logprobs <= lim.vocab_size, "logprobs must be >= 0, got " + std::to_string(*p.logprobs));
  if (p.prompt_logprobs)
    check(*p.prompt_logprobs >= 0 && *p.prompt_logprobs <= lim.vocab_size,
          "prompt_logprobs must be >= 0, got " + std::to_string(*p.prompt_logprobs));
  if (p.thinking_token_budget) {
    check(*p.thinking_token_budget >= 0,
          "thinking_token_budget must be >= 0, got " + std::to_string(*p.thinking_token_budget));
    check(lim.reasoning != nullptr,
          "thinking_token_budget needs to know where reasoning starts and ends: start the server with "
          "--reasoning-parser or --reasoning-config");
    // Below min_tokens the stop ids (and EOS) are masked out of every draw; a reasoning end token
    // among them could not be drawn when the budget forces it.
    if (p.min_tokens > 0)
      for (int32_t t : lim.reasoning->end) {
        const bool eos = !p.ignore_eos && std::count(lim.eos_token_ids.begin(), lim.eos_token_ids.end(), t);
        if (eos || std::count(p.stop_token_ids.begin(), p.stop_token_ids.end(), t))
          throw Error("thinking_token_budget with min_tokens: token " + std::to_string(t) +
                      " of the reasoning end is a stop token (" + (eos ? "EOS" : "stop_token_ids") +
                      "), which min_tokens masks out, so the forced end could not be drawn");
      }
    // A grammar in force from the first token (no reasoning parser starts it after `</think>`)
    // inside a reasoning section the prompt leaves open would refuse the forced end: refused here
    // rather than failed mid-answer.
    if (p.structured && p.structured->start_after_token < 0 &&
        ThinkingBudget(lim.reasoning, *p.thinking_token_budget, req.prompt).in_reasoning())
      throw Error("thinking_token_budget cannot be combined with a structured output that constrains the reasoning "
                  "itself (the prompt opens a reasoning section and no reasoning parser starts the constraint "
                  "after its end): the forced end would break the constraint");
  }
}

EngineConfig resolve_engine_config(const EngineConfig& in, const FlintConfig& model) {
  EngineConfig c = in;
  if (c.max_model_len == 0) c.max_model_len = model.max_position_embeddings;
  check(c.max_model_len > 0, "max_model_len must be positive, got " + std::to_string(c.max_model_len));
  check(c.max_model_len <= model.max_position_embeddings,
        "max_model_len " + std::to_string(c.max_model_len) + " exceeds the model's max_position_embeddings " +
            std::to_string(model.max_position_embeddings));
  check(c.max_num_seqs >= 1, "max_num_seqs must be at least 1, got " + std::to_string(c.max_num_seqs));
  check(c.max_num_batched_tokens >= c.max_num_seqs,
        "max_num_batched_tokens (" + std::to_string(c.max_num_batched_tokens) + ") must be >= max_num_seqs (" +
            std::to_string(c.max_num_seqs) + ")");
  check(c.block_size >= 1 && c.block_size <= 1024, "block_size must be in 1..1024, got " + std::to_string(c.block_size));
  validate_speculative_config(c.speculative);
  // vLLM too runs n-gram speculation without async scheduling (its async path takes MTP/EAGLE drafts).
  check(!(c.async_scheduling && c.speculative.enabled()),
        "async scheduling does not run with n-gram speculation (--speculative-config): use one or the other");
  if (c.eos_token_ids.empty())
    for (int64_t id : model.eos_token_ids) c.eos_token_ids.push_back(int32_t(id));
  return c;
}

EngineCore::EngineCore(const EngineConfig& config, const FlintConfig& model, Backend& backend, TextStreamFactory text)
    : config_(resolve_engine_config(config, model)), backend_(backend), text_(std::move(text)) {
  limits_.max_model_len = config_.max_model_len;
  limits_.vocab_size = model.vocab_size;
  limits_.max_n = config_.max_num_seqs;
  limits_.eos_token_ids = config_.eos_token_ids;
  if (config_.reasoning.known()) limits_.reasoning = std::make_shared<const ReasoningDelimiters>(config_.reasoning);
  KvBudget budget;
  budget.kv_cache_bytes = config_.kv_cache_bytes;
  budget.full_block_bytes = model.num_full_layers() > 0 ? backend.full_block_bytes(config_.block_size) : 0;
  budget.sliding_block_bytes = model.num_sliding_layers() > 0 ? backend.sliding_block_bytes(config_.block_size) : 0;
  budget.block_size = config_.block_size;
  budget.sliding_window = model.sliding_window;
  budget.max_model_len = config_.max_model_len;
  budget.max_num_seqs = config_.max_num_seqs;
  budget.max_num_batched_tokens = config_.max_num_batched_tokens;
  plan_ = plan_kv_pools(budget);
  KvCacheSpec spec;
  spec.block_size = config_.block_size;
  spec.num_full_blocks = plan_.layout.num_full_blocks;
  spec.num_sliding_blocks = plan_.layout.num_sliding_blocks;
  if (config_.async_scheduling && !backend.supports_async_steps())
    throw Error("async scheduling needs a backend that samples on the device and runs steps asynchronously; backend " +
                backend.name() + " does not (use --device cuda, or leave --async-scheduling off)");
  backend_.allocate_kv_cache(spec);
  backend_.warm_up();
  std::unique_ptr<BlockHasher> hasher;
  if (config_.enable_prefix_caching)
    hasher = std::make_unique<BlockHasher>(config_.prefix_caching_hash_algo, config_.prefix_caching_hash_seed);
  kv_ = std::make_unique<KvBlockManager>(plan_.layout, std::move(hasher), config_.enable_kv_events);
  // Prompt-logprob chunks return a row per token: kPromptLogprobsChunk rows per step, all requests
  // together (a backend sizes its logits for max_num_seqs + 256 rows).
  scheduler_ = std::make_unique<Scheduler>(
      SchedulerLimits{config_.max_num_seqs, config_.max_num_batched_tokens, int32_t(kPromptLogprobsChunk)}, *kv_);
  int threads = config_.sampler_threads;
  if (threads <= 0) threads = int(std::min(8u, std::max(1u, std::thread::hardware_concurrency())));
  if (threads > 1) pool_ = std::make_unique<ThreadPool>(threads);
  scratch_.resize(size_t(std::max(threads, 1)));
  spec_accepted_per_pos_.assign(size_t(config_.speculative.num_speculative_tokens), 0);
}

EngineCore::~EngineCore() { drop_in_flight(); }  // the backend holds no step of ours afterwards

void EngineCore::add_request(GenerationRequest greq, OutputCallback on_output) {
  validate_request(greq, limits_);
  if (requests_.count(greq.request_id)) throw Error("request id '" + greq.request_id + "' is already in use");
  auto rq = std::make_unique<Request>();
  Request& r = *rq;
  r.req = std::move(greq);
  r.on_output = std::move(on_output);
  const SamplingParams& p = r.req.params;
  r.rules = StopRules{config_.eos_token_ids, p.stop_token_ids, p.min_tokens, p.max_tokens, config_.max_model_len, p.ignore_eos};
  r.suppressed = r.rules.suppressed_ids();
  r.grammar_stops = p.stop_token_ids;
  r.grammar_stops.insert(r.grammar_stops.end(), config_.eos_token_ids.begin(), config_.eos_token_ids.end());
  // Requests without a seed still get a reproducible one: --seed base and arrival order.
  r.seed = p.seed ? *p.seed : mix_seed(config_.seed, request_counter_);
  ++request_counter_;
  if (p.prompt_logprobs) {
    r.prompt_logprobs.resize(r.req.prompt.size());
    r.prompt_logprobs_complete = r.req.prompt.size() == 1;
  }
  ExtraKeys cache_keys;
  if (r.req.cache_salt) cache_keys.push_back(*r.req.cache_salt);
  for (int32_t c = 0; c < p.n; ++c) {
    auto ch = std::make_unique<Choice>();
    ch->request = &r;
    ch->seq.id = next_seq_id_++;
    ch->seq.choice = c;
    ch->seq.prompt_len = int64_t(r.req.prompt.size());
    ch->seq.tokens = r.req.prompt;
    ch->seq.owner = ch.get();
    // Prompt logprobs need a logits row per prompt token: smaller chunks bound that memory.
    if (p.prompt_logprobs && !r.prompt_logprobs_complete) ch->seq.max_chunk = kPromptLogprobsChunk;
    // Prompt logprobs need every prompt position computed, so such a request reads no cache
    // (vLLM's rule, for the request's whole life); it still fills the cache for others.
    ch->seq.skip_cache_read = p.prompt_logprobs && !r.prompt_logprobs_complete;
    ch->seq.cache_keys = cache_keys;
    if (c > 0 && !ch->seq.skip_cache_read) ch->seq.prefix_leader = &r.choices.front()->seq;
    ch->penalties = PenaltyState(p, r.req.prompt);
    ch->output =
        std::make_unique<ChoiceOutput>(r.rules, p.stop, text_(p.skip_special_tokens), p.include_stop_str_in_output);
    if (p.structured)
      ch->matcher = std::make_unique<grammar::GrammarMatcher>(p.structured->grammar, p.structured->start_after_token);
    if (p.thinking_token_budget) ch->budget.emplace(limits_.reasoning, *p.thinking_token_budget, r.req.prompt);
    r.choices.push_back(std::move(ch));
  }
  for (auto& ch : r.choices) scheduler_->add(&ch->seq);
  r.times.queued = std::chrono::steady_clock::now();
  prompt_tokens_total_ += int64_t(r.req.prompt.size());
  const std::string id = r.req.request_id;
  requests_.emplace(id, std::move(rq));
}

void EngineCore::abort_request(const std::string& request_id, const std::string& error) {
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return;
  Request& r = *it->second;
  RequestOutput out;
  out.error = error;
  for (auto& ch : r.choices) {
    if (ch->output->finished()) continue;
    scheduler_->remove(&ch->seq);
    ChoiceDelta d;
    d.index = ch->seq.choice;
    ch->output->mark_aborted(d);
    out.choices.push_back(std::move(d));
    ++r.num_finished;
  }
  emit(r, out);
}

void EngineCore::abort_all(const std::string& error) {
  std::vector<std::string> ids;
  for (const auto& [id, r] : requests_) ids.push_back(id);
  for (const auto& id : ids) abort_request(id, error);
}

bool EngineCore::has_work() const { return !requests_.empty() || uncollected_ > 0; }

// The guesses each decoding sequence's step checks (config_.speculative), before the scheduler
// sizes the step's chunks. A guess is only ever a proposal: the tokens that come out are the ones
// the model's rows give, guessed or not (update()).
void EngineCore::propose_drafts() {
  const SpeculativeConfig& sc = config_.speculative;
  const std::vector<Sequence*>& running = scheduler_->running();
  const bool off = !sc.enabled() ||
                   (sc.disable_by_batch_size > 0 && int64_t(running.size()) >= sc.disable_by_batch_size);
  std::vector<std::pair<Sequence*, int32_t>> todo;  // sequence, most guesses
  for (Sequence* seq : running) {
    seq->draft.clear();
    if (off || seq->num_tokens() - seq->num_computed != 1) continue;
    // A step emits at most its guesses + 1 tokens: never past max_tokens or max_model_len.
    const SamplingParams& p = static_cast<const Choice*>(seq->owner)->request->req.params;
    const int64_t room = std::min<int64_t>(p.max_tokens - seq->num_output(), config_.max_model_len - seq->num_tokens()) - 1;
    const int64_t k = std::min<int64_t>(sc.num_speculative_tokens, room);
    if (k > 0) todo.emplace_back(seq, int32_t(k));
  }
  // Each proposal scans its own context (tens of µs at 100K tokens): many run side by side.
  auto propose = [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      auto [seq, k] = todo[size_t(i)];
      seq->draft = propose_ngram(seq->tokens, sc.prompt_lookup_min, sc.prompt_lookup_max, k);
      const Choice& ch = *static_cast<const Choice*>(seq->owner);
      if (ch.budget && !ch.budget->closed()) {
        // A thinking budget: guesses stop before the first that differs from a forced token.
        ThinkingBudget b = *ch.budget;
        size_t fit = 0;
        for (; fit < seq->draft.size(); ++fit) {
          const int32_t forced = b.forced_token();
          if (forced >= 0 && seq->draft[fit] != forced) break;
          b.accept(seq->draft[fit]);
        }
        seq->draft.resize(fit);
      }
      if (!ch.matcher) continue;
      // Structured outputs: guesses stop before the first the grammar rules out (its row could never
      // draw it) and after one that ends the output (nothing follows it).
      grammar::GrammarMatcher m = *ch.matcher;
      size_t fit = 0;
      while (fit < seq->draft.size() && !m.finished() && m.try_accept(seq->draft[fit], ch.request->grammar_stops)) ++fit;
      seq->draft.resize(fit);
    }
  };
  const int64_t n = int64_t(todo.size());
  if (pool_ && n > 1) pool_->parallel_for(n, (n + pool_->size() - 1) / pool_->size(), propose);
  else propose(0, n);
}

void EngineCore::step() {
  if (config_.async_scheduling) return step_async();
  propose_drafts();
  last_plan_ = scheduler_->schedule();
  if (last_plan_.empty()) {
    if (last_plan_.preempted.empty() && !scheduler_->waiting().empty())
      throw std::logic_error("scheduler made no progress with requests waiting");
    return;
  }
  LaunchedStep s;
  s.plan = last_plan_;
  const ForwardBatch batch = build_batch(s);
  start_masks(s.plan);
  // However the step ends (a backend error included), the mask job is done before choices go.
  struct JoinMasks {
    std::future<void>& f;
    ~JoinMasks() {
      if (f.valid()) f.wait();
    }
  } join_masks{masks_};
  if (backend_.samples_on_device()) {
    build_device_sampling(s);
    backend_.forward_sampled(batch, s.ds, sampled_);
    return finish_device_step(s);
  }
  backend_.forward(batch, logits_);
  wait_masks();
  if (int64_t(logits_.size()) != s.rows * limits_.vocab_size)
    throw std::runtime_error("backend " + backend_.name() + " returned " + std::to_string(logits_.size()) +
                             " logits, expected " + std::to_string(s.rows) + " rows of " + std::to_string(limits_.vocab_size));
  scheduler_->mark_computed(s.plan);
  update(s.plan, StepRows{&logits_, nullptr, nullptr, nullptr, nullptr}, s.all_logits);
}

ForwardBatch EngineCore::build_batch(LaunchedStep& s) const {
  const auto now = std::chrono::steady_clock::now();
  ForwardBatch batch;
  s.all_logits.clear();
  s.rows = 0;
  for (const auto& c : s.plan.chunks) {
    const Sequence& q = *c.seq;
    Request& r = *static_cast<Choice*>(q.owner)->request;
    if (!r.times.was_scheduled()) r.times.scheduled = now;  // vLLM's first-scheduled time
    SequenceChunk sc;
    sc.tokens.assign(q.tokens.begin() + c.start, q.tokens.begin() + c.start + c.count - c.drafts);
    sc.tokens.insert(sc.tokens.end(), q.draft.begin(), q.draft.end());
    sc.start_pos = c.start;
    sc.full_block_table = q.blocks.full;
    sc.sliding_block_table = q.blocks.sliding;
    // Prompt logprobs score a row per prompt token; guesses are checked against a row each.
    sc.all_logits =
        (r.req.params.prompt_logprobs && !r.prompt_logprobs_complete && c.start < q.prompt_len - 1) || c.drafts > 0;
    s.rows += sc.all_logits ? c.count : 1;
    s.all_logits.push_back(sc.all_logits);
    batch.seqs.push_back(std::move(sc));
  }
  return batch;
}

// The backend draws the tokens; only rows needed for logprobs come back. The draw is the same
// function of (logits, params, seed, choice, step) as on the host, so outputs do not change.
void EngineCore::build_device_sampling(LaunchedStep& s) const {
  DeviceSampling& ds = s.ds;
  ds = DeviceSampling{};
  // A sampled token's logprobs are computed by the backend where it can (its limits), else from
  // its raw row sent back here. Prompt logprobs likewise: row k of an all_logits chunk scores the
  // prompt's token at start + k + 1 (a chunk's sampled row is never a scored one).
  const DeviceLogprobLimits lp_limits = backend_.device_logprobs();
  s.device_lp_rows = 0;
  int32_t row = 0;
  for (size_t i = 0; i < s.plan.chunks.size(); ++i) {
    const ScheduledChunk& c = s.plan.chunks[i];
    const Choice& ch = *static_cast<Choice*>(c.seq->owner);
    const int32_t nrows = s.all_logits[i] ? int32_t(c.count) : 1;
    if (s.all_logits[i] && c.drafts == 0) {
      const Request& r = *ch.request;
      const int32_t top = *r.req.params.prompt_logprobs;
      const int64_t scored = std::clamp<int64_t>(c.seq->prompt_len - 1 - c.start, 0, nrows);
      for (int32_t k = 0; k < scored; ++k) {
        if (top <= lp_limits.max_top && int64_t(ds.prompt_logprobs.size()) < lp_limits.prompt_rows)
          ds.prompt_logprobs.push_back(RowLogprobRequest{row + k, r.req.prompt[size_t(c.start + k + 1)], top});
        else
          ds.return_rows.push_back(row + k);
      }
    }
    if (c.samples()) {
      // A chunk with guesses draws from each of its last drafts + 1 rows, row j as if the guesses
      // before it had been drawn (update() keeps row j's token only when they were).
      const SampleRequest first = make_sample_request(sample_context(ch));
      for (int64_t j = 0; j <= c.drafts; ++j) {
        SampleRequest& sr = ds.samples.emplace_back(
            j == 0 ? first : after_guesses(first, std::span(c.seq->draft).first(size_t(j)), ch.request->suppressed,
                                             ch.request->req.params.min_tokens));
        sr.allowed = sample_context(ch, size_t(j)).allowed;
        sr.row = row + nrows - 1 - int32_t(c.drafts - j);
        const std::optional<int32_t>& lp = ch.request->req.params.logprobs;
        if (lp) {
          if (*lp <= lp_limits.max_top && s.device_lp_rows < lp_limits.rows) {
            sr.top_logprobs = *lp;
            ++s.device_lp_rows;
          } else {
            ds.return_rows.push_back(sr.row);
          }
        }
      }
    }
    row += nrows;
  }
  // The masks' job runs beside the step; the backend waits for it only before it reads them.
  EngineCore* self = const_cast<EngineCore*>(this);
  ds.wait_for_masks = [self] { self->wait_masks(); };
}

void EngineCore::finish_device_step(LaunchedStep& s) {
  const DeviceSampling& ds = s.ds;
  wait_masks();  // a backend without masks to read may not have called it
  const int64_t V = limits_.vocab_size;
  if (sampled_.tokens.size() != ds.samples.size() || int64_t(sampled_.logits.size()) != int64_t(ds.return_rows.size()) * V ||
      sampled_.logprobs.size() != size_t(s.device_lp_rows) || sampled_.prompt_logprobs.size() != ds.prompt_logprobs.size())
    throw std::runtime_error("backend " + backend_.name() + " returned " + std::to_string(sampled_.tokens.size()) +
                             " tokens, " + std::to_string(sampled_.logits.size()) + " logits, " +
                             std::to_string(sampled_.logprobs.size()) + " and " +
                             std::to_string(sampled_.prompt_logprobs.size()) + " logprobs, expected " +
                             std::to_string(ds.samples.size()) + ", " + std::to_string(ds.return_rows.size()) +
                             " rows of " + std::to_string(V) + ", " + std::to_string(s.device_lp_rows) + " and " +
                             std::to_string(ds.prompt_logprobs.size()));
  auto check_lp = [&](const SampledLogprobs& lp, int32_t n) {
    for (const auto& [id, v] : lp.top)
      if (id < 0 || id >= V)
        throw std::runtime_error("backend " + backend_.name() + " returned logprob token id " + std::to_string(id) +
                                 " outside the vocabulary");
    if (lp.top.size() > size_t(n))
      throw std::runtime_error("backend " + backend_.name() + " returned " + std::to_string(lp.top.size()) +
                               " top logprobs, " + std::to_string(n) + " asked");
  };
  for (size_t i = 0, j = 0; i < ds.samples.size(); ++i)
    if (ds.samples[i].top_logprobs >= 0) check_lp(sampled_.logprobs[j++], ds.samples[i].top_logprobs);
  for (size_t j = 0; j < ds.prompt_logprobs.size(); ++j) check_lp(sampled_.prompt_logprobs[j], ds.prompt_logprobs[j].top_n);
  for (int32_t t : sampled_.tokens)
    if (t < 0 || t >= V)
      throw std::runtime_error("backend " + backend_.name() + " sampled token id " + std::to_string(t) +
                               " outside the vocabulary");
  row_pos_.assign(size_t(s.rows), -1);
  for (size_t j = 0; j < ds.return_rows.size(); ++j) row_pos_[size_t(ds.return_rows[j])] = int64_t(j);
  // Device logprobs by sample: update() numbers draws in sample order.
  device_lp_.assign(ds.samples.size(), nullptr);
  for (size_t i = 0, j = 0; i < ds.samples.size(); ++i)
    if (ds.samples[i].top_logprobs >= 0) device_lp_[i] = &sampled_.logprobs[j++];
  device_prompt_lp_.assign(size_t(s.rows), nullptr);
  for (size_t j = 0; j < ds.prompt_logprobs.size(); ++j)
    device_prompt_lp_[size_t(ds.prompt_logprobs[j].row)] = &sampled_.prompt_logprobs[j];
  if (!s.marked) scheduler_->mark_computed(live_chunks(s.plan));
  s.marked = true;
  update(s.plan, StepRows{&sampled_.logits, &row_pos_, &sampled_.tokens, &device_lp_, &device_prompt_lp_}, s.all_logits);
}

StepPlan EngineCore::live_chunks(const StepPlan& plan) const {
  StepPlan live;
  for (const ScheduledChunk& c : plan.chunks)
    if (c.seq->status != SeqStatus::Finished) live.chunks.push_back(c);
  return live;
}

std::span<const float> EngineCore::StepRows::row(size_t r, size_t V) const {
  const int64_t at = pos ? (*pos)[r] : int64_t(r);
  if (at < 0) throw std::logic_error("engine: logits row " + std::to_string(r) + " was not returned by the backend");
  return {logits->data() + size_t(at) * V, V};
}

EngineCore::Draw EngineCore::draw_at(Choice& ch, const StepRows& rows, size_t row, size_t sample, size_t guesses) const {
  const size_t V = size_t(limits_.vocab_size);
  Draw d{&ch, {}, 0, std::nullopt, false, guesses};
  if (!rows.tokens) {
    d.row = rows.row(row, V);
    return d;
  }
  d.token = (*rows.tokens)[sample];
  d.sampled = true;
  const SampledLogprobs* lp = rows.logprobs ? (*rows.logprobs)[sample] : nullptr;
  if (lp) d.logprob = TokenLogprob{d.token, lp->logprob, lp->top};
  else if (ch.request->req.params.logprobs) d.row = rows.row(row, V);
  return d;
}

void EngineCore::update(const StepPlan& plan, const StepRows& rows, const std::vector<bool>& all_logits) {
  const size_t V = size_t(limits_.vocab_size);
  std::vector<Draw> draws;
  // A chunk with guesses: where its rows after the first sampled one are, and the guesses.
  struct Checked {
    Choice* choice;
    size_t row;     // the row that follows the first guess
    size_t sample;  // its sample index (device sampling)
    std::vector<int32_t> draft;
  };
  std::vector<Checked> checks;
  size_t row = 0, sample = 0;
  for (size_t i = 0; i < plan.chunks.size(); ++i) {
    const ScheduledChunk& c = plan.chunks[i];
    Choice& ch = *static_cast<Choice*>(c.seq->owner);
    Request& r = *ch.request;
    const size_t nrows = all_logits[i] ? size_t(c.count) : 1;
    if (ch.seq.status == SeqStatus::Finished) {  // async: aborted or stopped since it was launched
      if (c.samples()) sample += 1 + size_t(c.drafts);
      row += nrows;
      continue;
    }
    if (all_logits[i] && c.drafts == 0) {
      // Row k scores the token at position start+k+1; the rows are spread over the pool (each one
      // whole on its thread: token_logprob's bits do not depend on where it runs).
      const int64_t scored = std::clamp<int64_t>(ch.seq.prompt_len - 1 - c.start, 0, int64_t(nrows));
      auto score = [&](int64_t b, int64_t e) {
        for (int64_t k = b; k < e; ++k) {
          const int64_t pos = c.start + k + 1;
          const int32_t token = r.req.prompt[size_t(pos)];
          const SampledLogprobs* lp = rows.prompt_logprobs ? (*rows.prompt_logprobs)[row + size_t(k)] : nullptr;
          r.prompt_logprobs[size_t(pos)] =
              lp ? TokenLogprob{token, lp->logprob, lp->top, lp->rank}
                 : token_logprob(rows.row(row + size_t(k), V), token, *r.req.params.prompt_logprobs);
        }
      };
      if (pool_ && scored > 1) pool_->parallel_for(scored, (scored + pool_->size() - 1) / pool_->size(), score);
      else score(0, scored);
      if (c.start + c.count >= ch.seq.prompt_len - 1) {
        r.prompt_logprobs_complete = true;
        for (auto& other : r.choices) other->seq.max_chunk = 0;
      }
    }
    if (c.samples()) {
      const size_t first = row + nrows - 1 - size_t(c.drafts);
      draws.push_back(draw_at(ch, rows, first, sample, 0));
      if (c.drafts > 0) checks.push_back(Checked{&ch, first + 1, sample + 1, ch.seq.draft});
      sample += 1 + size_t(c.drafts);
    }
    row += nrows;
  }
  draw_tokens(draws);

  std::vector<std::pair<Request*, RequestOutput>> outs;
  auto output_for = [&](Request* r) -> RequestOutput& {
    for (auto& [req, out] : outs)
      if (req == r) return out;
    return outs.emplace_back(r, RequestOutput{}).second;
  };
  std::map<std::string, std::string> failed;  // request id -> why
  auto commit = [&](Draw& d) {
    Request& r = *d.choice->request;
    if (failed.count(r.req.request_id)) return false;
    try {
      commit_token(d, output_for(&r));
      return true;
    } catch (const std::exception& e) {
      // One request's failure (e.g. its text cannot be decoded) ends that request only.
      logging::get("engine")->error("request {} failed, aborting it: {}", r.req.request_id, e.what());
      failed.emplace(r.req.request_id, e.what());
      return false;
    }
  };
  for (Draw& d : draws) commit(d);
  // Guesses, in order: while the token drawn from a row equals the guess that row's successor was
  // computed after, that successor's row is valid and its token is drawn too (so the output is
  // the tokens the model would give one step at a time).
  for (Checked& k : checks) {
    Choice& ch = *k.choice;
    int64_t accepted = 0;
    bool live = !failed.count(ch.request->req.request_id);
    for (size_t j = 0; live && j < k.draft.size() && ch.seq.tokens.back() == k.draft[j]; ++j) {
      ++accepted;
      if (ch.output->finished()) break;
      std::vector<Draw> one{draw_at(ch, rows, k.row + j, k.sample + j, j + 1)};
      draw_tokens(one);
      live = commit(one.front());
    }
    if (live && !ch.output->finished()) scheduler_->mark_drafts_computed(&ch.seq, accepted);
    ++spec_num_drafts_;
    spec_num_draft_tokens_ += int64_t(k.draft.size());
    spec_num_accepted_tokens_ += accepted;
    for (int64_t j = 0; j < accepted; ++j) ++spec_accepted_per_pos_[size_t(j)];
  }
  for (auto& [r, out] : outs) emit(*r, out);
  for (const auto& [id, why] : failed) abort_request(id, why);
}

SampleContext EngineCore::sample_context(const Choice& ch, size_t guesses) const {
  const Request& r = *ch.request;
  const SamplingParams& p = r.req.params;
  const int64_t step = ch.seq.num_output();
  SampleContext ctx;
  ctx.params = &p;
  ctx.penalties = &ch.penalties;
  if (step < p.min_tokens) ctx.suppressed = r.suppressed;
  ctx.seed = r.seed;
  ctx.choice = ch.seq.choice;
  ctx.step = step;
  if (guesses < ch.masked.size() && ch.masked[guesses]) ctx.allowed = ch.masks[guesses].data();
  return ctx;
}

// Grammar masks for this step's draws, on a worker thread while the backend runs the forward
// pass (the host would otherwise wait on the GPU). Each mask depends only on its choice's
// matcher, which nothing touches until the step's tokens are committed.
void EngineCore::start_masks(const StepPlan& plan) {
  const size_t words = size_t((limits_.vocab_size + 31) / 32);
  struct Job {
    Choice* ch;
    size_t row;
    grammar::GrammarMatcher state;  // the choice's grammar after the row's guesses
  };
  std::vector<Job> todo;
  for (const auto& c : plan.chunks) {
    Choice& ch = *static_cast<Choice*>(c.seq->owner);
    ch.masked.assign(c.samples() ? size_t(1 + c.drafts) : 0, 0);
    if (!c.samples() || !may_mask(ch)) continue;
    ch.masks.resize(ch.masked.size());
    std::optional<grammar::GrammarMatcher> state;
    if (ch.matcher) state = *ch.matcher;
    std::optional<ThinkingBudget> budget = ch.budget;
    for (size_t j = 0; j < ch.masked.size(); ++j) {
      // propose_drafts kept only guesses the grammar and the budget take, so the copies follow them.
      if (j > 0) {
        if (state) state->accept(c.seq->draft[j - 1], ch.request->grammar_stops);
        if (budget) budget->accept(c.seq->draft[j - 1]);
      }
      // A forced reasoning end wins over the grammar, which waits for that end anyway (it starts
      // after `</think>`).
      if (const int32_t forced = budget ? budget->forced_token() : -1; forced >= 0) {
        ch.masked[j] = 1;
        ch.masks[j].resize(words);
        fill_forced_mask(ch.masks[j], forced);
        continue;
      }
      if (!state || !state->active()) continue;
      ch.masked[j] = 1;
      // Sized here, on the engine thread: SampleRequest::allowed points at it before it is filled.
      ch.masks[j].resize(words);
      todo.push_back(Job{&ch, j, *state});
    }
  }
  if (todo.empty()) return;
  masks_ = std::async(std::launch::async, [todo = std::move(todo)] {
    for (const Job& job : todo) {
      Choice* ch = job.ch;
      std::vector<uint32_t>& mask = ch->masks[job.row];
      try {
        job.state.fill_mask(ch->request->grammar_stops, mask);
      } catch (const std::exception& e) {
        ch->mask_error = e.what();  // the request ends at commit; draw from anything meanwhile
        std::fill(mask.begin(), mask.end(), ~0u);
      }
    }
  });
}

void EngineCore::wait_masks() {
  if (masks_.valid()) masks_.get();
}

void EngineCore::draw_tokens(std::vector<Draw>& draws) {
  // Sampling reads only its own row and choice state, so rows are drawn in parallel; the
  // result cannot depend on the split (each draw is a pure function of row, params, seed, step).
  ThreadPool* row_pool = nullptr;
  auto draw_range = [&](int64_t begin, int64_t end, std::vector<float>& scratch) {
    for (int64_t i = begin; i < end; ++i) {
      Draw& d = draws[size_t(i)];
      const SamplingParams& p = d.choice->request->req.params;
      if (!d.sampled) d.token = sample_token(d.row, sample_context(*d.choice, d.guesses), scratch);
      if (p.logprobs && !d.logprob) d.logprob = token_logprob(d.row, d.token, *p.logprobs, row_pool);
    }
  };
  const int64_t n = int64_t(draws.size());
  // Few draws run here, each logprob row spread over the pool; more run side by side on it.
  if (n < 4 || !pool_) {
    row_pool = pool_.get();
    return draw_range(0, n, scratch_[0]);
  }
  const int64_t grain = (n + pool_->size() - 1) / pool_->size();
  pool_->parallel_for(n, grain, [&](int64_t b, int64_t e) { draw_range(b, e, scratch_[size_t(b / grain)]); });
}

void EngineCore::commit_token(Draw& d, RequestOutput& out) {
  Choice& ch = *d.choice;
  Request& r = *ch.request;
  Sequence& s = ch.seq;
  if (!ch.mask_error.empty()) throw Error(std::exchange(ch.mask_error, {}));
  if (ch.matcher) ch.matcher->accept(d.token, r.grammar_stops);
  if (ch.budget) ch.budget->accept(d.token);
  // Async scheduling: the next step already runs on a stand-in for this token (launch_ahead).
  if (ch.pending_token) s.tokens.back() = d.token;
  else s.tokens.push_back(d.token);
  ch.pending_token = false;
  ch.penalties.add_output(d.token);
  ++generation_tokens_total_;
  // A step with accepted guesses commits several tokens of a choice: they share its delta.
  auto it = std::find_if(out.choices.begin(), out.choices.end(), [&](const ChoiceDelta& c) { return c.index == s.choice; });
  ChoiceDelta& delta = it != out.choices.end() ? *it : out.choices.emplace_back();
  delta.index = s.choice;
  if (d.logprob) delta.logprobs.push_back(std::move(*d.logprob));
  ch.output->on_token(d.token, s.num_output(), s.num_tokens(), delta);
  if (ch.output->finished()) {
    scheduler_->remove(&s);
    ++r.num_finished;
  }
}

void EngineCore::emit(Request& r, RequestOutput& out) {
  out.request_id = r.req.request_id;
  out.prompt_tokens = int64_t(r.req.prompt.size());
  out.num_cached_tokens = std::max<int64_t>(0, r.choices.front()->seq.num_cached_tokens);
  for (const auto& ch : r.choices) out.completion_tokens += ch->seq.num_output();
  out.finished = r.num_finished == int32_t(r.choices.size());
  out.times = r.times;
  if (r.req.params.prompt_logprobs && r.prompt_logprobs_complete && !r.prompt_logprobs_sent) {
    out.prompt_logprobs = r.prompt_logprobs;
    r.prompt_logprobs_sent = true;
  }
  if (r.on_output) {
    try {
      r.on_output(out);
    } catch (const std::exception& e) {
      // A consumer's failure must not take the engine down; the request still completes.
      logging::get("engine")->error("output callback for request {} threw: {}", r.req.request_id, e.what());
    }
  }
  if (out.finished) {
    auto it = requests_.find(r.req.request_id);
    // A launched, uncollected step may still name its sequences (async scheduling): kept until
    // that step is collected.
    if (uncollected_ > 0) retired_.push_back(std::move(it->second));
    requests_.erase(it);  // destroys r unless retired
  }
}

EngineStats EngineCore::stats() const {
  EngineStats s;
  s.num_running = int64_t(scheduler_->running().size());
  s.num_waiting = int64_t(scheduler_->waiting().size());
  const BlockPool& pool = plan_.layout.use_full ? kv_->full_pool() : kv_->sliding_pool();
  s.kv_usage = pool.num_total() ? double(pool.num_used()) / double(pool.num_total()) : 0.0;
  s.kv_capacity_tokens = plan_.capacity_tokens;
  s.max_concurrency = plan_.max_concurrency;
  s.num_preemptions = scheduler_->num_preemptions();
  s.prompt_tokens_total = prompt_tokens_total_;
  s.generation_tokens_total = generation_tokens_total_;
  s.prefix_cache_queries = scheduler_->prefix_cache_queries();
  s.prefix_cache_hits = scheduler_->prefix_cache_hits();
  s.num_speculative_tokens = config_.speculative.num_speculative_tokens;
  s.spec_num_drafts = spec_num_drafts_;
  s.spec_num_draft_tokens = spec_num_draft_tokens_;
  s.spec_num_accepted_tokens = spec_num_accepted_tokens_;
  s.spec_accepted_per_pos = spec_accepted_per_pos_;
  s.async_steps = async_steps_;
  s.async_ahead_steps = ahead_launches_;
  return s;
}

bool EngineCore::reset_prefix_cache() { return kv_->reset_prefix_cache(); }

}  // namespace striker
