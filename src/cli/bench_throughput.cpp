// striker bench throughput: N requests of random prompt ids, each generating exactly
// --output-len tokens (ignore_eos), all submitted at once to the in-process Engine, like
// `vllm bench throughput` with its random dataset. The backend is wrapped in a StepRecorder
// (step_recorder.h) that passes every step on unchanged — warm-up and device sampling as in
// `striker serve` — and times it, so decode steps are measured exactly; the roofline line is an
// estimate (uniform routing, the H200's 4.6 TB/s streaming read).
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backends/cpu/cpu_backend.h"
#include "cli/async_scheduling_flag.h"
#include "cli/bench_stats.h"
#include "cli/bench_throughput.h"
#include "cli/cache_flags.h"
#include "cli/default_device.h"
#include "cli/step_recorder.h"
#include "core/error.h"
#include "engine/engine.h"
#include "engine/host_sampled_steps.h"
#include "loaders/dummy_model.h"
#include "loaders/model_loader.h"
#include "model/weight_bytes.h"
#include "server/startup_config.h"
#include "tokenizer/tokenizer.h"
#ifdef STRIKER_HAVE_CUDA
#include "backends/cuda/backend/cuda_backend.h"
#include "backends/cuda/common/device_info.h"
#endif

namespace striker::cli {
namespace {

struct ThroughputOptions {
  std::string model;  // optional: config.json (+ tokenizer, + weights unless dummy) come from it
  std::string config = "../shared/fixtures/flint-config/config.json";
  std::string tokenizer;  // default: the model's folder, else ../shared/fixtures/flint-tokenizer
  std::string hf_config_path;
  std::string load_format = "dummy";
  std::string quantization;
  std::string device;
  uint64_t seed = 0;
  int num_prompts = 64;
  int input_len = 1024;
  int output_len = 256;
  int32_t max_num_seqs = 256;
  int32_t max_num_batched_tokens = 2048;
  int32_t block_size = 16;  // tokens per KV cache block (vLLM's --block-size)
  double gpu_memory_utilization = 0.9;
  std::string kv_cache_memory;
  int cpu_threads = 0;
  std::optional<bool> async_scheduling;  // serve's --async-scheduling when named (default: async_scheduling_flag.h)
  bool json = false;
};

// What each request saw, written by the engine thread's callbacks.
struct RequestTrace {
  double first_token_s = -1;  // since submission
  double finish_s = -1;
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  bool finished = false;
  std::optional<FinishReason> reason;
};

void check_options(const ThroughputOptions& o) {
  if (o.num_prompts < 1) throw Error("bench throughput: --num-prompts must be at least 1");
  if (o.input_len < 1) throw Error("bench throughput: --input-len must be at least 1");
  if (o.output_len < 1) throw Error("bench throughput: --output-len must be at least 1");
  if (o.max_num_seqs < 1) throw Error("bench throughput: --max-num-seqs must be at least 1");
  if (o.max_num_batched_tokens < 1) throw Error("bench throughput: --max-num-batched-tokens must be at least 1");
  if (!(o.gpu_memory_utilization > 0.0 && o.gpu_memory_utilization <= 1.0))
    throw Error("bench throughput: --gpu-memory-utilization must be in (0, 1]");
  if (o.device != "cpu" && o.device != "cuda")
    throw Error("bench throughput: --device must be cpu or cuda, got '" + o.device + "'");
  if (o.load_format == "dummy" && o.model.empty() && o.config.empty())
    throw Error("bench throughput: give MODEL or --config for the model's shape");
  if (o.load_format != "dummy" && o.model.empty())
    throw Error("bench throughput: --load-format " + o.load_format + " needs a MODEL to load");
  parse_quantization(o.quantization);
  check_block_size("bench throughput: ", o.block_size, o.device);
#ifdef STRIKER_HAVE_CUDA
  if (o.device == "cuda" && cuda::device_count() == 0)
    throw Error("bench throughput --device cuda: no CUDA device is visible (" + cuda::device_summary() + ")");
#else
  if (o.device == "cuda") throw Error("bench throughput --device cuda: this build has no CUDA backend; use --device cpu");
#endif
}

std::filesystem::path folder_of(const std::string& path, hub::Need need) {
  const std::filesystem::path p = resolve_model_path(path, {"", "", need});
  return std::filesystem::is_directory(p) ? p : p.parent_path();
}

// Backend plus whatever must outlive it (the host weights the CPU backend reads in place).
struct BuiltBackend {
  std::unique_ptr<Backend> backend;
  std::shared_ptr<LoadedModel> host_model;
  std::string weights;  // for the report: "random NVFP4 (dummy, seed 0), 1.23 GB on cuda"
  int64_t kv_budget = 0;
};

int64_t cpu_kv_budget(const ThroughputOptions& o, const FlintConfig& c, int64_t max_model_len) {
  if (!o.kv_cache_memory.empty()) return server::parse_memory_size(o.kv_cache_memory, "--kv-cache-memory");
  const int64_t seqs = std::min<int64_t>(o.max_num_seqs, o.num_prompts);
  const int64_t wanted = c.full_kv_bytes_per_token() * max_model_len * seqs * 3 / 2;
  return std::clamp<int64_t>(wanted, int64_t(64) << 20, int64_t(8) << 30);
}

BuiltBackend build_backend(const ThroughputOptions& o, const FlintConfig& c, const LoadOptions& lo, int64_t max_model_len,
                           const EngineConfig& ec) {
  BuiltBackend b;
  const bool dummy = o.load_format == "dummy";
  const LinearFormat format = dummy_weight_format(lo);
  char line[256];
  if (o.device == "cuda") {
#ifdef STRIKER_HAVE_CUDA
    const cuda::CudaBackendOptions co =
        cuda::CudaBackendOptions::for_engine(o.max_num_batched_tokens, o.max_num_seqs, max_model_len, ec.block_size);
    if (dummy) {
      b.backend = cuda::make_cuda_backend_dummy(c, o.seed, format, co);
    } else {
      b.host_model = std::make_shared<LoadedModel>(load_model(o.model, lo));
      b.backend = cuda::make_cuda_backend(*b.host_model, co);
    }
    const auto* cb = dynamic_cast<const cuda::CudaBackend*>(b.backend.get());
    std::snprintf(line, sizeof line, "%s, %.2f GB on %s", dummy ? "random (dummy)" : "loaded",
                  cb ? double(cb->model().bytes) / 1e9 : 0.0, cuda::device_summary().c_str());
    b.weights = line;
    if (!o.kv_cache_memory.empty()) {
      b.kv_budget = server::parse_memory_size(o.kv_cache_memory, "--kv-cache-memory");
    } else {
      size_t free_b = 0, total_b = 0;
      if (!cuda::device_memory(free_b, total_b)) throw Error("bench throughput --device cuda: no CUDA device is visible");
      const int64_t used = int64_t(total_b - free_b);
      b.kv_budget = int64_t(o.gpu_memory_utilization * double(total_b)) - used - (int64_t(1) << 30);
      if (b.kv_budget <= 0) throw Error("bench throughput: --gpu-memory-utilization leaves no room for the KV cache");
    }
#endif
  } else {
    if (dummy && o.model.empty()) {
      b.host_model = std::make_shared<LoadedModel>(make_dummy_model(c, o.seed, format));
    } else {
      b.host_model = std::make_shared<LoadedModel>(load_model(o.model, lo));
    }
    b.backend = make_cpu_backend(*b.host_model, o.cpu_threads);
    std::snprintf(line, sizeof line, "%s, %.2f GB in host memory", dummy ? "random (dummy)" : "loaded",
                  double(dummy ? dummy_host_bytes(c, format) : 0) / 1e9);
    b.weights = dummy ? line : "loaded from " + o.model + " (host memory)";
    b.kv_budget = cpu_kv_budget(o, c, max_model_len);
    // As serve does: the CPU backend's steps run on a worker thread that draws the tokens.
    if (ec.async_scheduling) b.backend = std::make_unique<HostSampledSteps>(std::move(b.backend), c.vocab_size);
  }
  return b;
}

int run_throughput(ThroughputOptions o) {
  if (o.device.empty()) o.device = default_device();
  check_options(o);
  LoadOptions lo;
  lo.load_format = o.load_format;
  lo.hf_config_path = o.hf_config_path;
  lo.quantization = o.quantization;
  lo.seed = o.seed;
  std::filesystem::path cfg_path = o.config;
  if (o.model.empty() && std::filesystem::is_directory(cfg_path)) cfg_path /= "config.json";
  const FlintConfig c = o.model.empty() ? load_flint_config(cfg_path) : load_model_config(o.model, lo);
  const int64_t max_model_len = int64_t(o.input_len) + o.output_len;
  if (max_model_len > c.max_position_embeddings)
    throw Error("bench throughput: --input-len + --output-len = " + std::to_string(max_model_len) +
                " exceeds max_position_embeddings " + std::to_string(c.max_position_embeddings));

  const std::string tok_dir = !o.tokenizer.empty()       ? folder_of(o.tokenizer, hub::Need::tokenizer).string()
                              : !o.hf_config_path.empty() ? folder_of(o.hf_config_path, hub::Need::config).string()
                              : !o.model.empty()          ? folder_of(o.model, hub::Need::model_no_weights).string()
                                                          : "../shared/fixtures/flint-tokenizer";
  auto tokenizer = Tokenizer::from_dir(tok_dir);

  EngineConfig ec;
  ec.max_model_len = max_model_len;
  ec.max_num_seqs = o.max_num_seqs;
  ec.max_num_batched_tokens = o.max_num_batched_tokens;
  ec.block_size = o.block_size;
  ec.seed = o.seed;
  const AsyncSchedulingChoice async = resolve_async_scheduling(o.async_scheduling, o.device == "cuda", false);
  ec.async_scheduling = async.on;
  const auto t_setup = std::chrono::steady_clock::now();
  BuiltBackend built = build_backend(o, c, lo, max_model_len, ec);
  ec.kv_cache_bytes = built.kv_budget;
  // The roofline counts the linear weights in the format they are held in: a loaded checkpoint
  // says so itself (an NVFP4 GGUF's attention weights are NVFP4).
  LinearFormat format = dummy_weight_format(lo);
  if (o.load_format != "dummy" && built.host_model)
    format = built.host_model->weights.layers.at(0).q_proj.dtype == DType::NVFP4 ? LinearFormat::nvfp4 : LinearFormat::bf16;
  auto recorder_owned = std::make_unique<StepRecorder>(std::move(built.backend), c, o.input_len);
  StepRecorder* recorder = recorder_owned.get();
  auto engine = make_engine(ec, c, std::move(recorder_owned), *tokenizer);
  const double setup_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_setup).count();
  const EngineStats before = engine->stats();

