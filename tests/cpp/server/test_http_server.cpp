// The HTTP layer against a scripted engine: routes, SSE framing, auth, errors, disconnects, logs.
#include "core/log.h"  // first: it makes fmt header-only

#include <spdlog/sinks/ringbuffer_sink.h>
#include <httplib.h>
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include <nlohmann/json.hpp>

#include "fakes.h"
#include "server/openai_server.h"

namespace striker::server {
namespace {

using nlohmann::json;
using testing::ByteTokenizer;
using testing::ScriptedEngine;

ServerOptions test_options(const std::string& api_key = "") {
  ServerOptions o;
  o.served_model_names = {"tiny", "alias"};
  o.model_root = "/models/tiny";
  o.api_key = api_key;
  o.max_model_len = 256;
  o.limits.vocab_size = 256;
  o.limits.max_model_len = 256;
  o.limits.max_n = 8;
  o.http_threads = 16;
  return o;
}

struct Fixture : ::testing::Test {
  void start(const std::string& api_key = "", bool attach = true) {
    server = std::make_unique<OpenAIServer>(test_options(api_key));
    port = server->start("127.0.0.1", 0);
    if (attach) server->attach(engine, tok, nullptr, test_options(api_key));
    client = std::make_unique<httplib::Client>("127.0.0.1", port);
    client->set_read_timeout(10, 0);
  }
  void TearDown() override {
    if (server) server->stop();
    engine.shutdown();
  }
  httplib::Result post(const std::string& path, const json& body, httplib::Headers headers = {}) {
    return client->Post(path.c_str(), headers, body.dump(), "application/json");
  }
  ScriptedEngine engine;
  ByteTokenizer tok;
  std::unique_ptr<OpenAIServer> server;
  std::unique_ptr<httplib::Client> client;
  int port = 0;
};

// Splits an SSE body into its data payloads.
std::vector<std::string> sse_data(const std::string& body) {
  std::vector<std::string> out;
  size_t pos = 0;
  while ((pos = body.find("data: ", pos)) != std::string::npos) {
    size_t end = body.find("\n\n", pos);
    out.push_back(body.substr(pos + 6, end - pos - 6));
    pos = end;
  }
  return out;
}

TEST_F(Fixture, HealthIs503UntilAttached) {
  start("", false);
  auto r = client->Get("/health");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(json::parse(r->body)["error"]["code"], 503);
  auto c = post("/v1/completions", {{"prompt", "hi"}});
  EXPECT_EQ(c->status, 503);
  server->attach(engine, tok, nullptr, test_options());
  EXPECT_EQ(client->Get("/health")->status, 200);
}

TEST(OpenAIServerLifecycle, StopRightAfterStartDoesNotHang) {
  for (int i = 0; i < 20; ++i) {
    OpenAIServer server(test_options());
    server.start("127.0.0.1", 0);
    server.stop();
  }
}

// The "http" logger's lines, captured from here on (a ring buffer: safe while the server logs).
std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> capture_http_log() {
  auto sink = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(64);
  sink->set_pattern("%v");
  logging::get("http")->sinks().push_back(sink);
  return sink;
}

// httplib logs a request after its response went out, so the client may be a moment ahead.
std::string wait_for_line(spdlog::sinks::ringbuffer_sink_mt& sink, const std::string& needle) {
  for (int i = 0; i < 200; ++i) {
    for (const auto& line : sink.last_formatted()) {
      if (line.find(needle) != std::string::npos) return line;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return "";
}

TEST_F(Fixture, OneLogLinePerRequestWithItsTokensAndId) {
  auto sink = capture_http_log();
  start();
  auto r = post("/v1/completions", {{"model", "tiny"}, {"prompt", "abc"}, {"max_tokens", 5}, {"stream", true}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  const std::string id = r->get_header_value("X-Request-Id");
  ASSERT_EQ(id.rfind("cmpl-", 0), 0u);
  const std::string line = wait_for_line(*sink, id);
  EXPECT_NE(line.find("\"POST /v1/completions\" 200 " + id + " prompt_tokens=3 completion_tokens=5 latency="),
            std::string::npos)
      << line;
  ASSERT_EQ(post("/v1/completions", {{"model", "tiny"}, {"prompt", "abc"}, {"max_tokens", -1}})->status, 400);
  EXPECT_NE(wait_for_line(*sink, "\"POST /v1/completions\" 400 - prompt_tokens=- completion_tokens=- latency="), "");
}

// httplib would gzip text/* bodies for a client that accepts it (browsers, the openai client), and
// zlib would then hold a stream's tokens back until its buffer fills: striker never compresses
// (nor does vLLM).
TEST_F(Fixture, StreamsAreNotCompressed) {
  start();
  httplib::Headers gzip = {{"Accept-Encoding", "gzip, deflate, br"}};
  auto r = post("/v1/completions", {{"model", "tiny"}, {"prompt", "abc"}, {"max_tokens", 5}, {"stream", true}}, gzip);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_FALSE(r->has_header("Content-Encoding"));
  EXPECT_NE(r->body.find("data: [DONE]"), std::string::npos);
  auto page = client->Get("/", gzip);
  EXPECT_FALSE(page->has_header("Content-Encoding"));
}

TEST_F(Fixture, ChatPageNeedsNoApiKey) {
  start("secret");
  auto page = client->Get("/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_NE(page->body.find("/static/chat.js"), std::string::npos);
  EXPECT_EQ(client->Get("/static/chat.js")->status, 200);
  EXPECT_EQ(client->Get("/static/chatXjs")->status, 401);  // not a page file: the key is required
  EXPECT_EQ(client->Get("/v1/models")->status, 401);
}

TEST_F(Fixture, CompletionNonStreamingShapeAndUsage) {
  start();
  auto r = post("/v1/completions", {{"model", "tiny"}, {"prompt", "abc"}, {"max_tokens", 5}, {"n", 2}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  auto j = json::parse(r->body);
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["model"], "tiny");
  EXPECT_EQ(j["id"].get<std::string>().rfind("cmpl-", 0), 0u);
  ASSERT_EQ(j["choices"].size(), 2u);
  EXPECT_EQ(j["choices"][0]["text"], "hello");
  EXPECT_EQ(j["choices"][1]["text"], "ello ");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["prompt_tokens"], 3);
  EXPECT_EQ(j["usage"]["completion_tokens"], 10);
  EXPECT_EQ(j["usage"]["total_tokens"], 13);
  // The server default tier: max_tokens as requested, n passed through.
  auto got = engine.received();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].params.max_tokens, 5);
  EXPECT_EQ(got[0].params.n, 2);
}

TEST_F(Fixture, CompletionMaxTokensDefaultsToRemainingContext) {
  start();
  engine.hold_threshold = 100000;
  auto r = post("/v1/completions", {{"prompt", std::string(250, 'x')}});
  ASSERT_EQ(r->status, 200) << r->body;
  auto j = json::parse(r->body);
  EXPECT_EQ(j["usage"]["completion_tokens"], 6);  // 256 - 250
}

TEST_F(Fixture, CompletionLogprobsLayout) {
  start();
  auto r = post("/v1/completions", {{"prompt", "abc"}, {"max_tokens", 3}, {"logprobs", 2}});
  ASSERT_EQ(r->status, 200) << r->body;
  auto lp = json::parse(r->body)["choices"][0]["logprobs"];
  EXPECT_EQ(lp["tokens"], json({"h", "e", "l"}));
  EXPECT_EQ(lp["text_offset"], json({0, 1, 2}));
  EXPECT_EQ(lp["token_logprobs"][0], -0.5);
  EXPECT_EQ(lp["top_logprobs"][0].size(), 2u);
}

TEST_F(Fixture, CompletionStreamingFramesUsageAndDone) {
  start();
  auto r = post("/v1/completions", {{"prompt", "abc"},
                                    {"max_tokens", 4},
                                    {"stream", true},
                                    {"stream_options", {{"include_usage", true}}}});
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_NE(r->get_header_value("Content-Type").find("text/event-stream"), std::string::npos);
  auto events = sse_data(r->body);
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.back(), "[DONE]");
  auto usage = json::parse(events[events.size() - 2]);
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 4);
  std::string text;
  int finishes = 0;
  std::string id;
  for (size_t i = 0; i + 2 < events.size(); ++i) {
    auto c = json::parse(events[i]);
    if (id.empty()) id = c["id"];
    EXPECT_EQ(c["id"], id);
    text += c["choices"][0]["text"].get<std::string>();
    if (!c["choices"][0]["finish_reason"].is_null()) ++finishes;
  }
  EXPECT_EQ(text, "hell");
  EXPECT_EQ(finishes, 1);
}

TEST_F(Fixture, ModelsVersionMetrics) {
  start();
  auto m = json::parse(client->Get("/v1/models")->body);
  EXPECT_EQ(m["object"], "list");
  ASSERT_EQ(m["data"].size(), 2u);
  EXPECT_EQ(m["data"][0]["id"], "tiny");
  EXPECT_EQ(m["data"][0]["max_model_len"], 256);
  EXPECT_TRUE(json::parse(client->Get("/version")->body).contains("version"));
  post("/v1/completions", {{"prompt", "abc"}, {"max_tokens", 2}});
  auto metrics = client->Get("/metrics")->body;
  for (const char* name : {"vllm:num_requests_running{", "vllm:num_requests_waiting{", "vllm:kv_cache_usage_perc{",
                           "vllm:prompt_tokens_total{", "vllm:generation_tokens_total{",
                           "vllm:time_to_first_token_seconds_count{", "vllm:e2e_request_latency_seconds_count{",
                           "vllm:request_success_total{", "vllm:request_queue_time_seconds_count{",
                           "vllm:request_prefill_time_seconds_count{", "vllm:request_decode_time_seconds_count{",
                           "vllm:request_inference_time_seconds_count{"}) {
    EXPECT_NE(metrics.find(name), std::string::npos) << name;
  }
  EXPECT_NE(metrics.find("vllm:request_success_total{engine=\"0\",model_name=\"tiny\",finished_reason=\"length\"} 1"),
            std::string::npos)
      << metrics;
}

TEST_F(Fixture, ApiKeyGuardsAllButHealthAndMetrics) {
  start("sekrit");
  EXPECT_EQ(client->Get("/health")->status, 200);
  EXPECT_EQ(client->Get("/metrics")->status, 200);
  auto r = client->Get("/v1/models");
  EXPECT_EQ(r->status, 401);
  EXPECT_EQ(json::parse(r->body)["error"]["type"], "authentication_error");
  EXPECT_EQ(post("/tokenize", {{"prompt", "x"}})->status, 401);
  EXPECT_EQ(post("/v1/completions", {{"prompt", "x"}}, {{"Authorization", "Bearer wrong!"}})->status, 401);
  EXPECT_EQ(client->Get("/version", {{"Authorization", "Bearer sekrit"}})->status, 200);
  EXPECT_EQ(post("/v1/completions", {{"prompt", "x"}, {"max_tokens", 1}}, {{"Authorization", "Bearer sekrit"}})->status,
            200);
}

TEST_F(Fixture, BadInputsAre4xxJsonAndServerStaysHealthy) {
  start();
  const std::vector<std::pair<std::string, int>> raw_cases = {
      {"[]", 400}, {"\"x\"", 400}, {"123", 400}, {"null", 400}, {"{\"prompt\": ", 400},
      {std::string(200, '[') + std::string(200, ']'), 400}, {"{\"prompt\": \"\xff\xfe\"}", 400}};
  for (const auto& [body, status] : raw_cases) {
    auto r = client->Post("/v1/completions", body, "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, status) << body;
    auto j = json::parse(r->body);
    EXPECT_EQ(j["error"]["code"], status);
  }
  const std::vector<std::pair<json, std::string>> cases = {
      {{{"prompt", "x"}, {"n", 0}}, "n"},
      {{{"prompt", "x"}, {"n", -1}}, "n"},
      {{{"prompt", "x"}, {"n", 1000000000}}, "n"},
      {{{"prompt", "x"}, {"max_tokens", 0}}, "max_tokens"},
      {{{"prompt", "x"}, {"max_tokens", -1}}, "max_tokens"},
      {{{"prompt", "x"}, {"logprobs", 21}}, "logprobs"},
      {{{"prompt", "x"}, {"logprobs", -1}}, "logprobs"},
      {{{"prompt", "x"}, {"prompt_logprobs", -1}}, "prompt_logprobs"},
      {{{"prompt", "x"}, {"temperature", -1}}, "temperature"},
      {{{"prompt", "x"}, {"temperature", "hot"}}, "temperature"},
      {{{"prompt", "x"}, {"top_p", 0}}, "top_p"},
      {{{"prompt", "x"}, {"top_k", -2}}, "top_k"},
      {{{"prompt", "x"}, {"presence_penalty", 3}}, "presence_penalty"},
      {{{"prompt", "x"}, {"seed", 1.5}}, "seed"},
      {{{"prompt", json::array({-1})}}, "prompt"},
      {{{"prompt", json::array({256})}}, "prompt"},
      {{{"prompt", json::array({2147483648LL})}}, "prompt"},
      {{{"prompt", "x"}, {"logit_bias", {{"999", 1}}}}, "logit_bias"},
      {{{"prompt", "x"}, {"logit_bias", {{"abc", 1}}}}, "logit_bias"},
      {{{"prompt", "x"}, {"stop", ""}}, "stop"},
      {{{"prompt", "x"}, {"stop", std::vector<std::string>(10000, "s")}}, "stop"},
      {{{"prompt", "x"}, {"stop_token_ids", {300}}}, "stop_token_ids"},
      {{{"prompt", ""}}, "prompt"},
      {{{"prompt", json::array()}}, "prompt"},
      {{{"max_tokens", 3}}, "prompt"},
      {{{"prompt", "x"}, {"stream_options", {{"include_usage", true}}}}, "stream_options"},
      {{{"prompt", "x"}, {"best_of", 2}}, "best_of"},
      {{{"prompt", std::string(300, 'x')}}, "input_tokens"},
      {{{"prompt", "xyz"}, {"max_tokens", 254}}, "input_tokens"},
  };
  for (const auto& [body, param] : cases) {
    auto r = post("/v1/completions", body);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << body.dump().substr(0, 200) << " -> " << r->body;
    auto j = json::parse(r->body);
    EXPECT_EQ(j["error"]["param"], param) << body.dump().substr(0, 200);
    EXPECT_EQ(j["error"]["type"], "BadRequestError");
  }
  auto unknown_model = post("/v1/completions", {{"prompt", "x"}, {"model", "nope"}});
  EXPECT_EQ(unknown_model->status, 404);
  EXPECT_EQ(client->Get("/no/such/route")->status, 404);
  EXPECT_EQ(client->Post("/v1/completions", "{\"prompt\":\"x\"}", "text/plain")->status, 400);
  auto too_long = post("/v1/completions", {{"prompt", "xyz"}, {"max_tokens", 254}});
  EXPECT_NE(json::parse(too_long->body)["error"]["message"].get<std::string>().find(
                "maximum context length is 256 tokens. However, you requested 254 output tokens and your prompt "
                "contains 3 input tokens"),
            std::string::npos);
  EXPECT_EQ(client->Get("/health")->status, 200);
  EXPECT_EQ(engine.received().size(), 0u);  // nothing bad reached the engine
}

TEST_F(Fixture, UnsupportedFeaturesAreRejectedNotIgnored) {
  start();
  for (const json& body : {json{{"prompt", "x"}, {"suffix", "y"}},
                           json{{"prompt", "x"}, {"response_format", {{"type", "structural_tag"}}}}}) {
    auto r = post("/v1/completions", body);
    EXPECT_EQ(r->status, 501) << body.dump();
  }
}

TEST_F(Fixture, ClientDisconnectMidStreamAbortsTheRequest) {
  start();
  engine.hold_threshold = 100;  // max_tokens 1000 below: generate until aborted
  {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(1, 0);
    int received = 0;
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/completions";
    req.headers = {{"Content-Type", "application/json"}};
    req.body = json{{"prompt", "abc"}, {"max_tokens", 200}, {"stream", true}}.dump();
    req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) { return ++received < 3; };
    auto r = c.send(req);  // returning false from the receiver closes the connection
    EXPECT_GE(received, 3);
  }
  for (int i = 0; i < 200 && engine.num_active() > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(engine.num_active(), 0u);
  EXPECT_EQ(engine.aborted().size(), 1u);
}

TEST_F(Fixture, ClientTimeoutOnNonStreamingAbortsTheRequest) {
  start();
  engine.hold_threshold = 100;
  {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(0, 300000);
    auto r = c.Post("/v1/completions", json{{"prompt", "abc"}, {"max_tokens", 200}}.dump(), "application/json");
    EXPECT_FALSE(r);  // timed out
  }
  for (int i = 0; i < 200 && engine.num_active() > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(engine.num_active(), 0u);
  EXPECT_EQ(engine.aborted().size(), 1u);
  auto r = post("/v1/completions", {{"prompt", "abc"}, {"max_tokens", 2}});
  EXPECT_EQ(r->status, 200);
}

TEST_F(Fixture, TokenizeDetokenize) {
  start();
  auto t = json::parse(post("/tokenize", {{"prompt", "hi"}})->body);
  EXPECT_EQ(t["tokens"], json({104, 105}));
  EXPECT_EQ(t["count"], 2);
  EXPECT_EQ(t["max_model_len"], 256);
  auto d = json::parse(post("/detokenize", {{"tokens", {104, 105}}})->body);
  EXPECT_EQ(d["prompt"], "hi");
  EXPECT_EQ(post("/detokenize", {{"tokens", {-1}}})->status, 400);
  EXPECT_EQ(post("/detokenize", {{"tokens", "x"}})->status, 400);
}

TEST_F(Fixture, ChatWithoutTemplateIsAClearError) {
  start();
  auto r = post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "hi"}}}}});
  EXPECT_EQ(r->status, 400);
}

}  // namespace
}  // namespace striker::server
