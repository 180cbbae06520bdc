#include "chat/jinja/parser.h"

#include <set>

#include "chat/jinja/builtins.h"
#include "core/error.h"

namespace striker::jinja {
namespace {

class Parser {
 public:
  Parser(const std::vector<Token>& toks, const std::string& origin) : toks_(toks), origin_(origin) {}

  Body parse_all() {
    std::string end_tag;
    Body body = parse_body({}, end_tag);
    return body;
  }

 private:
  const std::vector<Token>& toks_;
  const std::string& origin_;
  size_t pos_ = 0;
  std::vector<std::set<std::string>*> name_sets_;  // names referenced inside macros being parsed
  int depth_ = 0;  // nesting guard: deep nesting would overflow the C++ stack

  struct DepthGuard {
    Parser& p;
    DepthGuard(Parser& parser) : p(parser) {
      if (++p.depth_ > kMaxNesting) p.fail_at(p.cur(), "template nesting is too deep (limit " + std::to_string(kMaxNesting) + ")");
    }
    ~DepthGuard() { --p.depth_; }
  };
  static constexpr int kMaxNesting = 256;

  const Token& cur() const { return toks_[pos_]; }
  const Token& peek(size_t n = 1) const { return toks_[std::min(pos_ + n, toks_.size() - 1)]; }
  const Token& advance() { return toks_[pos_ < toks_.size() - 1 ? pos_++ : pos_]; }

  [[noreturn]] void fail_at(const Token& t, const std::string& msg) const {
    throw Error(origin_ + ":" + std::to_string(t.line) + ":" + std::to_string(t.col) + ": " + msg);
  }
  static std::string describe(const Token& t) {
    switch (t.type) {
      case Tok::Text: return "template text";
      case Tok::VarBegin: return "'{{'";
      case Tok::VarEnd: return "end of print statement";
      case Tok::BlockBegin: return "'{%'";
      case Tok::BlockEnd: return "end of statement block";
      case Tok::Name: return "'" + t.text + "'";
      case Tok::String: return "string literal";
      case Tok::Int:
      case Tok::Float: return "number";
      case Tok::Op: return "'" + t.text + "'";
      case Tok::Eof: return "end of template";
    }
    return "token";
  }

  bool is_op(const char* op) const { return cur().type == Tok::Op && cur().text == op; }
  bool is_name(const char* n) const { return cur().type == Tok::Name && cur().text == n; }
  void expect_op(const char* op) {
    if (!is_op(op)) fail_at(cur(), std::string("expected '") + op + "', got " + describe(cur()));
    advance();
  }
  void expect_name_kw(const char* n) {
    if (!is_name(n)) fail_at(cur(), std::string("expected '") + n + "', got " + describe(cur()));
    advance();
  }
  std::string expect_name() {
    if (cur().type != Tok::Name) fail_at(cur(), "expected a name, got " + describe(cur()));
    return advance().text;
  }
  void expect_block_end() {
    if (cur().type != Tok::BlockEnd) fail_at(cur(), "expected end of statement block, got " + describe(cur()));
    advance();
  }

  ExprPtr node(Expr::Kind k, const Token& t) { return std::make_unique<Expr>(k, t.line, t.col); }

  // ---- statements ----------------------------------------------------------------

