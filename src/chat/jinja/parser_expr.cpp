// Expression parsing with jinja2's precedence: conditional < or < and < not < comparisons
// < + - < ~ < * / // % < ** < unary, then postfix (.attr, [key], call), filters and tests.
#include "chat/jinja/builtins.h"
#include "chat/jinja/parser_impl.h"

namespace striker::jinja {

bool Parser::at_tuple_end() const {
  const Token& t = cur();
  if (t.type == Tok::VarEnd || t.type == Tok::BlockEnd || t.type == Tok::Eof) return true;
  if (t.type == Tok::Op && (t.text == ")" || t.text == "]" || t.text == "}" || t.text == "=")) return true;
  if (t.type == Tok::Name && (t.text == "in" || t.text == "if" || t.text == "recursive")) return true;
  return false;
}

ExprPtr Parser::parse_tuple(bool allow_empty_print, bool with_condexpr, bool explicit_parens) {
  (void)allow_empty_print;
  const Token& start = cur();
  std::vector<ExprPtr> items;
  bool saw_comma = false;
  while (true) {
    if (!items.empty()) {
      if (!is_op(",")) break;
      advance();
      saw_comma = true;
      if (at_tuple_end()) break;
    }
    items.push_back(with_condexpr ? parse_expression() : parse_or());
  }
  if (!saw_comma && !explicit_parens) return std::move(items[0]);
  if (!saw_comma && explicit_parens) return std::move(items[0]);
  auto t = node(Expr::Kind::Tuple, start);
  t->items = std::move(items);
  return t;
}

ExprPtr Parser::parse_expression() {
  DepthGuard guard(*this);
  ExprPtr e = parse_or();
  while (is_name("if")) {
    const Token& t = advance();
    auto c = node(Expr::Kind::CondExpr, t);
    c->a = parse_or();
    c->b = std::move(e);
    if (is_name("else")) {
      advance();
      c->c = parse_expression();
    }
    e = std::move(c);
  }
  return e;
}

ExprPtr Parser::parse_or() {
  ExprPtr left = parse_and();
  while (is_name("or")) {
    const Token& t = advance();
    auto n = node(Expr::Kind::Or, t);
    n->a = std::move(left);
    n->b = parse_and();
    left = std::move(n);
  }
  return left;
}

ExprPtr Parser::parse_and() {
  ExprPtr left = parse_not();
  while (is_name("and")) {
    const Token& t = advance();
    auto n = node(Expr::Kind::And, t);
    n->a = std::move(left);
    n->b = parse_not();
    left = std::move(n);
  }
  return left;
}

ExprPtr Parser::parse_not() {
  DepthGuard guard(*this);
  if (is_name("not")) {
    const Token& t = advance();
    auto n = node(Expr::Kind::Not, t);
    n->a = parse_not();
    return n;
  }
  return parse_compare();
}

ExprPtr Parser::parse_compare() {
  const Token& start = cur();
  ExprPtr first = parse_math1();
  std::vector<std::pair<std::string, ExprPtr>> ops;
  while (true) {
    std::string op;
    if (cur().type == Tok::Op &&
        (cur().text == "==" || cur().text == "!=" || cur().text == "<" || cur().text == "<=" || cur().text == ">" ||
         cur().text == ">=")) {
      op = advance().text;
    } else if (is_name("in")) {
      advance();
      op = "in";
    } else if (is_name("not") && peek().type == Tok::Name && peek().text == "in") {
      advance();
      advance();
      op = "not in";
    } else {
      break;
    }
    ops.emplace_back(op, parse_math1());
  }
  if (ops.empty()) return first;
  auto n = node(Expr::Kind::Compare, start);
  n->a = std::move(first);
  n->comparisons = std::move(ops);
  return n;
}

ExprPtr Parser::binary(const Token& t, const std::string& op, ExprPtr l, ExprPtr r) {
  auto n = node(Expr::Kind::Binary, t);
  n->name = op;
  n->a = std::move(l);
  n->b = std::move(r);
  return n;
}

ExprPtr Parser::parse_math1() {
  ExprPtr left = parse_concat();
  while (is_op("+") || is_op("-")) {
    const Token& t = advance();
    left = binary(t, t.text, std::move(left), parse_concat());
  }
  return left;
}

ExprPtr Parser::parse_concat() {
  ExprPtr left = parse_math2();
  while (is_op("~")) {
    const Token& t = advance();
    left = binary(t, "~", std::move(left), parse_math2());
  }
  return left;
}

ExprPtr Parser::parse_math2() {
  ExprPtr left = parse_pow();
  while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
    const Token& t = advance();
    left = binary(t, t.text, std::move(left), parse_pow());
  }
  return left;
}

