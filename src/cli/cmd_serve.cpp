// striker serve MODEL: the OpenAI-compatible server, with `vllm serve`'s flags (FLINT.md §6).
// Order of startup: bind the port first (so /health answers 503 while loading), load the
// weights with a progress bar, build tokenizer / chat template / backend / engine, print a
// summary, then serve until SIGINT or SIGTERM, which drain running requests (--shutdown-timeout).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <thread>
#include <memory>

#include "backends/cpu/cpu_backend.h"
#include "chat/chat_template.h"
#include "cli/cache_flags.h"
#include "cli/commands.h"
#include "cli/default_device.h"
#include "cli/hub_flags.h"
#include "cli/serve_signals.h"
#include "cli/async_scheduling_flag.h"
#include "cli/reasoning_flag.h"
#include "cli/speculative_flag.h"
#include "cli/vllm_serve_flags.h"
#include "core/error.h"
#include "core/log.h"
#include "engine/engine.h"
#include "engine/host_sampled_steps.h"
#include "kv_events/engine_events.h"
#include "kv_events/event_pump.h"
#include "kv_events/kv_event_publisher.h"
#include "loaders/dummy_model.h"
#include "loaders/model_loader.h"
#include "server/choice_parser.h"
#include "server/openai_server.h"
#include "server/stats_logger.h"
#include "server/startup_config.h"
#include "tokenizer/tokenizer.h"
#ifdef STRIKER_HAVE_CUDA
#include "backends/cuda/backend/cuda_backend.h"
#include "backends/cuda/common/device_info.h"
#endif

