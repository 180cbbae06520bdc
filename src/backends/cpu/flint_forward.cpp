// The Flint forward pass, in the order and with the rounding points of FLINT.md §4.
// Activations are fp32 holding bf16 values; each op file documents its own rounding.
#include "backends/cpu/flint_forward.h"

#include <algorithm>
#include <string>

#include "backends/cpu/batch_check.h"
#include "backends/cpu/ops_attention.h"
#include "backends/cpu/ops_linear.h"
#include "backends/cpu/ops_moe.h"
#include "backends/cpu/ops_norm.h"
#include "backends/cpu/ops_rope.h"
#include "core/bf16.h"
#include "core/error.h"

namespace striker::cpu {

namespace {

// h = bf16(h + y)
void add_residual(Mat& h, const Mat& y) {
  for (size_t i = 0; i < h.data.size(); ++i) h.data[i] = round_bf16(h.data[i] + y.data[i]);
}

Mat embed(const WeightView& table, const std::vector<int32_t>& tokens) {
  Mat h(int64_t(tokens.size()), table.cols());
  for (size_t t = 0; t < tokens.size(); ++t) {
    load_row(table, tokens[t], h.row(int64_t(t)));
    for (int64_t i = 0; i < h.cols; ++i) h.row(int64_t(t))[i] = round_bf16(h.row(int64_t(t))[i]);  // F32 tables
  }
  return h;
}

// Every layer over the step's tokens (writing their K/V into `cache`): the last hidden state
// of each token, [tokens, hidden].
Mat run_layers(const CpuModel& model, KvCache& cache, ThreadPool& pool, const FlatBatch& flat) {
  const FlintConfig& c = model.config;
  const float eps = c.rms_norm_eps;
  std::vector<RopeAngles> angles;  // per token; positions are the same in every sliding layer
  if (c.num_sliding_layers() > 0)
    for (const TokenSlot& s : flat.slots) angles.push_back(rope_angles(s.position, c.head_dim, c.rope_theta));

  Mat h = embed(model.weights.embed, flat.tokens);
  Mat x, q, k, v, o, y;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const CpuLayer& layer = model.layers[size_t(l)];
    const LayerWeights& w = *layer.w;
    const AttentionShape shape{l, c.is_sliding_layer(l), c.sliding_window, c.num_attention_heads,
                               c.num_key_value_heads, c.head_dim};

    // Attention block.
    rmsnorm_rows(h, layer.input_norm, eps, x);
    matmul(pool, x, w.q_proj, q, true);
    matmul(pool, x, w.k_proj, k, true);
    matmul(pool, x, w.v_proj, v, true);
    if (c.use_qk_norm) {
      rmsnorm_heads(q, c.head_dim, layer.q_norm, eps);
      rmsnorm_heads(k, c.head_dim, layer.k_norm, eps);
    }
    if (shape.sliding)  // full layers use no positional encoding (NoPE)
      for (int64_t t = 0; t < q.rows; ++t) {
        apply_rope(q.row(t), c.num_attention_heads, c.head_dim, angles[size_t(t)]);
        apply_rope(k.row(t), c.num_key_value_heads, c.head_dim, angles[size_t(t)]);
      }
    write_kv(cache, shape, flat.slots, k, v);
    attention(pool, cache, shape, layer.sinks, flat.slots, q, o);
    matmul(pool, o, w.o_proj, y, true);
    add_residual(h, y);

    // Feed-forward block.
    rmsnorm_rows(h, layer.post_attn_norm, eps, x);
    if (c.is_dense_layer(l))
      swiglu(pool, x, w.dense, y);
    else
      moe(pool, x, layer, c, y);
    add_residual(h, y);
  }

  return h;
}

// Final norm and lm_head for the step's logits rows first .. first+count-1 only: the lm_head is
// by far the largest matrix of a small model. Each row's arithmetic is the same whatever rows
// share the call (matmul's dot products are per row), so blocks give forward()'s bits.
void lm_head_rows(const CpuModel& model, ThreadPool& pool, const Mat& h, const std::vector<int64_t>& logit_rows,
                  int64_t first, int64_t count, Mat& out) {
  Mat last(count, h.cols);
  for (int64_t r = 0; r < count; ++r)
    rmsnorm(h.row(logit_rows[size_t(first + r)]), model.final_norm.data(), h.cols, model.config.rms_norm_eps,
            last.row(r));
  matmul(pool, last, model.weights.lm_head, out, true);
}

}  // namespace

void flint_forward(const CpuModel& model, KvCache& cache, ThreadPool& pool, const ForwardBatch& batch,
                   std::vector<float>& logits) {
  const FlatBatch flat = check_and_flatten(batch, model.config, cache);
  logits.clear();
  if (flat.tokens.empty()) return;
  const Mat h = run_layers(model, cache, pool, flat);
  Mat out;
  lm_head_rows(model, pool, h, flat.logit_rows, 0, int64_t(flat.logit_rows.size()), out);
  logits = std::move(out.data);
}

void flint_forward_streamed(const CpuModel& model, KvCache& cache, ThreadPool& pool, const ForwardBatch& batch,
                            int64_t max_block_rows, const LogitsSink& sink) {
  if (max_block_rows < 1)
    throw Error("CPU backend: forward_streamed needs max_block_rows >= 1, got " + std::to_string(max_block_rows));
  const FlatBatch flat = check_and_flatten(batch, model.config, cache);
  if (flat.tokens.empty()) return;
  const Mat h = run_layers(model, cache, pool, flat);
  const int64_t rows = int64_t(flat.logit_rows.size());
  Mat out;
  for (int64_t first = 0; first < rows; first += max_block_rows) {
    const int64_t count = std::min(max_block_rows, rows - first);
    if (out.rows != count) out = Mat();  // a shorter last block: free the full one before allocating it
    lm_head_rows(model, pool, h, flat.logit_rows, first, count, out);
    sink(first, out.data.data(), count);
  }
}

}  // namespace striker::cpu