  // Random prompts over the tokenizer's ids (every id decodes), from --seed.
  const int64_t id_range = std::min<int64_t>(tokenizer->vocab_size(), c.vocab_size);
  std::mt19937_64 rng(o.seed * 0x9e3779b97f4a7c15ull + 1);
  std::vector<RequestTrace> traces(size_t(o.num_prompts));
  std::mutex mu;
  std::condition_variable cv;
  int finished = 0;
  auto last_progress = std::chrono::steady_clock::now();
  // The callbacks below reference these locals: stop the engine thread before they go, also
  // when an error leaves this function early (shutdown is idempotent).
  struct ShutdownGuard {
    Engine& engine;
    ~ShutdownGuard() { engine.shutdown(); }
  } guard{*engine};
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < o.num_prompts; ++i) {
    GenerationRequest req;
    req.request_id = "bench-" + std::to_string(i);
    req.prompt.resize(size_t(o.input_len));
    for (auto& id : req.prompt) id = int32_t(rng() % uint64_t(id_range));
    req.params.temperature = 1.0f;
    req.params.top_p = 1.0f;
    req.params.ignore_eos = true;
    req.params.max_tokens = o.output_len;
    req.params.min_tokens = o.output_len;
    req.params.seed = o.seed + uint64_t(i);
    RequestTrace* tr = &traces[size_t(i)];
    engine->add_request(std::move(req), [&, tr](const RequestOutput& out) {
      const double now = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::lock_guard<std::mutex> lock(mu);
      last_progress = std::chrono::steady_clock::now();
      tr->prompt_tokens = out.prompt_tokens;
      tr->completion_tokens = out.completion_tokens;
      if (tr->first_token_s < 0 && out.completion_tokens > 0) tr->first_token_s = now;
      for (const auto& ch : out.choices)
        if (ch.finish) tr->reason = ch.finish;
      if (out.finished && !tr->finished) {
        tr->finished = true;
        tr->finish_s = now;
        ++finished;
        cv.notify_all();
      }
    });
  }
  {
    // A stalled engine must not hang the benchmark: give up after 5 minutes without any output.
    std::unique_lock<std::mutex> lock(mu);
    while (finished < o.num_prompts) {
      cv.wait_for(lock, std::chrono::seconds(5));
      if (finished < o.num_prompts && std::chrono::steady_clock::now() - last_progress > std::chrono::minutes(5)) {
        lock.unlock();
        engine->shutdown();
        throw Error("bench throughput: no progress for 5 minutes with " + std::to_string(finished) + " of " +
                    std::to_string(o.num_prompts) + " requests finished");
      }
    }
  }
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const EngineStats after = engine->stats();
  engine->shutdown();

