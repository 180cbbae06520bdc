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
#include "cli/hub_flags.h"
#include "cli/perplexity_scoring.h"
#include "core/error.h"
#include "loaders/model_loader.h"
#include "tokenizer/tokenizer.h"

// The CUDA backend is linked only into CUDA builds, and only once its branch has landed.
#if defined(STRIKER_HAVE_CUDA) && __has_include("backends/cuda/backend/cuda_backend.h")
#include "backends/cuda/backend/cuda_backend.h"
#define STRIKER_PERPLEXITY_CUDA 1
#endif

namespace striker::cli {

namespace {

struct PerplexityArgs {
  std::string model;
  std::string ids;
  std::string ids_file;
  std::string text_file;
  std::string device = "cpu";
  bool json = false;
  int64_t chunk_size = 512;
  int threads = 0;
  int top = 0;
  std::string hf_config_path;
  HubFlags hub;
  std::string load_format = "auto";
  std::string quantization;
  uint64_t seed = 0;
  std::string tokenizer;
  int64_t decode_batch = 0;    // 0: one sequence in prefill chunks
  int64_t decode_prefill = 8;  // with --decode-batch: tokens prefilled per sequence before decoding
  int64_t score_from = 0;      // positions before it are prefilled without logits
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

// --ids-file: the same comma-separated list in a file (a long context does not fit in one
// command-line argument, which Linux caps at 128 KiB).
std::string read_ids_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("--ids-file: cannot open '" + path + "'");
  std::stringstream buf;
  buf << in.rdbuf();
  std::string text = buf.str();
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ' || text.back() == '\r')) text.pop_back();
  if (text.empty()) throw Error("--ids-file: '" + path + "' is empty");
  return text;
}

// `source` is a local folder or file (Hub ids are resolved by the caller).
std::vector<int32_t> read_text_ids(const std::string& source, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("--text-file: cannot open '" + path + "'");
  std::stringstream buf;
  buf << in.rdbuf();
  std::filesystem::path dir = source;
  if (!std::filesystem::is_directory(dir)) dir = dir.parent_path();
  return Tokenizer::from_dir(dir)->encode(buf.str(), false);
}

double perplexity_of(const std::vector<double>& logprobs) {
  double total = 0.0;
  for (double lp : logprobs) total += lp;
  return std::exp(-total / double(logprobs.size()));
}

nlohmann::json scores_json(const std::vector<int32_t>& ids, const Scores& s, int top, int64_t score_from) {
  nlohmann::json j;
  j["ids"] = ids;
  j["score_from"] = score_from;  // logprobs[i] is for position score_from + i
  j["logprobs"] = s.logprobs;
  j["argmax"] = s.argmax;
  if (top > 0) j["top_logprobs"] = s.top;  // [[[id, logprob], ...], ...]
  return j;
}

// Decode mode: one entry per sequence (its ids and scores, as the prefill mode prints them),
// so two backends' runs can be compared row for row.
void print_decode_batch(const PerplexityArgs& args, const std::vector<std::vector<int32_t>>& sequences,
                        const std::vector<Scores>& scores) {
  std::vector<double> all;
  for (const auto& s : scores) all.insert(all.end(), s.logprobs.begin(), s.logprobs.end());
  if (!args.json) {
    std::printf("sequences: %zu\ntokens scored: %zu\nperplexity: %.6f\n", sequences.size(), all.size(),
                perplexity_of(all));
    return;
  }
  nlohmann::json j;
  j["decode_batch"] = args.decode_batch;
  j["decode_prefill"] = args.decode_prefill;
  j["sequences"] = nlohmann::json::array();
  for (size_t i = 0; i < sequences.size(); ++i) {
    nlohmann::json seq = scores_json(sequences[i], scores[i], args.top, args.score_from);
    seq["perplexity"] = perplexity_of(scores[i].logprobs);
    j["sequences"].push_back(std::move(seq));
  }
  j["perplexity"] = perplexity_of(all);
  std::printf("%s\n", j.dump().c_str());
}

void run(const PerplexityArgs& args) {
  if (int(!args.ids.empty()) + int(!args.ids_file.empty()) + int(!args.text_file.empty()) != 1)
    throw Error("give exactly one of --ids, --ids-file and --text-file");
  if (args.score_from < 0) throw Error("--score-from must not be negative");
  if (args.chunk_size < 1) throw Error("--chunk-size must be at least 1");
  if (args.decode_prefill < 1) throw Error("--decode-prefill must be at least 1");
  if (args.device != "cpu" && args.device != "cuda")
    throw Error("--device must be cpu or cuda, not '" + args.device + "'");
#ifndef STRIKER_PERPLEXITY_CUDA
  if (args.device == "cuda") throw Error("--device cuda: this build has no CUDA backend");
#endif

  const std::vector<int32_t> listed = !args.ids.empty()        ? parse_ids(args.ids)
                                      : !args.ids_file.empty() ? parse_ids(read_ids_file(args.ids_file))
                                                               : std::vector<int32_t>{};
  // Hub repo ids become local paths once, here (downloaded unless HF_HUB_OFFLINE is set).
  const bool dummy = args.load_format == "dummy";
  const std::string model_path =
      resolve_model_path(args.model, args.hub.model(dummy ? hub::Need::model_no_weights : hub::Need::model));
  const std::string hf_config_path =
      args.hf_config_path.empty() ? "" : resolve_model_path(args.hf_config_path, args.hub.model(hub::Need::config));
  LoadOptions load;
  load.load_format = args.load_format;
  load.hf_config_path = hf_config_path;
  load.quantization = args.quantization;
  load.seed = args.seed;
  parse_quantization(args.quantization);
  // Dummy weights for the GPU are made on the GPU from the config alone (no host copy).
  const bool dummy_on_gpu = dummy && args.device == "cuda";
  LoadedModel model;
  if (dummy_on_gpu) {
    model.config = load_model_config(model_path, load);
  } else {
    model = load_model(model_path, load);
  }
  // A GGUF file has no tokenizer beside it: it comes from --tokenizer or the config source.
  const std::string tokenizer_source = !args.tokenizer.empty()   ? resolve_model_path(args.tokenizer, args.hub.tokenizer())
                                       : !hf_config_path.empty() ? hf_config_path
                                                                 : model_path;
  const std::vector<int32_t> ids = args.text_file.empty() ? listed : read_text_ids(tokenizer_source, args.text_file);
  if (ids.size() < 2) throw Error("perplexity needs at least 2 tokens, got " + std::to_string(ids.size()));
  if (args.decode_batch == 0 && args.score_from >= int64_t(ids.size()) - 1)
    throw Error("--score-from " + std::to_string(args.score_from) + " leaves no position to score in " +
                std::to_string(ids.size()) + " ids");
  for (int32_t id : ids)
    if (id >= model.config.vocab_size)
      throw Error("token id " + std::to_string(id) + " is outside the vocabulary (vocab_size " +
                  std::to_string(model.config.vocab_size) + ")");

  // Decode mode: the sequences are checked before a backend sizes its buffers for them.
  std::vector<std::vector<int32_t>> sequences;
  if (args.decode_batch > 0) {
    sequences = split_sequences(ids, args.decode_batch);
    for (const auto& seq : sequences)
      if (int64_t(seq.size()) < args.decode_prefill + 1)
        throw Error("--decode-batch " + std::to_string(args.decode_batch) + " splits " + std::to_string(ids.size()) +
                    " ids into sequences of " + std::to_string(seq.size()) + ", fewer than --decode-prefill + 1 (" +
                    std::to_string(args.decode_prefill + 1) + ")");
      else if (int64_t(seq.size()) - 1 <= args.score_from)
        throw Error("--score-from " + std::to_string(args.score_from) + " leaves no position to score in a sequence of " +
                    std::to_string(seq.size()) + " ids");
  }

  std::unique_ptr<Backend> backend;
  if (args.device == "cpu") {
    backend = make_cpu_backend(model, args.threads);
  } else {
#ifdef STRIKER_PERPLEXITY_CUDA
    cuda::CudaBackendOptions options;
    // The decode mode's first step prefills every sequence at once (logits for each token unless
    // --score-from skips them); the prefill mode's steps are chunks.
    const bool decode = args.decode_batch > 0;
    const int64_t step_tokens = decode ? args.decode_batch * args.decode_prefill
                                       : std::min<int64_t>(args.chunk_size, int64_t(ids.size()) - 1);
    const int64_t logit_rows = decode ? decode_logit_rows(args.decode_batch, args.decode_prefill, args.score_from)
                                      : prefill_logit_rows(int64_t(ids.size()), args.chunk_size, args.score_from);
    if (step_tokens > INT32_MAX || logit_rows > INT32_MAX) throw Error("perplexity: a step of that size does not fit");
    options.max_tokens = int(std::max<int64_t>(options.max_tokens, step_tokens));
    options.max_logit_rows = int(std::max<int64_t>(options.max_logit_rows, logit_rows));
    // The rows reach the host in blocks (score_prefill / score_decode_batch): pinned memory for one.
    options.max_host_logit_rows = int(kScoreBlockRows);
    if (dummy_on_gpu) {
      backend = cuda::make_cuda_backend_dummy(model.config, args.seed, dummy_weight_format(load), options);
    } else {
      backend = cuda::make_cuda_backend(model, options);
    }
#endif
  }
  if (args.decode_batch > 0) {
    const std::vector<Scores> scores =
        score_decode_batch(*backend, model.config, sequences, args.decode_prefill, args.top, args.score_from);
    print_decode_batch(args, sequences, scores);
    return;
  }
  const Scores s = score_prefill(*backend, model.config, ids, args.chunk_size, args.top, args.score_from);
  if (args.json) {
    nlohmann::json j = scores_json(ids, s, args.top, args.score_from);
    j["perplexity"] = perplexity_of(s.logprobs);
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("tokens scored: %zu\nperplexity: %.6f\n", s.logprobs.size(), perplexity_of(s.logprobs));
  }
}

}  // namespace

void register_perplexity(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<PerplexityArgs>();
  auto* cmd = app.add_subcommand("perplexity", "Teacher-forced next-token log-probabilities and perplexity");
  cmd->add_option("model", args->model, "model directory, .gguf file or Hugging Face repo id")->required();
  cmd->add_option("--ids", args->ids, "comma-separated token ids, e.g. 1,2,3");
  cmd->add_option("--ids-file", args->ids_file, "file holding comma-separated token ids (for long sequences)");
  cmd->add_option("--text-file", args->text_file, "text to tokenize with the model's tokenizer");
  cmd->add_option("--device", args->device, "cpu or cuda")->capture_default_str();
  cmd->add_flag("--json", args->json, "print one JSON object {ids, logprobs, argmax, perplexity}");
  cmd->add_option("--top", args->top, "with --json: also the N most likely tokens per position (top_logprobs)")
      ->check(CLI::Range(0, 100));
  cmd->add_option("--chunk-size", args->chunk_size,
                  "tokens per prefill chunk (host memory does not grow with it: logits are scored " +
                      std::to_string(kScoreBlockRows) + " rows at a time)")
      ->capture_default_str();
  cmd->add_option("--decode-batch", args->decode_batch,
                  "split the ids into N sequences and decode them together, one token of each per step")
      ->check(CLI::Range(int64_t(1), int64_t(4096)));
  cmd->add_option("--decode-prefill", args->decode_prefill, "with --decode-batch: tokens prefilled per sequence")
      ->capture_default_str();
  cmd->add_option("--score-from", args->score_from,
                  "score positions from this one on; earlier tokens are prefilled without logits")
      ->capture_default_str();
  cmd->add_option("--threads", args->threads, "CPU threads (0: all cores)")->capture_default_str();
  cmd->add_option("--hf-config-path", args->hf_config_path, "config.json source for a GGUF model (directory or repo id)");
  cmd->add_option("--tokenizer", args->tokenizer, "tokenizer directory or repo id for --text-file");
  add_hub_flags(cmd, args->hub, true);
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
