// Exact streaming shapes (chat-format.md §2.4, §3.2, §5.3), the option helpers, and a
// randomized sweep: generated outputs must parse the same whole and split.
#include <chrono>
#include <cstdio>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "parser_harness.h"

namespace striker::test {
namespace {

using J = nlohmann::json;

Glm47ParserOptions weather_options() {
  Glm47ParserOptions o;
  o.tool_choice.kind = ToolChoiceKind::Auto;
  o.tools = ToolSet::from_request(J::parse(R"([
    {"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":
      {"city":{"type":"string"},"days":{"type":"integer"}}}}},
    {"type":"function","function":{"name":"now"}},
    {"type":"function","function":{"name":"write","parameters":{"type":"object","properties":
      {"path":{"type":"string"},"text":{"type":"string"}}}}}])"));
  return o;
}

std::vector<std::string> delta_jsons(const StreamRun& run) {
  std::vector<std::string> out;
  for (const auto& d : run.deltas) {
    if (!d.empty()) out.push_back(glm47_delta_json(d).dump());
  }
  return out;
}

TEST(Glm47Stream, WorkedExampleDeltas) {
  const std::vector<std::string> chunks = {"Need", " the tool.", "</think>", "<tool_call>", "get_weather", "<arg_key>",
                                           "city", "</arg_key>", "<arg_value>", "Par", "is", "</arg_value>",
                                           "<arg_key>", "days", "</arg_key>", "<arg_value>", "2", "</arg_value>",
                                           "</tool_call>"};
  const auto run = run_chunks(chunks, weather_options());
  const std::vector<std::string> expected = {
      R"({"reasoning":"Need"})",
      R"({"reasoning":" the tool."})",
      R"({"tool_calls":[{"index":0,"id":"chatcmpl-tool-0","type":"function","function":{"name":"get_weather"}}]})",
      R"({"tool_calls":[{"index":0,"function":{"arguments":"{\"city\": \""}}]})",
      R"({"tool_calls":[{"index":0,"function":{"arguments":"Par"}}]})",
      R"({"tool_calls":[{"index":0,"function":{"arguments":"is"}}]})",
      R"({"tool_calls":[{"index":0,"function":{"arguments":"\", \"days\": "}}]})",
      R"({"tool_calls":[{"index":0,"function":{"arguments":"2}"}}]})",
  };
  EXPECT_EQ(delta_jsons(run), expected);
  EXPECT_EQ(glm47_message_json(run.message).dump(),
            R"({"role":"assistant","content":null,"refusal":null,"annotations":null,"audio":null,)"
            R"("function_call":null,"tool_calls":[{"id":"chatcmpl-tool-0","type":"function","function":)"
            R"({"name":"get_weather","arguments":"{\"city\": \"Paris\", \"days\": 2}"}}],"reasoning":"Need the tool."})");
}

TEST(Glm47Stream, ReasoningAndContentInOneDelta) {
  const auto run = run_chunks({"R</think>A"}, weather_options());
  ASSERT_EQ(delta_jsons(run), (std::vector<std::string>{R"({"reasoning":"R","content":"A"})"}));
  Glm47Delta d;
  d.reasoning = "x";
  EXPECT_EQ(glm47_delta_json(d, true).dump(), R"({"reasoning":"x","reasoning_content":"x"})");
}

TEST(Glm47Stream, NameAndArgumentsCoalescedWithinOneFeed) {
  const auto run = run_chunks({"R</think><tool_call>get_weather<arg_key>city</arg_key><arg_value>Oslo", "</arg_value>"
                               "</tool_call>"},
                              weather_options());
  EXPECT_EQ(delta_jsons(run),
            (std::vector<std::string>{
                R"({"reasoning":"R","tool_calls":[{"index":0,"id":"chatcmpl-tool-0","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Oslo"}}]})",
                R"({"tool_calls":[{"index":0,"function":{"arguments":"\"}"}}]})"}));
}

TEST(Glm47Stream, ContentAfterCallWaitsForNextDelta) {
  auto o = weather_options();
  o.thinking = false;
  const auto run = run_chunks({"<tool_call>now</tool_call>After", "."}, o);
  EXPECT_EQ(delta_jsons(run),
            (std::vector<std::string>{
                R"({"tool_calls":[{"index":0,"id":"chatcmpl-tool-0","type":"function","function":{"name":"now","arguments":"{}"}}]})",
                R"({"content":"After."})"}));
}

