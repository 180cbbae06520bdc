#include "server/messages_request.h"

#include <limits>

#include "server/api_error.h"

namespace striker::server {
namespace {

using ojson = nlohmann::ordered_json;


// A string, or text blocks joined (system prompts, tool results).
std::string text_of(const ojson& content, const std::string& where, const char* param) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) throw bad_request("`" + where + "` must be a string or an array of text blocks", param);
  std::string text;
  for (size_t k = 0; k < content.size(); ++k) {
    const ojson& b = content[k];
    if (!b.is_object()) throw bad_request("`" + item_path(where, k) + "` must be an object", param);
    const std::string type = required_item_string(b, "type", item_path(where, k), param);
    if (type != "text") {
      throw bad_request("block type '" + type + "' in `" + item_path(where, k) + "` is not supported here (text only)", param);
    }
    text += required_item_string(b, "text", item_path(where, k), param);
  }
  return text;
}

void add_user_message(const ojson& content, const std::string& where, ojson& messages) {
  if (content.is_string()) {
    messages.push_back({{"role", "user"}, {"content", content}});
    return;
  }
  if (!content.is_array()) throw bad_request("`" + where + "` must be a string or an array of content blocks", "messages");
  ojson parts = ojson::array();
  for (size_t k = 0; k < content.size(); ++k) {
    const ojson& b = content[k];
    const std::string w = item_path(where, k);
    if (!b.is_object()) throw bad_request("`" + w + "` must be an object", "messages");
    const std::string type = required_item_string(b, "type", w, "messages");
    if (type == "text") {
      parts.push_back({{"type", "text"}, {"text", required_item_string(b, "text", w, "messages")}});
    } else if (type == "tool_result") {
      // Tool results answer the previous assistant turn's calls: they go before this turn's text.
      const std::string id = required_item_string(b, "tool_use_id", w, "messages");
      const ojson* c = item_field(b, "content");
      const std::string text = c ? text_of(*c, w + ".content", "messages") : std::string();
      messages.push_back({{"role", "tool"}, {"tool_call_id", id}, {"content", text}});
    } else {
      throw bad_request("content block type '" + type + "' in `" + w +
                            "` is not supported (this model takes text; user blocks: text, tool_result)",
                        "messages");
    }
  }
  if (!parts.empty()) messages.push_back({{"role", "user"}, {"content", std::move(parts)}});
}

void add_assistant_message(const ojson& content, const std::string& where, ojson& messages) {
  ojson m = {{"role", "assistant"}, {"content", nullptr}};
  if (content.is_string()) {
    m["content"] = content;
    messages.push_back(std::move(m));
    return;
  }
  if (!content.is_array()) throw bad_request("`" + where + "` must be a string or an array of content blocks", "messages");
  std::string text, reasoning;
  bool has_text = false;
  for (size_t k = 0; k < content.size(); ++k) {
    const ojson& b = content[k];
    const std::string w = item_path(where, k);
    if (!b.is_object()) throw bad_request("`" + w + "` must be an object", "messages");
    const std::string type = required_item_string(b, "type", w, "messages");
    if (type == "text") {
      text += required_item_string(b, "text", w, "messages");
      has_text = true;
    } else if (type == "thinking") {
      reasoning += required_item_string(b, "thinking", w, "messages");
    } else if (type == "redacted_thinking") {
      // Encrypted reasoning of Anthropic's own models: nothing any other model can read.
    } else if (type == "tool_use") {
      const ojson* input = item_field(b, "input");
      if (!input || !input->is_object()) throw bad_request("`" + w + ".input` must be an object", "messages");
      if (!m.contains("tool_calls")) m["tool_calls"] = ojson::array();
      m["tool_calls"].push_back({{"id", required_item_string(b, "id", w, "messages")},
                                 {"type", "function"},
                                 {"function", {{"name", required_item_string(b, "name", w, "messages")},
                                               {"arguments", input->dump()}}}});
    } else {
      throw bad_request("content block type '" + type + "' in `" + w +
                            "` is not supported (assistant blocks: text, thinking, tool_use)",
                        "messages");
    }
  }
  if (has_text) m["content"] = text;
  if (!reasoning.empty()) m["reasoning_content"] = reasoning;
  messages.push_back(std::move(m));
}

