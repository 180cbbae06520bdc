// Error reporting: syntax errors carry line:column, render errors are striker::Error with
// a location, and runaway templates hit a limit instead of hanging or crashing.
#include <gtest/gtest.h>

#include <string>

#include "chat/jinja/template.h"
#include "core/error.h"
#include "jinja_test_util.h"

using striker::jinja::Template;
using striker::jinja::testing::render;

namespace {

std::string error_of(const std::string& source, const std::string& vars = "{}") {
  try {
    render(source, vars);
  } catch (const striker::Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::string parse_error_of(const std::string& source) {
  try {
    Template::parse(source, "tmpl");
  } catch (const striker::Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST(JinjaErrors, SyntaxErrorsHaveLineAndColumn) {
  EXPECT_EQ(parse_error_of("line one\n{% if x %}\n  {{ 1 + }}\n{% endif %}"),
            "tmpl:3:10: unexpected end of print statement");
  EXPECT_EQ(parse_error_of("{% if x %}no end"), "tmpl:1:17: unexpected end of template; expected 'elif' or 'else' or 'endif'");
  EXPECT_EQ(parse_error_of("ab\n {% frobnicate %}"), "tmpl:2:5: encountered unknown tag 'frobnicate'");
  EXPECT_EQ(parse_error_of("{{ x|nosuchfilter }}"), "tmpl:1:6: no filter named 'nosuchfilter'");
  EXPECT_EQ(parse_error_of("{{ x is nosuchtest }}"), "tmpl:1:9: no test named 'nosuchtest'");
  EXPECT_EQ(parse_error_of("{{ 'abc }}"), "tmpl:1:4: unexpected end of string literal");
  EXPECT_EQ(parse_error_of("{# never closed"), "tmpl:1:1: missing end of comment tag");
  EXPECT_EQ(parse_error_of("{{ x "), "tmpl:1:1: unexpected end of template, expected '}}'");
  EXPECT_EQ(parse_error_of("{% break %}"), "tmpl:1:4: 'break' outside of a loop");
  EXPECT_EQ(parse_error_of("{% include 'x' %}"),
            "tmpl:1:4: 'include' is not supported in chat templates (no template loader)");
}

TEST(JinjaErrors, RenderErrorsHaveLocation) {
  EXPECT_EQ(error_of("ok\n{{ raise_exception('Only user and assistant roles are supported!') }}"),
            "t:2:4: raise_exception: Only user and assistant roles are supported!");
  EXPECT_EQ(error_of("{{ m.content.strip() }}", R"({"m": {}})"), "t:1:13: 'dict object' has no attribute 'content'");
  EXPECT_EQ(error_of("{{ 'a' + 1 }}"), "t:1:8: can only concatenate str (not \"int\") to str");
  EXPECT_EQ(error_of("{% for x in 5 %}{% endfor %}"), "t:1:4: 'int' object is not iterable");
  EXPECT_EQ(error_of("{% set x.y = 1 %}", R"({"x": {}})"), "t:1:4: cannot assign attribute on non-namespace object");
  EXPECT_EQ(error_of("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}"), "t:1:34: macro 'm' takes not more than 1 argument(s)");
  EXPECT_EQ(error_of("{{ [1].append(2) }}"), "t:1:7: access to attribute 'append' of 'list' object is unsafe.");
}

TEST(JinjaErrors, RunawayTemplatesAreBounded) {
  EXPECT_NE(error_of("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}").find("macro recursion is too deep"),
            std::string::npos);
  EXPECT_NE(error_of("{{ range(1000000) }}").find("Range too big"), std::string::npos);
  EXPECT_NE(error_of("{{ 'x' * 100000000 }}").find("too large"), std::string::npos);
  EXPECT_NE(error_of("{% set ns = namespace(s='xxxxxxxxxxxxxxxx') %}{% for i in range(30) %}"
                     "{% set ns.s = ns.s ~ ns.s %}{% endfor %}")
                .find("exceeds"),
            std::string::npos);
  // The step guard with a smaller limit than the default 20M (which costs ~30 s of empty iterations here):
  // the same guard, and a render that stays under it is not refused.
  const std::string nested = "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}";
  striker::jinja::RenderLimits small;
  small.max_steps = 200'000;
  try {
    Template::parse(nested, "t").render_json(nlohmann::ordered_json::object(), small);
    ADD_FAILURE() << "the nested loops were not stopped";
  } catch (const striker::Error& e) {
    EXPECT_NE(std::string(e.what()).find("exceeded 200000 loop iterations"), std::string::npos) << e.what();
  }
  EXPECT_EQ(Template::parse("{% for a in range(300) %}{% for b in range(300) %}{% endfor %}{% endfor %}", "t")
                .render_json(nlohmann::ordered_json::object(), small),
            "");
  std::string deep(5000, '(');
  EXPECT_NE(parse_error_of("{{ " + deep + "1" + std::string(5000, ')') + " }}").find("nesting is too deep"),
            std::string::npos);
}

TEST(JinjaErrors, BadInputs) {
  EXPECT_NE(parse_error_of("\xff\xfe").find("invalid UTF-8"), std::string::npos);
  EXPECT_THROW(Template::parse("{{ x }}", "t").render(striker::jinja::Value(1)), striker::Error);
}

TEST(JinjaErrors, DeepAndCyclicValuesAreErrorsNotCrashes) {
  std::string deep_json = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_NE(error_of("{{ x }}", "{\"x\": " + deep_json + "}").find("nested deeper"), std::string::npos);
  EXPECT_NE(error_of("{% set ns = namespace(x=[]) %}{% for i in range(100000) %}{% set ns.x = [ns.x] %}{% endfor %}")
                .find("nested deeper"),
            std::string::npos);
  EXPECT_NE(error_of("{% set ns = namespace() %}{% set ns.a = [ns] %}{{ ns }}").find("too deeply"), std::string::npos);
}

TEST(JinjaErrors, HugeNumbersInPathsAreErrors) {
  EXPECT_THROW(render("{{ '{99999999999999999999999}'.format(1) }}"), striker::Error);
  EXPECT_THROW(render("{{ [{'a': 1}]|map(attribute='99999999999999999999999')|list }}"), striker::Error);
}