ExprPtr Parser::parse_pow() {
  ExprPtr left = parse_unary(true);
  while (is_op("**")) {
    const Token& t = advance();
    left = binary(t, "**", std::move(left), parse_unary(true));
  }
  return left;
}

ExprPtr Parser::parse_unary(bool with_filter) {
  DepthGuard guard(*this);
  ExprPtr e;
  if (is_op("-") || is_op("+")) {
    const Token& t = advance();
    e = node(t.text == "-" ? Expr::Kind::Neg : Expr::Kind::Pos, t);
    e->a = parse_unary(false);
  } else {
    e = parse_primary();
  }
  e = parse_postfix(std::move(e));
  if (with_filter) e = parse_filter_expr(std::move(e));
  return e;
}

ExprPtr Parser::parse_primary() {
  const Token& t = cur();
  switch (t.type) {
    case Tok::Name: {
      advance();
      if (t.text == "true" || t.text == "True") return literal(t, Value(true));
      if (t.text == "false" || t.text == "False") return literal(t, Value(false));
      if (t.text == "none" || t.text == "None") return literal(t, Value::none());
      for (auto* s : name_sets_) s->insert(t.text);
      auto n = node(Expr::Kind::Name, t);
      n->name = t.text;
      return n;
    }
    case Tok::String: {
      std::string s;
      while (cur().type == Tok::String) s += advance().text;
      return literal(t, Value(std::move(s)));
    }
    case Tok::Int: advance(); return literal(t, Value(t.int_value));
    case Tok::Float: advance(); return literal(t, Value(t.float_value));
    case Tok::Op:
      if (t.text == "(") {
        advance();
        if (is_op(")")) {
          advance();
          auto n = node(Expr::Kind::Tuple, t);
          return n;
        }
        ExprPtr e = parse_tuple(false, true, true);
        expect_op(")");
        return e;
      }
      if (t.text == "[") {
        advance();
        auto n = node(Expr::Kind::List, t);
        while (!is_op("]")) {
          if (!n->items.empty()) expect_op(",");
          if (is_op("]")) break;
          n->items.push_back(parse_expression());
        }
        advance();
        return n;
      }
      if (t.text == "{") {
        advance();
        auto n = node(Expr::Kind::Dict, t);
        while (!is_op("}")) {
          if (!n->items.empty()) expect_op(",");
          if (is_op("}")) break;
          n->items.push_back(parse_expression());
          expect_op(":");
          n->values.push_back(parse_expression());
        }
        advance();
        return n;
      }
      break;
    default: break;
  }
  fail_at(t, "unexpected " + describe(t));
}

ExprPtr Parser::literal(const Token& t, Value v) {
  auto n = node(Expr::Kind::Literal, t);
  n->literal = std::move(v);
  return n;
}

ExprPtr Parser::parse_postfix(ExprPtr e) {
  while (true) {
    if (is_op(".")) {
      const Token& t = advance();
      if (cur().type == Tok::Name) {
        auto n = node(Expr::Kind::GetAttr, t);
        n->a = std::move(e);
        n->name = advance().text;
        e = std::move(n);
      } else if (cur().type == Tok::Int) {
        auto n = node(Expr::Kind::GetItem, t);
        n->a = std::move(e);
        n->b = literal(cur(), Value(cur().int_value));
        advance();
        e = std::move(n);
      } else {
        fail_at(cur(), "expected an attribute name after '.', got " + describe(cur()));
      }
    } else if (is_op("[")) {
      e = parse_subscript(std::move(e));
    } else if (is_op("(")) {
      e = parse_call(std::move(e));
    } else {
      return e;
    }
  }
}

