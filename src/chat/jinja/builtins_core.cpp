// Attribute/item lookup, iteration, `in`, argument binding and the global functions.
#include <ctime>

#include "chat/jinja/builtins.h"
#include "chat/jinja/methods.h"
#include "chat/jinja/renderer.h"
#include "chat/jinja/unicode.h"
#include "core/error.h"

namespace striker::jinja {
namespace {

std::string object_desc(const Value& obj) {
  if (obj.is_none()) return "None";
  return "'" + obj.type_name() + " object'";
}

Value missing_attr(const Value& obj, const std::string& name) {
  return Value::undefined(object_desc(obj) + " has no attribute '" + name + "'");
}

}  // namespace

std::vector<Value> bind_args(const std::string& fn_name, const CallArgs& args,
                             const std::vector<std::pair<const char*, std::optional<Value>>>& params) {
  if (args.positional.size() > params.size())
    throw Error(fn_name + "() takes at most " + std::to_string(params.size()) + " argument(s) (" +
                std::to_string(args.positional.size()) + " given)");
  std::vector<Value> out(params.size());
  std::vector<bool> set(params.size(), false);
  for (size_t i = 0; i < args.positional.size(); ++i) {
    out[i] = args.positional[i];
    set[i] = true;
  }
  for (const auto& [k, v] : args.keyword) {
    size_t idx = params.size();
    for (size_t i = 0; i < params.size(); ++i)
      if (k == params[i].first) idx = i;
    if (idx == params.size()) throw Error(fn_name + "() got an unexpected keyword argument '" + k + "'");
    if (set[idx]) throw Error(fn_name + "() got multiple values for argument '" + k + "'");
    out[idx] = v;
    set[idx] = true;
  }
  for (size_t i = 0; i < params.size(); ++i) {
    if (set[i]) continue;
    if (!params[i].second) throw Error(fn_name + "() missing required argument '" + params[i].first + "'");
    out[i] = *params[i].second;
  }
  return out;
}

Value get_attribute(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) throw Error(obj.undefined_hint());
  if (auto m = bound_method(obj, name)) return *m;
  if (obj.is_dict()) {
    if (const Value* v = obj.as_dict().find(name)) return *v;
  } else if (obj.is_object()) {
    if (const Value* v = obj.as_object()->attrs.find(name)) return *v;
  }
  return missing_attr(obj, name);
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) throw Error(obj.undefined_hint());
  if (obj.is_dict()) {
    if (const Value* v = obj.as_dict().find(key)) return *v;
  } else if (obj.is_list() && (key.is_int() || key.is_bool())) {
    const auto& items = obj.as_list();
    int64_t i = key.as_int(), n = static_cast<int64_t>(items.size());
    if (i < 0) i += n;
    if (i >= 0 && i < n) return items[static_cast<size_t>(i)];
    return Value::undefined(object_desc(obj) + " has no element " + py_repr(key));
  } else if (obj.is_string() && (key.is_int() || key.is_bool())) {
    int64_t i = key.as_int();
    if (is_ascii(obj.as_string())) {
      int64_t n = static_cast<int64_t>(obj.as_string().size());
      if (i < 0) i += n;
      if (i >= 0 && i < n) return Value(std::string(1, obj.as_string()[static_cast<size_t>(i)]));
    } else {
      std::u32string u = utf8_decode(obj.as_string());
      int64_t n = static_cast<int64_t>(u.size());
      if (i < 0) i += n;
      if (i >= 0 && i < n) return Value(utf8_encode(u.substr(static_cast<size_t>(i), 1)));
    }
    return Value::undefined(object_desc(obj) + " has no element " + py_repr(key));
  } else if (obj.is_object() && key.is_string()) {
    if (const Value* v = obj.as_object()->attrs.find(key.as_string())) return *v;
  }
  if (key.is_string()) {
    if (auto m = bound_method(obj, key.as_string())) return *m;
    return missing_attr(obj, key.as_string());
  }
  return Value::undefined(object_desc(obj) + " has no element " + py_repr(key));
}

std::vector<Value> iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return {};
    case Value::Kind::List: return v.as_list();
    case Value::Kind::Dict: {
      std::vector<Value> keys;
      for (const auto& [k, val] : v.as_dict().items) keys.push_back(k);
      return keys;
    }
    case Value::Kind::String: {
      std::vector<Value> chars;
      if (is_ascii(v.as_string())) {
        for (char c : v.as_string()) chars.emplace_back(std::string(1, c));
      } else {
        for (char32_t c : utf8_decode(v.as_string())) {
          std::string s;
          utf8_append(s, c);
          chars.emplace_back(std::move(s));
        }
      }
      return chars;
    }
    default: throw Error("'" + v.type_name() + "' object is not iterable");
  }
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::Undefined: return false;
    case Value::Kind::String:
      if (!item.is_string())
        throw Error("'in <string>' requires string as left operand, not " + item.type_name());
      return container.as_string().find(item.as_string()) != std::string::npos;
    case Value::Kind::List:
      for (const auto& x : container.as_list())
        if (py_equal(x, item)) return true;
      return false;
    case Value::Kind::Dict:
      if (item.is_dict() || (item.is_list() && !item.is_tuple()) || item.is_object())
        throw Error("unhashable type: '" + item.type_name() + "'");
      return container.as_dict().find(item) != nullptr;
    default: throw Error("argument of type '" + container.type_name() + "' is not iterable");
  }
}

