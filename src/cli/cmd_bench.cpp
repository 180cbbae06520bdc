// striker bench latency: decode latency (ms/step) of 1..256 sequences at a given context on the GPU, with
// random weights made on the device (--load-format dummy) and a KV cache filled with random
// values for the context (its prefill is not run). A step is timed as `serve` runs it: the forward
// pass and a greedy draw of every row on the device, only the token ids copied back. Prints the
// bytes one step must read and the fraction of the H200's measured read bandwidth (4.6 TB/s, shared/reference/performance.md §10)
// that the step achieves, and (with --graphs) the kernels one step launches.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "cli/bench_stats.h"
#include "cli/bench_throughput.h"
#include "cli/commands.h"
#include "core/error.h"
#include "loaders/model_loader.h"
#include "model/config.h"
#include "model/weight_bytes.h"

#ifdef STRIKER_HAVE_CUDA
#include "backends/cuda/backend/cuda_backend.h"
#include "backends/cuda/common/device_info.h"
#endif

namespace striker::cli {
namespace {

struct LatencyOptions {
  std::string config = "../shared/fixtures/flint-config/config.json";
  std::string load_format = "dummy";
  int64_t context = 100000;
  int steps = 50;
  int warmup = 3;
  uint64_t seed = 0;
  bool graphs = false;
  int batch = 1;  // sequences decoding together, each at `context`
  int block_size = 16;  // tokens per KV cache block (serve's --block-size)
  std::string quantization;
  // The step of n-gram speculation: each sequence's chunk is its token and this many guesses, a
  // logits row each (what the engine sends with --speculative-config).
  int speculative_tokens = 0;
};

struct PrefillOptions {
  std::string config = "../shared/fixtures/flint-config/config.json";
  int64_t tokens = 8192;
  int64_t context = 0;  // tokens already in the KV cache before the chunk (a prefix-cache hit)
  int repeats = 2;
  uint64_t seed = 0;
  std::string quantization;
};

constexpr int kMaxLatencyTokens = 256;  // the CUDA backend's largest graph-replayed step

#ifdef STRIKER_HAVE_CUDA
// --quantization of the benchmarks: only the dummy weights' format (no checkpoint is read).
LinearFormat bench_format(const std::string& quantization) {
  return parse_quantization(quantization).value_or(LinearFormat::bf16);
}

#endif

#ifdef STRIKER_HAVE_CUDA
int run_latency(const LatencyOptions& o) {
  if (o.load_format != "dummy")
    throw Error("bench latency: only --load-format dummy is supported (got '" + o.load_format + "')");
  if (o.context < 0 || o.steps <= 0 || o.warmup < 0) throw Error("bench latency: --context/--steps/--warmup out of range");
  // Up to 256 tokens a decode step replays a captured graph (the serve path); 1..8 run the GEMV
  // kernels, 9..256 the batched (grouped expert) path.
  if (o.batch < 1 || o.batch > kMaxLatencyTokens)
    throw Error("bench latency: --batch must be 1.." + std::to_string(kMaxLatencyTokens) + ", got " + std::to_string(o.batch));
  const int per_seq = 1 + o.speculative_tokens;
  // Guesses ride the 1..8-token decode path only (the batched path above 8 tokens has no guess rows).
  if (o.speculative_tokens < 0 || (o.speculative_tokens > 0 && o.batch * per_seq > 8))
    throw Error("bench latency: --batch x (1 + --speculative-tokens) must be 1..8 with guesses (the decode path's token count)");
  if (o.block_size != 16 && o.block_size != 32 && o.block_size != 64 && o.block_size != 128)
    throw Error("bench latency: --block-size must be 16, 32, 64 or 128 (serve's CUDA choices), got " +
                std::to_string(o.block_size));
  const LinearFormat format = bench_format(o.quantization);
  if (cuda::device_count() == 0) throw Error("bench latency needs a GPU: " + cuda::device_summary());
  std::filesystem::path cfg_path = o.config;
  if (std::filesystem::is_directory(cfg_path)) cfg_path /= "config.json";
  const FlintConfig c = load_flint_config(cfg_path);
  const int64_t last_pos = o.context + o.warmup + o.steps + o.speculative_tokens;
  if (last_pos >= c.max_position_embeddings)
    throw Error("bench latency: context " + std::to_string(o.context) + " + steps exceeds max_position_embeddings " +
                std::to_string(c.max_position_embeddings));
  std::printf("device: %s\n", cuda::device_summary().c_str());
  const auto t0 = std::chrono::steady_clock::now();
  cuda::DeviceModel model = cuda::DeviceModel::random(c, o.seed, format);
  const double weight_gb = double(model.bytes) / 1e9;
  const int step_tokens = std::max(8, o.batch * per_seq);
  cuda::CudaBackendOptions backend_options{step_tokens, step_tokens, int64_t(1) << 20, o.graphs};
  cuda::CudaBackend backend(std::move(model), backend_options);
  const int B = o.block_size;
  const int64_t seq_blocks = last_pos / B + 1;  // full-attention blocks of one sequence
  const int64_t full_blocks = seq_blocks * o.batch;
  const int64_t ring = (c.sliding_window + B - 1) / B + 2;  // sliding blocks one sequence holds, plus slack
  backend.allocate_kv_cache(KvCacheSpec{B, full_blocks, ring * o.batch});
  backend.fill_kv_random(o.seed + 1);
  const double setup_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("model: %s, %lld layers (%lld full, %lld sliding), %lld experts top-%lld; %.1f GB of random %s "
              "weights on the GPU (setup %.1f s)\n",
              cfg_path.string().c_str(), (long long)c.num_hidden_layers, (long long)c.num_full_layers(),
              (long long)c.num_sliding_layers(), (long long)c.n_routed_experts, (long long)c.num_experts_per_tok,
              weight_gb, linear_format_name(format).c_str(), setup_s);

  // Physical full blocks in a shuffled order, as an engine's free list would hand them out.
  std::vector<int32_t> full_table(static_cast<size_t>(full_blocks));
  std::iota(full_table.begin(), full_table.end(), 0);
  std::mt19937 rng(uint32_t(o.seed) + 7);
  std::shuffle(full_table.begin(), full_table.end(), rng);
  std::vector<int32_t> tokens(size_t(o.batch));
  for (auto& t : tokens) t = int32_t(rng() % uint32_t(c.vocab_size));
  // Steps from --context on, each sequence's chunk its token and `guesses` guessed tokens.
  auto time_steps = [&](int guesses, std::vector<double>& wall_ms, std::vector<double>& device_ms) {
    const int64_t rows_per_seq = guesses > 0 ? 1 + guesses : 1;
    // The step as `serve` runs it: every logits row drawn greedily on the device (forward_sampled),
    // only the token ids coming back — not forward()'s full logits rows (600 KB each) to the host.
    DeviceSampling ds;
    for (int64_t r = 0; r < int64_t(o.batch) * rows_per_seq; ++r) {
      SampleRequest q;
      q.row = int32_t(r);
      q.temperature = 0.f;
      ds.samples.push_back(q);
    }
    SampledStep drawn;
    for (int i = 0; i < o.warmup + o.steps; ++i) {
      const int64_t pos = o.context + i;
      ForwardBatch batch;
      for (int sq = 0; sq < o.batch; ++sq) {  // sequence sq owns full blocks [sq·seq_blocks, ...) and its own ring
        SequenceChunk ch;
        ch.tokens = {tokens[size_t(sq)]};
        // Guesses: random tokens (the step costs the same whatever they are; one advances per step).
        for (int g = 0; g < guesses; ++g) ch.tokens.push_back(int32_t(rng() % uint32_t(c.vocab_size)));
        ch.all_logits = guesses > 0;
        ch.start_pos = pos;
        const int64_t end = pos + guesses;  // the chunk's last position
        for (int64_t b = 0; b <= end / B; ++b) ch.full_block_table.push_back(full_table[size_t(sq * seq_blocks + b)]);
        ch.sliding_block_table.assign(size_t(end / B + 1), -1);
        for (int64_t b = std::max<int64_t>(0, pos - c.sliding_window + 1) / B; b <= end / B; ++b)
          ch.sliding_block_table[size_t(b)] = int32_t(sq * ring + b % ring);
        batch.seqs.push_back(std::move(ch));
      }
      const auto s = std::chrono::steady_clock::now();
      backend.forward_sampled(batch, ds, drawn);
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - s).count();
      for (int sq = 0; sq < o.batch; ++sq)  // the real next tokens
        tokens[size_t(sq)] = drawn.tokens[size_t(sq * rows_per_seq)];
      if (i >= o.warmup) {
        wall_ms.push_back(ms);
        device_ms.push_back(backend.last_forward_device_ms());
      }
    }
  };
  // With guesses, plain steps first in the same process: the ratio is what speculation must beat.
  std::vector<double> plain_wall, plain_device;
  if (o.speculative_tokens > 0) time_steps(0, plain_wall, plain_device);
  std::vector<double> wall_ms, device_ms;
  time_steps(o.speculative_tokens, wall_ms, device_ms);
  // Routed experts read per MoE layer: K for one sequence; for a batch, the distinct experts of
  // the step's own routing (the last MoE layer's, read back after the last step, stands for
  // every MoE layer; random weights route close to uniformly, see expected_distinct_experts).
  // A step with guesses: its floor reads each sequence's KV once (its queries share the keys).
  const int T = o.batch * per_seq;
  double experts = double(c.num_experts_per_tok);
  if (T > 1) {
    const std::vector<int32_t> ids = backend.last_layer_routing(T);
    experts = double(std::set<int32_t>(ids.begin(), ids.end()).size());
    std::printf("  routing: %.0f distinct experts in the last MoE layer (uniform routing would give %.1f)\n",
                experts, expected_distinct_experts(c, T));
  }
  const double weight_bytes = active_weights(c, experts, T).bytes(format);
  const double kv_bytes = decode_kv_bytes(c, o.context) * o.batch;
  const double total = weight_bytes + kv_bytes;
  const double floor_ms = total / kReadBandwidth * 1e3;
  const double med_wall = median(wall_ms), med_dev = median(device_ms);
  std::printf("decode batch %d at context %lld%s: %d steps after %d warm-up, %s, KV blocks of %d tokens\n", o.batch,
              (long long)o.context,
              o.speculative_tokens > 0 ? (", each sequence checking " + std::to_string(o.speculative_tokens) + " guesses").c_str() : "",
              o.steps, o.warmup, o.graphs ? "CUDA graph replay" : "stream launches (PDL)", B);
  std::printf("  ms/step: median %.3f wall (%.3f device), min %.3f wall; %.1f tokens/s\n", med_wall, med_dev,
              *std::min_element(wall_ms.begin(), wall_ms.end()), 1e3 / med_wall);
  std::printf("  bytes/step: %.3f GB %s weights + %.3f GB KV = %.3f GB; floor at 4.6 TB/s %.3f ms\n", weight_bytes / 1e9,
              linear_format_name(format).c_str(), kv_bytes / 1e9, total / 1e9, floor_ms);
  std::printf("  achieved %.2f TB/s = %.1f%% of the 4.6 TB/s read roofline (device time)\n", total / (med_dev * 1e-3) / 1e12,
              100.0 * floor_ms / med_dev);
  if (const double peak = cuda::device_dram_peak_bytes_per_s(); peak > 0)
    std::printf("  this card's DRAM peak (memory clock x bus width): %.2f TB/s; the step's bytes at %.1f%% of it\n",
                peak / 1e12, 100.0 * total / (med_dev * 1e-3) / peak);
  if (o.graphs) std::printf("  kernels per step: %d (nodes of the captured step graph)\n", backend.captured_step_kernels());
  if (o.speculative_tokens > 0) {
    const double plain = median(plain_device), ratio = med_dev / plain;
    std::printf("  against a plain step (%.3f ms device, same process): %.2fx; checking %d guesses pays when more than "
                "%.2f of them are accepted per step\n",
                plain, ratio, o.speculative_tokens, ratio - 1.0);
  }
  return 0;
}


// One sequence's prompt of `tokens` tokens in a single forward() (chunked prefill of one chunk),
// logits for the last token only. With --context C the chunk starts at position C over a KV cache
// filled with random values for the first C positions, as the chunk after a prefix-cache hit of C
// tokens (a multi-turn chat's next turn). Reports ms and tokens/s; the floor is FLOPs at 774 TFLOP/s.
int run_prefill(const PrefillOptions& o) {
  if (o.tokens <= 0 || o.repeats <= 0) throw Error("bench prefill: --tokens and --repeats must be positive");
  if (o.context < 0) throw Error("bench prefill: --context must not be negative");
  if (cuda::device_count() == 0) throw Error("bench prefill needs a GPU: " + cuda::device_summary());
  std::filesystem::path cfg_path = o.config;
  if (std::filesystem::is_directory(cfg_path)) cfg_path /= "config.json";
  const FlintConfig c = load_flint_config(cfg_path);
  if (o.context + o.tokens > c.max_position_embeddings)
    throw Error("bench prefill: --context + --tokens exceeds max_position_embeddings");
  std::printf("device: %s\n", cuda::device_summary().c_str());
  const LinearFormat format = bench_format(o.quantization);
  cuda::CudaBackend backend(cuda::DeviceModel::random(c, o.seed, format),
                            cuda::CudaBackendOptions{int(o.tokens), 8, int64_t(1) << 20, false});
  const int B = 16;
  const int64_t blocks = (o.context + o.tokens + B - 1) / B;
  backend.allocate_kv_cache(KvCacheSpec{B, blocks, blocks});
  if (o.context > 0) backend.fill_kv_random(o.seed + 1);
  SequenceChunk ch;
  std::mt19937 rng(uint32_t(o.seed) + 11);
  for (int64_t i = 0; i < o.tokens; ++i) ch.tokens.push_back(int32_t(rng() % uint32_t(c.vocab_size)));
  ch.start_pos = o.context;
  ch.full_block_table.resize(size_t(blocks));
  std::iota(ch.full_block_table.begin(), ch.full_block_table.end(), 0);
  ch.sliding_block_table = ch.full_block_table;
  ForwardBatch batch;
  batch.seqs.push_back(ch);
  std::vector<float> logits;
  std::vector<double> ms;
  double first_ms = 0;
  for (int i = 0; i <= o.repeats; ++i) {  // the first run warms up (cuBLASLt plans, lazily loaded kernels)
    const auto s = std::chrono::steady_clock::now();
    backend.forward(batch, logits);
    const double t = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - s).count();
    if (i > 0) ms.push_back(t);
    else first_ms = t;
  }
  // FLOPs: 2 per active linear weight and router weight per token + causal attention. The
  // lm_head counts for the last token only (logits of the last token).
  const ActiveWeights w = active_weights(c, double(c.num_experts_per_tok));
  double attn = 0;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    // Keys each query attends to, summed over the chunk's queries (query i sits at context + i).
    const double n = double(o.tokens), ctx = double(o.context);
    double keys = n * ctx + n * (n + 1) / 2;
    if (c.is_sliding_layer(l)) {
      keys = 0;
      for (int64_t i = 0; i < o.tokens; ++i) keys += std::min<double>(ctx + double(i) + 1, double(c.sliding_window));
    }
    attn += 4.0 * keys * double(c.num_attention_heads * c.head_dim);
  }
  const double flops = (w.linear() - w.lm_head + w.router) * 2 * double(o.tokens) + w.lm_head * 2 + attn;
  const double med = median(ms);
  std::printf("prefill of %lld tokens after %lld cached (one chunk, batch 1, %s weights): median %.1f ms over %d runs, "
              "%.0f tokens/s\n",
              (long long)o.tokens, (long long)o.context, linear_format_name(format).c_str(), med, o.repeats,
              double(o.tokens) / med * 1e3);
  std::printf("  first (warm-up) run %.1f ms: cuBLASLt plans for this token count, kernels loaded on first use\n", first_ms);
  std::printf("  %.1f TFLOP (active weights + causal attention) -> %.1f TFLOP/s = %.1f%% of 774 TFLOP/s\n", flops / 1e12,
              flops / (med * 1e-3) / 1e12, 100.0 * flops / (med * 1e-3) / 774e12);
  return 0;
}
#else
int run_prefill(const PrefillOptions&) {
  throw Error("bench prefill: this striker was built without CUDA (no GPU backend)");
}
int run_latency(const LatencyOptions&) {
  throw Error("bench latency: this striker was built without CUDA (no GPU backend)");
}
#endif

}  // namespace

