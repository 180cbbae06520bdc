// Internal to the filters: helpers shared by filters.cpp and filters_numeric.cpp.
#pragma once
#include <string>
#include <vector>

#include "chat/jinja/builtins.h"
#include "chat/jinja/renderer.h"
#include "chat/jinja/unicode.h"
#include "core/error.h"

namespace striker::jinja::filter_impl {

[[noreturn]] inline void undefined_error(const Value& v) { throw Error(v.undefined_hint()); }

inline std::vector<Value> seq_of(const Value& v) {
  if (!v.is_undefined() && !v.is_list() && !v.is_dict() && !v.is_string())
    throw Error("'" + v.type_name() + "' object is not iterable");
  return iterate(v);
}

// jinja2's make_attrgetter: "a.b.0" looks up item-first at each step.
inline Value lookup_path(const Value& item, const Value& attribute) {
  if (attribute.is_int()) return get_item(item, attribute);
  std::string path = py_str(attribute);
  Value cur = item;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    bool numeric = !part.empty() && part.find_first_not_of("0123456789") == std::string::npos;
    if (cur.is_undefined()) undefined_error(cur);
    cur = get_item(cur, numeric ? Value(static_cast<int64_t>(std::stoll(part))) : Value(part));
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}

inline Value sort_key(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value(py_lower(v.as_string()));
  return v;
}

inline int64_t to_int(const Value& v, const char* what) {
  if (!v.is_int() && !v.is_bool()) throw Error(std::string(what) + " must be an integer, not " + v.type_name());
  return v.as_int();
}

// Numeric / aggregate filters (filters_numeric.cpp).
Value f_int(Renderer&, const Value& v, CallArgs& a);
Value f_float(Renderer&, const Value& v, CallArgs& a);
Value f_round(Renderer&, const Value& v, CallArgs& a);
Value f_abs(Renderer&, const Value& v, CallArgs& a);
Value f_max(Renderer&, const Value& v, CallArgs& a);
Value f_min(Renderer&, const Value& v, CallArgs& a);
Value f_sum(Renderer& r, const Value& v, CallArgs& a);
Value f_tojson(Renderer& r, const Value& v, CallArgs& a);

}  // namespace striker::jinja::filter_impl
