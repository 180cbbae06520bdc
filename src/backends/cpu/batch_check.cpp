#include "backends/cpu/batch_check.h"

#include <algorithm>
#include <string>

#include "core/error.h"

namespace striker::cpu {

namespace {

// Every block holding a position in [first, last] must be a real block of the pool.
void check_table(const std::vector<int32_t>& table, int64_t first, int64_t last, const KvCache& cache,
                 bool sliding, size_t seq) {
  const std::string what = "sequence " + std::to_string(seq) + ": " + (sliding ? "sliding" : "full") +
                           "_block_table";
  const int64_t bs = cache.block_size();
  if (last / bs >= int64_t(table.size()))
    throw Error("CPU backend: " + what + " has " + std::to_string(table.size()) +
                " entries but position " + std::to_string(last) + " needs " + std::to_string(last / bs + 1));
  std::vector<int32_t> used;
  for (int64_t b = first / bs; b <= last / bs; ++b) {
    const int64_t id = table[size_t(b)];
    if (id < 0 || id >= cache.num_blocks(sliding))
      throw Error("CPU backend: " + what + "[" + std::to_string(b) + "] = " + std::to_string(id) +
                  " is not a block of the pool (" + std::to_string(cache.num_blocks(sliding)) +
                  " blocks) but the step reads or writes it");
    used.push_back(int32_t(id));
  }
  // The step writes every new K/V before attending, so two live logical blocks sharing one
  // physical block (a ring recycled too early) would silently mix positions.
  std::sort(used.begin(), used.end());
  const auto dup = std::adjacent_find(used.begin(), used.end());
  if (dup != used.end())
    throw Error("CPU backend: " + what + " maps two blocks the step needs to the same physical block " +
                std::to_string(*dup));
}

}  // namespace

FlatBatch check_and_flatten(const ForwardBatch& batch, const FlintConfig& config, const KvCache& cache) {
  if (!cache.allocated()) throw Error("CPU backend: forward() called before allocate_kv_cache()");
  const bool has_full = config.num_full_layers() > 0, has_sliding = config.num_sliding_layers() > 0;
  FlatBatch flat;
  for (size_t s = 0; s < batch.seqs.size(); ++s) {
    const SequenceChunk& chunk = batch.seqs[s];
    const std::string seq = "sequence " + std::to_string(s);
    if (chunk.tokens.empty()) throw Error("CPU backend: " + seq + " has no tokens");
    if (chunk.start_pos < 0) throw Error("CPU backend: " + seq + " has a negative start_pos");
    const int64_t last = chunk.start_pos + int64_t(chunk.tokens.size()) - 1;
    if (last >= config.max_position_embeddings)
      throw Error("CPU backend: " + seq + " reaches position " + std::to_string(last) +
                  ", beyond max_position_embeddings " + std::to_string(config.max_position_embeddings));
    for (int32_t id : chunk.tokens)
      if (id < 0 || id >= config.vocab_size)
        throw Error("CPU backend: " + seq + " has token id " + std::to_string(id) + " outside the vocabulary [0, " +
                    std::to_string(config.vocab_size) + ")");
    if (has_full) check_table(chunk.full_block_table, 0, last, cache, false, s);
    if (has_sliding)
      check_table(chunk.sliding_block_table, std::max<int64_t>(0, chunk.start_pos - config.sliding_window + 1),
                  last, cache, true, s);
    for (size_t i = 0; i < chunk.tokens.size(); ++i) {
      if (chunk.all_logits || i + 1 == chunk.tokens.size()) flat.logit_rows.push_back(int64_t(flat.tokens.size()));
      flat.tokens.push_back(chunk.tokens[i]);
      flat.slots.push_back({chunk.start_pos + int64_t(i), &chunk.full_block_table, &chunk.sliding_block_table});
    }
  }
  return flat;
}

}  // namespace striker::cpu
