// striker make-model: writes a random-weight BF16 Flint checkpoint (HF layout) for tests.
#include <chrono>
#include <cstdio>

#include "cli/commands.h"
#include "loaders/make_model.h"

namespace striker::cli {

void register_make_model(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("make-model", "Write a random-weight BF16 Flint checkpoint (HF safetensors layout)");
  struct Args {
    std::string config, tokenizer, out;
    uint64_t seed = 0;
    int64_t shard_mb = 64;
    float q_norm_scale = 1.0f;
  };
  auto args = std::make_shared<Args>();
  cmd->add_option("--config", args->config, "config.json to build the model from")->required()->check(CLI::ExistingFile);
  cmd->add_option("--tokenizer", args->tokenizer, "directory with tokenizer.json, tokenizer_config.json, generation_config.json")
      ->required()
      ->check(CLI::ExistingDirectory);
  cmd->add_option("--out", args->out, "output directory (created; old checkpoint files in it are replaced)")->required();
  cmd->add_option("--seed", args->seed, "random seed (same seed, same weights)")->required();
  cmd->add_option("--shard-size", args->shard_mb, "largest shard in MiB")->check(CLI::Range(int64_t(1), int64_t(1) << 20));
  cmd->add_option("--q-norm-scale", args->q_norm_scale,
                  "multiply q_norm weights (mean 1) by this: sharper attention, e.g. 3 for long-context checks")
      ->check(CLI::Range(0.015625f, 64.0f))
      ->capture_default_str();
  cmd->callback([args, &exit_code] {
    auto start = std::chrono::steady_clock::now();
    MakeModelOptions o;
    o.config = args->config;
    o.tokenizer_dir = args->tokenizer;
    o.out_dir = args->out;
    o.seed = args->seed;
    o.max_shard_bytes = args->shard_mb << 20;
    o.q_norm_scale = args->q_norm_scale;
    make_random_checkpoint(o);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "wrote %s in %.1f s\n", args->out.c_str(), s);
    exit_code = 0;
  });
}

}  // namespace striker::cli
