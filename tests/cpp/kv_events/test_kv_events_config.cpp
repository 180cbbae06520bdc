#include <gtest/gtest.h>

#include "core/error.h"
#include "kv_events/kv_events_config.h"

namespace striker::kv_events {
namespace {

TEST(KvEventsConfig, VllmDefaultsAndPublisherFollowsEnable) {
  const auto off = parse_kv_events_config("{}");
  EXPECT_FALSE(off.publishes());
  EXPECT_EQ(off.publisher, "null");
  const auto on = parse_kv_events_config(R"({"enable_kv_cache_events": true})");
  EXPECT_TRUE(on.publishes());
  EXPECT_EQ(on.publisher, "zmq");
  EXPECT_EQ(on.endpoint, "tcp://*:5557");
  EXPECT_FALSE(on.replay_endpoint);
  EXPECT_EQ(on.buffer_steps, 10000);
  EXPECT_EQ(on.hwm, 100000);
  EXPECT_EQ(on.topic, "");
}

TEST(KvEventsConfig, ReadsEveryField) {
  const auto c = parse_kv_events_config(
      R"({"enable_kv_cache_events": true, "publisher": "zmq", "endpoint": "tcp://*:6000",
          "replay_endpoint": "tcp://*:6001", "buffer_steps": 5, "hwm": 7, "max_queue_size": 9, "topic": "kv"})");
  EXPECT_EQ(c.endpoint, "tcp://*:6000");
  EXPECT_EQ(*c.replay_endpoint, "tcp://*:6001");
  EXPECT_EQ(c.buffer_steps, 5);
  EXPECT_EQ(c.hwm, 7);
  EXPECT_EQ(c.max_queue_size, 9);
  EXPECT_EQ(c.topic, "kv");
  EXPECT_FALSE(parse_kv_events_config(R"({"enable_kv_cache_events": true, "publisher": "null"})").publishes());
}

void expect_error(const std::string& json, const std::string& needle) {
  try {
    parse_kv_events_config(json);
    FAIL() << "accepted " << json;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(KvEventsConfig, BadInputNamesTheField) {
  expect_error("{not json", "not valid JSON");
  expect_error("[1]", "JSON object");
  expect_error(R"({"enable_kv_cache_events": "yes"})", "enable_kv_cache_events");
  expect_error(R"({"publisher": "kafka"})", "kafka");
  expect_error(R"({"endpoit": "tcp://*:1"})", "endpoit");
  expect_error(R"({"hwm": 0})", "hwm");
  expect_error(R"({"buffer_steps": 1.5})", "buffer_steps");
  expect_error(R"({"enable_kv_cache_events": true, "endpoint": "5557"})", "5557");
}

}  // namespace
}  // namespace striker::kv_events
