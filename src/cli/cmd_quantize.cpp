// striker quantize BF16_DIR OUT.gguf — NVFP4 quantisation of a BF16 Flint checkpoint.
#include <chrono>

#include "cli/commands.h"
#include "core/log.h"
#include "loaders/model_loader.h"
#include "loaders/quantize.h"

namespace striker::cli {

void register_quantize(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("quantize", "Quantise a BF16 Flint checkpoint to an NVFP4 GGUF file");
  static std::string source, out, name;
  cmd->add_option("model", source, "BF16 checkpoint: directory or HF repo id")->required();
  cmd->add_option("out", out, "output .gguf path")->required();
  cmd->add_option("--name", name, "general.name written into the file");
  cmd->callback([&exit_code] {
    auto t0 = std::chrono::steady_clock::now();
    LoadOptions lo;
    lo.load_format = "safetensors";
    LoadedModel m = load_model(source, lo);
    quantize_to_gguf(m, out, QuantizeOptions{name});
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    logging::get("quantize")->info("wrote {} ({:.1f} s)", out, s);
    exit_code = 0;
  });
}

}  // namespace striker::cli
