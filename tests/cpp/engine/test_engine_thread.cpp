// The threaded engine: requests from other threads, completion through callbacks, abort,
// shutdown with requests in flight, and no work while idle.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "core/error.h"
#include "engine/engine_core.h"
#include "fakes.h"

using namespace striker;
using namespace striker::testing;
using namespace std::chrono_literals;

namespace {

constexpr int64_t kVocab = 32;
constexpr int64_t kWindow = 8;

// Counts forward calls and can slow them down, so a test can act while a request runs.
class CountingBackend : public FakeBackend {
 public:
  CountingBackend(std::atomic<int>& calls, std::chrono::milliseconds delay)
      : FakeBackend(kVocab, kWindow), calls_(calls), delay_(delay) {}
  void forward(const ForwardBatch& b, std::vector<float>& logits) override {
    ++calls_;
    std::this_thread::sleep_for(delay_);
    FakeBackend::forward(b, logits);
  }

 private:
  std::atomic<int>& calls_;
  std::chrono::milliseconds delay_;
};

// Fails the forward calls whose number is in `fail_on` (1-based), like a backend error would.
class FailingBackend : public FakeBackend {
 public:
  explicit FailingBackend(std::vector<int> fail_on) : FakeBackend(kVocab, kWindow), fail_on_(std::move(fail_on)) {}
  void forward(const ForwardBatch& b, std::vector<float>& logits) override {
    ++calls_;
    for (int n : fail_on_)
      if (n == calls_) throw std::runtime_error("device fault in step " + std::to_string(calls_));
    FakeBackend::forward(b, logits);
  }

 private:
  std::vector<int> fail_on_;
  int calls_ = 0;
};

struct Results {
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::string, std::vector<int32_t>> tokens;
  std::map<std::string, FinishReason> finish;
  std::map<std::string, std::string> error;
  int finished = 0;

  OutputCallback callback() {
    return [this](const RequestOutput& o) {
      std::lock_guard lock(mu);
      for (const auto& d : o.choices) {
        auto& t = tokens[o.request_id];
        t.insert(t.end(), d.new_tokens.begin(), d.new_tokens.end());
        if (d.finish) finish[o.request_id] = *d.finish;
      }
      if (!o.error.empty()) error[o.request_id] = o.error;
      if (o.finished) ++finished;
      cv.notify_all();
    };
  }
  bool wait_for(int n) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, 10s, [&] { return finished >= n; });
  }
};

std::unique_ptr<Engine> start(std::atomic<int>& calls, std::chrono::milliseconds delay = 0ms) {
  return make_engine_with_text(small_engine_config(), tiny_model(kVocab, kWindow, 256),
                               std::make_unique<CountingBackend>(calls, delay), piece_text({}));
}

}  // namespace

TEST(EngineThread, RequestsFromSeveralThreadsMatchTheSynchronousCore) {
  std::map<std::string, std::vector<int32_t>> expected;
  {
    FakeBackend backend(kVocab, kWindow);
    EngineCore core(small_engine_config(), tiny_model(kVocab, kWindow, 256), backend, piece_text({}));
    for (int i = 0; i < 6; ++i)
      core.add_request({"r" + std::to_string(i), {1, 2, int32_t(i)}, seeded_params(uint64_t(i), 10)},
                       [&](const RequestOutput& o) {
                         for (const auto& d : o.choices)
                           expected[o.request_id].insert(expected[o.request_id].end(), d.new_tokens.begin(),
                                                         d.new_tokens.end());
                       });
    while (core.has_work()) core.step();
  }
  std::atomic<int> calls{0};
  auto engine = start(calls);
  Results res;
  std::vector<std::thread> clients;
  for (int i = 0; i < 6; ++i)
    clients.emplace_back([&, i] {
      engine->add_request({"r" + std::to_string(i), {1, 2, int32_t(i)}, seeded_params(uint64_t(i), 10)},
                          res.callback());
    });
  for (auto& t : clients) t.join();
  ASSERT_TRUE(res.wait_for(6));
  EXPECT_EQ(res.tokens, expected);
  // Idle: stats settle and no more forward passes happen.
  std::this_thread::sleep_for(50ms);
  const int after = calls.load();
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(calls.load(), after);
  EngineStats s = engine->stats();
  EXPECT_EQ(s.num_running, 0);
  EXPECT_EQ(s.num_waiting, 0);
  EXPECT_EQ(s.kv_usage, 0);
  EXPECT_EQ(s.generation_tokens_total, 60);
  // A finished request's id may be reused.
  engine->add_request({"r0", {3}, seeded_params(1, 2)}, res.callback());
  ASSERT_TRUE(res.wait_for(7));
}

