// jinja2's built-in filters, tests and globals, Python methods of str/list/dict, and the
// attribute/item lookup rules of the immutable sandbox Hugging Face renders with.
#pragma once
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "chat/jinja/value.h"

namespace striker::jinja {

bool has_filter(const std::string& name);
bool has_test(const std::string& name);
Value apply_filter(Renderer& r, const std::string& name, const Value& operand, CallArgs& args);
bool apply_test(Renderer& r, const std::string& name, const Value& operand, CallArgs& args);

// `obj.name` (attribute first, then item) and `obj[key]` (item first, then attribute).
// Missing ones give an Undefined that carries jinja2's message.
Value get_attribute(const Value& obj, const std::string& name);
Value get_item(const Value& obj, const Value& key);

// The globals every render sees: range, dict, namespace, raise_exception, strftime_now, ...
void add_builtin_globals(DictData& globals);

// Python-like iteration: list items, dict keys, string characters; Undefined is empty.
std::vector<Value> iterate(const Value& v);
// `item in container`.
bool contains(const Value& container, const Value& item);

// Binds call arguments to named parameters like a Python signature. A parameter whose
// default is nullopt is required. Throws for unknown keywords or too many positionals.
std::vector<Value> bind_args(const std::string& fn_name, const CallArgs& args,
                             const std::vector<std::pair<const char*, std::optional<Value>>>& params);

}  // namespace striker::jinja
