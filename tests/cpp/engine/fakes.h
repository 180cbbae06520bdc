// Test doubles for the engine: a backend whose logits are a hash of the tokens it reads back
// from its own KV pools (so wrong block tables change the output), and a piece-wise text stream.
#pragma once
#include <cstdint>
#include <deque>
#include <memory>
#include <random>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "engine/choice_output.h"
#include "engine/engine.h"
#include "engine/sampler.h"
#include "model/config.h"

namespace striker::testing {

inline uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Logits for the next token after `history`: deterministic, in [-4, 4).
inline std::vector<float> reference_logits(const std::vector<int32_t>& history, int64_t vocab) {
  uint64_t h = 1469598103934665603ull;
  for (int32_t t : history) h = mix64(h ^ uint64_t(uint32_t(t)));
  std::vector<float> row(static_cast<size_t>(vocab));
  for (int64_t v = 0; v < vocab; ++v) row[size_t(v)] = float(mix64(h + uint64_t(v)) >> 40) / float(1 << 24) * 8.0f - 4.0f;
  return row;
}

// The tiny model most engine tests run: a 32-token vocabulary, a sliding window of 8, eos 31.
constexpr int64_t kTinyVocab = 32;
constexpr int64_t kTinyWindow = 8;
constexpr int32_t kTinyEos = 31;

inline FlintConfig tiny_model(int64_t vocab, int64_t window, int64_t max_pos) {
  FlintConfig c;
  c.vocab_size = vocab;
  c.num_hidden_layers = 2;
  c.layer_types = {LayerType::Sliding, LayerType::Full};
  c.sliding_window = window;
  c.max_position_embeddings = max_pos;
  return c;
}

// The engine of most engine tests: room for 8 sequences of up to 64 tokens in 4-token blocks (the
// fake backend's 100 bytes per token: 1,000 blocks, never short), steps of up to 16 tokens.
inline EngineConfig small_engine_config() {
  EngineConfig c;
  c.max_model_len = 64;
  c.max_num_seqs = 8;
  c.max_num_batched_tokens = 16;
  c.block_size = 4;
  c.kv_cache_bytes = 400 * 1000;
  return c;
}

// Seeded sampling that ignores end-of-sequence tokens: exactly max_tokens tokens.
inline SamplingParams seeded_params(uint64_t seed, int32_t max_tokens) {
  SamplingParams p;
  p.seed = seed;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  return p;
}

// Greedy sampling that ignores end-of-sequence tokens: exactly max_tokens tokens.
inline SamplingParams greedy_params(int32_t max_tokens) {
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  return p;
}

// The engine of the masked-step tests (grammar, thinking budget): room for 8 sequences of up to
// 128 tokens in 4-token blocks, steps of up to 64 tokens, the given end-of-sequence token, and
// speculation / async scheduling as the test asks.
inline EngineConfig masked_steps_config(int32_t eos, const SpeculativeConfig& speculative, bool async) {
  EngineConfig cfg = small_engine_config();
  cfg.max_model_len = 128;
  cfg.max_num_batched_tokens = 64;
  cfg.eos_token_ids = {eos};
  cfg.speculative = speculative;
  cfg.async_scheduling = async;
  return cfg;
}

struct FakeBackendLog {
  std::vector<ForwardBatch> batches;
};

class FakeBackend : public Backend {
 public:
  // bytes per block: 100 per token in each pool, so budgets are easy to compute by hand.
  // `context` > 0: the logits depend on the last `context` tokens only (the whole history is still
  // read back from the pools), so outputs repeat themselves as text does and n-gram guesses hit.
  FakeBackend(int64_t vocab, int64_t window, std::shared_ptr<FakeBackendLog> log = nullptr, int64_t context = 0)
      : vocab_(vocab), window_(window), context_(context), log_(std::move(log)) {}
  std::string name() const override { return "fake"; }
  int64_t full_block_bytes(int32_t b) const override { return 100 * b; }
  int64_t sliding_block_bytes(int32_t b) const override { return 100 * b; }
  void allocate_kv_cache(const KvCacheSpec& spec) override {
    spec_ = spec;
    full_.assign(size_t(spec.num_full_blocks * spec.block_size), -1);
    sliding_.assign(size_t(spec.num_sliding_blocks * spec.block_size), -1);
  }
  void forward(const ForwardBatch& batch, std::vector<float>& logits) override {
    if (log_) log_->batches.push_back(batch);
    check_disjoint(batch);
    logits.clear();
    for (const auto& s : batch.seqs) {
      for (size_t i = 0; i < s.tokens.size(); ++i) {
        const int64_t p = s.start_pos + int64_t(i);
        slot(full_, s.full_block_table, p, "full") = s.tokens[i];
        slot(sliding_, s.sliding_block_table, p, "sliding") = s.tokens[i];
        if (s.all_logits || i + 1 == s.tokens.size()) {
          std::vector<int32_t> history = read_history(s, p);
          if (context_ > 0 && int64_t(history.size()) > context_) history.erase(history.begin(), history.end() - context_);
          auto row = reference_logits(history, vocab_);
          logits.insert(logits.end(), row.begin(), row.end());
        }
      }
    }
  }