  int64_t prompt_tokens = 0, output_tokens = 0;
  std::vector<double> ttft;
  for (size_t i = 0; i < traces.size(); ++i) {
    const RequestTrace& t = traces[i];
    if (t.reason != FinishReason::Length || t.completion_tokens != o.output_len)
      throw Error("bench throughput: request " + std::to_string(i) + " ended after " + std::to_string(t.completion_tokens) +
                  " of " + std::to_string(o.output_len) + " tokens (" +
                  (t.reason == FinishReason::Abort ? "aborted" : t.reason == FinishReason::Stop ? "stopped" : "no finish") +
                  ")");
    prompt_tokens += t.prompt_tokens;
    output_tokens += t.completion_tokens;
    ttft.push_back(t.first_token_s * 1e3);
  }

  const std::vector<StepRecord> steps = recorder->steps();
  int64_t decode_steps = 0, other_steps = 0, decode_seqs = 0;
  double decode_s = 0, other_s = 0, decode_bytes = 0, weight_bytes = 0;
  for (const auto& s : steps) {
    if (!s.decode_only) {
      ++other_steps;
      other_s += s.seconds;
      continue;
    }
    ++decode_steps;
    decode_s += s.seconds;
    decode_seqs += s.seqs;
    const double w = batch_decode_weight_bytes(c, format, double(s.seqs));
    weight_bytes += w;
    decode_bytes += w + s.kv_bytes;
  }
  const double mean_step_ms = decode_steps ? decode_s / double(decode_steps) * 1e3 : 0.0;
  const double achieved = decode_s > 0 ? decode_bytes / decode_s : 0.0;

