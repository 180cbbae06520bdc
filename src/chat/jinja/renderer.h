// Executes a parsed template: scopes, loops, macros, whitespace-exact output, and the
// guards (nesting depth, output size, work steps) that keep a runaway template bounded.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/jinja/ast.h"
#include "chat/jinja/value.h"

namespace striker::jinja {

struct RenderLimits {
  size_t max_output_bytes = 64u << 20;  // any single string the template builds
  int max_call_depth = 200;             // macro / caller recursion
  int64_t max_steps = 20'000'000;       // loop iterations + calls, total
};

struct Scope {
  std::vector<std::pair<std::string, Value>> vars;
  std::shared_ptr<Scope> parent;
  const Value* find(const std::string& name) const;
  void set(const std::string& name, Value v);
};

class Renderer {
 public:
  Renderer(std::string origin, RenderLimits limits) : origin_(std::move(origin)), limits_(limits) {}

  // Renders `body` with `globals` (context variables over built-in globals).
  // Every failure becomes striker::Error "<origin>:<line>:<col>: <message>".
  // `root_locals`: names the template assigns before reading (see scoping.h).
  std::string render(const Body& body, const std::vector<std::string>& root_locals, const DictData& globals);

  // Used by filters such as map/select that call back into the interpreter.
  Value call(const Value& fn, CallArgs& args);
  void count_step();
  // Objects created during the render (namespaces) are emptied when it ends: a namespace
  // that stores itself would otherwise keep itself alive.
  void own(std::shared_ptr<ObjectData> obj) { owned_.push_back(std::move(obj)); }
  void check_size(size_t bytes) const;
  const RenderLimits& limits() const { return limits_; }

 private:
  enum class Flow { Normal, Break, Continue };

  std::string origin_;
  RenderLimits limits_;
  std::shared_ptr<Scope> scope_;
  std::string* out_ = nullptr;
  int call_depth_ = 0;
  int64_t steps_ = 0;
  int line_ = 0, col_ = 0;
  std::vector<std::shared_ptr<ObjectData>> owned_;
  void release_owned();

  Flow exec_body(const Body& body);
  Flow exec(const Stmt& s);
  Flow exec_for(const Stmt& s);
  void exec_set(const Stmt& s);
  void assign(const Target& t, const Value& v);
  std::string capture(const Body& body, const std::vector<std::string>& locals);
  // A fresh scope under the current one with `locals` declared undefined.
  std::shared_ptr<Scope> child_scope(const std::vector<std::string>& locals) const;
  Value apply_filter_chain(const Expr& chain, Value operand);

  Value eval(const Expr& e);
  Value eval_call(const Expr& e, std::vector<std::pair<std::string, Value>> extra_kwargs);
  Value eval_binary(const Expr& e);
  Value eval_compare(const Expr& e);
  Value eval_slice(const Expr& e);
  Value make_macro(const std::shared_ptr<MacroDef>& def, std::shared_ptr<Scope> closure);
  Value call_macro(const MacroDef& def, const std::shared_ptr<Scope>& closure, CallArgs& args);
  void append(const std::string& s);
};

}  // namespace striker::jinja
