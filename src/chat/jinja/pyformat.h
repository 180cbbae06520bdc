// Python string formatting used by templates: `fmt % args` and str.format().
#pragma once
#include <string>

#include "chat/jinja/value.h"

namespace striker::jinja {

// printf-style `fmt % args` (args: a tuple, a dict for %(name)s, or a single value).
std::string py_percent_format(const std::string& fmt, const Value& args);
// str.format(*args, **kwargs) with {}, {0}, {name}, {name.attr} / {name[key]} and no format specs
// beyond an empty one.
std::string py_str_format(const std::string& fmt, const CallArgs& args);

}  // namespace striker::jinja