 private:
  int32_t& slot(std::vector<int32_t>& pool, const std::vector<int32_t>& table, int64_t p, const char* which) {
    const int64_t b = p / spec_.block_size;
    if (b >= int64_t(table.size()) || table[size_t(b)] < 0)
      throw std::runtime_error(std::string("fake backend: no ") + which + " block for position " + std::to_string(p));
    return pool[size_t(table[size_t(b)] * spec_.block_size + p % spec_.block_size)];
  }
  // Reads positions 0..p back from the full pool and checks the sliding window agrees.
  std::vector<int32_t> read_history(const SequenceChunk& s, int64_t p) {
    std::vector<int32_t> h;
    for (int64_t q = 0; q <= p; ++q) {
      const int32_t t = slot(full_, s.full_block_table, q, "full");
      if (p - q < window_ && slot(sliding_, s.sliding_block_table, q, "sliding") != t)
        throw std::runtime_error("fake backend: sliding and full pools disagree at position " + std::to_string(q));
      h.push_back(t);
    }
    return h;
  }
  // Sequences may share blocks (prefix caching) but never one that the step writes: a block
  // written this step belongs to exactly one table of the batch.
  void check_disjoint(const ForwardBatch& batch) const {
    const int64_t B = spec_.block_size;
    for (const bool sliding : {false, true}) {
      std::set<int32_t> written;
      std::multiset<int32_t> listed;
      for (const auto& s : batch.seqs) {
        const auto& table = sliding ? s.sliding_block_table : s.full_block_table;
        for (int64_t b = s.start_pos / B; b <= (s.start_pos + int64_t(s.tokens.size()) - 1) / B; ++b)
          if (b < int64_t(table.size())) written.insert(table[size_t(b)]);
        std::set<int32_t> own(table.begin(), table.end());
        own.erase(-1);
        listed.insert(own.begin(), own.end());
      }
      for (int32_t id : written)
        if (listed.count(id) > 1)
          throw std::runtime_error(std::string("fake backend: ") + (sliding ? "sliding" : "full") + " block " +
                                   std::to_string(id) + " is written by one sequence and listed by another");
    }
  }

