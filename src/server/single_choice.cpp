#include "server/single_choice.h"

#include <httplib.h>

namespace striker::server {

void SingleChoice::add(const ChoiceDelta& d) {
  text += d.new_text;
  tokens.insert(tokens.end(), d.new_tokens.begin(), d.new_tokens.end());
  if (d.finish) {
    finish = d.finish;
    stop_reason = d.stop_reason;
  }
}

bool run_single_choice(Generation& gen, const ServingContext& ctx, RequestAccounting& acct,
                       const ConnectionWatch& watch, int64_t max_tokens, SingleChoice& out, httplib::Response& res,
                       const std::function<void(const ChoiceDelta&)>& on_delta) {
  const bool complete = drive_generation(gen, watch, ctx.stopping, [&](const RequestOutput& o) {
    acct.observe(o);
    for (const auto& d : o.choices) {
      if (d.index != 0) continue;
      out.add(d);
      if (on_delta) on_delta(d);
    }
    return true;
  });
  if (!complete) {
    abandon_single_choice(gen, acct, max_tokens);
    res.status = 499;  // the client is gone; nothing will read this
  }
  return complete;
}

void abandon_single_choice(Generation& gen, RequestAccounting& acct, int64_t max_tokens) {
  gen.abort_all();
  acct.finish("abort", gen.prompt_tokens(), 1, max_tokens);
}

ParsedMessage parse_final_message(ChoiceParser& parser, const std::string& text, bool parallel_tool_calls) {
  ParsedMessage msg = parser.parse_complete(text);
  if (!parallel_tool_calls && msg.tool_calls.size() > 1) msg.tool_calls.erase(msg.tool_calls.begin() + 1, msg.tool_calls.end());
  return msg;
}

}  // namespace striker::server
