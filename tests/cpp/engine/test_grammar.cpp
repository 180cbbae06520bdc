// The grammar engine on a small hand-made vocabulary: regex, JSON schema, GBNF, choice and
// tool-call grammars accept exactly what they should, token masks agree with a brute-force
// check of every token, and bad input is refused with the keyword at fault.
#include <gtest/gtest.h>

#include <functional>
#include <variant>

#include "engine/grammar/gbnf_grammar.h"
#include "engine/grammar/json_grammar.h"
#include "engine/grammar/json_schema_grammar.h"
#include "engine/grammar/regex_grammar.h"
#include "engine/grammar/structured_output.h"

namespace striker::grammar {
namespace {

using nlohmann::json;

// Every printable ASCII character, a few multi-character pieces that cross terminals, some
// UTF-8 and two "added" tokens (ids 0 and 1) that only grammars naming them may use.
std::shared_ptr<const TokenVocabulary> small_vocab() {
  std::vector<std::string> t{"<A>", "<B>"};
  for (int c = 0x20; c < 0x7f; ++c) t.push_back(std::string(1, char(c)));
  for (const char* s : {"\n", "\t", "{\"", "\":", "\",", "\"}", "\"]", "true", "false", "null", "12", "345", "ab",
                        "abc", ", \"", "é", "\xC3", "\xA9", "日本", "-1", ".5", "\\\"", "\\n", "\\u00e9"})
    t.push_back(s);
  return std::make_shared<TokenVocabulary>(t, std::vector<int32_t>{0, 1});
}

struct Compiled {
  std::shared_ptr<const CompiledGrammar> g;
  GrammarAutomaton& a() const { return *g->automaton; }
  bool full(std::string_view text) const {
    const int32_t s = g->automaton->advance_bytes(g->automaton->initial_state(), text);
    return s != GrammarAutomaton::kDead && g->automaton->accepts(s);
  }
  bool prefix(std::string_view text) const {
    return g->automaton->advance_bytes(g->automaton->initial_state(), text) != GrammarAutomaton::kDead;
  }
};

Compiled compile(const StructuredOutputSpec& spec) { return {compile_structured_output(spec, small_vocab())}; }
Compiled regex(const std::string& p) {
  StructuredOutputSpec s;
  s.kind = StructuredOutputSpec::Kind::Regex;
  s.text = p;
  return compile(s);
}
Compiled schema(const json& j) {
  StructuredOutputSpec s;
  s.kind = StructuredOutputSpec::Kind::JsonSchema;
  s.schema = j;
  return compile(s);
}
Compiled gbnf(const std::string& text) {
  StructuredOutputSpec s;
  s.kind = StructuredOutputSpec::Kind::Grammar;
  s.text = text;
  return compile(s);
}

std::string keyword_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const GrammarError& e) {
    return e.keyword();
  }
  return "(no error)";
}

TEST(Grammar, RegexFullmatch) {
  auto r = regex("^(ab|cd)+[0-9]{2,3}x?$");
  EXPECT_TRUE(r.full("ab12"));
  EXPECT_TRUE(r.full("abcdab123x"));
  EXPECT_FALSE(r.full("ab1"));
  EXPECT_FALSE(r.full("ab1234"));
  EXPECT_FALSE(r.full("12"));
  EXPECT_TRUE(r.prefix("abc"));
  auto u = regex("[^a-z]é.\\d\\s\\w");
  EXPECT_TRUE(u.full("Zé日5 _"));
  EXPECT_FALSE(u.full("zé日5 _"));
  EXPECT_FALSE(u.full("Zé\n5 _"));
}

TEST(Grammar, RegexRefusals) {
  for (const char* bad : {"(a", "a)", "[a", "a{3,2}", "*a", "(?=a)", "\\1", "a\\b", "a^b", "(?i)a", "a{100000}"})
    EXPECT_EQ(keyword_of([&] { regex(bad); }), "regex") << bad;
}

