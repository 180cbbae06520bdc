// STUB until the chat-template part lands: replaced by the real implementation.
#include "chat/chat_template.h"

#include "core/error.h"

namespace striker {

std::unique_ptr<ChatTemplate> ChatTemplate::from_source(const std::string&, const std::string& origin) {
  throw Error(origin + ": chat templates are not available yet");
}
std::unique_ptr<ChatTemplate> ChatTemplate::from_tokenizer_dir(const std::filesystem::path& dir) {
  throw Error(dir.string() + ": chat templates are not available yet");
}
nlohmann::json chat_template_variables(const nlohmann::json&, const nlohmann::json&, bool, const nlohmann::json&) {
  throw Error("chat templates are not available yet");
}

}  // namespace striker
