// POST /v1/completions: raw prompts (string, strings, token ids, lists of token ids); no chat
// template and no reasoning/tool parsing (chat-format.md §5.7).
#include <httplib.h>

#include <algorithm>
#include <ctime>

#include "server/api_error.h"
#include "server/prompt_logprobs.h"
#include "server/request_preparation.h"
#include "server/serving_context.h"
#include "server/structured_request.h"

namespace striker::server {
namespace {

struct CompletionChoice {
  std::string text;
  std::optional<FinishReason> finish;
  nlohmann::json stop_reason = nullptr;
  nlohmann::json tokens = nlohmann::json::array(), token_logprobs = nlohmann::json::array(),
                 top_logprobs = nlohmann::json::array(), text_offset = nlohmann::json::array();
  size_t offset = 0;  // running text offset for logprobs
  // Shared by the choices of one prompt: its prompt_logprobs as JSON text (prompt_logprobs.h).
  std::shared_ptr<const std::string> prompt_logprobs;
  bool echoed = false;  // streaming: the prompt text went out in this choice's first chunk
  bool ids_sent = false;  // streaming, return_token_ids: the prompt's ids went out in this choice's first chunk
  std::vector<int32_t> token_ids;  // return_token_ids
  nlohmann::json echo_logprobs = nullptr;  // streaming: the prompt's logprobs, sent with the prompt text
};

// Appends this delta's logprobs in the completions layout; returns them as a standalone object too.
nlohmann::json add_logprobs(const TokenNames& piece_text, CompletionChoice& c, const std::vector<TokenLogprob>& lps) {
  nlohmann::json part = {{"text_offset", nlohmann::json::array()}, {"token_logprobs", nlohmann::json::array()},
                         {"tokens", nlohmann::json::array()}, {"top_logprobs", nlohmann::json::array()}};
  for (const auto& lp : lps) {
    const std::string text = piece_text(lp.token);
    nlohmann::json top = nlohmann::json::object();
    for (const auto& [id, logprob] : lp.top) top[piece_text(id)] = std::max(logprob, -9999.0f);
    part["text_offset"].push_back(c.offset);
    part["token_logprobs"].push_back(std::max(lp.logprob, -9999.0f));
    part["tokens"].push_back(text);
    part["top_logprobs"].push_back(top);
    c.text_offset.push_back(c.offset);
    c.token_logprobs.push_back(std::max(lp.logprob, -9999.0f));
    c.tokens.push_back(text);
    c.top_logprobs.push_back(top);
    c.offset += text.size();
  }
  return part;
}

// The prompt's tokens in the completions logprobs layout, for echo (vLLM): the first token has
// no logprob (null entries); top lists are cut to the request's `logprobs`.
nlohmann::json add_prompt_logprobs(const TokenNames& piece_text, CompletionChoice& c, const std::vector<int32_t>& prompt,
                                   const std::vector<std::optional<TokenLogprob>>& lps, int32_t top_n) {
  nlohmann::json part = {{"text_offset", nlohmann::json::array()}, {"token_logprobs", nlohmann::json::array()},
                         {"tokens", nlohmann::json::array()}, {"top_logprobs", nlohmann::json::array()}};
  for (size_t i = 0; i < prompt.size(); ++i) {
    const std::string text = piece_text(prompt[i]);
    nlohmann::json logprob = nullptr, top = nullptr;
    if (i < lps.size() && lps[i]) {
      logprob = std::max(lps[i]->logprob, -9999.0f);
      top = nlohmann::json::object();
      for (size_t k = 0; k < lps[i]->top.size() && k < size_t(top_n); ++k) {
        top[piece_text(lps[i]->top[k].first)] = std::max(lps[i]->top[k].second, -9999.0f);
      }
    }
    part["text_offset"].push_back(c.offset);
    part["token_logprobs"].push_back(logprob);
    part["tokens"].push_back(text);
    part["top_logprobs"].push_back(top);
    c.text_offset.push_back(c.offset);
    c.token_logprobs.push_back(logprob);
    c.tokens.push_back(text);
    c.top_logprobs.push_back(top);
    c.offset += text.size();
  }
  return part;
}

struct CompletionJob {
  explicit CompletionJob(const ServingContext& c) : ctx(c) {}
  const ServingContext& ctx;
  SamplingRequest sampling;
  std::unique_ptr<Generation> gen;
  std::vector<CompletionChoice> choices;
  std::time_t created = std::time(nullptr);
  std::string id;
  int32_t n = 1;
  std::vector<std::string> prompt_texts;  // one per prompt (echo)
  std::vector<std::vector<int32_t>> prompt_tokens;  // one per prompt (echo with logprobs)

  bool echo_logprobs() const { return sampling.echo && sampling.logprobs; }
  TokenNames token_names() const { return TokenNames{ctx.tokenizer, sampling.return_tokens_as_token_ids}; }

