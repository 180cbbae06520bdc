#include "chat/jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "chat/jinja/unicode.h"
#include "core/error.h"

namespace striker::jinja {

void Value::raise_undefined() const { throw Error(undefined_hint()); }

const Value* DictData::find(const Value& key) const {
  for (const auto& [k, v] : items)
    if (py_equal(k, key)) return &v;
  return nullptr;
}

const Value* DictData::find(const std::string& key) const {
  for (const auto& [k, v] : items)
    if (k.is_string() && k.as_string() == key) return &v;
  return nullptr;
}

void DictData::set(Value key, Value value) {
  for (auto& [k, v] : items)
    if (py_equal(k, key)) {
      v = std::move(value);
      return;
    }
  items.emplace_back(std::move(key), std::move(value));
}

namespace {
constexpr int kMaxContainerDepth = 512;
}

int Value::nesting() const {
  if (kind_ == Kind::List) return list_->depth;
  if (kind_ == Kind::Dict) return dict_->depth;
  return 0;
}

Value Value::list(std::vector<Value> items, bool is_tuple) {
  Value v;
  v.kind_ = Kind::List;
  auto data = std::make_shared<ListData>();
  int depth = 0;
  for (const auto& item : items) depth = std::max(depth, item.nesting());
  if (depth + 1 > kMaxContainerDepth)
    throw Error("lists/dicts nested deeper than " + std::to_string(kMaxContainerDepth) + " levels");
  data->depth = depth + 1;
  data->items = std::move(items);
  data->is_tuple = is_tuple;
  v.list_ = std::move(data);
  return v;
}

Value Value::dict(DictData d) {
  int depth = 0;
  for (const auto& [k, val] : d.items) depth = std::max(depth, val.nesting());
  if (depth + 1 > kMaxContainerDepth)
    throw Error("lists/dicts nested deeper than " + std::to_string(kMaxContainerDepth) + " levels");
  d.depth = depth + 1;
  Value v;
  v.kind_ = Kind::Dict;
  v.dict_ = std::make_shared<DictData>(std::move(d));
  return v;
}

Value Value::function(std::string name, NativeFn fn) {
  Value v;
  v.kind_ = Kind::Function;
  v.fn_ = std::make_shared<FunctionData>(FunctionData{std::move(name), std::move(fn)});
  return v;
}

Value Value::object(std::shared_ptr<ObjectData> obj) {
  Value v;
  v.kind_ = Kind::Object;
  v.obj_ = std::move(obj);
  return v;
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::Undefined:
    case Kind::None: return false;
    case Kind::Bool:
    case Kind::Int: return int_ != 0;
    case Kind::Float: return float_ != 0.0;
    case Kind::String: return !str_.empty();
    case Kind::List: return !list_->items.empty();
    case Kind::Dict: return !dict_->items.empty();
    case Kind::Function:
    case Kind::Object: return true;
  }
  return false;
}

std::string Value::type_name() const {
  switch (kind_) {
    case Kind::Undefined: return "Undefined";
    case Kind::None: return "NoneType";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::String: return "str";
    case Kind::List: return list_->is_tuple ? "tuple" : "list";
    case Kind::Dict: return "dict";
    case Kind::Function: return "function";
    case Kind::Object: return obj_->type_name;
  }
  return "?";
}

namespace {

// Deeper nesting than this is refused: recursion over it could exhaust the stack.
constexpr int kMaxNesting = 512;

template <class J>
Value value_from_json(const J& j, int depth = 0) {
  if (depth > kMaxNesting)
    throw Error("template variable: JSON nested deeper than " + std::to_string(kMaxNesting) + " levels");
  switch (j.type()) {
    case nlohmann::json::value_t::null: return Value::none();
    case nlohmann::json::value_t::boolean: return Value(j.template get<bool>());
    case nlohmann::json::value_t::number_integer: return Value(j.template get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      uint64_t u = j.template get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX))
        throw Error("template variable: integer " + std::to_string(u) + " is too large (limit is 2^63-1)");
      return Value(static_cast<int64_t>(u));
    }
    case nlohmann::json::value_t::number_float: return Value(j.template get<double>());
    case nlohmann::json::value_t::string: return Value(j.template get<std::string>());
    case nlohmann::json::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(value_from_json(e, depth + 1));
      return Value::list(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      DictData d;
      d.items.reserve(j.size());
      for (auto it = j.begin(); it != j.end(); ++it) d.items.emplace_back(Value(it.key()), value_from_json(it.value(), depth + 1));
      return Value::dict(std::move(d));
    }
    default: throw Error("template variable: unsupported JSON value (binary or discarded)");
  }
}

bool is_printable(char32_t c) {
  if (c < 0x20 || (c >= 0x7F && c <= 0xA0) || c == 0xAD) return false;
  if (c == 0x1680 || (c >= 0x2000 && c <= 0x200F) || (c >= 0x2028 && c <= 0x202F) || (c >= 0x205F && c <= 0x2064))
    return false;
  if (c == 0x3000 || c == 0xFEFF || (c >= 0xE000 && c <= 0xF8FF) || (c >= 0xFFF9 && c <= 0xFFFB)) return false;
  return true;
}

