// jinja2's built-in tests (`x is defined`, `x is string`, ...).
#include <cmath>
#include <map>

#include "chat/jinja/builtins.h"
#include "chat/jinja/renderer.h"
#include "chat/jinja/unicode.h"
#include "core/error.h"

namespace striker::jinja {
namespace {

using TestFn = bool (*)(Renderer&, const Value&, CallArgs&);

const Value& one_arg(const char* name, CallArgs& a) {
  if (a.positional.size() + a.keyword.size() != 1)
    throw Error(std::string("test '") + name + "' takes exactly one argument");
  return a.positional.empty() ? a.keyword[0].second : a.positional[0];
}

void no_args(const char* name, CallArgs& a) {
  if (!a.positional.empty() || !a.keyword.empty()) throw Error(std::string("test '") + name + "' takes no arguments");
}

int compare_for_test(const Value& l, const Value& r) {
  if (l.is_undefined()) throw Error(l.undefined_hint());
  if (r.is_undefined()) throw Error(r.undefined_hint());
  return py_compare(l, r);
}

Value modulo(const Value& v, const Value& d) {
  if (v.is_undefined()) throw Error(v.undefined_hint());
  if (!v.is_number() || !d.is_number())
    throw Error("unsupported operand type(s) for %: '" + v.type_name() + "' and '" + d.type_name() + "'");
  if (d.as_float() == 0) throw Error("integer division or modulo by zero");
  if (v.is_float() || d.is_float()) {
    double m = std::fmod(v.as_float(), d.as_float());
    if (m != 0 && ((m < 0) != (d.as_float() < 0))) m += d.as_float();
    return Value(m);
  }
  int64_t m = v.as_int() % d.as_int();
  if (m != 0 && ((m < 0) != (d.as_int() < 0))) m += d.as_int();
  return Value(m);
}

bool t_defined(Renderer&, const Value& v, CallArgs& a) { no_args("defined", a); return !v.is_undefined(); }
bool t_undefined(Renderer&, const Value& v, CallArgs& a) { no_args("undefined", a); return v.is_undefined(); }
bool t_none(Renderer&, const Value& v, CallArgs& a) { no_args("none", a); return v.is_none(); }
bool t_boolean(Renderer&, const Value& v, CallArgs& a) { no_args("boolean", a); return v.is_bool(); }
bool t_true(Renderer&, const Value& v, CallArgs& a) { no_args("true", a); return v.is_bool() && v.as_bool(); }
bool t_false(Renderer&, const Value& v, CallArgs& a) { no_args("false", a); return v.is_bool() && !v.as_bool(); }
bool t_integer(Renderer&, const Value& v, CallArgs& a) { no_args("integer", a); return v.is_int(); }
bool t_float(Renderer&, const Value& v, CallArgs& a) { no_args("float", a); return v.is_float(); }
bool t_number(Renderer&, const Value& v, CallArgs& a) { no_args("number", a); return v.is_number(); }
bool t_string(Renderer&, const Value& v, CallArgs& a) { no_args("string", a); return v.is_string(); }
bool t_mapping(Renderer&, const Value& v, CallArgs& a) { no_args("mapping", a); return v.is_dict(); }
bool t_sequence(Renderer&, const Value& v, CallArgs& a) {
  no_args("sequence", a);
  return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict();
}
bool t_iterable(Renderer&, const Value& v, CallArgs& a) {
  no_args("iterable", a);
  return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict();
}
// jinja2's Undefined defines __call__ (to raise), so callable() is true for it.
bool t_callable(Renderer&, const Value& v, CallArgs& a) {
  no_args("callable", a);
  return v.is_function() || v.is_undefined();
}
bool t_odd(Renderer&, const Value& v, CallArgs& a) { no_args("odd", a); return modulo(v, Value(2)).as_float() == 1; }
bool t_even(Renderer&, const Value& v, CallArgs& a) { no_args("even", a); return modulo(v, Value(2)).as_float() == 0; }
bool t_divisibleby(Renderer&, const Value& v, CallArgs& a) {
  return modulo(v, one_arg("divisibleby", a)).as_float() == 0;
}
bool t_eq(Renderer&, const Value& v, CallArgs& a) { return py_equal(v, one_arg("eq", a)); }
bool t_ne(Renderer&, const Value& v, CallArgs& a) { return !py_equal(v, one_arg("ne", a)); }
bool t_lt(Renderer&, const Value& v, CallArgs& a) { return compare_for_test(v, one_arg("lt", a)) < 0; }
bool t_le(Renderer&, const Value& v, CallArgs& a) { return compare_for_test(v, one_arg("le", a)) <= 0; }
bool t_gt(Renderer&, const Value& v, CallArgs& a) { return compare_for_test(v, one_arg("gt", a)) > 0; }
bool t_ge(Renderer&, const Value& v, CallArgs& a) { return compare_for_test(v, one_arg("ge", a)) >= 0; }
bool t_in(Renderer&, const Value& v, CallArgs& a) { return contains(one_arg("in", a), v); }
bool t_sameas(Renderer&, const Value& v, CallArgs& a) {
  const Value& o = one_arg("sameas", a);
  if (v.kind() != o.kind()) return false;
  switch (v.kind()) {
    case Value::Kind::None:
    case Value::Kind::Undefined: return true;
    case Value::Kind::Bool: return v.as_bool() == o.as_bool();
    case Value::Kind::Int: return v.as_int() == o.as_int() && v.as_int() >= -5 && v.as_int() <= 256;
    case Value::Kind::List: return &v.as_list() == &o.as_list();
    case Value::Kind::Dict: return &v.as_dict() == &o.as_dict();
    case Value::Kind::Object: return v.as_object() == o.as_object();
    case Value::Kind::Function: return &v.as_function() == &o.as_function();
    default: return false;
  }
}
bool t_lower(Renderer&, const Value& v, CallArgs& a) {
  no_args("lower", a);
  std::string s = py_str(v);
  bool cased = false;
  for (char32_t c : utf8_decode(s)) {
    if (py_isupper(c)) return false;
    if (py_islower(c)) cased = true;
  }
  return cased;
}
bool t_upper(Renderer&, const Value& v, CallArgs& a) {
  no_args("upper", a);
  std::string s = py_str(v);
  bool cased = false;
  for (char32_t c : utf8_decode(s)) {
    if (py_islower(c)) return false;
    if (py_isupper(c)) cased = true;
  }
  return cased;
}
bool t_escaped(Renderer&, const Value&, CallArgs& a) { no_args("escaped", a); return false; }
bool t_filter(Renderer&, const Value& v, CallArgs& a) { no_args("filter", a); return v.is_string() && has_filter(v.as_string()); }
bool t_test(Renderer&, const Value& v, CallArgs& a) { no_args("test", a); return v.is_string() && has_test(v.as_string()); }

const std::map<std::string, TestFn>& tests() {
  static const std::map<std::string, TestFn> table = {
      {"defined", t_defined}, {"undefined", t_undefined}, {"none", t_none}, {"boolean", t_boolean},
      {"true", t_true}, {"false", t_false}, {"integer", t_integer}, {"float", t_float},
      {"number", t_number}, {"string", t_string}, {"mapping", t_mapping}, {"sequence", t_sequence},
      {"iterable", t_iterable}, {"callable", t_callable}, {"odd", t_odd}, {"even", t_even},
      {"divisibleby", t_divisibleby}, {"eq", t_eq}, {"equalto", t_eq}, {"==", t_eq}, {"ne", t_ne},
      {"!=", t_ne}, {"lt", t_lt}, {"lessthan", t_lt}, {"<", t_lt}, {"le", t_le}, {"<=", t_le},
      {"gt", t_gt}, {"greaterthan", t_gt}, {">", t_gt}, {"ge", t_ge}, {">=", t_ge}, {"in", t_in},
      {"sameas", t_sameas}, {"lower", t_lower}, {"upper", t_upper}, {"escaped", t_escaped},
      {"filter", t_filter}, {"test", t_test},
  };
  return table;
}

}  // namespace

bool has_test(const std::string& name) { return tests().count(name) > 0; }

bool apply_test(Renderer& r, const std::string& name, const Value& operand, CallArgs& args) {
  auto it = tests().find(name);
  if (it == tests().end()) throw Error("no test named '" + name + "'");
  return it->second(r, operand, args);
}

}  // namespace striker::jinja
