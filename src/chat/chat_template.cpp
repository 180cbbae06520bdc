// Chat templates: loads the Jinja source from a tokenizer folder, renders it with the
// striker::jinja interpreter, and turns OpenAI chat messages into template variables the
// way vLLM does (reference/chat-format.md §1.5).
#include "chat/chat_template.h"

#include <fstream>
#include <sstream>

#include "chat/jinja/methods.h"
#include "chat/jinja/template.h"
#include "core/error.h"
#include "core/ordered_json.h"

namespace striker {
namespace {

using ojson = nlohmann::ordered_json;

class JinjaChatTemplate final : public ChatTemplate {
 public:
  JinjaChatTemplate(jinja::Template tmpl, ojson special_tokens)
      : tmpl_(std::move(tmpl)), special_tokens_(std::move(special_tokens)) {}

  std::string render(const nlohmann::json& variables) const override {
    return render_ordered(ojson::parse(variables.dump()));
  }

  std::string render_ordered(const ojson& variables) const override {
    if (!variables.is_object()) throw Error("chat template variables must be a JSON object");
    ojson context = special_tokens_;
    merge_keys(context, variables);
    return tmpl_.render_json(context);
  }

 private:
  jinja::Template tmpl_;
  ojson special_tokens_;  // bos_token, eos_token, ... from tokenizer_config.json
};

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path.string() + ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A special token in tokenizer_config.json is a string or an AddedToken object {"content": ...}.
std::optional<std::string> token_text(const ojson& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return std::nullopt;
}

std::string pick_template(const ojson& value, const std::filesystem::path& config_path) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_array()) {
    std::string names;
    for (const auto& entry : value) {
      if (!entry.is_object() || !entry.contains("name") || !entry.contains("template") ||
          !entry["name"].is_string() || !entry["template"].is_string())
        throw Error(config_path.string() + ": chat_template list entries need string 'name' and 'template'");
      if (entry["name"] == "default") return entry["template"].get<std::string>();
      names += (names.empty() ? "" : ", ") + entry["name"].get<std::string>();
    }
    throw Error(config_path.string() + ": chat_template has no template named 'default' (have: " + names + ")");
  }
  throw Error(config_path.string() + ": chat_template must be a string or a list of {name, template}");
}

// ---- vLLM message preprocessing ---------------------------------------------------

// Content as vLLM's "string" content format gives it to the template: text parts joined
// with "\n", null -> "".
ojson flatten_content(const ojson& content, size_t index) {
  if (content.is_null()) return "";
  if (content.is_string()) return content;
  if (!content.is_array())
    throw Error("messages[" + std::to_string(index) + "].content must be a string, null or a list of parts");
  std::string text;
  bool first = true;
  for (size_t i = 0; i < content.size(); ++i) {
    const ojson& part = content[i];
    std::string piece;
    if (part.is_string()) {
      piece = part.get<std::string>();
    } else if (part.is_object() && part.contains("type") && part["type"].is_string()) {
      const std::string type = part["type"].get<std::string>();
      if (type != "text")
        throw Error("messages[" + std::to_string(index) + "].content[" + std::to_string(i) + "]: content part type '" +
                    type + "' is not supported (text only)");
      if (!part.contains("text") || !part["text"].is_string())
        throw Error("messages[" + std::to_string(index) + "].content[" + std::to_string(i) + "].text must be a string");
      piece = part["text"].get<std::string>();
    } else {
      throw Error("messages[" + std::to_string(index) + "].content[" + std::to_string(i) +
                  "] must be a string or an object with a 'type'");
    }
    if (!first) text += "\n";
    text += piece;
    first = false;
  }
  return text;
}

// tool_calls[].function.arguments: a JSON string is parsed to an object; empty/null -> {}.
ojson preprocess_tool_calls(const ojson& calls, size_t index) {
  if (!calls.is_array()) throw Error("messages[" + std::to_string(index) + "].tool_calls must be a list");
  ojson out = ojson::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    ojson call = calls[i];
    const std::string where = "messages[" + std::to_string(index) + "].tool_calls[" + std::to_string(i) + "]";
    if (!call.is_object() || !call.contains("function") || !call["function"].is_object())
      throw Error(where + ": needs a 'function' object");
    ojson& fn = call["function"];
    if (!fn.contains("arguments") || fn["arguments"].is_null() ||
        (fn["arguments"].is_string() && fn["arguments"].get<std::string>().empty())) {
      fn["arguments"] = ojson::object();
    } else if (fn["arguments"].is_string()) {
      try {
        fn["arguments"] = parse_ordered_json(fn["arguments"].get<std::string>());
      } catch (const nlohmann::json::parse_error&) {
        throw Error(where + ".function.arguments is not valid JSON");
      }
    } else if (!fn["arguments"].is_object() && !fn["arguments"].is_array()) {
      // json.loads would fail on a non-string non-container value too.
      throw Error(where + ".function.arguments must be a JSON string or object");
    }
    out.push_back(std::move(call));
  }
  return out;
}

