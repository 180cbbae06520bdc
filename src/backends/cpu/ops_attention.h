// Attention with learned sinks over the paged KV cache (FLINT.md §4):
//   s_j = fp32(q·k_j)/sqrt(d);  m = max(max_j s_j, sink);  P_j = exp(s_j−m) / (exp(sink−m) + Σ exp(s_j−m))
//   o = bf16(Σ_j P_j·v_j), keys j with p_j ≤ p and (full layer or p − p_j < W).
#pragma once
#include <cstdint>
#include <vector>

#include "backends/cpu/kv_cache.h"
#include "backends/cpu/tensor.h"
#include "core/thread_pool.h"

namespace striker::cpu {

struct AttentionShape {
  int64_t layer = 0;
  bool sliding = false;
  int64_t window = 0;      // W: keys p-W+1 .. p on sliding layers
  int64_t n_heads = 0, n_kv_heads = 0, head_dim = 0;
};

// Stores k, v rows ([tokens, n_kv·d], bf16 values) of every token at its position.
void write_kv(KvCache& cache, const AttentionShape& shape, const std::vector<TokenSlot>& tokens,
              const Mat& k, const Mat& v);

// out[t] = attention of q[t] ([n_heads·d]) over the cached keys its position may see.
// Reads only blocks inside the window; a -1 or out-of-range block there is an Error.
void attention(ThreadPool& pool, KvCache& cache, const AttentionShape& shape,
               const std::vector<float>& sinks, const std::vector<TokenSlot>& tokens, const Mat& q,
               Mat& out);

}  // namespace striker::cpu
