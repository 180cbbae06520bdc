"""Differential fuzzing: many small generated templates x contexts rendered by striker's
interpreter and by Python jinja2 (HF configuration) must agree byte for byte (or both fail).
Generated constructs avoid what the value model deliberately prints differently from Python
(generator objects, dict_items, range objects, object reprs)."""
import random

from jinja_reference import compare

CONTEXTS = [
    {"x": 3, "y": -2.5, "s": "  Héllo, World \n", "t": "a,b,,c", "n": None, "b": True,
     "items": [3, 1, 2], "words": ["b", "A", "a"], "d": {"k": "v", "a": 1, "z": [1, 2]},
     "msgs": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": " yo ", "tool_calls": [
         {"function": {"name": "f", "arguments": {"q": 1, "r": "s"}}}]}]},
    {"x": 0, "y": 1e-7, "s": "", "t": "one", "n": None, "b": False, "items": [], "words": [],
     "d": {}, "msgs": []},
    {"x": 10, "y": 2.0, "s": "x\ty\n\nz", "t": "é|ü|ß", "n": None, "b": True, "items": [1.5, -1, 7],
     "words": ["zeta", "Alpha", "beta", "alpha"], "d": {"b": None, "a": {"c": [True, False]}},
     "msgs": [{"role": "system", "content": "sys"}, {"role": "tool", "content": [{"type": "text", "text": "r"}]}]},
]

ATOMS = ["x", "y", "s", "t", "n", "b", "items", "words", "d", "msgs", "u", "1", "0", "-3", "2.5", "'ab'",
         "'A b'", "''", "none", "true", "false", "[1, 'two', none]", "{'p': 1, 'q': [2]}", "(1, 2)", "'é\\n'"]
BINOPS = ["+", "-", "*", "/", "//", "%", "~", "and", "or", "==", "!=", "<", ">=", "in", "not in", "**"]
FILTERS = ["length", "string", "upper", "lower", "title", "capitalize", "trim", "first", "last", "list",
           "sort", "unique|list", "reverse|list", "tojson", "tojson(indent=2)", "int", "float", "abs", "round",
           "round(1)", "default('D')", "default('D', true)", "join(', ')", "join", "items|list", "dictsort",
           "sum", "max", "min", "wordcount", "indent(2)", "replace('a', 'X')", "select('odd')|list",
           "reject('none')|list", "map('string')|list", "batch(2)|list", "count", "e", "safe", "center(9)"]
TESTS = ["defined", "undefined", "none", "string", "number", "integer", "float", "mapping", "sequence",
         "iterable", "boolean", "true", "false", "odd", "even", "divisibleby(3)", "eq(3)", "ne 1",
         "lower", "upper", "in([1, 3])", "callable"]
METHODS = ["strip()", "lstrip()", "rstrip(' \\n')", "split(',')", "split()", "rsplit(',', 1)", "upper()",
           "lower()", "title()", "startswith('a')", "endswith('o')", "replace('l', 'L')", "find('l')",
           "count('l')", "splitlines()", "capitalize()", "isdigit()", "zfill(5)"]
LOOKUPS = [".k", ".role", ".content", "['a']", ".get('z')", ".items()|list", ".keys()|list"]


def gen_expr(rng, depth=0):
    r = rng.random()
    if depth > 2 or r < 0.3:
        return rng.choice(ATOMS)
    if r < 0.45:
        return f"({gen_expr(rng, depth + 1)} {rng.choice(BINOPS)} {gen_expr(rng, depth + 1)})"
    if r < 0.6:
        return f"{gen_expr(rng, depth + 1)}|{rng.choice(FILTERS)}"
    if r < 0.7:
        neg = rng.choice(["", "not "])
        return f"({gen_expr(rng, depth + 1)} is {neg}{rng.choice(TESTS)})"
    if r < 0.78:
        return f"{rng.choice(['s', 't', 'msgs[0].content', 'd.k', 'words[0]'])}.{rng.choice(METHODS)}"
    if r < 0.84:
        return f"{rng.choice(['items', 's', 'words', 't'])}[{rng.choice(['0', '-1', '1:', ':-1', '::-1', '::2', '5'])}]"
    if r < 0.9:
        return f"({gen_expr(rng, depth + 1)} if {gen_expr(rng, depth + 1)} else {gen_expr(rng, depth + 1)})"
    if r < 0.95:
        return rng.choice(["d", "msgs[-1]", "msgs[0]", "d.a"]) + rng.choice(LOOKUPS)
    return f"not {gen_expr(rng, depth + 1)}"


