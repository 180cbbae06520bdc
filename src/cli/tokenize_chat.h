// `striker tokenize DIR --chat FILE.json`: renders the chat template with exactly the
// variables in FILE and prints {"prompt": ..., "ids": [...]}. Kept apart from
// cmd_tokenize.cpp because it belongs to the chat-template part.
#pragma once
#include <string>

namespace striker::cli {

int run_tokenize_chat(const std::string& tokenizer_dir, const std::string& chat_json_file);

}  // namespace striker::cli
