// striker perplexity: teacher-forced scoring of a token sequence (llama-perplexity style).
// logprobs[i] = log P(ids[i+1] | ids[0..i]) from log-softmax of float(logits) in double.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backends/cpu/cpu_backend.h"
#include "cli/commands.h"
#include "core/error.h"
#include "loaders/model_loader.h"
#include "tokenizer/tokenizer.h"

// The CUDA backend is linked only into CUDA builds, and only once its branch has landed.
#if defined(STRIKER_HAVE_CUDA) && __has_include("backends/cuda/cuda_backend.h")
#include "backends/cuda/cuda_backend.h"
#define STRIKER_PERPLEXITY_CUDA 1
#endif

namespace striker::cli {

namespace {

struct PerplexityArgs {
  std::string model;
  std::string ids;
  std::string text_file;
  std::string device = "cpu";
  bool json = false;
  int64_t chunk_size = 512;
  int threads = 0;
  int top = 0;
  std::string hf_config_path;
  std::string load_format = "auto";
  std::string quantization;
  uint64_t seed = 0;
  std::string tokenizer;
};

std::vector<int32_t> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    const auto first = item.find_first_not_of(" \t\n");
    const auto last = item.find_last_not_of(" \t\n");
    if (first == std::string::npos) throw Error("--ids: empty entry in '" + text + "'");
    const std::string token = item.substr(first, last - first + 1);
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(token, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != token.size() || v < 0 || v > INT32_MAX) throw Error("--ids: '" + token + "' is not a token id");
    ids.push_back(int32_t(v));
  }
  return ids;
}

std::vector<int32_t> read_text_ids(const std::string& model, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("--text-file: cannot open '" + path + "'");
  std::stringstream buf;
  buf << in.rdbuf();
  std::filesystem::path dir = resolve_model_path(model);
  if (!std::filesystem::is_directory(dir)) dir = dir.parent_path();
  return Tokenizer::from_dir(dir)->encode(buf.str(), false);
}

struct Scores {
  std::vector<double> logprobs;
  std::vector<int32_t> argmax;
  // With --top N: the N most likely tokens after each position, (id, logprob), best first,
  // so two backends can be compared under FLINT.md §4's near-tie rule without full logits.
  std::vector<std::vector<std::pair<int32_t, double>>> top;
};

// Feeds the ids through the backend in chunks (each attends to the cached prefix) and scores
// every next token.
Scores score(Backend& backend, const FlintConfig& config, const std::vector<int32_t>& ids, int64_t chunk_size,
             int top_n) {
  const int32_t block = 16;
  const int64_t n = int64_t(ids.size());
  const int64_t blocks = (n + block - 1) / block;
  backend.allocate_kv_cache({block, blocks, blocks});
  std::vector<int32_t> table(static_cast<size_t>(blocks));
  for (int64_t i = 0; i < blocks; ++i) table[size_t(i)] = int32_t(i);

  Scores out;
  std::vector<float> logits;
  const int64_t V = config.vocab_size;
  for (int64_t start = 0; start < n - 1; start += chunk_size) {
    const int64_t end = std::min(n - 1, start + chunk_size);  // the last id is only a target
    ForwardBatch batch;
    SequenceChunk chunk;
    chunk.tokens.assign(ids.begin() + start, ids.begin() + end);
    chunk.start_pos = start;
    chunk.full_block_table = table;
    chunk.sliding_block_table = table;
    chunk.all_logits = true;
    batch.seqs.push_back(std::move(chunk));
    backend.forward(batch, logits);
    for (int64_t r = 0; r < end - start; ++r) {
      const float* row = logits.data() + r * V;
      const int64_t best = std::max_element(row, row + V) - row;  // first maximum: lowest id
      double sum = 0.0;
      for (int64_t v = 0; v < V; ++v) sum += std::exp(double(row[v]) - double(row[best]));
      const double logz = double(row[best]) + std::log(sum);
      out.logprobs.push_back(double(row[ids[size_t(start + r + 1)]]) - logz);
      out.argmax.push_back(int32_t(best));
      if (top_n > 0) {
        std::vector<int32_t> order(static_cast<size_t>(V));
        for (int64_t v = 0; v < V; ++v) order[size_t(v)] = int32_t(v);
        const int64_t k = std::min<int64_t>(top_n, V);
        std::partial_sort(order.begin(), order.begin() + k, order.end(), [row](int32_t a, int32_t b) {
          return row[a] > row[b] || (row[a] == row[b] && a < b);
        });
        std::vector<std::pair<int32_t, double>> top;
        for (int64_t i = 0; i < k; ++i) top.emplace_back(order[size_t(i)], double(row[order[size_t(i)]]) - logz);
        out.top.push_back(std::move(top));
      }
    }
  }
  return out;
}

