#include "chat/jinja/methods.h"

#include <algorithm>

#include "chat/jinja/builtins.h"
#include "chat/jinja/pyformat.h"
#include "chat/jinja/unicode.h"
#include "core/error.h"

namespace striker::jinja {
namespace {

using Params = std::vector<std::pair<const char*, std::optional<Value>>>;

const std::string& need_str(const Value& v, const char* what) {
  if (!v.is_string()) throw Error(std::string(what) + " must be str, not " + v.type_name());
  return v.as_string();
}

int64_t need_int(const Value& v, const char* what) {
  if (!v.is_int() && !v.is_bool()) throw Error(std::string(what) + ": '" + v.type_name() + "' object cannot be interpreted as an integer");
  return v.as_int();
}

std::vector<std::string> split_ws(const std::u32string& s, int64_t maxsplit, bool from_right) {
  std::vector<std::string> parts;
  if (!from_right) {
    size_t i = 0, n = s.size();
    while (true) {
      while (i < n && py_isspace(s[i])) ++i;
      if (i >= n) break;
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
        size_t e = n;
        while (e > i && py_isspace(s[e - 1])) --e;
        parts.push_back(utf8_encode(s.substr(i, e - i)));
        break;
      }
      size_t j = i;
      while (j < n && !py_isspace(s[j])) ++j;
      parts.push_back(utf8_encode(s.substr(i, j - i)));
      i = j;
    }
    return parts;
  }
  int64_t i = static_cast<int64_t>(s.size()) - 1;
  while (true) {
    while (i >= 0 && py_isspace(s[i])) --i;
    if (i < 0) break;
    if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
      int64_t b = 0;
      while (b <= i && py_isspace(s[b])) ++b;
      parts.push_back(utf8_encode(s.substr(b, i - b + 1)));
      break;
    }
    int64_t j = i;
    while (j >= 0 && !py_isspace(s[j])) --j;
    parts.push_back(utf8_encode(s.substr(j + 1, i - j)));
    i = j;
  }
  std::reverse(parts.begin(), parts.end());
  return parts;
}

std::vector<std::string> split_sep(const std::string& s, const std::string& sep, int64_t maxsplit, bool from_right) {
  if (sep.empty()) throw Error("empty separator");
  std::vector<std::string> parts;
  if (!from_right) {
    size_t start = 0;
    while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
      size_t p = s.find(sep, start);
      if (p == std::string::npos) break;
      parts.push_back(s.substr(start, p - start));
      start = p + sep.size();
    }
    parts.push_back(s.substr(start));
    return parts;
  }
  size_t end = s.size();
  while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
    if (end < sep.size()) break;
    size_t p = s.rfind(sep, end - sep.size());
    if (p == std::string::npos) break;
    parts.push_back(s.substr(p + sep.size(), end - p - sep.size()));
    end = p;
  }
  parts.push_back(s.substr(0, end));
  std::reverse(parts.begin(), parts.end());
  return parts;
}

Value str_list(const std::vector<std::string>& parts) {
  std::vector<Value> items;
  items.reserve(parts.size());
  for (const auto& p : parts) items.emplace_back(p);
  return Value::list(std::move(items));
}

// Code-point index of a byte offset in valid UTF-8.
int64_t cp_index(const std::string& s, size_t byte) { return static_cast<int64_t>(utf8_length(std::string_view(s).substr(0, byte))); }

// Applies Python's optional [start:end] window (code points) for find/count/startswith.
std::string window(const std::string& s, const Value& start, const Value& end, int64_t& offset) {
  offset = 0;
  if ((start.is_undefined() || start.is_none()) && (end.is_undefined() || end.is_none())) return s;
  std::u32string u = utf8_decode(s);
  int64_t n = static_cast<int64_t>(u.size());
  auto norm = [n](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + n : v, 0, n); };
  int64_t b = (start.is_undefined() || start.is_none()) ? 0 : norm(need_int(start, "slice index"));
  int64_t e = (end.is_undefined() || end.is_none()) ? n : norm(need_int(end, "slice index"));
  offset = b;
  if (e <= b) return std::string();
  return utf8_encode(u.substr(b, e - b));
}

