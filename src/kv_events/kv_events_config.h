// vLLM's --kv-events-config (vllm/config/kv_events.py KVEventsConfig), parsed from the same JSON.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace striker::kv_events {

struct KvEventsConfig {
  bool enable_kv_cache_events = false;
  std::string publisher = "null";          // "zmq" or "null"; defaults to "zmq" when events are enabled
  std::string endpoint = "tcp://*:5557";   // PUB socket: bound when it names a wildcard or ipc/inproc, else connected
  std::optional<std::string> replay_endpoint;  // ROUTER socket serving missed batches by sequence number
  int64_t buffer_steps = 10000;            // batches kept for replay
  int64_t hwm = 100000;                    // PUB high-water mark
  int64_t max_queue_size = 100000;         // batches waiting to be sent
  std::string topic;

  bool publishes() const { return enable_kv_cache_events && publisher == "zmq"; }
};

// Throws striker::Error naming the field for malformed JSON, unknown fields, wrong types or values.
KvEventsConfig parse_kv_events_config(const std::string& json);

}  // namespace striker::kv_events
