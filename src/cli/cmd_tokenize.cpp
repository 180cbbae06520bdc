// striker tokenize TOKENIZER_DIR (--text TEXT | --input FILE | --decode FILE | --chat FILE)
//   --text    prints {"ids": [...], "pieces": [...]} for one string
//   --input   one JSON string per line -> one JSON array of ids per line
//   --decode  one JSON array of ids per line -> one JSON string per line
//   --chat    renders a chat request with the model's template (see tokenize_chat.h)
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/commands.h"
#include "cli/hub_flags.h"
#include "cli/tokenize_chat.h"
#include "core/error.h"
#include "loaders/model_loader.h"
#include "tokenizer/tokenizer.h"

namespace striker::cli {
namespace {

struct TokenizeOptions {
  std::string dir;
  std::string text;
  std::string input;
  std::string decode;
  std::string chat;
  bool add_special = false;
  bool skip_special = false;
  HubFlags hub;
};

// Calls fn(line, line_number) for every line of `path` ("-" is stdin).
template <class Fn>
void for_each_line(const std::string& path, Fn&& fn) {
  std::ifstream file;
  std::istream* in = &std::cin;
  if (path != "-") {
    file.open(path, std::ios::binary);
    if (!file) throw Error(path + ": cannot open the file");
    in = &file;
  }
  std::string line;
  size_t number = 0;
  while (std::getline(*in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    fn(line, number);
  }
}

nlohmann::json parse_line(const std::string& path, size_t number, const std::string& line) {
  try {
    return nlohmann::json::parse(line);
  } catch (const nlohmann::json::parse_error& e) {
    throw Error(path + ":" + std::to_string(number) + ": invalid JSON: " + e.what());
  }
}

void write_out(std::string& buf, bool force) {
  if (force || buf.size() > (1 << 16)) {
    std::fwrite(buf.data(), 1, buf.size(), stdout);
    buf.clear();
  }
}

void run_text(const Tokenizer& tok, const TokenizeOptions& o) {
  const auto ids = tok.encode(o.text, o.add_special);
  nlohmann::json pieces = nlohmann::json::array();
  for (int32_t id : ids) pieces.push_back(tok.id_to_token(id).value_or(""));
  const nlohmann::json out = {{"ids", ids}, {"pieces", pieces}};
  std::printf("%s\n", out.dump().c_str());
}

void run_input(const Tokenizer& tok, const TokenizeOptions& o) {
  std::string buf;
  for_each_line(o.input, [&](const std::string& line, size_t n) {
    const auto j = parse_line(o.input, n, line);
    if (!j.is_string()) throw Error(o.input + ":" + std::to_string(n) + ": expected a JSON string");
    const auto ids = tok.encode(j.get_ref<const std::string&>(), o.add_special);
    buf += '[';
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i) buf += ',';
      buf += std::to_string(ids[i]);
    }
    buf += "]\n";
    write_out(buf, false);
  });
  write_out(buf, true);
}

void run_decode(const Tokenizer& tok, const TokenizeOptions& o) {
  std::string buf;
  const int64_t vocab = tok.vocab_size();
  for_each_line(o.decode, [&](const std::string& line, size_t n) {
    const auto j = parse_line(o.decode, n, line);
    const std::string where = o.decode + ":" + std::to_string(n);
    if (!j.is_array()) throw Error(where + ": expected a JSON array of token ids");
    std::vector<int32_t> ids;
    ids.reserve(j.size());
    for (size_t i = 0; i < j.size(); ++i) {
      if (!j[i].is_number_integer()) throw Error(where + ": element " + std::to_string(i) + " is not an integer");
      const int64_t id = j[i].get<int64_t>();
      if (id < 0 || id >= vocab || !tok.id_to_token(static_cast<int32_t>(id)))
        throw Error(where + ": element " + std::to_string(i) + ": no token has id " + std::to_string(id));
      ids.push_back(static_cast<int32_t>(id));
    }
    buf += nlohmann::json(tok.decode(ids, o.skip_special)).dump();
    buf += '\n';
    write_out(buf, false);
  });
  write_out(buf, true);
}

}  // namespace

void register_tokenize(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<TokenizeOptions>();
  auto* cmd = app.add_subcommand("tokenize", "Encode or decode with a Hugging Face tokenizer.json");
  cmd->add_option("tokenizer_dir", opts->dir, "Folder holding tokenizer.json, or a Hugging Face repo id")->required();
  add_hub_flags(cmd, opts->hub, false);
  auto* text = cmd->add_option("--text", opts->text, "Encode one string; prints ids and pieces as JSON");
  auto* input = cmd->add_option("--input", opts->input, "JSON string per line -> JSON array of ids per line ('-' = stdin)");
  auto* decode = cmd->add_option("--decode", opts->decode, "JSON array of ids per line -> JSON string per line ('-' = stdin)");
  auto* chat = cmd->add_option("--chat", opts->chat, "Render a chat request (JSON file) with the chat template");
  text->excludes(input, decode, chat);
  input->excludes(decode, chat);
  decode->excludes(chat);
  cmd->add_flag("--add-special-tokens", opts->add_special, "Apply the post-processor (--text, --input)");
  cmd->add_flag("--skip-special-tokens", opts->skip_special, "Leave special tokens out (--decode)");
  cmd->callback([opts, text, input, decode, chat, &exit_code] {
    if (!text->count() && !input->count() && !decode->count() && !chat->count())
      throw Error("tokenize: give one of --text, --input, --decode or --chat");
    opts->dir = resolve_model_path(opts->dir, opts->hub.model(hub::Need::tokenizer));
    if (chat->count()) {
      exit_code = run_tokenize_chat(opts->dir, opts->chat);
      return;
    }
    const auto tok = Tokenizer::from_dir(opts->dir);
    if (text->count()) run_text(*tok, *opts);
    else if (input->count()) run_input(*tok, *opts);
    else run_decode(*tok, *opts);
    exit_code = 0;
  });
}

}  // namespace striker::cli
