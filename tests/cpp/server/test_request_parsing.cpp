// Request-body parsing without HTTP: sampling knobs, defaults precedence, context-length errors,
// structured-output schemas in the client's key order.
#include <gtest/gtest.h>

#include <chrono>

#include "core/ordered_json.h"
#include "server/api_error.h"
#include "server/metrics.h"
#include "server/sampling_request.h"
#include "small_limits.h"
#include "server/startup_config.h"
#include "server/structured_request.h"

namespace striker::server {
namespace {

using nlohmann::json;

TEST(SamplingRequest, RequestValueBeatsServerDefaultBeatsOpenAIDefault) {
  SamplingDefaults d;
  d.temperature = 0.7f;
  d.top_p = 0.95f;
  d.top_k = 20;
  auto r = parse_sampling_request(json{{"temperature", 0.0}}, ApiKind::Chat, d, small_request_limits());
  EXPECT_EQ(r.params.temperature, 0.0f);
  EXPECT_FLOAT_EQ(r.params.top_p, 0.95f);
  EXPECT_EQ(r.params.top_k, 20);
  EXPECT_EQ(r.params.min_p, 0.0f);
  auto plain = parse_sampling_request(json::object(), ApiKind::Chat, SamplingDefaults{}, small_request_limits());
  EXPECT_EQ(plain.params.temperature, 1.0f);
  EXPECT_EQ(plain.params.top_p, 1.0f);
  EXPECT_EQ(plain.params.top_k, 0);
}

TEST(SamplingRequest, ChatLogprobsNeedLogprobsTrue) {
  EXPECT_THROW(parse_sampling_request(json{{"top_logprobs", 3}}, ApiKind::Chat, {}, small_request_limits()), ApiError);
  auto r = parse_sampling_request(json{{"logprobs", true}, {"top_logprobs", 3}}, ApiKind::Chat, {}, small_request_limits());
  EXPECT_EQ(r.params.logprobs, 3);
  EXPECT_THROW(parse_sampling_request(json{{"logprobs", true}, {"top_logprobs", 21}}, ApiKind::Chat, {}, small_request_limits()),
               ApiError);
  auto none = parse_sampling_request(json::object(), ApiKind::Chat, {}, small_request_limits());
  EXPECT_FALSE(none.params.logprobs.has_value());
}

TEST(SamplingRequest, MaxCompletionTokensWinsOverMaxTokens) {
  auto r = parse_sampling_request(json{{"max_tokens", 5}, {"max_completion_tokens", 7}}, ApiKind::Chat, {}, small_request_limits());
  EXPECT_EQ(r.max_tokens, 7);
}

TEST(SamplingRequest, StopAndSeedForms) {
  auto r = parse_sampling_request(json{{"stop", "x"}, {"seed", -5}}, ApiKind::Completion, {}, small_request_limits());
  EXPECT_EQ(r.params.stop, std::vector<std::string>{"x"});
  EXPECT_EQ(r.params.seed, uint64_t(-5));
  auto list = parse_sampling_request(json{{"stop", {"a", "b"}}, {"seed", 18446744073709551615ULL}}, ApiKind::Completion,
                                     {}, small_request_limits());
  EXPECT_EQ(list.params.stop.size(), 2u);
  EXPECT_THROW(parse_sampling_request(json{{"stop", {1}}}, ApiKind::Completion, {}, small_request_limits()), ApiError);
}

TEST(SamplingRequest, LogitBiasIsClampedAndChecked) {
  auto r = parse_sampling_request(json{{"logit_bias", {{"5", 500}, {"6", -3}}}}, ApiKind::Chat, {}, small_request_limits());
  EXPECT_EQ(r.params.logit_bias.at(5), 100.0f);
  EXPECT_EQ(r.params.logit_bias.at(6), -3.0f);
  EXPECT_THROW(parse_sampling_request(json{{"logit_bias", {{"1000", 1}}}}, ApiKind::Chat, {}, small_request_limits()), ApiError);
  EXPECT_THROW(parse_sampling_request(json{{"logit_bias", {{"5x", 1}}}}, ApiKind::Chat, {}, small_request_limits()), ApiError);
}

// Every schema-carrying field, as an object and as a string holding one, keeps the written
// order of `properties` (the grammar generates them in it, as vLLM does).
TEST(StructuredRequest, SchemasKeepTheClientsKeyOrder) {
  const std::string schema = R"({"type": "object", "properties": {"zeta": {"type": "integer"}, "alpha": {"type": "string"}}})";
  for (const std::string& body :
       {R"({"structured_outputs": {"json": )" + schema + "}}", R"({"guided_json": )" + schema + "}",
        R"({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": )" + schema + "}}}",
        R"({"structured_outputs": {"json": )" + nlohmann::json(schema).dump() + "}}",
        R"({"guided_json": )" + nlohmann::json(schema).dump() + "}"}) {
    const auto req = parse_structured_request(nlohmann::ordered_json::parse(body));
    ASSERT_TRUE(req.has_value()) << body;
    std::vector<std::string> keys;
    for (const auto& [k, v] : req->spec.schema.at("properties").items()) keys.push_back(k);
    EXPECT_EQ(keys, (std::vector<std::string>{"zeta", "alpha"})) << body;
  }
}

