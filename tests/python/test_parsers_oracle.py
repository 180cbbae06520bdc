"""Cross-checks the C++ emulation of Python semantics in the glm47 tool parser against real
Python: the argument regexes (re), json.dumps(ensure_ascii=False), float repr, and vLLM's
schema coercion (written here from chat-format.md §2.3 on top of Python's own int/float/json).

Python writes the cases with their expected results; the gtest `PythonOracle.*` in
test_parsers compares the C++ output and prints how many cases it checked.
"""
import json
import math
import os
import pathlib
import random
import re
import subprocess

import pytest

ARG_RE = re.compile(r"<arg_key>(?P<key>.*?)</arg_key>\s*<arg_value>(?P<value>.*?)</arg_value>", re.DOTALL)
PARTIAL_ARG_RE = re.compile(r"<arg_key>(?P<key>.*?)</arg_key>\s*<arg_value>(?P<value>.*)$", re.DOTALL)

ALIASES = {
    "str": "string", "text": "string", "varchar": "string", "char": "string", "enum": "string",
    "int": "integer", "int32": "integer", "int64": "integer", "uint": "integer", "uint32": "integer",
    "uint64": "integer", "long": "integer", "short": "integer", "unsigned": "integer", "float": "number",
    "float32": "number", "float64": "number", "double": "number", "bool": "boolean", "dict": "object",
    "arr": "array", "list": "array", "sequence": "array",
}


def scan_args(body, partial):
    params = {}
    for m in ARG_RE.finditer(body):
        params[m.group("key").strip()] = m.group("value")
    if partial:
        m = PARTIAL_ARG_RE.search(ARG_RE.sub("", body))
        if m and m.group("key").strip():
            params[m.group("key").strip()] = m.group("value")
    return params


def finite(obj):
    try:
        json.dumps(obj, allow_nan=False)
        return True
    except (ValueError, TypeError):
        return False


def coerce(value, types):
    wanted = {ALIASES.get(t.strip().lower(), t.strip().lower()) for t in types}
    for kind in ["null", "integer", "number", "boolean", "object", "array", "string"]:
        if kind not in wanted:
            continue
        if kind == "null":
            if value.lower() == "null":
                return None
        elif kind == "string":
            return value
        elif kind == "integer":
            try:
                return int(value)
            except ValueError:
                pass
        elif kind == "number":
            try:
                val = float(value)
            except ValueError:
                continue
            if math.isfinite(val):
                return val if val != int(val) else int(val)
        elif kind == "boolean":
            low = value.lower().strip()
            if low in ("true", "1"):
                return True
            if low in ("false", "0"):
                return False
        else:
            try:
                parsed = json.loads(value)
            except ValueError:
                continue
            if finite(parsed):
                return parsed
    try:
        parsed = json.loads(value)
    except ValueError:
        return value
    return parsed if finite(parsed) else value


def random_value(rng):
    pieces = ["0", "7", "42", "-3", "+5", "1_000", "1__0", "_1", "2.0", "2.5", ".5", "5.", "1e5", "1E-7", "1e400",
              "-0", "-0.0", "inf", "-Infinity", "nan", "true", "False", "TRUE", "1", "null", "NULL", "None",
              " ", "\t", "\n", "\x1c", "abc", "é", "日本", '"x"', "[1, 2]", "[\"a\",\"b\"]", "{\"k\": [1, 2.5]}",
              "{\"b\":1,\"a\":{}}", "['a']", "[1, NaN]", "{", "]", "0x10", "1e", "3.14159265358979",
              "0.1", "1e-05", "123456789012345678", "{\"a\":1,\"b\":0,\"a\":2}", "[123456789012345678901234567890]"]
    return "".join(rng.choice(pieces) for _ in range(rng.randint(1, 3)))


def random_types(rng):
    names = ["string", "integer", "number", "boolean", "null", "object", "array", "int", "float", "bool",
             "dict", "list", " String ", "weird"]
    return rng.sample(names, rng.randint(1, 3))


def random_body(rng):
    pieces = ["<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>", "a", " b ", "city", "\n", " ", "x<y",
              "</arg_", "<arg_key", "é", "v1", "\"q\"", "\\"]
    return "".join(rng.choice(pieces) for _ in range(rng.randint(0, 14)))


def build_cases(rng):
    cases = {"coerce": [], "scan": [], "float_repr": [], "json_string": []}
    for _ in range(3000):
        value, types = random_value(rng), random_types(rng)
        cases["coerce"].append({"value": value, "types": types,
                                "expected": json.dumps(coerce(value, types), ensure_ascii=False)})
    for _ in range(3000):
        body = random_body(rng)
        for partial in (False, True):
            cases["scan"].append({"body": body, "partial": partial,
                                  "expected": [[k, v] for k, v in scan_args(body, partial).items()]})
    for _ in range(3000):
        x = rng.choice([rng.uniform(-1e6, 1e6), rng.uniform(-1, 1) * 10 ** rng.randint(-30, 30),
                        float(rng.randint(-10**17, 10**17)), rng.random() * 1e-5, 2.0 ** rng.randint(-60, 80)])
        cases["float_repr"].append({"value": repr(x), "expected": repr(x)})
    alphabet = [chr(c) for c in range(0, 0x80)] + ["é", "日", "\u2028", "😀", "\u00a0"]
    for _ in range(1000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        cases["json_string"].append({"text": text, "expected": json.dumps(text, ensure_ascii=False)})
    return cases


@pytest.fixture(scope="module")
def parsers_test_bin():
    build = pathlib.Path(os.environ.get("STRIKER_BUILD_DIR", pathlib.Path(__file__).resolve().parents[2] / "build"))
    path = build / "tests" / "test_parsers"
    if not path.exists():
        pytest.fail(f"{path} not found: build the test_parsers target first")
    return path


def test_cpp_matches_python_semantics(parsers_test_bin, tmp_path):
    cases = build_cases(random.Random(20261129))
    case_file = tmp_path / "oracle.json"
    case_file.write_text(json.dumps(cases))
    res = subprocess.run([str(parsers_test_bin), "--gtest_filter=PythonOracle.*"], capture_output=True, text=True,
                         env={**os.environ, "STRIKER_PARSERS_ORACLE": str(case_file)}, timeout=120)
    assert res.returncode == 0, res.stdout[-6000:]
    for section in cases:
        assert f"checked {len(cases[section])} {section} cases" in res.stdout, res.stdout[-3000:]