  // Parses until a block whose first name is in `end_tags`; leaves pos_ after that name.
  Body parse_body(const std::set<std::string>& end_tags, std::string& end_tag) {
    Body body;
    while (true) {
      const Token& t = cur();
      if (t.type == Tok::Eof) {
        if (!end_tags.empty()) {
          std::string want;
          for (const auto& e : end_tags) want += (want.empty() ? "'" : " or '") + e + "'";
          fail_at(t, "unexpected end of template; expected " + want);
        }
        return body;
      }
      if (t.type == Tok::Text) {
        auto s = std::make_unique<Stmt>(Stmt::Kind::Text, t.line, t.col);
        s->text = t.text;
        body.push_back(std::move(s));
        advance();
      } else if (t.type == Tok::VarBegin) {
        advance();
        auto s = std::make_unique<Stmt>(Stmt::Kind::Output, t.line, t.col);
        s->expr = parse_tuple(true);
        if (cur().type != Tok::VarEnd) fail_at(cur(), "expected end of print statement, got " + describe(cur()));
        advance();
        body.push_back(std::move(s));
      } else if (t.type == Tok::BlockBegin) {
        advance();
        const Token& kw = cur();
        if (kw.type != Tok::Name) fail_at(kw, "expected a statement name, got " + describe(kw));
        if (end_tags.count(kw.text)) {
          end_tag = kw.text;
          advance();
          return body;
        }
        body.push_back(parse_statement());
      } else {
        fail_at(t, "unexpected " + describe(t));
      }
    }
  }

  void expect_end_tag(const char* name) {
    // parse_body consumed the end tag name; an `endfor x`-style trailing name is not allowed.
    (void)name;
    expect_block_end();
  }

  StmtPtr parse_statement() {
    DepthGuard guard(*this);
    const Token& kw = cur();
    const std::string name = kw.text;
    if (name == "if") return parse_if();
    if (name == "for") return parse_for();
    if (name == "set") return parse_set();
    if (name == "macro") return parse_macro();
    if (name == "call") return parse_call_block();
    if (name == "filter") return parse_filter_block();
    if (name == "with") return parse_with();
    if (name == "generation") {  // Hugging Face's AssistantTracker tag: renders its body
      advance();
      expect_block_end();
      auto s = std::make_unique<Stmt>(Stmt::Kind::Scope, kw.line, kw.col);
      std::string end;
      s->body = parse_body({"endgeneration"}, end);
      expect_end_tag("endgeneration");
      return s;
    }
    if (name == "break" || name == "continue") {
      if (loop_depth_ == 0) fail_at(kw, "'" + name + "' outside of a loop");
      advance();
      expect_block_end();
      return std::make_unique<Stmt>(name == "break" ? Stmt::Kind::Break : Stmt::Kind::Continue, kw.line, kw.col);
    }
    if (name == "include" || name == "extends" || name == "import" || name == "from" || name == "block")
      fail_at(kw, "'" + name + "' is not supported in chat templates (no template loader)");
    fail_at(kw, "encountered unknown tag '" + name + "'");
  }
  int loop_depth_ = 0;

  StmtPtr parse_if() {
    const Token& kw = advance();
    auto s = std::make_unique<Stmt>(Stmt::Kind::If, kw.line, kw.col);
    ExprPtr cond = parse_tuple(false);
    expect_block_end();
    while (true) {
      std::string end;
      Body body = parse_body({"elif", "else", "endif"}, end);
      s->branches.emplace_back(std::move(cond), std::move(body));
      if (end == "elif") {
        cond = parse_tuple(false);
        expect_block_end();
        continue;
      }
      if (end == "else") {
        expect_block_end();
        s->else_body = parse_body({"endif"}, end);
      }
      expect_end_tag("endif");
      return s;
    }
  }

  Target parse_target(bool allow_attr) {
    Target t;
    bool paren = false;
    if (is_op("(")) {
      paren = true;
      advance();
    }
    t.names.push_back(expect_name());
    if (allow_attr && !paren && is_op(".")) {
      advance();
      t.attr = expect_name();
      return t;
    }
    while (is_op(",")) {
      advance();
      t.is_tuple = true;
      if (cur().type != Tok::Name) break;
      t.names.push_back(expect_name());
    }
    if (paren) expect_op(")");
    return t;
  }

