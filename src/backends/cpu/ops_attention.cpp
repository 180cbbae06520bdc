#include "backends/cpu/ops_attention.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "backends/cpu/ops_linear.h"
#include "core/bf16.h"
#include "core/error.h"

namespace striker::cpu {

namespace {

// Physical block holding `position`, checked against the pool (never trusts the table).
int64_t block_of(const KvCache& cache, const std::vector<int32_t>& table, bool sliding, int64_t position) {
  const int64_t logical = position / cache.block_size();
  if (logical >= int64_t(table.size()))
    throw Error("CPU backend: " + std::string(sliding ? "sliding" : "full") + " block table has " +
                std::to_string(table.size()) + " entries, too few for position " + std::to_string(position));
  const int64_t block = table[size_t(logical)];
  if (block < 0 || block >= cache.num_blocks(sliding))
    throw Error("CPU backend: " + std::string(sliding ? "sliding" : "full") + " block table entry " +
                std::to_string(logical) + " = " + std::to_string(block) + " is not a valid block (pool has " +
                std::to_string(cache.num_blocks(sliding)) + ") but position " + std::to_string(position) +
                " is needed");
  return block;
}

const std::vector<int32_t>& table_of(const TokenSlot& t, bool sliding) {
  return sliding ? *t.sliding_table : *t.full_table;
}

void to_float(const uint16_t* bits, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_float(bf16{bits[i]});
}

}  // namespace

void write_kv(KvCache& cache, const AttentionShape& shape, const std::vector<TokenSlot>& tokens,
              const Mat& k, const Mat& v) {
  const int64_t kv_dim = shape.n_kv_heads * shape.head_dim;
  for (size_t t = 0; t < tokens.size(); ++t) {
    const int64_t p = tokens[t].position;
    const int64_t block = block_of(cache, table_of(tokens[t], shape.sliding), shape.sliding, p);
    const int64_t slot = p % cache.block_size();
    uint16_t* kr = cache.key(shape.layer, block, slot);
    uint16_t* vr = cache.value(shape.layer, block, slot);
    for (int64_t i = 0; i < kv_dim; ++i) {
      kr[i] = float_to_bf16(k.row(int64_t(t))[i]).bits;
      vr[i] = float_to_bf16(v.row(int64_t(t))[i]).bits;
    }
  }
}

void attention(ThreadPool& pool, KvCache& cache, const AttentionShape& shape,
               const std::vector<float>& sinks, const std::vector<TokenSlot>& tokens, const Mat& q,
               Mat& out) {
  const int64_t d = shape.head_dim, heads = shape.n_heads;
  const int64_t group = heads / shape.n_kv_heads;
  const int64_t n_tokens = int64_t(tokens.size());
  if (out.rows != n_tokens || out.cols != heads * d) out = Mat(n_tokens, heads * d);
  const float sqrt_d = std::sqrt(float(d));  // s_j = fp32(q·k)/sqrt(d): a division, as written
  const int64_t block_size = cache.block_size();

  // One task per (token, query head).
  pool.parallel_for(n_tokens * heads, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> scores, val(static_cast<size_t>(d)), acc(static_cast<size_t>(d));
    for (int64_t task = begin; task < end; ++task) {
      const int64_t t = task / heads, h = task % heads, kvh = h / group;
      const TokenSlot& slot = tokens[size_t(t)];
      const auto& table = table_of(slot, shape.sliding);
      const int64_t p = slot.position;
      const int64_t first = shape.sliding ? std::max<int64_t>(0, p - shape.window + 1) : 0;
      const float* qh = q.row(t) + h * d;
      const float sink = sinks[size_t(h)];

      scores.resize(size_t(p - first + 1));
      float m = sink;
      for (int64_t j = first; j <= p; ++j) {
        const int64_t block = block_of(cache, table, shape.sliding, j);
        const float s = dot_bf16(qh, cache.key(shape.layer, block, j % block_size) + kvh * d, d) / sqrt_d;
        scores[size_t(j - first)] = s;
        m = std::max(m, s);
      }
      float denom = std::exp(sink - m);
      for (float& s : scores) {
        s = std::exp(s - m);
        denom += s;
      }
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t j = first; j <= p; ++j) {
        const int64_t block = block_of(cache, table, shape.sliding, j);
        to_float(cache.value(shape.layer, block, j % block_size) + kvh * d, d, val.data());
        const float prob = scores[size_t(j - first)] / denom;
        for (int64_t i = 0; i < d; ++i) acc[size_t(i)] += prob * val[size_t(i)];
      }
      float* o = out.row(t) + h * d;
      for (int64_t i = 0; i < d; ++i) o[i] = round_bf16(acc[size_t(i)]);
    }
  });
}

}  // namespace striker::cpu
