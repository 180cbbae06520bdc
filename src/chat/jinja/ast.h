// Syntax tree of a parsed template. Expressions and statements are plain structs with a
// kind tag; the renderer switches on the kind (no virtual dispatch needed).
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "chat/jinja/value.h"

namespace striker::jinja {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Kwarg {
  std::string name;
  ExprPtr value;
};

struct Expr {
  enum class Kind {
    Literal, Name, List, Tuple, Dict, GetAttr, GetItem, Slice, Call, Filter, Test,
    Neg, Pos, Not, And, Or, Binary, Compare, CondExpr
  };
  Kind kind;
  int line = 0, col = 0;
  Value literal;            // Literal
  std::string name;         // Name, GetAttr attribute, Filter/Test name, Binary/Compare operator
  ExprPtr a, b, c;          // operands: object/left/cond, key/right/then, step/else
  std::vector<ExprPtr> items;   // List/Tuple/Dict keys, call/filter/test positional args
  std::vector<ExprPtr> values;  // Dict values
  std::vector<Kwarg> kwargs;
  std::vector<std::pair<std::string, ExprPtr>> comparisons;  // Compare: (op, rhs) chain
  bool negated = false;     // Test: `is not`

  Expr(Kind k, int l, int cl) : kind(k), line(l), col(cl) {}
};

// Assignment targets: a name, `ns.attr`, or a tuple of names.
struct Target {
  std::vector<std::string> names;  // one name, or several for tuple unpacking
  bool is_tuple = false;
  std::string attr;  // non-empty: `names[0].attr`
};

struct MacroParam {
  std::string name;
  ExprPtr default_value;  // may be null
};

struct MacroDef {
  std::string name;
  std::vector<MacroParam> params;
  Body body;
  std::vector<std::string> locals;  // as Stmt::body_locals, for the macro's frame
  bool uses_varargs = false, uses_kwargs = false, uses_caller = false;
};

struct Stmt {
  enum class Kind { Text, Output, If, For, Set, SetBlock, Macro, CallBlock, FilterBlock, Break, Continue, With, Scope };
  Kind kind;
  int line = 0, col = 0;
  std::string text;                         // Text
  ExprPtr expr;                             // Output, Set value, For iterable, CallBlock call
  std::vector<std::pair<ExprPtr, Body>> branches;  // If: (cond, body)...
  Body body, else_body;                     // For / If else / blocks
  Target target;                            // For, Set, SetBlock
  ExprPtr filter;                           // For `if cond`; SetBlock/FilterBlock filter chain (operand null)
  std::shared_ptr<MacroDef> macro;          // Macro, CallBlock (caller definition)
  std::vector<std::pair<Target, ExprPtr>> with_assignments;
  // Names this statement's own frame (body / else body) assigns before reading; they start
  // out undefined in that frame instead of reading through to the outer scopes, as jinja2's
  // compile-time scoping does (see scoping.cpp).
  std::vector<std::string> body_locals, else_locals;

  Stmt(Kind k, int l, int cl) : kind(k), line(l), col(cl) {}
};

}  // namespace striker::jinja