namespace striker::cli {
namespace {

struct ServeArgs {
  std::string model;
  std::string host = "0.0.0.0";
  int port = 8000;
  std::vector<std::string> served_model_names;
  int64_t max_model_len = 0;
  int32_t max_num_seqs = 256;
  int32_t max_num_batched_tokens = 2048;
  int32_t max_logprobs = 20;  // vLLM's --max-logprobs and its default; -1: the vocabulary size
  double gpu_memory_utilization = 0.9;
  std::string api_key;
  std::string load_format = "auto";
  std::string quantization;
  uint64_t seed = 0;
  std::string kv_cache_dtype = "auto";
  int32_t block_size = 16;  // tokens per KV cache block (vLLM's --block-size and its default)
  bool enforce_eager = false;  // vLLM: no CUDA graphs (graphs are the default on --device cuda, as in vLLM)
  bool cuda_graphs = false;
  bool enable_prefix_caching = true;  // vLLM V1's default
  std::string prefix_caching_hash_algo = "sha256";
  std::string generation_config = "auto";
  std::string default_chat_template_kwargs;
  std::string tokenizer;
  std::string hf_config_path;
  bool enable_auto_tool_choice = false;
  std::string tool_call_parser;
  std::string reasoning_parser;
  std::string reasoning_config;  // vLLM's --reasoning-config JSON (the thinking budget's delimiters)
  bool exclude_tools_when_tool_choice_none = false;
  std::string device;
  std::string kv_cache_memory;
  int cpu_threads = 0;
  HubFlags hub;
  bool disable_log_requests = false;
  bool enable_log_requests = false;  // vLLM's newer spelling of the default
  bool disable_log_stats = false;
  double log_stats_interval = 10.0;  // vLLM's VLLM_LOG_STATS_INTERVAL default
  int shutdown_timeout = 30;  // seconds a SIGTERM drain waits for running requests
  std::string kv_events_config;  // vLLM's --kv-events-config JSON
  VllmServeFlags vllm;            // the rest of vllm serve's flags (vllm_serve_flags.h)
};

std::shared_ptr<spdlog::logger> serve_log() { return logging::get("serve"); }

kv_events::KvEventsConfig kv_events_config(const ServeArgs& a) {
  return a.kv_events_config.empty() ? kv_events::KvEventsConfig{} : kv_events::parse_kv_events_config(a.kv_events_config);
}

// Flags whose feature this build lacks fail at startup instead of being ignored.
void check_flags(const ServeArgs& a, const CLI::App& cmd) {
  if (a.device != "cpu" && a.device != "cuda") throw Error("--device must be cpu or cuda, got '" + a.device + "'");
#ifdef STRIKER_HAVE_CUDA
  if (a.device == "cuda" && cuda::device_count() == 0)
    throw Error("--device cuda: no CUDA device is visible (" + cuda::device_summary() + "); use --device cpu");
#else
  if (a.device == "cuda") throw Error("--device cuda: no CUDA backend in this build (built without nvcc); use --device cpu");
#endif
  if (a.device == "cpu" && cmd.count("--gpu-memory-utilization") > 0) {
    throw Error("--gpu-memory-utilization applies to --device cuda; on the CPU size the KV cache with --kv-cache-memory");
  }
  if (!(a.gpu_memory_utilization > 0.0 && a.gpu_memory_utilization <= 1.0))
    throw Error("--gpu-memory-utilization must be in (0, 1], got " + std::to_string(a.gpu_memory_utilization));
  if (a.kv_cache_dtype != "auto" && a.kv_cache_dtype != "bfloat16") {
    throw Error("--kv-cache-dtype " + a.kv_cache_dtype + " is not supported yet (only auto = bfloat16)");
  }
  check_block_size("", a.block_size, a.device);
  if (a.enforce_eager && a.cuda_graphs) throw Error("--enforce-eager and --cuda-graphs contradict each other");
  if (a.cuda_graphs && a.device == "cpu") throw Error("--cuda-graphs applies to --device cuda");
  parse_hash_algo(a.prefix_caching_hash_algo);
  if (a.port < 0 || a.port > 65535) throw Error("--port must be in 0..65535");
  if (a.enable_auto_tool_choice && a.tool_call_parser.empty()) {
    throw Error("--enable-auto-tool-choice requires --tool-call-parser (glm47)");
  }
  if (!a.tool_call_parser.empty() && !server::tool_parser_available(a.tool_call_parser)) {
    throw Error("--tool-call-parser '" + a.tool_call_parser + "' is not available (this build has: glm47, glm45)");
  }
  if (!a.reasoning_parser.empty() && !server::reasoning_parser_available(a.reasoning_parser)) {
    throw Error("--reasoning-parser '" + a.reasoning_parser + "' is not available (this build has: glm47, glm45)");
  }
  if (!a.reasoning_config.empty()) parse_reasoning_config(a.reasoning_config);  // a bad JSON fails before loading
  parse_quantization(a.quantization);
  if (a.load_format == "dummy" && a.quantization == "gguf")
    serve_log()->info("--quantization gguf with --load-format dummy: random NVFP4 weights, as Flint's GGUF holds");
  if (a.max_num_seqs < 1) throw Error("--max-num-seqs must be at least 1");
  if (a.max_logprobs < -1) throw Error("--max-logprobs must be -1 (no limit) or at least 0");
  if (a.max_num_batched_tokens < 1) throw Error("--max-num-batched-tokens must be at least 1");
  if (a.max_model_len < 0) throw Error("--max-model-len must be positive");
  if (a.disable_log_requests && a.enable_log_requests)
    throw Error("--disable-log-requests and --enable-log-requests contradict each other");
  if (!(a.log_stats_interval > 0.0)) throw Error("--log-stats-interval (or VLLM_LOG_STATS_INTERVAL) must be a positive number of seconds");
  if (a.shutdown_timeout < 0) throw Error("--shutdown-timeout must be 0 or more seconds");
  check_vllm_serve_flags(a.vllm, cmd);
  if (kv_events_config(a).publishes() && !a.enable_prefix_caching)
    throw Error("--kv-events-config: KV events report what the prefix cache holds; they need prefix caching "
                "(drop --no-enable-prefix-caching)");
}

// A one-line progress bar on stderr, redrawn in place on a terminal and every 10% otherwise.
class ProgressBar {
 public:
  void update(size_t done, size_t total) {
    if (total == 0) return;
    const int pct = int(100.0 * double(done) / double(total));
    const bool tty = isatty(STDERR_FILENO) != 0;
    if (pct == last_ || (!tty && pct / 10 == last_ / 10 && pct != 100)) return;
    last_ = pct;
    const int width = 30, filled = pct * width / 100;
    std::fprintf(stderr, "%sLoading weights [%s%s] %3d%% (%.1f / %.1f MiB)%s", tty ? "\r" : "",
                 std::string(size_t(filled), '#').c_str(), std::string(size_t(width - filled), '.').c_str(), pct,
                 double(done) / 1048576.0, double(total) / 1048576.0, tty && pct < 100 ? "" : "\n");
    std::fflush(stderr);
  }

