#include "chat/jinja/renderer.h"

#include <cmath>

#include "chat/jinja/builtins.h"
#include "chat/jinja/operators.h"
#include "chat/jinja/unicode.h"
#include "core/error.h"

namespace striker::jinja {

const Value* Scope::find(const std::string& name) const {
  for (const Scope* s = this; s; s = s->parent.get())
    for (const auto& [k, v] : s->vars)
      if (k == name) return &v;
  return nullptr;
}

void Scope::set(const std::string& name, Value v) {
  for (auto& [k, old] : vars)
    if (k == name) {
      old = std::move(v);
      return;
    }
  vars.emplace_back(name, std::move(v));
}

void Renderer::count_step() {
  if (++steps_ > limits_.max_steps)
    throw Error("template exceeded " + std::to_string(limits_.max_steps) + " loop iterations / calls");
}

void Renderer::check_size(size_t bytes) const {
  if (bytes > limits_.max_output_bytes)
    throw Error("template output exceeds " + std::to_string(limits_.max_output_bytes) + " bytes");
}

void Renderer::append(const std::string& s) {
  check_size(out_->size() + s.size());
  *out_ += s;
}

std::shared_ptr<Scope> Renderer::child_scope(const std::vector<std::string>& locals) const {
  auto s = std::make_shared<Scope>();
  s->parent = scope_;
  for (const auto& name : locals) s->set(name, Value::undefined("'" + name + "' is undefined"));
  return s;
}

std::string Renderer::render(const Body& body, const std::vector<std::string>& root_locals, const DictData& globals) {
  auto builtins = std::make_shared<Scope>();
  DictData g;
  add_builtin_globals(g);
  for (auto& [k, v] : g.items) builtins->set(k.as_string(), v);
  auto context = std::make_shared<Scope>();
  context->parent = builtins;
  // A dict's keys are unique: append them (set() scans, quadratic in a request's many kwargs).
  for (const auto& [k, v] : globals.items) {
    if (!k.is_string()) throw Error(origin_ + ": template variable names must be strings");
    context->vars.emplace_back(k.as_string(), v);
  }
  scope_ = context;
  scope_ = child_scope(root_locals);
  std::string out;
  out_ = &out;
  try {
    exec_body(body);
  } catch (const Error& e) {
    release_owned();
    throw Error(origin_ + ":" + std::to_string(line_) + ":" + std::to_string(col_) + ": " + e.what());
  } catch (const std::exception& e) {  // e.g. std::out_of_range from a numeric conversion
    release_owned();
    throw Error(origin_ + ":" + std::to_string(line_) + ":" + std::to_string(col_) + ": " + e.what());
  } catch (...) {
    release_owned();
    throw;
  }
  release_owned();
  return out;
}

void Renderer::release_owned() {
  scope_.reset();
  for (auto& obj : owned_) obj->attrs.items.clear();
  owned_.clear();
}

Renderer::Flow Renderer::exec_body(const Body& body) {
  for (const auto& s : body) {
    Flow f = exec(*s);
    if (f != Flow::Normal) return f;
  }
  return Flow::Normal;
}

std::string Renderer::capture(const Body& body, const std::vector<std::string>& locals) {
  std::string buf;
  std::string* saved = out_;
  auto saved_scope = scope_;
  out_ = &buf;
  scope_ = child_scope(locals);  // block bodies are frames of their own in jinja2
  try {
    exec_body(body);
  } catch (...) {
    out_ = saved;
    scope_ = saved_scope;
    throw;
  }
  out_ = saved;
  scope_ = saved_scope;
  return buf;
}

Renderer::Flow Renderer::exec(const Stmt& s) {
  line_ = s.line;
  col_ = s.col;
  switch (s.kind) {
    case Stmt::Kind::Text: append(s.text); return Flow::Normal;
    case Stmt::Kind::Output: append(py_str(eval(*s.expr))); return Flow::Normal;
    case Stmt::Kind::If:
      for (const auto& [cond, body] : s.branches)
        if (eval(*cond).truthy()) return exec_body(body);
      return exec_body(s.else_body);
    case Stmt::Kind::For: return exec_for(s);
    case Stmt::Kind::Set: assign(s.target, eval(*s.expr)); return Flow::Normal;
    case Stmt::Kind::SetBlock: {
      Value v(capture(s.body, s.body_locals));
      if (s.filter) v = apply_filter_chain(*s.filter, v);
      assign(s.target, v);
      return Flow::Normal;
    }
    case Stmt::Kind::Macro: scope_->set(s.macro->name, make_macro(s.macro, scope_)); return Flow::Normal;
    case Stmt::Kind::CallBlock: {
      Value caller = make_macro(s.macro, scope_);
      append(py_str(eval_call(*s.expr, {{"caller", caller}})));
      return Flow::Normal;
    }
    case Stmt::Kind::FilterBlock: {
      Value v(capture(s.body, s.body_locals));
      append(py_str(apply_filter_chain(*s.filter, v)));
      return Flow::Normal;
    }
    case Stmt::Kind::Break: return Flow::Break;
    case Stmt::Kind::Continue: return Flow::Continue;
    case Stmt::Kind::With: {
      auto inner = child_scope(s.body_locals);
      for (const auto& [t, e] : s.with_assignments) {
        Value v = eval(*e);
        auto saved = scope_;
        scope_ = inner;
        assign(t, v);
        scope_ = saved;
      }
      auto saved = scope_;
      scope_ = inner;
      Flow f;
      try {
        f = exec_body(s.body);
      } catch (...) {
        scope_ = saved;
        throw;
      }
      scope_ = saved;
      return f;
    }
    case Stmt::Kind::Scope: {
      auto saved = scope_;
      scope_ = child_scope(s.body_locals);
      Flow f;
      try {
        f = exec_body(s.body);
      } catch (...) {
        scope_ = saved;
        throw;
      }
      scope_ = saved;
      return f;
    }
  }
  return Flow::Normal;
}

Value Renderer::apply_filter_chain(const Expr& chain, Value operand) {
  // The chain is nested Filter nodes whose innermost operand is null.
  if (chain.a) operand = apply_filter_chain(*chain.a, operand);
  CallArgs args;
  for (const auto& a : chain.items) args.positional.push_back(eval(*a));
  for (const auto& kw : chain.kwargs) args.keyword.emplace_back(kw.name, eval(*kw.value));
  line_ = chain.line;
  col_ = chain.col;
  return apply_filter(*this, chain.name, operand, args);
}

void Renderer::assign(const Target& t, const Value& v) {
  if (!t.attr.empty()) {
    const Value* obj = scope_->find(t.names[0]);
    if (!obj || !obj->is_object() || !obj->as_object()->assignable)
      throw Error("cannot assign attribute on non-namespace object");
    obj->as_object()->attrs.set(Value(t.attr), v);
    return;
  }
  if (!t.is_tuple) {
    scope_->set(t.names[0], v);
    return;
  }
  if (v.is_undefined()) v.raise_undefined();
  std::vector<Value> items;
  if (v.is_list() || v.is_dict() || v.is_string()) items = iterate(v);
  else throw Error("cannot unpack non-iterable " + v.type_name() + " object");
  if (items.size() > t.names.size())
    throw Error("too many values to unpack (expected " + std::to_string(t.names.size()) + ")");
  if (items.size() < t.names.size())
    throw Error("not enough values to unpack (expected " + std::to_string(t.names.size()) + ", got " +
                std::to_string(items.size()) + ")");
  for (size_t i = 0; i < items.size(); ++i) scope_->set(t.names[i], items[i]);
}

Renderer::Flow Renderer::exec_for(const Stmt& s) {
  Value seq = eval(*s.expr);
  if (!seq.is_undefined() && !seq.is_list() && !seq.is_dict() && !seq.is_string())
    throw Error("'" + seq.type_name() + "' object is not iterable");
  std::vector<Value> items = iterate(seq);
  auto saved = scope_;
  auto restore = [&] { scope_ = saved; };
  try {
    if (s.filter) {
      std::vector<Value> kept;
      for (auto& item : items) {
        count_step();
        scope_ = std::make_shared<Scope>();
        scope_->parent = saved;
        assign(s.target, item);
        if (eval(*s.filter).truthy()) kept.push_back(std::move(item));
      }
      items = std::move(kept);
      restore();
    }
    const int64_t n = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < n; ++i) {
      count_step();
      scope_ = saved;
      scope_ = child_scope(s.body_locals);
      assign(s.target, items[i]);
      auto loop = std::make_shared<ObjectData>();
      loop->type_name = "LoopContext";
      auto& a = loop->attrs;
      a.set(Value("index"), Value(i + 1));
      a.set(Value("index0"), Value(i));
      a.set(Value("revindex"), Value(n - i));
      a.set(Value("revindex0"), Value(n - i - 1));
      a.set(Value("first"), Value(i == 0));
      a.set(Value("last"), Value(i == n - 1));
      a.set(Value("length"), Value(n));
      a.set(Value("depth"), Value(1));
      a.set(Value("depth0"), Value(0));
      a.set(Value("previtem"), i > 0 ? items[i - 1] : Value::undefined("there is no previous item"));
      a.set(Value("nextitem"), i + 1 < n ? items[i + 1] : Value::undefined("there is no next item"));
      a.set(Value("cycle"), Value::function("cycle", [i](Renderer&, CallArgs& args) -> Value {
              if (args.positional.empty()) throw Error("no items for cycling given");
              return args.positional[static_cast<size_t>(i) % args.positional.size()];
            }));
      scope_->set("loop", Value::object(loop));
      Flow f = exec_body(s.body);
      if (f == Flow::Break) break;
    }
    if (n == 0) {
      scope_ = saved;
      scope_ = child_scope(s.else_locals);
      exec_body(s.else_body);
    }
  } catch (...) {
    restore();
    throw;
  }
  restore();
  return Flow::Normal;
}