// The request parser keeps key order like ordered_json::parse, and Python's json.loads on a
// repeated key (first position, last value), without its quadratic cost on large objects.
TEST(OrderedJson, KeepsOrderRepeatedKeysAndErrorsLikeOrderedJsonParse) {
  const std::string text = R"({"z": 1, "a": {"y": [1, {"q": null, "b": 2.5}], "x": "s"}, "z": 3, "m": true})";
  const auto got = parse_ordered_json(text);
  EXPECT_EQ(got.dump(), R"({"z":3,"a":{"y":[1,{"q":null,"b":2.5}],"x":"s"},"m":true})");
  EXPECT_EQ(got.dump(), nlohmann::ordered_json::parse(text).dump());
  EXPECT_EQ(parse_ordered_json("[]").dump(), "[]");
  EXPECT_EQ(parse_ordered_json("7").dump(), "7");
  for (const char* bad : {"", "{", R"({"a" 1})", "[1,]", "{} x", R"({"a": 1e999})"})
    EXPECT_THROW(parse_ordered_json(bad), nlohmann::json::exception) << bad;
  // Large objects (indexed): order kept, repeats merged, in time linear in the keys
  // (ordered_json::parse needs seconds for this one).
  std::string big = "{";
  for (int i = 0; i < 200000; ++i) big += "\"k" + std::to_string(i % 150000) + "\":" + std::to_string(i) + ",";
  big += R"("last": 0})";
  const auto t0 = std::chrono::steady_clock::now();
  const auto large = parse_ordered_json(big);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(large.size(), 150001u);
  EXPECT_EQ(large.begin().key(), "k0");
  EXPECT_EQ(large.begin().value(), 150000);  // the repeat's value, at the first position
  EXPECT_EQ(std::next(large.begin(), 149999).key(), "k149999");
  EXPECT_EQ(large.back(), 0);
  EXPECT_LT(seconds, 5.0);  // about 0.1 s; the quadratic parse takes minutes
}

TEST(OrderedJson, MergeKeysReplacesInPlaceAndAppendsInOrder) {
  auto into = nlohmann::ordered_json::parse(R"({"b": 1, "a": 2})");
  merge_keys(into, nlohmann::ordered_json::parse(R"({"z": 3, "a": 4, "c": 5})"));
  EXPECT_EQ(into.dump(), R"({"b":1,"a":4,"z":3,"c":5})");
  auto obj = nlohmann::ordered_json::object();
  append_new_key(obj, "y", 1);
  append_new_key(obj, "x", 2);
  EXPECT_EQ(obj.dump(), R"({"y":1,"x":2})");
}

TEST(ResolveMaxTokens, FillsTheRestOfTheContextOrRejectsWithBothNumbers) {
  auto r = parse_sampling_request(json::object(), ApiKind::Chat, {}, small_request_limits());
  resolve_max_tokens(r, 40, 100);
  EXPECT_EQ(r.params.max_tokens, 60);
  auto big = parse_sampling_request(json{{"max_tokens", 70}}, ApiKind::Chat, {}, small_request_limits());
  try {
    resolve_max_tokens(big, 40, 100);
    FAIL() << "expected a context-length error";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    const std::string msg = e.what();
    EXPECT_NE(msg.find("maximum context length is 100 tokens"), std::string::npos) << msg;
    EXPECT_NE(msg.find("you requested 70 output tokens"), std::string::npos) << msg;
    EXPECT_NE(msg.find("your prompt contains 40 input tokens"), std::string::npos) << msg;
    EXPECT_NE(msg.find("total of 110 tokens"), std::string::npos) << msg;
  }
  auto full = parse_sampling_request(json::object(), ApiKind::Chat, {}, small_request_limits());
  EXPECT_THROW(resolve_max_tokens(full, 100, 100), ApiError);
}

