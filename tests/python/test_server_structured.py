"""Structured outputs end to end on a model with *random* weights: it knows nothing, so every
valid output below is the grammar engine's doing. JSON schemas (response_format and vLLM's
structured_outputs, streamed and not, temperature 1) must parse and validate with the
`jsonschema` package; regex outputs must fullmatch; choice returns a choice; json_object an
object; tool_choice "required" / named must give tool calls whose arguments validate against the
tool's schema, streamed as vLLM streams them. Bad specs are 400s naming field and keyword.
STRIKER_SERVE_DEVICE=cuda runs the same on the GPU sampler (scripts/gpu_server_tests.sh)."""
import concurrent.futures
import json
import re

import jsonschema
import pytest
import requests

from server_fixture import module_server, tiny_model  # noqa: F401  (fixtures)
from structured_schemas import schemas

NO_THINK = {"chat_template_kwargs": {"enable_thinking": False}}
VALIDATOR = jsonschema.Draft202012Validator


@pytest.fixture(scope="module")
def server(striker_bin, tiny_model, tmp_path_factory):
    yield from module_server(
        striker_bin, tiny_model,
        ["--served-model-name", "tiny", "--max-model-len", "1024", "--max-num-seqs", "16", "--max-num-batched-tokens", "2048",
         "--kv-cache-memory", "64MiB", "--enable-auto-tool-choice", "--tool-call-parser", "glm47",
         "--reasoning-parser", "glm47", "--seed", "3"],
        tmp_path_factory)


def post(server, path, body, stream=False):
    r = requests.post(server.url + path, json=body, stream=stream, timeout=300)
    return r


def sse_events(resp):
    for line in resp.iter_lines(decode_unicode=True):
        if line.startswith("data: "):
            payload = line[len("data: "):]
            if payload == "[DONE]":
                return
            yield json.loads(payload)


def chat_text(server, body, stream):
    """(content, finish_reason) of a chat request, assembled from SSE deltas when streaming."""
    body = {"model": "tiny", "messages": [{"role": "user", "content": "Answer in JSON."}], **NO_THINK, **body}
    if not stream:
        r = post(server, "/v1/chat/completions", body)
        assert r.status_code == 200, r.text
        ch = r.json()["choices"][0]
        return ch["message"]["content"], ch["finish_reason"]
    r = post(server, "/v1/chat/completions", {**body, "stream": True}, stream=True)
    assert r.status_code == 200, r.text
    text, finish = "", None
    for ev in sse_events(r):
        assert "error" not in ev, ev
        for ch in ev["choices"]:
            text += ch["delta"].get("content") or ""
            finish = ch.get("finish_reason") or finish
    return text, finish


def completion_text(server, body, stream):
    body = {"model": "tiny", "prompt": "JSON:", **body}
    if not stream:
        r = post(server, "/v1/completions", body)
        assert r.status_code == 200, r.text
        ch = r.json()["choices"][0]
        return ch["text"], ch["finish_reason"]
    r = post(server, "/v1/completions", {**body, "stream": True}, stream=True)
    assert r.status_code == 200, r.text
    text, finish = "", None
    for ev in sse_events(r):
        assert "error" not in ev, ev
        for ch in ev["choices"]:
            text += ch.get("text") or ""
            finish = ch.get("finish_reason") or finish
    return text, finish


def check_schema_output(i, schema, text, finish):
    assert finish == "stop", f"schema {i}: finish_reason {finish} (output did not end: {text!r})\n{json.dumps(schema)}"
    value = json.loads(text)
    errors = list(VALIDATOR(schema, format_checker=jsonschema.FormatChecker()).iter_errors(value))
    assert not errors, f"schema {i}: {text!r} is invalid: {errors[0].message}\n{json.dumps(schema)}"


def run_schema(server, i, schema):
    stream = i % 2 == 1
    seed = 1000 + i
    common = {"temperature": 1.0, "max_tokens": 400, "seed": seed}
    if i % 4 == 0:
        text, finish = chat_text(server, {**common, "response_format": {
            "type": "json_schema", "json_schema": {"name": f"s{i}", "schema": schema}}}, stream)
    elif i % 4 == 1:
        text, finish = chat_text(server, {**common, "structured_outputs": {"json": schema, "disable_any_whitespace": True}},
                                 stream)
    else:
        # vLLM's disable_any_whitespace: compact JSON (and half the tokens on a model that pads)
        text, finish = completion_text(server, {**common, "structured_outputs": {
            "json": schema, "disable_any_whitespace": True}}, stream)
    check_schema_output(i, schema, text, finish)
    return text


def test_200_random_schemas_validate(server):
    all_schemas = schemas(200)
    failures = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=16) as pool:
        futures = {pool.submit(run_schema, server, i, s): i for i, s in enumerate(all_schemas)}
        for f in concurrent.futures.as_completed(futures):
            try:
                f.result()
            except Exception as e:  # collect them all: one bad schema should not hide others
                failures.append(str(e))
    assert not failures, f"{len(failures)} of 200 schemas failed:\n" + "\n\n".join(failures[:5])


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("pattern", [r"[a-z]{2,6}@[a-z]{2,5}\.(com|org)", r"(\d{3}-){2}\d{4}", r"(yes|no)!?",
                                     r"[A-Z][a-z]{0,5}( [A-Z][a-z]{0,5}){0,2}\."])