Value Renderer::make_macro(const std::shared_ptr<MacroDef>& def, std::shared_ptr<Scope> closure) {
  // The closure holds the defining scope weakly so a macro stored in its own scope
  // does not keep that scope alive forever; the scope outlives every legal call.
  std::weak_ptr<Scope> weak = closure;
  return Value::function(def->name, [def, weak](Renderer& r, CallArgs& args) -> Value {
    auto scope = weak.lock();
    if (!scope) throw Error("macro '" + def->name + "' called after its scope ended");
    return r.call_macro(*def, scope, args);
  });
}

Value Renderer::call_macro(const MacroDef& def, const std::shared_ptr<Scope>& closure, CallArgs& args) {
  if (++call_depth_ > limits_.max_call_depth) {
    --call_depth_;
    throw Error("macro recursion is too deep (limit " + std::to_string(limits_.max_call_depth) + ")");
  }
  struct DepthRestore {
    int& d;
    ~DepthRestore() { --d; }
  } depth_restore{call_depth_};
  count_step();
  auto frame = std::make_shared<Scope>();
  frame->parent = closure;
  for (const auto& name : def.locals) frame->set(name, Value::undefined("'" + name + "' is undefined"));
  const size_t np = def.params.size();
  if (args.positional.size() > np && !def.uses_varargs)
    throw Error("macro '" + def.name + "' takes not more than " + std::to_string(np) + " argument(s)");
  std::vector<bool> given(np, false);
  std::vector<Value> bound(np);
  for (size_t i = 0; i < np && i < args.positional.size(); ++i) {
    bound[i] = args.positional[i];
    given[i] = true;
  }
  DictData extra_kwargs;
  bool caller_given = false;
  for (auto& [k, v] : args.keyword) {
    size_t idx = np;
    for (size_t i = 0; i < np; ++i)
      if (def.params[i].name == k) idx = i;
    if (idx < np) {
      if (given[idx]) throw Error("macro '" + def.name + "' got multiple values for argument '" + k + "'");
      bound[idx] = v;
      given[idx] = true;
    } else if (k == "caller" && def.uses_caller) {
      frame->set("caller", v);
      caller_given = true;
    } else if (def.uses_kwargs) {
      extra_kwargs.set(Value(k), v);
    } else {
      throw Error("macro '" + def.name + "' takes no keyword argument '" + k + "'");
    }
  }
  auto saved_scope = scope_;
  std::string* saved_out = out_;
  std::string buf;
  scope_ = frame;
  out_ = &buf;
  try {
    for (size_t i = 0; i < np; ++i) {
      if (!given[i]) {
        bound[i] = def.params[i].default_value ? eval(*def.params[i].default_value)
                                               : Value::undefined("parameter '" + def.params[i].name +
                                                                  "' was not provided");
      }
      frame->set(def.params[i].name, bound[i]);
    }
    if (def.uses_varargs) {
      std::vector<Value> rest;
      for (size_t i = np; i < args.positional.size(); ++i) rest.push_back(args.positional[i]);
      frame->set("varargs", Value::list(std::move(rest), true));
    }
    if (def.uses_kwargs) frame->set("kwargs", Value::dict(std::move(extra_kwargs)));
    if (def.uses_caller && !caller_given)
      frame->set("caller", Value::undefined("No caller defined"));
    exec_body(def.body);
  } catch (...) {
    scope_ = saved_scope;
    out_ = saved_out;
    throw;
  }
  scope_ = saved_scope;
  out_ = saved_out;
  return Value(std::move(buf));
}

