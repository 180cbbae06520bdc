// The Jinja value model: JSON-like data (none, bool, int, float, string, list/tuple,
// insertion-ordered dict) plus callables, objects (namespace, loop) and jinja2's Undefined.
// Lists and dicts are immutable once built (the HF environment is an immutable sandbox),
// so values share them freely through shared_ptr.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace striker::jinja {

class Value;
class Renderer;

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

using NativeFn = std::function<Value(Renderer&, CallArgs&)>;

struct ListData {
  std::vector<Value> items;
  bool is_tuple = false;
  int depth = 1;  // container nesting, capped so recursion over values stays bounded
};

struct DictData {
  std::vector<std::pair<Value, Value>> items;  // insertion order, unique keys
  int depth = 1;  // set when wrapped in a Value
  const Value* find(const Value& key) const;
  const Value* find(const std::string& key) const;
  void set(Value key, Value value);
};

struct FunctionData {
  std::string name;
  NativeFn fn;
};

// A namespace() or a loop object: named attributes, assignable only for namespaces.
struct ObjectData {
  std::string type_name;  // "Namespace" or "LoopContext"
  bool assignable = false;
  DictData attrs;
};

class Value {
 public:
  enum class Kind { Undefined, None, Bool, Int, Float, String, List, Dict, Function, Object };

  Value() : kind_(Kind::Undefined) {}
  static Value undefined(std::string hint) {
    Value v;
    v.str_ = std::move(hint);
    return v;
  }
  static Value none() { Value v; v.kind_ = Kind::None; return v; }
  Value(bool b) : kind_(Kind::Bool), int_(b ? 1 : 0) {}
  Value(int64_t i) : kind_(Kind::Int), int_(i) {}
  Value(int i) : kind_(Kind::Int), int_(i) {}
  Value(double d) : kind_(Kind::Float), float_(d) {}
  Value(std::string s) : kind_(Kind::String), str_(std::move(s)) {}
  Value(const char* s) : kind_(Kind::String), str_(s) {}
  static Value list(std::vector<Value> items, bool is_tuple = false);
  static Value dict(DictData d);
  static Value function(std::string name, NativeFn fn);
  static Value object(std::shared_ptr<ObjectData> obj);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::Undefined; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  bool is_int() const { return kind_ == Kind::Int; }
  bool is_float() const { return kind_ == Kind::Float; }
  bool is_number() const { return kind_ == Kind::Int || kind_ == Kind::Float || kind_ == Kind::Bool; }
  bool is_string() const { return kind_ == Kind::String; }
  bool is_list() const { return kind_ == Kind::List; }  // list or tuple
  bool is_tuple() const { return kind_ == Kind::List && list_->is_tuple; }
  bool is_dict() const { return kind_ == Kind::Dict; }
  bool is_function() const { return kind_ == Kind::Function; }
  bool is_object() const { return kind_ == Kind::Object; }

  bool as_bool() const { return int_ != 0; }
  int64_t as_int() const { return int_; }  // Int or Bool
  double as_float() const { return kind_ == Kind::Float ? float_ : static_cast<double>(int_); }
  const std::string& as_string() const { return str_; }
  const std::string& undefined_hint() const { return str_; }
  // Throws striker::Error with the undefined value's hint (what was missing, and where).
  [[noreturn]] void raise_undefined() const;
  const std::vector<Value>& as_list() const { return list_->items; }
  const DictData& as_dict() const { return *dict_; }
  const FunctionData& as_function() const { return *fn_; }
  const std::shared_ptr<ObjectData>& as_object() const { return obj_; }
  int nesting() const;  // 0 for scalars, else container depth

  // Python truthiness.
  bool truthy() const;
  // Python type name as used in error messages ("str", "int", "dict", ...).
  std::string type_name() const;

  static Value from_json(const nlohmann::ordered_json& j);
  static Value from_json(const nlohmann::json& j);

 private:
  Kind kind_;
  int64_t int_ = 0;
  double float_ = 0;
  std::string str_;  // String, or the Undefined hint
  std::shared_ptr<const ListData> list_;
  std::shared_ptr<const DictData> dict_;
  std::shared_ptr<const FunctionData> fn_;
  std::shared_ptr<ObjectData> obj_;
};

// Python semantics shared by the interpreter, filters and tests.
std::string py_str(const Value& v);   // str(v); Undefined prints as ""
std::string py_repr(const Value& v);  // repr(v)
std::string py_float_repr(double d);
bool py_equal(const Value& a, const Value& b);
// <0, 0, >0; throws Error for types Python cannot order.
int py_compare(const Value& a, const Value& b);
// Python json.dumps(v, ensure_ascii=False, indent=..., separators=..., sort_keys=...).
struct JsonDumpOptions {
  std::optional<std::string> indent;  // nullopt = single line
  std::string item_sep = ", ";
  std::string key_sep = ": ";
  bool sort_keys = false;
  bool ensure_ascii = false;
};
std::string py_json_dumps(const Value& v, const JsonDumpOptions& opts);

}  // namespace striker::jinja
