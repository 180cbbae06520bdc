// Test doubles for the HTTP server tests: a tokenizer over single characters and an engine that
// "generates" from a fixed script on its own thread, recording aborts.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "engine/engine.h"
#include "tokenizer/tokenizer.h"

namespace striker::testing {

// Token id = byte value (vocab 256); decode concatenates the bytes.
class ByteTokenizer : public Tokenizer {
 public:
  std::vector<int32_t> encode(std::string_view text, bool) const override {
    std::vector<int32_t> out;
    for (unsigned char c : text) out.push_back(c);
    return out;
  }
  std::string decode(std::span<const int32_t> ids, bool) const override {
    std::string s;
    for (int32_t id : ids) s.push_back(char(id));
    return s;
  }
  std::optional<int32_t> token_to_id(std::string_view t) const override {
    if (t.size() == 1) return int32_t(static_cast<unsigned char>(t[0]));
    return std::nullopt;
  }
  std::optional<std::string> id_to_token(int32_t id) const override { return std::string(1, char(id)); }
  int64_t vocab_size() const override { return 256; }
  bool is_special(int32_t) const override { return false; }
};

// Each request generates the letters of `script` cyclically (choice c starts at offset c), one
// token per step every `step` ms, until max_tokens ("length") or a stop string ("stop").
// Requests whose max_tokens exceed `hold_threshold` never finish on their own (for abort tests).
class ScriptedEngine : public Engine {
 public:
  explicit ScriptedEngine(std::string script = "hello world ", int step_ms = 1)
      : script_(std::move(script)), step_ms_(step_ms), thread_([this] { loop(); }) {}
  ~ScriptedEngine() override { shutdown(); }

  void add_request(GenerationRequest request, OutputCallback on_output) override {
    if (int64_t(request.prompt.size()) + request.params.max_tokens > 4096) throw Error("too long for the fake engine");
    std::lock_guard<std::mutex> lock(mu_);
    if (active_.count(request.request_id)) throw Error("request id '" + request.request_id + "' is already in use");
    Active a{std::move(request), std::move(on_output), {}, {}};
    a.produced.assign(size_t(a.req.params.n), 0);
    a.done.assign(size_t(a.req.params.n), false);
    prompt_tokens_total_ += int64_t(a.req.prompt.size());
    active_.emplace(a.req.request_id, std::move(a));
    cv_.notify_one();
  }
  void abort_request(const std::string& id) override {
    std::lock_guard<std::mutex> lock(mu_);
    aborted_.insert(id);
    pending_aborts_.insert(id);
  }
  EngineStats stats() const override {
    std::lock_guard<std::mutex> lock(mu_);
    EngineStats s;
    s.num_running = int64_t(active_.size());
    s.kv_usage = active_.empty() ? 0.0 : 0.5;
    s.kv_capacity_tokens = 4096;
    s.max_concurrency = 1;
    s.prompt_tokens_total = prompt_tokens_total_;
    s.generation_tokens_total = generation_tokens_total_;
    return s;
  }
  bool reset_prefix_cache() override {
    std::lock_guard<std::mutex> lock(mu_);
    ++num_resets;
    return active_.empty();  // as the engine: refused while requests hold blocks
  }
  std::vector<KvEvent> take_kv_events() override { return {}; }
  void shutdown() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
      stopping_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  std::set<std::string> aborted() const {
    std::lock_guard<std::mutex> lock(mu_);
    return aborted_;
  }
  std::vector<GenerationRequest> received() const {
    std::lock_guard<std::mutex> lock(mu_);
    return received_;
  }
  size_t num_active() const {
    std::lock_guard<std::mutex> lock(mu_);
    return active_.size();
  }
  int num_resets = 0;
  int32_t hold_threshold = 1000;  // max_tokens above this: generate forever (until aborted)
  bool stop_at_script_end = false;  // finish "stop" (stop_reason "151338") after one pass of the script

 private:
  struct Active {
    GenerationRequest req;
    OutputCallback cb;
    std::vector<int32_t> produced;
    std::vector<bool> done;
  };

  void loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stopping_) {
      cv_.wait_for(lock, std::chrono::milliseconds(step_ms_));
      std::vector<std::pair<OutputCallback, RequestOutput>> outs;
      for (auto it = active_.begin(); it != active_.end();) {
        Active& a = it->second;
        RequestOutput out;
        out.request_id = a.req.request_id;
        out.prompt_tokens = int64_t(a.req.prompt.size());
        const bool abort = pending_aborts_.erase(a.req.request_id) > 0;
        if (!received_logged_.count(a.req.request_id)) {
          received_logged_.insert(a.req.request_id);
          received_.push_back(a.req);
        }
        bool all_done = true;
        for (int32_t c = 0; c < a.req.params.n; ++c) {
          if (a.done[size_t(c)]) continue;
          ChoiceDelta d;
          d.index = c;
          if (abort) {
            d.finish = FinishReason::Abort;
            a.done[size_t(c)] = true;
            out.choices.push_back(d);
            continue;
          }
          const char ch = script_[size_t(a.produced[size_t(c)] + c) % script_.size()];
          d.new_tokens = {int32_t(static_cast<unsigned char>(ch))};
          d.new_text = std::string(1, ch);
          if (a.req.params.logprobs) {
            TokenLogprob lp{d.new_tokens[0], -0.5f, {}};
            for (int32_t k = 0; k < *a.req.params.logprobs; ++k) lp.top.push_back({int32_t('a' + k), -1.0f - float(k)});
            d.logprobs.push_back(lp);
          }
          ++a.produced[size_t(c)];
          ++generation_tokens_total_;
          const bool forever = a.req.params.max_tokens > hold_threshold;
          if (stop_at_script_end && a.produced[size_t(c)] + c >= int32_t(script_.size()) &&
              a.produced[size_t(c)] < a.req.params.max_tokens) {
            d.finish = FinishReason::Stop;
            d.stop_reason = "151338";
            a.done[size_t(c)] = true;
          } else if (!forever && a.produced[size_t(c)] >= a.req.params.max_tokens) {
            d.finish = FinishReason::Length;
            a.done[size_t(c)] = true;
          }
          out.choices.push_back(d);
          if (!a.done[size_t(c)]) all_done = false;
        }
        out.finished = abort || all_done;
        int64_t total = 0;
        for (auto p : a.produced) total += p;
        out.completion_tokens = total;
        outs.emplace_back(a.cb, out);
        if (out.finished) it = active_.erase(it);
        else ++it;
      }
      lock.unlock();
      for (auto& [cb, out] : outs) cb(out);
      lock.lock();
    }
  }

  std::string script_;
  int step_ms_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Active> active_;
  std::set<std::string> aborted_, pending_aborts_, received_logged_;
  std::vector<GenerationRequest> received_;
  int64_t prompt_tokens_total_ = 0, generation_tokens_total_ = 0;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace striker::testing
