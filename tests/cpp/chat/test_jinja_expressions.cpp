// Expressions: Python semantics of operators, literals, lookups and Undefined.
#include <gtest/gtest.h>

#include "core/error.h"
#include "jinja_test_util.h"

using striker::jinja::testing::render;

TEST(JinjaExpressions, Arithmetic) {
  EXPECT_EQ(render("{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** -1 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }}"),
            "3 -4 2 3.5 0.5 3.0 0.5");
  EXPECT_EQ(render("{{ 2 ** 3 ** 2 }} {{ 10 - 2 - 3 }} {{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ -1|abs }}"),
            "64 5 7 9 1");
  EXPECT_EQ(render("{{ 'x' * 3 }} {{ [1] * 2 }} {{ 'a' ~ 1 ~ none }} {{ [1, 2] + [3] }} {{ true + 1 }}"),
            "xxx [1, 1] a1None [1, 2, 3] 2");
  EXPECT_EQ(render("{{ '%s-%d' % ('a', 3) }} {{ '%05.1f|%-4s|%r' % (3.14159, 'ab', 'q') }}"), "a-3 003.1|ab  |'q'");
  EXPECT_THROW(render("{{ 'a' + 1 }}"), striker::Error);
  EXPECT_THROW(render("{{ 1 / 0 }}"), striker::Error);
  EXPECT_THROW(render("{{ 2 ** 70 }}"), striker::Error);  // beyond 64 bits: clear error, not a wrong number
}

TEST(JinjaExpressions, LogicAndComparison) {
  EXPECT_EQ(render("{{ 1 < 2 < 3 }} {{ 1 < 3 < 2 }} {{ not 1 }} {{ 0 or 'x' }} {{ 1 and 'y' }} {{ 'a' not in 'abc' }}"),
            "True False False x y False");
  EXPECT_EQ(render("{{ 1 == true }} {{ 1 in [true] }} {{ 1 == 1.0 }} {{ (1, 2) == [1, 2] }} {{ 'b' in {'b': 1} }}"),
            "True True True False True");
  EXPECT_EQ(render("{{ 'a' if false }}|{{ 'b' if true else 'c' }}"), "|b");
  EXPECT_THROW(render("{{ 1 < 'a' }}"), striker::Error);
}

TEST(JinjaExpressions, LiteralsAndPrinting) {
  EXPECT_EQ(render("{{ (1,) }} {{ (1,2) }} {{ () }} {{ none }} {{ true }} {{ {'a': [1, 'b', none]} }}"),
            "(1,) (1, 2) () None True {'a': [1, 'b', None]}");
  EXPECT_EQ(render("{{ 1.0 }} {{ 1e16 }} {{ 1.5e-5 }} {{ 0.1+0.2 }} {{ 1e-4 }} {{ 1e15 }} {{ -0.0 }}"),
            "1.0 1e+16 1.5e-05 0.30000000000000004 0.0001 1000000000000000.0 -0.0");
  EXPECT_EQ(render("{{ 'it''s' }} {{ \"a'b\" }} {{ 'tab\\there' }} {{ '\\u00e9\\x41' }} {{ 1_000 }}"),
            "its a'b tab\there éA 1000");
  EXPECT_EQ(render("{{ d }}", R"({"d": {"a": 1.0, "b": "x'y", "c": "q\"'", "e": "\n\u0001é"}})"),
            "{'a': 1.0, 'b': \"x'y\", 'c': 'q\"\\'', 'e': '\\n\\x01é'}");
}