ojson preprocess_message(const ojson& m, size_t index) {
  const std::string where = "messages[" + std::to_string(index) + "]";
  if (!m.is_object()) throw Error(where + " must be an object");
  if (!m.contains("role") || !m["role"].is_string()) throw Error(where + ".role must be a string");
  const std::string role = m["role"].get<std::string>();
  ojson out = ojson::object();
  out["role"] = role;
  out["content"] = flatten_content(m.contains("content") ? m["content"] : ojson(), index);
  if (role == "assistant") {
    if (m.contains("tool_calls") && !m["tool_calls"].is_null()) {
      ojson calls = preprocess_tool_calls(m["tool_calls"], index);
      if (!calls.empty()) out["tool_calls"] = std::move(calls);
    }
    // vLLM accepts `reasoning` and `reasoning_content`; the template sees both.
    ojson reasoning;
    for (const char* key : {"reasoning", "reasoning_content"}) {
      if (!m.contains(key) || m[key].is_null()) continue;
      if (!m[key].is_string()) throw Error(where + "." + key + " must be a string");
      if (reasoning.is_null() && !m[key].get<std::string>().empty()) reasoning = m[key];
    }
    if (!reasoning.is_null()) {
      out["reasoning"] = reasoning;
      out["reasoning_content"] = reasoning;
    }
  } else if (role == "tool") {
    if (m.contains("tool_call_id")) out["tool_call_id"] = m["tool_call_id"];
  }
  if (m.contains("name") && m["name"].is_string()) out["name"] = m["name"];
  return out;
}

// model_dump() of vLLM's ChatCompletionToolsParam: type, function{name, description, parameters}
// with nulls kept, unknown keys after the known ones.
ojson preprocess_tool(const ojson& tool, size_t index) {
  const std::string where = "tools[" + std::to_string(index) + "]";
  if (!tool.is_object()) throw Error(where + " must be an object");
  if (tool.contains("type") && tool["type"] != "function") throw Error(where + ".type must be \"function\"");
  if (!tool.contains("function") || !tool["function"].is_object()) throw Error(where + ".function must be an object");
  const ojson& fn = tool["function"];
  if (!fn.contains("name") || !fn["name"].is_string()) throw Error(where + ".function.name must be a string");
  if (fn.contains("description") && !fn["description"].is_null() && !fn["description"].is_string())
    throw Error(where + ".function.description must be a string or null");
  if (fn.contains("parameters") && !fn["parameters"].is_null() && !fn["parameters"].is_object())
    throw Error(where + ".function.parameters must be an object or null");
  ojson f = ojson::object();
  f["name"] = fn["name"];
  f["description"] = fn.contains("description") ? fn["description"] : ojson();
  f["parameters"] = fn.contains("parameters") ? fn["parameters"] : ojson();
  // The other keys are unique and not among those set: append them (operator[] would scan).
  for (auto it = fn.begin(); it != fn.end(); ++it)
    if (it.key() != "name" && it.key() != "description" && it.key() != "parameters") append_new_key(f, it.key(), it.value());
  ojson out = ojson::object();
  out["type"] = "function";
  out["function"] = std::move(f);
  for (auto it = tool.begin(); it != tool.end(); ++it)
    if (it.key() != "type" && it.key() != "function") append_new_key(out, it.key(), it.value());
  return out;
}

}  // namespace

std::unique_ptr<ChatTemplate> ChatTemplate::from_source(const std::string& source, const std::string& origin) {
  return std::make_unique<JinjaChatTemplate>(jinja::Template::parse(source, origin), ojson::object());
}