Value Renderer::call(const Value& fn, CallArgs& args) {
  if (fn.is_undefined()) fn.raise_undefined();
  if (!fn.is_function()) throw Error("'" + fn.type_name() + "' object is not callable");
  return fn.as_function().fn(*this, args);
}

Value Renderer::eval_call(const Expr& e, std::vector<std::pair<std::string, Value>> extra_kwargs) {
  Value fn = eval(*e.a);
  CallArgs args;
  for (const auto& a : e.items) args.positional.push_back(eval(*a));
  for (const auto& kw : e.kwargs) args.keyword.emplace_back(kw.name, eval(*kw.value));
  for (auto& kw : extra_kwargs) args.keyword.push_back(std::move(kw));
  line_ = e.line;
  col_ = e.col;
  return call(fn, args);
}

Value Renderer::eval_compare(const Expr& e) {
  Value left = eval(*e.a);
  for (const auto& [op, rhs_expr] : e.comparisons) {
    Value right = eval(*rhs_expr);
    bool ok;
    if (op == "==") {
      ok = py_equal(left, right);
    } else if (op == "!=") {
      ok = !py_equal(left, right);
    } else if (op == "in" || op == "not in") {
      ok = contains(right, left);
      if (op == "not in") ok = !ok;
    } else {
      if (left.is_undefined()) left.raise_undefined();
      if (right.is_undefined()) right.raise_undefined();
      int c;
      try {
        c = py_compare(left, right);
      } catch (const Error&) {
        throw Error("'" + op + "' not supported between instances of '" + left.type_name() + "' and '" +
                    right.type_name() + "'");
      }
      ok = op == "<" ? c < 0 : op == "<=" ? c <= 0 : op == ">" ? c > 0 : c >= 0;
    }
    if (!ok) return Value(false);
    left = std::move(right);
  }
  return Value(true);
}

