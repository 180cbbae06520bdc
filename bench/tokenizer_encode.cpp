// Encode throughput of striker's tokenizer on the shared tokenizer corpus, one thread.
// Run through bench/tokenizer_throughput.py, which also times Hugging Face `tokenizers`.
//   bench_tokenizer_encode [--benchmark_filter=...]   (env STRIKER_SHARED_DIR, STRIKER_CORPUS)
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"

namespace {

std::filesystem::path shared_dir() {
  const char* env = std::getenv("STRIKER_SHARED_DIR");
  return env ? env : STRIKER_SHARED_DIR;
}

std::vector<std::string> load_corpus() {
  const char* env = std::getenv("STRIKER_CORPUS");
  const std::filesystem::path path =
      env ? std::filesystem::path(env)
          : std::filesystem::path(__FILE__).parent_path().parent_path() / "tests/python/corpus/tokenizer_corpus.jsonl";
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path.string() + ": cannot open the corpus");
  std::vector<std::string> out;
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) out.push_back(nlohmann::json::parse(line).get<std::string>());
  return out;
}

// cold = a freshly loaded tokenizer's first pass (empty word cache); warm = later passes.
void encode_corpus(benchmark::State& state, const char* name, bool cold) {
  const auto corpus = load_corpus();
  int64_t bytes = 0;
  for (const auto& s : corpus) bytes += static_cast<int64_t>(s.size());
  std::unique_ptr<striker::Tokenizer> tok = striker::Tokenizer::from_dir(shared_dir() / "fixtures" / name);
  if (!cold)
    for (const auto& s : corpus) benchmark::DoNotOptimize(tok->encode(s));
  int64_t tokens = 0;
  for (auto _ : state) {
    if (cold) {
      state.PauseTiming();
      tok = striker::Tokenizer::from_dir(shared_dir() / "fixtures" / name);
      state.ResumeTiming();
    }
    for (const auto& s : corpus) {
      auto ids = tok->encode(s);
      tokens += static_cast<int64_t>(ids.size());
      benchmark::DoNotOptimize(ids.data());
    }
  }
  state.SetBytesProcessed(bytes * state.iterations());
  state.counters["tokens_per_s"] = benchmark::Counter(static_cast<double>(tokens), benchmark::Counter::kIsRate);
}

BENCHMARK_CAPTURE(encode_corpus, flint_warm, "flint-tokenizer", false)->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK_CAPTURE(encode_corpus, qwen3_warm, "tokenizers/qwen3", false)->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK_CAPTURE(encode_corpus, flint_cold, "flint-tokenizer", true)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK_CAPTURE(encode_corpus, qwen3_cold, "tokenizers/qwen3", true)->Unit(benchmark::kMillisecond)->Iterations(3);

}  // namespace

BENCHMARK_MAIN();