Value str_method(const std::string& s, const std::string& name, CallArgs& a) {
  auto args = [&](const Params& p) { return bind_args("str." + name, a, p); };
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    auto v = args({{"chars", Value::none()}});
    return Value(py_strip(s, v[0], name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    auto v = args({{"sep", Value::none()}, {"maxsplit", Value(-1)}});
    int64_t maxsplit = need_int(v[1], "maxsplit");
    if (v[0].is_none()) return str_list(split_ws(utf8_decode(s), maxsplit, name == "rsplit"));
    return str_list(split_sep(s, need_str(v[0], "sep"), maxsplit, name == "rsplit"));
  }
  if (name == "splitlines") {
    auto v = args({{"keepends", Value(false)}});
    std::u32string u = utf8_decode(s);
    std::vector<std::string> parts;
    size_t start = 0;
    for (size_t i = 0; i < u.size(); ++i) {
      char32_t c = u[i];
      bool brk = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E ||
                 c == 0x85 || c == 0x2028 || c == 0x2029;
      if (!brk) continue;
      size_t end = i;
      if (c == '\r' && i + 1 < u.size() && u[i + 1] == '\n') ++i;
      parts.push_back(utf8_encode(u.substr(start, (v[0].truthy() ? i + 1 : end) - start)));
      start = i + 1;
    }
    if (start < u.size()) parts.push_back(utf8_encode(u.substr(start)));
    return str_list(parts);
  }
  if (name == "startswith" || name == "endswith") {
    auto v = args({{"prefix", std::nullopt}, {"start", Value::none()}, {"end", Value::none()}});
    int64_t off;
    std::string w = window(s, v[1], v[2], off);
    std::vector<Value> cands = v[0].is_tuple() ? v[0].as_list() : std::vector<Value>{v[0]};
    for (const auto& c : cands) {
      const std::string& p = need_str(c, name == "startswith" ? "startswith first arg" : "endswith first arg");
      if (name == "startswith" ? w.compare(0, p.size(), p) == 0 && w.size() >= p.size()
                               : w.size() >= p.size() && w.compare(w.size() - p.size(), p.size(), p) == 0)
        return Value(true);
    }
    return Value(false);
  }
  if (name == "replace") {
    auto v = args({{"old", std::nullopt}, {"new", std::nullopt}, {"count", Value(-1)}});
    return Value(py_replace(s, need_str(v[0], "replace() argument 1"), need_str(v[1], "replace() argument 2"),
                            need_int(v[2], "count")));
  }
  if (name == "upper") { args({}); return Value(py_upper(s)); }
  if (name == "lower" || name == "casefold") { args({}); return Value(py_lower(s)); }
  if (name == "capitalize") { args({}); return Value(py_capitalize(s)); }
  if (name == "title" || name == "swapcase") {
    args({});
    std::string out;
    bool prev_cased = false;
    for (char32_t c : utf8_decode(s)) {
      bool cased = py_islower(c) || py_isupper(c);
      if (name == "swapcase") {
        if (py_isupper(c)) utf8_append(out, py_tolower(c));
        else append_upper(out, c);
      } else if (prev_cased) {
        utf8_append(out, py_tolower(c));
      } else {
        append_title(out, c);
      }
      prev_cased = cased;
    }
    return Value(out);
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    auto v = args({{"sub", std::nullopt}, {"start", Value::none()}, {"end", Value::none()}});
    const std::string& sub = need_str(v[0], "must be str");
    int64_t off;
    std::string w = window(s, v[1], v[2], off);
    if (name == "count") {
      if (sub.empty()) return Value(static_cast<int64_t>(utf8_length(w)) + 1);
      int64_t n = 0;
      for (size_t p = w.find(sub); p != std::string::npos; p = w.find(sub, p + sub.size())) ++n;
      return Value(n);
    }
    size_t p = (name == "find" || name == "index") ? w.find(sub) : w.rfind(sub);
    if (p == std::string::npos) {
      if (name == "index" || name == "rindex") throw Error("substring not found");
      return Value(-1);
    }
    return Value(off + cp_index(w, p));
  }
  if (name == "format") return Value(py_str_format(s, a));
  if (name == "join") {
    auto v = args({{"iterable", std::nullopt}});
    if (v[0].is_undefined()) throw Error(v[0].undefined_hint());
    std::string out;
    size_t i = 0;
    for (const auto& item : iterate(v[0])) {
      if (!item.is_string())
        throw Error("sequence item " + std::to_string(i) + ": expected str instance, " + item.type_name() + " found");
      if (i++) out += s;
      out += item.as_string();
    }
    return Value(out);
  }
  if (name == "isdigit" || name == "isnumeric" || name == "isdecimal" || name == "isalpha" || name == "isalnum" ||
      name == "isspace") {
    args({});
    std::u32string u = utf8_decode(s);
    if (u.empty()) return Value(false);
    for (char32_t c : u) {
      bool ok = name == "isalpha" ? py_isalpha(c) : name == "isalnum" ? py_isalnum(c)
                : name == "isspace" ? py_isspace(c) : py_isdigit(c);
      if (!ok) return Value(false);
    }
    return Value(true);
  }
  if (name == "islower" || name == "isupper") {
    args({});
    bool any_cased = false;
    for (char32_t c : utf8_decode(s)) {
      if (py_islower(c) || py_isupper(c)) {
        any_cased = true;
        if (name == "islower" ? py_isupper(c) : py_islower(c)) return Value(false);
      }
    }
    return Value(any_cased);
  }
  if (name == "center" || name == "ljust" || name == "rjust" || name == "zfill") {
    auto v = name == "zfill" ? args({{"width", std::nullopt}}) : args({{"width", std::nullopt}, {"fillchar", Value(" ")}});
    int64_t width = need_int(v[0], "width");
    std::u32string u = utf8_decode(s);
    int64_t n = static_cast<int64_t>(u.size());
    if (width <= n) return Value(s);
    if (width > 10'000'000) throw Error("str." + name + ": width too large");
    if (name == "zfill") {
      size_t sign = (!u.empty() && (u[0] == '+' || u[0] == '-')) ? 1 : 0;
      return Value(utf8_encode(u.substr(0, sign) + std::u32string(width - n, U'0') + u.substr(sign)));
    }
    std::u32string fill = utf8_decode(need_str(v[1], "fillchar"));
    if (fill.size() != 1) throw Error("The fill character must be exactly one character long");
    int64_t total = width - n, left = 0;
    if (name == "rjust") left = total;
    else if (name == "center") left = total / 2 + (total & width & 1);
    return Value(utf8_encode(std::u32string(left, fill[0]) + u + std::u32string(total - left, fill[0])));
  }
  if (name == "partition" || name == "rpartition") {
    auto v = args({{"sep", std::nullopt}});
    const std::string& sep = need_str(v[0], "sep");
    if (sep.empty()) throw Error("empty separator");
    size_t p = name == "partition" ? s.find(sep) : s.rfind(sep);
    if (p == std::string::npos)
      return name == "partition" ? Value::list({Value(s), Value(""), Value("")}, true)
                                 : Value::list({Value(""), Value(""), Value(s)}, true);
    return Value::list({Value(s.substr(0, p)), Value(sep), Value(s.substr(p + sep.size()))}, true);
  }
  if (name == "removeprefix" || name == "removesuffix") {
    auto v = args({{"affix", std::nullopt}});
    const std::string& x = need_str(v[0], name.c_str());
    if (name == "removeprefix" && s.compare(0, x.size(), x) == 0 && s.size() >= x.size()) return Value(s.substr(x.size()));
    if (name == "removesuffix" && s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0)
      return Value(s.substr(0, s.size() - x.size()));
    return Value(s);
  }
  throw Error("'str' object has no attribute '" + name + "'");
}

bool is_str_method(const std::string& n) {
  static const char* names[] = {"strip", "lstrip", "rstrip", "split", "rsplit", "splitlines", "startswith",
                                "endswith", "replace", "upper", "lower", "casefold", "capitalize", "title",
                                "swapcase", "find", "rfind", "index", "rindex", "count", "format", "join",
                                "isdigit", "isnumeric", "isdecimal", "isalpha", "isalnum", "isspace", "islower",
                                "isupper", "center", "ljust", "rjust", "zfill", "partition", "rpartition",
                                "removeprefix", "removesuffix"};
  for (const char* x : names)
    if (n == x) return true;
  return false;
}

Value unsafe(const std::string& type, const std::string& name) {
  return Value::undefined("access to attribute '" + name + "' of '" + type + "' object is unsafe.");
}

}  // namespace