TEST(JinjaExpressions, SubscriptsAndSlices) {
  EXPECT_EQ(render("{{ 'abc'[::-1] }} {{ 'héllo'[1:3] }} {{ [1,2,3,4][1::2] }} {{ [1,2,3][-1] }} {{ 'héllo'[1] }}"),
            "cba él [2, 4] 3 é");
  EXPECT_EQ(render("{{ msgs[-1].role }} {{ msgs|length - 1 }} {{ msgs[0]['role'] }}",
                   R"({"msgs": [{"role": "user"}, {"role": "assistant"}]})"),
            "assistant 1 user");
  EXPECT_EQ(render("{{ [1,2][5] }}|{{ [1,2]['x'] }}|{{ d['items'] }}|{{ d.k }}", R"({"d": {"items": 1, "k": 2}})"),
            "||1|2");
}

TEST(JinjaExpressions, UndefinedSemantics) {
  EXPECT_EQ(render("[{{ u }}]{{ u is defined }}{{ u|length }}{{ 'a' in u }}{{ u == u2 }}{{ u ~ 'x' }}"),
            "[]False0FalseTruex");
  EXPECT_EQ(render("{{ d.missing is defined }}|{{ d.missing }}|{{ n.x }}", R"({"d": {}, "n": null})"), "False||");
  EXPECT_THROW(render("{{ u.x }}"), striker::Error);
  EXPECT_THROW(render("{{ u + 1 }}"), striker::Error);
  EXPECT_THROW(render("{{ u() }}"), striker::Error);
  EXPECT_THROW(render("{{ d.missing.strip() }}", R"({"d": {}})"), striker::Error);
}

TEST(JinjaExpressions, Methods) {
  EXPECT_EQ(render("{{ ' x '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ 'a,b'.split(',') }}|{{ ' a  b '.split() }}|"
                   "{{ 'aXbXc'.split('X', 1) }}|{{ 'a-b-c'.rsplit('-', 1) }}"),
            "x|a|['a', 'b']|['a', 'b']|['a', 'bXc']|['a-b', 'c']");
  EXPECT_EQ(render("{{ 'abc'.startswith('ab') }} {{ 'abc'.endswith(('x','c')) }} {{ 'abcabc'.find('c') }} "
                   "{{ 'abcabc'.rfind('c') }} {{ 'abcabc'.count('b') }} {{ 'héllo'.find('l') }}"),
            "True True 2 5 2 2");
  EXPECT_EQ(render("{{ '{} and {}'.format(1, 'x') }} {{ '{0}{0}'.format('a') }} {{ '{n}!'.format(n=3) }} "
                   "{{ ', '.join(['a','b']) }} {{ \"they're\".title() }} {{ 'hello'.capitalize() }}"),
            "1 and x aa 3! a, b They'Re Hello");
  EXPECT_EQ(render("{{ [1,2,1].index(2) }} {{ [1,2,1].count(1) }} {{ {'a':1}.get('a') }} {{ {'a':1}.get('b', 5) }} "
                   "{{ {'a':1}.get('b') }} {{ {'a':1}.keys()|list }} {{ {'a':1}.values()|list }}"),
            "1 2 1 5 None ['a'] [1]");
  EXPECT_EQ(render("{{ 'line1\\nline2'.splitlines() }} {{ 'ab'.upper() }} {{ 'AB'.lower() }} {{ 'ß'.upper() }}"),
            "['line1', 'line2'] AB ab SS");
  // The immutable sandbox forbids mutating methods.
  EXPECT_THROW(render("{{ [1].append(2) }}"), striker::Error);
  EXPECT_EQ(render("{% set l = [1] %}[{{ l.append }}]"), "[]");
}

TEST(JinjaExpressions, Globals) {
  EXPECT_EQ(render("{{ range(3)|list }} {{ range(1,10,3)|list }} {{ dict(a=1) }} {{ namespace(x=1).x }}"),
            "[0, 1, 2] [1, 4, 7] {'a': 1} 1");
  EXPECT_EQ(render("{{ strftime_now('%Y')|length }}"), "4");
  EXPECT_EQ(render("{% set j = joiner('|') %}{% for x in [1,2,3] %}{{ j() }}{{ x }}{% endfor %}"), "1|2|3");
}