TEST(Glm47Stream, ZeroArgumentCallIsOneDeltaAtAnySplit) {
  const std::string text = "R</think><tool_call>now</tool_call>";
  for (size_t cut = 1; cut < text.size(); ++cut) {
    const auto run = run_chunks(split_at(text, {cut}), weather_options());
    int entries = 0;
    for (const auto& d : run.deltas) {
      for (const auto& c : d.tool_calls) {
        ++entries;
        EXPECT_EQ(c.name, "now");
        EXPECT_EQ(c.arguments.value_or(""), "{}");
      }
    }
    EXPECT_EQ(entries, 1) << "cut " << cut;
  }
}

TEST(Glm47Stream, LongStringArgumentStreamsIncrementally) {
  std::string big;
  std::mt19937 rng(7);
  const std::string alphabet = "abcdefghij \"\\\n<>/é日";
  while (big.size() < 4096) big += alphabet[rng() % 16];  // ASCII part only
  big += "é日本";
  const std::string text = "Plan.</think><tool_call>write<arg_key>path</arg_key><arg_value>/tmp/x</arg_value>"
                           "<arg_key>text</arg_key><arg_value>" +
                           big + "</arg_value></tool_call>";
  const auto run = run_chunks(random_split(text, rng, 8), weather_options());
  check_stream_rules(run, "4 kB argument");
  int fragments = 0;
  for (const auto& d : run.deltas) fragments += static_cast<int>(d.tool_calls.size());
  EXPECT_GT(fragments, 400);  // ~900 feeds inside the value, nearly each one streams
  ASSERT_EQ(run.message.tool_calls.size(), 1u);
  const auto args = J::parse(run.message.tool_calls[0].arguments);
  EXPECT_EQ(args.at("text").get<std::string>(), big);
  EXPECT_EQ(args.at("path").get<std::string>(), "/tmp/x");
}

TEST(Glm47Stream, HugeArgumentCostStaysLinear) {
  // 512 kB of argument text in 4-byte pieces: ~130k feeds. Rescanning the body on every
  // feed would be ~3e10 byte steps; appending to the open value keeps it linear.
  const std::string value(512 * 1024, 'x');
  Glm47Parser parser(with_counter_ids(weather_options()));
  std::string streamed;
  for (const auto& c : parser.feed("</think><tool_call>write<arg_key>text</arg_key><arg_value>").tool_calls)
    streamed += c.arguments.value_or("");
  const auto start = std::chrono::steady_clock::now();
  for (size_t i = 0; i < value.size(); i += 4) {
    for (const auto& c : parser.feed(value.substr(i, 4)).tool_calls) streamed += c.arguments.value_or("");
  }
  for (const auto& c : parser.feed("</arg_value></tool_call>").tool_calls) streamed += c.arguments.value_or("");
  parser.finish();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 5.0);
  ASSERT_EQ(parser.message().tool_calls.size(), 1u);
  EXPECT_TRUE(streamed == parser.message().tool_calls[0].arguments);  // (no 512 kB dump on failure)
  std::printf("512 kB argument streamed in %.3f s\n", seconds);
}

TEST(Glm47Stream, IncludeReasoningFalseSendsNoReasoning) {
  auto o = weather_options();
  o.include_reasoning = false;
  const auto run = run_chunks({"Th", "inking", "</think>", "Answer"}, o);
  EXPECT_EQ(delta_jsons(run), (std::vector<std::string>{R"({"content":"Answer"})"}));
  EXPECT_FALSE(run.message.reasoning.has_value());
}

TEST(Glm47Stream, RandomIdsAndFeedAfterFinish) {
  auto o = weather_options();
  Glm47Parser parser(o);  // default id generator
  parser.feed("</think><tool_call>now</tool_call><tool_call>now</tool_call>");
  parser.finish();
  EXPECT_TRUE(parser.feed("more").empty());
  EXPECT_TRUE(parser.finish().empty());
  const auto msg = parser.message();
  ASSERT_EQ(msg.tool_calls.size(), 2u);
  const std::regex id_form("chatcmpl-tool-[0-9a-f]{16}");
  EXPECT_TRUE(std::regex_match(msg.tool_calls[0].id, id_form)) << msg.tool_calls[0].id;
  EXPECT_NE(msg.tool_calls[0].id, msg.tool_calls[1].id);
}

