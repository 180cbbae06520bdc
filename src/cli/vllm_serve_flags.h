// `vllm serve` flags that a striker command line should take as it is: the single-GPU values of the
// parallelism flags, --dtype, --trust-remote-code, --chat-template, CORS, the uvicorn log flags, and
// switches whose vLLM behaviour striker always has. Values striker cannot honour fail at startup with
// a message that says why and what to do, instead of CLI11's "argument was not expected".
#pragma once
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "server/server_options.h"

namespace striker::cli {

struct VllmServeFlags {
  int tensor_parallel_size = 1, pipeline_parallel_size = 1, data_parallel_size = 1;
  std::string dtype = "auto";
  bool trust_remote_code = false;
  std::string chat_template;  // a Jinja file, or the template itself
  std::string chat_template_content_format = "auto";
  std::string allowed_origins = "[\"*\"]", allowed_methods = "[\"*\"]", allowed_headers = "[\"*\"]";
  bool allow_credentials = false;
  bool disable_uvicorn_access_log = false;
  std::string uvicorn_log_level = "info";
  bool return_tokens_as_token_ids = false;
  bool enable_prompt_tokens_details = false;  // striker always reports cached prompt tokens
  bool enable_request_id_headers = false;     // striker always sends X-Request-Id
  bool disable_fastapi_docs = false;          // striker serves no API docs pages
  bool enable_chunked_prefill = true;
  std::string scheduling_policy = "fcfs";
  std::string response_role = "assistant";
  double swap_space = 0;
  bool async_scheduling = false;  // EngineConfig::async_scheduling
  std::string speculative_config;
  bool enable_lora = false;
  std::string override_generation_config;  // JSON sampling defaults over --generation-config's
  bool enable_server_load_tracking = false;  // GET /load
};

void add_vllm_serve_flags(CLI::App* cmd, VllmServeFlags& f);
// Throws striker::Error for a value striker cannot honour.
void check_vllm_serve_flags(const VllmServeFlags& f, const CLI::App& cmd);
// CORS, token names, access log: what the flags set in the server's options.
void apply_vllm_serve_flags(const VllmServeFlags& f, server::ServerOptions& opts);
// --chat-template's source ("" when the flag is absent): the text itself when it holds Jinja
// characters, else the file it names (vLLM's rule); a path that cannot be read throws.
std::string chat_template_source(const VllmServeFlags& f);

// vLLM's two-letter shorthands (-tp, -pp, -dp) for `serve` as their long names: CLI11 takes one-letter
// short options only. `args` are the command line after the program name.
std::vector<std::string> expand_vllm_short_flags(std::vector<std::string> args);

}  // namespace striker::cli
