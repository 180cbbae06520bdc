#include "engine/grammar/tool_call_grammar.h"

#include <set>

#include "chat/tool_schema.h"
#include "engine/grammar/json_grammar.h"
#include "engine/grammar/json_schema_grammar.h"
#include "engine/grammar/regex_grammar.h"

namespace striker::grammar {
namespace {

// Ordered: the tool's properties are offered in the order the request wrote them.
using json = nlohmann::ordered_json;

// Raw text of a string-typed value: anything but '<' (which could start </arg_value>).
Element raw_string(Grammar& g, const json& schema) {
  if (schema.is_object() && schema.contains("enum") && schema["enum"].is_array()) {
    std::vector<Sequence> alts;
    for (const auto& v : schema["enum"]) {
      if (!v.is_string()) continue;
      Sequence seq;
      g.append_literal(seq, v.get<std::string>());
      alts.push_back(std::move(seq));
    }
    if (!alts.empty()) return g.alternatives("enum", std::move(alts));
  }
  if (schema.is_object() && schema.contains("const") && schema["const"].is_string())
    return g.literal(schema["const"].get<std::string>());
  if (schema.is_object() && schema.contains("pattern") && schema["pattern"].is_string())
    return regex_to_grammar(g, schema["pattern"].get<std::string>());
  const Element ch = code_point_set(g, {{0, '<' - 1}, {'<' + 1, 0x10FFFF}});
  int64_t lo = 0, hi = -1;
  if (schema.is_object() && schema.contains("minLength") && schema["minLength"].is_number_unsigned())
    lo = std::min<int64_t>(schema["minLength"].get<int64_t>(), 10000);
  if (schema.is_object() && schema.contains("maxLength") && schema["maxLength"].is_number_unsigned())
    hi = std::min<int64_t>(schema["maxLength"].get<int64_t>(), 10000);
  if (hi >= 0 && hi < lo) throw GrammarError("maxLength is below minLength in a tool parameter", "maxLength");
  return g.repeat(ch, lo, hi);
}

// A marker as its whole token, or as text where the tokenizer has no such token (the glm47
// parser matches markers by text as well as by id).
Element marker(Grammar& g, int32_t id, const char* text) { return id >= 0 ? Grammar::token(id) : g.literal(text); }

Element call(Grammar& g, JsonPieces& pieces, const ToolCallFormat& f, const ToolCallFormat::Tool& tool) {
  const json& params = tool.parameters;
  std::vector<std::tuple<std::string, json, bool>> props;  // name, schema, required
  if (params.is_object() && params.contains("properties") && params["properties"].is_object()) {
    std::set<std::string> required;
    if (params.contains("required") && params["required"].is_array())
      for (const auto& r : params["required"])
        if (r.is_string()) required.insert(r.get<std::string>());
    for (const auto& [k, v] : params["properties"].items()) props.emplace_back(k, v, required.count(k) > 0);
  }
  // args_i: the properties from i on, each optional unless required, in order.
  Element rest = g.alternatives("empty", {{}});
  for (size_t i = props.size(); i-- > 0;) {
    const auto& [name, schema, required] = props[i];
    const auto types = striker::schema_types(nlohmann::json(schema));  // key order plays no part in typing
    Element value;
    try {
      value = types == std::set<std::string>{"string"} ? raw_string(g, schema)
                                                       : json_schema_to_grammar(g, pieces, schema, &params);
    } catch (const GrammarError& e) {
      throw GrammarError("tool '" + tool.name + "' parameter '" + name + "': " + e.what(), e.keyword());
    }
    Sequence pair{marker(g, f.arg_key, "<arg_key>")};
    g.append_literal(pair, name);
    pair.push_back(marker(g, f.arg_key_end, "</arg_key>"));
    pair.push_back(marker(g, f.arg_value, "<arg_value>"));
    pair.push_back(value);
    pair.push_back(marker(g, f.arg_value_end, "</arg_value>"));
    pair.push_back(rest);
    std::vector<Sequence> alts{std::move(pair)};
    if (!required) alts.push_back({rest});
    rest = g.alternatives("args", std::move(alts));
  }
  Sequence seq{marker(g, f.tool_call, "<tool_call>")};
  g.append_literal(seq, tool.name);
  seq.push_back(rest);
  seq.push_back(marker(g, f.tool_call_end, "</tool_call>"));
  return g.alternatives("call", {std::move(seq)});
}

}  // namespace

Element tool_calls_to_grammar(Grammar& g, JsonPieces& pieces, const ToolCallFormat& f) {
  if (f.tools.empty()) throw GrammarError("no tool to call", "tools");
  std::vector<Sequence> alts;
  for (const auto& t : f.tools) alts.push_back({call(g, pieces, f, t)});
  const Element one = g.alternatives("tool", std::move(alts));
  return f.multiple ? g.plus(one) : one;
}

}  // namespace striker::grammar
