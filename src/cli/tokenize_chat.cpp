// `striker tokenize DIR --chat FILE.json`: renders DIR's chat template with exactly the
// variables in FILE (plus the tokenizer's special tokens underneath, as Hugging Face does)
// and prints {"prompt": ..., "ids": [...]} with ids = encode(prompt, add_special_tokens=false).
#include "cli/tokenize_chat.h"

#include <cstdio>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "core/error.h"
#include "core/ordered_json.h"
#include "tokenizer/tokenizer.h"

namespace striker::cli {

int run_tokenize_chat(const std::string& tokenizer_dir, const std::string& chat_json_file) {
  std::ifstream in(chat_json_file, std::ios::binary);
  if (!in) throw Error(chat_json_file + ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  nlohmann::ordered_json vars;
  try {
    vars = parse_ordered_json(ss.str());
  } catch (const nlohmann::json::parse_error& e) {
    throw Error(chat_json_file + ": invalid JSON: " + e.what());
  }
  if (!vars.is_object()) throw Error(chat_json_file + ": must be a JSON object of template variables");

  auto tmpl = ChatTemplate::from_tokenizer_dir(tokenizer_dir);
  auto tokenizer = Tokenizer::from_dir(tokenizer_dir);
  const std::string prompt = tmpl->render_ordered(vars);
  const std::vector<int32_t> ids = tokenizer->encode(prompt, false);

  nlohmann::ordered_json out;
  out["prompt"] = prompt;
  out["ids"] = ids;
  const std::string text = out.dump(-1, ' ', false, nlohmann::json::error_handler_t::strict) + "\n";
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

}  // namespace striker::cli
