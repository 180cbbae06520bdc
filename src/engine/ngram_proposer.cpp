#include "engine/ngram_proposer.h"

#include <algorithm>
#include <string>

#include "core/error.h"

namespace striker {

void validate_speculative_config(const SpeculativeConfig& c) {
  if (c.num_speculative_tokens < 0)
    throw Error("speculative num_speculative_tokens must be > 0, got " + std::to_string(c.num_speculative_tokens));
  if (c.prompt_lookup_min < 1) throw Error("speculative prompt_lookup_min must be > 0, got " + std::to_string(c.prompt_lookup_min));
  if (c.prompt_lookup_max < 1) throw Error("speculative prompt_lookup_max must be > 0, got " + std::to_string(c.prompt_lookup_max));
  if (c.prompt_lookup_min > c.prompt_lookup_max)
    throw Error("speculative prompt_lookup_min=" + std::to_string(c.prompt_lookup_min) +
                " must be <= prompt_lookup_max=" + std::to_string(c.prompt_lookup_max));
  if (c.disable_by_batch_size < 0)
    throw Error("speculative disable_by_batch_size must be >= 0, got " + std::to_string(c.disable_by_batch_size));
}

std::vector<int32_t> propose_ngram(std::span<const int32_t> tokens, int32_t min_n, int32_t max_n, int32_t k) {
  const int64_t n = int64_t(tokens.size());
  if (k <= 0 || min_n < 1 || max_n < min_n || n < int64_t(min_n) + 1) return {};
  const int32_t last = tokens[size_t(n - 1)];
  // Every earlier position `end` holding the last token ends a candidate match; extend it
  // backwards against the suffix up to max_n tokens. Ascending `end` and a strict improvement
  // keep the earliest of the longest; the first max_n-long match ends the scan.
  int64_t best_len = 0, best_end = -1;
  const int32_t* t = tokens.data();
  for (int64_t end = 0; end + 1 < n; ++end) {
    if (t[end] != last) continue;
    int64_t len = 1;
    const int64_t most = std::min<int64_t>(max_n, end + 1);
    while (len < most && t[end - len] == t[n - 1 - len]) ++len;
    if (len > best_len) {
      best_len = len;
      best_end = end;
      if (best_len == max_n) break;  // nothing later can be longer, and ties keep the earliest
    }
  }
  if (best_len < min_n) return {};
  const int64_t start = best_end + 1;
  const int64_t count = std::min<int64_t>(k, n - start);
  return {t + start, t + start + count};
}

}  // namespace striker
