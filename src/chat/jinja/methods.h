// Python methods of str, list and dict, returned as bound callables by attribute lookup.
#pragma once
#include <optional>
#include <string>

#include "chat/jinja/value.h"

namespace striker::jinja {

// The bound method `obj.name`, or nullopt when the type has no such method. Methods the
// immutable sandbox forbids (list.append, dict.update, ...) give an Undefined that fails
// when called, as in jinja2.
std::optional<Value> bound_method(const Value& obj, const std::string& name);

// str.strip(chars) family, exposed for the trim filter.
std::string py_strip(const std::string& s, const Value& chars, bool left, bool right);
std::string py_capitalize(const std::string& s);
std::string py_replace(const std::string& s, const std::string& old, const std::string& repl, int64_t count);

}  // namespace striker::jinja
