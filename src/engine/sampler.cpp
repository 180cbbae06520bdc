#include "engine/sampler.h"

#include "backends/sample_math.h"
#include "core/thread_pool.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>

namespace striker {

namespace {

namespace sm = sample_math;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

bool in_vocab(int32_t id, size_t vocab) { return id >= 0 && size_t(id) < vocab; }

void apply_penalties(std::vector<float>& x, const SamplingParams& p, const PenaltyState& st) {
  const size_t V = x.size();
  if (p.repetition_penalty != 1.0f) {
    // vLLM: every token seen in prompt or output once; positive logits shrink, negative grow.
    auto penalize = [&](int32_t id) {
      if (!in_vocab(id, V)) return;
      x[size_t(id)] = sm::process_logit(x[size_t(id)], false, 0.0f, true, p.repetition_penalty, 0, 0, 0);
    };
    for (int32_t id : st.prompt_tokens()) penalize(id);
    for (const auto& [id, n] : st.output_counts())
      if (!st.prompt_tokens().count(id)) penalize(id);
  }
  if (p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f) {
    for (const auto& [id, n] : st.output_counts()) {
      if (!in_vocab(id, V)) continue;
      x[size_t(id)] = sm::process_logit(x[size_t(id)], false, 0.0f, false, 1.0f, n, p.frequency_penalty,
                                        p.presence_penalty);
    }
  }
}

// First index of the largest non-NaN value (0 when every value is NaN): the greedy rule the
// GPU's argmax reduction follows too.
int32_t argmax(std::span<const float> x) {
  int32_t best = -1;
  float best_v = kNegInf;
  for (size_t i = 0; i < x.size(); ++i) {
    const float v = x[i];
    if (v != v) continue;
    if (best < 0 || v > best_v) {
      best = int32_t(i);
      best_v = v;
    }
  }
  return best < 0 ? 0 : best;
}

float max_value(std::span<const float> x) {
  float m = -std::numeric_limits<float>::infinity();
  for (float v : x) m = v > m ? v : m;
  return m;
}

// Unnormalised probability of a kept token, in double so top_p's sums carry ~1e-16 error.
double weight(float x, float m, float inv_t) { return std::exp(double(sm::tempered(x, m, inv_t))); }

// The k best ids with x >= floor, best first (higher value, then lower id): one pass with a
// small heap whose front is the worst kept, so most ids cost a single comparison.
std::vector<int32_t> best_ids(std::span<const float> x, size_t k, float floor) {
  using Entry = std::pair<float, int32_t>;
  auto better = [](const Entry& a, const Entry& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; };
  if (k > 4096) {  // a deep cut: select on contiguous (value, id) pairs instead of a heap
    std::vector<Entry> all;
    all.reserve(x.size());
    for (size_t i = 0; i < x.size(); ++i)
      if (x[i] >= floor) all.emplace_back(x[i], int32_t(i));
    k = std::min(k, all.size());
    std::nth_element(all.begin(), all.begin() + long(k), all.end(), better);
    std::sort(all.begin(), all.begin() + long(k), better);
    std::vector<int32_t> ids(k);
    for (size_t i = 0; i < k; ++i) ids[i] = all[i].second;
    return ids;
  }
  std::vector<Entry> heap;
  heap.reserve(std::min(k, x.size()));
  float worst = floor;  // once the heap is full: the value of its front, cached in a register
  for (size_t i = 0; i < x.size(); ++i) {
    const float v = x[i];
    if (!(v >= worst)) continue;
    Entry e{v, int32_t(i)};
    if (heap.size() < k) {
      heap.push_back(e);
      std::push_heap(heap.begin(), heap.end(), better);
      if (heap.size() == k) worst = heap.front().first;
    } else if (better(e, heap.front())) {
      std::pop_heap(heap.begin(), heap.end(), better);
      heap.back() = e;
      std::push_heap(heap.begin(), heap.end(), better);
      worst = heap.front().first;
    }
  }
  std::sort(heap.begin(), heap.end(), better);
  std::vector<int32_t> ids(heap.size());
  for (size_t i = 0; i < heap.size(); ++i) ids[i] = heap[i].second;
  return ids;
}

// For top_p without top_k: the best tokens, best first, covering at least the nucleus, found
// without sorting the vocabulary. Tokens are binned by (m - x) / T; whole bins are taken until
// the one where the mass reaches top_p, and only the tokens up to that bin are sorted, so the
// exact cut made by the caller falls inside the sorted list.
std::vector<int32_t> nucleus_superset(std::span<const float> x, float m, float inv_t, float floor, double top_p,
                                      double& total) {
  // d >= 0 since m is the maximum; NaN never passes the floor test.
  constexpr int kBins = 1024;
  constexpr float kRange = 40.0f;  // exp(-40) is below anything that matters in a float sum
  const size_t V = x.size();
  std::vector<uint16_t> bin_of(V);
  std::vector<double> mass(kBins, 0.0);
  total = 0;
  for (size_t i = 0; i < V; ++i) {
    if (!(x[i] >= floor)) {
      bin_of[i] = kBins;  // filtered out
      continue;
    }
    const float d = -sm::tempered(x[i], m, inv_t);
    const int b = std::min(kBins - 1, int(d * (kBins / kRange)));
    bin_of[i] = uint16_t(b);
    const double w = weight(x[i], m, inv_t);
    mass[size_t(b)] += w;
    total += w;
  }
  int last = kBins - 1;
  double cum = 0;
  for (int b = 0; b < kBins; ++b) {
    cum += mass[size_t(b)];
    if (cum >= top_p * total) {
      last = b;
      break;
    }
  }
  std::vector<int32_t> ids;
  for (size_t i = 0; i < V; ++i)
    if (bin_of[i] <= last) ids.push_back(int32_t(i));
  std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
    return x[size_t(a)] != x[size_t(b)] ? x[size_t(a)] > x[size_t(b)] : a < b;
  });
  return ids;
}

}  // namespace