TEST(Grammar, IntegerRanges) {
  for (auto [lo, hi] : std::vector<std::pair<int64_t, int64_t>>{{0, 0}, {-17, 243}, {5, 1000}, {-999, -10}, {99, 101}}) {
    auto g = schema({{"type", "integer"}, {"minimum", lo}, {"maximum", hi}});
    for (int64_t v = lo - 30; v <= hi + 30; ++v) EXPECT_EQ(g.full(std::to_string(v)), v >= lo && v <= hi) << lo << ".." << hi << ": " << v;
    EXPECT_FALSE(g.full("-0"));
    EXPECT_FALSE(g.full("007"));
  }
  auto open = schema({{"type", "integer"}, {"exclusiveMinimum", 10}});
  EXPECT_FALSE(open.full("10"));
  EXPECT_TRUE(open.full("11"));
  EXPECT_TRUE(open.full("123456789012345678901234567890"));
}

TEST(Grammar, NumberRanges) {
  auto g = schema({{"type", "number"}, {"minimum", -2}, {"exclusiveMaximum", 3}});
  for (const char* ok : {"-2", "-2.0", "-1.99", "0", "-0.5", "2.999", "0.0", "1"}) EXPECT_TRUE(g.full(ok)) << ok;
  for (const char* bad : {"-2.01", "3", "3.0", "-3", "1e2", "4"}) EXPECT_FALSE(g.full(bad)) << bad;
  auto pos = schema({{"type", "number"}, {"exclusiveMinimum", 0}});
  EXPECT_FALSE(pos.full("0"));
  EXPECT_FALSE(pos.full("0.000"));
  EXPECT_TRUE(pos.full("0.001"));
  EXPECT_TRUE(pos.full("17.5"));
  EXPECT_EQ(keyword_of([] { schema({{"type", "number"}, {"minimum", 0.5}}); }), "minimum");
}

TEST(Grammar, ObjectsStrictAndOrdered) {
  json s = {{"type", "object"},
            {"properties", {{"a", {{"type", "integer"}}}, {"b", {{"type", "string"}, {"maxLength", 3}}}, {"c", {{"type", "boolean"}}}}},
            {"required", {"b"}}};
  auto g = schema(s);
  EXPECT_TRUE(g.full(R"({"b":"xyz"})"));
  EXPECT_TRUE(g.full(R"({"a": 1, "b": "", "c": true})"));
  EXPECT_TRUE(g.full("{\n  \"a\": -5,\n  \"b\": \"\\\"\"\n}\n"));
  EXPECT_FALSE(g.full(R"({"a":1})"));          // b missing
  EXPECT_FALSE(g.full(R"({"b":"wxyz"})"));     // too long
  EXPECT_FALSE(g.full(R"({"b":"x","d":1})"));  // undeclared key
  EXPECT_FALSE(g.full(R"({"b":"x",})"));
  auto open = schema({{"type", "object"}, {"properties", {{"a", {{"type", "null"}}}}}, {"additionalProperties", {{"type", "integer"}}}});
  EXPECT_TRUE(open.full(R"({"a":null,"zz":3,"y":4})"));
  EXPECT_FALSE(open.full(R"({"zz":"3"})"));
}

