#include "server/chat_request.h"

#include "chat/chat_template.h"
#include "chat/glm47_request.h"
#include "server/api_error.h"
#include "server/json_fields.h"
#include "tokenizer/tokenizer.h"

namespace striker::server {
namespace {

// Messages and tools keep the request's key order: the chat template renders them.
using ojson = nlohmann::ordered_json;

void validate_content(const ojson& content, size_t i, bool null_ok) {
  const std::string where = "messages[" + std::to_string(i) + "].content";
  if (content.is_null()) {
    if (!null_ok) throw bad_request("`" + where + "` must not be null", "messages");
    return;
  }
  if (content.is_string()) return;
  if (!content.is_array()) throw bad_request("`" + where + "` must be a string or an array of content parts", "messages");
  for (size_t k = 0; k < content.size(); ++k) {
    const auto& part = content[k];
    if (!part.is_object()) throw bad_request("`" + where + "[" + std::to_string(k) + "]` must be an object", "messages");
    auto type = part.find("type");
    if (type == part.end() || !type->is_string()) {
      throw bad_request("`" + where + "[" + std::to_string(k) + "].type` must be a string", "messages");
    }
    if (*type != "text") {
      throw bad_request("content part type '" + type->get<std::string>() + "' in `" + where +
                            "` is not supported (this model takes text only)",
                        "messages");
    }
    auto text = part.find("text");
    if (text == part.end() || !text->is_string()) {
      throw bad_request("`" + where + "[" + std::to_string(k) + "].text` must be a string", "messages");
    }
  }
}

void validate_tool_calls(const ojson& calls, size_t i) {
  const std::string where = "messages[" + std::to_string(i) + "].tool_calls";
  if (!calls.is_array()) throw bad_request("`" + where + "` must be an array", "messages");
  for (const auto& call : calls) {
    if (!call.is_object()) throw bad_request("`" + where + "` items must be objects", "messages");
    auto fn = call.find("function");
    if (fn == call.end() || !fn->is_object()) throw bad_request("`" + where + "[].function` must be an object", "messages");
    auto name = fn->find("name");
    if (name == fn->end() || !name->is_string()) {
      throw bad_request("`" + where + "[].function.name` must be a string", "messages");
    }
    auto args = fn->find("arguments");
    if (args != fn->end() && !args->is_string() && !args->is_object()) {
      throw bad_request("`" + where + "[].function.arguments` must be a JSON string", "messages");
    }
    if (args != fn->end() && args->is_string()) {
      auto parsed = nlohmann::json::parse(args->get<std::string>(), nullptr, false);
      if (parsed.is_discarded() || !parsed.is_object()) {
        throw bad_request("`" + where + "[].function.arguments` is not a JSON object: " + args->dump(), "messages");
      }
    }
  }
}

ojson validate_messages(const ojson* messages) {
  if (!messages) throw bad_request("`messages` is required", "messages");
  if (!messages->is_array()) throw bad_request("`messages` must be an array", "messages");
  if (messages->empty()) throw bad_request("`messages` must not be empty", "messages");
  ojson out = ojson::array();
  for (size_t i = 0; i < messages->size(); ++i) {
    const auto& m = (*messages)[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) throw bad_request("`" + where + "` must be an object", "messages");
    auto role_it = m.find("role");
    if (role_it == m.end() || !role_it->is_string()) throw bad_request("`" + where + ".role` must be a string", "messages");
    std::string role = role_it->get<std::string>();
    if (role != "system" && role != "developer" && role != "user" && role != "assistant" && role != "tool") {
      throw bad_request("`" + where + ".role` '" + role + "' is not one of system, developer, user, assistant, tool",
                        "messages");
    }
    ojson msg = m;
    if (role == "developer") msg["role"] = "system";  // OpenAI's newer name for the system role
    const bool assistant = role == "assistant";
    auto content = m.find("content");
    if (content == m.end()) {
      if (!assistant) throw bad_request("`" + where + ".content` is required", "messages");
    } else {
      validate_content(*content, i, assistant);
    }
    if (auto tc = m.find("tool_calls"); tc != m.end() && !tc->is_null()) {
      if (!assistant) throw bad_request("`" + where + ".tool_calls` is only allowed on assistant messages", "messages");
      validate_tool_calls(*tc, i);
    }
    for (const char* field : {"reasoning", "reasoning_content", "name", "tool_call_id"}) {
      if (auto f = m.find(field); f != m.end() && !f->is_null() && !f->is_string()) {
        throw bad_request("`" + where + "." + field + "` must be a string", "messages");
      }
    }
    out.push_back(std::move(msg));
  }
  return out;
}

void validate_tools(const ojson& tools) {
  if (!tools.is_array()) throw bad_request("`tools` must be an array", "tools");
  if (tools.empty()) {
    throw bad_request("`tools` must not be an empty array. Either provide at least one tool or omit the field entirely.",
                      "tools");
  }
  for (size_t i = 0; i < tools.size(); ++i) {
    const auto& t = tools[i];
    const std::string where = "tools[" + std::to_string(i) + "]";
    if (!t.is_object()) throw bad_request("`" + where + "` must be an object", "tools");
    auto type = t.find("type");
    if (type == t.end() || *type != "function") throw bad_request("`" + where + ".type` must be \"function\"", "tools");
    auto fn = t.find("function");
    if (fn == t.end() || !fn->is_object()) throw bad_request("`" + where + ".function` must be an object", "tools");
    auto name = fn->find("name");
    if (name == fn->end() || !name->is_string() || name->get<std::string>().empty()) {
      throw bad_request("`" + where + ".function.name` must be a non-empty string", "tools");
    }
    if (auto d = fn->find("description"); d != fn->end() && !d->is_null() && !d->is_string()) {
      throw bad_request("`" + where + ".function.description` must be a string", "tools");
    }
    if (auto p = fn->find("parameters"); p != fn->end() && !p->is_null() && !p->is_object()) {
      throw bad_request("`" + where + ".function.parameters` must be a JSON schema object", "tools");
    }
  }
}

bool tool_named(const ojson& tools, const std::string& name) {
  for (const auto& t : tools) {
    if (t["function"]["name"] == name) return true;
  }
  return false;
}

// ChatCompletionRequest.check_tool_usage (chat-format.md §4.2) plus the server-flag checks.
void resolve_tool_choice(const nlohmann::json& body, const ojson& tools, const ServerOptions& options,
                         ParserSettings& ps) {
  const auto tc_it = body.find("tool_choice");
  const bool has_choice = tc_it != body.end() && !tc_it->is_null();
  if (!has_choice) {
    ps.tool_choice = tools.is_null() ? "none" : "auto";
  } else if (tc_it->is_string()) {
    ps.tool_choice = tc_it->get<std::string>();
    if (ps.tool_choice != "none" && ps.tool_choice != "auto" && ps.tool_choice != "required") {
      throw bad_request("Invalid value for `tool_choice`: " + ps.tool_choice +
                            "! Only named tools, \"none\", \"auto\" or \"required\" are supported.",
                        "tool_choice");
    }
  } else if (tc_it->is_object()) {
    auto fn = tc_it->find("function");
    if (fn == tc_it->end() || !fn->is_object() || !fn->contains("name") || !(*fn)["name"].is_string() ||
        (*fn)["name"].get<std::string>().empty()) {
      throw bad_request("Invalid `tool_choice`. Correct usage: `{\"type\": \"function\", \"function\": {\"name\": "
                        "\"my_function\"}}`",
                        "tool_choice");
    }
    ps.tool_choice = "named";
    ps.named_tool = (*fn)["name"].get<std::string>();
  } else {
    throw bad_request("`tool_choice` must be a string or an object", "tool_choice");
  }
  if (ps.tool_choice == "none") return;
  if (tools.is_null()) throw bad_request("When using `tool_choice`, `tools` must be set.", "tool_choice");
  if (ps.tool_choice == "named" && !tool_named(tools, ps.named_tool)) {
    throw bad_request("The tool specified in `tool_choice` does not match any of the specified `tools`", "tool_choice");
  }
  // vLLM's serving checks: "auto" needs both flags; forced choices need a tool parser.
  if (ps.tool_choice == "auto" && (!options.enable_auto_tool_choice || options.tool_call_parser.empty())) {
    throw bad_request("\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set",
                      "tool_choice");
  }
  if (options.tool_call_parser.empty()) {
    throw bad_request("tool_choice=" + (ps.tool_choice == "named" ? "function \"" + ps.named_tool + "\"" : "\"" + ps.tool_choice + "\"") +
                          " requires --tool-call-parser to be set",
                      "tool_choice");
  }
}

}  // namespace

nlohmann::json effective_template_kwargs(const nlohmann::json& body, const ServerOptions& options) {
  JsonFields f(body);
  f.object("chat_template_kwargs");  // type check with the server's error shape
  if (auto effort = f.string("reasoning_effort")) {
    static const char* kEfforts[] = {"none", "minimal", "low", "medium", "high", "xhigh", "max"};
    if (std::find(std::begin(kEfforts), std::end(kEfforts), *effort) == std::end(kEfforts)) {
      throw bad_request("`reasoning_effort` must be one of none, minimal, low, medium, high, xhigh, max",
                        "reasoning_effort");
    }
  }
  // The same merge the glm47 parser uses, so the template and the parser agree on thinking.
  return effective_chat_template_kwargs(body, options.default_chat_template_kwargs);
}

ChatPrompt build_chat_prompt(const RequestBody& request, const ServerOptions& options, const ChatTemplate& tmpl,
                             const Tokenizer& tokenizer) {
  const nlohmann::json& body = request.fields;
  const ojson& ordered = request.ordered;
  JsonFields f(body);
  ChatPrompt out;
  const auto messages_it = ordered.find("messages");
  ojson messages = validate_messages(messages_it != ordered.end() && !messages_it->is_null() ? &*messages_it : nullptr);
  ojson tools = nullptr;
  if (f.get("tools")) {
    tools = ordered.at("tools");
    validate_tools(tools);
  }
  if (f.has("functions") || f.has("function_call")) {
    throw bad_request("the deprecated `functions` / `function_call` fields are not supported; use `tools`", "functions");
  }
  if (f.has("chat_template")) {
    throw bad_request("a per-request `chat_template` is not accepted by this server", "chat_template");
  }
  if (f.has("documents")) throw not_implemented("`documents` is not supported by this server", "documents");
  // vLLM / Hugging Face: continue_final_message leaves the final (assistant) message open;
  // it excludes the generation prompt, which defaults to on, so clients must turn it off.
  const bool continue_final_message = f.boolean("continue_final_message").value_or(false);
  const bool add_generation_prompt = f.boolean("add_generation_prompt").value_or(true);
  if (continue_final_message && add_generation_prompt) {
    throw bad_request("Cannot set both `continue_final_message` and `add_generation_prompt` to True "
                      "(`add_generation_prompt` defaults to true: send `add_generation_prompt: false`)",
                      "continue_final_message");
  }
  if (continue_final_message && messages.back()["role"] != "assistant") {
    throw bad_request("`continue_final_message` needs the final message (messages[" +
                          std::to_string(messages.size() - 1) + "]) to be an assistant message",
                      "continue_final_message");
  }
  ParserSettings& ps = out.parser;
  resolve_tool_choice(body, tools, options, ps);
  out.include_reasoning = f.boolean("include_reasoning").value_or(true);
  out.parallel_tool_calls = f.boolean("parallel_tool_calls").value_or(true);

  const nlohmann::json kwargs = effective_template_kwargs(body, options);
  ps.thinking_enabled = glm47_thinking_enabled(kwargs);
  ps.reasoning_parser = options.reasoning_parser;
  ps.tool_parser = options.tool_call_parser;
  ps.tools = tools;

  const bool drop_tools = ps.tool_choice == "none" && options.exclude_tools_when_tool_choice_none;
  const bool add_special_tokens = f.boolean("add_special_tokens").value_or(false);
  std::string prompt;
  ojson vars;
  try {
    vars = chat_template_variables_ordered(messages, drop_tools ? ojson(nullptr) : tools, add_generation_prompt,
                                           ojson(kwargs));
    prompt = tmpl.render_ordered(vars);
  } catch (const ApiError&) {
    throw;
  } catch (const Error& e) {
    throw bad_request(std::string("chat template: ") + e.what(), "messages");
  }
  if (continue_final_message) {
    try {
      // The preprocessed messages, as vLLM hands them to apply_chat_template: array content
      // is already joined into one string there.
      prompt = cut_after_final_message(prompt, nlohmann::json(vars["messages"]));
    } catch (const Error& e) {
      throw bad_request(e.what(), "continue_final_message");
    }
  }
  // The continued message may sit after its `</think>` (content) or inside an unclosed
  // `<think>`: the parser starts where the prompt left off.
  if (continue_final_message && ps.thinking_enabled) ps.reasoning_ended_in_prompt = glm47_is_reasoning_end(prompt, true);
  out.tokens = tokenizer.encode(prompt, add_special_tokens);
  if (out.tokens.empty()) throw bad_request("the rendered prompt is empty", "messages");
  return out;
}

}  // namespace striker::server