PenaltyState::PenaltyState(const SamplingParams& params, std::span<const int32_t> prompt) {
  if (params.repetition_penalty != 1.0f) prompt_tokens_.insert(prompt.begin(), prompt.end());
}

void PenaltyState::add_output(int32_t token) { ++output_counts_[token]; }

uint64_t mix_seed(uint64_t a, uint64_t b) { return sm::mix(a, b); }

namespace {

// The scalar part of a draw, shared by both entry points below.
struct RaceParams {
  float temperature;
  int32_t top_k;
  float top_p;
  float min_p;
  uint64_t key;
};

// Draws from processed logits x (see sample_token for the order of the cuts).
int32_t sample_processed(std::span<const float> x, const RaceParams& p, SampleDiagnostics* diag) {
  if (diag) diag->top_p_margin = std::numeric_limits<double>::infinity();
  const size_t V = x.size();
  if (p.temperature < 1e-5f) return argmax(x);
  const float m = max_value(x);
  if (!std::isfinite(m)) return argmax(x);  // everything masked (or +inf): nothing to draw from
  const float inv_t = 1.0f / p.temperature;
  const float floor_x =
      p.min_p > 0 ? sm::min_p_floor(m, p.temperature, sm::min_p_log(p.min_p)) : -std::numeric_limits<float>::max();
  std::vector<int32_t> cand;
  bool sorted = false;
  double nucleus_base = -1;  // top_p's reference mass when cand is only part of the survivors
  if (p.top_k > 0 && size_t(p.top_k) < V) {
    cand = best_ids(x, size_t(p.top_k), floor_x);
    sorted = true;
  } else if (p.top_p < 1.0f) {
    cand = nucleus_superset(x, m, inv_t, floor_x, double(p.top_p), nucleus_base);
    sorted = true;
  }
  if (p.top_p < 1.0f && sorted) {
    // Keep tokens while the mass ranked above them is below top_p of the (filtered) total.
    std::vector<double> w(cand.size());
    double total = 0;
    for (size_t j = 0; j < cand.size(); ++j) total += w[j] = weight(x[size_t(cand[j])], m, inv_t);
    const double target = double(p.top_p) * (nucleus_base >= 0 ? nucleus_base : total);
    double cum = 0;
    size_t keep = 0;
    while (keep < cand.size() && cum < target) {
      cum += w[keep++];
      if (diag) diag->top_p_margin = std::min(diag->top_p_margin, std::abs(cum - target) / target);
    }
    cand.resize(std::max<size_t>(keep, 1));
  }
  // The race: argmax of tempered logit + Gumbel noise, ties to the lower id. Only the winner
  // matters, so tokens that provably cannot beat the best score so far skip the logs: one
  // whose tempered logit trails by more than any noise can make up is skipped unhashed, and
  // one that trails by `gap` needs noise -log(-log(u)) >= gap, i.e. u >= exp(-exp(-gap)); a
  // few precomputed thresholds (a hair low, for det_log's 1e-7 error) reject most by u alone.
  constexpr int kGaps = 4;
  static const float gap_at[kGaps] = {1.f, 2.f, 4.f, 8.f};
  static const auto u_below = [] {
    std::array<float, kGaps> u{};
    for (int j = 0; j < kGaps; ++j)
      u[size_t(j)] = std::nextafter(float(std::exp(-std::exp(-(double(gap_at[j]) - 0.01)))), 0.0f);
    return u;
  }();
  int32_t best = -1;
  float best_s = kNegInf;
  auto visit = [&](int32_t id) {
    const float a = sm::tempered(x[size_t(id)], m, inv_t);
    const float gap = best_s - a;
    if (best >= 0 && gap > sm::kMaxRaceNoise) return;
    const float u = sm::race_uniform(p.key, id);
    if (best >= 0)
      for (int j = kGaps - 1; j >= 0; --j)
        if (gap >= gap_at[j]) {
          if (u < u_below[size_t(j)]) return;
          break;
        }
    const float s = sm::race_score_from(a, u);
    if (best < 0 || s > best_s || (s == best_s && id < best)) {
      best = id;
      best_s = s;
    }
  };
  if (sorted) {
    for (int32_t id : cand) visit(id);
  } else {
    visit(argmax(x));  // a strong first score lets most of the vocabulary skip the hash
    for (size_t i = 0; i < V; ++i)
      if (x[i] >= floor_x) visit(int32_t(i));
  }
  return best;
}

}  // namespace

