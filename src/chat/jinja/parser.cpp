#include "chat/jinja/parser.h"

#include <set>

#include "chat/jinja/builtins.h"
#include "chat/jinja/parser_impl.h"
#include "core/error.h"

namespace striker::jinja {

Body Parser::parse_body(const std::set<std::string>& end_tags, std::string& end_tag) {
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

void Parser::expect_end_tag(const char* name) {
  // parse_body consumed the end tag name; an `endfor x`-style trailing name is not allowed.
  (void)name;
  expect_block_end();
}

StmtPtr Parser::parse_statement() {
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

StmtPtr Parser::parse_if() {
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

Target Parser::parse_target(bool allow_attr) {
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

StmtPtr Parser::parse_for() {
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

StmtPtr Parser::parse_set() {
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

void Parser::parse_macro_params(MacroDef& m) {
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

void Parser::parse_macro_body(MacroDef& m, const char* end_name) {
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

StmtPtr Parser::parse_macro() {
  const Token& kw = advance();
  auto s = std::make_unique<Stmt>(Stmt::Kind::Macro, kw.line, kw.col);
  s->macro = std::make_shared<MacroDef>();
  s->macro->name = expect_name();
  parse_macro_params(*s->macro);
  expect_block_end();
  parse_macro_body(*s->macro, "endmacro");
  return s;
}

StmtPtr Parser::parse_call_block() {
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

StmtPtr Parser::parse_filter_block() {
  const Token& kw = advance();
  auto s = std::make_unique<Stmt>(Stmt::Kind::FilterBlock, kw.line, kw.col);
  s->filter = parse_filter_chain(nullptr, /*leading_pipe=*/false);
  expect_block_end();
  std::string end;
  s->body = parse_body({"endfilter"}, end);
  expect_end_tag("endfilter");
  return s;
}

StmtPtr Parser::parse_with() {
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

Body parse_template(const std::vector<Token>& tokens, const std::string& origin) {
  return Parser(tokens, origin).parse_all();
}

}  // namespace striker::jinja
