#include "kv_events/kv_event_publisher.h"

#include <chrono>
#include <zmq.hpp>

#include "core/error.h"

namespace striker::kv_events {
namespace {

std::string be64(uint64_t v) {
  std::string out(8, '\0');
  for (int i = 7; i >= 0; --i, v >>= 8) out[size_t(i)] = char(v & 0xff);
  return out;
}

uint64_t from_be64(const zmq::message_t& m) {
  uint64_t v = 0;
  const auto* p = static_cast<const unsigned char*>(m.data());
  for (size_t i = 0; i < 8 && i < m.size(); ++i) v = (v << 8) | p[i];
  return v;
}

bool binds(const std::string& endpoint) {
  return endpoint.find('*') != std::string::npos || endpoint.find("::") != std::string::npos ||
         endpoint.rfind("ipc://", 0) == 0 || endpoint.rfind("inproc://", 0) == 0;
}

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

zmq::const_buffer frame(const std::string& s) { return zmq::buffer(s.data(), s.size()); }

}  // namespace

KvEventPublisher::KvEventPublisher(const KvEventsConfig& config, int32_t data_parallel_rank)
    : config_(config), rank_(data_parallel_rank), ctx_(std::make_unique<zmq::context_t>(1)) {
  try {
    pub_ = std::make_unique<zmq::socket_t>(*ctx_, zmq::socket_type::pub);
    pub_->set(zmq::sockopt::sndhwm, int(config_.hwm));
    pub_->set(zmq::sockopt::linger, 0);
    if (binds(config_.endpoint)) pub_->bind(config_.endpoint);
    else pub_->connect(config_.endpoint);
    if (config_.replay_endpoint) {
      replay_ = std::make_unique<zmq::socket_t>(*ctx_, zmq::socket_type::router);
      replay_->set(zmq::sockopt::linger, 0);
      replay_->bind(*config_.replay_endpoint);
    }
  } catch (const zmq::error_t& e) {
    throw Error("--kv-events-config: cannot open the KV event socket (endpoint " + config_.endpoint +
                (config_.replay_endpoint ? ", replay_endpoint " + *config_.replay_endpoint : std::string()) + "): " + e.what());
  }
  // From here on only the thread touches the sockets (ZMQ sockets are not thread-safe).
  thread_ = std::thread([this] { run(); });
}

KvEventPublisher::~KvEventPublisher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
  replay_.reset();
  pub_.reset();
  ctx_.reset();
}

void KvEventPublisher::publish(std::vector<WireEvent> events) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || int64_t(queue_.size()) >= config_.max_queue_size) {
      ++dropped_;
      return;
    }
    queue_.emplace_back(unix_seconds(), std::move(events));
  }
  cv_.notify_one();
}

void KvEventPublisher::run() {
  for (;;) {
    if (replay_) serve_replay();
    std::deque<std::pair<double, std::vector<WireEvent>>> batch;
    bool stop = false;
    {
      std::unique_lock<std::mutex> lock(mu_);
      // Wakes for a batch, for shutdown, or every 20 ms to answer replay requests.
      cv_.wait_for(lock, std::chrono::milliseconds(20), [&] { return stopping_ || !queue_.empty(); });
      batch.swap(queue_);
      stop = stopping_;
    }
    for (const auto& [ts, events] : batch) send_batch(ts, events);
    if (stop) break;
  }
}

void KvEventPublisher::send_batch(double ts, const std::vector<WireEvent>& events) {
  const uint64_t seq = next_seq_++;
  std::string payload = encode_event_batch(ts, events, rank_);
  const std::string seq_bytes = be64(seq);
  try {
    pub_->send(frame(config_.topic), zmq::send_flags::sndmore);
    pub_->send(frame(seq_bytes), zmq::send_flags::sndmore);
    pub_->send(frame(payload), zmq::send_flags::none);
    ++sent_;
  } catch (const zmq::error_t&) {
    ++dropped_;  // the batch stays in the replay buffer: a subscriber can still ask for it
  }
  kept_.emplace_back(seq, std::move(payload));
  while (int64_t(kept_.size()) > config_.buffer_steps) kept_.pop_front();
}

void KvEventPublisher::serve_replay() {
  for (;;) {
    std::vector<zmq::message_t> request;
    zmq::message_t part;
    if (!replay_->recv(part, zmq::recv_flags::dontwait)) return;
    request.push_back(std::move(part));
    while (request.back().more()) {
      zmq::message_t next;
      if (!replay_->recv(next, zmq::recv_flags::none)) break;
      request.push_back(std::move(next));
    }
    // [client identity, empty delimiter, start seq]: anything else is ignored, as vLLM does.
    if (request.size() != 3 || request[2].size() != 8) continue;
    const std::string client(static_cast<const char*>(request[0].data()), request[0].size());
    const uint64_t start = from_be64(request[2]);
    const std::string empty;
    auto reply = [&](const std::string& seq, const std::string& payload) {
      replay_->send(frame(client), zmq::send_flags::sndmore);
      replay_->send(frame(empty), zmq::send_flags::sndmore);
      replay_->send(frame(seq), zmq::send_flags::sndmore);
      replay_->send(frame(payload), zmq::send_flags::none);
    };
    try {
      for (const auto& [seq, payload] : kept_) {
        if (seq >= start) reply(be64(seq), payload);
      }
      reply(be64(~uint64_t(0)), empty);  // END_SEQ: -1 as a signed 8-byte big-endian integer
    } catch (const zmq::error_t&) {
      // The client went away mid-replay; it will ask again.
    }
  }
}

}  // namespace striker::kv_events