TEST(ResolveMaxTokens, CompletionsDefaultTo16AsVllmWhenTheFieldIsAbsent) {
  auto absent = parse_sampling_request(json::object(), ApiKind::Completion, {}, small_request_limits());
  resolve_max_tokens(absent, 40, 100);
  EXPECT_EQ(absent.params.max_tokens, 16);
  auto short_room = parse_sampling_request(json::object(), ApiKind::Completion, {}, small_request_limits());
  resolve_max_tokens(short_room, 90, 100);  // the default never asks past the context
  EXPECT_EQ(short_room.params.max_tokens, 10);
  auto null_mt = parse_sampling_request(json{{"max_tokens", nullptr}}, ApiKind::Completion, {}, small_request_limits());
  resolve_max_tokens(null_mt, 40, 100);  // an explicit null: the room left, as vLLM's None
  EXPECT_EQ(null_mt.params.max_tokens, 60);
  auto chat = parse_sampling_request(json::object(), ApiKind::Chat, {}, small_request_limits());
  resolve_max_tokens(chat, 40, 100);
  EXPECT_EQ(chat.params.max_tokens, 60);
  EXPECT_THROW(parse_sampling_request(json{{"min_tokens", 17}}, ApiKind::Completion, {}, small_request_limits()), ApiError);
}

TEST(Metrics, OneTwoFiveBucketsAndHistogramText) {
  EXPECT_EQ(one_two_five_buckets(100), (std::vector<double>{1, 2, 5, 10, 20, 50, 100}));
  Histogram h({1, 2});
  h.observe(0.5);
  h.observe(1.5);
  h.observe(7);
  std::string out;
  h.render(out, "m", "a=\"b\"");
  EXPECT_NE(out.find("m_bucket{a=\"b\",le=\"1\"} 1\n"), std::string::npos) << out;
  EXPECT_NE(out.find("m_bucket{a=\"b\",le=\"2\"} 2\n"), std::string::npos) << out;
  EXPECT_NE(out.find("m_bucket{a=\"b\",le=\"+Inf\"} 3\n"), std::string::npos) << out;
  EXPECT_NE(out.find("m_count{a=\"b\"} 3\n"), std::string::npos) << out;
  EXPECT_NE(out.find("m_sum{a=\"b\"} 9\n"), std::string::npos) << out;
}

TEST(StartupConfig, MemorySizes) {
  EXPECT_EQ(parse_memory_size("512MiB", "--x"), 512ll << 20);
  EXPECT_EQ(parse_memory_size("2GiB", "--x"), 2ll << 30);
  EXPECT_EQ(parse_memory_size("1000", "--x"), 1000);
  EXPECT_THROW(parse_memory_size("lots", "--x"), Error);
  EXPECT_THROW(parse_memory_size("5 parsecs", "--x"), Error);
  EXPECT_THROW(parse_memory_size("-1GiB", "--x"), Error);
}

TEST(StartupConfig, GenerationConfigModes) {
  const std::string dir = STRIKER_SHARED_DIR "/fixtures/flint-tokenizer";
  const auto folder = load_generation_config(dir, "/nonexistent", {});
  EXPECT_FLOAT_EQ(*folder.defaults.top_p, 0.95f);
  EXPECT_EQ(*folder.defaults.top_k, 20);
  EXPECT_EQ(folder.eos_token_ids, (std::vector<int32_t>{151329, 151336, 151338}));
  // The non-primary eos ids become default stop_token_ids, merged into each request's.
  EXPECT_EQ(folder.defaults.stop_token_ids, (std::vector<int32_t>{151336, 151338}));
  RequestLimits big = small_request_limits();
  big.vocab_size = 151552;
  auto r = parse_sampling_request(json{{"stop_token_ids", {151338, 5}}}, ApiKind::Chat, folder.defaults, big);
  EXPECT_EQ(r.params.stop_token_ids, (std::vector<int32_t>{151338, 5, 151336}));
  const auto vllm = load_generation_config("vllm", dir, {7});
  EXPECT_FALSE(vllm.defaults.temperature.has_value());
  EXPECT_EQ(vllm.eos_token_ids, std::vector<int32_t>{7});
  EXPECT_THROW(load_generation_config("/nonexistent", dir, {}), Error);
  EXPECT_THROW(parse_template_kwargs_flag("[1]"), Error);
  EXPECT_EQ(parse_template_kwargs_flag("{\"enable_thinking\": false}")["enable_thinking"], false);
}

}  // namespace
}  // namespace striker::server