ExprPtr Parser::parse_subscript(ExprPtr obj) {
  const Token& t = advance();  // '['
  ExprPtr parts[3];
  int colons = 0;
  while (!is_op("]")) {
    if (is_op(":")) {
      if (++colons > 2) fail_at(cur(), "too many ':' in slice");
      advance();
      continue;
    }
    if (parts[colons]) fail_at(cur(), "expected ']' or ':', got " + describe(cur()));
    parts[colons] = parse_expression();
    if (colons == 0 && is_op(",")) {  // x[a, b]: the key is a tuple
      auto tuple = node(Expr::Kind::Tuple, cur());
      tuple->items.push_back(std::move(parts[0]));
      while (is_op(",")) {
        advance();
        if (is_op("]")) break;
        tuple->items.push_back(parse_expression());
      }
      parts[0] = std::move(tuple);
    }
  }
  advance();
  if (colons == 0) {
    if (!parts[0]) fail_at(t, "empty subscript");
    auto n = node(Expr::Kind::GetItem, t);
    n->a = std::move(obj);
    n->b = std::move(parts[0]);
    return n;
  }
  auto n = node(Expr::Kind::Slice, t);
  n->a = std::move(obj);
  n->items.push_back(std::move(parts[0]));
  n->items.push_back(std::move(parts[1]));
  n->items.push_back(std::move(parts[2]));
  return n;
}

void Parser::parse_call_args(Expr& n) {
  expect_op("(");
  while (!is_op(")")) {
    if (!n.items.empty() || !n.kwargs.empty()) expect_op(",");
    if (is_op(")")) break;
    if (is_op("*") || is_op("**")) fail_at(cur(), "*args / **kwargs in calls are not supported");
    if (cur().type == Tok::Name && peek().type == Tok::Op && peek().text == "=") {
      std::string name = advance().text;
      advance();
      n.kwargs.push_back(Kwarg{name, parse_expression()});
    } else {
      if (!n.kwargs.empty()) fail_at(cur(), "positional argument follows keyword argument");
      n.items.push_back(parse_expression());
    }
  }
  advance();
}

ExprPtr Parser::parse_call(ExprPtr callee) {
  auto n = node(Expr::Kind::Call, cur());
  n->line = callee->line;  // errors point at the callee, not at '('
  n->col = callee->col;
  n->a = std::move(callee);
  parse_call_args(*n);
  return n;
}

std::string Parser::parse_dotted_name() {
  std::string name = expect_name();
  while (is_op(".")) {
    advance();
    name += "." + expect_name();
  }
  return name;
}

ExprPtr Parser::parse_filter_chain(ExprPtr operand, bool leading_pipe) {
  bool first = true;
  while (is_op("|") || (!leading_pipe && first)) {
    if (is_op("|")) advance();
    first = false;
    const Token& t = cur();
    auto n = node(Expr::Kind::Filter, t);
    n->name = parse_dotted_name();
    if (!has_filter(n->name)) fail_at(t, "no filter named '" + n->name + "'");
    if (is_op("(")) parse_call_args(*n);
    n->a = std::move(operand);
    operand = std::move(n);
  }
  return operand;
}

ExprPtr Parser::parse_filter_expr(ExprPtr e) {
  while (true) {
    if (is_op("|")) {
      e = parse_filter_chain(std::move(e));
    } else if (is_name("is")) {
      const Token& t = advance();
      auto n = node(Expr::Kind::Test, t);
      if (is_name("not")) {
        advance();
        n->negated = true;
      }
      const Token& name_tok = cur();
      n->name = parse_dotted_name();
      if (!has_test(n->name)) fail_at(name_tok, "no test named '" + n->name + "'");
      if (is_op("(")) {
        parse_call_args(*n);
      } else if ((cur().type == Tok::Name || cur().type == Tok::String || cur().type == Tok::Int ||
                  cur().type == Tok::Float || is_op("(") || is_op("[") || is_op("{")) &&
                 !is_name("else") && !is_name("or") && !is_name("and")) {
        if (is_name("is")) fail_at(cur(), "you cannot chain multiple tests with 'is'");
        n->items.push_back(parse_postfix(parse_primary()));
      }
      n->a = std::move(e);
      e = std::move(n);
    } else if (is_op("(")) {
      e = parse_call(std::move(e));
    } else {
      return e;
    }
  }
}

}  // namespace striker::jinja