Value Renderer::eval_slice(const Expr& e) {
  Value obj = eval(*e.a);
  if (obj.is_undefined()) obj.raise_undefined();
  std::optional<int64_t> bound[3];
  for (int i = 0; i < 3; ++i) {
    if (!e.items[i]) continue;
    Value v = eval(*e.items[i]);
    if (v.is_none()) continue;
    if (!v.is_int() && !v.is_bool())
      throw Error("slice indices must be integers or None");
    bound[i] = v.as_int();
  }
  int64_t step = bound[2].value_or(1);
  if (step == 0) throw Error("slice step cannot be zero");
  std::u32string chars;
  const std::vector<Value>* list = nullptr;
  int64_t n;
  if (obj.is_string()) {
    chars = utf8_decode(obj.as_string());
    n = static_cast<int64_t>(chars.size());
  } else if (obj.is_list()) {
    list = &obj.as_list();
    n = static_cast<int64_t>(list->size());
  } else {
    throw Error("'" + obj.type_name() + "' object is not subscriptable");
  }
  auto norm = [&](std::optional<int64_t> b, int64_t dflt, bool is_stop) -> int64_t {
    (void)is_stop;
    if (!b) return dflt;
    int64_t v = *b;
    if (v < 0) v += n;
    if (step > 0) return std::clamp<int64_t>(v, 0, n);
    return std::clamp<int64_t>(v, -1, n - 1);
  };
  int64_t start = norm(bound[0], step > 0 ? 0 : n - 1, false);
  int64_t stop = norm(bound[1], step > 0 ? n : -1, true);
  std::u32string out_chars;
  std::vector<Value> out_items;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (list) out_items.push_back((*list)[static_cast<size_t>(i)]);
    else out_chars.push_back(chars[static_cast<size_t>(i)]);
  }
  if (list) return Value::list(std::move(out_items), obj.is_tuple());
  return Value(utf8_encode(out_chars));
}