def ws(rng):
    return rng.choice(["", " ", "\n", "  \n  ", "\n\n", "\t"])


def open_tag(rng, kind):
    return "{" + kind + rng.choice(["", "", "-", "+"] if kind == "%" else ["", "", "-"]) + " "


def close_tag(rng, kind):
    return " " + rng.choice(["", "", "-"] + (["+"] if kind == "%" else [])) + kind + "}"


def gen_block(rng, depth=0):
    parts = []
    for _ in range(rng.randint(1, 4)):
        r = rng.random()
        parts.append(ws(rng))
        if r < 0.35 or depth > 1:
            parts.append(f"{open_tag(rng, '{')}{gen_expr(rng)}{close_tag(rng, '}')}")
        elif r < 0.55:
            parts.append(f"{open_tag(rng, '%')}if {gen_expr(rng)}{close_tag(rng, '%')}{gen_block(rng, depth + 1)}"
                         f"{open_tag(rng, '%')}else{close_tag(rng, '%')}{gen_block(rng, depth + 1)}"
                         f"{open_tag(rng, '%')}endif{close_tag(rng, '%')}")
        elif r < 0.75:
            seq = rng.choice(["items", "words", "d", "msgs", "t", "range(3)", "d.items()", "u", "[]"])
            var = "k, v" if seq == "d.items()" else "it"
            cond = f" if {gen_expr(rng)}" if rng.random() < 0.2 else ""
            body = rng.choice(["{{ it }}", "{{ loop.index }}/{{ loop.length }}", "{{ loop.first }}{{ loop.last }}",
                               "{{ k }}={{ v }}", "{{ loop.previtem }}|{{ loop.nextitem }}", "{{ it|tojson }}"])
            if var == "it":
                body = body.replace("{{ k }}={{ v }}", "{{ it }}")
            else:
                body = "{{ k }}={{ v }}"
            tail = f"{open_tag(rng, '%')}else{close_tag(rng, '%')}empty" if rng.random() < 0.3 else ""
            parts.append(f"{open_tag(rng, '%')}for {var} in {seq}{cond}{close_tag(rng, '%')}{ws(rng)}{body}{ws(rng)}"
                         f"{tail}{open_tag(rng, '%')}endfor{close_tag(rng, '%')}")
        elif r < 0.85:
            parts.append(f"{open_tag(rng, '%')}set v{depth} = {gen_expr(rng)}{close_tag(rng, '%')}{ws(rng)}"
                         f"{{{{ v{depth} }}}}")
        elif r < 0.92:
            parts.append(f"{rng.choice(['  ', ''])}{{# note #}}{ws(rng)}")
        else:
            parts.append("text with {braces} and % signs")
    return "".join(parts)


def test_generated_templates_match_jinja2():
    rng = random.Random(20261129)
    cases = []
    for _ in range(700):
        template = gen_block(rng)
        cases.append((template, rng.choice(CONTEXTS)))
    problems = compare(cases)
    assert not problems, f"{len(problems)} of {len(cases)} differ; first ones:\n" + "\n".join(problems[:8])