void append_hex(std::string& out, const char* prefix, unsigned value, int digits) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%s%0*x", prefix, digits, value);
  out += buf;
}

std::string repr_string(const std::string& s) {
  bool has_single = s.find('\'') != std::string::npos;
  bool has_double = s.find('"') != std::string::npos;
  char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  for (char32_t c : utf8_decode(s)) {
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (!is_printable(c)) {
      if (c < 0x100) append_hex(out, "\\x", c, 2);
      else if (c < 0x10000) append_hex(out, "\\u", c, 4);
      else append_hex(out, "\\U", c, 8);
    } else {
      utf8_append(out, c);
    }
  }
  out.push_back(quote);
  return out;
}

void json_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out.push_back('"');
  auto escape_cp = [&](char32_t c) {
    switch (c) {
      case '"': out += "\\\""; return;
      case '\\': out += "\\\\"; return;
      case '\n': out += "\\n"; return;
      case '\r': out += "\\r"; return;
      case '\t': out += "\\t"; return;
      case '\b': out += "\\b"; return;
      case '\f': out += "\\f"; return;
      default: break;
    }
    if (c < 0x20) {
      append_hex(out, "\\u", c, 4);
    } else if (ensure_ascii && c >= 0x7F) {
      if (c >= 0x10000) {
        char32_t v = c - 0x10000;
        append_hex(out, "\\u", 0xD800 + (v >> 10), 4);
        append_hex(out, "\\u", 0xDC00 + (v & 0x3FF), 4);
      } else {
        append_hex(out, "\\u", c, 4);
      }
    } else {
      utf8_append(out, c);
    }
  };
  if (!ensure_ascii) {
    for (char ch : s) {
      unsigned char c = static_cast<unsigned char>(ch);
      if (c >= 0x20 && c != '"' && c != '\\') out.push_back(ch);
      else escape_cp(c);
    }
  } else {
    for (char32_t c : utf8_decode(s)) escape_cp(c);
  }
  out.push_back('"');
}

std::string json_float(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  return py_float_repr(d);
}

std::string json_key(const Value& k) {
  switch (k.kind()) {
    case Value::Kind::String: return k.as_string();
    case Value::Kind::Int: return std::to_string(k.as_int());
    case Value::Kind::Bool: return k.as_bool() ? "true" : "false";
    case Value::Kind::None: return "null";
    case Value::Kind::Float: return json_float(k.as_float());
    default: throw Error("tojson: keys must be str, int, float, bool or None, not " + k.type_name());
  }
}

void dump(std::string& out, const Value& v, const JsonDumpOptions& o, int level) {
  if (level > kMaxNesting) throw Error("tojson: value nested deeper than " + std::to_string(kMaxNesting) + " levels");
  auto newline = [&](int lvl) {
    out.push_back('\n');
    for (int i = 0; i < lvl; ++i) out += *o.indent;
  };
  switch (v.kind()) {
    case Value::Kind::None: out += "null"; return;
    case Value::Kind::Bool: out += v.as_bool() ? "true" : "false"; return;
    case Value::Kind::Int: out += std::to_string(v.as_int()); return;
    case Value::Kind::Float: out += json_float(v.as_float()); return;
    case Value::Kind::String: json_string(out, v.as_string(), o.ensure_ascii); return;
    case Value::Kind::List: {
      const auto& items = v.as_list();
      if (items.empty()) {
        out += "[]";
        return;
      }
      out.push_back('[');
      if (o.indent) newline(level + 1);
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) {
          out += o.item_sep;
          if (o.indent) newline(level + 1);
        }
        dump(out, items[i], o, level + 1);
      }
      if (o.indent) newline(level);
      out.push_back(']');
      return;
    }
    case Value::Kind::Dict: {
      std::vector<std::pair<std::string, const Value*>> entries;
      for (const auto& [k, val] : v.as_dict().items) entries.emplace_back(json_key(k), &val);
      if (o.sort_keys)
        std::stable_sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      if (entries.empty()) {
        out += "{}";
        return;
      }
      out.push_back('{');
      if (o.indent) newline(level + 1);
      for (size_t i = 0; i < entries.size(); ++i) {
        if (i) {
          out += o.item_sep;
          if (o.indent) newline(level + 1);
        }
        json_string(out, entries[i].first, o.ensure_ascii);
        out += o.key_sep;
        dump(out, *entries[i].second, o, level + 1);
      }
      if (o.indent) newline(level);
      out.push_back('}');
      return;
    }
    default: throw Error("tojson: Object of type " + v.type_name() + " is not JSON serializable");
  }
}

}  // namespace

Value Value::from_json(const nlohmann::ordered_json& j) { return value_from_json(j); }
Value Value::from_json(const nlohmann::json& j) { return value_from_json(j); }

