// Reference outputs (chat-format.md §2.7, §3.2, §6, §7) fed whole, split at every byte
// boundary, at every pair of boundaries (short outputs) and in random multi-splits: the
// final message must not change and every stream must obey the delta rules.
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "parser_harness.h"

namespace striker::test {
namespace {

const nlohmann::json kTools = nlohmann::json::parse(R"([
  {"type":"function","function":{"name":"get_weather","description":"Get current weather",
    "parameters":{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city"]}}},
  {"type":"function","function":{"name":"now","description":null,"parameters":null}},
  {"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"type":"integer"}}}}},
  {"type":"function","function":{"name":"g","parameters":{"type":"object","properties":{"a":{"type":"string"}}}}},
  {"type":"function","function":{"name":"free","parameters":{"type":"object"}}},
  {"type":"function","function":{"name":"typed","parameters":{"type":"object","properties":{
    "s":{"type":"string"},"opt":{"type":["string","null"]},"flags":{"type":"array"},"n":{"type":"number"},
    "b":{"type":"boolean"},"o":{"type":"object"},"e":{"enum":[1,2,3]},"u":{"anyOf":[{"type":"integer"},{"type":"null"}]}}}}}
])");

struct Call {
  std::string name, arguments;
};

struct Case {
  std::string name;
  std::string output;
  Glm47ParserOptions options;
  std::optional<std::string> content, reasoning;
  std::vector<Call> calls;
  std::string engine_finish = "stop";
  std::string finish_reason = "stop";
  bool calls_closed = true;
};

Glm47ParserOptions opts(ToolChoiceKind kind = ToolChoiceKind::Auto, bool thinking = true) {
  Glm47ParserOptions o;
  o.thinking = thinking;
  o.tool_choice.kind = kind;
  o.tools = ToolSet::from_request(kTools);
  return o;
}

Glm47ParserOptions named(const std::string& fn) {
  auto o = opts(ToolChoiceKind::Named);
  o.tool_choice.function_name = fn;
  return o;
}

const std::string kWeatherCall =
    "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value>"
    "<arg_key>days</arg_key><arg_value>2</arg_value></tool_call>";
const std::string kParisArgs = R"({"city": "Paris", "days": 2})";
const std::nullopt_t null = std::nullopt;

std::vector<Case> cases() {
  std::vector<Case> c;
  c.push_back({"reasoning_then_content", "R</think>A", opts(), "A", "R"});
  c.push_back({"reasoning_then_call", "Need the tool.</think>" + kWeatherCall, opts(), null, "Need the tool.",
               {{"get_weather", kParisArgs}}, "stop", "tool_calls"});
  c.push_back({"integer_schema", "R</think><tool_call>f<arg_key>a</arg_key><arg_value>1</arg_value></tool_call>",
               opts(), null, "R", {{"f", R"({"a": 1})"}}, "stop", "tool_calls"});
  c.push_back({"string_schema", "R</think><tool_call>g<arg_key>a</arg_key><arg_value>1</arg_value></tool_call>",
               opts(), null, "R", {{"g", R"({"a": "1"})"}}, "stop", "tool_calls"});
  c.push_back({"glm45_newlines",
               "R</think><tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>x</arg_value>\n</tool_call>",
               opts(), null, "R", {{"get_weather", R"({"city": "x"})"}}, "stop", "tool_calls"});
  c.push_back({"space_between_key_and_value",
               "</think><tool_call>get_weather<arg_key> city </arg_key> \n <arg_value>Oslo</arg_value></tool_call>",
               opts(), null, null, {{"get_weather", R"({"city": "Oslo"})"}}, "stop", "tool_calls"});
  c.push_back({"two_calls",
               "</think><tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value></tool_call>"
               "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Oslo</arg_value></tool_call>",
               opts(), null, null,
               {{"get_weather", R"({"city": "Paris"})"}, {"get_weather", R"({"city": "Oslo"})"}}, "stop",
               "tool_calls"});
  c.push_back({"content_before_between_after",
               "R</think>Let me check. <tool_call>now</tool_call> and <tool_call>now</tool_call> done.\n", opts(),
               "Let me check.  and  done.", "R", {{"now", "{}"}, {"now", "{}"}}, "stop", "tool_calls"});
  c.push_back({"call_inside_reasoning",
               "thinking<tool_call>get_weather<arg_key>city</arg_key><arg_value>Rome</arg_value></tool_call>", opts(),
               null, "thinking", {{"get_weather", R"({"city": "Rome"})"}}, "stop", "tool_calls"});
  c.push_back({"zero_arg_inline", "</think><tool_call>now</tool_call>", opts(), null, null, {{"now", "{}"}}, "stop",
               "tool_calls"});
  c.push_back({"zero_arg_newline", "R</think><tool_call>now\n</tool_call>", opts(), null, "R", {{"now", "{}"}},
               "stop", "tool_calls"});
  c.push_back({"unknown_tool_dropped",
               "R</think>Hi<tool_call>nope<arg_key>x</arg_key><arg_value>1</arg_value></tool_call>", opts(), "Hi",
               "R"});
  c.push_back({"escapes_and_unicode",
               "</think><tool_call>g<arg_key>a</arg_key><arg_value>He said \"hi\" \\ C:\\dir\nline2\t\x01"
               " ünïcødé 日本 🎉 <b>x</b> a<b</arg_value></tool_call>",
               opts(), null, null,
               {{"g", "{\"a\": \"He said \\\"hi\\\" \\\\ C:\\\\dir\\nline2\\t\\u0001 ünïcødé 日本 🎉 <b>x</b> a<b\"}"}},
               "stop", "tool_calls"});
  c.push_back({"stray_think_in_reasoning", "<think>R1 <think>more</think>C", opts(), "C", "R1 more"});
  c.push_back({"stray_close_think_in_content", "R</think>A</think>B", opts(), "AB", "R"});
  c.push_back({"think_in_content_reopens_reasoning", "R</think>A<think>R2</think>B", opts(), "AB", "RR2"});
  c.push_back({"thinking_off_literal_close_think", "A</think>B<think>", opts(ToolChoiceKind::Auto, false),
               "A</think>B<think>", null});
  c.push_back({"thinking_off_call", "Sure.<tool_call>now</tool_call>", opts(ToolChoiceKind::Auto, false), "Sure.",
               null, {{"now", "{}"}}, "stop", "tool_calls"});
  c.push_back({"truncated_in_reasoning", "still thinking \n", opts(), null, "still thinking", {}, "length",
               "length"});
  c.push_back({"truncated_in_content", "R</think>partial ans", opts(), "partial ans", "R", {}, "length", "length"});
  c.push_back({"truncated_in_call",
               "R</think><tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value>"
               "<arg_key>days</arg_key><arg_value>1",
               opts(), null, "R", {{"get_weather", R"({"city": "Paris"})"}}, "length", "length", false});
  c.push_back({"truncated_in_name", "R</think><tool_call>get_weather", opts(), null, "R", {{"get_weather", "{}"}},
               "length", "length", false});
  c.push_back({"truncated_inside_marker", "R</think>Hello <tool_ca", opts(), "Hello <tool_ca", "R", {}, "length",
               "length"});
  {
    auto o = opts();
    o.include_reasoning = false;
    c.push_back({"include_reasoning_false", "R</think>A", o, "A", null});
  }
  {
    auto o = opts();
    o.parallel_tool_calls = false;
    c.push_back({"parallel_tool_calls_false",
                 "</think><tool_call>now</tool_call><tool_call>get_weather<arg_key>city</arg_key>"
                 "<arg_value>Oslo</arg_value></tool_call>",
                 o, null, null, {{"now", "{}"}}, "stop", "tool_calls"});
  }
  c.push_back({"tool_choice_none_drops_markup", "R</think>Sure" + kWeatherCall, opts(ToolChoiceKind::None),
               "Sure", "R"});
  {
    auto o = opts(ToolChoiceKind::None);
    o.drop_tool_markup_when_none = false;
    c.push_back({"tool_choice_none_markup_as_content", "R</think>Sure" + kWeatherCall, o, "Sure" + kWeatherCall,
                 "R"});
  }
  {
    auto o = opts();
    o.tool_parser_enabled = false;
    c.push_back({"no_tool_parser", "R</think>" + kWeatherCall, o, kWeatherCall, "R"});
  }
  c.push_back({"tool_choice_required", "R</think>" + kWeatherCall, opts(ToolChoiceKind::Required), "", "R",
               {{"get_weather", kParisArgs}}, "stop", "tool_calls"});
  c.push_back({"tool_choice_named", "R</think>" + kWeatherCall, named("get_weather"), "", "R",
               {{"get_weather", kParisArgs}}, "stop", "stop"});
  c.push_back({"whitespace_content_before_call", "R</think>\n\n<tool_call>now</tool_call>\n", opts(), null, "R",
               {{"now", "{}"}}, "stop", "tool_calls"});
  c.push_back({"leading_whitespace_content_kept", "R \n</think>\n\nHello", opts(), "\n\nHello", "R"});
  c.push_back({"whitespace_only_content", "R</think>\n\n", opts(), "\n\n", "R"});
  c.push_back({"schema_typing",
               "</think><tool_call>typed<arg_key>s</arg_key><arg_value> 007 </arg_value>"
               "<arg_key>opt</arg_key><arg_value>null</arg_value><arg_key>flags</arg_key><arg_value>[\"a\",\"b\"]"
               "</arg_value><arg_key>n</arg_key><arg_value>2.0</arg_value><arg_key>b</arg_key><arg_value>TRUE"
               "</arg_value><arg_key>o</arg_key><arg_value>{\"k\":[1,2.5]}</arg_value><arg_key>e</arg_key>"
               "<arg_value>2</arg_value><arg_key>u</arg_key><arg_value>x</arg_value><arg_key>extra</arg_key>"
               "<arg_value>42</arg_value></tool_call>",
               opts(), null, null,
               {{"typed", R"({"s": " 007 ", "opt": null, "flags": ["a", "b"], "n": 2, "b": true, )"
                          R"("o": {"k": [1, 2.5]}, "e": 2, "u": "x", "extra": "42"})"}},
               "stop", "tool_calls"});
  c.push_back({"schema_less_tool_all_strings",
               "</think><tool_call>free<arg_key>n</arg_key><arg_value>42</arg_value><arg_key>t</arg_key>"
               "<arg_value>true</arg_value></tool_call>",
               opts(), null, null, {{"free", R"({"n": "42", "t": "true"})"}}, "stop", "tool_calls"});
  c.push_back({"markers_inside_value",
               "</think><tool_call>g<arg_key>a</arg_key><arg_value>x</think><tool_call>y<arg_key>"
               "</arg_value></tool_call>",
               opts(), null, null, {{"g", R"({"a": "x</think><tool_call>y<arg_key>"})"}}, "stop", "tool_calls"});
  c.push_back({"repeated_key_last_wins",
               "</think><tool_call>f<arg_key>a</arg_key><arg_value>1</arg_value><arg_key>a</arg_key>"
               "<arg_value>3</arg_value></tool_call>",
               opts(), null, null, {{"f", R"({"a": 3})"}}, "stop", "tool_calls"});
  c.push_back({"integer_schema_gets_float", "</think><tool_call>f<arg_key>a</arg_key><arg_value>2.5</arg_value>"
                                            "</tool_call>",
               opts(), null, null, {{"f", R"({"a": 2.5})"}}, "stop", "tool_calls"});
  c.push_back({"call_then_more_content_and_reasoning",
               "R</think><tool_call>now</tool_call>After.<think>R2</think>End", opts(), "After.End", "RR2",
               {{"now", "{}"}}, "stop", "tool_calls"});
  c.push_back({"length_after_complete_call", "R</think>" + kWeatherCall, opts(), null, "R",
               {{"get_weather", kParisArgs}}, "length", "length"});
  return c;
}

void expect_message(const Case& c, const StreamRun& run) {
  const auto& m = run.message;
  EXPECT_EQ(m.content, c.content);
  EXPECT_EQ(m.reasoning, c.reasoning);
  ASSERT_EQ(m.tool_calls.size(), c.calls.size());
  for (size_t i = 0; i < c.calls.size(); ++i) {
    EXPECT_EQ(m.tool_calls[i].name, c.calls[i].name);
    EXPECT_EQ(m.tool_calls[i].arguments, c.calls[i].arguments);
    EXPECT_EQ(m.tool_calls[i].id, "chatcmpl-tool-" + std::to_string(i));
  }
  EXPECT_EQ(glm47_finish_reason(c.engine_finish, run.has_tool_calls, c.options.tool_choice), c.finish_reason);
}

// gtest prints a failing parameter with this instead of its raw bytes.
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class Glm47Cases : public ::testing::TestWithParam<Case> {};

TEST_P(Glm47Cases, WholeOutput) {
  const Case& c = GetParam();
  const auto run = run_chunks({c.output}, c.options);
  expect_message(c, run);
  check_stream_rules(run, "whole", c.calls_closed);
  // The non-streaming helper agrees with the streaming object.
  EXPECT_EQ(message_text(glm47_parse_complete(c.output, with_counter_ids(c.options))), message_text(run.message));
}

TEST_P(Glm47Cases, EverySingleSplit) {
  const Case& c = GetParam();
  const std::string expected = message_text(run_chunks({c.output}, c.options).message);
  for (size_t cut = 1; cut < c.output.size(); ++cut) {
    const auto run = run_chunks(split_at(c.output, {cut}), c.options);
    ASSERT_EQ(message_text(run.message), expected) << "split at " << cut;
    check_stream_rules(run, "split at " + std::to_string(cut), c.calls_closed);
  }
}

TEST_P(Glm47Cases, EveryPairOfSplits) {
  const Case& c = GetParam();
  const std::string expected = message_text(run_chunks({c.output}, c.options).message);
  const size_t n = std::min<size_t>(c.output.size(), 100);  // keeps the quadratic sweep quick
  for (size_t a = 1; a < n; ++a) {
    for (size_t b = a + 1; b < n; ++b) {
      const auto run = run_chunks(split_at(c.output, {a, b}), c.options);
      ASSERT_EQ(message_text(run.message), expected) << "splits at " << a << "," << b;
      check_stream_rules(run, "splits " + std::to_string(a) + "," + std::to_string(b), c.calls_closed);
    }
  }
}

TEST_P(Glm47Cases, ByteByByteAndRandomSplits) {
  const Case& c = GetParam();
  const std::string expected = message_text(run_chunks({c.output}, c.options).message);
  std::vector<std::string> bytes;
  for (char ch : c.output) bytes.emplace_back(1, ch);
  const auto byte_run = run_chunks(bytes, c.options);
  ASSERT_EQ(message_text(byte_run.message), expected);
  check_stream_rules(byte_run, "byte by byte", c.calls_closed);
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 300; ++trial) {
    const auto chunks = random_split(c.output, rng, 1 + trial % 12);
    const auto run = run_chunks(chunks, c.options);
    ASSERT_EQ(message_text(run.message), expected) << "trial " << trial;
    check_stream_rules(run, "trial " + std::to_string(trial), c.calls_closed);
  }
}

INSTANTIATE_TEST_SUITE_P(Reference, Glm47Cases, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace striker::test
