// striker: an inference server for Flint. See README.md and docs/architecture.md.
#include <cstdio>
#include <exception>

#include "cli/commands.h"
#include "core/error.h"

int main(int argc, char** argv) {
  CLI::App app{"striker - OpenAI-compatible inference server for Flint"};
  app.require_subcommand(1);
  int exit_code = 0;
  striker::cli::register_serve(app, exit_code);
  striker::cli::register_chat(app, exit_code);
  striker::cli::register_perplexity(app, exit_code);
  striker::cli::register_make_model(app, exit_code);
  striker::cli::register_tokenize(app, exit_code);
  striker::cli::register_quantize(app, exit_code);
  striker::cli::register_bench(app, exit_code);
  try {
    app.parse(argc, argv);
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
