// Argument typing against JSON schemas (chat-format.md §2.3), Python-compatible JSON text,
// the argument scanner's regex semantics and tool_choice validation.
#include <gtest/gtest.h>

#include "chat/glm47_args.h"
#include "chat/tool_json.h"
#include "chat/tool_schema.h"
#include "core/error.h"

namespace striker {
namespace {

std::string coerce(const std::string& value, std::set<std::string> types) {
  return coerce_to_schema_types(value, types).json;
}

TEST(ToolTyping, ReferenceTable) {
  // The table of §2.3 (engine column).
  EXPECT_EQ(coerce("Paris", {"string"}), "\"Paris\"");
  EXPECT_EQ(coerce(" 007 ", {"string"}), "\" 007 \"");
  EXPECT_EQ(coerce("2", {"integer"}), "2");
  EXPECT_EQ(coerce("2.5", {"integer"}), "2.5");
  EXPECT_EQ(coerce("null", {"string", "null"}), "null");
  EXPECT_EQ(coerce("123", {"string", "null"}), "\"123\"");
  EXPECT_EQ(coerce("[\"a\",\"b\"]", {"array"}), "[\"a\", \"b\"]");
  EXPECT_EQ(coerce("['a','b']", {"array"}), "\"['a','b']\"");
}

TEST(ToolTyping, StringsThatLookLikeOtherTypesStayStrings) {
  for (const char* v : {"007", "true", "null", "1e5", "[1]", "{}", ""})
    EXPECT_EQ(coerce(v, {"string"}), python_json_string(v)) << v;
}

TEST(ToolTyping, Integers) {
  EXPECT_EQ(coerce(" -42 ", {"integer"}), "-42");
  EXPECT_EQ(coerce("+7", {"integer"}), "7");
  EXPECT_EQ(coerce("007", {"integer"}), "7");
  EXPECT_EQ(coerce("1_000", {"integer"}), "1000");
  EXPECT_EQ(coerce("123456789012345678901234567890", {"integer"}), "123456789012345678901234567890");
  EXPECT_EQ(coerce("1__0", {"integer"}), "\"1__0\"");
  EXPECT_EQ(coerce("abc", {"integer"}), "\"abc\"");
  EXPECT_EQ(coerce("true", {"integer"}), "true");  // final json.loads fallback
  EXPECT_EQ(coerce("7", {"int64"}), "7");          // alias
}

TEST(ToolTyping, Numbers) {
  EXPECT_EQ(coerce("2.0", {"number"}), "2");
  EXPECT_EQ(coerce("2.5", {"number"}), "2.5");
  EXPECT_EQ(coerce(" .5 ", {"number"}), "0.5");
  EXPECT_EQ(coerce("1e-7", {"number"}), "1e-07");
  EXPECT_EQ(coerce("1e20", {"number"}), "100000000000000000000");
  EXPECT_EQ(coerce("0.1", {"double"}), "0.1");
  EXPECT_EQ(coerce("inf", {"number"}), "\"inf\"");
  EXPECT_EQ(coerce("nan", {"number"}), "\"nan\"");
  EXPECT_EQ(coerce("1e400", {"number"}), "\"1e400\"");
}

TEST(ToolTyping, BooleansNullsPriority) {
  EXPECT_EQ(coerce(" True ", {"boolean"}), "true");
  EXPECT_EQ(coerce("0", {"boolean"}), "false");
  EXPECT_EQ(coerce("yes", {"boolean"}), "\"yes\"");
  EXPECT_EQ(coerce("NULL", {"null"}), "null");
  EXPECT_EQ(coerce(" null", {"null", "string"}), "\" null\"");  // no strip for null
  EXPECT_EQ(coerce(" null", {"null"}), "null");  // ...but the json.loads fallback strips
  EXPECT_EQ(coerce("1", {"integer", "boolean"}), "1");  // integer before boolean
  EXPECT_EQ(coerce("1", {"boolean", "string"}), "true");
  EXPECT_EQ(coerce("{\"a\": [1, {\"b\": null}]}", {"object"}), "{\"a\": [1, {\"b\": null}]}");
  EXPECT_EQ(coerce("5", {"object"}), "5");  // json.loads result accepted whatever its kind
  EXPECT_EQ(coerce("[1, NaN]", {"array"}), "\"[1, NaN]\"");
  EXPECT_EQ(coerce("{\"z\":1,\"a\":2}", {"dict"}), "{\"z\": 1, \"a\": 2}");  // key order kept
}

TEST(ToolTyping, HostileInputsDoNotCrash) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_EQ(coerce(deep, {"array"}), python_json_string(deep));
  EXPECT_EQ(coerce("[[[1]]]", {"array"}), "[[[1]]]");
  nlohmann::json schema = {{"type", "integer"}};
  for (int i = 0; i < 10000; ++i) {  // moved, not copied: {{"anyOf", {schema}}} copied it each time (O(n^2))
    nlohmann::json wrapped;
    wrapped["anyOf"].push_back(std::move(schema));
    schema = std::move(wrapped);
  }
  EXPECT_EQ(schema_types(schema), (std::set<std::string>{"string"}));  // too deep: nothing found
}

TEST(ToolTyping, SchemaTypes) {
  using J = nlohmann::json;
  EXPECT_EQ(schema_types(J::parse(R"({"type":["string","null"]})")), (std::set<std::string>{"null", "string"}));
  EXPECT_EQ(schema_types(J::parse(R"({"enum":["a",1,true,null,1.5]})")),
            (std::set<std::string>{"string", "integer", "boolean", "null", "number"}));
  EXPECT_EQ(schema_types(J::parse(R"({"anyOf":[{"type":"integer"},{"oneOf":[{"type":"array"}]}]})")),
            (std::set<std::string>{"integer", "array"}));
  EXPECT_EQ(schema_types(J::parse(R"({"description":"x"})")), (std::set<std::string>{"string"}));
  EXPECT_EQ(schema_types(J("not a schema")), (std::set<std::string>{"string"}));
}

TEST(PythonJson, FloatRepr) {
  EXPECT_EQ(python_float_repr(2.5), "2.5");
  EXPECT_EQ(python_float_repr(1.0), "1.0");
  EXPECT_EQ(python_float_repr(0.0001), "0.0001");
  EXPECT_EQ(python_float_repr(0.00001), "1e-05");
  EXPECT_EQ(python_float_repr(1.5e-7), "1.5e-07");
  EXPECT_EQ(python_float_repr(1e15), "1000000000000000.0");
  EXPECT_EQ(python_float_repr(1e16), "1e+16");
  EXPECT_EQ(python_float_repr(-123.456), "-123.456");
  EXPECT_EQ(python_float_repr(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(python_float_repr(1.2345678901234568e+17), "1.2345678901234568e+17");
  EXPECT_EQ(python_float_repr(-0.0), "-0.0");
}

TEST(PythonJson, Strings) {
  EXPECT_EQ(python_json_string("a\"b\\c\n\r\t\b\f\x1f\x7f é"), "\"a\\\"b\\\\c\\n\\r\\t\\b\\f\\u001f\x7f é\"");
  EXPECT_EQ(python_json_string("bad\xff"), "\"bad\xEF\xBF\xBD\"");
}

TEST(PythonJson, RoundTrip) {
  auto rt = [](const std::string& text) { return python_json_roundtrip(text).value_or(PythonJsonValue{"<rejected>"}).text; };
  EXPECT_EQ(rt(R"( {"b":[],"a":{},"c":[1.0,-0,"x",1E2,-0.0]} )"), R"({"b": [], "a": {}, "c": [1.0, 0, "x", 100.0, -0.0]})");
  EXPECT_EQ(rt("[123456789012345678901234567890, -98765432109876543210]"),
            "[123456789012345678901234567890, -98765432109876543210]");
  EXPECT_EQ(rt(R"({"a":1,"b":{"x":[1]},"a":2})"), R"({"a": 2, "b": {"x": [1]}})");
  EXPECT_EQ(rt(R"("\u00e9\/\n")"), R"("é/\n")");
  EXPECT_TRUE(python_json_roundtrip(R"("s")")->is_string);
  EXPECT_FALSE(python_json_roundtrip("[\"s\"]")->is_string);
  for (const char* bad : {"", "[1,", "1e400", "[NaN]", "{'a': 1}", "01", "[1] x", "\"\x01\""})
    EXPECT_FALSE(python_json_roundtrip(bad).has_value()) << bad;
}

TEST(Utf8, CompletePrefixHoldsCutCodePoint) {
  const std::string s = "a\xE6\x97\xA5";  // a + 日
  EXPECT_EQ(utf8_complete_prefix(s), 4u);
  EXPECT_EQ(utf8_complete_prefix(s.substr(0, 3)), 1u);
  EXPECT_EQ(utf8_complete_prefix(s.substr(0, 2)), 1u);
  EXPECT_EQ(utf8_complete_prefix("\xFF"), 1u);  // malformed is not held
  EXPECT_EQ(utf8_sanitize("x\xC3(y"), "x\xEF\xBF\xBD(y");
}

TEST(ArgScan, RegexSemantics) {
  auto pairs = glm47_scan_args("<arg_key> a </arg_key>\n<arg_value> v1 </arg_value>junk<arg_key>b</arg_key>"
                               "<arg_value>x</arg_value>",
                               false);
  ASSERT_EQ(pairs.size(), 2u);
  EXPECT_EQ(pairs[0].key, "a");
  EXPECT_EQ(pairs[0].value, " v1 ");
  EXPECT_EQ(pairs[1].key, "b");
  // The lazy key group runs past a `</arg_key>` not followed by `<arg_value>`.
  pairs = glm47_scan_args("<arg_key>a</arg_key>zz</arg_key><arg_value>v</arg_value>", false);
  ASSERT_EQ(pairs.size(), 1u);
  EXPECT_EQ(pairs[0].key, "a</arg_key>zz");
  // Unterminated value: only with partial.
  EXPECT_TRUE(glm47_scan_args("<arg_key>a</arg_key><arg_value>par", false).empty());
  pairs = glm47_scan_args("<arg_key>a</arg_key><arg_value>1</arg_value><arg_key>b</arg_key><arg_value>par", true);
  ASSERT_EQ(pairs.size(), 2u);
  EXPECT_EQ(pairs[1].value, "par");
  // A key without its value has not started a pair; an empty partial key is ignored.
  EXPECT_EQ(glm47_scan_args("<arg_key>a</arg_key>", true).size(), 0u);
  EXPECT_EQ(glm47_scan_args("<arg_key> </arg_key><arg_value>x", true).size(), 0u);
}

TEST(ArgScan, SafePrefixFollowsWorkedExample) {
  ToolSet tools = ToolSet::from_request(nlohmann::json::parse(
      R"([{"type":"function","function":{"name":"w","parameters":{"properties":{"city":{"type":"string"},"days":{"type":"integer"}}}}}])"));
  const ToolSchema* schema = tools.find("w");
  auto prefix = [&](const std::string& body) { return ToolArguments(schema, glm47_scan_args(body, true)).safe_prefix(); };
  EXPECT_EQ(prefix("<arg_key>city</arg_key>"), "");
  EXPECT_EQ(prefix("<arg_key>city</arg_key><arg_value>"), R"({"city": ")");
  EXPECT_EQ(prefix("<arg_key>city</arg_key><arg_value>Par"), R"({"city": "Par)");
  EXPECT_EQ(prefix("<arg_key>city</arg_key><arg_value>Paris</arg_value><arg_key>days</arg_key><arg_value>"),
            R"({"city": "Paris", "days": )");
  EXPECT_EQ(prefix("<arg_key>city</arg_key><arg_value>Paris</arg_value><arg_key>days</arg_key><arg_value>2"),
            R"({"city": "Paris", "days": )");
  EXPECT_EQ(ToolArguments(schema, glm47_scan_args("<arg_key>city</arg_key><arg_value>Paris</arg_value><arg_key>days"
                                                  "</arg_key><arg_value>2</arg_value>",
                                                  false))
                .json(),
            R"({"city": "Paris", "days": 2})");
}

TEST(ToolChoiceParse, VllmRules) {
  const auto tools = nlohmann::json::parse(R"([{"type":"function","function":{"name":"f"}}])");
  using J = nlohmann::json;
  EXPECT_EQ(parse_tool_choice(J(), tools).kind, ToolChoiceKind::Auto);
  EXPECT_EQ(parse_tool_choice(J(), J()).kind, ToolChoiceKind::None);
  EXPECT_EQ(parse_tool_choice("none", J()).kind, ToolChoiceKind::None);
  EXPECT_EQ(parse_tool_choice("required", tools).kind, ToolChoiceKind::Required);
  const auto named = parse_tool_choice(J::parse(R"({"type":"function","function":{"name":"f"}})"), tools);
  EXPECT_EQ(named.kind, ToolChoiceKind::Named);
  EXPECT_EQ(named.function_name, "f");
  EXPECT_THROW(parse_tool_choice("auto", J()), Error);
  EXPECT_THROW(parse_tool_choice("sometimes", tools), Error);
  EXPECT_THROW(parse_tool_choice(J::parse(R"({"type":"function"})"), tools), Error);
  EXPECT_THROW(parse_tool_choice(J::parse(R"({"type":"function","function":{"name":"g"}})"), tools), Error);
  EXPECT_THROW(parse_tool_choice("auto", J::array()), Error);
  EXPECT_THROW(ToolSet::from_request(J::parse(R"([{"type":"function","function":{}}])")), Error);
  EXPECT_THROW(ToolSet::from_request(J("x")), Error);
}

}  // namespace
}  // namespace striker
