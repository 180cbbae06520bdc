// Logging: vLLM's level names and stats line, the per-request line's shape, and the chat page's
// embedded files.
#include "core/log.h"  // first: it makes fmt header-only

#include <gtest/gtest.h>

#include <cstdlib>

#include "core/error.h"
#include "server/request_log.h"
#include "server/stats_logger.h"
#include "server/web_assets.h"

namespace striker {
namespace {

EngineStats stats(int64_t prompt, int64_t generation, int64_t running, int64_t waiting, double kv) {
  EngineStats s;
  s.prompt_tokens_total = prompt;
  s.generation_tokens_total = generation;
  s.num_running = running;
  s.num_waiting = waiting;
  s.kv_usage = kv;
  return s;
}

TEST(StatsLine, MatchesVllmWording) {
  EXPECT_EQ(server::stats_line(stats(100, 50, 0, 0, 0), stats(350, 150, 2, 1, 0.125), 10.0),
            "Avg prompt throughput: 25.0 tokens/s, Avg generation throughput: 10.0 tokens/s, Running: 2 reqs, "
            "Waiting: 1 reqs, GPU KV cache usage: 12.5%, Prefix cache hit rate: 0.0%");
}

TEST(StatsLine, PrefixCacheHitRateOfTheInterval) {
  EngineStats before = stats(0, 0, 0, 0, 0), now = stats(10, 0, 0, 0, 0);
  before.prefix_cache_queries = 100, before.prefix_cache_hits = 20;
  now.prefix_cache_queries = 300, now.prefix_cache_hits = 170;  // 150 of 200 queried tokens hit in the interval
  const std::string line = server::stats_line(before, now, 1.0);
  EXPECT_NE(line.find(", Prefix cache hit rate: 75.0%"), std::string::npos) << line;
  now.prefix_cache_queries = before.prefix_cache_queries;  // nothing queried: 0%, not a division by zero
  now.prefix_cache_hits = before.prefix_cache_hits;
  EXPECT_NE(server::stats_line(before, now, 1.0).find("Prefix cache hit rate: 0.0%"), std::string::npos);
}

TEST(StatsLine, AsyncSchedulingShareOfTheInterval) {
  EngineStats before = stats(0, 0, 0, 0, 0), now = stats(10, 0, 0, 0, 0);
  EXPECT_EQ(server::stats_line(before, now, 1.0).find("Async"), std::string::npos);  // off: no figure
  before.async_steps = 10, before.async_ahead_steps = 2;
  now.async_steps = 50, now.async_ahead_steps = 32;  // 30 of the interval's 40 steps went ahead
  const std::string line = server::stats_line(before, now, 1.0);
  EXPECT_NE(line.find(", Async: 75.0% of 40 steps launched ahead"), std::string::npos) << line;
}

TEST(StatsLine, SpecDecodingLineOfTheInterval) {
  EngineStats before = stats(0, 0, 0, 0, 0), now = before;
  EXPECT_EQ(server::spec_decode_line(before, now, 10.0), "");  // speculation off
  before.num_speculative_tokens = now.num_speculative_tokens = 3;
  before.spec_accepted_per_pos = {5, 2, 0};
  now.spec_accepted_per_pos = before.spec_accepted_per_pos;
  EXPECT_EQ(server::spec_decode_line(before, now, 10.0), "");  // nothing checked in the interval
  before.spec_num_drafts = 10, before.spec_num_draft_tokens = 30, before.spec_num_accepted_tokens = 7;
  // 20 steps checked 50 guesses in 10 s, 30 accepted: 16 at the first position, 10 at the second, 4 at the third.
  now.spec_num_drafts = 30, now.spec_num_draft_tokens = 80, now.spec_num_accepted_tokens = 37;
  now.spec_accepted_per_pos = {21, 12, 4};
  EXPECT_EQ(server::spec_decode_line(before, now, 10.0),
            "SpecDecoding metrics: Mean acceptance length: 2.50, Accepted throughput: 3.00 tokens/s, Drafted "
            "throughput: 5.00 tokens/s, Accepted: 30 tokens, Drafted: 50 tokens, Per-position acceptance rate: 0.800, "
            "0.500, 0.200, Avg Draft acceptance rate: 60.0%");
}

TEST(StatsLine, IdleOnlyAfterTwoQuietIntervals) {
  const EngineStats a = stats(5, 5, 0, 0, 0), b = stats(9, 5, 0, 0, 0);
  EXPECT_FALSE(server::stats_idle(a, b, true));   // tokens moved
  EXPECT_FALSE(server::stats_idle(b, b, false));  // quiet now, busy before: vLLM still logs this one
  EXPECT_TRUE(server::stats_idle(b, b, true));
}

TEST(RequestLogLine, ShapeAndDashesForUnknowns) {
  EXPECT_EQ(server::RequestLog::format("127.0.0.1:5000", "POST", "/v1/chat/completions", 200, "chatcmpl-ab12", 12, 40,
                                       0.5321),
            "127.0.0.1:5000 \"POST /v1/chat/completions\" 200 chatcmpl-ab12 prompt_tokens=12 completion_tokens=40 "
            "latency=0.532s");
  EXPECT_EQ(server::RequestLog::format("1.2.3.4:1", "GET", "/v1/models", 200, "", -1, -1, -1),
            "1.2.3.4:1 \"GET /v1/models\" 200 - prompt_tokens=- completion_tokens=- latency=-");
}

TEST(RequestLogLine, ClientTextCannotForgeLines) {
  const std::string line =
      server::RequestLog::format("h:1", "GET", "/x\nINFO fake \"line\"", 404, "", -1, -1, 0.001);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  EXPECT_NE(line.find("/x\\x0aINFO fake \\x22line\\x22"), std::string::npos) << line;
}

TEST(LogLevel, VllmNamesInAnyCase) {
  EXPECT_EQ(logging::parse_level("DEBUG", "x"), logging::Level::debug);
  EXPECT_EQ(logging::parse_level("info", "x"), logging::Level::info);
  EXPECT_EQ(logging::parse_level("Warning", "x"), logging::Level::warn);
  EXPECT_EQ(logging::parse_level("error", "x"), logging::Level::err);
  EXPECT_EQ(logging::parse_level("CRITICAL", "x"), logging::Level::critical);
  try {
    logging::parse_level("loud", "--log-level");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--log-level must be one of debug, info, warning, error, critical"),
              std::string::npos);
  }
}

TEST(LogLevel, FlagWinsOverTheEnvironment) {
  setenv("VLLM_LOGGING_LEVEL", "ERROR", 1);
  EXPECT_EQ(logging::level_from(std::nullopt), logging::Level::err);
  EXPECT_EQ(logging::level_from(std::string("debug")), logging::Level::debug);
  setenv("VLLM_LOGGING_LEVEL", "nonsense", 1);
  EXPECT_EQ(logging::level_from(std::string("info")), logging::Level::info);  // a bad env value is not read
  EXPECT_THROW(logging::level_from(std::nullopt), Error);
  unsetenv("VLLM_LOGGING_LEVEL");
  EXPECT_EQ(logging::level_from(std::nullopt), logging::Level::info);
}

TEST(WebAssets, PageAndItsFilesAreEmbedded) {
  std::vector<std::string> routes;
  for (const auto& a : server::web_assets()) {
    routes.emplace_back(a.route);
    EXPECT_GT(a.bytes.size(), 100u) << a.route;
  }
  EXPECT_EQ(routes, (std::vector<std::string>{"/static/chat.css", "/static/chat.js", "/static/favicon.svg", "/"}));
}

}  // namespace
}  // namespace striker
