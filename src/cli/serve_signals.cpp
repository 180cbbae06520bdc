#include "cli/serve_signals.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace striker::cli {

namespace {

sigset_t shutdown_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

}  // namespace

void ServeSignals::block() {
  const sigset_t set = shutdown_signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

ServeSignals::ServeSignals(server::OpenAIServer& server) : server_(server), thread_([this] { run(); }) {}

ServeSignals::~ServeSignals() {
  closing_ = true;
  // A blocked signal aimed at that thread wakes its sigwait (or waits for it, if it is busy).
  pthread_kill(thread_.native_handle(), SIGTERM);
  thread_.join();
}

void ServeSignals::run() {
  const sigset_t set = shutdown_signals();
  auto& server = server_;
  for (;;) {
    int sig = 0;
    sigwait(&set, &sig);
    if (closing_) return;
    const char* name = sig == SIGINT ? "SIGINT" : "SIGTERM";
    const int n = ++count_;
    if (n == 1 && !server.ready()) {
      std::fprintf(stderr, "striker serve: %s received while loading the model; exiting\n", name);
      std::fflush(stderr);
      std::_Exit(0);
    }
    if (n == 1) {
      std::fprintf(stderr,
                   "striker serve: %s received, draining: /health and new requests answer 503, %d running "
                   "request(s) may finish (a second signal exits at once)\n",
                   name, server.in_flight());
      server.begin_drain();
    } else if (n == 2) {
      std::fprintf(stderr, "striker serve: second signal (%s): aborting %d running request(s) and exiting\n", name,
                   server.in_flight());
      server.request_stop();
      // Handlers notice the abort within ~50 ms and send their clients a 503; should one hang
      // on a stalled client, the process still ends.
      std::thread([] {
        std::this_thread::sleep_for(std::chrono::seconds(3));
        std::fprintf(stderr, "striker serve: forced exit\n");
        std::_Exit(1);
      }).detach();
    }
    std::fflush(stderr);
    {
      std::lock_guard<std::mutex> lock(mu_);
    }
    cv_.notify_all();
  }
}

bool ServeSignals::wait_for_shutdown() {
  std::unique_lock<std::mutex> lock(mu_);
  while (count_.load() == 0) {
    if (!server_.running()) return false;
    cv_.wait_for(lock, std::chrono::milliseconds(200));
  }
  return true;
}

}  // namespace striker::cli