  int64_t vocab_, window_, context_;
  std::shared_ptr<FakeBackendLog> log_;
  KvCacheSpec spec_;
  std::vector<int32_t> full_, sliding_;
};

// A backend that "samples on the device" by calling the CPU reference sampler (the draw a GPU must
// match) on the fake's logits, computes logprobs within `limits_` and sends back only the rows
// asked for, counting what it did.
class DeviceSamplingFake : public FakeBackend {
 public:
  DeviceSamplingFake(int64_t vocab, int64_t window, int64_t context = 0)
      : FakeBackend(vocab, window, nullptr, context), vocab_(vocab) {}
  bool samples_on_device() const override { return true; }
  DeviceLogprobLimits device_logprobs() const override { return limits_; }
  void forward(const ForwardBatch&, std::vector<float>&) override {
    throw std::logic_error("device-sampling fake: the engine called forward() instead of forward_sampled()");
  }
  void forward_sampled(const ForwardBatch& batch, const DeviceSampling& ds, SampledStep& out) override {
    std::vector<float> all;
    FakeBackend::forward(batch, all);
    if (ds.wait_for_masks) ds.wait_for_masks();  // the contract: masks are read only after this
    const size_t rows = all.size() / size_t(vocab_);
    auto row = [&](int32_t r) {
      if (r < 0 || size_t(r) >= rows) throw std::logic_error("device-sampling fake: row " + std::to_string(r) + " out of range");
      return std::span<const float>(all.data() + size_t(r) * vocab_, size_t(vocab_));
    };
    out.tokens.clear();
    out.logits.clear();
    out.logprobs.clear();
    int32_t lp_rows = 0;
    for (const SampleRequest& sr : ds.samples) {
      out.tokens.push_back(sample_request(row(sr.row), sr, scratch_));
      if (sr.top_logprobs < 0) continue;
      if (sr.top_logprobs > limits_.max_top || ++lp_rows > limits_.rows)
        throw std::logic_error("device-sampling fake: logprobs asked beyond device_logprobs()");
      // The raw row (sample_request edits a copy): what a device computes before its edits.
      const TokenLogprob lp = token_logprob(row(sr.row), out.tokens.back(), sr.top_logprobs);
      out.logprobs.push_back(SampledLogprobs{lp.logprob, lp.top});
    }
    out.prompt_logprobs.clear();
    if (int64_t(ds.prompt_logprobs.size()) > limits_.prompt_rows)
      throw std::logic_error("device-sampling fake: more prompt logprob rows than device_logprobs() allows");
    for (const RowLogprobRequest& q : ds.prompt_logprobs) {
      if (q.top_n > limits_.max_top) throw std::logic_error("device-sampling fake: prompt top_n beyond device_logprobs()");
      const TokenLogprob lp = token_logprob(row(q.row), q.token, q.top_n);
      out.prompt_logprobs.push_back(SampledLogprobs{lp.logprob, lp.top, lp.rank});
    }
    for (int32_t r : ds.return_rows) out.logits.insert(out.logits.end(), row(r).begin(), row(r).end());
    samples_ += int64_t(ds.samples.size());
    returned_ += int64_t(ds.return_rows.size());
    device_lp_ += lp_rows;
    device_prompt_ += int64_t(ds.prompt_logprobs.size());
  }
  int64_t samples_ = 0, returned_ = 0, device_lp_ = 0, device_prompt_ = 0;
  DeviceLogprobLimits limits_;

 private:
  int64_t vocab_;
  std::vector<float> scratch_;
};

// DeviceSamplingFake that also runs steps asynchronously (Backend::launch_sampled / collect_sampled):
// a launch computes at once, as a GPU stream would in launch order, taking a chunk's token from the
// previous launch's draws where SequenceChunk::token_from_sample says so (the fake's logits depend
// on every token it reads back from its KV pools, so a wrong token changes the output); a collect
// hands the oldest launch's results over. It checks the engine's side of the contract: at most two
// launches uncollected, tokens taken only from an uncollected launch, no rows asked by a launch
// made while another is uncollected, and no two uncollected launches reading grammar masks (a
// launch's mask wait may collect the previous one first).
class AsyncDeviceSamplingFake : public DeviceSamplingFake {
 public:
  using DeviceSamplingFake::DeviceSamplingFake;
  bool supports_async_steps() const override { return true; }
  void launch_sampled(const ForwardBatch& batch, const DeviceSampling& ds) override {
    if (pending_.size() >= 2) throw std::logic_error("async fake: a third launch before the first was collected");
    const std::vector<int32_t>* prev = pending_.empty() ? nullptr : &pending_.back().tokens;
    if (prev && !ds.return_rows.empty())
      throw std::logic_error("async fake: a launch ahead of an uncollected one asks for rows back");
    ForwardBatch resolved = batch;
    for (SequenceChunk& c : resolved.seqs) {
      if (c.token_from_sample < 0) continue;
      if (!prev || size_t(c.token_from_sample) >= prev->size() || c.tokens.size() != 1)
        throw std::logic_error("async fake: token_from_sample " + std::to_string(c.token_from_sample) +
                               " names no draw of an uncollected launch");
      c.tokens[0] = (*prev)[size_t(c.token_from_sample)];
      ++resolved_tokens_;
    }
    const bool ahead = prev != nullptr;
    const bool masks = has_masks(ds);
    pending_.emplace_back();
    DeviceSampling checked = ds;  // the masks are read after the wait: both uncollected steps may not read them
    checked.wait_for_masks = [&] {
      if (ds.wait_for_masks) ds.wait_for_masks();  // may collect the previous launch
      if (masks && pending_.size() > 1 && pending_.front().masks_read)
        throw std::logic_error("async fake: two uncollected launches read grammar masks");
      checked.samples = ds.samples;  // as the engine completed them (a penalty's counts)
    };
    forward_sampled(resolved, checked, pending_.back());
    pending_.back().masks_read = masks;
    ++launches_;
    if (ahead) ++ahead_launches_;
  }
  void collect_sampled(SampledStep& out) override {
    if (pending_.empty()) throw std::logic_error("async fake: collect without an uncollected launch");
    if (fail_collect_at_ >= 0 && collects_++ == fail_collect_at_) {
      pending_.pop_front();
      throw std::runtime_error("async fake: injected device failure");
    }
    out = std::move(static_cast<SampledStep&>(pending_.front()));
    pending_.pop_front();
  }
  size_t uncollected() const { return pending_.size(); }
  int64_t launches_ = 0, ahead_launches_ = 0, resolved_tokens_ = 0;
  int64_t fail_collect_at_ = -1;  // >= 0: that collect (0-based) throws