std::unique_ptr<ChatTemplate> ChatTemplate::from_tokenizer_dir(const std::filesystem::path& dir,
                                                               const std::string& override_source,
                                                               const std::string& override_origin) {
  const auto config_path = dir / "tokenizer_config.json";
  const auto jinja_path = dir / "chat_template.jinja";
  ojson config = ojson::object();
  if (std::filesystem::exists(config_path)) {
    try {
      config = ojson::parse(read_file(config_path));
    } catch (const nlohmann::json::parse_error& e) {
      throw Error(config_path.string() + ": invalid JSON: " + e.what());
    }
    if (!config.is_object()) throw Error(config_path.string() + ": must be a JSON object");
  }
  std::string source, origin;
  if (!override_source.empty()) {
    source = override_source;
    origin = override_origin;
  } else if (config.contains("chat_template") && !config["chat_template"].is_null()) {
    source = pick_template(config["chat_template"], config_path);
    origin = config_path.string() + " (chat_template)";
  } else if (std::filesystem::exists(jinja_path)) {
    source = read_file(jinja_path);
    origin = jinja_path.string();
  } else {
    throw Error(dir.string() + ": no chat template (tokenizer_config.json has no chat_template and there is no "
                "chat_template.jinja)");
  }
  ojson special = ojson::object();
  for (const char* key : {"bos_token", "eos_token", "unk_token", "pad_token"}) {
    if (!config.contains(key)) continue;
    if (auto text = token_text(config[key])) special[key] = *text;
  }
  if (config.contains("additional_special_tokens") && config["additional_special_tokens"].is_array()) {
    ojson list = ojson::array();
    for (const auto& t : config["additional_special_tokens"])
      if (auto text = token_text(t)) list.push_back(*text);
    special["additional_special_tokens"] = std::move(list);
  }
  return std::make_unique<JinjaChatTemplate>(jinja::Template::parse(source, origin), std::move(special));
}

nlohmann::ordered_json chat_template_variables_ordered(const ojson& messages, const ojson& tools,
                                                       bool add_generation_prompt, const ojson& template_kwargs) {
  if (!messages.is_array()) throw Error("messages must be a list");
  ojson msgs = ojson::array();
  for (size_t i = 0; i < messages.size(); ++i) msgs.push_back(preprocess_message(messages[i], i));
  ojson tool_list;
  if (!tools.is_null()) {
    if (!tools.is_array()) throw Error("tools must be a list or null");
    tool_list = ojson::array();
    for (size_t i = 0; i < tools.size(); ++i) tool_list.push_back(preprocess_tool(tools[i], i));
  }
  ojson vars = ojson::object();
  vars["messages"] = std::move(msgs);
  vars["tools"] = std::move(tool_list);
  vars["documents"] = nullptr;
  vars["add_generation_prompt"] = add_generation_prompt;
  if (!template_kwargs.is_null()) {
    if (!template_kwargs.is_object()) throw Error("chat_template_kwargs must be an object");
    merge_keys(vars, template_kwargs);
  }
  return vars;
}

nlohmann::json chat_template_variables(const nlohmann::json& messages, const nlohmann::json& tools,
                                       bool add_generation_prompt, const nlohmann::json& template_kwargs) {
  ojson v = chat_template_variables_ordered(ojson::parse(messages.dump()), ojson::parse(tools.dump()),
                                            add_generation_prompt, ojson::parse(template_kwargs.dump()));
  return nlohmann::json::parse(v.dump());
}

}  // namespace striker

namespace striker {
namespace {

// The text the model continues: string content, or the last text part (as Hugging Face picks it).
std::string final_message_text(const nlohmann::json& message, size_t index) {
  const std::string where = "messages[" + std::to_string(index) + "]";
  const auto content = message.find("content");
  if (content == message.end() || content->is_null()) {
    throw Error("continue_final_message: the final message (" + where + ") has no content to continue");
  }
  if (content->is_string()) return content->get<std::string>();
  if (content->is_array()) {
    for (auto part = content->rbegin(); part != content->rend(); ++part) {
      if (part->is_object() && part->contains("text") && (*part)["text"].is_string()) {
        return (*part)["text"].get<std::string>();
      }
    }
  }
  throw Error("continue_final_message: the final message (" + where + ") has no text content to continue");
}

}  // namespace

std::string cut_after_final_message(const std::string& rendered, const nlohmann::json& messages) {
  if (!messages.is_array() || messages.empty()) throw Error("continue_final_message: there is no message to continue");
  const nlohmann::json& last = messages.back();
  const size_t index = messages.size() - 1;
  if (!last.is_object() || !last.contains("role") || last["role"] != "assistant") {
    throw Error("continue_final_message: the final message (messages[" + std::to_string(index) +
                "]) must be an assistant message");
  }
  const std::string text = final_message_text(last, index);
  const jinja::Value whitespace = jinja::Value::none();
  const std::string stripped = jinja::py_strip(text, whitespace, true, true);
  const std::string lstripped = jinja::py_strip(text, whitespace, true, false);
  // Python's str.rindex("") is len(s): empty (or all-space) content cuts nothing.
  const size_t at = rendered.rfind(stripped);
  if (at == std::string::npos) {
    throw Error("continue_final_message: the final message's content does not appear in the rendered chat "
                "template (the template changed it)");
  }
  // Keep the content's own trailing whitespace when the template kept it verbatim; templates
  // that strip it (GLM-4.7 does) are cut after the stripped text.
  if (rendered.compare(at, lstripped.size(), text) == 0) return rendered.substr(0, at + lstripped.size());
  return rendered.substr(0, at + stripped.size());
}

}  // namespace striker
