#include "cli/perplexity_scoring.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "core/error.h"
#include "core/thread_pool.h"

namespace striker::cli {

namespace {

constexpr int32_t kBlockSize = 16;

// Log-softmax of one logits row in double; records the target's logprob, the argmax and the top_n.
void score_row(const float* row, int64_t vocab, int32_t target, int top_n, Scores& out) {
  const int64_t best = std::max_element(row, row + vocab) - row;  // first maximum: lowest id
  double sum = 0.0;
  for (int64_t v = 0; v < vocab; ++v) sum += std::exp(double(row[v]) - double(row[best]));
  const double logz = double(row[best]) + std::log(sum);
  out.logprobs.push_back(double(row[target]) - logz);
  out.argmax.push_back(int32_t(best));
  if (top_n <= 0) return;
  std::vector<int32_t> order(static_cast<size_t>(vocab));
  std::iota(order.begin(), order.end(), 0);
  const int64_t k = std::min<int64_t>(top_n, vocab);
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [row](int32_t a, int32_t b) {
    return row[a] > row[b] || (row[a] == row[b] && a < b);
  });
  std::vector<std::pair<int32_t, double>> top;
  for (int64_t i = 0; i < k; ++i) top.emplace_back(order[size_t(i)], double(row[order[size_t(i)]]) - logz);
  out.top.push_back(std::move(top));
}

// Scores `rows` consecutive logits rows against their targets, appending to `out` in order.
// Rows are independent, so a large step (a long prefill chunk: ~150K exp() per row) is spread
// over every core; a row's slot in `parts` is fixed, so the order does not depend on the split.
void score_rows(const float* logits, int64_t rows, int64_t vocab, const int32_t* targets, int top_n, Scores& out) {
  constexpr int64_t kGrain = 16;
  if (rows <= kGrain) {
    for (int64_t r = 0; r < rows; ++r) score_row(logits + r * vocab, vocab, targets[r], top_n, out);
    return;
  }
  std::vector<Scores> parts(static_cast<size_t>((rows + kGrain - 1) / kGrain));
  ThreadPool pool(0);
  pool.parallel_for(rows, kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      score_row(logits + r * vocab, vocab, targets[r], top_n, parts[size_t(begin / kGrain)]);
  });
  for (auto& p : parts) {
    out.logprobs.insert(out.logprobs.end(), p.logprobs.begin(), p.logprobs.end());
    out.argmax.insert(out.argmax.end(), p.argmax.begin(), p.argmax.end());
    for (auto& t : p.top) out.top.push_back(std::move(t));
  }
}

int64_t blocks_for(int64_t tokens) { return (tokens + kBlockSize - 1) / kBlockSize; }

// Block ids first .. first+count-1: each sequence owns a disjoint range of both pools.
std::vector<int32_t> block_range(int64_t first, int64_t count) {
  std::vector<int32_t> table(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) table[size_t(i)] = int32_t(first + i);
  return table;
}

}  // namespace

Scores score_prefill(Backend& backend, const FlintConfig& config, const std::vector<int32_t>& ids,
                     int64_t chunk_size, int top_n, int64_t score_from, int64_t block_rows) {
  const int64_t n = int64_t(ids.size());
  if (score_from < 0 || score_from >= n - 1)
    throw Error("--score-from " + std::to_string(score_from) + " leaves no position to score in " +
                std::to_string(n) + " ids");
  const int64_t blocks = blocks_for(n);
  backend.allocate_kv_cache({kBlockSize, blocks, blocks});
  const std::vector<int32_t> table = block_range(0, blocks);

  Scores out;
  const int64_t V = config.vocab_size;
  for (int64_t start = 0, end; start < n - 1; start = end) {
    end = std::min(n - 1, start + chunk_size);  // the last id is only a target
    if (start < score_from) end = std::min(end, score_from);
    const bool scored = start >= score_from;
    ForwardBatch batch;
    SequenceChunk chunk;
    chunk.tokens.assign(ids.begin() + start, ids.begin() + end);
    chunk.start_pos = start;
    chunk.full_block_table = table;
    chunk.sliding_block_table = table;
    chunk.all_logits = scored;
    batch.seqs.push_back(std::move(chunk));
    // Row r of a scored chunk is position start + r; an unscored chunk's one row is dropped.
    const int32_t* targets = ids.data() + start + 1;
    backend.forward_streamed(batch, block_rows, [&](int64_t first, const float* rows, int64_t count) {
      if (scored) score_rows(rows, count, V, targets + first, top_n, out);
    });
  }
  return out;
}

int64_t prefill_logit_rows(int64_t n_ids, int64_t chunk_size, int64_t score_from) {
  return std::max<int64_t>(1, std::min(chunk_size, n_ids - 1 - score_from));
}

int64_t decode_logit_rows(int64_t n_sequences, int64_t prefill, int64_t score_from) {
  return score_from < prefill - 1 ? n_sequences * prefill : n_sequences;
}

