// Chat templates: Jinja2 source from tokenizer_config.json rendered with Hugging Face semantics.
// CONTRACT header: the server codes against these declarations.
#pragma once
#include <filesystem>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

namespace striker {

class ChatTemplate {
 public:
  // Parses the template; a syntax error throws striker::Error with line and column.
  static std::unique_ptr<ChatTemplate> from_source(const std::string& source, const std::string& origin);
  // Reads `chat_template` from tokenizer_config.json (or chat_template.jinja) in `dir`,
  // plus bos_token / eos_token for the template context.
  // `source` (non-empty: vLLM's --chat-template) replaces the directory's template; the special
  // tokens still come from the directory.
  static std::unique_ptr<ChatTemplate> from_tokenizer_dir(const std::filesystem::path& dir, const std::string& source = "",
                                                          const std::string& origin = "");
  virtual ~ChatTemplate() = default;

  // Renders with exactly these variables (messages, tools, add_generation_prompt,
  // enable_thinking, ...). raise_exception / bad variables throw striker::Error.
  // The tokenizer's special tokens (bos_token, eos_token, ...) sit under the variables, as in
  // Hugging Face's apply_chat_template.
  // nlohmann::json sorts object keys, so tojson output (tool schemas) comes out in sorted
  // order; prefer render_ordered when the variables came from a client request.
  virtual std::string render(const nlohmann::json& variables) const = 0;
  // Same, keeping every object's key order (what vLLM/HF do: Python dicts keep insertion order).
  virtual std::string render_ordered(const nlohmann::ordered_json& variables) const = 0;
};

// vLLM's preprocessing of an OpenAI chat request into template variables
// (reference/chat-format.md §1.5): messages (tool_call arguments parsed to objects, ...),
// tools, add_generation_prompt, and chat_template_kwargs merged on top.
nlohmann::json chat_template_variables(const nlohmann::json& messages, const nlohmann::json& tools,
                                       bool add_generation_prompt, const nlohmann::json& template_kwargs);
// Same, keeping key order (pair with ChatTemplate::render_ordered).
nlohmann::ordered_json chat_template_variables_ordered(const nlohmann::ordered_json& messages,
                                                       const nlohmann::ordered_json& tools,
                                                       bool add_generation_prompt,
                                                       const nlohmann::ordered_json& template_kwargs);

// continue_final_message (Hugging Face apply_chat_template / vLLM): `rendered` is the
// conversation rendered with add_generation_prompt=false; returns it cut right after the
// final message's content, so the template's end-of-message text (and anything after it, e.g.
// the GLM template's tool-call markup) is dropped and the model continues the message.
// The content is the final message's string content, or the text of its last text part.
// Templates may strip the content, so it is located by its stripped text (last occurrence);
// the content's leading/trailing whitespace is kept when the template kept it.
// Pass the preprocessed messages (chat_template_variables' "messages", as vLLM hands them to
// apply_chat_template: array content joined, null content ""), so the text searched is the one
// the template saw. Throws striker::Error when the messages are empty, the final message is not an assistant
// message, it has no text content to continue, or its content is absent from `rendered`.
std::string cut_after_final_message(const std::string& rendered, const nlohmann::json& messages);

}  // namespace striker
