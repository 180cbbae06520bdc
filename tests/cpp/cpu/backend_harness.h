// Drives a Backend the way the engine does, for consistency tests: each sequence owns a
// disjoint, deliberately scrambled range of physical blocks in both pools.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "backends/cpu/cpu_backend.h"

namespace striker::test {

class BackendHarness {
 public:
  BackendHarness(const LoadedModel& model, int threads, int32_t block_size, int64_t max_seqs, int64_t max_len)
      : backend_(make_cpu_backend(model, threads)),
        vocab_(model.config.vocab_size),
        block_size_(block_size),
        per_seq_((max_len + block_size - 1) / block_size) {
    backend_->allocate_kv_cache({block_size, per_seq_ * max_seqs, per_seq_ * max_seqs});
  }

  Backend& backend() { return *backend_; }
  int64_t vocab() const { return vocab_; }
  int32_t block_size() const { return block_size_; }

  // Logical block i of sequence s -> a physical block; reversed so that a backend that
  // ignored the table (or mixed up sequences) would read the wrong rows.
  std::vector<int32_t> table(int64_t seq) const {
    std::vector<int32_t> t;
    for (int64_t i = 0; i < per_seq_; ++i) t.push_back(int32_t(seq * per_seq_ + (per_seq_ - 1 - i)));
    return t;
  }

  SequenceChunk chunk(int64_t seq, const std::vector<int32_t>& ids, int64_t begin, int64_t end, bool all_logits) const {
    SequenceChunk c;
    c.tokens.assign(ids.begin() + begin, ids.begin() + end);
    c.start_pos = begin;
    c.full_block_table = table(seq);
    c.sliding_block_table = table(seq);
    c.all_logits = all_logits;
    return c;
  }

  std::vector<float> run(ForwardBatch batch) {
    std::vector<float> logits;
    backend_->forward(batch, logits);
    return logits;
  }

  // Logits of every position of `ids` in one prefill, as sequence `seq`.
  std::vector<float> full_prefill(int64_t seq, const std::vector<int32_t>& ids) {
    ForwardBatch b;
    b.seqs.push_back(chunk(seq, ids, 0, int64_t(ids.size()), true));
    return run(b);
  }

  std::vector<float> row(const std::vector<float>& logits, int64_t r) const {
    return std::vector<float>(logits.begin() + r * vocab_, logits.begin() + (r + 1) * vocab_);
  }

 private:
  std::unique_ptr<Backend> backend_;
  int64_t vocab_;
  int32_t block_size_;
  int64_t per_seq_;
};

inline std::vector<int32_t> random_ids(uint64_t seed, int64_t n, int64_t below) {
  std::vector<int32_t> ids;
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int64_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    ids.push_back(int32_t(x % uint64_t(below)));
  }
  return ids;
}

}  // namespace striker::test
