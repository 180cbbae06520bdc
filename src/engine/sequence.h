// One choice of one request: its tokens, how far its KV is computed, and its blocks.
#pragma once
#include <cstdint>
#include <vector>

#include "engine/kv_block_manager.h"

namespace striker {

enum class SeqStatus { Waiting, Running, Finished };

struct Sequence {
  int64_t id = 0;                 // engine-wide, increasing in arrival order (FCFS key)
  int32_t choice = 0;             // index among the request's n choices
  int64_t prompt_len = 0;
  std::vector<int32_t> tokens;    // prompt followed by the sampled output
  int64_t num_computed = 0;       // positions whose KV is in the cache
  SeqStatus status = SeqStatus::Waiting;
  SeqBlockTables blocks;
  int64_t max_chunk = 0;          // cap on tokens per step (0 = none); bounds all-logits rows
  // Speculation: guessed tokens after the last one, checked by this step's forward pass (set by
  // the engine before scheduling, only while exactly the last token waits to be computed; the
  // scheduler may shorten it). Their positions are computed but not yet the sequence's tokens.
  std::vector<int32_t> draft;
  void* owner = nullptr;          // the engine's per-request state; opaque to the scheduler

  // Prefix caching. Block hashes (in `blocks`) depend on the tokens and these keys only.
  ExtraKeys cache_keys;           // e.g. the request's cache_salt
  bool skip_cache_read = false;   // prompt logprobs need every prompt position computed
  // n > 1: a later choice waits until the first one computed the prompt's shareable blocks,
  // then takes them from the cache instead of computing them again. Cleared once satisfied.
  const Sequence* prefix_leader = nullptr;
  int64_t num_cached_tokens = -1; // prompt tokens found in the cache at first admission (-1: not yet)

  int64_t num_tokens() const { return int64_t(tokens.size()); }
  int64_t num_output() const { return num_tokens() - prompt_len; }
};

}  // namespace striker
