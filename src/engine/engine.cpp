// The threaded engine: callers enqueue requests and aborts; one engine thread owns the
// EngineCore and runs step = schedule(); backend->forward(plan); update(). Idle, it sleeps on
// a condition variable.
#include "engine/engine.h"

#include <condition_variable>
#include <cstdio>
#include <future>
#include <iterator>
#include <mutex>
#include <set>
#include <thread>
#include <utility>

#include "core/error.h"
#include "core/log.h"
#include "engine/engine_core.h"

namespace striker {

namespace {

class ThreadedEngine : public Engine {
 public:
  ThreadedEngine(const EngineConfig& config, const FlintConfig& model, std::unique_ptr<Backend> backend,
                 TextStreamFactory text)
      : backend_(std::move(backend)), core_(config, model, *backend_, std::move(text)) {
    stats_ = core_.stats();
    thread_ = std::thread([this] { run(); });
  }
  ~ThreadedEngine() override { shutdown(); }

  void add_request(GenerationRequest request, OutputCallback on_output) override {
    validate_request(request, core_.limits());  // limits are immutable: safe off the engine thread
    std::lock_guard lock(mu_);
    if (stopping_) throw Error("the engine is shutting down");
    if (!active_ids_.insert(request.request_id).second)
      throw Error("request id '" + request.request_id + "' is already in use");
    stats_.num_waiting += request.params.n;  // visible at once; the next step recomputes it
    // A finished request's reply can reach its client before this step ends: the counters it
    // added (its tokens, its prefix-cache lookups) are published first, so a /metrics scrape
    // made after the reply always counts them, and its id is free again (a new request with it
    // reaches the core only after this step, when the old one is gone).
    auto publish_then_send = [this, send = std::move(on_output)](const RequestOutput& out) {
      if (out.finished) publish_finished(out.request_id);
      if (send) send(out);  // a caller may pass no callback (the core allows it too)
    };
    inbox_.push_back({std::move(request), std::move(publish_then_send)});
    cv_.notify_one();
  }

  void abort_request(const std::string& request_id) override {
    std::lock_guard lock(mu_);
    aborts_.push_back(request_id);
    cv_.notify_one();
  }

  EngineStats stats() const override {
    std::lock_guard lock(mu_);
    return stats_;
  }

  bool reset_prefix_cache() override {
    std::future<bool> done;
    {
      std::lock_guard lock(mu_);
      if (stopping_) throw Error("the engine is shutting down");
      done = resets_.emplace_back().get_future();
      cv_.notify_one();
    }
    return done.get();  // the engine thread answers between steps
  }

  std::vector<KvEvent> take_kv_events() override {
    std::lock_guard lock(mu_);
    return std::exchange(kv_events_, {});
  }

  void shutdown() override {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
      cv_.notify_one();
    }
    if (thread_.joinable()) thread_.join();
  }

 private:
  struct Pending {
    GenerationRequest request;
    OutputCallback on_output;
  };

  void run() {
    for (;;) {
      std::vector<Pending> inbox;
      std::vector<std::string> aborts;
      std::vector<std::promise<bool>> resets;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] {
          return stopping_ || !inbox_.empty() || !aborts_.empty() || !resets_.empty() || core_.has_work();
        });
        if (stopping_) break;
        inbox.swap(inbox_);
        aborts.swap(aborts_);
        resets.swap(resets_);
      }
      for (auto& p : inbox) {
        // add_request validated already, so a refusal here is a bug: logged, and the request still
        // gets its final output (with the reason as its error) rather than a client left waiting.
        // What that answer needs is kept before the request moves into the core.
        const Unqueued kept{p.request.request_id, int64_t(p.request.prompt.size()), p.request.params.n, p.on_output};
        try {
          core_.add_request(std::move(p.request), std::move(p.on_output));
        } catch (const std::exception& e) {
          logging::get("engine")->error("could not queue request {}: {}", kept.request_id, e.what());
          send_aborted(kept, std::string("the engine could not queue the request: ") + e.what());
        }
      }
      for (const auto& id : aborts) core_.abort_request(id);
      for (auto& r : resets) r.set_value(core_.reset_prefix_cache());
      try {
        if (core_.has_work()) core_.step();
      } catch (const std::exception& e) {
        logging::get("engine")->error("step failed, aborting every request: {}", e.what());
        core_.abort_all(std::string("engine step failed: ") + e.what());
      }
      publish();
    }
    core_.abort_all();
    // Requests accepted but never started still get their final (aborted) output.
    std::vector<Pending> never_started;
    {
      std::lock_guard lock(mu_);
      never_started.swap(inbox_);
      for (auto& r : resets_) r.set_exception(std::make_exception_ptr(Error("the engine is shutting down")));
      resets_.clear();
    }
    for (auto& p : never_started)
      send_aborted({p.request.request_id, int64_t(p.request.prompt.size()), p.request.params.n, p.on_output});
    publish();
  }

  // What a request's final output needs when the core never ran it.
  struct Unqueued {
    std::string request_id;
    int64_t prompt_tokens = 0;
    int32_t n = 1;
    OutputCallback on_output;
  };

  static void send_aborted(const Unqueued& p, std::string error = {}) {
    RequestOutput out;
    out.request_id = p.request_id;
    out.prompt_tokens = p.prompt_tokens;
    out.finished = true;
    out.error = std::move(error);
    for (int32_t c = 0; c < p.n; ++c) {
      ChoiceDelta d;
      d.index = c;
      d.finish = FinishReason::Abort;
      out.choices.push_back(std::move(d));
    }
    if (!p.on_output) return;
    try {
      p.on_output(out);
    } catch (const std::exception& e) {
      logging::get("engine")->error("output callback for request {} threw: {}", out.request_id, e.what());
    }
  }

  // After each step: its KV events and stats. (Finished ids were freed as their final outputs
  // went out: publish_finished.)
  void publish() {
    auto events = core_.take_kv_events();
    std::lock_guard lock(mu_);
    kv_events_.insert(kv_events_.end(), std::make_move_iterator(events.begin()), std::make_move_iterator(events.end()));
    publish_stats_locked();
  }

  // Engine thread only (it reads core_).
  void publish_finished(const std::string& request_id) {
    std::lock_guard lock(mu_);
    active_ids_.erase(request_id);
    publish_stats_locked();
  }
  void publish_stats_locked() {
    stats_ = core_.stats();
    for (const auto& p : inbox_) stats_.num_waiting += p.request.params.n;
  }

  std::unique_ptr<Backend> backend_;
  EngineCore core_;  // touched only by the engine thread after construction
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Pending> inbox_;
  std::vector<std::string> aborts_;
  std::vector<std::promise<bool>> resets_;
  std::vector<KvEvent> kv_events_;
  std::set<std::string> active_ids_;
  EngineStats stats_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace

std::unique_ptr<Engine> make_engine_with_text(const EngineConfig& config, const FlintConfig& model,
                                              std::unique_ptr<Backend> backend, TextStreamFactory text) {
  if (!backend) throw Error("make_engine: no backend");
  return std::make_unique<ThreadedEngine>(config, model, std::move(backend), std::move(text));
}

std::unique_ptr<Engine> make_engine(const EngineConfig& config, const FlintConfig& model,
                                    std::unique_ptr<Backend> backend, const Tokenizer& tokenizer) {
  return make_engine_with_text(config, model, std::move(backend), detokenizer_stream_factory(tokenizer));
}

}  // namespace striker
