// Built-in filters and tests (values as jinja2 3.1 prints them).
#include <gtest/gtest.h>

#include "core/error.h"
#include "jinja_test_util.h"

using striker::jinja::testing::render;

TEST(JinjaFilters, ToJsonMatchesPythonJsonDumps) {
  EXPECT_EQ(render("{{ x|tojson }}", R"({"x": {"b": [1, 2.5, "é\n\u2028\u0001\"\\"], "a": null, "t": true}})"),
            "{\"b\": [1, 2.5, \"é\\n\u2028\\u0001\\\"\\\\\"], \"a\": null, \"t\": true}");
  EXPECT_EQ(render("{{ x|tojson(indent=2) }}", R"({"x": {"a": [1, {}], "b": []}})"),
            "{\n  \"a\": [\n    1,\n    {}\n  ],\n  \"b\": []\n}");
  EXPECT_EQ(render("{{ x|tojson(separators=(',', ':'), sort_keys=true) }}", R"({"x": {"b": 1, "a": [2]}})"),
            "{\"a\":[2],\"b\":1}");
  EXPECT_EQ(render("{{ 'é'|tojson(ensure_ascii=true) }} {{ 1.0|tojson }} {{ (1, 2)|tojson }}"),
            "\"\\u00e9\" 1.0 [1, 2]");
  EXPECT_THROW(render("{{ u|tojson }}"), striker::Error);
}

TEST(JinjaFilters, Strings) {
  EXPECT_EQ(render("{{ 'a b'|title }} {{ 'hello-world foo'|title }} {{ 'mIxEd'|capitalize }} {{ 'x'|upper }} "
                   "{{ 'X'|lower }} {{ '  x '|trim }} {{ 'xxyxx'|trim('x') }} {{ 'aaa'|replace('a','b',2) }}"),
            "A B Hello-World Foo Mixed X x x y bba");
  EXPECT_EQ(render("{{ 'a b c'|wordcount }} {{ 5|string ~ 'x' }} {{ '<a&\"\\'>'|escape }} {{ 'x'|center(5) }}|"),
            "3 5x &lt;a&amp;&#34;&#39;&gt;   x  |");
  EXPECT_EQ(render("{{ 'line1\nline2\n\nline3'|indent(2) }}|{{ 'a\nb'|indent(2, first=true) }}|"
                   "{{ 'a\n\nb'|indent(2, blank=true) }}|{{ 'a\nb'|indent('>') }}"),
            "line1\n  line2\n\n  line3|  a\n  b|a\n  \n  b|a\n>b");
  EXPECT_EQ(render("{{ '%s=%s'|format('a', 1) }} {{ 'héllo'|length }} {{ 'abc'|reverse }} {{ 'abc'|first }}"),
            "a=1 5 cba a");
}

TEST(JinjaFilters, Numbers) {
  EXPECT_EQ(render("{{ '12'|int + 1 }} {{ '1.5'|float }} {{ 'x'|int }} {{ 'x'|int(7) }} {{ '0x1A'|int(base=16) }} "
                   "{{ 3.9|int }} {{ '4.7'|int }} {{ none|float }} {{ true|int }}"),
            "13 1.5 0 7 26 3 4 0.0 1");
  EXPECT_EQ(render("{{ 3|round }} {{ 2.5|round }} {{ 3.5|round }} {{ 2.675|round(2) }} {{ 2.5|round(method='ceil') }} "
                   "{{ 2.7|round(method='floor') }} {{ -3|abs }} {{ -2.5|abs }}"),
            "3 2.0 4.0 2.67 3.0 2.0 3 2.5");
  EXPECT_EQ(render("{{ [1,2,3]|sum }} {{ [1.5,2]|sum }} {{ [{'a':1},{'a':2}]|sum(attribute='a') }} {{ [1,5,3]|max }} "
                   "{{ [1,5,3]|min }} {{ ['b','A']|max }} {{ []|max }}"),
            "6 3.5 3 5 1 b ");
}

