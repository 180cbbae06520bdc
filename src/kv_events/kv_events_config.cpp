#include "kv_events/kv_events_config.h"

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace striker::kv_events {
namespace {

const char* kFlag = "--kv-events-config";

template <typename T>
T field(const nlohmann::json& j, const std::string& name, bool (nlohmann::json::*is)() const noexcept, const char* what) {
  const auto& v = j.at(name);
  if (!(v.*is)()) throw Error(std::string(kFlag) + ": `" + name + "` must be " + what + ", got " + v.dump());
  return v.get<T>();
}

}  // namespace

KvEventsConfig parse_kv_events_config(const std::string& text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string(kFlag) + " is not valid JSON: " + e.what());
  }
  if (!j.is_object()) throw Error(std::string(kFlag) + " must be a JSON object");
  KvEventsConfig c;
  bool publisher_given = false;
  for (const auto& [name, value] : j.items()) {
    if (name == "enable_kv_cache_events") {
      c.enable_kv_cache_events = field<bool>(j, name, &nlohmann::json::is_boolean, "true or false");
    } else if (name == "publisher") {
      c.publisher = field<std::string>(j, name, &nlohmann::json::is_string, "a string");
      if (c.publisher != "zmq" && c.publisher != "null")
        throw Error(std::string(kFlag) + ": unknown `publisher` '" + c.publisher + "' (zmq or null)");
      publisher_given = true;
    } else if (name == "endpoint") {
      c.endpoint = field<std::string>(j, name, &nlohmann::json::is_string, "a string");
    } else if (name == "replay_endpoint") {
      if (!value.is_null()) c.replay_endpoint = field<std::string>(j, name, &nlohmann::json::is_string, "a string or null");
    } else if (name == "topic") {
      c.topic = field<std::string>(j, name, &nlohmann::json::is_string, "a string");
    } else if (name == "buffer_steps" || name == "hwm" || name == "max_queue_size") {
      const auto n = field<int64_t>(j, name, &nlohmann::json::is_number_integer, "an integer");
      if (n < (name == "buffer_steps" ? 0 : 1)) throw Error(std::string(kFlag) + ": `" + name + "` is out of range: " + value.dump());
      (name == "buffer_steps" ? c.buffer_steps : name == "hwm" ? c.hwm : c.max_queue_size) = n;
    } else {
      throw Error(std::string(kFlag) + ": unknown field `" + name +
                  "` (known: enable_kv_cache_events, publisher, endpoint, replay_endpoint, buffer_steps, hwm, "
                  "max_queue_size, topic)");
    }
  }
  // vLLM: publisher defaults to "zmq" once events are enabled, "null" otherwise.
  if (!publisher_given) c.publisher = c.enable_kv_cache_events ? "zmq" : "null";
  if (c.publishes()) {
    for (const std::string* ep : {&c.endpoint, c.replay_endpoint ? &*c.replay_endpoint : nullptr}) {
      if (ep && ep->find("://") == std::string::npos)
        throw Error(std::string(kFlag) + ": endpoint '" + *ep + "' must be a ZMQ address such as tcp://*:5557");
    }
  }
  return c;
}

}  // namespace striker::kv_events