// vLLM's xgrammar writes properties in the schema's order, not sorted: the request's schema
// arrives as an ordered_json (parsed from text here, as the server parses the body).
TEST(Grammar, PropertiesKeepTheSchemasOrder) {
  const auto ordered = [](const char* text) {
    StructuredOutputSpec s;
    s.kind = StructuredOutputSpec::Kind::JsonSchema;
    s.schema = nlohmann::ordered_json::parse(text);
    return s;
  };
  auto g = compile(ordered(R"({"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
                                "city": {"type": "string"}}, "required": ["age", "name"]})"));
  EXPECT_TRUE(g.full(R"({"name":"a","age":1})"));
  EXPECT_TRUE(g.full(R"({"name":"a","age":1,"city":"x"})"));
  EXPECT_FALSE(g.full(R"({"age":1,"name":"a"})"));             // sorted order
  EXPECT_FALSE(g.full(R"({"age":1,"city":"x","name":"a"})"));  // sorted order
  EXPECT_FALSE(g.full(R"({"name":"a","city":"x","age":1})"));  // an optional one out of place
  // An optional property before a required one keeps its place too.
  auto opt = compile(ordered(R"({"type": "object", "properties": {"zeta": {"type": "integer"}, "alpha": {"type": "integer"}},
                                  "required": ["alpha"]})"));
  EXPECT_TRUE(opt.full(R"({"alpha":1})"));
  EXPECT_TRUE(opt.full(R"({"zeta":2,"alpha":1})"));
  EXPECT_FALSE(opt.full(R"({"alpha":1,"zeta":2})"));
  // Nested objects, reached through $ref, and required names without a schema (in `required` order).
  auto nested = compile(ordered(R"({"$defs": {"p": {"type": "object", "properties": {"y": {"type": "integer"}, "x": {"type": "integer"}},
                                                     "required": ["y", "x"]}},
                                     "type": "object", "properties": {"to": {"$ref": "#/$defs/p"}, "from": {"$ref": "#/$defs/p"}},
                                     "required": ["to", "from", "note", "extra"]})"));
  EXPECT_TRUE(nested.full(R"({"to":{"y":1,"x":2},"from":{"y":3,"x":4},"note":"n","extra":0})"));
  EXPECT_FALSE(nested.full(R"({"to":{"x":2,"y":1},"from":{"y":3,"x":4},"note":"n","extra":0})"));
  EXPECT_FALSE(nested.full(R"({"from":{"y":3,"x":4},"to":{"y":1,"x":2},"note":"n","extra":0})"));
  EXPECT_FALSE(nested.full(R"({"to":{"y":1,"x":2},"from":{"y":3,"x":4},"extra":0,"note":"n"})"));
  // Two orders are two grammars: the cache must not hand one the other's.
  EXPECT_NE(ordered(R"({"properties": {"a": {}, "b": {}}})").cache_key(),
            ordered(R"({"properties": {"b": {}, "a": {}}})").cache_key());
}