std::string py_float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);  // e.g. "-1.2345e+02"
  bool neg = sci[0] == '-';
  if (neg) sci.erase(0, 1);
  size_t epos = sci.find('e');
  std::string mant = sci.substr(0, epos);
  int exp10 = std::stoi(sci.substr(epos + 1));
  std::string digits;
  for (char c : mant)
    if (c != '.') digits.push_back(c);
  std::string out = neg ? "-" : "";
  if (exp10 < -4 || exp10 >= 16) {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exp10 < 0 ? '-' : '+', std::abs(exp10));
    out += eb;
  } else if (exp10 < 0) {
    out += "0." + std::string(static_cast<size_t>(-exp10 - 1), '0') + digits;
  } else {
    size_t int_len = static_cast<size_t>(exp10) + 1;
    if (digits.size() <= int_len) {
      out += digits + std::string(int_len - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, int_len) + "." + digits.substr(int_len);
    }
  }
  return out;
}

namespace {
std::string repr_impl(const Value& v, int depth);
std::string str_impl(const Value& v, int depth);
}  // namespace

std::string py_repr(const Value& v) { return repr_impl(v, 0); }
std::string py_str(const Value& v) { return str_impl(v, 0); }

namespace {

std::string repr_impl(const Value& v, int depth) {
  // Namespaces can contain themselves; the cap turns that into an error, not a stack overflow.
  if (depth > kMaxNesting) throw Error("value nested too deeply to print");
  switch (v.kind()) {
    case Value::Kind::String: return repr_string(v.as_string());
    case Value::Kind::List: {
      std::string out = v.is_tuple() ? "(" : "[";
      const auto& items = v.as_list();
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += ", ";
        out += repr_impl(items[i], depth + 1);
      }
      if (v.is_tuple() && items.size() == 1) out += ",";
      out += v.is_tuple() ? ")" : "]";
      return out;
    }
    case Value::Kind::Dict: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, val] : v.as_dict().items) {
        if (!first) out += ", ";
        first = false;
        out += repr_impl(k, depth + 1) + ": " + repr_impl(val, depth + 1);
      }
      return out + "}";
    }
    default: return str_impl(v, depth);
  }
}

std::string str_impl(const Value& v, int depth) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return "";
    case Value::Kind::None: return "None";
    case Value::Kind::Bool: return v.as_bool() ? "True" : "False";
    case Value::Kind::Int: return std::to_string(v.as_int());
    case Value::Kind::Float: return py_float_repr(v.as_float());
    case Value::Kind::String: return v.as_string();
    case Value::Kind::List:
    case Value::Kind::Dict: return repr_impl(v, depth);
    case Value::Kind::Function: return "<function " + v.as_function().name + ">";
    case Value::Kind::Object: {
      const auto& obj = *v.as_object();
      if (obj.type_name != "Namespace") return "<" + obj.type_name + " object>";
      return "<Namespace " + repr_impl(Value::dict(obj.attrs), depth + 1) + ">";
    }
  }
  return "";
}

}  // namespace

namespace {
bool equal_impl(const Value& a, const Value& b, int depth);
}

bool py_equal(const Value& a, const Value& b) { return equal_impl(a, b, 0); }

namespace {

bool equal_impl(const Value& a, const Value& b, int depth) {
  if (depth > kMaxNesting) throw Error("values nested too deeply to compare");
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_float() == b.as_float();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::Undefined:
    case Value::Kind::None: return true;
    case Value::Kind::String: return a.as_string() == b.as_string();
    case Value::Kind::List: {
      if (a.is_tuple() != b.is_tuple()) return false;
      const auto& x = a.as_list();
      const auto& y = b.as_list();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i)
        if (!equal_impl(x[i], y[i], depth + 1)) return false;
      return true;
    }
    case Value::Kind::Dict: {
      const auto& x = a.as_dict().items;
      const auto& y = b.as_dict();
      if (x.size() != y.items.size()) return false;
      for (const auto& [k, v] : x) {
        const Value* other = y.find(k);
        if (!other || !equal_impl(v, *other, depth + 1)) return false;
      }
      return true;
    }
    case Value::Kind::Function: return &a.as_function() == &b.as_function();
    case Value::Kind::Object: return a.as_object() == b.as_object();
    default: return false;
  }
}

}  // namespace

int py_compare(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) {
      double x = a.as_float(), y = b.as_float();
      return x < y ? -1 : (x > y ? 1 : 0);
    }
    return a.as_int() < b.as_int() ? -1 : (a.as_int() > b.as_int() ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) {
    int c = a.as_string().compare(b.as_string());
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
    const auto& x = a.as_list();
    const auto& y = b.as_list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (py_equal(x[i], y[i])) continue;
      return py_compare(x[i], y[i]);
    }
    return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
  }
  throw Error("'<' not supported between instances of '" + a.type_name() + "' and '" + b.type_name() + "'");
}

std::string py_json_dumps(const Value& v, const JsonDumpOptions& opts) {
  std::string out;
  dump(out, v, opts, 0);
  return out;
}

}  // namespace striker::jinja
