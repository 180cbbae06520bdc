// STUB until the chat-template part lands: replaced by the real implementation.
#include "cli/tokenize_chat.h"

#include "core/error.h"

namespace striker::cli {

int run_tokenize_chat(const std::string&, const std::string&) {
  throw Error("'striker tokenize --chat' is not available yet");
}

}  // namespace striker::cli
