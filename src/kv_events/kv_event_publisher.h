// vLLM's ZmqEventPublisher: KV event batches on a ZMQ PUB socket as [topic, seq, payload] (seq an
// 8-byte big-endian counter from 0, payload kv_event_wire's msgpack), the last `buffer_steps`
// batches kept for an optional ROUTER replay socket: a subscriber that saw a gap sends
// [empty, start_seq] and gets every kept batch from start_seq on as [empty, seq, payload], then
// [empty, -1, empty].
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "kv_events/kv_event_wire.h"
#include "kv_events/kv_events_config.h"

namespace zmq {
class context_t;
class socket_t;
}  // namespace zmq

namespace striker::kv_events {

class KvEventPublisher {
 public:
  // Binds or connects the sockets now (vLLM's rule: bind when the endpoint has a wildcard `*`,
  // `::` or is ipc:// / inproc://, else connect), so a bad endpoint fails at startup; throws
  // striker::Error naming it. The sending thread starts here.
  explicit KvEventPublisher(const KvEventsConfig& config, int32_t data_parallel_rank = 0);
  ~KvEventPublisher();  // sends what is queued (PUB never blocks), then closes
  KvEventPublisher(const KvEventPublisher&) = delete;
  KvEventPublisher& operator=(const KvEventPublisher&) = delete;

  // Queues one batch (vLLM publishes one per engine step); never blocks. A batch past
  // max_queue_size is dropped and counted: a subscriber sees the gap in `seq` only if it was
  // sent, so dropping here loses it silently, as vLLM's full queue would block instead.
  void publish(std::vector<WireEvent> events);
  int64_t batches_sent() const { return sent_.load(); }
  int64_t batches_dropped() const { return dropped_.load(); }

 private:
  void run();
  void send_batch(double ts, const std::vector<WireEvent>& events);
  void serve_replay();

  KvEventsConfig config_;
  int32_t rank_;
  std::unique_ptr<zmq::context_t> ctx_;
  std::unique_ptr<zmq::socket_t> pub_;
  std::unique_ptr<zmq::socket_t> replay_;
  uint64_t next_seq_ = 0;
  std::deque<std::pair<uint64_t, std::string>> kept_;  // (seq, payload) for replay

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<double, std::vector<WireEvent>>> queue_;  // (unix time of the step, events)
  bool stopping_ = false;
  std::atomic<int64_t> sent_{0}, dropped_{0};
  std::thread thread_;
};

}  // namespace striker::kv_events
