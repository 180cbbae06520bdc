#include "server/responses_request.h"

#include <initializer_list>

#include "server/api_error.h"

namespace striker::server {
namespace {

using ojson = nlohmann::ordered_json;


// A message's content as chat content: a string stays a string; text parts become chat text parts.
ojson chat_content(const ojson& content, const std::string& where, std::initializer_list<const char*> text_types) {
  if (content.is_string()) return content;
  if (!content.is_array()) throw bad_request("`" + where + "` must be a string or an array of content parts", "input");
  ojson parts = ojson::array();
  for (size_t k = 0; k < content.size(); ++k) {
    const ojson& part = content[k];
    if (!part.is_object()) throw bad_request("`" + item_path(where, k) + "` must be an object", "input");
    const std::string type = required_item_string(part, "type", item_path(where, k), "input");
    bool text = false;
    for (const char* t : text_types) text = text || type == t;
    if (!text) {
      throw bad_request("content part type '" + type + "' in `" + item_path(where, k) +
                            "` is not supported here (this model takes text only)",
                        "input");
    }
    parts.push_back({{"type", "text"}, {"text", required_item_string(part, "text", item_path(where, k), "input")}});
  }
  return parts;
}

// The plain text of reasoning or tool-output parts (each part's "text", joined).
std::string joined_text(const ojson& parts, const std::string& where) {
  if (parts.is_string()) return parts.get<std::string>();
  if (!parts.is_array()) throw bad_request("`" + where + "` must be a string or an array of parts", "input");
  std::string text;
  for (size_t k = 0; k < parts.size(); ++k) {
    if (!parts[k].is_object()) throw bad_request("`" + item_path(where, k) + "` must be an object", "input");
    text += required_item_string(parts[k], "text", item_path(where, k), "input");
  }
  return text;
}

// Consecutive reasoning, assistant-message and function-call items form one assistant turn.
class Conversation {
 public:
  explicit Conversation(ojson& messages) : messages_(messages) {}

  void add(const ojson& item, const std::string& where) {
    if (!item.is_object()) throw bad_request("`" + where + "` must be an object", "input");
    const ojson* type_v = item_field(item, "type");
    if (type_v && !type_v->is_string()) throw bad_request("`" + where + ".type` must be a string", "input");
    const std::string type = type_v ? type_v->get<std::string>() : "message";
    if (type == "message") {
      message(item, where);
    } else if (type == "function_call") {
      const std::string arguments = required_item_string(item, "arguments", where, "input");
      const auto parsed = nlohmann::json::parse(arguments, nullptr, false);
      if (parsed.is_discarded() || !parsed.is_object()) {
        throw bad_request("`" + where + ".arguments` is not a JSON object: " + arguments, "input");
      }
      ojson& m = turn(/*content_next=*/false);
      if (!m.contains("tool_calls")) m["tool_calls"] = ojson::array();
      m["tool_calls"].push_back({{"id", required_item_string(item, "call_id", where, "input")},
                                 {"type", "function"},
                                 {"function", {{"name", required_item_string(item, "name", where, "input")},
                                               {"arguments", arguments}}}});
    } else if (type == "function_call_output") {
      const ojson* output = item_field(item, "output");
      if (!output) throw bad_request("`" + where + ".output` is required", "input");
      close();
      messages_.push_back({{"role", "tool"},
                           {"tool_call_id", required_item_string(item, "call_id", where, "input")},
                           {"content", joined_text(*output, where + ".output")}});
    } else if (type == "reasoning") {
      std::string text;
      if (const ojson* content = item_field(item, "content")) text = joined_text(*content, where + ".content");
      if (text.empty())
        if (const ojson* summary = item_field(item, "summary")) text = joined_text(*summary, where + ".summary");
      ojson& m = turn(/*content_next=*/false, /*reasoning_next=*/true);
      m["reasoning_content"] = m.value("reasoning_content", std::string()) + text;
    } else {
      throw bad_request("input item type '" + type + "' in `" + where +
                            "` is not supported (message, function_call, function_call_output, reasoning)",
                        "input");
    }
  }

  void close() { open_ = false; }

 private:
  void message(const ojson& item, const std::string& where) {
    std::string role = required_item_string(item, "role", where, "input");
    if (role == "assistant") {
      const ojson* content = item_field(item, "content");
      if (!content) throw bad_request("`" + where + ".content` is required", "input");
      ojson& m = turn(/*content_next=*/true);
      m["content"] = chat_content(*content, where + ".content", {"output_text", "input_text", "text"});
      return;
    }
    if (role != "user" && role != "system" && role != "developer") {
      throw bad_request("`" + where + ".role` '" + role + "' is not one of user, system, developer, assistant",
                        "input");
    }
    const ojson* content = item_field(item, "content");
    if (!content) throw bad_request("`" + where + ".content` is required", "input");
    close();
    messages_.push_back(
        {{"role", role == "developer" ? "system" : role},
         {"content", chat_content(*content, where + ".content", {"input_text", "output_text", "text"})}});
  }

