// jinja2's built-in filters (the ones chat templates use), with tojson as Hugging Face
// overrides it: json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "chat/jinja/builtins.h"
#include "chat/jinja/methods.h"
#include "chat/jinja/pyformat.h"
#include "chat/jinja/renderer.h"
#include "chat/jinja/unicode.h"
#include "core/error.h"

namespace striker::jinja {
namespace {

using Params = std::vector<std::pair<const char*, std::optional<Value>>>;
using FilterFn = Value (*)(Renderer&, const Value&, CallArgs&);

[[noreturn]] void undefined_error(const Value& v) { throw Error(v.undefined_hint()); }

std::vector<Value> seq_of(const Value& v) {
  if (!v.is_undefined() && !v.is_list() && !v.is_dict() && !v.is_string())
    throw Error("'" + v.type_name() + "' object is not iterable");
  return iterate(v);
}

// jinja2's make_attrgetter: "a.b.0" looks up item-first at each step.
Value lookup_path(const Value& item, const Value& attribute) {
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

Value sort_key(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value(py_lower(v.as_string()));
  return v;
}

int64_t to_int(const Value& v, const char* what) {
  if (!v.is_int() && !v.is_bool()) throw Error(std::string(what) + " must be an integer, not " + v.type_name());
  return v.as_int();
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

// Python int(str, base): optional whitespace, sign, underscores between digits, 0x/0o/0b prefix.
std::optional<int64_t> parse_py_int(const std::string& raw, int base) {
  std::string s = py_strip(raw, Value::none(), true, true);
  size_t i = 0;
  bool neg = false;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
  if (i + 1 < s.size() && s[i] == '0') {
    char p = static_cast<char>(tolower(s[i + 1]));
    if ((p == 'x' && (base == 16 || base == 0)) || (p == 'o' && (base == 8 || base == 0)) ||
        (p == 'b' && (base == 2 || base == 0))) {
      base = p == 'x' ? 16 : p == 'o' ? 8 : 2;
      i += 2;
      if (i < s.size() && s[i] == '_') ++i;
    }
  }
  if (base == 0) base = 10;
  if (base < 2 || base > 36 || i >= s.size()) return std::nullopt;
  __int128 acc = 0;
  bool prev_digit = false;
  for (; i < s.size(); ++i) {
    char c = s[i];
    if (c == '_') {
      if (!prev_digit) return std::nullopt;
      prev_digit = false;
      continue;
    }
    int d = isdigit(static_cast<unsigned char>(c)) ? c - '0' : isalpha(static_cast<unsigned char>(c)) ? tolower(c) - 'a' + 10 : 99;
    if (d >= base) return std::nullopt;
    acc = acc * base + d;
    if (acc > static_cast<__int128>(INT64_MAX) + 1) throw Error("int(): value beyond 64 bits is not supported");
    prev_digit = true;
  }
  if (!prev_digit) return std::nullopt;
  if (neg) acc = -acc;
  if (acc > INT64_MAX) throw Error("int(): value beyond 64 bits is not supported");
  return static_cast<int64_t>(acc);
}

std::optional<double> parse_py_float(const std::string& raw) {
  std::string s = py_strip(raw, Value::none(), true, true);
  std::string clean;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '_') {
      if (i == 0 || i + 1 >= s.size() || !isdigit(static_cast<unsigned char>(s[i - 1])) || !isdigit(static_cast<unsigned char>(s[i + 1])))
        return std::nullopt;
      continue;
    }
    clean.push_back(s[i]);
  }
  std::string low = py_lower(clean);
  std::string body = (!low.empty() && (low[0] == '+' || low[0] == '-')) ? low.substr(1) : low;
  bool neg = !low.empty() && low[0] == '-';
  if (body == "inf" || body == "infinity") return neg ? -INFINITY : INFINITY;
  if (body == "nan") return NAN;
  if (body.empty() || body.find_first_not_of("0123456789.e+-") != std::string::npos) return std::nullopt;
  if (body.find_first_of("0123456789") == std::string::npos) return std::nullopt;
  try {
    size_t used = 0;
    double d = std::stod(clean, &used);
    if (used != clean.size()) return std::nullopt;
    return d;
  } catch (const std::out_of_range&) {
    return neg ? -INFINITY : INFINITY;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

Value f_default(Renderer&, const Value& v, CallArgs& a) {
  auto p = bind_args("default", a, {{"default_value", Value("")}, {"boolean", Value(false)}});
  if (v.is_undefined() || (p[1].truthy() && !v.truthy())) return p[0];
  return v;
}

Value f_length(Renderer&, const Value& v, CallArgs& a) {
  bind_args("length", a, {});
  switch (v.kind()) {
    case Value::Kind::Undefined: return Value(0);
    case Value::Kind::String: return Value(static_cast<int64_t>(utf8_length(v.as_string())));
    case Value::Kind::List: return Value(static_cast<int64_t>(v.as_list().size()));
    case Value::Kind::Dict: return Value(static_cast<int64_t>(v.as_dict().items.size()));
    default: throw Error("object of type '" + v.type_name() + "' has no len()");
  }
}

Value f_string(Renderer&, const Value& v, CallArgs& a) { bind_args("string", a, {}); return Value(py_str(v)); }
Value f_safe(Renderer&, const Value& v, CallArgs& a) { bind_args("safe", a, {}); return v.is_string() ? v : Value(py_str(v)); }
Value f_escape(Renderer&, const Value& v, CallArgs& a) { bind_args("escape", a, {}); return Value(html_escape(py_str(v))); }
Value f_upper(Renderer&, const Value& v, CallArgs& a) { bind_args("upper", a, {}); return Value(py_upper(py_str(v))); }
Value f_lower(Renderer&, const Value& v, CallArgs& a) { bind_args("lower", a, {}); return Value(py_lower(py_str(v))); }
Value f_capitalize(Renderer&, const Value& v, CallArgs& a) { bind_args("capitalize", a, {}); return Value(py_capitalize(py_str(v))); }

Value f_title(Renderer&, const Value& v, CallArgs& a) {
  bind_args("title", a, {});
  // jinja2 splits on runs of whitespace, '-', '(', '{', '[', '<' and capitalizes each piece.
  std::u32string u = utf8_decode(py_str(v));
  std::string out;
  bool at_start = true;
  for (char32_t c : u) {
    bool sep = py_isspace(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
    if (sep) {
      utf8_append(out, c);
      at_start = true;
    } else {
      utf8_append(out, at_start ? py_toupper(c) : py_tolower(c));
      at_start = false;
    }
  }
  return Value(out);
}

Value f_trim(Renderer&, const Value& v, CallArgs& a) {
  auto p = bind_args("trim", a, {{"chars", Value::none()}});
  return Value(py_strip(py_str(v), p[0], true, true));
}

Value f_replace(Renderer&, const Value& v, CallArgs& a) {
  auto p = bind_args("replace", a, {{"old", std::nullopt}, {"new", std::nullopt}, {"count", Value::none()}});
  int64_t count = p[2].is_none() ? -1 : to_int(p[2], "replace count");
  return Value(py_replace(py_str(v), py_str(p[0]), py_str(p[1]), count));
}

Value f_int(Renderer&, const Value& v, CallArgs& a) {
  auto p = bind_args("int", a, {{"default", Value(0)}, {"base", Value(10)}});
  if (v.is_int() || v.is_bool()) return Value(v.as_int());
  if (v.is_float()) {
    double d = v.as_float();
    if (std::isnan(d) || std::isinf(d)) return p[0];
    if (std::fabs(d) >= 9.2e18) throw Error("int(): value beyond 64 bits is not supported");
    return Value(static_cast<int64_t>(std::trunc(d)));
  }
  if (v.is_string()) {
    if (auto i = parse_py_int(v.as_string(), static_cast<int>(to_int(p[1], "int base")))) return Value(*i);
    if (auto d = parse_py_float(v.as_string())) {
      if (std::isnan(*d) || std::isinf(*d)) return p[0];
      if (std::fabs(*d) >= 9.2e18) throw Error("int(): value beyond 64 bits is not supported");
      return Value(static_cast<int64_t>(std::trunc(*d)));
    }
  }
  return p[0];
}

Value f_float(Renderer&, const Value& v, CallArgs& a) {
  auto p = bind_args("float", a, {{"default", Value(0.0)}});
  if (v.is_number()) return Value(v.as_float());
  if (v.is_string())
    if (auto d = parse_py_float(v.as_string())) return Value(*d);
  return p[0];
}

Value f_join(Renderer&, const Value& v, CallArgs& a) {
  auto p = bind_args("join", a, {{"d", Value("")}, {"attribute", Value::none()}});
  std::string sep = py_str(p[0]);
  std::string out;
  bool first = true;
  for (const auto& item : seq_of(v)) {
    if (!first) out += sep;
    first = false;
    out += py_str(p[1].is_none() ? item : lookup_path(item, p[1]));
  }
  return Value(out);
}

Value f_first(Renderer&, const Value& v, CallArgs& a) {
  bind_args("first", a, {});
  auto items = seq_of(v);
  if (items.empty()) return Value::undefined("No first item, sequence was empty.");
  return items.front();
}

Value f_last(Renderer&, const Value& v, CallArgs& a) {
  bind_args("last", a, {});
  auto items = seq_of(v);
  if (items.empty()) return Value::undefined("No last item, sequence was empty.");
  return items.back();
}

Value f_items(Renderer&, const Value& v, CallArgs& a) {
  bind_args("items", a, {});
  if (v.is_undefined()) return Value::list({});
  if (!v.is_dict()) throw Error("Can only get item pairs from a mapping.");
  std::vector<Value> out;
  for (const auto& [k, val] : v.as_dict().items) out.push_back(Value::list({k, val}, true));
  return Value::list(std::move(out));
}

Value f_list(Renderer&, const Value& v, CallArgs& a) {
  bind_args("list", a, {});
  return Value::list(seq_of(v));
}

Value f_map(Renderer& r, const Value& v, CallArgs& a) {
  std::vector<Value> out;
  const Value* attribute = nullptr;
  Value dflt;
  bool has_default = false;
  for (const auto& [k, val] : a.keyword) {
    if (k == "attribute") attribute = &val;
    else if (k == "default") { dflt = val; has_default = true; }
  }
  if (attribute) {
    for (const auto& item : seq_of(v)) {
      Value x = lookup_path(item, *attribute);
      out.push_back(x.is_undefined() && has_default ? dflt : x);
    }
    return Value::list(std::move(out));
  }
  if (a.positional.empty()) throw Error("map() requires a filter name or attribute=");
  std::string name = py_str(a.positional[0]);
  if (!has_filter(name)) throw Error("No filter named '" + name + "'");
  for (const auto& item : seq_of(v)) {
    CallArgs rest;
    rest.positional.assign(a.positional.begin() + 1, a.positional.end());
    rest.keyword = a.keyword;
    out.push_back(apply_filter(r, name, item, rest));
  }
  return Value::list(std::move(out));
}

Value select_impl(Renderer& r, const Value& v, CallArgs& a, bool by_attr, bool keep_if) {
  if (!a.keyword.empty()) throw Error("select/reject filters take no keyword arguments");
  size_t idx = 0;
  Value attribute;
  if (by_attr) {
    if (a.positional.empty()) throw Error("selectattr/rejectattr need an attribute name");
    attribute = a.positional[idx++];
  }
  std::string test;
  if (idx < a.positional.size()) test = py_str(a.positional[idx++]);
  if (!test.empty() && !has_test(test)) throw Error("No test named '" + test + "'");
  std::vector<Value> out;
  for (const auto& item : seq_of(v)) {
    r.count_step();
    Value subject = by_attr ? lookup_path(item, attribute) : item;
    bool ok;
    if (test.empty()) {
      ok = subject.truthy();
    } else {
      CallArgs targs;
      targs.positional.assign(a.positional.begin() + static_cast<long>(idx), a.positional.end());
      ok = apply_test(r, test, subject, targs);
    }
    if (ok == keep_if) out.push_back(item);
  }
  return Value::list(std::move(out));
}

Value f_select(Renderer& r, const Value& v, CallArgs& a) { return select_impl(r, v, a, false, true); }
Value f_reject(Renderer& r, const Value& v, CallArgs& a) { return select_impl(r, v, a, false, false); }
Value f_selectattr(Renderer& r, const Value& v, CallArgs& a) { return select_impl(r, v, a, true, true); }
Value f_rejectattr(Renderer& r, const Value& v, CallArgs& a) { return select_impl(r, v, a, true, false); }

Value f_unique(Renderer&, const Value& v, CallArgs& a) {
  auto p = bind_args("unique", a, {{"case_sensitive", Value(false)}, {"attribute", Value::none()}});
  std::vector<Value> out, seen;
  for (const auto& item : seq_of(v)) {
    Value key = sort_key(p[1].is_none() ? item : lookup_path(item, p[1]), p[0].truthy());
    bool dup = false;
    for (const auto& s : seen)
      if (py_equal(s, key)) dup = true;
    if (!dup) {
      seen.push_back(key);
      out.push_back(item);
    }
  }
  return Value::list(std::move(out));
}

void sort_values(std::vector<Value>& items, std::vector<Value> keys, bool reverse) {
  std::vector<size_t> order(items.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    return reverse ? py_compare(keys[y], keys[x]) < 0 : py_compare(keys[x], keys[y]) < 0;
  });
  std::vector<Value> sorted;
  for (size_t i : order) sorted.push_back(items[i]);
  items = std::move(sorted);
}

Value f_sort(Renderer&, const Value& v, CallArgs& a) {
  auto p = bind_args("sort", a, {{"reverse", Value(false)}, {"case_sensitive", Value(false)}, {"attribute", Value::none()}});
  std::vector<Value> items = seq_of(v);
  std::vector<Value> keys;
  for (const auto& item : items) {
    if (p[2].is_none()) {
      keys.push_back(sort_key(item, p[1].truthy()));
    } else {
      // attribute may list several comma-separated paths.
      std::string spec = py_str(p[2]);
      std::vector<Value> parts;
      size_t start = 0;
      while (true) {
        size_t comma = spec.find(',', start);
        parts.push_back(sort_key(lookup_path(item, Value(spec.substr(start, comma - start))), p[1].truthy()));
        if (comma == std::string::npos) break;
        start = comma + 1;
      }
      keys.push_back(parts.size() == 1 ? parts[0] : Value::list(parts));
    }
  }
  for (const auto& k : keys)
    if (k.is_undefined()) throw Error(k.undefined_hint());
  sort_values(items, keys, p[0].truthy());
  return Value::list(std::move(items));
}

Value f_dictsort(Renderer&, const Value& v, CallArgs& a) {
  auto p = bind_args("dictsort", a, {{"case_sensitive", Value(false)}, {"by", Value("key")}, {"reverse", Value(false)}});
  if (!v.is_dict()) throw Error("dictsort: expected a mapping, got " + v.type_name());
  std::string by = py_str(p[1]);
  if (by != "key" && by != "value") throw Error("You can only sort by either \"key\" or \"value\"");
  std::vector<Value> items, keys;
  for (const auto& [k, val] : v.as_dict().items) {
    items.push_back(Value::list({k, val}, true));
    keys.push_back(sort_key(by == "key" ? k : val, p[0].truthy()));
  }
  sort_values(items, keys, p[2].truthy());
  return Value::list(std::move(items));
}

Value f_reverse(Renderer&, const Value& v, CallArgs& a) {
  bind_args("reverse", a, {});
  if (v.is_string()) {
    std::u32string u = utf8_decode(v.as_string());
    std::reverse(u.begin(), u.end());
    return Value(utf8_encode(u));
  }
  std::vector<Value> items = seq_of(v);
  std::reverse(items.begin(), items.end());
  return Value::list(std::move(items));
}

Value f_batch(Renderer&, const Value& v, CallArgs& a) {
  auto p = bind_args("batch", a, {{"linecount", std::nullopt}, {"fill_with", Value::none()}});
  int64_t n = to_int(p[0], "batch linecount");
  if (n <= 0) throw Error("batch linecount must be positive");
  std::vector<Value> out, cur;
  for (const auto& item : seq_of(v)) {
    cur.push_back(item);
    if (static_cast<int64_t>(cur.size()) == n) {
      out.push_back(Value::list(std::move(cur)));
      cur.clear();
    }
  }
  if (!cur.empty()) {
    if (!p[1].is_none())
      while (static_cast<int64_t>(cur.size()) < n) cur.push_back(p[1]);
    out.push_back(Value::list(std::move(cur)));
  }
  return Value::list(std::move(out));
}

Value f_indent(Renderer& r, const Value& v, CallArgs& a) {
  auto p = bind_args("indent", a, {{"width", Value(4)}, {"first", Value(false)}, {"blank", Value(false)}});
  std::string ind = p[0].is_string() ? p[0].as_string() : std::string(static_cast<size_t>(std::max<int64_t>(0, to_int(p[0], "indent width"))), ' ');
  r.check_size(ind.size());
  std::string s = py_str(v) + "\n";
  CallArgs none;
  Value lines_v = bound_method(Value(s), "splitlines")->as_function().fn(r, none);
  std::vector<Value> lines = lines_v.as_list();
  std::string out;
  if (p[2].truthy()) {
    for (size_t i = 0; i < lines.size(); ++i) {
      if (i) out += "\n" + ind;
      out += lines[i].as_string();
      r.check_size(out.size());
    }
  } else {
    out = lines.empty() ? std::string() : lines[0].as_string();
    for (size_t i = 1; i < lines.size(); ++i) {
      out += "\n";
      if (!lines[i].as_string().empty()) out += ind;
      out += lines[i].as_string();
      r.check_size(out.size());
    }
  }
  if (p[1].truthy()) out = ind + out;
  return Value(out);
}

Value f_wordcount(Renderer&, const Value& v, CallArgs& a) {
  bind_args("wordcount", a, {});
  int64_t n = 0;
  bool in_word = false;
  for (char32_t c : utf8_decode(py_str(v))) {
    bool w = py_isalnum(c) || c == '_';
    if (w && !in_word) ++n;
    in_word = w;
  }
  return Value(n);
}

Value f_round(Renderer&, const Value& v, CallArgs& a) {
  auto p = bind_args("round", a, {{"precision", Value(0)}, {"method", Value("common")}});
  std::string method = py_str(p[1]);
  if (method != "common" && method != "ceil" && method != "floor")
    throw Error("method must be common, ceil or floor");
  if (!v.is_number()) throw Error("type " + v.type_name() + " doesn't define __round__ method");
  int64_t prec = to_int(p[0], "round precision");
  if (method == "common") {
    if (!v.is_float()) return Value(v.as_int());  // round(int, n) stays an int
    double d = v.as_float();
    if (std::isnan(d) || std::isinf(d)) return Value(d);
    if (prec > 300) return Value(d);
    if (prec < -308) return Value(0.0);
    if (prec >= 0) {
      // printf rounds the exact binary value half-to-even, like Python's round().
      char buf[512];
      std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(prec), d);
      return Value(std::strtod(buf, nullptr));
    }
    double scale = std::pow(10.0, static_cast<double>(-prec));
    double q = d / scale, fl = std::floor(q), diff = q - fl;
    double rq = diff > 0.5 ? fl + 1 : diff < 0.5 ? fl : (std::fmod(fl, 2.0) == 0 ? fl : fl + 1);
    return Value(rq * scale);
  }
  double scale = std::pow(10.0, static_cast<double>(prec));
  double x = v.as_float() * scale;
  return Value((method == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
}

Value f_abs(Renderer&, const Value& v, CallArgs& a) {
  bind_args("abs", a, {});
  if (v.is_float()) return Value(std::fabs(v.as_float()));
  if (v.is_int() || v.is_bool()) {
    if (v.as_int() == INT64_MIN) throw Error("integer overflow (values beyond 64 bits are not supported)");
    return Value(v.as_int() < 0 ? -v.as_int() : v.as_int());
  }
  if (v.is_undefined()) undefined_error(v);
  throw Error("bad operand type for abs(): '" + v.type_name() + "'");
}

Value min_max(const Value& v, CallArgs& a, bool want_max) {
  auto p = bind_args(want_max ? "max" : "min", a, {{"case_sensitive", Value(false)}, {"attribute", Value::none()}});
  auto items = seq_of(v);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  Value best_key;
  for (size_t i = 0; i < items.size(); ++i) {
    Value key = sort_key(p[1].is_none() ? items[i] : lookup_path(items[i], p[1]), p[0].truthy());
    if (key.is_undefined()) undefined_error(key);
    if (i == 0 || (want_max ? py_compare(key, best_key) > 0 : py_compare(key, best_key) < 0)) {
      best = i;
      best_key = key;
    }
  }
  return items[best];
}

Value f_max(Renderer&, const Value& v, CallArgs& a) { return min_max(v, a, true); }
Value f_min(Renderer&, const Value& v, CallArgs& a) { return min_max(v, a, false); }

Value f_sum(Renderer& r, const Value& v, CallArgs& a) {
  auto p = bind_args("sum", a, {{"attribute", Value::none()}, {"start", Value(0)}});
  Value total = p[1];
  for (const auto& item : seq_of(v)) {
    Value x = p[0].is_none() ? item : lookup_path(item, p[0]);
    if (x.is_undefined()) undefined_error(x);
    if (!x.is_number() || !total.is_number())
      throw Error("unsupported operand type(s) for +: '" + total.type_name() + "' and '" + x.type_name() + "'");
    if (total.is_float() || x.is_float()) {
      total = Value(total.as_float() + x.as_float());
    } else {
      int64_t s;
      if (__builtin_add_overflow(total.as_int(), x.as_int(), &s)) throw Error("integer overflow in sum");
      total = Value(s);
    }
    r.count_step();
  }
  return total;
}

Value f_tojson(Renderer& r, const Value& v, CallArgs& a) {
  auto p = bind_args("tojson", a, {{"ensure_ascii", Value(false)}, {"indent", Value::none()},
                                   {"separators", Value::none()}, {"sort_keys", Value(false)}});
  JsonDumpOptions o;
  o.ensure_ascii = p[0].truthy();
  if (p[1].is_string()) {
    o.indent = p[1].as_string();
  } else if (p[1].is_int() || p[1].is_bool()) {
    o.indent = std::string(static_cast<size_t>(std::max<int64_t>(0, std::min<int64_t>(p[1].as_int(), 1000))), ' ');
  } else if (!p[1].is_none()) {
    throw Error("tojson indent must be an int, a str or None");
  }
  if (o.indent) o.item_sep = ",";
  if (!p[2].is_none()) {
    if (!p[2].is_list() || p[2].as_list().size() != 2 || !p[2].as_list()[0].is_string() || !p[2].as_list()[1].is_string())
      throw Error("tojson separators must be a pair of strings");
    o.item_sep = p[2].as_list()[0].as_string();
    o.key_sep = p[2].as_list()[1].as_string();
  }
  o.sort_keys = p[3].truthy();
  std::string out = py_json_dumps(v, o);
  r.check_size(out.size());
  return Value(out);
}

Value f_center(Renderer& r, const Value& v, CallArgs& a) {
  auto p = bind_args("center", a, {{"width", Value(80)}});
  CallArgs args;
  args.positional.push_back(p[0]);
  return bound_method(Value(py_str(v)), "center")->as_function().fn(r, args);
}

Value f_attr(Renderer&, const Value& v, CallArgs& a) {
  auto p = bind_args("attr", a, {{"name", std::nullopt}});
  return get_attribute(v, py_str(p[0]));
}

Value f_format(Renderer&, const Value& v, CallArgs& a) {
  if (!a.positional.empty() && !a.keyword.empty())
    throw Error("can't handle positional and keyword arguments at the same time");
  std::string fmt = py_str(v);
  if (!a.keyword.empty()) {
    DictData d;
    for (const auto& [k, val] : a.keyword) d.set(Value(k), val);
    return Value(py_percent_format(fmt, Value::dict(std::move(d))));
  }
  return Value(py_percent_format(fmt, Value::list(a.positional, true)));
}

const std::map<std::string, FilterFn>& filters() {
  static const std::map<std::string, FilterFn> table = {
      {"default", f_default}, {"d", f_default}, {"length", f_length}, {"count", f_length},
      {"string", f_string}, {"safe", f_safe}, {"escape", f_escape}, {"e", f_escape},
      {"forceescape", f_escape}, {"upper", f_upper}, {"lower", f_lower}, {"capitalize", f_capitalize},
      {"title", f_title}, {"trim", f_trim}, {"replace", f_replace}, {"int", f_int}, {"float", f_float},
      {"join", f_join}, {"first", f_first}, {"last", f_last}, {"items", f_items}, {"list", f_list},
      {"map", f_map}, {"select", f_select}, {"reject", f_reject}, {"selectattr", f_selectattr},
      {"rejectattr", f_rejectattr}, {"unique", f_unique}, {"sort", f_sort}, {"dictsort", f_dictsort},
      {"reverse", f_reverse}, {"batch", f_batch}, {"indent", f_indent}, {"wordcount", f_wordcount},
      {"round", f_round}, {"abs", f_abs}, {"max", f_max}, {"min", f_min}, {"sum", f_sum},
      {"tojson", f_tojson}, {"center", f_center}, {"attr", f_attr}, {"format", f_format},
  };
  return table;
}

}  // namespace

bool has_filter(const std::string& name) { return filters().count(name) > 0; }

Value apply_filter(Renderer& r, const std::string& name, const Value& operand, CallArgs& args) {
  auto it = filters().find(name);
  if (it == filters().end()) throw Error("no filter named '" + name + "'");
  return it->second(r, operand, args);
}

}  // namespace striker::jinja
