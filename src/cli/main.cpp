// striker: an inference server for Flint. See README.md and docs/architecture.md.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/vllm_serve_flags.h"
#include "core/error.h"
#include "core/log.h"

int main(int argc, char** argv) {
  CLI::App app{"striker - OpenAI-compatible inference server for Flint"};
  app.require_subcommand(1);
  // --log-level belongs to every command and may come after it (`striker serve M --log-level debug`).
  app.fallthrough();
  std::optional<std::string> log_level;
  app.add_option("--log-level", log_level, "debug | info | warning | error | critical (default: env VLLM_LOGGING_LEVEL, else info)");
  // Set before any subcommand callback runs (pre-parse callbacks run once options are read).
  app.parse_complete_callback([&log_level] { striker::logging::configure(striker::logging::level_from(log_level)); });
  int exit_code = 0;
  striker::cli::register_serve(app, exit_code);
  striker::cli::register_chat(app, exit_code);
  striker::cli::register_perplexity(app, exit_code);
  striker::cli::register_make_model(app, exit_code);
  striker::cli::register_tokenize(app, exit_code);
  striker::cli::register_quantize(app, exit_code);
  striker::cli::register_bench(app, exit_code);
  try {
    // CLI11 parses a reversed argument vector; vLLM's -tp/-pp/-dp become their long names first.
    std::vector<std::string> args = striker::cli::expand_vllm_short_flags({argv + 1, argv + argc});
    std::reverse(args.begin(), args.end());
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const striker::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return exit_code;
}