def test_regex_outputs_fullmatch(server, pattern, stream):
    for seed in range(3):
        text, finish = completion_text(server, {"structured_outputs": {"regex": pattern}, "temperature": 1.0,
                                                "max_tokens": 100, "seed": seed}, stream)
        assert finish == "stop" and re.fullmatch(pattern, text), (pattern, text, finish)
        text, finish = chat_text(server, {"guided_regex": pattern, "temperature": 1.0, "max_tokens": 100,
                                          "seed": seed}, stream)
        assert finish == "stop" and re.fullmatch(pattern, text), (pattern, text, finish)


@pytest.mark.parametrize("stream", [False, True])
def test_choice_returns_a_choice(server, stream):
    choices = ["positive", "negative", "neutral", "mixed feelings", "日本語"]
    for seed in range(6):
        body = {"temperature": 1.0, "max_tokens": 20, "seed": seed}
        text, _ = chat_text(server, {**body, "structured_outputs": {"choice": choices}}, stream)
        assert text in choices
        text, _ = completion_text(server, {**body, "guided_choice": choices}, stream)
        assert text in choices


def test_grammar_gbnf(server):
    gbnf = 'root ::= "The answer is " num "."\nnum ::= [1-9] [0-9]{0,2} | "zero"\n'
    for seed in range(4):
        text, finish = chat_text(server, {"structured_outputs": {"grammar": gbnf}, "temperature": 1.0,
                                          "max_tokens": 30, "seed": seed}, seed % 2 == 1)
        assert finish == "stop" and re.fullmatch(r"The answer is ([1-9][0-9]{0,2}|zero)\.", text), text


def structural_bias(server):
    """logit_bias toward the tokens that close JSON strings and containers: the random model then
    ends its free-form strings soon. The grammar still decides what is allowed (a bias cannot
    revive a masked token), so this shortens outputs without helping validity."""
    r = requests.post(server.url + "/tokenize", json={"model": "tiny", "prompt": '"}', "add_special_tokens": False}, timeout=30)
    ids = r.json()["tokens"]
    extra = []
    for piece in ['"', '}', '":', '",', '"}', ' "', ': ', '0', 'true']:
        extra += requests.post(server.url + "/tokenize", json={"model": "tiny", "prompt": piece, "add_special_tokens": False}, timeout=30).json()["tokens"]
    return {str(t): 12 for t in set(ids + extra)}


@pytest.mark.parametrize("stream", [False, True])
def test_json_object_returns_an_object(server, stream):
    bias = structural_bias(server)
    for seed in range(4):
        text, finish = chat_text(server, {"response_format": {"type": "json_object"}, "temperature": 1.0,
                                          "max_tokens": 600, "seed": seed, "logit_bias": bias}, stream)
        assert finish == "stop", (text, finish)
        assert isinstance(json.loads(text), dict), text


TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
                                         "days": {"type": "integer", "minimum": 1, "maximum": 14},
                                         "unit": {"type": "string", "enum": ["C", "F"]}},
        "required": ["city"]}}},
    {"type": "function", "function": {"name": "set_alarm", "description": "alarm", "parameters": {
        "type": "object", "properties": {"hour": {"type": "integer", "minimum": 0, "maximum": 23},
                                         "label": {"type": "string", "maxLength": 6},
                                         "repeat": {"type": "boolean"},
                                         "days": {"type": "array", "items": {"enum": ["mon", "tue"]}, "maxItems": 2}},
        "required": ["hour", "repeat"]}}},
    {"type": "function", "function": {"name": "ping", "description": "no arguments",
                                      "parameters": {"type": "object", "properties": {}}}},
]
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}


def tool_calls(server, body, stream):
    """Tool calls of one chat request: non-streaming from the message, streaming rebuilt from
    deltas with vLLM's rules (first delta of a call has id, type and name; later ones only
    argument text)."""
    body = {"model": "tiny", "messages": [{"role": "user", "content": "Call a tool."}], "tools": TOOLS,
            "temperature": 1.0, "max_tokens": 200, **NO_THINK, **body}
    if not stream:
        r = post(server, "/v1/chat/completions", body)
        assert r.status_code == 200, r.text
        ch = r.json()["choices"][0]
        calls = [{"name": c["function"]["name"], "arguments": c["function"]["arguments"], "id": c["id"]}
                 for c in ch["message"].get("tool_calls") or []]
        return calls, ch["finish_reason"]
    r = post(server, "/v1/chat/completions", {**body, "stream": True}, stream=True)
    assert r.status_code == 200, r.text
    calls, finish = {}, None
    for ev in sse_events(r):
        assert "error" not in ev, ev
        for ch in ev["choices"]:
            for tc in ch["delta"].get("tool_calls") or []:
                if tc["index"] not in calls:
                    assert tc["id"].startswith("chatcmpl-tool-") and tc["type"] == "function" and tc["function"]["name"]
                    calls[tc["index"]] = {"name": tc["function"]["name"], "arguments": "", "id": tc["id"]}
                else:
                    assert "id" not in tc or tc["id"] is None
                calls[tc["index"]]["arguments"] += tc["function"].get("arguments") or ""
            finish = ch.get("finish_reason") or finish
    return [calls[i] for i in sorted(calls)], finish


