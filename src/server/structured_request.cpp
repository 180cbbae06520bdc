#include "server/structured_request.h"

#include <cstdio>

#include "core/ordered_json.h"
#include "engine/grammar/grammar_cache.h"
#include "server/api_error.h"
#include "server/chat_request.h"
#include "server/serving_context.h"

namespace striker::server {
namespace {

using grammar::StructuredOutputSpec;
using Kind = StructuredOutputSpec::Kind;
// Ordered: schemas keep the key order the client wrote (a schema given as a string too).
using json = nlohmann::ordered_json;

// Errors name the value's path in the message and the top-level field as `param`.
struct Where {
  std::string path, field;
};

// A schema given as an object, or as a string holding one (vLLM accepts both).
json schema_value(const json& v, const Where& at) {
  json s = v;
  if (v.is_string()) {
    try {
      s = parse_ordered_json(v.get<std::string>());
    } catch (const std::exception& e) {
      throw bad_request("`" + at.path + "` is not valid JSON: " + e.what(), at.field);
    }
  }
  if (!s.is_object() && !s.is_boolean()) throw bad_request("`" + at.path + "` must be a JSON schema object", at.field);
  return s;
}

std::string string_value(const json& v, const Where& at) {
  if (!v.is_string()) throw bad_request("`" + at.path + "` must be a string", at.field);
  return v.get<std::string>();
}

std::vector<std::string> choices_value(const json& v, const Where& at) {
  if (!v.is_array() || v.empty()) throw bad_request("`" + at.path + "` must be a non-empty array of strings", at.field);
  std::vector<std::string> out;
  for (const auto& c : v) out.push_back(string_value(c, at));
  return out;
}

// One constraint kind from a vLLM-style key (`json`, `regex`, ...); the value at `at`.
StructuredOutputSpec spec_for(const std::string& key, const json& v, const Where& at) {
  StructuredOutputSpec s;
  if (key == "json") {
    s.kind = Kind::JsonSchema;
    s.schema = schema_value(v, at);
  } else if (key == "regex") {
    s.kind = Kind::Regex;
    s.text = string_value(v, at);
  } else if (key == "choice") {
    s.kind = Kind::Choice;
    s.choices = choices_value(v, at);
  } else if (key == "grammar") {
    s.kind = Kind::Grammar;
    s.text = string_value(v, at);
  } else {
    s.kind = Kind::JsonObject;
  }
  return s;
}

std::optional<StructuredRequest> from_structured_outputs(const json& so) {
  const std::string field = "structured_outputs";
  if (!so.is_object()) throw bad_request("`structured_outputs` must be an object", field);
  std::optional<StructuredRequest> out;
  bool whitespace = true;
  for (const auto& [key, v] : so.items()) {
    if (v.is_null()) continue;
    if (key == "disable_fallback" || key == "backend" || key == "_backend" || key == "_backend_was_auto") continue;
    if (key == "disable_any_whitespace") {
      if (!v.is_boolean()) throw bad_request("`structured_outputs.disable_any_whitespace` must be a boolean", field);
      whitespace = !v.get<bool>();
      continue;
    }
    if (key == "structural_tag")
      throw not_implemented("`structured_outputs.structural_tag` is not supported by this server", field);
    if (key == "json_object") {
      if (!v.is_boolean()) throw bad_request("`structured_outputs.json_object` must be a boolean", field);
      if (!v.get<bool>()) continue;
    } else if (key != "json" && key != "regex" && key != "choice" && key != "grammar") {
      throw bad_request("`structured_outputs." + key + "` is not supported (supported: json, regex, choice, grammar, "
                        "json_object, disable_any_whitespace)",
                        field);
    }
    if (out)
      throw bad_request("You can only use one kind of structured outputs constraint but multiple are specified: "
                        "`structured_outputs` sets both '" + out->field.substr(field.size() + 1) + "' and '" + key + "'",
                        field);
    out = StructuredRequest{spec_for(key, v, {field + "." + key, field}), field + "." + key};
  }
  if (out) {
    out->field = field;
    out->spec.json_whitespace = whitespace;
  }
  return out;
}

std::optional<StructuredRequest> from_response_format(const json& rf) {
  const std::string field = "response_format";
  if (!rf.is_object() || !rf.contains("type") || !rf["type"].is_string())
    throw bad_request("`response_format.type` must be a string", field);
  const std::string type = rf["type"].get<std::string>();
  if (type == "text") return std::nullopt;
  if (type == "json_object") return StructuredRequest{spec_for("json_object", nullptr, {field, field}), field};
  if (type == "structural_tag") throw not_implemented("`response_format` of type 'structural_tag' is not supported", field);
  if (type != "json_schema")
    throw bad_request("`response_format.type` must be one of text, json_object, json_schema, got '" + type + "'", field);
  const auto js = rf.find("json_schema");
  if (js == rf.end() || !js->is_object())
    throw bad_request("`response_format.json_schema` must be an object when type is 'json_schema'", field);
  const auto schema = js->find("schema");
  if (schema == js->end() || schema->is_null())
    throw bad_request("`response_format.json_schema.schema` is required when type is 'json_schema'", field);
  return StructuredRequest{spec_for("json", *schema, {field + ".json_schema.schema", field}), field};
}

}  // namespace

std::optional<StructuredRequest> parse_structured_request(const json& body) {
  std::vector<StructuredRequest> found;
  if (auto it = body.find("structured_outputs"); it != body.end() && !it->is_null())
    if (auto r = from_structured_outputs(*it)) found.push_back(std::move(*r));
  if (auto it = body.find("response_format"); it != body.end() && !it->is_null())
    if (auto r = from_response_format(*it)) found.push_back(std::move(*r));
  for (const char* key : {"guided_json", "guided_regex", "guided_choice", "guided_grammar"}) {
    auto it = body.find(key);
    if (it == body.end() || it->is_null()) continue;
    const std::string k = std::string(key).substr(7);
    found.push_back(StructuredRequest{spec_for(k, *it, {key, key}), key});
  }
  if (auto it = body.find("guided_whitespace_pattern"); it != body.end() && !it->is_null())
    throw bad_request("`guided_whitespace_pattern` is not supported", "guided_whitespace_pattern");
  if (found.size() > 1)
    throw bad_request("You can only use one kind of structured outputs constraint but multiple are specified: `" +
                          found[0].field + "` and `" + found[1].field + "`",
                      found[1].field);
  if (found.empty()) return std::nullopt;
  return std::move(found[0]);
}

std::optional<StructuredRequest> tool_call_request(const ServingContext& ctx, const ChatPrompt& prompt,
                                                   bool other_constraint) {
  const ParserSettings& ps = prompt.parser;
  if (ps.tool_choice != "required" && ps.tool_choice != "named") return std::nullopt;
  if (other_constraint)
    throw bad_request("You can only either use constraints for structured outputs or tools, not both.", "tool_choice");
  if (ps.tool_parser != "glm47" && ps.tool_parser != "glm45")
    throw not_implemented("tool_choice \"" + ps.tool_choice + "\" is enforced only with --tool-call-parser glm47",
                          "tool_choice");
  StructuredRequest r;
  r.field = "tool_choice";
  r.spec.kind = Kind::ToolCalls;
  grammar::ToolCallFormat& f = r.spec.tool_calls;
  for (const auto& t : ps.tools) {
    const json& fn = t.contains("function") ? t["function"] : t;
    const std::string name = fn.value("name", "");
    if (ps.tool_choice == "named" && name != ps.named_tool) continue;
    f.tools.push_back({name, fn.contains("parameters") ? fn["parameters"] : json(nullptr)});
  }
  f.multiple = ps.tool_choice == "required" && prompt.parallel_tool_calls;
  auto id = [&](const char* text) { return ctx.tokenizer.token_to_id(text).value_or(-1); };
  f.tool_call = id("<tool_call>");
  f.tool_call_end = id("</tool_call>");
  f.arg_key = id("<arg_key>");
  f.arg_key_end = id("</arg_key>");
  f.arg_value = id("<arg_value>");
  f.arg_value_end = id("</arg_value>");
  return r;
}

StructuredConstraint compile_structured_request(const ServingContext& ctx, const StructuredRequest& req,
                                                int32_t start_after_token) {
  if (!ctx.grammars) throw not_implemented("structured outputs are not available on this server", req.field);
  grammar::GrammarCache::Result got;
  try {
    got = ctx.grammars->get(req.spec);
  } catch (const grammar::GrammarError& e) {
    throw bad_request(std::string(e.what()) + " [field `" + req.field + "`, keyword '" + e.keyword() + "']", req.field);
  }
  if (!got.hit) {
    const auto st = got.grammar->automaton->stats();
    std::fprintf(stderr, "structured output: compiled %s in %.2f ms (%.2f ms CPU; %zu rules, %zu symbols, %zu stack tops walked%s)\n",
                 req.field.c_str(), got.grammar->compile_ms, got.grammar->compile_cpu_ms, got.grammar->rules,
                 got.grammar->elements, st.tops, st.precompute_complete ? "" : ", the rest on first use");
  }
  return StructuredConstraint{got.grammar, start_after_token};
}

}  // namespace striker::server
