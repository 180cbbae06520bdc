// The ZMQ side of vLLM's publisher: [topic, seq, payload] frames on PUB with seq counting from 0,
// and the ROUTER replay protocol ([empty, start seq] in; [empty, seq, payload] per kept batch,
// then [empty, -1, empty] out), against real cppzmq SUB and DEALER sockets over ipc://.
#define MSGPACK_NO_BOOST
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <msgpack.hpp>
#include <thread>
#include <zmq.hpp>

#include "core/error.h"
#include "kv_events/kv_event_publisher.h"

namespace striker::kv_events {
namespace {

std::string be64(uint64_t v) {
  std::string out(8, '\0');
  for (int i = 7; i >= 0; --i, v >>= 8) out[size_t(i)] = char(v & 0xff);
  return out;
}

int64_t seq_of(const zmq::message_t& m) {
  EXPECT_EQ(m.size(), 8u);
  uint64_t v = 0;
  for (size_t i = 0; i < 8; ++i) v = (v << 8) | static_cast<const unsigned char*>(m.data())[i];
  return int64_t(v);
}

std::vector<WireEvent> one_removed(uint64_t hash) {
  WireEvent e;
  e.type = WireEvent::Type::BlockRemoved;
  e.block_hashes = {hash};
  return {e};
}

// The first hash of a BlockRemoved batch, decoded back: [ts, [{"type", "block_hashes": [h]...}], rank].
uint64_t removed_hash(const zmq::message_t& payload) {
  auto oh = msgpack::unpack(static_cast<const char*>(payload.data()), payload.size());
  const auto& batch = oh.get().via.array;
  EXPECT_EQ(batch.size, 3u);
  const auto& event = batch.ptr[1].via.array.ptr[0].via.map;
  for (uint32_t i = 0; i < event.size; ++i) {
    if (event.ptr[i].key.as<std::string>() == "block_hashes") return event.ptr[i].val.via.array.ptr[0].as<uint64_t>();
  }
  ADD_FAILURE() << "no block_hashes";
  return 0;
}

std::vector<zmq::message_t> recv_multipart(zmq::socket_t& s) {
  std::vector<zmq::message_t> parts;
  do {
    zmq::message_t m;
    if (!s.recv(m, zmq::recv_flags::none)) break;
    parts.push_back(std::move(m));
  } while (parts.back().more());
  return parts;
}

class PublisherTest : public ::testing::Test {
 protected:
  std::string dir = "/tmp/striker-kv-" + std::to_string(getpid());
  KvEventsConfig config() {
    KvEventsConfig c;
    c.enable_kv_cache_events = true;
    c.publisher = "zmq";
    c.endpoint = "ipc://" + dir + "-pub";
    c.replay_endpoint = "ipc://" + dir + "-replay";
    c.topic = "kv";
    c.buffer_steps = 3;
    return c;
  }
};

TEST_F(PublisherTest, PublishesSequencedBatchesAndReplaysTheKeptOnes) {
  KvEventPublisher pub(config());
  zmq::context_t ctx;
  zmq::socket_t sub(ctx, zmq::socket_type::sub);
  sub.set(zmq::sockopt::rcvtimeo, 5000);
  sub.set(zmq::sockopt::subscribe, "kv");
  sub.connect(config().endpoint);
  // PUB drops what it sends before the subscription arrives: publish until one gets through.
  std::vector<zmq::message_t> first;
  sub.set(zmq::sockopt::rcvtimeo, 100);
  for (int i = 0; i < 100 && first.empty(); ++i) {
    pub.publish(one_removed(1000 + uint64_t(i)));
    first = recv_multipart(sub);
  }
  ASSERT_EQ(first.size(), 3u);
  EXPECT_EQ(first[0].to_string(), "kv");
  int64_t seq = seq_of(first[1]);
  sub.set(zmq::sockopt::rcvtimeo, 5000);
  // Drain the warm-up batches that were already queued behind the first one.
  while (pub.batches_sent() < seq + 1) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const int64_t warmup_sent = pub.batches_sent();
  for (int64_t s = seq + 1; s < warmup_sent; ++s) ASSERT_EQ(seq_of(recv_multipart(sub)[1]), s);
  for (uint64_t h : {7u, 8u, 9u, 10u}) pub.publish(one_removed(h));
  for (uint64_t h : {7u, 8u, 9u, 10u}) {
    auto parts = recv_multipart(sub);
    ASSERT_EQ(parts.size(), 3u);
    EXPECT_EQ(seq_of(parts[1]), warmup_sent + int64_t(h - 7));
    EXPECT_EQ(removed_hash(parts[2]), h);
  }

  // buffer_steps 3: the batches of hashes 8, 9, 10 are kept; ask from the one of hash 9.
  zmq::socket_t dealer(ctx, zmq::socket_type::dealer);
  dealer.set(zmq::sockopt::rcvtimeo, 5000);
  dealer.connect(*config().replay_endpoint);
  const std::string start = be64(uint64_t(warmup_sent + 2));
  dealer.send(zmq::buffer(std::string()), zmq::send_flags::sndmore);
  dealer.send(zmq::buffer(start), zmq::send_flags::none);
  for (uint64_t h : {9u, 10u}) {
    auto parts = recv_multipart(dealer);
    ASSERT_EQ(parts.size(), 3u);  // [empty, seq, payload]: the ROUTER's identity frame is consumed
    EXPECT_EQ(parts[0].size(), 0u);
    EXPECT_EQ(seq_of(parts[1]), warmup_sent + int64_t(h - 7));
    EXPECT_EQ(removed_hash(parts[2]), h);
  }
  auto end = recv_multipart(dealer);
  ASSERT_EQ(end.size(), 3u);
  EXPECT_EQ(seq_of(end[1]), -1);
  EXPECT_EQ(end[2].size(), 0u);
  EXPECT_EQ(pub.batches_dropped(), 0);
}

TEST_F(PublisherTest, AnEndpointThatCannotBeBoundFailsAtStartup) {
  KvEventsConfig c = config();
  c.endpoint = "tcp://*:notaport";
  try {
    KvEventPublisher pub(c);
    FAIL() << "accepted " << c.endpoint;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("notaport"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace striker::kv_events
