#include "kv_events/event_pump.h"

namespace striker::kv_events {

EventPump::EventPump(Source source, KvEventPublisher& publisher, std::chrono::milliseconds interval)
    : source_(std::move(source)), publisher_(publisher), interval_(interval) {
  thread_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stopping_) {
      cv_.wait_for(lock, interval_, [this] { return stopping_; });
      lock.unlock();
      poll();
      lock.lock();
    }
  });
}

EventPump::~EventPump() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
  poll();
}

void EventPump::poll() {
  auto events = source_();
  if (!events.empty()) publisher_.publish(std::move(events));
}

}  // namespace striker::kv_events
