// Async scheduling (vLLM's --async-scheduling; EngineConfig::async_scheduling). The synchronous
// step plans, launches, waits and reads the tokens back before the next plan, so the device idles
// while the host does its bookkeeping (~35-45 us of a served 100K step on the H200,
// docs/performance.md "Twentieth session"). Here each step() call
//   1. plans and launches step n + 1 while step n (launched by the previous call) still runs, when
//      n + 1 does not need n's results on the host (can_go_ahead): every sequence n draws a token
//      for holds a stand-in for it, and its chunk in n + 1 takes the real token on the backend
//      from n's draws (SequenceChunk::token_from_sample);
//   2. collects step n: its tokens replace the stand-ins and are committed as in a synchronous
//      step (stops, detokenizing, outputs).
// A sequence that step n stops (or that is aborted meanwhile) wastes its chunk of n + 1, whose
// results are skipped; its blocks go back at once (the backend runs steps in launch order, so a
// later step that reuses them writes after the wasted one). Steps that need the host's tokens
// first (guesses, prompt logprobs, rows sent back, a sequence about to reach its length limit)
// run one at a time, as without it. Grammars and penalties go ahead late: n + 1's masks and
// output counts are completed once n is collected, while n + 1's forward pass runs.
// Outputs do not change: a draw depends on (logits, params, seed, choice, step) only.
#include <algorithm>
#include <deque>
#include <stdexcept>
#include <utility>

#include "core/log.h"
#include "engine/engine_core_state.h"

