// Numeric and aggregate filters: int, float, round, abs, min, max, sum, and tojson as
// Hugging Face overrides it (json.dumps with ensure_ascii=False by default).
#include <cmath>
#include <cstdio>

#include "chat/jinja/filters_impl.h"
#include "chat/jinja/methods.h"

namespace striker::jinja::filter_impl {
namespace {

using Params = std::vector<std::pair<const char*, std::optional<Value>>>;

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

}  // namespace

Value f_int(Renderer&, const Value& v, CallArgs& a) {
  auto p = bind_args("int", a, {{"default", Value(0)}, {"base", Value(10)}});
  if (v.is_undefined()) undefined_error(v);  // int(Undefined) raises in jinja2
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
  if (v.is_undefined()) undefined_error(v);
  if (v.is_number()) return Value(v.as_float());
  if (v.is_string())
    if (auto d = parse_py_float(v.as_string())) return Value(*d);
  return p[0];
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


}  // namespace striker::jinja::filter_impl
