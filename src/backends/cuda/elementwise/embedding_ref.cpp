#include "backends/cuda/elementwise/embedding.h"

namespace striker::cuda {

void take_drawn_tokens_ref(std::vector<int32_t>& tokens, const std::vector<int32_t>& pairs, const std::vector<int32_t>& drawn) {
  for (size_t i = 0; i + 1 < pairs.size(); i += 2) tokens[size_t(pairs[i])] = drawn[size_t(pairs[i + 1])];
}

void embedding_gather_ref(const std::vector<bf16>& table, int64_t vocab, int64_t hidden,
                          const std::vector<int32_t>& ids, std::vector<bf16>& out) {
  out.assign(ids.size() * size_t(hidden), bf16{0x7fc0});
  for (size_t t = 0; t < ids.size(); ++t) {
    if (ids[t] < 0 || ids[t] >= vocab) continue;  // stays NaN, as on the device
    for (int64_t i = 0; i < hidden; ++i) out[t * size_t(hidden) + size_t(i)] = table[size_t(ids[t] * hidden + i)];
  }
}

}  // namespace striker::cuda
