// striker bench throughput: offline throughput of the in-process engine (like `vllm bench throughput`).
#pragma once
#include <CLI/CLI.hpp>

namespace striker::cli {

// Adds `throughput` under the `bench` subcommand.
void register_bench_throughput(CLI::App& bench, int& exit_code);

}  // namespace striker::cli
