// The GLM-4.7 tool-call format as a grammar (tool_choice "required" / named):
//
//   calls ::= call+ (or exactly one call)
//   call  ::= <tool_call> NAME ( <arg_key> KEY </arg_key> <arg_value> VALUE </arg_value> )* </tool_call>
//
// with the markers as whole tokens (as text where the tokenizer lacks them), one alternative per callable tool, the tool's properties in
// the order its schema lists them, as vLLM's xgrammar orders a schema's properties (required
// ones always, optional ones optionally, no undeclared keys), and each
// VALUE written the way the glm47 parser reads it back (chat-format.md §2.3): a property typed
// exactly "string" is raw text (no '<', its enum / pattern / length constraints applied), any
// other property is JSON for its schema, which the parser's type coercion turns back into that
// value. So the parsed `arguments` validate against the tool's schema.
#pragma once
#include "engine/grammar/grammar.h"
#include "engine/grammar/structured_output.h"

namespace striker::grammar {

class JsonPieces;

Element tool_calls_to_grammar(Grammar& g, JsonPieces& pieces, const ToolCallFormat& format);

}  // namespace striker::grammar