std::string py_strip(const std::string& s, const Value& chars, bool left, bool right) {
  std::u32string u = utf8_decode(s);
  std::u32string set;
  bool ws = chars.is_none() || chars.is_undefined();
  if (!ws) set = utf8_decode(need_str(chars, "strip arg"));
  auto strip_it = [&](char32_t c) { return ws ? py_isspace(c) : set.find(c) != std::u32string::npos; };
  size_t b = 0, e = u.size();
  if (left)
    while (b < e && strip_it(u[b])) ++b;
  if (right)
    while (e > b && strip_it(u[e - 1])) --e;
  if (b == 0 && e == u.size()) return s;
  return utf8_encode(u.substr(b, e - b));
}

std::string py_capitalize(const std::string& s) {
  std::string out;
  bool first = true;
  for (char32_t c : utf8_decode(s)) {
    if (first) append_title(out, c);
    else utf8_append(out, py_tolower(c));
    first = false;
  }
  return out;
}

std::string py_replace(const std::string& s, const std::string& old, const std::string& repl, int64_t count) {
  std::string out;
  if (old.empty()) {
    std::u32string u = utf8_decode(s);
    int64_t done = 0;
    for (size_t i = 0; i <= u.size(); ++i) {
      if (count < 0 || done < count) {
        out += repl;
        ++done;
      }
      if (i < u.size()) utf8_append(out, u[i]);
    }
    return out;
  }
  size_t start = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    size_t p = s.find(old, start);
    if (p == std::string::npos) break;
    out.append(s, start, p - start);
    out += repl;
    start = p + old.size();
    ++done;
  }
  out.append(s, start, std::string::npos);
  return out;
}