void run(const PerplexityArgs& args) {
  if (args.ids.empty() == args.text_file.empty()) throw Error("give exactly one of --ids and --text-file");
  if (args.chunk_size < 1) throw Error("--chunk-size must be at least 1");
  if (args.device != "cpu" && args.device != "cuda")
    throw Error("--device must be cpu or cuda, not '" + args.device + "'");
#ifndef STRIKER_PERPLEXITY_CUDA
  if (args.device == "cuda") throw Error("--device cuda: this build has no CUDA backend");
#endif

  const std::vector<int32_t> listed = args.ids.empty() ? std::vector<int32_t>{} : parse_ids(args.ids);
  LoadOptions load;
  load.load_format = args.load_format;
  load.hf_config_path = args.hf_config_path;
  load.quantization = args.quantization;
  load.seed = args.seed;
  parse_quantization(args.quantization);
  // Dummy weights for the GPU are made on the GPU from the config alone (no host copy).
  const bool dummy_on_gpu = args.load_format == "dummy" && args.device == "cuda";
  LoadedModel model;
  if (dummy_on_gpu) {
    model.config = load_model_config(args.model, load);
  } else {
    model = load_model(args.model, load);
  }
  // A GGUF file has no tokenizer beside it: it comes from --tokenizer or the config source.
  const std::string& tokenizer_source = !args.tokenizer.empty()        ? args.tokenizer
                                        : !args.hf_config_path.empty() ? args.hf_config_path
                                                                       : args.model;
  const std::vector<int32_t> ids = args.ids.empty() ? read_text_ids(tokenizer_source, args.text_file) : listed;
  if (ids.size() < 2) throw Error("perplexity needs at least 2 tokens, got " + std::to_string(ids.size()));
  for (int32_t id : ids)
    if (id >= model.config.vocab_size)
      throw Error("token id " + std::to_string(id) + " is outside the vocabulary (vocab_size " +
                  std::to_string(model.config.vocab_size) + ")");

  std::unique_ptr<Backend> backend;
  if (args.device == "cpu") {
    backend = make_cpu_backend(model, args.threads);
  } else {
#ifdef STRIKER_PERPLEXITY_CUDA
    cuda::CudaBackendOptions options;
    options.max_tokens = int(std::max<int64_t>(options.max_tokens, args.chunk_size));
    options.max_logit_rows = int(std::max<int64_t>(options.max_logit_rows, args.chunk_size));
    if (dummy_on_gpu) {
      const bool nvfp4 = dummy_weight_format(load) == LinearFormat::nvfp4;
      backend = cuda::make_cuda_backend_dummy(model.config, args.seed,
                                              nvfp4 ? cuda::WeightFormat::nvfp4 : cuda::WeightFormat::bf16, options);
    } else {
      backend = cuda::make_cuda_backend(model, options);
    }
#endif
  }
  const Scores s = score(*backend, model.config, ids, args.chunk_size, args.top);
  double total = 0.0;
  for (double lp : s.logprobs) total += lp;
  const double perplexity = std::exp(-total / double(s.logprobs.size()));

  if (args.json) {
    nlohmann::json j;
    j["ids"] = ids;
    j["logprobs"] = s.logprobs;
    j["argmax"] = s.argmax;
    j["perplexity"] = perplexity;
    if (args.top > 0) j["top_logprobs"] = s.top;  // [[[id, logprob], ...], ...]
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("tokens scored: %zu\nperplexity: %.6f\n", s.logprobs.size(), perplexity);
  }
}

}  // namespace

void register_perplexity(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<PerplexityArgs>();
  auto* cmd = app.add_subcommand("perplexity", "Teacher-forced next-token log-probabilities and perplexity");
  cmd->add_option("model", args->model, "model directory, .gguf file or Hugging Face repo id")->required();
  cmd->add_option("--ids", args->ids, "comma-separated token ids, e.g. 1,2,3");
  cmd->add_option("--text-file", args->text_file, "text to tokenize with the model's tokenizer");
  cmd->add_option("--device", args->device, "cpu or cuda")->capture_default_str();
  cmd->add_flag("--json", args->json, "print one JSON object {ids, logprobs, argmax, perplexity}");
  cmd->add_option("--top", args->top, "with --json: also the N most likely tokens per position (top_logprobs)")
      ->check(CLI::Range(0, 100));
  cmd->add_option("--chunk-size", args->chunk_size, "tokens per prefill chunk")->capture_default_str();
  cmd->add_option("--threads", args->threads, "CPU threads (0: all cores)")->capture_default_str();
  cmd->add_option("--hf-config-path", args->hf_config_path, "config.json source for a GGUF model (directory or repo id)");
  cmd->add_option("--tokenizer", args->tokenizer, "tokenizer directory or repo id for --text-file");
  cmd->add_option("--load-format", args->load_format, "auto, safetensors, gguf or dummy (random weights from config.json)")
      ->capture_default_str();
  cmd->add_option("--quantization", args->quantization, "gguf | nvfp4 | modelopt_fp4: must match the checkpoint; picks the dummy format");
  cmd->add_option("--seed", args->seed, "seed of --load-format dummy weights")->capture_default_str();
  cmd->callback([args, &exit_code] {
    run(*args);
    exit_code = 0;
  });
}

}  // namespace striker::cli
