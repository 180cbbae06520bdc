#include "cli/vllm_serve_flags.h"

#include "cli/speculative_flag.h"
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/log.h"
#include "server/startup_config.h"

namespace striker::cli {

void add_vllm_serve_flags(CLI::App* cmd, VllmServeFlags& f) {
  cmd->add_option("--tensor-parallel-size", f.tensor_parallel_size, "1 (striker serves Flint on one GPU; also -tp)");
  cmd->add_option("--pipeline-parallel-size", f.pipeline_parallel_size, "1 (also -pp)");
  cmd->add_option("--data-parallel-size", f.data_parallel_size,
                  "1 (scale out with replicas behind vllm-router: scripts/cluster.sh; also -dp)");
  cmd->add_option("--dtype", f.dtype, "auto | bfloat16 (Flint computes in bfloat16)");
  cmd->add_flag("--trust-remote-code", f.trust_remote_code,
                "accepted: striker runs no code from the model repository (Flint is built in)");
  cmd->add_option("--chat-template", f.chat_template, "Jinja chat template, or a file holding one (default: the tokenizer's)");
  cmd->add_option("--chat-template-content-format", f.chat_template_content_format,
                  "auto | string (message content reaches the template as a string)");
  cmd->add_option("--allowed-origins", f.allowed_origins, "CORS: JSON list of origins (default [\"*\"])");
  cmd->add_option("--allowed-methods", f.allowed_methods, "CORS: JSON list of methods (default [\"*\"])");
  cmd->add_option("--allowed-headers", f.allowed_headers, "CORS: JSON list of headers (default [\"*\"])");
  cmd->add_flag("--allow-credentials", f.allow_credentials, "CORS: allow credentials");
  cmd->add_flag("--disable-uvicorn-access-log", f.disable_uvicorn_access_log,
                "no log line per HTTP request (as --disable-log-requests)");
  cmd->add_option("--uvicorn-log-level", f.uvicorn_log_level,
                  "critical | error | warning | info | debug | trace: above info, no log line per HTTP request");
  cmd->add_flag("--return-tokens-as-token-ids", f.return_tokens_as_token_ids,
                "logprobs name tokens 'token_id:<id>' in every response");
  cmd->add_flag("--enable-prompt-tokens-details", f.enable_prompt_tokens_details,
                "accepted: usage.prompt_tokens_details.cached_tokens is always reported");
  cmd->add_flag("--enable-request-id-headers", f.enable_request_id_headers, "accepted: X-Request-Id is always sent");
  cmd->add_flag("--disable-fastapi-docs", f.disable_fastapi_docs, "accepted: striker serves no API docs pages");
  cmd->add_flag("--enable-chunked-prefill,!--no-enable-chunked-prefill", f.enable_chunked_prefill,
                "prefill in chunks of --max-num-batched-tokens (always on)");
  cmd->add_option("--scheduling-policy", f.scheduling_policy, "fcfs (striker schedules first come, first served)");
  cmd->add_option("--response-role", f.response_role, "assistant");
  cmd->add_option("--swap-space", f.swap_space, "accepted and unused, as in vLLM V1: preempted requests recompute");
  cmd->add_option("--override-generation-config", f.override_generation_config,
                  "JSON sampling defaults over the generation config's, e.g. '{\"temperature\": 0.6}'");
  cmd->add_flag("--enable-server-load-tracking", f.enable_server_load_tracking,
                "GET /load answers {\"server_load\": requests in flight}");
  cmd->add_flag("--async-scheduling,!--no-async-scheduling", f.async_scheduling,
                "plan and launch the next step while the current one runs (its tokens taken from the current "
                "step's draws on the device); on by default with --device cuda, off on the CPU backend and "
                "with --speculative-config");
  cmd->add_option("--speculative-config", f.speculative_config,
                  "n-gram speculation, e.g. '{\"method\": \"ngram\", \"num_speculative_tokens\": 3, "
                  "\"prompt_lookup_max\": 4}' (the only method: no draft models)");
  cmd->add_flag("--enable-lora", f.enable_lora, "not available in striker (refused at startup)");
}

void check_vllm_serve_flags(const VllmServeFlags& f, const CLI::App& cmd) {
  if (f.tensor_parallel_size != 1 || f.pipeline_parallel_size != 1)
    throw Error("--tensor-parallel-size and --pipeline-parallel-size must be 1: striker serves Flint (BF16 or NVFP4) on one GPU");
  if (f.data_parallel_size != 1)
    throw Error("--data-parallel-size must be 1: run one `striker serve` per GPU behind vllm-router (scripts/cluster.sh)");
  if (f.dtype != "auto" && f.dtype != "bfloat16" && f.dtype != "bf16")
    throw Error("--dtype " + f.dtype + " is not supported: Flint computes in bfloat16 (FLINT.md §4); use auto or bfloat16");
  if (f.chat_template_content_format != "auto" && f.chat_template_content_format != "string")
    throw Error("--chat-template-content-format " + f.chat_template_content_format +
                " is not supported: the chat template gets each message's content as a string (auto, string)");
  server::CorsPolicy::parse_list(f.allowed_origins, "--allowed-origins");
  server::CorsPolicy::parse_list(f.allowed_methods, "--allowed-methods");
  server::CorsPolicy::parse_list(f.allowed_headers, "--allowed-headers");
  static const char* const kLevels[] = {"critical", "error", "warning", "info", "debug", "trace"};
  bool level_ok = false;
  for (const char* l : kLevels) level_ok = level_ok || f.uvicorn_log_level == l;
  if (!level_ok)
    throw Error("--uvicorn-log-level must be one of critical, error, warning, info, debug, trace, got '" +
                f.uvicorn_log_level + "'");
  if (!f.enable_chunked_prefill)
    throw Error("--no-enable-chunked-prefill is not supported: striker prefills long prompts in chunks of "
                "--max-num-batched-tokens (raise it to prefill a prompt in one step)");
  if (f.scheduling_policy != "fcfs")
    throw Error("--scheduling-policy " + f.scheduling_policy + " is not supported: striker schedules first come, first served");
  if (f.response_role != "assistant") throw Error("--response-role must be assistant");
  if (cmd.count("--swap-space") > 0 && f.swap_space < 0) throw Error("--swap-space must be 0 or more GiB");
  if (!f.speculative_config.empty()) parse_speculative_config(f.speculative_config);  // throws naming the key
  if (f.async_scheduling && !f.speculative_config.empty())
    throw Error("--async-scheduling does not run with --speculative-config (n-gram guesses need each step's tokens "
                "first): use one or the other");
  if (f.enable_lora) throw Error("--enable-lora is not available: striker serves the base model only");
  if (!f.override_generation_config.empty()) {
    server::GenerationConfig probe;
    server::apply_generation_config_overrides(probe, f.override_generation_config);  // throws naming the key
  }
}

void apply_vllm_serve_flags(const VllmServeFlags& f, server::ServerOptions& opts) {
  opts.cors.origins = server::CorsPolicy::parse_list(f.allowed_origins, "--allowed-origins");
  opts.cors.methods = server::CorsPolicy::parse_list(f.allowed_methods, "--allowed-methods");
  opts.cors.headers = server::CorsPolicy::parse_list(f.allowed_headers, "--allowed-headers");
  opts.cors.credentials = f.allow_credentials;
  opts.return_tokens_as_token_ids = f.return_tokens_as_token_ids;
  opts.track_server_load = f.enable_server_load_tracking;
  const bool quiet = f.uvicorn_log_level == "warning" || f.uvicorn_log_level == "error" || f.uvicorn_log_level == "critical";
  if (f.disable_uvicorn_access_log || quiet) opts.log_requests = false;
  if (f.swap_space > 0)
    logging::get("serve")->info("--swap-space {} GiB is unused: as in vLLM V1, preempted requests recompute their KV",
                                f.swap_space);
}

std::string chat_template_source(const VllmServeFlags& f) {
  const std::string& t = f.chat_template;
  if (t.empty() || t.find_first_of("{}\n") != std::string::npos) return t;
  std::ifstream in(t, std::ios::binary);
  if (!in) throw Error("--chat-template '" + t + "' looks like a file path, but it cannot be opened");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (ss.str().empty()) throw Error("--chat-template file '" + t + "' is empty");
  return ss.str();
}

}  // namespace striker::cli

namespace striker::cli {

std::vector<std::string> expand_vllm_short_flags(std::vector<std::string> args) {
  if (args.empty() || args.front() != "serve") return args;
  for (auto& arg : args) {
    for (const auto& [shorthand, name] : {std::pair<const char*, const char*>{"-tp", "--tensor-parallel-size"},
                                          {"-pp", "--pipeline-parallel-size"},
                                          {"-dp", "--data-parallel-size"}}) {
      const std::string s = shorthand;
      if (arg == s) arg = name;
      else if (arg.rfind(s + "=", 0) == 0) arg = name + arg.substr(s.size());
    }
  }
  return args;
}

}  // namespace striker::cli