void apply_allowed_mask(std::span<float> x, const uint32_t* allowed) {
  if (!allowed) return;
  const size_t V = x.size();
  for (size_t w = 0; w * 32 < V; ++w) {
    const uint32_t bits = allowed[w];
    if (bits == ~0u) continue;
    const size_t end = std::min(V, w * 32 + 32);
    for (size_t i = w * 32; i < end; ++i)
      if (!((bits >> (i & 31)) & 1)) x[i] = kNegInf;
  }
}

void process_logits(std::span<const float> logits, const SampleContext& ctx, std::vector<float>& x) {
  const SamplingParams& p = *ctx.params;
  const size_t V = logits.size();
  x.assign(logits.begin(), logits.end());
  apply_allowed_mask(x, ctx.allowed);
  for (int32_t id : ctx.suppressed)
    if (in_vocab(id, V)) x[size_t(id)] = kNegInf;
  for (const auto& [id, bias] : p.logit_bias)
    if (in_vocab(id, V)) x[size_t(id)] = sm::process_logit(x[size_t(id)], false, bias, false, 1.0f, 0, 0, 0);
  if (ctx.penalties) apply_penalties(x, p, *ctx.penalties);
}

// True when process_logits would change nothing, so the raw row can be used without a copy.
bool logits_untouched(const SampleContext& ctx) {
  const SamplingParams& p = *ctx.params;
  const bool penalties = ctx.penalties && !ctx.penalties->output_counts().empty() &&
                         (p.frequency_penalty != 0 || p.presence_penalty != 0 || p.repetition_penalty != 1);
  const bool repetition_on_prompt = ctx.penalties && !ctx.penalties->prompt_tokens().empty();
  return !ctx.allowed && ctx.suppressed.empty() && p.logit_bias.empty() && !penalties && !repetition_on_prompt;
}