ojson messages_tools_as_chat(const ojson& tools) {
  if (!tools.is_array()) throw bad_request("`tools` must be an array", "tools");
  ojson out = ojson::array();
  for (size_t k = 0; k < tools.size(); ++k) {
    const ojson& t = tools[k];
    const std::string w = item_path("tools", k);
    if (!t.is_object()) throw bad_request("`" + w + "` must be an object", "tools");
    if (const ojson* type = item_field(t, "type"); type && *type != "custom") {
      throw bad_request("tool type " + type->dump() + " in `" + w + "` is not supported (only client tools)", "tools");
    }
    const ojson* schema = item_field(t, "input_schema");
    if (!schema || !schema->is_object()) throw bad_request("`" + w + ".input_schema` must be an object", "tools");
    ojson fn = {{"name", required_item_string(t, "name", w, "tools")}};
    if (const ojson* d = item_field(t, "description")) fn["description"] = *d;
    fn["parameters"] = *schema;
    out.push_back({{"type", "function"}, {"function", std::move(fn)}});
  }
  return out;
}

// `thinking.budget_tokens`, enforced as vLLM's thinking_token_budget. Anthropic's rules, but for
// its 1024 floor: the budget is counted exactly here, and small models reason in a few dozen
// tokens, so any budget from 1 up is served. `max_tokens` null: count_tokens, which takes none.
int64_t thinking_budget(const ojson& budget, const std::string& type, const ojson* max_tokens) {
  if (type != "enabled")
    throw bad_request("`thinking.budget_tokens` is only taken with `thinking.type` enabled", "thinking.budget_tokens");
  const bool integer = budget.is_number_integer() || budget.is_number_unsigned();
  if (!integer || (budget.is_number_integer() && budget.get<int64_t>() < 1) ||
      budget.get<uint64_t>() > uint64_t(std::numeric_limits<int32_t>::max()))
    throw bad_request("`thinking.budget_tokens` must be an integer >= 1, got " + budget.dump(), "thinking.budget_tokens");
  const int64_t value = budget.get<int64_t>();
  if (max_tokens && uint64_t(value) >= max_tokens->get<uint64_t>())
    throw bad_request("`max_tokens` must be greater than `thinking.budget_tokens` (" + std::to_string(value) +
                          "): the budget is part of the answer's tokens",
                      "thinking.budget_tokens");
  return value;
}

}  // namespace

