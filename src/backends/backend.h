// The contract between the engine and a compute backend (cpu reference, cuda).
// The engine owns scheduling and KV-block bookkeeping (integer block ids only); a backend
// owns the KV memory and runs the Flint forward pass (FLINT.md §4) over a batch of chunks.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

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
};

struct ForwardBatch {
  std::vector<SequenceChunk> seqs;
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
};

}  // namespace striker
