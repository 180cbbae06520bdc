// CudaBackend::plan: one step's host metadata (tokens, positions, block tables, KV slots, logit
// rows, prefill tiles), validated and packed into the pinned buffer for a single upload.
#include <algorithm>
#include <cstring>
#include <string>
#include <type_traits>

#include "backends/cuda/attention/attention.h"
#include "backends/cuda/backend/cuda_backend.h"
#include "backends/cuda/backend/cuda_backend_state.h"

namespace striker::cuda {

void CudaBackend::plan(const ForwardBatch& batch, StepPlan& p) const {
  const FlintConfig& c = model_.config;
  const int B = kv_spec_.block_size;
  if (k_cache_.empty()) throw Error("CUDA backend: forward() called before allocate_kv_cache()");
  const bool has_full = c.num_full_layers() > 0, has_sliding = c.num_sliding_layers() > 0;
  const int64_t W = c.sliding_window;
  std::vector<int32_t> tokens, positions, off_full, off_sliding, tables_full, tables_sliding, rows, tiles, tiled, rest,
      take;
  std::vector<int64_t> slots_full, slots_sliding;
  for (size_t s = 0; s < batch.seqs.size(); ++s) {
    const SequenceChunk& seq = batch.seqs[s];
    const std::string where = "sequence " + std::to_string(s) + ": ";
    const int64_t n = int64_t(seq.tokens.size());
    if (n == 0) throw Error("CUDA backend: " + where + "empty token chunk");
    if (seq.token_from_sample >= 0) {  // async scheduling: the token is the previous step's draw
      if (n != 1)
        throw Error("CUDA backend: " + where + "a token taken from the previous step's draws must be the chunk's only one");
      take.push_back(int32_t(tokens.size()));
      take.push_back(seq.token_from_sample);
    }
    if (seq.start_pos < 0 || seq.start_pos + n > c.max_position_embeddings)
      throw Error("CUDA backend: " + where + "positions " + std::to_string(seq.start_pos) + ".." +
                  std::to_string(seq.start_pos + n - 1) + " outside the model's " +
                  std::to_string(c.max_position_embeddings));
    const int64_t last = seq.start_pos + n - 1;
    const int64_t last_block = last / B;
    if (has_full) {
      if (int64_t(seq.full_block_table.size()) <= last_block)
        throw Error("CUDA backend: " + where + "full block table has " + std::to_string(seq.full_block_table.size()) +
                    " entries, position " + std::to_string(last) + " needs " + std::to_string(last_block + 1));
      for (int64_t b = 0; b <= last_block; ++b)
        if (seq.full_block_table[size_t(b)] < 0 || seq.full_block_table[size_t(b)] >= kv_spec_.num_full_blocks)
          throw Error("CUDA backend: " + where + "full block id " + std::to_string(seq.full_block_table[size_t(b)]) +
                      " outside the pool of " + std::to_string(kv_spec_.num_full_blocks));
    }
    if (has_sliding) {
      if (int64_t(seq.sliding_block_table.size()) <= last_block)
        throw Error("CUDA backend: " + where + "sliding block table has " +
                    std::to_string(seq.sliding_block_table.size()) + " entries, position " + std::to_string(last) +
                    " needs " + std::to_string(last_block + 1));
      // Blocks any query of this chunk can see must be real; older ones may be freed (-1).
      for (int64_t b = std::max<int64_t>(0, seq.start_pos - W + 1) / B; b <= last_block; ++b)
        if (seq.sliding_block_table[size_t(b)] < 0 || seq.sliding_block_table[size_t(b)] >= kv_spec_.num_sliding_blocks)
          throw Error("CUDA backend: " + where + "sliding block id " +
                      std::to_string(seq.sliding_block_table[size_t(b)]) + " (logical block " + std::to_string(b) +
                      ") outside the pool of " + std::to_string(kv_spec_.num_sliding_blocks));
    }
    const int32_t of = int32_t(tables_full.size()), os = int32_t(tables_sliding.size());
    if (has_full) tables_full.insert(tables_full.end(), seq.full_block_table.begin(), seq.full_block_table.begin() + last_block + 1);
    if (has_sliding)
      tables_sliding.insert(tables_sliding.end(), seq.sliding_block_table.begin(),
                            seq.sliding_block_table.begin() + last_block + 1);
    if (n >= kPrefillMinRun) {
      append_prefill_tiles(int(tokens.size()), int(n), tiles);
      for (int64_t i = 0; i < n; ++i) tiled.push_back(int32_t(tokens.size() + size_t(i)));
    } else {
      for (int64_t i = 0; i < n; ++i) rest.push_back(int32_t(tokens.size() + size_t(i)));
      p.max_keys_full_rest = std::max<int>(p.max_keys_full_rest, int(last + 1));
      p.max_keys_sliding_rest = std::max<int>(p.max_keys_sliding_rest, int(std::min<int64_t>(last + 1, W)));
    }
    for (int64_t i = 0; i < n; ++i) {
      const int32_t tok = seq.token_from_sample >= 0 ? 0 : seq.tokens[size_t(i)];  // a stand-in, patched on the device
      if (tok < 0 || tok >= c.vocab_size)
        throw Error("CUDA backend: " + where + "token id " + std::to_string(tok) + " outside the vocabulary of " +
                    std::to_string(c.vocab_size));
      const int64_t pos = seq.start_pos + i;
      if (seq.all_logits || i == n - 1) rows.push_back(int32_t(tokens.size()));
      tokens.push_back(tok);
      positions.push_back(int32_t(pos));
      off_full.push_back(of);
      off_sliding.push_back(os);
      slots_full.push_back(has_full ? int64_t(seq.full_block_table[size_t(pos / B)]) * B + pos % B : 0);
      slots_sliding.push_back(has_sliding ? int64_t(seq.sliding_block_table[size_t(pos / B)]) * B + pos % B : 0);
    }
    p.max_keys_full = std::max<int>(p.max_keys_full, int(last + 1));
    p.max_keys_sliding = std::max<int>(p.max_keys_sliding, int(std::min<int64_t>(last + 1, W)));
  }
  p.T = int(tokens.size());
  p.rows = int(rows.size());
  p.one_query_per_sequence = size_t(p.T) == batch.seqs.size();
  if (p.T == 0) throw Error("CUDA backend: empty batch");
  if (p.T > options_.max_tokens)
    throw Error("CUDA backend: " + std::to_string(p.T) + " tokens in one step, at most " +
                std::to_string(options_.max_tokens));
  if (p.rows > options_.max_logit_rows)
    throw Error("CUDA backend: " + std::to_string(p.rows) + " logits rows in one step, at most " +
                std::to_string(options_.max_logit_rows));
  if (int64_t(std::max(tables_full.size(), tables_sliding.size())) > options_.max_table_entries)
    throw Error("CUDA backend: block tables of this step exceed " + std::to_string(options_.max_table_entries) +
                " entries per pool");
  // Pack everything into the pinned buffer; device pointers mirror the offsets.
  std::byte* host = ws_->meta_host;
  size_t off = 0;
  auto put = [&](const auto& v, auto*& dev_ptr) {
    using T = typename std::decay_t<decltype(v)>::value_type;
    std::memcpy(host + off, v.data(), v.size() * sizeof(T));
    dev_ptr = reinterpret_cast<std::remove_reference_t<decltype(dev_ptr)>>(ws_->meta_dev + off);
    off += align16(v.size() * sizeof(T));
  };
  put(tokens, p.tokens);
  put(positions, p.positions);
  put(off_full, p.off_full);
  put(off_sliding, p.off_sliding);
  put(rows, p.logit_rows);
  put(slots_full, p.slots_full);
  put(slots_sliding, p.slots_sliding);
  put(tables_full, p.tables_full);
  put(tiles, p.prefill_tiles);
  put(tiled, p.tiled_queries);
  put(rest, p.rest_queries);
  put(take, p.take_pairs);
  p.num_take = int(take.size() / 2);
  p.num_prefill_tiles = int(tiles.size() / 2);
  p.num_tiled = int(tiled.size());
  p.num_rest = int(rest.size());
  p.bytes = off;
  off = ws_->sliding_base;
  put(tables_sliding, p.tables_sliding);
  p.sliding_bytes = tables_sliding.size() * 4;
}

}  // namespace striker::cuda
