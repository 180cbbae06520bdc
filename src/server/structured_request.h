// Structured outputs in a request: OpenAI `response_format` (json_schema, json_object), vLLM
// `structured_outputs` (json, regex, choice, grammar, json_object) and the older guided_json /
// guided_regex / guided_choice / guided_grammar, plus tool_choice "required" / named for the
// GLM-4.7 tool-call format. Each becomes a compiled grammar (engine/grammar) in SamplingParams.
#pragma once
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/grammar/structured_output.h"
#include "engine/sampling_params.h"

namespace striker::server {

struct ServingContext;
struct ChatPrompt;

struct StructuredRequest {
  grammar::StructuredOutputSpec spec;
  std::string field;  // the request field it came from (the error's `param`)
};

// nullopt when the request asks for no constraint. Throws ApiError(400) naming the field for
// malformed or conflicting fields (two kinds at once, a schema that is not an object, ...).
// `body` in the client's key order: a schema's properties are generated in it (as vLLM does).
std::optional<StructuredRequest> parse_structured_request(const nlohmann::ordered_json& body);

// The tool-call constraint of a chat request whose tool_choice is "required" or a named
// function (nullopt otherwise). Refuses tool_choice together with another constraint.
std::optional<StructuredRequest> tool_call_request(const ServingContext& ctx, const ChatPrompt& prompt,
                                                   bool other_constraint);

// Compiles (or reuses) the grammar; a bad or unsupported spec is ApiError(400) whose message
// names the keyword and whose param is the field. `start_after_token`: see StructuredConstraint.
StructuredConstraint compile_structured_request(const ServingContext& ctx, const StructuredRequest& req,
                                                int32_t start_after_token);

}  // namespace striker::server