def check_calls(calls, allowed_names):
    assert calls, "no tool call"
    for c in calls:
        assert c["name"] in allowed_names, c
        args = json.loads(c["arguments"])
        errors = list(VALIDATOR(SCHEMAS[c["name"]]).iter_errors(args))
        assert not errors, (c, errors[0].message)


@pytest.mark.parametrize("stream", [False, True])
def test_tool_choice_required_random_weights(server, stream):
    names = set(SCHEMAS)
    for seed in range(8):
        calls, finish = tool_calls(server, {"tool_choice": "required", "seed": seed}, stream)
        check_calls(calls, names)
        assert finish == "tool_calls"
        one, _ = tool_calls(server, {"tool_choice": "required", "seed": seed, "parallel_tool_calls": False}, stream)
        assert len(one) == 1
        check_calls(one, names)


@pytest.mark.parametrize("stream", [False, True])
def test_tool_choice_named_random_weights(server, stream):
    for name in SCHEMAS:
        for seed in range(3):
            calls, finish = tool_calls(server, {"tool_choice": {"type": "function", "function": {"name": name}},
                                                "seed": seed}, stream)
            assert len(calls) == 1
            check_calls(calls, {name})
            assert finish == "stop"  # OpenAI reports "stop" for a named tool


@pytest.mark.parametrize("body,field,keyword", [
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "integer", "multipleOf": 3}}}},
     "response_format", "multipleOf"),
    ({"structured_outputs": {"json": {"type": "object", "patternProperties": {}}}}, "structured_outputs", "patternProperties"),
    ({"structured_outputs": {"json": {"type": "strng"}}}, "structured_outputs", "type"),
    ({"structured_outputs": {"json": {"$ref": "#/$defs/nope"}}}, "structured_outputs", "$ref"),
    ({"structured_outputs": {"regex": "(unclosed"}}, "structured_outputs", "regex"),
    ({"guided_regex": "a(?=b)"}, "guided_regex", "regex"),
    ({"structured_outputs": {"grammar": "root ::= root \"x\""}}, "structured_outputs", "grammar"),
    ({"guided_grammar": "start: \"lark\""}, "guided_grammar", "grammar"),
    ({"structured_outputs": {"json": {"type": "string", "maxLength": 9999999}}}, "structured_outputs", "maxLength"),
    # A schema whose grammar would be huge (30 strings of distinct large maxLength): refused, not compiled for long.
    ({"structured_outputs": {"json": {"type": "object", "properties": {
        f"p{i}": {"type": "string", "maxLength": 5000 + i} for i in range(30)}}}}, "structured_outputs", "size"),
])
def test_bad_specs_are_400_naming_field_and_keyword(server, body, field, keyword):
    r = post(server, "/v1/chat/completions", {"model": "tiny", "messages": [{"role": "user", "content": "x"}],
                                              "max_tokens": 5, **body})
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == field and f"keyword '{keyword}'" in err["message"], err
    assert requests.get(server.url + "/health", timeout=10).status_code == 200


@pytest.mark.parametrize("body,param", [
    ({"response_format": {"type": "json_schema"}}, "response_format"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": 123}}}, "response_format"),
    ({"structured_outputs": {"json": {"type": "object"}, "regex": "a"}}, "structured_outputs"),
    ({"structured_outputs": {"choice": []}}, "structured_outputs"),
    ({"guided_json": "{not json"}, "guided_json"),
    ({"response_format": {"type": "json_object"}, "guided_regex": "a"}, "guided_regex"),
    ({"tools": TOOLS, "tool_choice": "required", "guided_regex": "a"}, "tool_choice"),
])
def test_malformed_or_conflicting_fields_are_400(server, body, param):
    r = post(server, "/v1/chat/completions", {"model": "tiny", "messages": [{"role": "user", "content": "x"}],
                                              "max_tokens": 5, **body})
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == param, r.text


def test_reasoning_then_constraint(server):
    """With --reasoning-parser glm47 and thinking on, the grammar starts after </think>: until the
    model closes its reasoning the output is free, so a choice grammar must not be applied to it.
    The random model rarely writes </think>; what must hold is that whatever content appears after
    it is a choice, and the reasoning before it was not forced into one."""
    r = post(server, "/v1/chat/completions", {"model": "tiny", "messages": [{"role": "user", "content": "x"}],
                                              "structured_outputs": {"choice": ["A", "B"]}, "max_tokens": 8,
                                              "temperature": 1.0, "seed": 5})
    assert r.status_code == 200, r.text
    msg = r.json()["choices"][0]["message"]
    assert msg["reasoning"] not in ("A", "B")  # free text, not the grammar's
    assert msg["content"] in (None, "", "A", "B")
