// The parser's class, shared by parser.cpp (statements) and parser_expr.cpp (expressions).
// Internal to the jinja library.
#pragma once
#include <set>
#include <string>
#include <vector>

#include "chat/jinja/ast.h"
#include "chat/jinja/lexer.h"
#include "core/error.h"

namespace striker::jinja {

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

  int loop_depth_ = 0;

  // Statements (parser.cpp).
  Body parse_body(const std::set<std::string>& end_tags, std::string& end_tag);
  void expect_end_tag(const char* name);
  StmtPtr parse_statement();
  StmtPtr parse_if();
  Target parse_target(bool allow_attr);
  StmtPtr parse_for();
  StmtPtr parse_set();
  void parse_macro_params(MacroDef& m);
  void parse_macro_body(MacroDef& m, const char* end_name);
  StmtPtr parse_macro();
  StmtPtr parse_call_block();
  StmtPtr parse_filter_block();
  StmtPtr parse_with();

  // Expressions (parser_expr.cpp).
  bool at_tuple_end() const;
  ExprPtr parse_tuple(bool allow_empty_print, bool with_condexpr = true, bool explicit_parens = false);
  ExprPtr parse_expression();
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr binary(const Token& t, const std::string& op, ExprPtr l, ExprPtr r);
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  ExprPtr parse_unary(bool with_filter);
  ExprPtr parse_primary();
  ExprPtr literal(const Token& t, Value v);
  ExprPtr parse_postfix(ExprPtr e);
  ExprPtr parse_subscript(ExprPtr obj);
  void parse_call_args(Expr& n);
  ExprPtr parse_call(ExprPtr callee);
  std::string parse_dotted_name();
  ExprPtr parse_filter_chain(ExprPtr operand, bool leading_pipe = true);
  ExprPtr parse_filter_expr(ExprPtr e);
};

}  // namespace striker::jinja