  nlohmann::json j;
  j["device"] = o.device;
  j["weights"] = built.weights;
  j["weight_format"] = linear_format_name(format);
  j["num_prompts"] = o.num_prompts;
  j["input_len"] = o.input_len;
  j["output_len"] = o.output_len;
  j["max_num_seqs"] = o.max_num_seqs;
  j["max_num_batched_tokens"] = o.max_num_batched_tokens;
  j["async_scheduling"] = ec.async_scheduling;
  j["block_size"] = o.block_size;
  j["kv_cache_tokens"] = before.kv_capacity_tokens;
  j["setup_s"] = setup_s;
  j["elapsed_s"] = elapsed;
  j["prompt_tokens"] = prompt_tokens;
  j["output_tokens"] = output_tokens;
  j["requests_per_s"] = double(o.num_prompts) / elapsed;
  j["output_tokens_per_s"] = double(output_tokens) / elapsed;
  j["total_tokens_per_s"] = double(prompt_tokens + output_tokens) / elapsed;
  j["ttft_median_ms"] = median(ttft);
  j["engine_steps"] = int64_t(steps.size());
  j["decode_steps"] = decode_steps;
  j["decode_time_s"] = decode_s;
  j["mean_decode_step_ms"] = mean_step_ms;
  j["mean_decode_batch"] = decode_steps ? double(decode_seqs) / double(decode_steps) : 0.0;
  j["prefill_or_mixed_steps"] = other_steps;
  j["prefill_or_mixed_time_s"] = other_s;
  j["num_preemptions"] = after.num_preemptions - before.num_preemptions;
  j["decode_bytes_estimate"] = decode_bytes;
  j["decode_weight_bytes_estimate"] = weight_bytes;
  j["decode_bandwidth_estimate_tb_s"] = achieved / 1e12;
  j["roofline_fraction_estimate"] = achieved / kReadBandwidth;
  if (o.json) {
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  std::printf("bench throughput: %d requests x (%d prompt + %d output tokens), device %s, %s weights: %s (setup %.1f s)\n",
              o.num_prompts, o.input_len, o.output_len, o.device.c_str(), linear_format_name(format).c_str(),
              built.weights.c_str(), setup_s);
  std::printf("  elapsed %.2f s: %.2f requests/s, %.1f output tokens/s, %.1f total tokens/s\n", elapsed,
              double(o.num_prompts) / elapsed, double(output_tokens) / elapsed,
              double(prompt_tokens + output_tokens) / elapsed);
  std::printf("  async scheduling %s (%s)\n", ec.async_scheduling ? "on" : "off", async.why.c_str());
  std::printf("  time to first token: median %.1f ms\n", median(ttft));
  std::printf("  %lld decode steps: mean %.3f ms/step (backend forward), mean batch %.1f (%.1f s); %lld prefill/mixed steps (%.1f s); "
              "%lld preemptions\n",
              (long long)decode_steps, mean_step_ms, decode_steps ? double(decode_seqs) / double(decode_steps) : 0.0,
              decode_s, (long long)other_steps, other_s, (long long)(after.num_preemptions - before.num_preemptions));
  std::printf("  roofline (ESTIMATE: uniform routing, E(1-(1-K/E)^B) distinct experts per MoE layer, + KV read): "
              "decode steps moved %.1f GB in %.2f s = %.3f TB/s = %.1f%% of the 4.6 TB/s read roofline\n",
              decode_bytes / 1e9, decode_s, achieved / 1e12, 100.0 * achieved / kReadBandwidth);
  return 0;
}

}  // namespace