void register_bench(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("bench", "Benchmarks: latency / prefill (GPU), throughput (GPU or CPU)");
  cmd->require_subcommand(1);
  auto opts = std::make_shared<LatencyOptions>();
  auto* lat = cmd->add_subcommand("latency", "batch-1 decode ms/step at a given context, random weights on the GPU");
  lat->add_option("--config", opts->config, "config.json (or its folder) giving the model shape")->capture_default_str();
  lat->add_option("--load-format", opts->load_format, "weights: only 'dummy' (random, made on the GPU) for now")
      ->capture_default_str();
  lat->add_option("--context", opts->context, "tokens already in the KV cache")->capture_default_str();
  lat->add_option("--steps", opts->steps, "timed decode steps")->capture_default_str();
  lat->add_option("--warmup", opts->warmup, "untimed steps first")->capture_default_str();
  lat->add_option("--seed", opts->seed, "seed of the random weights")->capture_default_str();
  lat->add_flag("--graphs", opts->graphs, "replay each decode step from a captured CUDA graph");
  lat->add_option("--batch", opts->batch, "sequences decoding together (1..256), each at --context")->capture_default_str();
  lat->add_option("--block-size", opts->block_size, "tokens per KV cache block: 16, 32, 64 or 128 (blocks shuffled)")
      ->capture_default_str();
  lat->add_option("--quantization", opts->quantization, "nvfp4 (or modelopt_fp4, gguf): random NVFP4 weights; default BF16");
  lat->add_option("--speculative-tokens", opts->speculative_tokens,
                  "each sequence's step also checks this many guessed tokens (n-gram speculation's step)")
      ->capture_default_str();
  lat->callback([opts, &exit_code] { exit_code = run_latency(*opts); });

  auto popts = std::make_shared<PrefillOptions>();
  auto* pre = cmd->add_subcommand("prefill", "one prompt of N tokens in one forward pass, random weights on the GPU");
  pre->add_option("--config", popts->config, "config.json (or its folder) giving the model shape")->capture_default_str();
  pre->add_option("--tokens", popts->tokens, "prompt length")->capture_default_str();
  pre->add_option("--context", popts->context, "tokens already in the KV cache before the chunk (random values)")
      ->capture_default_str();
  pre->add_option("--repeats", popts->repeats, "timed runs after one warm-up")->capture_default_str();
  pre->add_option("--seed", popts->seed, "seed of the random weights")->capture_default_str();
  pre->add_option("--quantization", popts->quantization, "nvfp4 (or modelopt_fp4, gguf): random NVFP4 weights; default BF16");
  pre->callback([popts, &exit_code] { exit_code = run_prefill(*popts); });

  register_bench_throughput(*cmd, exit_code);
}

}  // namespace striker::cli
