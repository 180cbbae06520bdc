// Statements and whitespace control, expected values taken from jinja2 3.1 (HF settings).
#include <gtest/gtest.h>

#include "jinja_test_util.h"

using striker::jinja::testing::render;

TEST(JinjaStatements, IfElifElse) {
  const char* t = "{% if a %}A{% elif b %}B{% else %}C{% endif %}";
  EXPECT_EQ(render(t, R"({"a": 1})"), "A");
  EXPECT_EQ(render(t, R"({"b": 1})"), "B");
  EXPECT_EQ(render(t, "{}"), "C");
}

TEST(JinjaStatements, ForLoopVariables) {
  EXPECT_EQ(render("{% for x in 'ab' %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}"
                   "{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %}"),
            "1021TrueFalse2;2110FalseTrue2;");
  EXPECT_EQ(render("{% for x in [1,2,3] %}{{ loop.previtem }}-{{ loop.nextitem }},{% endfor %}"), "-2,1-3,2-,");
  EXPECT_EQ(render("{% for x in [1,2,3] %}{{ loop.cycle('a','b') }}{% endfor %}"), "aba");
}

TEST(JinjaStatements, ForElseFilterAndUnpacking) {
  EXPECT_EQ(render("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% for x in [1,2,3,4] if x is even %}{{ x }}{{ loop.length }}{% endfor %}"), "2242");
  EXPECT_EQ(render("{% for x in [1] if x > 5 %}x{% else %}none{% endfor %}"), "none");
  EXPECT_EQ(render("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", R"({"d": {"b": 1, "a": 2}})"),
            "b=1;a=2;");
  EXPECT_EQ(render("{% for a, b in [[1, 2], [3, 4]] %}{{ a + b }}{% endfor %}"), "37");
  EXPECT_EQ(render("{% for k in d %}{{ k }}{% endfor %}", R"({"d": {"x": 1, "y": 2}})"), "xy");
  EXPECT_EQ(render("{% for x in undefined_thing %}x{% else %}e{% endfor %}"), "e");
}

TEST(JinjaStatements, BreakContinue) {
  EXPECT_EQ(render("{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 5 %}{% break %}"
                   "{% endif %}{{ i }}{% endfor %}"),
            "0134");
}

TEST(JinjaStatements, LoopScopeDoesNotLeak) {
  EXPECT_EQ(render("{% set x = 0 %}{% for i in [1,2] %}{{ x }}{% set x = i %}{{ x }}{% endfor %}{{ x }}"), "01020");
  EXPECT_EQ(render("{% for i in [1,2] %}{% if i == 2 %}{{ x }}{% endif %}{% set x = i %}{% endfor %}"), "");
  EXPECT_EQ(render("{% if true %}{% set y = 5 %}{% endif %}{{ y }}"), "5");
}

TEST(JinjaStatements, SetForms) {
  EXPECT_EQ(render("{% set a, b = 1, 2 %}{{ a }}{{ b }}"), "12");
  EXPECT_EQ(render("{% set x %}inner {{ 1 + 1 }}{% endset %}[{{ x }}]"), "[inner 2]");
  EXPECT_EQ(render("{% set y | upper %}abc{% endset %}{{ y }}"), "ABC");
  EXPECT_EQ(render("{% set ns = namespace(a=1) %}{% for i in range(3) %}{% set ns.a = ns.a + i %}{% endfor %}"
                   "{{ ns.a }}"),
            "4");
  EXPECT_EQ(render("{% set ns = namespace({'k': 2}, j=3) %}{{ ns.k }}{{ ns.j }}{{ ns.missing }}"), "23");
}

TEST(JinjaStatements, MacrosAndCall) {
  EXPECT_EQ(render("{% macro m(a, b=2) %}{{ a }}{{ b }}{% endmacro %}{{ m(1) }}{{ m(1, 3) }}{{ m(b=4, a=5) }}"),
            "12135" "4");
  EXPECT_EQ(render("{% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, k=3) }}"),
            "1(2,){'k': 3}");
  EXPECT_EQ(render("{% macro m(a) %}[{{ a }}]{% endmacro %}{{ m() }}"), "[]");
  EXPECT_EQ(render("{% macro box(t) %}[{{ caller(t) }}]{% endmacro %}{% call(x) box('q') %}in {{ x }}{% endcall %}"),
            "[in q]");
  EXPECT_EQ(render("{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(3) }}"), "321");
  // Macros see template-level variables as of call time.
  EXPECT_EQ(render("{% macro m() %}{{ g }}{% endmacro %}{% set g = 'late' %}{{ m() }}"), "late");
}

TEST(JinjaStatements, FilterBlockRawWith) {
  EXPECT_EQ(render("{% filter upper %}hello {{ 'w' }}{% endfilter %}"), "HELLO W");
  EXPECT_EQ(render("{% raw %}{{ not rendered }}{% endraw %}"), "{{ not rendered }}");
  EXPECT_EQ(render("{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}[{{ a }}]"), "3[]");
  EXPECT_EQ(render("{% generation %}kept{% endgeneration %}"), "kept");
}

TEST(JinjaWhitespace, TrimAndLstripBlocks) {
  EXPECT_EQ(render("  {% if true %}\n  x\n  {% endif %}\n  y"), "  x\n  y");
  EXPECT_EQ(render("a {# c #}\n  b\n  {# c2 #}\nz"), "a   b\nz");
  EXPECT_EQ(render("{% if true %}\nline\n{% endif %}\n"), "line\n");
  EXPECT_EQ(render("x {{ 1 }}\ny"), "x 1\ny");  // no trimming after }}
}

TEST(JinjaWhitespace, DashAndPlusMarkers) {
  EXPECT_EQ(render("x {{- ' y ' -}} z"), "x y z");
  EXPECT_EQ(render("a\n  {%- if true -%}\n  b\n  {%- endif -%}\n  c"), "abc");
  EXPECT_EQ(render("  {%+ if true %}x{% endif %}"), "  x");
  EXPECT_EQ(render("{% if true +%}\nx{% endif %}"), "\nx");
}

TEST(JinjaWhitespace, SourceNormalization) {
  EXPECT_EQ(render("a\r\nb\rc\n"), "a\nb\nc");  // newlines normalized, one trailing newline dropped
  EXPECT_EQ(render("a\n\n"), "a\n");
}

TEST(JinjaStatements, CompileTimeScopingLikeJinja2) {
  const char* ctx = R"({"b": 1})";
  // Read at the top level before the assignment: the context value.
  EXPECT_EQ(render("{{ b }}{% set b = 2 %}{{ b }}", ctx), "12");
  // Read in a nested frame before the top level assigns it: undefined (not the context value).
  EXPECT_EQ(render("{% for i in [1] %}[{{ b }}]{% endfor %}{% set b = 2 %}", ctx), "[]");
  EXPECT_EQ(render("{% macro m() %}{{ b }}{% endmacro %}[{{ m() }}]{% set b = 2 %}{{ m() }}", ctx), "[]2");
  // Assigned in only one branch of an if: looked up outside.
  EXPECT_EQ(render("{% if false %}{% set b = 5 %}{% endif %}{% for i in [1] %}{{ b }}{% endfor %}", ctx), "1");
  // Block bodies are frames: their assignments stay inside.
  EXPECT_EQ(render("{% set x %}{% set q = 1 %}{% endset %}[{{ q }}]"), "[]");
}