STATEMENT_SNIPPETS = [
    "{% macro m(a, b='B') %}<{{ a }}|{{ b }}>{% endmacro %}{{ m(EXPR) }}{{ m(1, b=EXPR) }}",
    "{% set ns = namespace(c=0, s='') %}{% for it in SEQ %}{% set ns.c = ns.c + 1 %}{% set ns.s = ns.s ~ it %}{% endfor %}{{ ns.c }}:{{ ns.s }}",
    "{% macro w() %}[{{ caller() }}]{% endmacro %}{% call w() %}{{ EXPR }}{% endcall %}",
    "{% filter upper %}{{ EXPR }} tail{% endfilter %}",
    "{% set blk %}\n  {{ EXPR }}\n{% endset %}({{ blk|trim }})",
    "{% for a in SEQ %}{% for b in SEQ %}{{ loop.index }}{{ a }}{% if loop.last %};{% endif %}{% endfor %}{% endfor %}",
    "{% for it in SEQ %}{% if loop.index is even %}{% continue %}{% endif %}{{ it }}{% if loop.index > 3 %}{% break %}{% endif %}{% endfor %}",
    "{% raw %}{{ EXPR }} {% if %}{% endraw %}",
    "{% with q = EXPR %}{{ q }}{% endwith %}",
    "{% if EXPR %}\n    yes\n{% elif EXPR %}\n    elif\n{% else %}\n    no\n{% endif %}",
    "{{ EXPR }}{# comment\n  spanning lines #}\n  after",
    "{%- for it in SEQ -%}\n  {{ it }}\n{%- endfor %}\n",
    "  {% for it in SEQ %}\n    - {{ it }}\n  {% endfor %}\n",
    "{{ '%s|%s' % (EXPR, EXPR) }}",
    "{{ (EXPR)|tojson(indent=1) }}",
    # Reuses context names on purpose: jinja2's compile-time scoping makes a name the top
    # level assigns later undefined inside loops/macros/blocks (scoping.cpp).
    "{% set a, b = EXPR, EXPR %}{{ b }}{{ a }}",
    "{% for it in SEQ %}{{ x }}{% endfor %}{% set x = EXPR %}{% macro mx() %}{{ s }}{% endmacro %}{{ mx() }}{% set s = 1 %}{{ mx() }}",
]


def gen_statement_template(rng):
    parts = []
    for _ in range(rng.randint(1, 3)):
        snippet = rng.choice(STATEMENT_SNIPPETS)
        while "EXPR" in snippet:
            snippet = snippet.replace("EXPR", gen_expr(rng, 1), 1)
        while "SEQ" in snippet:
            snippet = snippet.replace("SEQ", rng.choice(["items", "words", "t", "d", "range(4)", "[]", "msgs|map(attribute='role')"]), 1)
        parts.append(snippet + ws(rng))
    return "".join(parts)


def test_generated_statement_templates_match_jinja2():
    rng = random.Random(777)
    cases = [(gen_statement_template(rng), rng.choice(CONTEXTS)) for _ in range(500)]
    problems = compare(cases)
    assert not problems, f"{len(problems)} of {len(cases)} differ; first ones:\n" + "\n".join(problems[:8])


SOUP = ["{{", "}}", "{%", "%}", "{#", "#}", "-", "+", " if ", " for ", " in ", " endfor ", " endif ", " else ", " set ",
        "=", " macro ", "(", ")", "[", "]", "{", "}", "'s'", "'", '"', "\\", " x ", "1", "1.5", ".", "|", "upper",
        " is ", " not ", " and ", ",", ":", "\n", " ", "é", " raw ", " endraw ", " call ", "caller", "loop", "~", "*",
        "**", "//", "%", "items", "defined", "{{ x }}", "{% if x %}", "{% endif %}", "{% for i in items %}",
        "{% endfor %}", "  ", "\t", "{%-", "-%}", "{{-", "-}}"]


def test_token_soup_matches_jinja2_including_syntax_errors():
    """Random fragments: mostly syntax errors, which must be errors in both (and never a crash);
    whatever jinja2 accepts must render the same."""
    rng = random.Random(99)
    cases = [("".join(rng.choice(SOUP) for _ in range(rng.randint(1, 14))), {"x": 1, "items": [1, 2]})
             for _ in range(3000)]
    problems = compare(cases)
    assert not problems, f"{len(problems)} of {len(cases)} differ; first ones:\n" + "\n".join(problems[:8])