void register_bench_throughput(CLI::App& bench, int& exit_code) {
  auto o = std::make_shared<ThroughputOptions>();
  auto* cmd = bench.add_subcommand("throughput",
                                   "N concurrent requests of random prompts through the engine: requests/s, tokens/s");
  cmd->add_option("model", o->model, "model directory / .gguf / repo id (default: only --config, dummy weights)");
  cmd->add_option("--config", o->config, "config.json (or its folder) when no MODEL is given")->capture_default_str();
  cmd->add_option("--tokenizer", o->tokenizer, "tokenizer folder (default: MODEL's, else ../shared/fixtures/flint-tokenizer)");
  cmd->add_option("--hf-config-path", o->hf_config_path, "config.json source for a GGUF MODEL");
  cmd->add_option("--load-format", o->load_format, "dummy (random weights) | auto | safetensors | gguf")->capture_default_str();
  cmd->add_option("--quantization", o->quantization, "nvfp4 (modelopt_fp4, gguf): NVFP4 dummy weights / checkpoint check");
  cmd->add_option("--device", o->device, "cpu | cuda (default: cuda when a GPU is present)");
  cmd->add_option("--seed", o->seed, "seed of the weights, prompts and sampling")->capture_default_str();
  cmd->add_option("--num-prompts", o->num_prompts, "requests, all submitted at once")->capture_default_str();
  cmd->add_option("--input-len", o->input_len, "prompt tokens per request (random ids)")->capture_default_str();
  cmd->add_option("--output-len", o->output_len, "tokens each request generates (ignore_eos)")->capture_default_str();
  cmd->add_option("--max-num-seqs", o->max_num_seqs, "maximum concurrent sequences")->capture_default_str();
  cmd->add_option("--max-num-batched-tokens", o->max_num_batched_tokens, "token budget per engine step")
      ->capture_default_str();
  cmd->add_option("--block-size", o->block_size, "tokens per KV cache block: 1, 8, 16, 32, 64, 128 (cuda: 16 or more)")
      ->capture_default_str();
  cmd->add_option("--gpu-memory-utilization", o->gpu_memory_utilization, "fraction of GPU memory (cuda)")
      ->capture_default_str();
  cmd->add_option("--kv-cache-memory", o->kv_cache_memory, "KV cache budget, e.g. 512MiB (default: cpu 1.5x what the requests need)");
  cmd->add_option("--cpu-threads", o->cpu_threads, "CPU backend threads (0 = all cores)");
  cmd->add_flag_function(
      "--async-scheduling,!--no-async-scheduling", [o](std::int64_t n) { o->async_scheduling = n > 0; },
      "plan and launch each step while the previous one runs (serve's --async-scheduling; default: on with "
      "--device cuda)");
  cmd->add_flag("--json", o->json, "print one JSON object instead of text");
  cmd->callback([o, &exit_code] { exit_code = run_throughput(*o); });
}

}  // namespace striker::cli
