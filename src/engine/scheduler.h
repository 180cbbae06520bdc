// Continuous batching: each step mixes decodes and chunked prefills under a token budget.
// Knows sequences, token counts and block ids; nothing of CUDA, sampling or text.
#pragma once
#include <cstdint>
#include <deque>
#include <vector>

#include "engine/kv_block_manager.h"
#include "engine/sequence.h"

namespace striker {

struct SchedulerLimits {
  int32_t max_num_seqs = 256;            // running sequences at once
  int32_t max_num_batched_tokens = 2048; // tokens computed per step, all sequences together
  // Tokens per step of the sequences with a max_chunk, all together (their chunks return a logits
  // row per token: prompt logprobs); 0 = no bound. Several such requests at once would otherwise
  // fill a step with rows (each up to its max_chunk) beyond what a backend holds.
  // Speculative guesses (Sequence::draft) also return a row each, so they count against it too;
  // they get what the running sequences' own tokens leave of it, of the budget and of the blocks.
  int32_t max_capped_tokens = 0;
};

// One sequence's share of a step: positions [start, start+count), the last `drafts` of them
// holding the sequence's guessed tokens (Sequence::draft) rather than its own.
struct ScheduledChunk {
  Sequence* seq = nullptr;
  int64_t start = 0;
  int64_t count = 0;
  int64_t drafts = 0;
  // The chunk reaches the end of the sequence, so its last row is sampled (with guesses: each of
  // its last drafts + 1 rows). Set when scheduled: with async scheduling the sequence may hold a
  // stand-in for its next token before this step's results are read.
  bool reaches_end = false;
  bool samples() const { return reaches_end; }
};

struct StepPlan {
  std::vector<ScheduledChunk> chunks;
  std::vector<Sequence*> preempted;      // sent back to waiting this step (KV discarded)
  int64_t num_tokens() const;
  bool empty() const { return chunks.empty(); }
};

class Scheduler {
 public:
  Scheduler(const SchedulerLimits& limits, KvBlockManager& kv);

  void add(Sequence* seq);              // joins the back of the waiting queue
  // Removes a sequence (finished or aborted) and frees its blocks at once.
  void remove(Sequence* seq);
  // Picks this step's chunks and reserves their blocks.
  StepPlan schedule();
  // After the forward pass: the chunks' positions now hold KV (guessed positions excepted).
  void mark_computed(const StepPlan& plan);
  // After a checked guess: its first `accepted` guesses became the sequence's tokens, so their KV
  // (written by the step) counts as computed.
  void mark_drafts_computed(Sequence* seq, int64_t accepted);

  const std::deque<Sequence*>& waiting() const { return waiting_; }
  const std::vector<Sequence*>& running() const { return running_; }
  int64_t num_preemptions() const { return num_preemptions_; }
  // Prefix cache lookups at first admission, in tokens (vLLM's prefix_cache_queries / _hits).
  int64_t prefix_cache_queries() const { return prefix_cache_queries_; }
  int64_t prefix_cache_hits() const { return prefix_cache_hits_; }

 private:
  void preempt(Sequence* seq);
  void cache_computed(Sequence* seq);
  int64_t chunk_wanted(const Sequence* seq, int64_t budget, int64_t capped_left) const;
  int64_t reserve(Sequence* seq, int64_t want);
  bool waits_for_leader(Sequence* seq) const;
  // A sequence that holds no blocks starts from the longest cached prefix of its tokens.
  int64_t take_cached_prefix(Sequence* seq);

  SchedulerLimits limits_;
  KvBlockManager& kv_;
  std::deque<Sequence*> waiting_;        // FCFS; preempted sequences go back to the front
  std::vector<Sequence*> running_;       // in admission order; preemption takes from the back
  int64_t num_preemptions_ = 0;
  int64_t prefix_cache_queries_ = 0;
  int64_t prefix_cache_hits_ = 0;
};

}  // namespace striker
