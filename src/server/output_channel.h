// Hands engine outputs (produced on the engine thread) to the HTTP thread serving the request.
// The engine callback must not block, so push() only appends under a mutex.
#pragma once
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>

#include "engine/engine.h"

namespace striker::server {

class OutputChannel {
 public:
  void push(const RequestOutput& out) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(out);
      if (out.finished) finished_ = true;
    }
    cv_.notify_one();
  }

  // Waits up to `timeout` for the next output; nullopt on timeout (the caller then checks the client).
  std::optional<RequestOutput> pop(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, timeout, [&] { return !queue_.empty(); })) return std::nullopt;
    RequestOutput out = std::move(queue_.front());
    queue_.pop_front();
    return out;
  }

  bool finished() const {
    std::lock_guard<std::mutex> lock(mu_);
    return finished_;
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<RequestOutput> queue_;
  bool finished_ = false;
};

}  // namespace striker::server
