// Each `striker <command>` lives in its own cmd_<name>.cpp and registers itself here.
#pragma once
#include <CLI/CLI.hpp>

namespace striker::cli {

// Each register_* adds a subcommand to `app` whose callback runs the command and sets
// `exit_code` (0 on success). Errors are printed as one line to stderr.
void register_serve(CLI::App& app, int& exit_code);
void register_chat(CLI::App& app, int& exit_code);
void register_perplexity(CLI::App& app, int& exit_code);
void register_make_model(CLI::App& app, int& exit_code);
void register_tokenize(CLI::App& app, int& exit_code);
void register_quantize(CLI::App& app, int& exit_code);
void register_bench(CLI::App& app, int& exit_code);

}  // namespace striker::cli
