// striker make-model
#include <cstdio>

#include "cli/commands.h"

namespace striker::cli {

void register_make_model(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("make-model", "(not available yet)");
  cmd->allow_extras();
  cmd->callback([&exit_code] {
    std::fprintf(stderr, "error: 'striker make-model' is not available yet\n");
    exit_code = 2;
  });
}

}  // namespace striker::cli
