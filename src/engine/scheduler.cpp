#include "engine/scheduler.h"

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace striker {

int64_t StepPlan::num_tokens() const {
  int64_t n = 0;
  for (const auto& c : chunks) n += c.count;
  return n;
}

Scheduler::Scheduler(const SchedulerLimits& limits, KvBlockManager& kv) : limits_(limits), kv_(kv) {
  if (limits.max_num_seqs < 1 || limits.max_num_batched_tokens < 1)
    throw std::logic_error("Scheduler: limits must be positive");
}

void Scheduler::add(Sequence* seq) {
  seq->status = SeqStatus::Waiting;
  waiting_.push_back(seq);
}

void Scheduler::remove(Sequence* seq) {
  if (auto it = std::find(running_.begin(), running_.end(), seq); it != running_.end()) running_.erase(it);
  if (auto it = std::find(waiting_.begin(), waiting_.end(), seq); it != waiting_.end()) waiting_.erase(it);
  kv_.release_all(seq->blocks);
  seq->status = SeqStatus::Finished;
}

void Scheduler::preempt(Sequence* seq) {
  // Recompute mode: the KV is dropped and rebuilt later from the tokens, which are kept.
  running_.erase(std::find(running_.begin(), running_.end(), seq));
  kv_.release_all(seq->blocks);
  seq->num_computed = 0;
  seq->draft.clear();
  seq->status = SeqStatus::Waiting;
  waiting_.push_front(seq);
  ++num_preemptions_;
}

int64_t Scheduler::chunk_wanted(const Sequence* seq, int64_t budget, int64_t capped_left) const {
  int64_t want = std::min(seq->num_tokens() - seq->num_computed, budget);
  if (seq->max_chunk > 0) want = std::min({want, seq->max_chunk, capped_left});
  return want;
}

bool Scheduler::waits_for_leader(Sequence* seq) const {
  const Sequence* leader = seq->prefix_leader;
  if (!leader) return false;
  const int64_t B = kv_.layout().block_size;
  const int64_t shareable = (leader->prompt_len - 1) / B * B;
  if (leader->status == SeqStatus::Finished || leader->num_computed >= shareable) {
    seq->prefix_leader = nullptr;  // its blocks are in the cache now (or never will be)
    return false;
  }
  return true;
}

int64_t Scheduler::take_cached_prefix(Sequence* seq) {
  if (!kv_.caching() || seq->num_computed > 0 || seq->skip_cache_read) return 0;
  kv_.hash_blocks(seq->tokens, seq->cache_keys, seq->blocks);
  // The last token is always computed, so its logits exist (vLLM caps the hit the same way).
  const CacheHit hit = kv_.find_cached_prefix(seq->blocks.hashes, seq->num_tokens() - 1);
  kv_.take_cached_prefix(seq->blocks, hit);
  seq->num_computed = hit.tokens;
  return hit.tokens;
}

int64_t Scheduler::reserve(Sequence* seq, int64_t want) {
  kv_.release_out_of_window(seq->blocks, seq->num_computed);
  const int64_t got = kv_.max_chunk_that_fits(seq->blocks, seq->num_computed, want);
  if (got > 0) kv_.allocate_up_to(seq->blocks, seq->num_computed + got);
  return got;
}

StepPlan Scheduler::schedule() {
  // The one invariant: a step moves a sequence's num_computed toward num_tokens, nothing else.
  // A prompt chunk, a recompute after preemption and a decode are all this same catch-up.
  StepPlan plan;
  int64_t budget = limits_.max_num_batched_tokens;
  int64_t capped_left = limits_.max_capped_tokens > 0 ? limits_.max_capped_tokens : std::numeric_limits<int64_t>::max();

  // Running sequences first, oldest first; when blocks run out the newest running one is
  // preempted (possibly the one asking), so the oldest request always makes progress.
  for (size_t i = 0; i < running_.size() && budget > 0; ++i) {
    Sequence* seq = running_[i];
    if (seq->max_chunk > 0 && capped_left == 0) continue;  // its rows wait for the next step
    const int64_t want = chunk_wanted(seq, budget, capped_left);
    if (want <= 0) throw std::logic_error("Scheduler: a running sequence has nothing left to compute");
    int64_t got = reserve(seq, want);
    bool self_preempted = false;
    while (got == 0) {
      Sequence* victim = running_.back();
      preempt(victim);
      plan.preempted.push_back(victim);
      if (victim == seq) {
        self_preempted = true;
        break;
      }
      got = reserve(seq, want);
    }
    if (self_preempted) break;  // seq was the last running sequence
    plan.chunks.push_back({seq, seq->num_computed, got});
    budget -= got;
    if (seq->max_chunk > 0) capped_left -= got;
  }

  // Guesses ride behind a decode's one token with the budget, rows and free blocks every running
  // sequence's own token left (so they never preempt or push out a sequence), oldest first.
  for (ScheduledChunk& c : plan.chunks) {
    Sequence* seq = c.seq;
    int64_t extra = std::min({int64_t(seq->draft.size()), budget, capped_left});
    if (!plan.preempted.empty() || c.count != 1 || c.start + 1 != seq->num_tokens()) extra = 0;
    if (extra > 0) extra = kv_.max_chunk_that_fits(seq->blocks, c.start, 1 + extra) - 1;
    if (extra > 0) kv_.allocate_up_to(seq->blocks, c.start + 1 + extra);
    seq->draft.resize(size_t(std::max<int64_t>(0, extra)));
    c.count += int64_t(seq->draft.size());
    c.drafts = int64_t(seq->draft.size());
    budget -= c.drafts;
    capped_left -= c.drafts;
  }

  // Then waiting sequences in arrival order, unless this step had to preempt (no room). A
  // choice waiting for its leader to compute the shared prompt is passed over, not a blocker.
  for (size_t w = 0; plan.preempted.empty() && budget > 0 && w < waiting_.size() &&
                     int64_t(running_.size()) < limits_.max_num_seqs;) {
    Sequence* seq = waiting_[w];
    if (waits_for_leader(seq)) {
      ++w;
      continue;
    }
    const int64_t hit = take_cached_prefix(seq);
    const int64_t want = chunk_wanted(seq, budget, capped_left);
    const int64_t got = want > 0 ? reserve(seq, want) : 0;
    if (got == 0) {  // FCFS: nothing overtakes the head of the queue (no room, or no capped tokens left)
      kv_.release_all(seq->blocks);
      seq->num_computed = 0;
      break;
    }
    // Counted at a sequence's first admission only: a preempted sequence finding its own
    // blocks again would inflate the hit rate (vLLM counts those apart and exports neither).
    if (kv_.caching() && !seq->skip_cache_read && seq->num_cached_tokens < 0) {
      prefix_cache_queries_ += seq->num_tokens();
      prefix_cache_hits_ += hit;
      seq->num_cached_tokens = hit;
    }
    waiting_.erase(waiting_.begin() + std::ptrdiff_t(w));
    seq->status = SeqStatus::Running;
    auto pos = std::upper_bound(running_.begin(), running_.end(), seq,
                                [](const Sequence* a, const Sequence* b) { return a->id < b->id; });
    running_.insert(pos, seq);
    plan.chunks.push_back({seq, seq->num_computed, got});
    budget -= got;
    if (seq->max_chunk > 0) capped_left -= got;
  }
  for (ScheduledChunk& c : plan.chunks) c.reaches_end = c.start + c.count - c.drafts == c.seq->num_tokens();
  return plan;
}

void Scheduler::mark_computed(const StepPlan& plan) {
  for (const auto& c : plan.chunks) {
    Sequence* seq = c.seq;
    seq->num_computed = c.start + c.count - c.drafts;
    cache_computed(seq);
  }
}

void Scheduler::mark_drafts_computed(Sequence* seq, int64_t accepted) {
  if (accepted <= 0) return;
  if (seq->num_computed + accepted >= seq->num_tokens())
    throw std::logic_error("Scheduler: accepted guesses past the sequence's last token");
  seq->num_computed += accepted;
  cache_computed(seq);
}

void Scheduler::cache_computed(Sequence* seq) {
  if (!kv_.caching()) return;
  // Full blocks just computed join the cache (only now: their KV exists).
  kv_.hash_blocks(seq->tokens, seq->cache_keys, seq->blocks);
  kv_.cache_computed_blocks(seq->tokens, seq->blocks, seq->num_computed);
}

}  // namespace striker
