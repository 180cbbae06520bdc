// Moves KV events from where they are recorded (the engine) to the publisher on a thread of its
// own: a poll every `interval` takes what accumulated and publishes it as one batch, as vLLM
// publishes one batch per engine step; nothing is published for a poll that found none.
#pragma once
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "kv_events/kv_event_publisher.h"

namespace striker::kv_events {

class EventPump {
 public:
  using Source = std::function<std::vector<WireEvent>()>;
  EventPump(Source source, KvEventPublisher& publisher,
            std::chrono::milliseconds interval = std::chrono::milliseconds(10));
  ~EventPump();  // one last poll, so what the engine recorded before shutdown still goes out
  EventPump(const EventPump&) = delete;
  EventPump& operator=(const EventPump&) = delete;

 private:
  void poll();

  Source source_;
  KvEventPublisher& publisher_;
  std::chrono::milliseconds interval_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace striker::kv_events
