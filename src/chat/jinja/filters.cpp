// jinja2's built-in filters (the ones chat templates use), with tojson as Hugging Face
// overrides it: json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "chat/jinja/builtins.h"
#include "chat/jinja/filters_impl.h"
#include "chat/jinja/methods.h"
#include "chat/jinja/pyformat.h"
#include "chat/jinja/renderer.h"
#include "chat/jinja/unicode.h"
#include "core/error.h"

namespace striker::jinja {
namespace {

using namespace filter_impl;

using Params = std::vector<std::pair<const char*, std::optional<Value>>>;
using FilterFn = Value (*)(Renderer&, const Value&, CallArgs&);

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
      if (at_start) append_title(out, c);
      else utf8_append(out, py_tolower(c));
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
  if (!v.truthy()) return Value::list({});  // jinja2 skips falsy inputs without iterating
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
  if (!v.truthy()) return Value::list({});  // jinja2 skips falsy inputs without iterating
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
    if (key.is_dict() || (key.is_list() && !key.is_tuple()) || key.is_object())
      throw Error("unhashable type: '" + key.type_name() + "'");
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
  if (v.is_undefined()) undefined_error(v);
  if (!v.is_string()) throw Error("indent: expected a string, got " + v.type_name());
  std::string s = v.as_string() + "\n";
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
