// Prompt logprobs written as JSON text, and the splice of such text into a response document.
#include <gtest/gtest.h>

#include <cmath>

#include "fakes.h"
#include "server/prompt_logprobs.h"

namespace striker::server {
namespace {

using nlohmann::json;

TEST(PromptLogprobsText, VllmLayoutParsesBackToTheValues) {
  testing::ByteTokenizer tok;
  std::vector<std::optional<TokenLogprob>> lps(3);
  lps[1] = TokenLogprob{'a', -0.25f, {{'b', -0.1f}, {'a', -0.25f}, {'"', -3.5f}}, 2};
  lps[2] = TokenLogprob{'\n', -INFINITY, {{'c', -1e-7f}}, 77};
  const std::string text = prompt_logprobs_text(tok, lps);
  const json j = json::parse(text);  // throws on anything that is not JSON
  ASSERT_EQ(j.size(), 3u);
  EXPECT_TRUE(j[0].is_null());
  // The prompt token first, then the best tokens ranked 1, 2, ... (the prompt token once).
  EXPECT_EQ(text.find("{\"97\":"), text.find('{', 1));
  ASSERT_EQ(j[1].size(), 3u);
  EXPECT_EQ(j[1]["97"]["rank"], 2);
  EXPECT_EQ(j[1]["97"]["logprob"].get<double>(), double(-0.25f));
  EXPECT_EQ(j[1]["98"]["rank"], 1);
  EXPECT_EQ(j[1]["98"]["logprob"].get<double>(), double(-0.1f));  // the float's exact double
  EXPECT_EQ(j[1]["34"]["rank"], 3);
  EXPECT_EQ(j[1]["34"]["decoded_token"], "\"");
  EXPECT_EQ(j[2]["10"]["decoded_token"], "\n");
  EXPECT_TRUE(j[2]["10"]["logprob"].is_number_float());  // -9999.0, not the integer -9999
  EXPECT_EQ(j[2]["10"]["logprob"].get<double>(), -9999.0);
  EXPECT_EQ(j[2]["99"]["logprob"].get<double>(), double(-1e-7f));
}

TEST(PromptLogprobsText, SplicedIntoTheDocumentByKeyOnly) {
  json doc = {{"choices", json::array({{{"text", "\x01raw:0\x01"}, {"prompt_logprobs", raw_json_marker(1)}},
                                       {{"prompt_logprobs", raw_json_marker(0)}}})},
              {"id", "x"}};
  const std::string out = dump_with_raw_values(doc, "prompt_logprobs", {"[null,{\"1\":2}]", "[3]"});
  const json j = json::parse(out);
  EXPECT_EQ(j["choices"][0]["prompt_logprobs"], json::array({3}));
  EXPECT_EQ(j["choices"][1]["prompt_logprobs"], json::parse("[null,{\"1\":2}]"));
  EXPECT_EQ(j["choices"][0]["text"], "\x01raw:0\x01");  // a generated text that looks like a marker stays
  EXPECT_EQ(dump_with_raw_values(json{{"a", 1}}, "prompt_logprobs", {}), "{\"a\":1}");
  EXPECT_THROW(dump_with_raw_values(json{{"prompt_logprobs", raw_json_marker(5)}}, "prompt_logprobs", {"1"}),
               std::logic_error);
}

}  // namespace
}  // namespace striker::server