int32_t sample_token(std::span<const float> logits, const SampleContext& ctx, std::vector<float>& scratch) {
  const SamplingParams& p = *ctx.params;
  std::span<const float> x = logits;
  if (!logits_untouched(ctx)) {
    process_logits(logits, ctx, scratch);
    x = scratch;
  }
  const RaceParams rp{p.temperature, p.top_k, p.top_p, p.min_p,
                      sm::race_key(ctx.seed, uint64_t(ctx.choice), uint64_t(ctx.step))};
  return sample_processed(x, rp, nullptr);
}

SampleRequest make_sample_request(const SampleContext& ctx) {
  const SamplingParams& p = *ctx.params;
  SampleRequest r;
  r.temperature = p.temperature;
  r.top_k = p.top_k;
  r.top_p = p.top_p;
  r.min_p = p.min_p;
  r.presence_penalty = p.presence_penalty;
  r.frequency_penalty = p.frequency_penalty;
  r.repetition_penalty = p.repetition_penalty;
  r.seed = ctx.seed;
  r.choice = ctx.choice;
  r.step = ctx.step;
  r.logit_bias.assign(p.logit_bias.begin(), p.logit_bias.end());
  // The counts matter only to a penalty; copied and sorted for every step they cost O(distinct
  // output tokens) of host time per sequence and step (thousands of entries in a long answer).
  const bool counted = p.repetition_penalty != 1.0f || p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f;
  if (ctx.penalties && counted) {
    r.output_counts.assign(ctx.penalties->output_counts().begin(), ctx.penalties->output_counts().end());
    std::sort(r.output_counts.begin(), r.output_counts.end());
    r.prompt_tokens.assign(ctx.penalties->prompt_tokens().begin(), ctx.penalties->prompt_tokens().end());
    std::sort(r.prompt_tokens.begin(), r.prompt_tokens.end());
  }
  r.suppressed.assign(ctx.suppressed.begin(), ctx.suppressed.end());
  r.allowed = ctx.allowed;
  return r;
}

void process_logits(std::span<const float> logits, const SampleRequest& r, std::vector<float>& x) {
  const size_t V = logits.size();
  x.assign(logits.begin(), logits.end());
  apply_allowed_mask(x, r.allowed);
  for (int32_t id : r.suppressed)
    if (in_vocab(id, V)) x[size_t(id)] = kNegInf;
  for (const auto& [id, bias] : r.logit_bias)
    if (in_vocab(id, V)) x[size_t(id)] = sm::process_logit(x[size_t(id)], false, bias, false, 1.0f, 0, 0, 0);
  if (r.repetition_penalty != 1.0f) {
    std::vector<int32_t> seen(r.prompt_tokens);
    for (const auto& [id, n] : r.output_counts) seen.push_back(id);
    std::sort(seen.begin(), seen.end());
    seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
    for (int32_t id : seen)
      if (in_vocab(id, V))
        x[size_t(id)] = sm::process_logit(x[size_t(id)], false, 0.0f, true, r.repetition_penalty, 0, 0, 0);
  }
  if (r.frequency_penalty != 0.0f || r.presence_penalty != 0.0f)
    for (const auto& [id, n] : r.output_counts)
      if (in_vocab(id, V))
        x[size_t(id)] = sm::process_logit(x[size_t(id)], false, 0.0f, false, 1.0f, n, r.frequency_penalty,
                                          r.presence_penalty);
}