  StmtPtr parse_for() {
    const Token& kw = advance();
    auto s = std::make_unique<Stmt>(Stmt::Kind::For, kw.line, kw.col);
    s->target = parse_target(false);
    expect_name_kw("in");
    s->expr = parse_tuple(false, /*with_condexpr=*/false);
    if (is_name("if")) {
      advance();
      s->filter = parse_expression();
    }
    if (is_name("recursive")) fail_at(cur(), "recursive for loops are not supported");
    expect_block_end();
    ++loop_depth_;
    std::string end;
    s->body = parse_body({"else", "endfor"}, end);
    --loop_depth_;
    if (end == "else") {
      expect_block_end();
      s->else_body = parse_body({"endfor"}, end);
    }
    expect_end_tag("endfor");
    return s;
  }

  StmtPtr parse_set() {
    const Token& kw = advance();
    Target target = parse_target(true);
    if (is_op("=")) {
      advance();
      auto s = std::make_unique<Stmt>(Stmt::Kind::Set, kw.line, kw.col);
      s->target = std::move(target);
      s->expr = parse_tuple(false);
      expect_block_end();
      return s;
    }
    auto s = std::make_unique<Stmt>(Stmt::Kind::SetBlock, kw.line, kw.col);
    if (target.is_tuple) fail_at(kw, "a block set needs a single name");
    s->target = std::move(target);
    if (is_op("|")) s->filter = parse_filter_chain(nullptr);
    expect_block_end();
    std::string end;
    s->body = parse_body({"endset"}, end);
    expect_end_tag("endset");
    return s;
  }

  void parse_macro_params(MacroDef& m) {
    expect_op("(");
    while (!is_op(")")) {
      if (!m.params.empty()) expect_op(",");
      if (is_op(")")) break;
      MacroParam p;
      p.name = expect_name();
      if (is_op("=")) {
        advance();
        p.default_value = parse_expression();
      } else if (!m.params.empty() && m.params.back().default_value) {
        fail_at(cur(), "non-default argument follows default argument");
      }
      m.params.push_back(std::move(p));
    }
    advance();
  }

  void parse_macro_body(MacroDef& m, const char* end_name) {
    std::set<std::string> names;
    name_sets_.push_back(&names);
    int saved_loop_depth = loop_depth_;
    loop_depth_ = 0;
    std::string end;
    m.body = parse_body({end_name}, end);
    loop_depth_ = saved_loop_depth;
    name_sets_.pop_back();
    m.uses_varargs = names.count("varargs") > 0;
    m.uses_kwargs = names.count("kwargs") > 0;
    m.uses_caller = names.count("caller") > 0;
    expect_end_tag(end_name);
  }

  StmtPtr parse_macro() {
    const Token& kw = advance();
    auto s = std::make_unique<Stmt>(Stmt::Kind::Macro, kw.line, kw.col);
    s->macro = std::make_shared<MacroDef>();
    s->macro->name = expect_name();
    parse_macro_params(*s->macro);
    expect_block_end();
    parse_macro_body(*s->macro, "endmacro");
    return s;
  }

  StmtPtr parse_call_block() {
    const Token& kw = advance();
    auto s = std::make_unique<Stmt>(Stmt::Kind::CallBlock, kw.line, kw.col);
    s->macro = std::make_shared<MacroDef>();
    s->macro->name = "caller";
    if (is_op("(")) parse_macro_params(*s->macro);
    s->expr = parse_expression();
    if (s->expr->kind != Expr::Kind::Call) fail_at(kw, "expected a call expression after 'call'");
    expect_block_end();
    parse_macro_body(*s->macro, "endcall");
    return s;
  }

  StmtPtr parse_filter_block() {
    const Token& kw = advance();
    auto s = std::make_unique<Stmt>(Stmt::Kind::FilterBlock, kw.line, kw.col);
    s->filter = parse_filter_chain(nullptr, /*leading_pipe=*/false);
    expect_block_end();
    std::string end;
    s->body = parse_body({"endfilter"}, end);
    expect_end_tag("endfilter");
    return s;
  }