MessagesChatRequest messages_to_chat(const RequestBody& request, bool generating) {
  const ojson& body = request.ordered;
  MessagesChatRequest out;
  ojson chat = ojson::object();
  if (const ojson* model = item_field(body, "model")) chat["model"] = *model;
  const ojson* max = item_field(body, "max_tokens");
  if (!max) throw bad_request("`max_tokens` is required", "max_tokens");
  const bool positive = max->is_number_unsigned() ? max->get<uint64_t>() >= 1
                                                  : max->is_number_integer() && max->get<int64_t>() >= 1;
  if (!positive) throw bad_request("`max_tokens` must be an integer >= 1", "max_tokens");
  chat["max_tokens"] = *max;

  ojson messages = ojson::array();
  if (const ojson* system = item_field(body, "system")) messages.push_back({{"role", "system"}, {"content", text_of(*system, "system", "system")}});
  const ojson* msgs = item_field(body, "messages");
  if (!msgs || !msgs->is_array() || msgs->empty()) throw bad_request("`messages` must be a non-empty array", "messages");
  for (size_t i = 0; i < msgs->size(); ++i) {
    const ojson& m = (*msgs)[i];
    const std::string w = item_path("messages", i);
    if (!m.is_object()) throw bad_request("`" + w + "` must be an object", "messages");
    const std::string role = required_item_string(m, "role", w, "messages");
    const ojson* content = item_field(m, "content");
    if (!content) throw bad_request("`" + w + ".content` is required", "messages");
    if (role == "user") add_user_message(*content, w + ".content", messages);
    else if (role == "assistant") add_assistant_message(*content, w + ".content", messages);
    else throw bad_request("`" + w + ".role` must be user or assistant, got '" + role + "'", "messages");
  }
  chat["messages"] = std::move(messages);

  if (const ojson* tools = item_field(body, "tools")) chat["tools"] = messages_tools_as_chat(*tools);
  if (const ojson* choice = item_field(body, "tool_choice")) {
    if (!choice->is_object()) throw bad_request("`tool_choice` must be an object", "tool_choice");
    const std::string type = required_item_string(*choice, "type", "tool_choice", "tool_choice");
    if (type == "auto") chat["tool_choice"] = "auto";
    else if (type == "any") chat["tool_choice"] = "required";
    else if (type == "none") chat["tool_choice"] = "none";
    else if (type == "tool")
      chat["tool_choice"] = {{"type", "function"},
                             {"function", {{"name", required_item_string(*choice, "name", "tool_choice", "tool_choice")}}}};
    else throw bad_request("`tool_choice.type` must be auto, any, tool or none, got '" + type + "'", "tool_choice");
    if (const ojson* dp = item_field(*choice, "disable_parallel_tool_use")) {
      if (!dp->is_boolean()) throw bad_request("`tool_choice.disable_parallel_tool_use` must be a boolean", "tool_choice");
      chat["parallel_tool_calls"] = !dp->get<bool>();
    }
  }
  if (const ojson* thinking = item_field(body, "thinking")) {
    if (!thinking->is_object()) throw bad_request("`thinking` must be an object", "thinking");
    const std::string type = required_item_string(*thinking, "type", "thinking", "thinking");
    if (type != "enabled" && type != "disabled")
      throw bad_request("`thinking.type` must be enabled or disabled, got '" + type + "'", "thinking");
    if (const ojson* budget = item_field(*thinking, "budget_tokens")) {
      out.thinking_budget = thinking_budget(*budget, type, generating ? max : nullptr);
      if (generating) chat["thinking_token_budget"] = *out.thinking_budget;
    }
    chat["chat_template_kwargs"] = {{"enable_thinking", type == "enabled"}};
  }
  if (const ojson* stop = item_field(body, "stop_sequences")) {
    if (!stop->is_array()) throw bad_request("`stop_sequences` must be an array of strings", "stop_sequences");
    chat["stop"] = *stop;
  }
  // Anthropic's sampling fields, and vLLM's extra ones (extra_body), as the chat route reads them.
  for (const char* key : {"temperature", "top_p", "top_k", "min_p", "seed", "repetition_penalty", "presence_penalty",
                          "frequency_penalty", "ignore_eos", "min_tokens", "logit_bias", "stop_token_ids", "cache_salt"})
    if (const ojson* v = item_field(body, key)) chat[key] = *v;
  if (const ojson* s = item_field(body, "stream")) {
    if (!s->is_boolean()) throw bad_request("`stream` must be a boolean", "stream");
    out.stream = s->get<bool>();
  }
  out.chat.ordered = std::move(chat);
  out.chat.fields = out.chat.ordered;
  return out;
}

nlohmann::json anthropic_error_body(int status, const std::string& message) {
  const char* type = "api_error";
  if (status == 400 || status == 413 || status == 422) type = "invalid_request_error";
  else if (status == 401) type = "authentication_error";
  else if (status == 403) type = "permission_error";
  else if (status == 404) type = "not_found_error";
  else if (status == 429) type = "rate_limit_error";
  else if (status == 503 || status == 529) type = "overloaded_error";
  return {{"type", "error"}, {"error", {{"type", type}, {"message", message}}}};
}

}  // namespace striker::server