TEST(JinjaFilters, Sequences) {
  EXPECT_EQ(render("{{ [3,1,2]|sort }} {{ ['b','A','a']|sort }} {{ [3,1,2]|sort(reverse=true) }} "
                   "{{ ['b','A','a']|sort(case_sensitive=true) }}"),
            "[1, 2, 3] ['A', 'a', 'b'] [3, 2, 1] ['A', 'a', 'b']");
  EXPECT_EQ(render("{{ [{'n':'b','v':2},{'n':'a','v':1}]|sort(attribute='n')|map(attribute='v')|list }} "
                   "{{ ['b','A','a']|unique|list }} {{ [1,2]|reverse|list }} {{ [1,2,3]|last }} {{ []|first }}|"),
            "[1, 2] ['b', 'A'] [2, 1] 3 |");
  EXPECT_EQ(render("{{ [1,2,3]|select('odd')|list }} {{ [1,2,3]|reject('odd')|list }} {{ [1,0,2]|select|list }} "
                   "{{ [{'a':1},{'a':0}]|selectattr('a')|list }} {{ [{'a':1},{'a':2}]|rejectattr('a', 'eq', 1)|list }} "
                   "{{ [3,4]|select('divisibleby', 2)|list }}"),
            "[1, 3] [2] [1, 2] [{'a': 1}] [{'a': 2}] [4]");
  EXPECT_EQ(render("{{ ['a','b']|map('upper')|join(',') }} {{ [{'a':{'b':1}}]|map(attribute='a.b')|list }} "
                   "{{ [{}]|map(attribute='x', default='D')|list }} {{ [1,2]|join }} {{ [{'n':1}]|join(',', 'n') }}"),
            "A,B [1] ['D'] 12 1");
  EXPECT_EQ(render("{{ {'b':1,'a':2}|dictsort }} {{ {'b':1,'a':2}|dictsort(by='value', reverse=true) }} "
                   "{{ {'b':1}|items|list }} {{ 'ab'|list }} {{ {'k': 1}|list }} {{ [1,2,3,4,5]|batch(2)|list }} "
                   "{{ [1,2,3]|batch(2, 0)|list }}"),
            "[('a', 2), ('b', 1)] [('a', 2), ('b', 1)] [('b', 1)] ['a', 'b'] ['k'] [[1, 2], [3, 4], [5]] "
            "[[1, 2], [3, 0]]");
  EXPECT_EQ(render("{{ x|default('d') }} {{ ''|default('d', true) }} {{ none|default('d') }} {{ x|d('z') }} "
                   "{{ [1,2]|length }} {{ {'a':1}|count }} {{ u|length }} {{ 'x'|safe }}"),
            "d d None z 2 1 0 x");
}

TEST(JinjaTests, TypeTests) {
  EXPECT_EQ(render("{{ u is defined }} {{ u is undefined }} {{ none is none }} {{ true is boolean }} "
                   "{{ 1 is boolean }} {{ true is true }} {{ 0 is false }} {{ false is false }}"),
            "False True True True False True False True");
  EXPECT_EQ(render("{{ 1 is integer }} {{ true is integer }} {{ 1.0 is float }} {{ 1 is number }} {{ true is number }} "
                   "{{ 'x' is string }} {{ {} is mapping }} {{ [] is sequence }} {{ 'x' is sequence }} "
                   "{{ {} is iterable }} {{ 1 is iterable }} {{ u is iterable }} {{ range is callable }}"),
            "True False True True True True True True True True False True True");
}

TEST(JinjaTests, ValueTests) {
  EXPECT_EQ(render("{{ 5 is odd }} {{ 4 is even }} {{ 6 is divisibleby 3 }} {{ 6 is divisibleby(4) }} "
                   "{{ 1 is eq 1 }} {{ 1 is equalto 2 }} {{ 1 is ne 2 }} {{ 3 is gt 2 }} {{ 3 is lt 2 }} "
                   "{{ 3 is ge 3 }} {{ 3 is le 2 }} {{ 3 is greaterthan 1 }} {{ 3 is lessthan 1 }}"),
            "True True True False True False True True False True False True False");
  EXPECT_EQ(render("{{ 2 is in [1,2] }} {{ 'a' is lower }} {{ 'A' is upper }} {{ 'upper' is filter }} "
                   "{{ 'odd' is test }} {{ 'nope' is filter }} {{ none is sameas none }} {{ 'x' is escaped }} "
                   "{{ 1 is not none }}"),
            "True True True True True False True False True");
}