std::optional<Value> bound_method(const Value& obj, const std::string& name) {
  if (obj.is_string()) {
    if (!is_str_method(name)) return std::nullopt;
    std::string s = obj.as_string();
    return Value::function("str." + name, [s, name](Renderer&, CallArgs& a) { return str_method(s, name, a); });
  }
  if (obj.is_list()) {
    const std::string type = obj.type_name();
    if (name == "index" || name == "count") {
      return Value::function(type + "." + name, [obj, name, type](Renderer&, CallArgs& a) -> Value {
        auto v = bind_args(type + "." + name, a, {{"value", std::nullopt}});
        int64_t i = 0, n = 0;
        for (const auto& item : obj.as_list()) {
          if (py_equal(item, v[0])) {
            if (name == "index") return Value(i);
            ++n;
          }
          ++i;
        }
        if (name == "index") throw Error(py_repr(v[0]) + " is not in " + type);
        return Value(n);
      });
    }
    if (name == "copy" && !obj.is_tuple())
      return Value::function("list.copy", [obj](Renderer&, CallArgs& a) -> Value {
        bind_args("list.copy", a, {});
        return Value::list(obj.as_list());
      });
    static const char* mutators[] = {"append", "extend", "insert", "pop", "remove", "reverse", "sort", "clear"};
    if (!obj.is_tuple())
      for (const char* m : mutators)
        if (name == m) return unsafe("list", name);
    return std::nullopt;
  }
  if (obj.is_dict()) {
    if (name == "items" || name == "keys" || name == "values" || name == "copy") {
      return Value::function("dict." + name, [obj, name](Renderer&, CallArgs& a) -> Value {
        bind_args("dict." + name, a, {});
        if (name == "copy") return Value::dict(obj.as_dict());
        std::vector<Value> out;
        for (const auto& [k, v] : obj.as_dict().items) {
          if (name == "items") out.push_back(Value::list({k, v}, true));
          else out.push_back(name == "keys" ? k : v);
        }
        return Value::list(std::move(out));
      });
    }
    if (name == "get") {
      return Value::function("dict.get", [obj](Renderer&, CallArgs& a) -> Value {
        auto v = bind_args("dict.get", a, {{"key", std::nullopt}, {"default", Value::none()}});
        const Value* found = obj.as_dict().find(v[0]);
        return found ? *found : v[1];
      });
    }
    static const char* mutators[] = {"pop", "popitem", "setdefault", "update", "clear"};
    for (const char* m : mutators)
      if (name == m) return unsafe("dict", name);
    return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace striker::jinja
