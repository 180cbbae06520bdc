#include "engine/grammar/structured_output.h"

#include <algorithm>
#include <chrono>

#include "engine/grammar/gbnf_grammar.h"
#include "engine/grammar/json_grammar.h"
#include "engine/grammar/json_schema_grammar.h"
#include "engine/grammar/regex_grammar.h"
#include "engine/grammar/tool_call_grammar.h"

namespace striker::grammar {

std::string StructuredOutputSpec::cache_key() const {
  // Ordered, so schemas that differ only in key order (and so in their output) differ here too.
  nlohmann::ordered_json k = {{"kind", int(kind)}, {"ws", json_whitespace}};
  switch (kind) {
    case Kind::JsonSchema: k["schema"] = schema; break;
    case Kind::JsonObject: break;
    case Kind::Regex:
    case Kind::Grammar: k["text"] = text; break;
    case Kind::Choice: k["choices"] = choices; break;
    case Kind::ToolCalls: {
      nlohmann::ordered_json tools = nlohmann::ordered_json::array();
      for (const auto& t : tool_calls.tools) tools.push_back({t.name, t.parameters});
      k["tools"] = tools;
      k["multiple"] = tool_calls.multiple;
      k["ids"] = {tool_calls.tool_call, tool_calls.tool_call_end, tool_calls.arg_key, tool_calls.arg_key_end,
                  tool_calls.arg_value, tool_calls.arg_value_end};
      break;
    }
  }
  return k.dump();
}

Grammar build_grammar(const StructuredOutputSpec& spec, const GrammarLimits& limits) {
  Grammar g;
  g.set_limits(limits);
  if (spec.kind == StructuredOutputSpec::Kind::Grammar) {
    gbnf_to_grammar(g, spec.text);
    return g;
  }
  JsonPieces pieces(g, spec.json_whitespace);
  Element top;
  switch (spec.kind) {
    case StructuredOutputSpec::Kind::JsonSchema: top = json_schema_to_grammar(g, pieces, spec.schema); break;
    case StructuredOutputSpec::Kind::JsonObject: top = pieces.object(); break;
    case StructuredOutputSpec::Kind::Regex: top = regex_to_grammar(g, spec.text); break;
    case StructuredOutputSpec::Kind::Choice: {
      if (spec.choices.empty()) throw GrammarError("`choice` must be a non-empty list of strings", "choice");
      std::vector<Sequence> alts;
      for (const auto& c : spec.choices) {
        Sequence seq;
        g.append_literal(seq, c);
        alts.push_back(std::move(seq));
      }
      top = g.alternatives("choice", std::move(alts));
      break;
    }
    case StructuredOutputSpec::Kind::ToolCalls: top = tool_calls_to_grammar(g, pieces, spec.tool_calls); break;
    case StructuredOutputSpec::Kind::Grammar: break;
  }
  // JSON outputs may be surrounded by whitespace, as the model likes; the rest match exactly.
  const bool json = spec.kind == StructuredOutputSpec::Kind::JsonSchema || spec.kind == StructuredOutputSpec::Kind::JsonObject;
  const int32_t root = g.add_rule("root");
  if (json) g.add_alt(root, {top, pieces.ws()});
  else g.add_alt(root, {top});
  g.set_root(root);
  return g;
}

std::shared_ptr<const CompiledGrammar> compile_structured_output(const StructuredOutputSpec& spec,
                                                                 std::shared_ptr<const TokenVocabulary> vocab,
                                                                 const CompileLimits& limits) {
  const auto t0 = std::chrono::steady_clock::now();
  const double cpu0 = thread_cpu_ms();  // the limit is on CPU time: a busy server is no reason to refuse
  const double limit = limits.grammar.max_build_ms;
  Grammar g = build_grammar(spec, limits.grammar);
  auto out = std::make_shared<CompiledGrammar>();
  out->rules = g.rules().size();
  out->elements = g.num_elements();
  out->automaton = std::make_shared<GrammarAutomaton>(g, std::move(vocab), limits.automaton);
  // The stack tops' token walks, and the first mask, are part of the compile: the first output
  // then meets (almost) no walk of the vocabulary.
  out->automaton->precompute();
  std::vector<uint32_t> words(out->automaton->vocab().words());
  out->automaton->fill_mask(out->automaton->initial_state(), words);
  out->compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  out->compile_cpu_ms = thread_cpu_ms() - cpu0;
  if (limit > 0 && out->compile_cpu_ms > limit)
    throw GrammarError("compiling the structured output grammar took " + std::to_string(int64_t(out->compile_cpu_ms)) +
                           " ms of CPU time, over the limit of " + std::to_string(int64_t(limit)) +
                           " ms; simplify the schema, pattern or grammar",
                       "size");
  return out;
}

GrammarMatcher::GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar, int32_t start_after_token)
    : grammar_(std::move(grammar)),
      start_after_(start_after_token),
      state_(grammar_->automaton->initial_state()),
      active_(start_after_token < 0) {}

void GrammarMatcher::fill_mask(std::span<const int32_t> stop_ids, std::span<uint32_t> words) const {
  GrammarAutomaton& a = *grammar_->automaton;
  const bool ended = finished_ || a.complete(state_);
  if (ended) std::fill(words.begin(), words.end(), 0u);
  else a.fill_mask(state_, words);
  if (ended || a.accepts(state_))
    for (int32_t id : stop_ids)
      if (id >= 0 && size_t(id) < words.size() * 32) words[size_t(id) >> 5] |= 1u << (id & 31);
}

bool GrammarMatcher::try_accept(int32_t token, std::span<const int32_t> stop_ids) {
  if (!active_) {
    active_ = token == start_after_;
    return true;
  }
  GrammarAutomaton& a = *grammar_->automaton;
  const bool is_stop = std::find(stop_ids.begin(), stop_ids.end(), token) != stop_ids.end();
  if (finished_ || (is_stop && a.accepts(state_))) {
    if (!is_stop) return false;
    finished_ = true;
    return true;
  }
  const int32_t next = a.advance(state_, token);
  if (next == GrammarAutomaton::kDead) return false;
  state_ = next;
  return true;
}

void GrammarMatcher::accept(int32_t token, std::span<const int32_t> stop_ids) {
  if (try_accept(token, stop_ids)) return;
  if (finished_) throw Error("structured output: token " + std::to_string(token) + " after the end of the output");
  throw Error("structured output: token " + std::to_string(token) + " does not fit the grammar here (no allowed "
              "token could be sampled, e.g. min_tokens or logit_bias ruled them all out)");
}

}  // namespace striker::grammar