TEST(Glm47Options, ThinkingFlagFromTemplateKwargs) {
  EXPECT_TRUE(glm47_thinking_enabled(J()));
  EXPECT_TRUE(glm47_thinking_enabled(J::object()));
  EXPECT_FALSE(glm47_thinking_enabled(J::parse(R"({"enable_thinking":false})")));
  EXPECT_FALSE(glm47_thinking_enabled(J::parse(R"({"thinking":false})")));
  EXPECT_FALSE(glm47_thinking_enabled(J::parse(R"({"enable_thinking":0})")));
  EXPECT_TRUE(glm47_thinking_enabled(J::parse(R"({"enable_thinking":null})")));
  EXPECT_TRUE(glm47_thinking_enabled(J::parse(R"({"thinking":true,"enable_thinking":false})")));
  EXPECT_TRUE(glm47_thinking_enabled(J::parse(R"({"enable_thinking":"yes"})")));
}

TEST(Glm47Options, ReasoningEndFromPrompt) {
  EXPECT_FALSE(glm47_is_reasoning_end("[gMASK]<sop><|user|>Hi<|assistant|><think>", true));
  EXPECT_TRUE(glm47_is_reasoning_end("[gMASK]<sop><|user|>Hi<|assistant|></think>", true));
  EXPECT_TRUE(glm47_is_reasoning_end("<|assistant|><think>R</think>A", true));
  EXPECT_FALSE(glm47_is_reasoning_end("no markers", true));
  EXPECT_TRUE(glm47_is_reasoning_end("<think>", false));
}

TEST(Glm47Options, FinishReasonRules) {
  const ToolChoice none{ToolChoiceKind::None, ""}, autoc{ToolChoiceKind::Auto, ""},
      required{ToolChoiceKind::Required, ""}, named{ToolChoiceKind::Named, "f"};
  EXPECT_EQ(glm47_finish_reason("stop", true, autoc), "tool_calls");
  EXPECT_EQ(glm47_finish_reason("stop", true, required), "tool_calls");
  EXPECT_EQ(glm47_finish_reason("stop", true, named), "stop");
  EXPECT_EQ(glm47_finish_reason("stop", true, none), "stop");
  EXPECT_EQ(glm47_finish_reason("length", true, autoc), "length");
  EXPECT_EQ(glm47_finish_reason("stop", false, autoc), "stop");
}

// Random outputs built from text, markers, marker fragments and well-formed calls.
std::string random_output(std::mt19937& rng) {
  static const std::vector<std::string> kPieces = {
      "hello", " ", "\n", "<", "</", "<think>", "</think>", "<tool_call>", "</tool_call>", "<arg_key>",
      "</arg_key>", "<arg_value>", "</arg_value>", "<tool_", "</arg_val", "é", "日本", "\"q\"", "\\", "get_weather", "now"};
  std::string out;
  int key = 0;
  const int parts = 1 + static_cast<int>(rng() % 14);
  for (int i = 0; i < parts; ++i) {
    if (rng() % 4 == 0) {
      // A well-formed call with distinct keys (a repeated key cannot stream consistently).
      out += rng() % 2 ? "<tool_call>get_weather" : "<tool_call>write\n";
      const int args = static_cast<int>(rng() % 3);
      for (int a = 0; a < args; ++a) {
        const std::string k = a == 0 ? (rng() % 2 ? "city" : "days") : "k" + std::to_string(key++);
        out += "<arg_key>" + k + "</arg_key><arg_value>" + (rng() % 2 ? "12" : "x<y\"\n") + "</arg_value>";
      }
      if (rng() % 5) out += "</tool_call>";
      else break;  // cut inside a call, as max_tokens would
    } else {
      out += kPieces[rng() % kPieces.size()];
    }
  }
  return out;
}

TEST(Glm47Stream, RandomOutputsParseTheSameAtAnySplit) {
  std::mt19937 rng(2024);
  for (int trial = 0; trial < 3000; ++trial) {
    const std::string text = random_output(rng);
    auto o = weather_options();
    o.thinking = trial % 3 != 0;
    o.tool_choice.kind = trial % 7 == 0 ? ToolChoiceKind::None : ToolChoiceKind::Auto;
    const auto whole = run_chunks({text}, o);
    const std::string expected = message_text(whole.message);
    const bool closed = !whole.cut_inside_call;
    check_stream_rules(whole, "whole: " + text, closed);
    for (int s = 0; s < 5; ++s) {
      const auto run = run_chunks(random_split(text, rng, 1 + s * 2), o);
      ASSERT_EQ(message_text(run.message), expected) << text;
      check_stream_rules(run, "split: " + text, closed);
    }
  }
}

}  // namespace
}  // namespace striker::test