  const std::string& prompt_text_of(size_t choice) const { return prompt_texts[choice / size_t(n)]; }
  const std::vector<int32_t>& prompt_tokens_of(size_t choice) const { return prompt_tokens[choice / size_t(n)]; }
  // echo with max_tokens 0: the one generated token is dropped, only the prompt is returned (vLLM).
  bool drop_generated() const { return sampling.echo_only; }
};

void absorb(CompletionJob& job, const RequestOutput& out, const ChoiceDelta& d) {
  auto& c = job.choices[size_t(d.index)];
  if (d.finish) {
    c.finish = d.finish;
    c.stop_reason = stop_reason_json(d.stop_reason, job.sampling.params);
  }
  if (!out.prompt_logprobs.empty() && !c.prompt_logprobs) {
    // Every choice of this prompt shares the prompt's logprobs (sent once, on its first output).
    auto plp = std::make_shared<const std::string>(prompt_logprobs_text(job.ctx.tokenizer, out.prompt_logprobs));
    const size_t prompt = size_t(d.index / job.n);
    const size_t first = prompt * size_t(job.n);
    const size_t end = std::min(first + size_t(job.n), job.choices.size());
    for (size_t i = first; i < end; ++i) {
      auto& ci = job.choices[i];
      ci.prompt_logprobs = plp;
      if (job.echo_logprobs()) {
        ci.echo_logprobs = add_prompt_logprobs(job.token_names(), ci, job.prompt_tokens[prompt], out.prompt_logprobs,
                                               *job.sampling.params.logprobs);
      }
    }
  }
}

std::string metrics_reason(const CompletionJob& job) {
  for (const auto& c : job.choices) {
    if (c.finish) return finish_reason_name(*c.finish);
  }
  return "abort";
}

void respond_non_streaming(CompletionJob& job, const ConnectionWatch& watch, httplib::Response& res) {
  RequestAccounting acct(job.ctx, *job.gen);
  const bool complete = drive_generation(*job.gen, watch, job.ctx.stopping, [&](const RequestOutput& out) {
    acct.observe(out);
    for (const auto& d : out.choices) {
      if (d.index < 0 || size_t(d.index) >= job.choices.size()) continue;
      auto& c = job.choices[size_t(d.index)];
      if (!job.drop_generated()) c.text += d.new_text;
      if (job.sampling.return_token_ids && !job.drop_generated())
        c.token_ids.insert(c.token_ids.end(), d.new_tokens.begin(), d.new_tokens.end());
      absorb(job, out, d);  // first: echo's prompt logprobs precede the output's
      if (job.sampling.logprobs && !job.drop_generated()) add_logprobs(job.token_names(), c, d.logprobs);
    }
    return true;
  });
  if (!complete) {
    acct.finish("abort", job.gen->prompt_tokens(), job.n, job.sampling.params.max_tokens);
    res.status = 499;
    return;
  }
  nlohmann::json choices = nlohmann::json::array();
  std::vector<std::string> raw_texts;  // the choices' prompt_logprobs, spliced in at the dump
  for (size_t i = 0; i < job.choices.size(); ++i) {
    auto& c = job.choices[i];
    nlohmann::json logprobs = nullptr;
    if (job.sampling.logprobs) {
      logprobs = {{"text_offset", c.text_offset}, {"token_logprobs", c.token_logprobs}, {"tokens", c.tokens},
                  {"top_logprobs", c.top_logprobs}};
    }
    choices.push_back({{"index", i},
                       {"text", job.sampling.echo ? job.prompt_text_of(i) + c.text : c.text},
                       {"logprobs", logprobs},
                       {"finish_reason", finish_reason_name(c.finish.value_or(FinishReason::Abort))},
                       {"stop_reason", c.stop_reason},
                       {"token_ids", job.sampling.return_token_ids ? nlohmann::json(c.token_ids) : nlohmann::json(nullptr)},
                       {"prompt_token_ids", job.sampling.return_token_ids ? nlohmann::json(job.prompt_tokens_of(i))
                                                                          : nlohmann::json(nullptr)}});
    if (c.prompt_logprobs) {
      choices.back()["prompt_logprobs"] = raw_json_marker(raw_texts.size());
      raw_texts.push_back(*c.prompt_logprobs);
    } else {
      choices.back()["prompt_logprobs"] = nullptr;
    }
  }
  acct.finish(metrics_reason(job), job.gen->prompt_tokens(), job.n, job.sampling.params.max_tokens);
  nlohmann::json body = {{"id", job.id},       {"object", "text_completion"},
                         {"created", job.created}, {"model", job.ctx.model_name()},
                         {"service_tier", nullptr},
                         {"system_fingerprint", nullptr},
                         {"usage", usage_json(*job.gen, acct.completion_tokens())},
                         {"kv_transfer_params", nullptr}};
  body["choices"] = std::move(choices);
  res.status = 200;
  res.set_content(dump_with_raw_values(body, "prompt_logprobs", raw_texts), "application/json");
}

void stream_completion(CompletionJob& job, const ConnectionWatch& watch, httplib::DataSink& sink) {
  RequestAccounting acct(job.ctx, *job.gen);
  auto base = [&] {
    return nlohmann::json{{"id", job.id}, {"object", "text_completion"}, {"created", job.created},
                          {"model", job.ctx.model_name()}};
  };
  const bool complete = drive_generation(*job.gen, watch, job.ctx.stopping, [&](const RequestOutput& out) {
    acct.observe(out);
    for (const auto& d : out.choices) {
      if (d.index < 0 || size_t(d.index) >= job.choices.size()) continue;
      auto& c = job.choices[size_t(d.index)];
      absorb(job, out, d);  // first: echo's prompt logprobs precede the output's
      nlohmann::json logprobs = nullptr;
      std::string text = job.drop_generated() ? std::string() : d.new_text;
      if (job.sampling.echo && !c.echoed) {
        // The first chunk of each choice carries the prompt text (vLLM), before any generated text,
        // and with logprobs the prompt tokens' logprobs.
        text = job.prompt_text_of(size_t(d.index)) + text;
        c.echoed = true;
        if (job.echo_logprobs()) logprobs = c.echo_logprobs;
      }
      if (job.sampling.logprobs && !d.logprobs.empty() && !job.drop_generated()) {
        const auto part = add_logprobs(job.token_names(), c, d.logprobs);
        if (logprobs.is_null()) {
          logprobs = part;
        } else {
          for (const char* key : {"text_offset", "token_logprobs", "tokens", "top_logprobs"}) {
            for (const auto& v : part[key]) logprobs[key].push_back(v);
          }
        }
      }
      const bool ids = job.sampling.return_token_ids && !job.drop_generated() && !d.new_tokens.empty();
      if (text.empty() && logprobs.is_null() && !ids && !d.finish) continue;
      nlohmann::json choice = {{"index", d.index}, {"text", text}, {"logprobs", logprobs},
                               {"finish_reason", nullptr}, {"stop_reason", nullptr}};
      if (job.sampling.return_token_ids) {
        // vLLM: the prompt's ids with a choice's first chunk, then each chunk's new ids.
        choice["token_ids"] = job.drop_generated() ? std::vector<int32_t>{} : d.new_tokens;
        if (!c.ids_sent) choice["prompt_token_ids"] = job.prompt_tokens_of(size_t(d.index));
        c.ids_sent = true;
      }
      if (d.finish) {
        choice["finish_reason"] = finish_reason_name(*d.finish);
        choice["stop_reason"] = c.stop_reason;
      }
      nlohmann::json chunk = base();
      chunk["choices"] = nlohmann::json::array({choice});
      if (job.sampling.continuous_usage) chunk["usage"] = usage_json(*job.gen, acct.completion_tokens());
      if (!send_event(sink, chunk)) return false;
    }
    return true;
  });
  if (!complete) {
    acct.finish("abort", job.gen->prompt_tokens(), job.n, job.sampling.params.max_tokens);
    sink.done();
    return;
  }
  acct.finish(metrics_reason(job), job.gen->prompt_tokens(), job.n, job.sampling.params.max_tokens);
  if (job.sampling.include_usage) {
    nlohmann::json chunk = base();
    chunk["choices"] = nlohmann::json::array();
    chunk["usage"] = usage_json(*job.gen, acct.completion_tokens());
    if (!send_event(sink, chunk)) return sink.done();
  }
  static const std::string kDone = "data: [DONE]\n\n";
  sink.write(kDone.data(), kDone.size());
  sink.done();
}

}  // namespace

void handle_completions(const ServingContext& ctx, const httplib::Request& req, httplib::Response& res) {
  const RequestBody request = parse_request_body(req);
  auto job = std::make_shared<CompletionJob>(ctx);
  PreparedCompletion prepared = prepare_completion_request(ctx, request);
  job->sampling = std::move(prepared.sampling);
  if (auto so = parse_structured_request(request.ordered)) job->sampling.params.structured = compile_structured_request(ctx, *so, -1);
  const auto& prompts = prepared.prompts;
  job->prompt_texts = std::move(prepared.texts);
  job->prompt_tokens = prompts;
  std::vector<SamplingParams> per_prompt = per_prompt_params(job->sampling, prompts, ctx.options.max_model_len);
  job->sampling.params = per_prompt.front();
  job->n = job->sampling.params.n;
  job->choices.resize(prompts.size() * size_t(job->n));
  job->id = "cmpl-" + random_hex_id();
  job->gen = std::make_unique<Generation>(ctx, job->id, job->n);
  for (size_t i = 0; i < prompts.size(); ++i) job->gen->submit(prompts[i], per_prompt[i], job->sampling.cache_salt);

  respond_or_stream(
      job->sampling.stream, *job->gen, req, res,
      [&](const ConnectionWatch& watch, httplib::Response& r) { respond_non_streaming(*job, watch, r); },
      [job](const ConnectionWatch& watch, httplib::DataSink& sink) { stream_completion(*job, watch, sink); });
}

}  // namespace striker::server