 private:
  int last_ = -1;
};

// KV budget on the CPU: --kv-cache-memory, else room for min(max_num_seqs, 16) full-length
// sequences in the full-attention layers plus half again for the sliding pool, within
// [64 MiB, 4 GiB] - the whole budget is allocated up front, and a CPU host is shared.
int64_t cpu_kv_budget(const ServeArgs& a, const FlintConfig& cfg, int64_t max_model_len) {
  if (!a.kv_cache_memory.empty()) return server::parse_memory_size(a.kv_cache_memory, "--kv-cache-memory");
  const int64_t per_seq = cfg.full_kv_bytes_per_token() * max_model_len;
  const int64_t wanted = per_seq * std::min<int64_t>(a.max_num_seqs, 16) * 3 / 2;
  return std::clamp<int64_t>(wanted, int64_t(64) << 20, int64_t(4) << 30);
}

#ifdef STRIKER_HAVE_CUDA
// KV budget on the GPU (vLLM's meaning of --gpu-memory-utilization): that fraction of the
// device, less what the weights and the backend's buffers already hold, less a reserve for
// cuBLAS workspaces and graphs. Measured after the backend is built.
int64_t gpu_kv_budget(const ServeArgs& a) {
  if (!a.kv_cache_memory.empty()) return server::parse_memory_size(a.kv_cache_memory, "--kv-cache-memory");
  size_t free_b = 0, total_b = 0;
  if (!cuda::device_memory(free_b, total_b)) throw Error("--device cuda: no CUDA device is visible");
  const int64_t reserve = int64_t(1) << 30;
  const int64_t used = int64_t(total_b - free_b);
  const int64_t budget = int64_t(a.gpu_memory_utilization * double(total_b)) - used - reserve;
  if (budget <= 0)
    throw Error("--gpu-memory-utilization " + std::to_string(a.gpu_memory_utilization) + " leaves no room for the KV cache (" +
                std::to_string(used >> 20) + " MiB already in use of " + std::to_string(total_b >> 20) + " MiB)");
  return budget;
}
#endif

void run_serve(const ServeArgs& a, const CLI::App& cmd) {
  // Before any thread starts, so all of them inherit the blocked SIGINT/SIGTERM.
  ServeSignals::block();

  check_flags(a, cmd);
  const auto t0 = std::chrono::steady_clock::now();
  // --chat-template is read and parsed now: a bad file or a syntax error fails before the weights load.
  const std::string template_source = chat_template_source(a.vllm);
  if (!template_source.empty()) ChatTemplate::from_source(template_source, "--chat-template");

  server::ServerOptions opts;
  opts.served_model_names = a.served_model_names.empty() ? std::vector<std::string>{a.model} : a.served_model_names;
  opts.api_key = a.api_key;
  if (opts.api_key.empty()) {
    if (const char* env = std::getenv("VLLM_API_KEY")) opts.api_key = env;
  }
  opts.enable_auto_tool_choice = a.enable_auto_tool_choice;
  opts.tool_call_parser = a.tool_call_parser;
  opts.reasoning_parser = a.reasoning_parser;
  opts.exclude_tools_when_tool_choice_none = a.exclude_tools_when_tool_choice_none;
  opts.log_requests = !a.disable_log_requests;
  if (!a.default_chat_template_kwargs.empty()) {
    opts.default_chat_template_kwargs = server::parse_template_kwargs_flag(a.default_chat_template_kwargs);
  }
  opts.http_threads = size_t(std::clamp(a.max_num_seqs * 2, 64, 1024));
  opts.cache.block_size = a.block_size;
  opts.cache.cache_dtype = a.kv_cache_dtype;
  opts.cache.gpu_memory_utilization = a.gpu_memory_utilization;
  opts.cache.enable_prefix_caching = a.enable_prefix_caching;
  opts.cache.prefix_caching_hash_algo = a.prefix_caching_hash_algo;
  apply_vllm_serve_flags(a.vllm, opts);

  // Bind before loading, so a port clash fails fast and /health answers 503 while loading.
  server::OpenAIServer server(opts);
  const int port = server.start(a.host, a.port);
  ServeSignals signals(server);  // from now on SIGINT/SIGTERM drain (or, while loading, exit)
  // The KV event sockets are opened before loading, so a taken port fails in seconds, not minutes.
  const auto kv_cfg = kv_events_config(a);
  std::unique_ptr<kv_events::KvEventPublisher> kv_publisher;
  if (kv_cfg.publishes()) {
    kv_publisher = std::make_unique<kv_events::KvEventPublisher>(kv_cfg);
    serve_log()->info("publishing KV events on {}{}", kv_cfg.endpoint,
                      kv_cfg.replay_endpoint ? " (replay on " + *kv_cfg.replay_endpoint + ")" : std::string());
  }
  serve_log()->info("listening on http://{}:{} (loading; /health answers 503 until ready)", a.host, port);

  // Hub repo ids are downloaded now, after binding: a port clash fails before a long download,
  // and /health answers 503 meanwhile. Dummy weights need the config and tokenizer only.
  const bool dummy = a.load_format == "dummy";
  const std::string model_path =
      resolve_model_path(a.model, a.hub.model(dummy ? hub::Need::model_no_weights : hub::Need::model));
  const std::string hf_config_path =
      a.hf_config_path.empty() ? "" : resolve_model_path(a.hf_config_path, a.hub.model(hub::Need::config));
  const std::filesystem::path model_dir =
      std::filesystem::is_directory(model_path) ? std::filesystem::path(model_path)
                                                : std::filesystem::path(model_path).parent_path();
  opts.model_root = model_path;

  LoadOptions lo;
  lo.load_format = a.load_format;
  lo.hf_config_path = hf_config_path;
  lo.quantization = a.quantization;
  lo.seed = a.seed;
  ProgressBar bar;
  lo.on_progress = [&bar](size_t done, size_t total) { bar.update(done, total); };
  // Dummy weights on the GPU are made there from the config alone; everything else goes through
  // load_model (dummy on the CPU makes them in host memory).
  LoadedModel model;
  if (dummy && a.device == "cuda") {
    model.config = load_model_config(model_path, lo);
    model.source = a.model;
  } else {
    serve_log()->info("{} {} (device {})", dummy ? "making random weights for" : "loading", model_path, a.device);
    model = load_model(model_path, lo);
  }
  const FlintConfig& cfg = model.config;
  const int64_t max_model_len = a.max_model_len > 0 ? a.max_model_len : cfg.max_position_embeddings;
  if (max_model_len > cfg.max_position_embeddings) {
    throw Error("--max-model-len " + std::to_string(max_model_len) + " exceeds the model's max_position_embeddings " +
                std::to_string(cfg.max_position_embeddings));
  }

  std::string tok_dir = a.tokenizer.empty() ? model_dir.string() : resolve_model_path(a.tokenizer, a.hub.tokenizer());
  if (!std::filesystem::is_directory(tok_dir)) tok_dir = std::filesystem::path(tok_dir).parent_path().string();
  auto tokenizer = Tokenizer::from_dir(tok_dir);
  auto chat_template = ChatTemplate::from_tokenizer_dir(tok_dir, template_source, "--chat-template");
  // A GGUF file carries no generation_config.json: like its config.json, it comes from the
  // --hf-config-path source (the BF16 repo) when one is given.
  std::filesystem::path gen_dir = model_dir;
  if (!hf_config_path.empty()) {
    gen_dir = hf_config_path;
    if (!std::filesystem::is_directory(gen_dir)) gen_dir = gen_dir.parent_path();
  }
  auto gen = server::load_generation_config(a.generation_config, gen_dir, cfg.eos_token_ids);
  if (!a.vllm.override_generation_config.empty())
    server::apply_generation_config_overrides(gen, a.vllm.override_generation_config);

  opts.max_model_len = max_model_len;
  opts.sampling_defaults = gen.defaults;
  opts.eos_token_ids = gen.eos_token_ids;
  opts.limits.vocab_size = cfg.vocab_size;
  opts.limits.max_model_len = max_model_len;
  opts.limits.max_n = std::min(128, a.max_num_seqs);
  opts.limits.max_logprobs = a.max_logprobs < 0 || a.max_logprobs > cfg.vocab_size ? int32_t(cfg.vocab_size) : a.max_logprobs;

  EngineConfig ec;
  ec.reasoning = resolve_reasoning_delimiters(
      a.reasoning_config.empty() ? ReasoningStrings{} : parse_reasoning_config(a.reasoning_config), a.reasoning_parser,
      *tokenizer);
  opts.limits.reasoning_known = ec.reasoning.known();
  if (ec.reasoning.known())
    serve_log()->info("thinking_token_budget counts reasoning between '{}' and '{}' ({} and {} tokens)",
                      tokenizer->decode(ec.reasoning.start), tokenizer->decode(ec.reasoning.end),
                      ec.reasoning.start.size(), ec.reasoning.end.size());
  ec.max_model_len = max_model_len;
  ec.max_num_seqs = a.max_num_seqs;
  ec.max_num_batched_tokens = a.max_num_batched_tokens;
  ec.block_size = opts.cache.block_size;
  if (!a.vllm.speculative_config.empty()) {
    ec.speculative = parse_speculative_config(a.vllm.speculative_config);
    serve_log()->info("n-gram speculation: up to {} guessed tokens per step from the context's last {}..{} tokens{}",
                      ec.speculative.num_speculative_tokens, ec.speculative.prompt_lookup_min,
                      ec.speculative.prompt_lookup_max,
                      ec.speculative.disable_by_batch_size > 0
                          ? fmt::format(", none while {} or more sequences run", ec.speculative.disable_by_batch_size)
                          : std::string());
  }
  const AsyncSchedulingChoice async = resolve_async_scheduling(
      cmd.count("--async-scheduling") > 0 ? std::optional<bool>(a.vllm.async_scheduling) : std::nullopt,
      a.device == "cuda", ec.speculative.enabled());
  std::unique_ptr<Backend> backend;
  if (a.device == "cuda") {
#ifdef STRIKER_HAVE_CUDA
    cuda::CudaBackendOptions co =
        cuda::CudaBackendOptions::for_engine(a.max_num_batched_tokens, a.max_num_seqs, max_model_len, ec.block_size);
    // Decode steps (up to 256 tokens) replay captured graphs by default, as vLLM does: a stream launch
    // costs 4-5 µs on the host, more than most decode kernels take (docs/performance.md, fourth
    // session); at most max_captured_graphs shapes are kept (LRU). --enforce-eager turns them off.
    co.use_graphs = !a.enforce_eager;
    if (dummy) {
      const LinearFormat format = dummy_weight_format(lo);
      serve_log()->info("making random {} weights (--load-format dummy, seed {}) on {}", linear_format_name(format), a.seed,
                        cuda::device_summary());
      backend = cuda::make_cuda_backend_dummy(cfg, a.seed, format, co);
      const auto* cb = dynamic_cast<const cuda::CudaBackend*>(backend.get());
      if (cb) serve_log()->info("{:.2f} GB of random weights on the GPU", double(cb->model().bytes) / 1e9);
    } else {
      serve_log()->info("uploading weights to {}", cuda::device_summary());
      backend = cuda::make_cuda_backend(model, co);
    }
    ec.kv_cache_bytes = gpu_kv_budget(a);
#endif
  } else {
    if (dummy)
      serve_log()->info("{:.2f} GB of random {} weights in host memory (--load-format dummy, seed {})",
                        double(dummy_host_bytes(cfg, dummy_weight_format(lo))) / 1e9,
                        linear_format_name(dummy_weight_format(lo)), a.seed);
    backend = make_cpu_backend(model, a.cpu_threads);
    ec.kv_cache_bytes = cpu_kv_budget(a, cfg, max_model_len);
    // The CPU backend returns logits rows: with async scheduling its steps run on a worker thread
    // that draws the tokens itself (the engine's sampler), beside the engine's bookkeeping.
    if (async.on) backend = std::make_unique<HostSampledSteps>(std::move(backend), cfg.vocab_size);
  }
  ec.async_scheduling = async.on;
  if (ec.async_scheduling)
    serve_log()->info("async scheduling: each step is planned and launched while the previous one runs ({}){}",
                      async.why,
                      a.device == "cpu" ? " (CPU backend: on a worker thread; its forward pass dominates a step, so "
                                          "expect no gain here)"
                                        : "");
  else
    serve_log()->info("async scheduling off ({})", async.why);
  // Only the primary EOS is the engine's; the others travel as stop_token_ids (vLLM's split).
  if (!gen.eos_token_ids.empty()) ec.eos_token_ids = {gen.eos_token_ids.front()};
  ec.seed = a.seed;
  ec.enable_prefix_caching = a.enable_prefix_caching;
  ec.prefix_caching_hash_algo = parse_hash_algo(a.prefix_caching_hash_algo);
  // vLLM roots the block-hash chain at H(PYTHONHASHSEED) when it is set (reproducible hashes
  // for KV-event consumers), else at random bytes.
  if (const char* seed = std::getenv("PYTHONHASHSEED")) ec.prefix_caching_hash_seed = seed;
  ec.enable_kv_events = kv_publisher != nullptr;
  auto engine = make_engine(ec, cfg, std::move(backend), *tokenizer);
  std::unique_ptr<kv_events::EventPump> kv_pump;
  if (kv_publisher) {
    kv_pump = std::make_unique<kv_events::EventPump>([&engine] { return kv_events::to_wire(engine->take_kv_events()); },
                                                     *kv_publisher);
  }
  const EngineStats stats = engine->stats();
  opts.cache.num_gpu_blocks = stats.kv_capacity_tokens / ec.block_size;
  server.attach(*engine, *tokenizer, chat_template.get(), opts);

  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  auto log = serve_log();
  log->info("model {} (served as {}), dtype bfloat16, {} layers, vocab {}", model_path, opts.served_model_names.front(),
            cfg.num_hidden_layers, cfg.vocab_size);
  log->info("generation defaults from {}", gen.source);
  log->info("KV cache: {:.1f} MiB, {} tokens; maximum concurrency for {} tokens per request: {:.2f}x (max-num-seqs {}); "
            "prefix caching {}",
            double(ec.kv_cache_bytes) / 1048576.0, stats.kv_capacity_tokens, max_model_len,
            double(stats.kv_capacity_tokens) / double(max_model_len), a.max_num_seqs,
            a.enable_prefix_caching ? "on (" + a.prefix_caching_hash_algo + ")" : std::string("off"));
  log->info("ready in {:.1f} s; listening on http://{}:{}{}; chat page at /", secs, a.host, port,
            opts.api_key.empty() ? "" : " (API key required)");
  std::optional<server::StatsLogger> stats_logger;
  if (!a.disable_log_stats) stats_logger.emplace(*engine, std::chrono::duration<double>(a.log_stats_interval));

  if (signals.wait_for_shutdown()) {
    const auto drain_start = std::chrono::steady_clock::now();
    if (!server.wait_idle(std::chrono::seconds(a.shutdown_timeout)) && !signals.forced()) {
      serve_log()->warn("--shutdown-timeout {} s reached; aborting {} running request(s) (503)", a.shutdown_timeout,
                        server.in_flight());
      server.abort_in_flight();
      server.wait_idle(std::chrono::seconds(5));  // their handlers send the 503s
    }
    serve_log()->info("drained in {:.1f} s; exiting",
                      std::chrono::duration<double>(std::chrono::steady_clock::now() - drain_start).count());
    server.request_stop();
    server.close_client_connections();  // idle keep-alive connections would hold stop() for seconds
  }
  server.stop();
  stats_logger.reset();
  engine->shutdown();
}

}  // namespace

void register_serve(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("serve", "Serve a Flint model over an OpenAI-compatible HTTP API (vLLM flags)");
  auto a = std::make_shared<ServeArgs>();
  cmd->add_option("model", a->model, "model directory, .gguf file, or Hugging Face repo id (org/name[:file.gguf])")->required();
  cmd->add_option("--host", a->host, "address to bind");
  cmd->add_option("--port", a->port, "port to bind (0 = any free port)");
  cmd->add_option("--served-model-name", a->served_model_names, "name(s) the API accepts and reports");
  cmd->add_option("--max-model-len", a->max_model_len, "context length (default: the model's)");
  cmd->add_option("--max-num-seqs", a->max_num_seqs, "maximum concurrent sequences");
  cmd->add_option("--max-logprobs", a->max_logprobs,
                  "most logprobs (top_logprobs, logprobs, prompt_logprobs) a request may ask for; -1: the vocabulary size");
  cmd->add_option("--max-num-batched-tokens", a->max_num_batched_tokens, "token budget per engine step");
  cmd->add_option("--gpu-memory-utilization", a->gpu_memory_utilization, "fraction of GPU memory (cuda only)");
  cmd->add_option("--api-key", a->api_key, "require this Bearer key (default: env VLLM_API_KEY)");
  cmd->add_option("--load-format", a->load_format, "auto | safetensors | gguf | dummy");
  cmd->add_option("--seed", a->seed, "base seed for requests without one, and of --load-format dummy weights");
  cmd->add_option("--quantization", a->quantization, "gguf | nvfp4 | modelopt_fp4: must match the checkpoint; picks the dummy format");
  cmd->add_option("--kv-cache-dtype", a->kv_cache_dtype, "auto (bfloat16)");
  cmd->add_option("--block-size", a->block_size,
                  "tokens per KV cache block: 1, 8, 16, 32, 64 or 128 (default 16; --device cuda: 16 or more)");
  cmd->add_flag("--enforce-eager", a->enforce_eager, "no CUDA graphs: launch every kernel eagerly (as vLLM's flag)");
  cmd->add_flag("--cuda-graphs", a->cuda_graphs,
                "replay decode steps (up to 256 tokens) from captured CUDA graphs (the default on --device cuda)");
  cmd->add_flag("--enable-prefix-caching,!--no-enable-prefix-caching", a->enable_prefix_caching,
                "reuse the KV of cached prompt prefixes across requests (default on)");
  cmd->add_option("--prefix-caching-hash-algo", a->prefix_caching_hash_algo,
                  "sha256 (default) | sha256_cbor (vLLM's reproducible CBOR form; root from PYTHONHASHSEED)");
  cmd->add_option("--generation-config", a->generation_config, "auto | vllm | FOLDER with generation_config.json");
  cmd->add_option("--default-chat-template-kwargs", a->default_chat_template_kwargs, "JSON object, e.g. '{\"enable_thinking\": false}'");
  cmd->add_option("--tokenizer", a->tokenizer, "tokenizer directory or repo id (default: the model's)");
  cmd->add_option("--hf-config-path", a->hf_config_path, "config.json source for a GGUF model (directory or repo id)");
  add_hub_flags(cmd, a->hub, true);
  cmd->add_flag("--enable-auto-tool-choice", a->enable_auto_tool_choice, "parse tool calls (needs --tool-call-parser)");
  cmd->add_option("--tool-call-parser", a->tool_call_parser, "glm47");
  cmd->add_option("--reasoning-parser", a->reasoning_parser, "glm47");
  cmd->add_option("--reasoning-config", a->reasoning_config,
                  "JSON {\"reasoning_start_str\", \"reasoning_end_str\"}: where reasoning starts and ends, for "
                  "thinking_token_budget (default: the reasoning parser's <think> and </think>)");
  cmd->add_flag("--exclude-tools-when-tool-choice-none", a->exclude_tools_when_tool_choice_none,
                "leave tools out of the prompt when tool_choice is none");
  a->device = default_device();
  cmd->add_option("--device", a->device, "cpu | cuda (default: cuda when a GPU is present)");
  cmd->add_option("--kv-cache-memory", a->kv_cache_memory, "KV cache budget on the CPU, e.g. 512MiB (default: 16 full-length sequences, 64 MiB..4 GiB)");
  cmd->add_option("--cpu-threads", a->cpu_threads, "CPU backend threads (0 = all cores)");
  cmd->add_flag("--disable-log-requests", a->disable_log_requests, "no log line per HTTP request");
  cmd->add_flag("--enable-log-requests", a->enable_log_requests, "a log line per HTTP request (the default)");
  cmd->add_flag("--disable-log-stats", a->disable_log_stats, "no periodic throughput / queue / KV-cache line");
  if (const char* env = std::getenv("VLLM_LOG_STATS_INTERVAL"); env && *env) {
    try {
      a->log_stats_interval = std::stod(env);
    } catch (const std::exception&) {
      a->log_stats_interval = -1;  // refused by check_flags, naming the flag
    }
  }
  cmd->add_option("--log-stats-interval", a->log_stats_interval,
                  "seconds between stats lines (default: env VLLM_LOG_STATS_INTERVAL, else 10)");
  cmd->add_option("--kv-events-config", a->kv_events_config,
                  "vLLM's KV event publishing, as JSON: '{\"enable_kv_cache_events\": true, \"publisher\": \"zmq\", "
                  "\"endpoint\": \"tcp://*:5557\", \"replay_endpoint\": null, \"topic\": \"\"}'");
  cmd->add_option("--shutdown-timeout", a->shutdown_timeout,
                  "seconds SIGTERM/SIGINT waits for running requests before aborting them with 503 "
                  "(default 30; 0 aborts at once, as vLLM's default)");
  add_vllm_serve_flags(cmd, a->vllm);
  cmd->callback([a, cmd, &exit_code] {
    run_serve(*a, *cmd);
    exit_code = 0;
  });
}

}  // namespace striker::cli