 private:
  static bool has_masks(const DeviceSampling& ds) {
    for (const SampleRequest& r : ds.samples)
      if (r.allowed) return true;
    return false;
  }
  struct Pending : SampledStep {
    bool masks_read = false;
  };
  std::deque<Pending> pending_;
  int64_t collects_ = 0;
};

// Random sampling parameters exercising every knob of the engine's draw (greedy or tempered,
// top_k / top_p / min_p, the three penalties, logit_bias, logprobs, prompt logprobs, n), for the
// workloads that compare two ways of running the same requests.
inline SamplingParams random_sampling_params(std::mt19937& rng, int64_t vocab, int32_t eos, int32_t max_tokens_cap,
                                             int32_t max_n) {
  SamplingParams p;
  p.seed = rng();
  p.max_tokens = 1 + int32_t(rng() % uint32_t(max_tokens_cap));
  p.min_tokens = int32_t(rng() % uint32_t(p.max_tokens + 1));
  p.temperature = (rng() % 4 == 0) ? 0.f : 0.4f + float(rng() % 10) * 0.1f;
  p.top_k = int32_t(rng() % 8);
  p.top_p = (rng() % 2) ? 1.f : 0.7f;
  p.min_p = (rng() % 3 == 0) ? 0.1f : 0.f;
  p.n = 1 + int32_t(rng() % uint32_t(max_n));
  p.repetition_penalty = (rng() % 3 == 0) ? 1.3f : 1.f;
  p.frequency_penalty = (rng() % 3 == 0) ? 0.6f : 0.f;
  p.presence_penalty = (rng() % 3 == 0) ? -0.4f : 0.f;
  if (rng() % 3 == 0) p.logit_bias = {{int32_t(rng() % uint64_t(vocab)), 2.5f}, {eos, -1.f}};
  if (rng() % 4 == 0) p.logprobs = int32_t(rng() % 3);
  if (rng() % 5 == 0) p.prompt_logprobs = 1;
  return p;
}

// Token id v reads as pieces[v] (or "<v>" past the table).
class PieceTextStream : public TokenTextStream {
 public:
  explicit PieceTextStream(std::vector<std::string> pieces) : pieces_(std::move(pieces)) {}
  std::string push(int32_t id) override {
    return size_t(id) < pieces_.size() ? pieces_[size_t(id)] : "<" + std::to_string(id) + ">";
  }
  std::string flush() override { return ""; }

 private:
  std::vector<std::string> pieces_;
};

inline TextStreamFactory piece_text(std::vector<std::string> pieces) {
  return [pieces](bool) { return std::make_unique<PieceTextStream>(pieces); };
}

}  // namespace striker::testing