TEST(Grammar, ArraysRefsAndCombinators) {
  auto arr = schema({{"type", "array"}, {"items", {{"enum", {1, "two", nullptr}}}}, {"minItems", 1}, {"maxItems", 3}});
  EXPECT_TRUE(arr.full(R"([1])"));
  EXPECT_TRUE(arr.full(R"([1, "two", null])"));
  EXPECT_FALSE(arr.full("[]"));
  EXPECT_FALSE(arr.full("[1,1,1,1]"));
  EXPECT_FALSE(arr.full("[3]"));
  json tree = {{"$defs", {{"node", {{"type", "object"},
                                     {"properties", {{"v", {{"type", "integer"}}}, {"kids", {{"type", "array"}, {"items", {{"$ref", "#/$defs/node"}}}}}}},
                                     {"required", {"v"}}}}}},
               {"$ref", "#/$defs/node"}};
  auto t = schema(tree);
  EXPECT_TRUE(t.full(R"({"kids":[{"v":1},{"kids":[],"v":2}],"v":0})"));
  EXPECT_FALSE(t.full(R"({"kids":[{}],"v":0})"));
  auto any = schema({{"anyOf", {{{"type", "string"}, {"format", "date"}}, {{"type", "integer"}, {"maximum", 3}}}}});
  EXPECT_TRUE(any.full("\"2024-02-28\""));
  EXPECT_FALSE(any.full("\"2024-02-30\""));
  EXPECT_FALSE(any.full("\"0000-01-01\""));  // Python's date has no year 0
  EXPECT_TRUE(any.full("3"));
  EXPECT_FALSE(any.full("4"));
  auto pat = schema({{"type", "string"}, {"pattern", "^a\"b+$"}});
  EXPECT_TRUE(pat.full(R"("a\"bb")"));
  EXPECT_FALSE(pat.full(R"("a"bb")"));
}

TEST(Grammar, SchemaRefusalsNameTheKeyword) {
  EXPECT_EQ(keyword_of([] { schema({{"type", "integer"}, {"multipleOf", 3}}); }), "multipleOf");
  EXPECT_EQ(keyword_of([] { schema({{"type", "array"}, {"uniqueItems", true}}); }), "uniqueItems");
  EXPECT_EQ(keyword_of([] { schema({{"type", "object"}, {"patternProperties", json::object()}}); }), "patternProperties");
  EXPECT_EQ(keyword_of([] { schema({{"not", json::object()}}); }), "not");
  EXPECT_EQ(keyword_of([] { schema({{"type", "strin"}}); }), "type");
  EXPECT_EQ(keyword_of([] { schema({{"$ref", "#/$defs/missing"}}); }), "$ref");
  EXPECT_EQ(keyword_of([] { schema({{"type", "string"}, {"pattern", "(?<=x)a"}}); }), "pattern");
  EXPECT_EQ(keyword_of([] { schema(json(false)); }), "false");
  EXPECT_EQ(keyword_of([] { schema({{"type", "string"}, {"maxLength", 1000000}}); }), "maxLength");
}

TEST(Grammar, Gbnf) {
  auto g = gbnf(R"(# a comment
root ::= greeting ( ", " name ){1,2} "!"?
greeting ::= "hi" | "hello"
name ::= [A-Z] [a-z]*
)");
  EXPECT_TRUE(g.full("hi, Bob"));
  EXPECT_TRUE(g.full("hello, Al, Zed!"));
  EXPECT_FALSE(g.full("hi"));
  EXPECT_FALSE(g.full("hi, bob"));
  auto tok = gbnf("root ::= <[0]> [0-9]+ <[1]>");
  const int32_t s = tok.a().advance(tok.a().initial_state(), 0);
  ASSERT_NE(s, GrammarAutomaton::kDead);
  EXPECT_EQ(keyword_of([] { gbnf("root ::= root \"a\" | \"b\""); }), "grammar");  // left recursion
  EXPECT_EQ(keyword_of([] { gbnf("root ::= missing"); }), "grammar");
  EXPECT_EQ(keyword_of([] { gbnf("start ::= \"a\""); }), "grammar");
  EXPECT_EQ(keyword_of([] { gbnf("root ::= \"a"); }), "grammar");
  EXPECT_EQ(keyword_of([] { gbnf("root ::= (\"a\" | \"b\""); }), "grammar");
}

// The mask must be exactly the set of tokens whose bytes (or whole token) keep the parse alive.
void expect_masks_match_brute_force(const Compiled& c, const std::vector<std::string>& prefixes) {
  const auto vocab = small_vocab();
  for (const auto& p : prefixes) {
    const int32_t s = c.a().advance_bytes(c.a().initial_state(), p);
    ASSERT_NE(s, GrammarAutomaton::kDead) << p;
    std::vector<uint32_t> words(vocab->words());
    c.a().fill_mask(s, words);
    for (int32_t id = 0; id < vocab->vocab_size(); ++id) {
      const bool got = (words[size_t(id) >> 5] >> (id & 31)) & 1;
      const bool want = c.a().advance(s, id) != GrammarAutomaton::kDead;
      EXPECT_EQ(got, want) << "prefix '" << p << "' token " << id << " '" << vocab->bytes(id) << "'";
    }
    // A cached mask is the same.
    std::vector<uint32_t> again(vocab->words());
    c.a().fill_mask(s, again);
    EXPECT_EQ(words, again);
  }
}

TEST(Grammar, MasksMatchBruteForce) {
  json s = {{"type", "object"},
            {"properties", {{"n", {{"type", "number"}}}, {"s", {{"type", "string"}}}, {"t", {{"type", "boolean"}}}}},
            {"required", {"n", "s"}}};
  expect_masks_match_brute_force(schema(s), {"", "{", "{\"", "{\"n\":", "{\"n\": 1", "{\"n\":12,\"s\":\"a", "{\"n\":12,\"s\":\"\xC3"});
  expect_masks_match_brute_force(regex("[a-c]+(12|345)?"), {"", "a", "ab12", "ab1"});
  StructuredOutputSpec any;
  any.kind = StructuredOutputSpec::Kind::JsonObject;
  // Deep stacks: masks come from cached stack tops plus the tokens that run past them.
  expect_masks_match_brute_force(compile(any), {"{\"a\":[{\"b\":\"x", "{\"a\":[{\"b\":[1", "{\"a\":[{\"b\":{}",
                                                "{\"a\":[{\"b\":\"\xC3"});
  json bounded = {{"type", "array"}, {"items", {{"type", "string"}, {"maxLength", 3}}}, {"maxItems", 3}};
  expect_masks_match_brute_force(schema(bounded), {"[\"", "[\"ab", "[\"abc", "[\"a\", \"b"});
}

TEST(Grammar, MatcherStopsOnlyWhereTheGrammarEnds) {
  StructuredOutputSpec spec;
  spec.kind = StructuredOutputSpec::Kind::Choice;
  spec.choices = {"ab", "abc"};
  auto g = compile_structured_output(spec, small_vocab());
  const auto vocab = small_vocab();
  const std::vector<int32_t> stop{0};  // token 0 doubles as the stop token here
  GrammarMatcher m(g, -1);
  std::vector<uint32_t> w(vocab->words());
  m.fill_mask(stop, w);
  EXPECT_FALSE(w[0] & 1);  // nothing written yet: no stop
  auto id_of = [&](const std::string& s) {
    for (int32_t i = 0; i < vocab->vocab_size(); ++i)
      if (vocab->bytes(i) == s) return i;
    return -1;
  };
  m.accept(id_of("ab"), stop);
  m.fill_mask(stop, w);
  EXPECT_TRUE(w[0] & 1);                                   // "ab" may end
  EXPECT_TRUE((w[size_t(id_of("c")) >> 5] >> (id_of("c") & 31)) & 1);  // or go on
  m.accept(id_of("c"), stop);
  m.fill_mask(stop, w);
  size_t allowed = 0;
  for (uint32_t x : w) allowed += size_t(__builtin_popcount(x));
  EXPECT_EQ(allowed, 1u);  // "abc" must end: only the stop token
  EXPECT_THROW(m.accept(id_of("a"), stop), Error);
  m.accept(0, stop);
  EXPECT_TRUE(m.finished());
}

TEST(Grammar, WaitsForTheReasoningEnd) {
  StructuredOutputSpec spec;
  spec.kind = StructuredOutputSpec::Kind::Regex;
  spec.text = "x";
  GrammarMatcher m(compile_structured_output(spec, small_vocab()), 1);
  EXPECT_FALSE(m.active());
  m.accept(5, {});
  EXPECT_FALSE(m.active());
  m.accept(1, {});
  EXPECT_TRUE(m.active());
}

TEST(Grammar, ToolCalls) {
  StructuredOutputSpec spec;
  spec.kind = StructuredOutputSpec::Kind::ToolCalls;
  // Reuse the two added tokens; the others are ordinary single characters standing in for markers.
  ToolCallFormat& f = spec.tool_calls;
  f.tool_call = 0;
  f.tool_call_end = 1;
  f.arg_key = 0;
  f.arg_key_end = 1;
  f.arg_value = 0;
  f.arg_value_end = 1;
  f.tools = {{"f", {{"type", "object"}, {"properties", {{"n", {{"type", "integer"}}}, {"s", {{"type", "string"}}}}}, {"required", {"s"}}}}};
  auto c = compile(spec);
  auto run = [&](std::vector<std::variant<int32_t, std::string>> parts) {
    int32_t s = c.a().initial_state();
    for (auto& p : parts) {
      if (s == GrammarAutomaton::kDead) return false;
      s = std::holds_alternative<int32_t>(p) ? c.a().advance(s, std::get<int32_t>(p))
                                             : c.a().advance_bytes(s, std::get<std::string>(p));
    }
    return s != GrammarAutomaton::kDead && c.a().accepts(s);
  };
  EXPECT_TRUE(run({0, "f", 0, "s", 1, 0, "any text", 1, 1}));
  EXPECT_TRUE(run({0, "f", 0, "n", 1, 0, "-4", 1, 0, "s", 1, 0, "", 1, 1}));
  EXPECT_FALSE(run({0, "f", 1}));                            // s is required
  EXPECT_FALSE(run({0, "f", 0, "n", 1, 0, "x", 1, 1}));     // n is an integer
  EXPECT_FALSE(run({0, "f", 0, "s", 1, 0, "a<b", 1, 1}));   // raw text has no '<'
  // The tool's properties in the order its schema lists them (here not sorted).
  f.tools = {{"g", nlohmann::ordered_json::parse(R"({"type": "object", "properties": {"s": {"type": "string"},
                                                    "n": {"type": "integer"}}, "required": ["n", "s"]})")}};
  c = compile(spec);
  EXPECT_TRUE(run({0, "g", 0, "s", 1, 0, "t", 1, 0, "n", 1, 0, "3", 1, 1}));
  EXPECT_FALSE(run({0, "g", 0, "n", 1, 0, "3", 1, 0, "s", 1, 0, "t", 1, 1}));  // sorted order
}

}  // namespace
}  // namespace striker::grammar