  StmtPtr parse_with() {
    const Token& kw = advance();
    auto s = std::make_unique<Stmt>(Stmt::Kind::With, kw.line, kw.col);
    while (cur().type != Tok::BlockEnd) {
      if (!s->with_assignments.empty()) expect_op(",");
      Target t = parse_target(false);
      expect_op("=");
      s->with_assignments.emplace_back(std::move(t), parse_expression());
    }
    expect_block_end();
    std::string end;
    s->body = parse_body({"endwith"}, end);
    expect_end_tag("endwith");
    return s;
  }

  // ---- expressions ---------------------------------------------------------------

  bool at_tuple_end() const {
    const Token& t = cur();
    if (t.type == Tok::VarEnd || t.type == Tok::BlockEnd || t.type == Tok::Eof) return true;
    if (t.type == Tok::Op && (t.text == ")" || t.text == "]" || t.text == "}" || t.text == "=")) return true;
    if (t.type == Tok::Name && (t.text == "in" || t.text == "if" || t.text == "recursive")) return true;
    return false;
  }

  // `a, b` -> tuple; a single expression without a comma stays itself.
  ExprPtr parse_tuple(bool allow_empty_print, bool with_condexpr = true, bool explicit_parens = false) {
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

  ExprPtr parse_expression() {
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

  ExprPtr parse_or() {
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

  ExprPtr parse_and() {
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

  ExprPtr parse_not() {
    DepthGuard guard(*this);
    if (is_name("not")) {
      const Token& t = advance();
      auto n = node(Expr::Kind::Not, t);
      n->a = parse_not();
      return n;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
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

  ExprPtr binary(const Token& t, const std::string& op, ExprPtr l, ExprPtr r) {
    auto n = node(Expr::Kind::Binary, t);
    n->name = op;
    n->a = std::move(l);
    n->b = std::move(r);
    return n;
  }

  ExprPtr parse_math1() {
    ExprPtr left = parse_concat();
    while (is_op("+") || is_op("-")) {
      const Token& t = advance();
      left = binary(t, t.text, std::move(left), parse_concat());
    }
    return left;
  }

  ExprPtr parse_concat() {
    ExprPtr left = parse_math2();
    while (is_op("~")) {
      const Token& t = advance();
      left = binary(t, "~", std::move(left), parse_math2());
    }
    return left;
  }

  ExprPtr parse_math2() {
    ExprPtr left = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const Token& t = advance();
      left = binary(t, t.text, std::move(left), parse_pow());
    }
    return left;
  }

  ExprPtr parse_pow() {
    ExprPtr left = parse_unary(true);
    while (is_op("**")) {
      const Token& t = advance();
      left = binary(t, "**", std::move(left), parse_unary(true));
    }
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
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

  ExprPtr parse_primary() {
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

  ExprPtr literal(const Token& t, Value v) {
    auto n = node(Expr::Kind::Literal, t);
    n->literal = std::move(v);
    return n;
  }

  ExprPtr parse_postfix(ExprPtr e) {
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

  ExprPtr parse_subscript(ExprPtr obj) {
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
      if (colons == 0 && is_op(",")) fail_at(cur(), "tuple subscripts are not supported");
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

  void parse_call_args(Expr& n) {
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

  ExprPtr parse_call(ExprPtr callee) {
    auto n = node(Expr::Kind::Call, cur());
    n->a = std::move(callee);
    parse_call_args(*n);
    return n;
  }

  std::string parse_dotted_name() {
    std::string name = expect_name();
    while (is_op(".")) {
      advance();
      name += "." + expect_name();
    }
    return name;
  }

  // `| f(args) | g` applied to `operand` (null for filter blocks / block set).
  ExprPtr parse_filter_chain(ExprPtr operand, bool leading_pipe = true) {
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

  ExprPtr parse_filter_expr(ExprPtr e) {
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
};

}  // namespace

Body parse_template(const std::vector<Token>& tokens, const std::string& origin) {
  return Parser(tokens, origin).parse_all();
}

}  // namespace striker::jinja
