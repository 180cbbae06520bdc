// What a request constrains its output to, compiled once into a shared automaton, and the
// per-choice matcher the engine drives (mask before a step, advance after it).
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/grammar/grammar_automaton.h"

namespace striker::grammar {

// GLM-4.7 tool calls: <tool_call>name<arg_key>k</arg_key><arg_value>v</arg_value>...</tool_call>
// (chat-format.md §1.7), values typed as the glm47 parser types them (§2.3).
struct ToolCallFormat {
  struct Tool {
    std::string name;
    nlohmann::ordered_json parameters;  // the tool's JSON schema (null: no parameters), in the request's key order
  };
  std::vector<Tool> tools;  // the callable tools (one for a named tool_choice)
  bool multiple = false;    // one or more calls ("required" with parallel_tool_calls)
  // The markers' token ids; -1: the tokenizer has no such token, the marker is written as text.
  int32_t tool_call = -1, tool_call_end = -1, arg_key = -1, arg_key_end = -1, arg_value = -1, arg_value_end = -1;
};

struct StructuredOutputSpec {
  enum class Kind { JsonSchema, JsonObject, Regex, Choice, Grammar, ToolCalls };
  Kind kind = Kind::JsonObject;
  nlohmann::ordered_json schema;     // JsonSchema, in the request's key order (properties are generated in it)
  std::string text;                  // Regex, Grammar (GBNF)
  std::vector<std::string> choices;  // Choice
  ToolCallFormat tool_calls;         // ToolCalls
  bool json_whitespace = true;       // JSON kinds: false = compact (disable_any_whitespace)
  std::string cache_key() const;     // identifies the compiled form (kind + content)
};

struct CompileLimits {
  GrammarLimits grammar{100000, 1000000, 2000.0};
  AutomatonLimits automaton;
};

struct CompiledGrammar {
  std::shared_ptr<GrammarAutomaton> automaton;
  double compile_ms = 0;      // building the grammar + the automaton + the precompute + the first mask (wall)
  double compile_cpu_ms = 0;  // the same in the compiling thread's CPU time (what the limit bounds)
  size_t rules = 0, elements = 0;
};

// Throws GrammarError (keyword names what is wrong) for an invalid or unsupported spec.
std::shared_ptr<const CompiledGrammar> compile_structured_output(const StructuredOutputSpec& spec,
                                                                 std::shared_ptr<const TokenVocabulary> vocab,
                                                                 const CompileLimits& limits = {});

// The grammar alone (tests and the benchmark inspect it).
Grammar build_grammar(const StructuredOutputSpec& spec, const GrammarLimits& limits);

// One choice's position in the grammar. Before `start_after_token` has been generated (the
// reasoning end, `</think>`) the output is free; from then on every token is masked.
class GrammarMatcher {
 public:
  GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar, int32_t start_after_token);

  bool active() const { return active_; }
  bool finished() const { return finished_; }
  // The allowed next tokens (packed bits, vocab.words() long): the grammar's tokens, and
  // `stop_ids` where the grammar may end (only those once it must end).
  void fill_mask(std::span<const int32_t> stop_ids, std::span<uint32_t> words) const;
  // Records the sampled token; throws striker::Error when the grammar does not allow it.
  void accept(int32_t token, std::span<const int32_t> stop_ids);
  // accept() for a token that may not fit (a speculative guess): false, and nothing recorded, when
  // the grammar does not allow it here.
  bool try_accept(int32_t token, std::span<const int32_t> stop_ids);

 private:
  std::shared_ptr<const CompiledGrammar> grammar_;
  int32_t start_after_;
  int32_t state_;
  bool active_;
  bool finished_ = false;
};

}  // namespace striker::grammar