namespace {

Value make_namespace(Renderer& r, const CallArgs& args) {
  auto ns = std::make_shared<ObjectData>();
  r.own(ns);
  ns->type_name = "Namespace";
  ns->assignable = true;
  if (args.positional.size() > 1) throw Error("namespace() takes at most 1 positional argument");
  if (!args.positional.empty()) {
    const Value& init = args.positional[0];
    if (!init.is_dict()) throw Error("namespace() positional argument must be a dict, not " + init.type_name());
    for (const auto& [k, v] : init.as_dict().items) {
      if (!k.is_string()) throw Error("namespace() keys must be strings");
      ns->attrs.set(k, v);
    }
  }
  for (const auto& [k, v] : args.keyword) ns->attrs.set(Value(k), v);
  return Value::object(ns);
}

Value make_dict(const CallArgs& args) {
  DictData d;
  if (args.positional.size() > 1) throw Error("dict expected at most 1 argument");
  if (!args.positional.empty()) {
    const Value& init = args.positional[0];
    if (init.is_dict()) {
      d = init.as_dict();
    } else {
      for (const auto& pair : iterate(init)) {
        if (!pair.is_list() || pair.as_list().size() != 2)
          throw Error("dictionary update sequence element has wrong length; 2 is required");
        d.set(pair.as_list()[0], pair.as_list()[1]);
      }
    }
  }
  for (const auto& [k, v] : args.keyword) d.set(Value(k), v);
  return Value::dict(std::move(d));
}

Value make_range(const CallArgs& args) {
  if (!args.keyword.empty()) throw Error("range() takes no keyword arguments");
  std::vector<int64_t> n;
  for (const auto& a : args.positional) {
    if (!a.is_int() && !a.is_bool())
      throw Error("'" + a.type_name() + "' object cannot be interpreted as an integer");
    n.push_back(a.as_int());
  }
  int64_t start = 0, stop = 0, step = 1;
  if (n.size() == 1) stop = n[0];
  else if (n.size() == 2 || n.size() == 3) {
    start = n[0];
    stop = n[1];
    if (n.size() == 3) step = n[2];
  } else {
    throw Error("range expected 1 to 3 arguments, got " + std::to_string(n.size()));
  }
  if (step == 0) throw Error("range() arg 3 must not be zero");
  __int128 count = 0;
  if (step > 0 && stop > start) count = ((__int128)stop - start + step - 1) / step;
  if (step < 0 && stop < start) count = ((__int128)start - stop - step - 1) / -step;
  if (count > 100000) throw Error("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
  std::vector<Value> out;
  for (int64_t i = 0; i < static_cast<int64_t>(count); ++i) out.emplace_back(start + i * step);
  return Value::list(std::move(out));
}

}  // namespace

void add_builtin_globals(DictData& g) {
  g.set(Value("range"), Value::function("range", [](Renderer&, CallArgs& a) { return make_range(a); }));
  g.set(Value("dict"), Value::function("dict", [](Renderer&, CallArgs& a) { return make_dict(a); }));
  g.set(Value("namespace"), Value::function("namespace", [](Renderer& r, CallArgs& a) { return make_namespace(r, a); }));
  g.set(Value("raise_exception"), Value::function("raise_exception", [](Renderer&, CallArgs& a) -> Value {
          auto v = bind_args("raise_exception", a, {{"message", std::nullopt}});
          throw Error("raise_exception: " + py_str(v[0]));
        }));
  g.set(Value("strftime_now"), Value::function("strftime_now", [](Renderer&, CallArgs& a) -> Value {
          auto v = bind_args("strftime_now", a, {{"format", std::nullopt}});
          if (!v[0].is_string()) throw Error("strftime_now() argument must be str, not " + v[0].type_name());
          std::time_t now = std::time(nullptr);
          std::tm tm{};
          localtime_r(&now, &tm);
          char buf[512];
          size_t n = std::strftime(buf, sizeof buf, v[0].as_string().c_str(), &tm);
          if (n == 0 && !v[0].as_string().empty()) throw Error("strftime_now(): format result is empty or too long");
          return Value(std::string(buf, n));
        }));
  g.set(Value("joiner"), Value::function("joiner", [](Renderer&, CallArgs& a) -> Value {
          auto v = bind_args("joiner", a, {{"sep", Value(", ")}});
          auto used = std::make_shared<bool>(false);
          std::string sep = py_str(v[0]);
          return Value::function("joiner", [used, sep](Renderer&, CallArgs&) -> Value {
            if (!*used) {
              *used = true;
              return Value(std::string());
            }
            return Value(sep);
          });
        }));
}

}  // namespace striker::jinja