  // The open assistant turn, or a new one: content after content or tool calls, and reasoning
  // after anything, start a new turn (the template renders a turn's reasoning before its content).
  ojson& turn(bool content_next, bool reasoning_next = false) {
    if (open_) {
      ojson& m = messages_.back();
      const bool has_content = !m["content"].is_null(), has_calls = m.contains("tool_calls");
      if (!(reasoning_next && (has_content || has_calls)) && !(content_next && (has_content || has_calls))) return m;
    }
    messages_.push_back({{"role", "assistant"}, {"content", nullptr}});
    open_ = true;
    return messages_.back();
  }

  ojson& messages_;
  bool open_ = false;
};

// Responses function tools are flat ({type, name, description, parameters, strict}); chat nests them.
ojson responses_tools_as_chat(const ojson& tools) {
  if (!tools.is_array()) throw bad_request("`tools` must be an array", "tools");
  ojson out = ojson::array();
  for (size_t k = 0; k < tools.size(); ++k) {
    const ojson& t = tools[k];
    const std::string where = item_path("tools", k);
    if (!t.is_object()) throw bad_request("`" + where + "` must be an object", "tools");
    const std::string type = required_item_string(t, "type", where, "tools");
    if (type != "function") {
      throw bad_request("tool type '" + type + "' in `" + where + "` is not supported (only function tools)", "tools");
    }
    ojson fn = {{"name", required_item_string(t, "name", where, "tools")}};
    for (const char* key : {"description", "parameters", "strict"})
      if (const ojson* v = item_field(t, key)) fn[key] = *v;
    out.push_back({{"type", "function"}, {"function", std::move(fn)}});
  }
  return out;
}

ojson chat_tool_choice(const ojson& choice) {
  if (choice.is_string()) return choice;  // auto, none, required: the chat route checks the value
  if (!choice.is_object()) throw bad_request("`tool_choice` must be a string or an object", "tool_choice");
  const std::string type = required_item_string(choice, "type", "tool_choice", "tool_choice");
  if (type != "function") {
    throw bad_request("`tool_choice` of type '" + type + "' is not supported (auto, none, required, or a function)",
                      "tool_choice");
  }
  return {{"type", "function"}, {"function", {{"name", required_item_string(choice, "name", "tool_choice", "tool_choice")}}}};
}

ojson chat_response_format(const ojson& text) {
  if (!text.is_object()) throw bad_request("`text` must be an object", "text");
  const ojson* format = item_field(text, "format");
  if (!format) return nullptr;
  if (!format->is_object()) throw bad_request("`text.format` must be an object", "text");
  const std::string type = required_item_string(*format, "type", "text.format", "text");
  if (type == "text") return nullptr;
  if (type == "json_object") return {{"type", "json_object"}};
  if (type != "json_schema") {
    throw bad_request("`text.format.type` '" + type + "' is not one of text, json_object, json_schema", "text");
  }
  ojson schema = {{"name", required_item_string(*format, "name", "text.format", "text")}};
  for (const char* key : {"schema", "strict", "description"})
    if (const ojson* v = item_field(*format, key)) schema[key] = *v;
  return {{"type", "json_schema"}, {"json_schema", std::move(schema)}};
}

void reject_if_set(const ojson& body, const char* name, const std::string& why) {
  if (item_field(body, name)) throw bad_request("`" + std::string(name) + "` is not supported: " + why, name);
}

}  // namespace

ResponsesChatRequest responses_to_chat(const RequestBody& request, const ojson* previous) {
  const ojson& body = request.ordered;
  ResponsesChatRequest out;
  reject_if_set(body, "background", "responses run in the request");
  reject_if_set(body, "conversation", "continue with previous_response_id");
  reject_if_set(body, "max_tool_calls", "it limits built-in tools, and only function tools are served");
  reject_if_set(body, "prompt", "prompt templates are an OpenAI-hosted feature");
  // Codex asks for encrypted reasoning so that it can replay it statelessly (store: false). Nothing here is
  // encrypted: reasoning items carry the reasoning itself in `content`, which the client replays instead.
  if (const ojson* inc = item_field(body, "include")) {
    if (!inc->is_array()) throw bad_request("`include` must be an array of strings", "include");
    for (const auto& v : *inc) {
      if (v == "message.output_text.logprobs") out.output_logprobs = true;
      else if (v != "reasoning.encrypted_content")
        throw bad_request("`include` value " + v.dump() +
                              " is not supported (message.output_text.logprobs, or reasoning.encrypted_content: the "
                              "reasoning comes in plain text)",
                          "include");
    }
  }
  // top_logprobs counts only with the logprobs included (vLLM); it is checked either way.
  const ojson* top_logprobs = item_field(body, "top_logprobs");
  if (top_logprobs && !top_logprobs->is_null() && !(top_logprobs->is_number_integer() && top_logprobs->get<int64_t>() >= 0))
    throw bad_request("`top_logprobs` must be an integer >= 0", "top_logprobs");
  if (const ojson* tr = item_field(body, "truncation"); tr && *tr != "disabled") {
    throw bad_request("`truncation` must be \"disabled\": a prompt longer than the context is an error", "truncation");
  }
  for (const char* flag : {"stream", "store"}) {
    if (const ojson* v = item_field(body, flag); v && !v->is_boolean()) {
      throw bad_request("`" + std::string(flag) + "` must be a boolean", flag);
    }
  }
  if (const ojson* v = item_field(body, "stream")) out.stream = v->get<bool>();
  if (const ojson* v = item_field(body, "store")) out.store = v->get<bool>();

  if (previous) out.conversation = *previous;
  Conversation conv(out.conversation);
  const ojson* input = item_field(body, "input");
  if (!input) throw bad_request("`input` is required", "input");
  if (input->is_string()) {
    out.conversation.push_back({{"role", "user"}, {"content", *input}});
  } else if (input->is_array()) {
    if (input->empty()) throw bad_request("`input` must not be empty", "input");
    for (size_t k = 0; k < input->size(); ++k) conv.add((*input)[k], item_path("input", k));
  } else {
    throw bad_request("`input` must be a string or an array of input items", "input");
  }

  ojson chat = ojson::object();
  if (const ojson* model = item_field(body, "model")) chat["model"] = *model;
  ojson messages = ojson::array();
  if (const ojson* instructions = item_field(body, "instructions")) {
    if (!instructions->is_string()) throw bad_request("`instructions` must be a string", "instructions");
    messages.push_back({{"role", "system"}, {"content", *instructions}});
  }
  for (const auto& m : out.conversation) messages.push_back(m);
  chat["messages"] = std::move(messages);
  if (const ojson* tools = item_field(body, "tools")) chat["tools"] = responses_tools_as_chat(*tools);
  if (const ojson* choice = item_field(body, "tool_choice")) chat["tool_choice"] = chat_tool_choice(*choice);
  if (const ojson* max = item_field(body, "max_output_tokens")) {
    const bool positive = max->is_number_unsigned() ? max->get<uint64_t>() >= 1
                                                    : max->is_number_integer() && max->get<int64_t>() >= 1;
    if (!positive)
      throw bad_request("`max_output_tokens` must be an integer >= 1", "max_output_tokens");
    chat["max_tokens"] = *max;
  }
  if (const ojson* reasoning = item_field(body, "reasoning")) {
    if (!reasoning->is_object()) throw bad_request("`reasoning` must be an object", "reasoning");
    if (const ojson* effort = item_field(*reasoning, "effort")) chat["reasoning_effort"] = *effort;
  }
  if (const ojson* text = item_field(body, "text")) {
    ojson format = chat_response_format(*text);
    if (!format.is_null()) chat["response_format"] = std::move(format);
  }
  // Sampling fields and vLLM's extra parameters, read by the chat route as they are.
  for (const char* key : {"temperature", "top_p", "parallel_tool_calls", "top_k", "min_p", "repetition_penalty",
                          "presence_penalty", "frequency_penalty", "seed", "stop", "stop_token_ids", "ignore_eos",
                          "min_tokens", "logit_bias", "bad_words", "allowed_token_ids", "cache_salt",
                          "chat_template_kwargs", "include_stop_str_in_output", "priority", "thinking_token_budget"}) {
    if (const ojson* v = item_field(body, key)) chat[key] = *v;
  }
  if (out.output_logprobs) {
    chat["logprobs"] = true;  // the chat route checks top_logprobs against --max-logprobs
    if (top_logprobs && !top_logprobs->is_null()) chat["top_logprobs"] = *top_logprobs;
  }
  out.chat.ordered = std::move(chat);
  out.chat.fields = out.chat.ordered;
  return out;
}

void append_output_as_messages(const ojson& output, ojson& conversation) {
  Conversation conv(conversation);
  conv.close();  // the output starts a new assistant turn
  for (size_t k = 0; k < output.size(); ++k) {
    const ojson& item = output[k];
    const std::string type = item.value("type", "");
    if (type == "message") {
      std::string text;  // one string, as a chat client would send the assistant's reply back
      for (const auto& part : item["content"]) text += part.value("text", "");
      conv.add({{"type", "message"}, {"role", "assistant"}, {"content", text}}, item_path("output", k));
    } else {
      conv.add(item, item_path("output", k));
    }
  }
}

}  // namespace striker::server
