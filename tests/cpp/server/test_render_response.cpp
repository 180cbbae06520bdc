// The GenerateRequest body of the render endpoints, from parsed requests (no HTTP).
#include <gtest/gtest.h>

#include "server/api_error.h"
#include "server/render_response.h"
#include "server/sampling_request.h"
#include "small_limits.h"

namespace striker::server {
namespace {

using nlohmann::json;

SamplingRequest parse(const json& body) {
  return parse_sampling_request(body, ApiKind::Chat, SamplingDefaults{}, small_request_limits());
}

TEST(RenderResponse, SamplingParamsUseVllmNames) {
  json body = {{"temperature", 0.25},      {"top_k", 5},          {"seed", 9},
               {"stop", {"a", "b"}},       {"max_tokens", 12},    {"logprobs", true},
               {"top_logprobs", 3},        {"logit_bias", {{"7", -2.5}}}, {"n", 2}};
  const SamplingRequest r = parse(body);
  const json sp = sampling_params_json(r.params);
  EXPECT_EQ(sp["temperature"], 0.25);
  EXPECT_EQ(sp["top_k"], 5);
  EXPECT_EQ(sp["seed"], 9);
  EXPECT_EQ(sp["stop"], json({"a", "b"}));
  EXPECT_EQ(sp["logprobs"], 3);
  EXPECT_EQ(sp["n"], 2);
  EXPECT_EQ(sp["logit_bias"], json({{"7", -2.5}}));
  EXPECT_TRUE(sp["prompt_logprobs"].is_null());
  const json plain = sampling_params_json(parse(json::object()).params);
  EXPECT_TRUE(plain["seed"].is_null());
  EXPECT_TRUE(plain["logprobs"].is_null());
  EXPECT_TRUE(plain["logit_bias"].is_null());
}

TEST(RenderResponse, GenerateRequestEchoesTheRequest) {
  json body = {{"model", "m"}, {"stream", true}, {"stream_options", {{"include_usage", true}}},
               {"cache_salt", "s"}, {"priority", 4}, {"max_tokens", 3}};
  SamplingRequest r = parse(body);
  resolve_max_tokens(r, 2, 100);
  const json out = generate_request_json("chatcmpl-1", {1, 2}, r, r.params, body);
  EXPECT_EQ(out["request_id"], "chatcmpl-1");
  EXPECT_EQ(out["token_ids"], json({1, 2}));
  EXPECT_EQ(out["model"], "m");
  EXPECT_EQ(out["stream"], true);
  EXPECT_EQ(out["stream_options"], json({{"include_usage", true}, {"continuous_usage_stats", false}}));
  EXPECT_EQ(out["cache_salt"], "s");
  EXPECT_EQ(out["priority"], 4);
  EXPECT_EQ(out["sampling_params"]["max_tokens"], 3);
  EXPECT_TRUE(out["features"].is_null());
  EXPECT_TRUE(out["kv_transfer_params"].is_null());
  EXPECT_EQ(out.size(), 10u);
}

TEST(RenderResponse, AbsentFieldsAreNullOrDefault) {
  const json body = json::object();
  const SamplingRequest r = parse(body);
  const json out = generate_request_json("cmpl-1", {5}, r, r.params, body);
  EXPECT_TRUE(out["model"].is_null());
  EXPECT_EQ(out["stream"], false);
  EXPECT_TRUE(out["stream_options"].is_null());
  EXPECT_TRUE(out["cache_salt"].is_null());
  EXPECT_EQ(out["priority"], 0);
}

TEST(RenderResponse, PriorityMustBeAnInt32) {
  for (const json& bad : {json("high"), json(1.5), json(int64_t(1) << 40)}) {
    try {
      parse(json{{"priority", bad}});
      ADD_FAILURE() << bad.dump();
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status(), 400);
      EXPECT_EQ(e.param(), "priority");
    }
  }
}

}  // namespace
}  // namespace striker::server
