#include "server/metrics.h"

#include <cstdio>

namespace striker::server {
namespace {

std::string fmt(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

void header(std::string& out, const char* name, const char* type, const char* help) {
  out += "# HELP ";
  out += name;
  out += " ";
  out += help;
  out += "\n# TYPE ";
  out += name;
  out += " ";
  out += type;
  out += "\n";
}

void sample(std::string& out, const std::string& name, const std::string& labels, double v) {
  out += name + "{" + labels + "} " + fmt(v) + "\n";
}

const std::vector<double> kTtftBuckets = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,   0.25,  0.5,   0.75,
                                          1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
const std::vector<double> kItlBuckets = {0.01, 0.025, 0.05, 0.075, 0.1,  0.15, 0.2,  0.3,  0.4, 0.5,
                                         0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};
const std::vector<double> kE2eBuckets = {0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,   5.0,   10.0,   15.0,  20.0,
                                         30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};

}  // namespace

void Histogram::observe(double v) {
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += v;
  ++count_;
}

void Histogram::render(std::string& out, const std::string& name, const std::string& labels) const {
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    sample(out, name + "_bucket", labels + ",le=\"" + fmt(bounds_[i]) + "\"", double(cumulative));
  }
  sample(out, name + "_bucket", labels + ",le=\"+Inf\"", double(count_));
  sample(out, name + "_sum", labels, sum_);
  sample(out, name + "_count", labels, double(count_));
}

std::vector<double> one_two_five_buckets(int64_t max_value) {
  std::vector<double> out;
  for (int64_t scale = 1;; scale *= 10) {
    for (int64_t m : {1, 2, 5}) {
      if (m * scale > max_value) return out;
      out.push_back(double(m * scale));
    }
  }
}

ServerMetrics::ServerMetrics(std::string model_name, int64_t max_model_len, CacheConfigInfo cache)
    : labels_("engine=\"0\",model_name=\"" + model_name + "\""),
      cache_(std::move(cache)),
      ttft_(kTtftBuckets),
      itl_(kItlBuckets),
      e2e_(kE2eBuckets),
      prompt_tokens_(one_two_five_buckets(max_model_len)),
      generation_tokens_(one_two_five_buckets(max_model_len)),
      params_n_({1, 2, 5, 10, 20}),
      params_max_tokens_(one_two_five_buckets(max_model_len)),
      queue_time_(kE2eBuckets),
      prefill_time_(kE2eBuckets),
      decode_time_(kE2eBuckets),
      inference_time_(kE2eBuckets) {}

void ServerMetrics::record_request(const std::string& finished_reason, int64_t prompt_tokens,
                                   int64_t generation_tokens, int32_t n, int64_t max_tokens, double e2e_seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  ++success_[finished_reason];
  prompt_tokens_.observe(double(prompt_tokens));
  generation_tokens_.observe(double(generation_tokens));
  params_n_.observe(double(n));
  params_max_tokens_.observe(double(max_tokens));
  e2e_.observe(e2e_seconds);
}

void ServerMetrics::record_first_token(double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  ttft_.observe(seconds);
}

void ServerMetrics::record_phases(const RequestPhases& p) {
  std::lock_guard<std::mutex> lock(mu_);
  queue_time_.observe(p.queue);
  prefill_time_.observe(p.prefill);
  decode_time_.observe(p.decode);
  inference_time_.observe(p.inference);
}

void ServerMetrics::record_inter_token(double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  itl_.observe(seconds);
}

void ServerMetrics::record_http(const std::string& handler, int status) {
  std::lock_guard<std::mutex> lock(mu_);
  ++http_[{handler, status}];
}

std::string ServerMetrics::render(const EngineStats& s) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  out.reserve(16384);
  header(out, "vllm:num_requests_running", "gauge", "Number of requests in model execution batches.");
  sample(out, "vllm:num_requests_running", labels_, double(s.num_running));
  header(out, "vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.");
  sample(out, "vllm:num_requests_waiting", labels_, double(s.num_waiting));
  header(out, "vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.");
  sample(out, "vllm:kv_cache_usage_perc", labels_, s.kv_usage);
  header(out, "vllm:prefix_cache_queries_total", "counter",
         "Prefix cache queries, in terms of number of queried tokens.");
  sample(out, "vllm:prefix_cache_queries_total", labels_, double(s.prefix_cache_queries));
  header(out, "vllm:prefix_cache_hits_total", "counter", "Prefix cache hits, in terms of number of cached tokens.");
  sample(out, "vllm:prefix_cache_hits_total", labels_, double(s.prefix_cache_hits));
  header(out, "vllm:num_preemptions_total", "counter", "Cumulative number of preemptions from the engine.");
  sample(out, "vllm:num_preemptions_total", labels_, double(s.num_preemptions));
  header(out, "vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.");
  sample(out, "vllm:prompt_tokens_total", labels_, double(s.prompt_tokens_total));
  header(out, "vllm:generation_tokens_total", "counter", "Number of generation tokens processed.");
  sample(out, "vllm:generation_tokens_total", labels_, double(s.generation_tokens_total));

