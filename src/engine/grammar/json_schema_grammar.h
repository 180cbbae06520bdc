// JSON Schema -> grammar: every output the grammar allows validates against the schema.
//
// Supported (what vLLM's default xgrammar backend accepts): type (one or a list), properties,
// required, additionalProperties (bool or schema), enum, const, items, prefixItems, minItems,
// maxItems, anyOf, oneOf (as anyOf: keep the branches disjoint), allOf with one schema, $ref to
// "#", "#/$defs/..." and "#/definitions/..." (recursion allowed), string minLength / maxLength /
// pattern (fullmatch) / format (date, time, date-time, email, uuid, ipv4; others are annotations
// and ignored, as JSON Schema says), integer and number minimum / maximum / exclusiveMinimum /
// exclusiveMaximum (number bounds must be integers), boolean, null, true/false schemas.
// Annotations (title, description, default, examples, $schema, $id, $comment, ...) are ignored.
// Like xgrammar's strict mode, an object with `properties` and no `additionalProperties`
// allows no other keys; properties are written in the schema's order (as xgrammar does: the
// schema is an ordered_json, parsed from the request in its key order), required ones always,
// optional ones optionally; required names that `properties` lacks follow, in `required` order.
// Anything else (multipleOf, uniqueItems, patternProperties, not, if/then/else, ...) is a
// GrammarError naming the keyword, so the server answers 400 rather than serve a wrong output.
#pragma once
#include <nlohmann/json.hpp>

#include "engine/grammar/grammar.h"

namespace striker::grammar {

class JsonPieces;

// Adds the schema's rules to `g` and returns the element matching one instance. `$ref`s
// resolve against `root` (the schema itself when null).
Element json_schema_to_grammar(Grammar& g, JsonPieces& pieces, const nlohmann::ordered_json& schema,
                               const nlohmann::ordered_json* root = nullptr);

}  // namespace striker::grammar