int32_t sample_request(std::span<const float> logits, const SampleRequest& r, std::vector<float>& scratch,
                       SampleDiagnostics* diag) {
  process_logits(logits, r, scratch);
  const RaceParams rp{r.temperature, r.top_k, r.top_p, r.min_p,
                      sm::race_key(r.seed, uint64_t(r.choice), uint64_t(r.step))};
  return sample_processed(scratch, rp, diag);
}

TokenLogprob token_logprob(std::span<const float> logits, int32_t token, int32_t top_n, ThreadPool* pool) {
  const size_t V = logits.size();
  const size_t n = std::min<size_t>(size_t(std::max(top_n, 0)), V);
  auto chunk = [&](int64_t c) {
    const size_t b = V * size_t(c) / kLogprobChunks, e = V * size_t(c + 1) / kLogprobChunks;
    return logits.subspan(b, e - b);
  };
  auto for_chunks = [&](const std::function<void(int64_t)>& body) {
    if (!pool) {
      for (int64_t c = 0; c < kLogprobChunks; ++c) body(c);
      return;
    }
    pool->parallel_for(kLogprobChunks, 1, [&](int64_t b, int64_t e) {
      for (int64_t c = b; c < e; ++c) body(c);
    });
  };
  // Pass 1: each chunk's maximum and its best n (ids offset to the row); pass 2: each chunk's sum of
  // exp(v - m) against the row's maximum. Merged in chunk order: the same bits on any pool.
  std::array<float, kLogprobChunks> chunk_max{};
  std::array<int64_t, kLogprobChunks> chunk_rank{};  // logits >= the token's
  std::array<double, kLogprobChunks> chunk_sum{};
  const float token_v = in_vocab(token, V) ? logits[size_t(token)] : std::numeric_limits<float>::quiet_NaN();
  std::array<std::vector<int32_t>, kLogprobChunks> chunk_best;
  for_chunks([&](int64_t c) {
    const auto x = chunk(c);
    chunk_max[size_t(c)] = max_value(x);
    int64_t at_least = 0;
    for (float v : x) at_least += v >= token_v;
    chunk_rank[size_t(c)] = at_least;
    if (n > 0 && !x.empty()) {
      const int32_t offset = int32_t(x.data() - logits.data());
      chunk_best[size_t(c)] = best_ids(x, std::min(n, x.size()), -std::numeric_limits<float>::infinity());
      for (int32_t& id : chunk_best[size_t(c)]) id += offset;
    }
  });
  float m = -std::numeric_limits<float>::infinity();
  for (float cm : chunk_max) m = cm > m ? cm : m;
  for_chunks([&](int64_t c) {
    double sum = 0;
    for (float v : chunk(c)) sum += std::exp(v - m);
    chunk_sum[size_t(c)] = sum;
  });
  double sum = 0;
  for (double cs : chunk_sum) sum += cs;
  const double lse = double(m) + std::log(sum);
  TokenLogprob out;
  out.token = token;
  out.logprob = in_vocab(token, V) ? float(double(logits[size_t(token)]) - lse) : kNegInf;
  for (int64_t r : chunk_rank) out.rank += r;
  if (n > 0) {
    std::vector<int32_t> cand;
    for (const auto& b : chunk_best) cand.insert(cand.end(), b.begin(), b.end());
    auto better = [&](int32_t a, int32_t b) {
      const float va = logits[size_t(a)], vb = logits[size_t(b)];
      return va != vb ? va > vb : a < b;
    };
    const size_t keep = std::min(n, cand.size());
    std::partial_sort(cand.begin(), cand.begin() + std::ptrdiff_t(keep), cand.end(), better);
    for (size_t j = 0; j < keep; ++j) out.top.emplace_back(cand[j], float(double(logits[size_t(cand[j])]) - lse));
  }
  return out;
}

}  // namespace striker