  // Speculation's counters, as vLLM exports them only when --speculative-config is given.
  if (s.num_speculative_tokens > 0) {
    header(out, "vllm:spec_decode_num_drafts_total", "counter", "Number of spec decoding drafts.");
    sample(out, "vllm:spec_decode_num_drafts_total", labels_, double(s.spec_num_drafts));
    header(out, "vllm:spec_decode_num_draft_tokens_total", "counter", "Number of draft tokens.");
    sample(out, "vllm:spec_decode_num_draft_tokens_total", labels_, double(s.spec_num_draft_tokens));
    header(out, "vllm:spec_decode_num_accepted_tokens_total", "counter", "Number of accepted tokens.");
    sample(out, "vllm:spec_decode_num_accepted_tokens_total", labels_, double(s.spec_num_accepted_tokens));
    header(out, "vllm:spec_decode_num_accepted_tokens_per_pos_total", "counter", "Accepted tokens per draft position.");
    for (size_t pos = 0; pos < s.spec_accepted_per_pos.size(); ++pos)
      sample(out, "vllm:spec_decode_num_accepted_tokens_per_pos_total",
             labels_ + ",position=\"" + std::to_string(pos) + "\"", double(s.spec_accepted_per_pos[pos]));
  }

  header(out, "vllm:request_success_total", "counter", "Count of successfully processed requests.");
  for (const char* reason : {"stop", "length", "abort"}) {
    auto it = success_.find(reason);
    sample(out, "vllm:request_success_total", labels_ + ",finished_reason=\"" + reason + "\"",
           it == success_.end() ? 0.0 : double(it->second));
  }

  header(out, "vllm:cache_config_info", "gauge", "Information of the KV cache configuration.");
  sample(out, "vllm:cache_config_info",
         "block_size=\"" + std::to_string(cache_.block_size) + "\",cache_dtype=\"" + cache_.cache_dtype +
             "\",enable_prefix_caching=\"" + (cache_.enable_prefix_caching ? "True" : "False") +
             "\",engine=\"0\",gpu_memory_utilization=\"" + fmt(cache_.gpu_memory_utilization) +
             "\",kv_cache_max_concurrency=\"" + fmt(double(s.max_concurrency)) + "\",kv_cache_size_tokens=\"" +
             std::to_string(s.kv_capacity_tokens) + "\",num_gpu_blocks=\"" + std::to_string(cache_.num_gpu_blocks) +
             "\",prefix_caching_hash_algo=\"" + cache_.prefix_caching_hash_algo + "\"",
         1.0);

  struct H {
    const char* name;
    const char* help;
    const Histogram* h;
  };
  for (const H& h : {H{"vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", &ttft_},
                     H{"vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", &itl_},
                     H{"vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", &e2e_},
                     H{"vllm:request_prompt_tokens", "Number of prefill tokens processed.", &prompt_tokens_},
                     H{"vllm:request_generation_tokens", "Number of generation tokens processed.", &generation_tokens_},
                     H{"vllm:request_params_n", "Histogram of the n request parameter.", &params_n_},
                     H{"vllm:request_params_max_tokens", "Histogram of the max_tokens request parameter.",
                       &params_max_tokens_},
                     H{"vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.",
                       &queue_time_},
                     H{"vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.",
                       &prefill_time_},
                     H{"vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.",
                       &decode_time_},
                     H{"vllm:request_inference_time_seconds", "Histogram of time spent in RUNNING phase for request.",
                       &inference_time_}}) {
    header(out, h.name, "histogram", h.help);
    h.h->render(out, h.name, labels_);
  }

  header(out, "striker:http_requests_total", "counter", "HTTP requests by route and status.");
  for (const auto& [key, count] : http_) {
    sample(out, "striker:http_requests_total",
           "handler=\"" + key.first + "\",status=\"" + std::to_string(key.second) + "\"", double(count));
  }
  return out;
}

}  // namespace striker::server