// The server answers a request from its final output; a /metrics scrape made after that
// answer must already count the request's tokens (CI once saw 11 of 12), and the id is free.
TEST(EngineThread, AFinishedRequestIsCountedAndItsIdFreeBeforeItsFinalOutputIsSent) {
  std::atomic<int> calls{0};
  auto engine = start(calls);
  Results res;
  Engine* e = engine.get();
  auto inner = res.callback();
  std::vector<int64_t> generated_at_finish;
  for (int i = 0; i < 3; ++i)
    engine->add_request({"m" + std::to_string(i), {1, 2, 3, 4}, seeded_params(uint64_t(i), 4)},
                        [&, e, inner](const RequestOutput& o) {
                          if (o.finished) {
                            const EngineStats s = e->stats();
                            EXPECT_GE(s.prompt_tokens_total, 4);
                            std::lock_guard lock(res.mu);
                            generated_at_finish.push_back(s.generation_tokens_total);
                          }
                          inner(o);
                        });
  ASSERT_TRUE(res.wait_for(3));
  {
    std::lock_guard lock(res.mu);
    ASSERT_EQ(generated_at_finish.size(), 3u);
    // Each request is counted (4 tokens) by the time its own final output is sent.
    for (size_t i = 0; i < 3; ++i) EXPECT_GE(generated_at_finish[i], int64_t(4 * (i + 1)));
    EXPECT_EQ(generated_at_finish.back(), 12);
  }
  // Its id is free by then too: a caller may reuse it from the final output's callback.
  std::atomic<bool> reused{false};
  engine->add_request({"again", {1, 2}, seeded_params(7, 2)}, [&, e, inner](const RequestOutput& o) {
    inner(o);
    if (o.finished && !reused.exchange(true)) {
      try {
        e->add_request({"again", {3, 4}, seeded_params(8, 2)}, inner);
      } catch (const std::exception& ex) {
        ADD_FAILURE() << "reusing a finished id: " << ex.what();
      }
    }
  });
  ASSERT_TRUE(res.wait_for(5));
  EXPECT_TRUE(reused.load());
  // No callback at all is allowed: the request runs, its id is freed, nothing is called.
  engine->add_request({"silent", {1, 2}, seeded_params(9, 2)}, nullptr);
  for (int i = 0; i < 500 && e->stats().generation_tokens_total < 12 + 4 + 2; ++i) std::this_thread::sleep_for(2ms);
  EXPECT_EQ(e->stats().generation_tokens_total, 12 + 4 + 2);
  engine->add_request({"silent", {3}, seeded_params(9, 1)}, res.callback());
  ASSERT_TRUE(res.wait_for(6));
}

TEST(EngineThread, AbortFromTheCallbackEndsTheRequestAtTheNextStep) {
  std::atomic<int> calls{0};
  auto engine = start(calls, 1ms);
  Results res;
  Engine* e = engine.get();
  auto inner = res.callback();
  engine->add_request({"a", {1, 2, 3}, seeded_params(1, 50)}, [&, e, inner](const RequestOutput& o) {
    inner(o);
    if (!o.finished) e->abort_request("a");
  });
  ASSERT_TRUE(res.wait_for(1));
  EXPECT_EQ(res.finish["a"], FinishReason::Abort);
  EXPECT_LE(res.tokens["a"].size(), 2u);
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(engine->stats().kv_usage, 0);
}

TEST(EngineThread, RejectionsThrowOnTheCallersThread) {
  std::atomic<int> calls{0};
  // 1 ms per step: "dup" stays active for ~40 ms, so the second add surely meets it (without
  // a delay the engine thread could finish all 40 steps before the caller's next line).
  auto engine = start(calls, 1ms);
  Results res;
  EXPECT_THROW(engine->add_request({"x", std::vector<int32_t>(60, 1), seeded_params(1, 10)}, res.callback()), Error);
  engine->add_request({"dup", {1}, seeded_params(1, 40)}, res.callback());
  EXPECT_THROW(engine->add_request({"dup", {1}, seeded_params(1, 4)}, res.callback()), Error);
  ASSERT_TRUE(res.wait_for(1));
}

TEST(EngineThread, ShutdownAbortsRequestsInFlight) {
  std::atomic<int> calls{0};
  auto engine = start(calls, 2ms);
  Results res;
  engine->add_request({"long", {1, 2}, seeded_params(1, 60)}, res.callback());
  std::this_thread::sleep_for(20ms);
  engine->shutdown();
  ASSERT_TRUE(res.wait_for(1));
  EXPECT_EQ(res.finish["long"], FinishReason::Abort);
  EXPECT_THROW(engine->add_request({"late", {1}, seeded_params(1, 4)}, res.callback()), Error);
}

TEST(EngineThread, ShutdownAnswersRequestsStillInTheInbox) {
  std::atomic<int> calls{0};
  auto engine = start(calls, 50ms);
  Results res;
  engine->add_request({"running", {1, 2}, seeded_params(1, 60)}, res.callback());
  {
    std::unique_lock lock(res.mu);
    ASSERT_TRUE(res.cv.wait_for(lock, 10s, [&] { return !res.tokens["running"].empty(); }));
  }
  SamplingParams two = seeded_params(2, 5);
  two.n = 2;
  engine->add_request({"queued", {3, 4}, two}, res.callback());  // lands while a step sleeps
  engine->shutdown();
  ASSERT_TRUE(res.wait_for(2));
  EXPECT_EQ(res.finish["running"], FinishReason::Abort);
  EXPECT_EQ(res.finish["queued"], FinishReason::Abort);
}

