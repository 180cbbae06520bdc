// SIGINT / SIGTERM for `striker serve`, as vLLM with --shutdown-timeout and uvicorn do: the first
// signal starts a graceful drain (/health and new requests answer 503, running requests finish),
// a second one aborts what still runs and exits at once. A signal while the model is still
// loading exits at once: there is nothing to drain.
#pragma once
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "server/openai_server.h"

namespace striker::cli {

class ServeSignals {
 public:
  // Blocks SIGINT and SIGTERM in the calling thread, so every thread started later inherits the
  // mask and only ServeSignals' thread takes them. Call before any other thread starts.
  static void block();
  // Starts the thread that takes the signals; it acts on `server`, which must outlive this object.
  explicit ServeSignals(server::OpenAIServer& server);
  ~ServeSignals();
  ServeSignals(const ServeSignals&) = delete;
  ServeSignals& operator=(const ServeSignals&) = delete;

  // Blocks until the first signal (true) or until the listener ended on its own (false).
  bool wait_for_shutdown();
  bool forced() const { return count_.load() >= 2; }

 private:
  void run();

  server::OpenAIServer& server_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<int> count_{0};
  std::atomic<bool> closing_{false};
  std::thread thread_;
};

}  // namespace striker::cli
