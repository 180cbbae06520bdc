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
  static std::unique_ptr<ChatTemplate> from_tokenizer_dir(const std::filesystem::path& dir);
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

}  // namespace striker