// A failed step ends the requests in it with the failure in RequestOutput::error (the server turns
// it into a 500), and the engine keeps serving the next request.
TEST(EngineThread, AFailedStepEndsItsRequestsWithTheErrorAndTheEngineGoesOn) {
  auto engine = make_engine_with_text(small_engine_config(), tiny_model(kVocab, kWindow, 256),
                                      std::make_unique<FailingBackend>(std::vector<int>{2}), piece_text({}));
  Results res;
  engine->add_request({"hit", {1, 2}, seeded_params(1, 5)}, res.callback());
  ASSERT_TRUE(res.wait_for(1));
  EXPECT_EQ(res.finish["hit"], FinishReason::Abort);
  EXPECT_NE(res.error["hit"].find("device fault in step 2"), std::string::npos) << res.error["hit"];
  engine->add_request({"after", {3, 4}, seeded_params(2, 4)}, res.callback());
  ASSERT_TRUE(res.wait_for(2));
  EXPECT_EQ(res.tokens["after"].size(), 4u);
  EXPECT_EQ(res.error.count("after"), 0u);
}

// A request the core refuses after the engine's validation (a bug, not user input: here its text
// stream cannot be made) still gets a final output carrying the reason, its id is free again, and
// the engine keeps serving. Before, the refusal was only logged and the client waited forever.
TEST(EngineThread, ARequestTheCoreRefusesIsAnsweredWithItsError) {
  TextStreamFactory text = [inner = piece_text({})](bool skip_special_tokens) {
    if (!skip_special_tokens) throw Error("no text stream with special tokens in this test");
    return inner(skip_special_tokens);
  };
  auto engine = make_engine_with_text(small_engine_config(), tiny_model(kVocab, kWindow, 256),
                                      std::make_unique<FakeBackend>(kVocab, kWindow), std::move(text));
  Results res;
  SamplingParams refused = seeded_params(1, 5);
  refused.skip_special_tokens = false;
  refused.n = 2;
  engine->add_request({"refused", {1, 2}, refused}, res.callback());
  ASSERT_TRUE(res.wait_for(1));
  EXPECT_EQ(res.finish["refused"], FinishReason::Abort);
  EXPECT_NE(res.error["refused"].find("no text stream with special tokens"), std::string::npos) << res.error["refused"];
  EXPECT_TRUE(res.tokens["refused"].empty());
  engine->add_request({"refused", {3, 4}, seeded_params(2, 4)}, res.callback());  // the id was freed
  ASSERT_TRUE(res.wait_for(2));
  EXPECT_EQ(res.tokens["refused"].size(), 4u);
  EXPECT_EQ(engine->stats().num_waiting, 0);
}

TEST(EngineThread, PrefixCacheResetAndKvEventsFromOtherThreads) {
  std::atomic<int> calls{0};
  EngineConfig cfg = small_engine_config();
  cfg.enable_kv_events = true;
  auto engine = make_engine_with_text(cfg, tiny_model(kVocab, kWindow, 256),
                                      std::make_unique<CountingBackend>(calls, 20ms), piece_text({}));
  Results res;
  const std::vector<int32_t> prompt = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  engine->add_request({"a", prompt, seeded_params(1, 6)}, res.callback());
  while (calls.load() == 0) std::this_thread::sleep_for(1ms);
  EXPECT_FALSE(engine->reset_prefix_cache());  // "a" holds blocks
  ASSERT_TRUE(res.wait_for(1));
  std::this_thread::sleep_for(30ms);  // the step that finished "a" publishes its events after the callback
  std::vector<KvEvent> events = engine->take_kv_events();
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.front().type, KvEvent::Type::BlockStored);
  EXPECT_EQ(events.front().token_ids, std::vector<int32_t>(prompt.begin(), prompt.begin() + 8));
  EXPECT_TRUE(engine->take_kv_events().empty());  // drained
  engine->add_request({"b", prompt, seeded_params(1, 6)}, res.callback());
  ASSERT_TRUE(res.wait_for(2));
  EXPECT_EQ(res.tokens["b"], res.tokens["a"]);
  EXPECT_EQ(engine->stats().prefix_cache_hits, 8);
  EXPECT_TRUE(engine->reset_prefix_cache());
  std::this_thread::sleep_for(30ms);
  EXPECT_EQ(engine->take_kv_events().back().type, KvEvent::Type::AllBlocksCleared);
  engine->shutdown();
  EXPECT_THROW(engine->reset_prefix_cache(), Error);
}
