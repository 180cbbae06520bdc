"""The request's key order reaches the output as it does with vLLM (whose Python dicts keep it):
a JSON schema's properties are generated in the order written, not sorted (xgrammar's order,
required ones always, optional ones where they stand); forced tool calls write the tool's
arguments in its schema's order; the prompt renders tools and tool-call arguments in the order
the client sent them. On the random-weight tiny model, so the order is the grammar's doing."""
import json
import time

import pytest
import requests

from server_fixture import module_server, tiny_model  # noqa: F401  (fixtures)

NO_THINK = {"chat_template_kwargs": {"enable_thinking": False}}
# Written order, not sorted (sorted: age, city, name / author, title, year).
PERSON = {"type": "object",
          "properties": {"name": {"type": "string", "maxLength": 4}, "city": {"type": "string", "maxLength": 4},
                         "age": {"type": "integer", "minimum": 0, "maximum": 99}},
          "required": ["name", "age"]}
BOOK = {"type": "function", "function": {"name": "book", "description": "find a book", "parameters": {
    "type": "object", "properties": {"title": {"type": "string", "maxLength": 6}, "year": {"type": "integer", "maximum": 2100},
                                     "author": {"type": "string", "maxLength": 6}},
    "required": ["title", "year", "author"]}}}


@pytest.fixture(scope="module")
def server(striker_bin, tiny_model, tmp_path_factory):
    yield from module_server(
        striker_bin, tiny_model,
        ["--served-model-name", "tiny", "--max-model-len", "1024", "--max-num-seqs", "8", "--kv-cache-memory", "64MiB",
         "--enable-auto-tool-choice", "--tool-call-parser", "glm47", "--reasoning-parser", "glm47", "--seed", "3"],
        tmp_path_factory)


def post(server, path, body):
    r = requests.post(server.url + path, json=body, timeout=300)
    assert r.status_code == 200, r.text
    return r.json()


def keys_in_order(text):
    """The top-level keys of a JSON object text, in the order they were written."""
    return [k for k, _ in json.loads(text, object_pairs_hook=list)]


def in_schema_order(keys, schema):
    written = list(schema["properties"])
    return keys == [k for k in written if k in keys] and set(schema["required"]) <= set(keys)


@pytest.mark.parametrize("field", ["response_format", "structured_outputs", "guided_json_string", "completions"])
def test_schema_properties_in_written_order(server, field):
    for seed in range(4):
        common = {"model": "tiny", "max_tokens": 120, "temperature": 1.0, "seed": seed}
        if field == "completions":
            out = post(server, "/v1/completions", {**common, "prompt": "JSON:", "structured_outputs": {"json": PERSON}})
            text = out["choices"][0]["text"]
        else:
            constraint = {
                "response_format": {"response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": PERSON}}},
                "structured_outputs": {"structured_outputs": {"json": PERSON, "disable_any_whitespace": True}},
                "guided_json_string": {"guided_json": json.dumps(PERSON)},
            }[field]
            out = post(server, "/v1/chat/completions", {**common, **NO_THINK, **constraint,
                                                         "messages": [{"role": "user", "content": "A person."}]})
            text = out["choices"][0]["message"]["content"]
        assert out["choices"][0]["finish_reason"] == "stop", text
        assert in_schema_order(keys_in_order(text), PERSON), text


@pytest.mark.parametrize("tool_choice", ["required", {"type": "function", "function": {"name": "book"}}])
def test_forced_tool_call_arguments_in_schema_order(server, tool_choice):
    for seed in range(3):
        out = post(server, "/v1/chat/completions", {
            "model": "tiny", "messages": [{"role": "user", "content": "Find a book."}], "tools": [BOOK],
            "tool_choice": tool_choice, "parallel_tool_calls": False, "max_tokens": 120, "temperature": 1.0,
            "seed": seed, **NO_THINK})
        calls = out["choices"][0]["message"]["tool_calls"]
        assert len(calls) == 1, out
        assert keys_in_order(calls[0]["function"]["arguments"]) == ["title", "year", "author"], calls


def test_prompt_renders_tools_and_arguments_in_request_order(server):
    args = {"title": "Dune", "year": 1965, "author": "Herbert"}
    tokens = post(server, "/tokenize", {"model": "tiny", "tools": [BOOK], "messages": [
        {"role": "user", "content": "Find a book."},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "book", "arguments": args}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "found"}]})["tokens"]
    prompt = post(server, "/detokenize", {"model": "tiny", "tokens": tokens})["prompt"]
    # The tool as HF's tojson writes it (no key sorting), and the arguments object in its order.
    assert json.dumps(BOOK["function"]["parameters"], ensure_ascii=False) in prompt, prompt
    assert prompt.index("<arg_key>title</arg_key>") < prompt.index("<arg_key>year</arg_key>") \
        < prompt.index("<arg_key>author</arg_key>"), prompt


@pytest.mark.parametrize("path,extra", [
    ("/v1/completions", {"prompt": "x", "logit_bias": {str(i): 0 for i in range(150000)}}),  # may name the vocabulary
    ("/v1/chat/completions", {"chat_template_kwargs": {f"k{i}": 0 for i in range(150000)}}),
    ("/v1/chat/completions", {"tools": [{"type": "function", "function": {"name": "f", **{f"k{i}": 0 for i in range(100000)}}}]}),
])
def test_objects_with_many_keys_take_linear_time(server, path, extra):
    """Ordered objects are parsed and merged with an index: with ordered_json's own parser and
    operator[], 150,000 keys hold the request thread for minutes. Answered (200 or a 400 for
    the prompt's length) in seconds."""
    body = {"model": "tiny", "max_tokens": 1, **extra}
    if path.endswith("chat/completions"):
        body["messages"] = [{"role": "user", "content": "x"}]
    start = time.monotonic()
    r = requests.post(server.url + path, json=body, timeout=300)
    assert time.monotonic() - start < 20, r.text[:300]
    assert r.status_code in (200, 400), r.text[:300]
    assert requests.get(server.url + "/health", timeout=10).status_code == 200