namespace striker {

namespace {

bool has_penalties(const SamplingParams& p) {
  return p.repetition_penalty != 1.0f || p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f;
}

}  // namespace

void EngineCore::step_async() {
  try {
    if (!in_flight_) {
      in_flight_ = launch_scheduled();
      return;  // collected by the next call, after the step that may follow it is launched
    }
    std::optional<LaunchedStep> ahead;
    if (can_go_ahead(*in_flight_)) ahead = launch_ahead(*in_flight_);
    LaunchedStep done = std::move(*in_flight_);
    in_flight_ = std::move(ahead);
    if (!done.collected) collect(done);  // else collected by the ahead launch's mask wait
  } catch (...) {
    drop_in_flight();
    throw;
  }
}

std::optional<EngineCore::LaunchedStep> EngineCore::launch_scheduled() {
  last_plan_ = scheduler_->schedule();
  if (last_plan_.empty()) {
    if (last_plan_.preempted.empty() && !scheduler_->waiting().empty())
      throw std::logic_error("scheduler made no progress with requests waiting");
    return std::nullopt;
  }
  LaunchedStep s;
  s.plan = last_plan_;
  const ForwardBatch batch = build_batch(s);
  start_masks(s.plan);
  build_device_sampling(s);
  launch(batch, s);
  return s;
}

// Whether the step after `s` can be planned and launched before `s`'s tokens are on the host.
bool EngineCore::can_go_ahead(const LaunchedStep& s) const {
  for (size_t i = 0; i < s.plan.chunks.size(); ++i)
    if (s.all_logits[i] || s.plan.chunks[i].drafts > 0) return false;
  // No sequence of the next step may need logits rows back (their host buffers may still hold
  // `s`'s): neither the running ones nor any waiting one the plan could admit (it passes over
  // choices waiting for their leader), and no more sampled logprobs than the backend computes.
  const DeviceLogprobLimits lp_limits = backend_.device_logprobs();
  int64_t with_logprobs = 0;
  auto needs_rows = [&](const Sequence* seq) {
    const Request& r = *static_cast<const Choice*>(seq->owner)->request;
    const SamplingParams& p = r.req.params;
    if (p.logprobs) ++with_logprobs;
    return (p.prompt_logprobs && !r.prompt_logprobs_complete) || (p.logprobs && *p.logprobs > lp_limits.max_top);
  };
  const std::vector<Sequence*>& running = scheduler_->running();
  for (const Sequence* seq : running)
    if (needs_rows(seq)) return false;
  if (running.size() < size_t(config_.max_num_seqs))
    for (const Sequence* seq : scheduler_->waiting())
      if (needs_rows(seq)) return false;
  // A step holds at most max_num_seqs sequences.
  if (std::min<int64_t>(with_logprobs, config_.max_num_seqs) > lp_limits.rows) return false;
  // The sequences `s` draws for must not stop for length on its token (the stand-in's position
  // must exist).
  for (const ScheduledChunk& c : s.plan.chunks) {
    if (!c.samples() || c.seq->status == SeqStatus::Finished) continue;
    const SamplingParams& p = static_cast<const Choice*>(c.seq->owner)->request->req.params;
    if (c.seq->num_output() + 1 >= p.max_tokens || c.seq->num_tokens() + 1 >= config_.max_model_len) return false;
  }
  return true;
}

std::optional<EngineCore::LaunchedStep> EngineCore::launch_ahead(LaunchedStep& s) {
  // `s`'s positions hold KV (or will, before any later step reads them: steps run in order).
  scheduler_->mark_computed(live_chunks(s.plan));
  s.marked = true;
  // Each sequence `s` draws for gets a stand-in for its token, so the scheduler sees one more
  // token to compute; commit_token replaces it with the drawn one.
  int32_t sample = 0;
  for (const ScheduledChunk& c : s.plan.chunks) {
    if (!c.samples()) continue;
    Choice& ch = *static_cast<Choice*>(c.seq->owner);
    if (ch.seq.status != SeqStatus::Finished) {
      ch.seq.tokens.push_back(0);
      ch.pending_token = true;
      ch.pending_sample = sample;
    }
    ++sample;
  }
  last_plan_ = scheduler_->schedule();
  if (last_plan_.empty()) return std::nullopt;
  LaunchedStep next;
  next.plan = last_plan_;
  ForwardBatch batch = build_batch(next);
  for (size_t i = 0; i < next.plan.chunks.size(); ++i) {
    const ScheduledChunk& c = next.plan.chunks[i];
    const Choice& ch = *static_cast<const Choice*>(c.seq->owner);
    if (!ch.pending_token || c.start + c.count != ch.seq.num_tokens()) continue;
    if (c.count != 1) throw std::logic_error("async scheduling: a stand-in token's chunk has other tokens");
    batch.seqs[i].token_from_sample = ch.pending_sample;
  }
  // Grammars: a mask follows every token before it, so the masks of this step are made only once
  // `s` is collected — inside the backend's wait for them, which comes after it has enqueued this
  // step's forward pass (Backend contract), so the device runs that pass meanwhile.
  // Penalties likewise: the output counts of a sequence drawing after a stand-in are completed
  // in the same wait (the backend reads the samples' counts only after it).
  const bool late_masks = size_late_masks(next.plan);
  const bool late_counts = std::any_of(next.plan.chunks.begin(), next.plan.chunks.end(), [](const ScheduledChunk& c) {
    const Choice& ch = *static_cast<const Choice*>(c.seq->owner);
    return c.samples() && ch.pending_token && has_penalties(ch.request->req.params);
  });
  build_device_sampling(next);
  if (!next.ds.return_rows.empty())
    throw std::logic_error("async scheduling: a step launched ahead asks for logits rows back");
  if (late_masks || late_counts)
    next.ds.wait_for_masks = [this, &s, &next] {
      if (!s.collected) collect(s);
      fill_late_masks(next.plan);
      complete_late_counts(next);
    };
  launch(batch, next);
  next.ds.wait_for_masks = nullptr;  // it names this frame's locals
  ++ahead_launches_;
  return next;
}

void EngineCore::launch(const ForwardBatch& batch, LaunchedStep& s) {
  // Counted first: a collect inside the launch's mask wait must see this step as uncollected
  // (the requests it finishes stay alive while this step names them).
  ++uncollected_;
  try {
    backend_.launch_sampled(batch, s.ds);
  } catch (...) {
    --uncollected_;
    throw;
  }
  ++async_steps_;
}

bool EngineCore::size_late_masks(const StepPlan& plan) {
  bool any = false;
  const size_t words = size_t((limits_.vocab_size + 31) / 32);
  for (const ScheduledChunk& c : plan.chunks) {
    Choice& ch = *static_cast<Choice*>(c.seq->owner);
    // A thinking budget's forced end depends on the token `s` draws, as a grammar's mask does; a
    // budget that cannot force after one more token needs no mask (nor the wait for one).
    const bool late = c.samples() && (ch.matcher || (ch.budget && ch.budget->may_force_after_one_token()));
    ch.masked.assign(c.samples() ? 1 : 0, late ? 1 : 0);
    if (!late) continue;
    // Sized here: SampleRequest::allowed points at it before fill_late_masks writes it.
    ch.masks.resize(1);
    ch.masks[0].assign(words, ~0u);
    any = true;
  }
  return any;
}

void EngineCore::complete_late_counts(LaunchedStep& next) const {
  size_t sample = 0;
  for (const ScheduledChunk& c : next.plan.chunks) {
    if (!c.samples()) continue;
    SampleRequest& sr = next.ds.samples[sample++];
    const Choice& ch = *static_cast<const Choice*>(c.seq->owner);
    if (ch.seq.status == SeqStatus::Finished || !has_penalties(ch.request->req.params)) continue;
    // Made again now that the choice's counts hold the token `s` drew (same step, seed, mask).
    SampleRequest fresh = make_sample_request(sample_context(ch));
    fresh.row = sr.row;
    fresh.top_logprobs = sr.top_logprobs;
    fresh.allowed = sr.allowed;
    sr = std::move(fresh);
  }
}

void EngineCore::fill_late_masks(const StepPlan& plan) {
  for (const ScheduledChunk& c : plan.chunks) {
    Choice& ch = *static_cast<Choice*>(c.seq->owner);
    if (!c.samples() || ch.masked.empty() || !ch.masked[0]) continue;  // sized by size_late_masks
    std::vector<uint32_t>& mask = ch.masks[0];
    if (const int32_t forced = ch.budget ? ch.budget->forced_token() : -1;
        forced >= 0 && ch.seq.status != SeqStatus::Finished) {
      fill_forced_mask(mask, forced);
      continue;
    }
    // A grammar not (or no longer) in force draws from everything: an all-ones mask changes no
    // logit, as no mask would not. A sequence stopped by `s` draws a row nobody reads.
    if (ch.seq.status == SeqStatus::Finished || !ch.matcher || !ch.matcher->active()) {
      std::fill(mask.begin(), mask.end(), ~0u);
      continue;
    }
    try {
      ch.matcher->fill_mask(ch.request->grammar_stops, mask);
    } catch (const std::exception& e) {
      ch.mask_error = e.what();  // the request ends at commit; draw from anything meanwhile
      std::fill(mask.begin(), mask.end(), ~0u);
    }
  }
}

void EngineCore::collect(LaunchedStep& s) {
  // Requests retired before this collect were named at most by `s`: they go once it is read.
  std::vector<std::unique_ptr<Request>> named_by_s = std::move(retired_);
  retired_.clear();
  struct JoinMasks {
    std::future<void>& f;
    ~JoinMasks() {
      if (f.valid()) f.wait();
    }
  } join_masks{masks_};
  --uncollected_;  // a collect that throws has consumed the step too (Backend::collect_sampled)
  s.collected = true;
  backend_.collect_sampled(sampled_);
  finish_device_step(s);
  if (uncollected_ == 0) retired_.clear();
}

// After a failure: no step stays in flight, no stand-in stays in a sequence, and the backend holds
// no uncollected step (the caller then aborts the requests).
void EngineCore::drop_in_flight() noexcept {
  if (masks_.valid()) masks_.wait();
  for (auto& [id, r] : requests_)
    for (auto& ch : r->choices)
      if (ch->pending_token) {
        ch->seq.tokens.pop_back();
        ch->pending_token = false;
      }
  in_flight_.reset();
  SampledStep discard;
  for (; uncollected_ > 0; --uncollected_) {
    try {
      backend_.collect_sampled(discard);
    } catch (const std::exception& e) {
      logging::get("engine")->error("discarding a launched step failed: {}", e.what());
    }
  }
  retired_.clear();
}

}  // namespace striker