std::vector<Scores> score_decode_batch(Backend& backend, const FlintConfig& config,
                                       const std::vector<std::vector<int32_t>>& sequences, int64_t prefill,
                                       int top_n, int64_t score_from, int64_t block_rows) {
  if (prefill < 1) throw Error("--decode-prefill must be at least 1");
  if (score_from < 0) throw Error("--score-from must not be negative");
  const size_t n = sequences.size();
  std::vector<int64_t> first_block(n);
  int64_t blocks = 0;
  for (size_t s = 0; s < n; ++s) {
    if (int64_t(sequences[s].size()) < prefill + 1)
      throw Error("--decode-batch: sequence " + std::to_string(s) + " has " + std::to_string(sequences[s].size()) +
                  " tokens, fewer than --decode-prefill + 1 (" + std::to_string(prefill + 1) + ")");
    if (int64_t(sequences[s].size()) - 1 <= score_from)
      throw Error("--score-from " + std::to_string(score_from) + " leaves no position to score in sequence " +
                  std::to_string(s) + " (" + std::to_string(sequences[s].size()) + " tokens)");
    first_block[s] = blocks;
    blocks += blocks_for(int64_t(sequences[s].size()));
  }
  backend.allocate_kv_cache({kBlockSize, blocks, blocks});
  std::vector<std::vector<int32_t>> tables(n);
  for (size_t s = 0; s < n; ++s) tables[s] = block_range(first_block[s], blocks_for(int64_t(sequences[s].size())));

  std::vector<Scores> out(n);
  const int64_t V = config.vocab_size;
  // Step 0: every sequence's first `prefill` tokens, one chunk each; logits for every token, or
  // only the last (position prefill-1) when score_from skips the others.
  {
    const bool all_rows = score_from < prefill - 1;
    ForwardBatch batch;
    for (size_t s = 0; s < n; ++s) {
      SequenceChunk chunk;
      chunk.tokens.assign(sequences[s].begin(), sequences[s].begin() + prefill);
      chunk.start_pos = 0;
      chunk.full_block_table = tables[s];
      chunk.sliding_block_table = tables[s];
      chunk.all_logits = all_rows;
      batch.seqs.push_back(std::move(chunk));
    }
    // `rows` rows per sequence: row r of the step is sequence r / rows at position
    // r % rows + (prefill - rows). A block may hold the end of one sequence and the start of the next.
    const int64_t rows = all_rows ? prefill : 1;
    backend.forward_streamed(batch, block_rows, [&](int64_t first, const float* block, int64_t count) {
      for (int64_t r = 0; r < count;) {
        const int64_t row = first + r, s = row / rows, pos = row % rows + (prefill - rows);
        const int64_t run = std::min(count - r, rows - row % rows);  // rows of sequence s in the block
        const int64_t skip = std::clamp<int64_t>(score_from - pos, 0, run);  // positions before score_from
        if (run > skip)
          score_rows(block + (r + skip) * V, run - skip, V, sequences[size_t(s)].data() + pos + skip + 1, top_n,
                     out[size_t(s)]);
        r += run;
      }
    });
  }
  // Decode steps: the token at position p of every sequence that still has a target at p+1.
  // Sequences that finish drop out, so the batch shrinks at the end when lengths differ.
  for (int64_t pos = prefill;; ++pos) {
    ForwardBatch batch;
    std::vector<size_t> members;
    for (size_t s = 0; s < n; ++s) {
      if (pos + 1 >= int64_t(sequences[s].size())) continue;
      SequenceChunk chunk;
      chunk.tokens = {sequences[s][size_t(pos)]};
      chunk.start_pos = pos;
      chunk.full_block_table = tables[s];
      chunk.sliding_block_table = tables[s];
      chunk.all_logits = false;  // one row: the last (only) token, as a serving decode step
      batch.seqs.push_back(std::move(chunk));
      members.push_back(s);
    }
    if (members.empty()) break;
    // Row m is members[m]'s token at `pos`.
    backend.forward_streamed(batch, block_rows, [&](int64_t first, const float* block, int64_t count) {
      if (pos < score_from) return;
      for (int64_t m = first; m < first + count; ++m) {
        const auto& seq = sequences[members[size_t(m)]];
        score_row(block + (m - first) * V, V, seq[size_t(pos + 1)], top_n, out[members[size_t(m)]]);
      }
    });
  }
  return out;
}

std::vector<std::vector<int32_t>> split_sequences(const std::vector<int32_t>& ids, int64_t n) {
  if (n < 1) throw Error("--decode-batch must be at least 1");
  std::vector<std::vector<int32_t>> out;
  const int64_t total = int64_t(ids.size());
  const int64_t base = total / n, extra = total % n;
  int64_t at = 0;
  for (int64_t s = 0; s < n; ++s) {
    const int64_t len = base + (s < extra ? 1 : 0);
    out.emplace_back(ids.begin() + at, ids.begin() + at + len);
    at += len;
  }
  return out;
}

}  // namespace striker::cli