Value Renderer::eval(const Expr& e) {
  switch (e.kind) {
    case Expr::Kind::Literal: return e.literal;
    case Expr::Kind::Name: {
      const Value* v = scope_->find(e.name);
      return v ? *v : Value::undefined("'" + e.name + "' is undefined");
    }
    case Expr::Kind::List:
    case Expr::Kind::Tuple: {
      std::vector<Value> items;
      for (const auto& i : e.items) items.push_back(eval(*i));
      return Value::list(std::move(items), e.kind == Expr::Kind::Tuple);
    }
    case Expr::Kind::Dict: {
      DictData d;
      for (size_t i = 0; i < e.items.size(); ++i) {
        Value k = eval(*e.items[i]);
        if (!(k.is_string() || k.is_number() || k.is_none() || k.is_tuple()))
          throw Error("unhashable type: '" + k.type_name() + "'");
        d.set(std::move(k), eval(*e.values[i]));
      }
      return Value::dict(std::move(d));
    }
    case Expr::Kind::GetAttr: {
      Value obj = eval(*e.a);
      line_ = e.line;
      col_ = e.col;
      if (obj.is_undefined()) obj.raise_undefined();
      return get_attribute(obj, e.name);
    }
    case Expr::Kind::GetItem: {
      Value obj = eval(*e.a);
      Value key = eval(*e.b);
      line_ = e.line;
      col_ = e.col;
      if (obj.is_undefined()) obj.raise_undefined();
      return get_item(obj, key);
    }
    case Expr::Kind::Slice: return eval_slice(e);
    case Expr::Kind::Call: return eval_call(e, {});
    case Expr::Kind::Filter: {
      Value operand = eval(*e.a);
      CallArgs args;
      for (const auto& a : e.items) args.positional.push_back(eval(*a));
      for (const auto& kw : e.kwargs) args.keyword.emplace_back(kw.name, eval(*kw.value));
      line_ = e.line;
      col_ = e.col;
      return apply_filter(*this, e.name, operand, args);
    }
    case Expr::Kind::Test: {
      Value operand = eval(*e.a);
      CallArgs args;
      for (const auto& a : e.items) args.positional.push_back(eval(*a));
      for (const auto& kw : e.kwargs) args.keyword.emplace_back(kw.name, eval(*kw.value));
      line_ = e.line;
      col_ = e.col;
      bool r = apply_test(*this, e.name, operand, args);
      return Value(e.negated ? !r : r);
    }
    case Expr::Kind::Neg:
    case Expr::Kind::Pos: {
      Value v = eval(*e.a);
      if (v.is_undefined()) v.raise_undefined();
      if (!v.is_number())
        throw Error(std::string("bad operand type for unary ") + (e.kind == Expr::Kind::Neg ? "-" : "+") + ": '" +
                    v.type_name() + "'");
      if (e.kind == Expr::Kind::Pos) return v.is_float() ? v : Value(v.as_int());
      if (v.is_float()) return Value(-v.as_float());
      if (v.as_int() == INT64_MIN) throw Error("integer overflow (values beyond 64 bits are not supported)");
      return Value(-v.as_int());
    }
    case Expr::Kind::Not: return Value(!eval(*e.a).truthy());
    case Expr::Kind::And: {
      Value l = eval(*e.a);
      return l.truthy() ? eval(*e.b) : l;
    }
    case Expr::Kind::Or: {
      Value l = eval(*e.a);
      return l.truthy() ? l : eval(*e.b);
    }
    case Expr::Kind::Binary: {
      Value l = eval(*e.a);
      Value r = eval(*e.b);
      line_ = e.line;
      col_ = e.col;
      if (e.name == "~") {
        std::string s = py_str(l);
        std::string rs = py_str(r);
        check_size(s.size() + rs.size());
        return Value(s + rs);
      }
      return binary_operator(e.name, l, r, limits_.max_output_bytes);
    }
    case Expr::Kind::Compare: return eval_compare(e);
    case Expr::Kind::CondExpr: {
      if (eval(*e.a).truthy()) return eval(*e.b);
      if (e.c) return eval(*e.c);
      return Value::undefined("the inline if-expression on line " + std::to_string(e.line) +
                              " evaluated to false and no else section was defined.");
    }
  }
  return Value();
}

}  // namespace striker::jinja
