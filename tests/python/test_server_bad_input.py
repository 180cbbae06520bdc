"""reference/server.md §3.5: every bad request gets a 4xx OpenAI-shaped JSON error, nothing
reaches a crash or hang, and the server stays healthy and idle afterwards."""
import json
import socket
import time

import pytest
import requests

from server_fixture import StrikerServer, tiny_model  # noqa: F401  (fixtures)

MODEL = "tiny"
U = [{"role": "user", "content": "hi"}]

CHAT_CASES = [
    # (3)/(4)/(27) body and messages shape
    ("messages missing", {}),
    ("messages null", {"messages": None}),
    ("messages string", {"messages": "hello"}),
    ("messages [123]", {"messages": [123]}),
    ("messages [{}]", {"messages": [{}]}),
    ("role 123", {"messages": [{"role": 123, "content": "x"}]}),
    ("role unknown", {"messages": [{"role": "wizard", "content": "x"}]}),
    ("content 123", {"messages": [{"role": "user", "content": 123}]}),
    ("trailing {}", {"messages": U + [{}]}),
    ("empty messages", {"messages": []}),
    ("part unknown type", {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}),
    ("part no text", {"messages": [{"role": "user", "content": [{"type": "text"}]}]}),
    ("bad tool_call args", {"messages": U + [{"role": "assistant", "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{not json"}}]}]}),
    # (13)-(18) numeric knobs
    ("n 0", {"messages": U, "n": 0}),
    ("n -1", {"messages": U, "n": -1}),
    ("n 1e9", {"messages": U, "n": 10**9}),
    ("max_tokens 0", {"messages": U, "max_tokens": 0}),
    ("max_tokens -1", {"messages": U, "max_tokens": -1}),
    ("max_tokens 2^63", {"messages": U, "max_tokens": 2**63}),
    ("max_completion_tokens > len", {"messages": U, "max_completion_tokens": 100000}),
    ("top_logprobs 21", {"messages": U, "logprobs": True, "top_logprobs": 21}),
    ("top_logprobs -1", {"messages": U, "logprobs": True, "top_logprobs": -1}),
    ("top_logprobs 1e6", {"messages": U, "logprobs": True, "top_logprobs": 10**6}),
    ("top_logprobs without logprobs", {"messages": U, "top_logprobs": 2}),
    ("prompt_logprobs -1", {"messages": U, "prompt_logprobs": -1}),
    ("temperature -1", {"messages": U, "temperature": -1}),
    ("temperature str", {"messages": U, "temperature": "hot"}),
    ("top_p 0", {"messages": U, "top_p": 0}),
    ("top_p 2", {"messages": U, "top_p": 2}),
    ("top_k -5", {"messages": U, "top_k": -5}),
    ("min_p 2", {"messages": U, "min_p": 2}),
    ("presence_penalty 5", {"messages": U, "presence_penalty": 5}),
    ("frequency_penalty -5", {"messages": U, "frequency_penalty": -5}),
    ("repetition_penalty 0", {"messages": U, "repetition_penalty": 0}),
    ("seed float", {"messages": U, "seed": 1.5}),
    ("seed > 2^64", {"messages": U, "seed": 2**70}),
    # (21)/(22) vocab-bound fields
    ("logit_bias out of vocab", {"messages": U, "logit_bias": {"999999": 5}}),
    ("logit_bias non-numeric key", {"messages": U, "logit_bias": {"abc": 5}}),
    ("logit_bias huge", {"messages": U, "logit_bias": {str(i): 1 for i in range(5000)}}),
    ("stop empty", {"messages": U, "stop": ""}),
    ("stop 10^4", {"messages": U, "stop": ["x"] * 10000}),
    ("stop 1 MB", {"messages": U, "stop": "x" * (1 << 20)}),
    ("stop_token_ids out of range", {"messages": U, "stop_token_ids": [10**7]}),
    # (30)/(33)/(34)/(35) tools and stream options
    ("tools empty", {"messages": U, "tools": []}),
    ("tools bad type", {"messages": U, "tools": [{"type": "hiccup"}]}),
    ("tools params not object", {"messages": U, "tools": [{"type": "function", "function": {"name": "f", "parameters": 5}}]}),
    ("tool_choice missing fn", {"messages": U, "tools": [{"type": "function", "function": {"name": "f"}}],
                                "tool_choice": {"type": "function", "function": {"name": "g"}}}),
    ("tool_choice bad string", {"messages": U, "tools": [{"type": "function", "function": {"name": "f"}}],
                                "tool_choice": "sometimes"}),
    ("tool_choice without tools", {"messages": U, "tool_choice": "required"}),
    ("auto tools without --enable-auto-tool-choice", {"messages": U, "tools": [{"type": "function", "function": {"name": "f"}}]}),
    ("stream_options without stream", {"messages": U, "stream_options": {"include_usage": True}}),
    ("best_of 3", {"messages": U, "best_of": 3}),
    ("chat echo", {"messages": U, "echo": True}),
    ("reasoning_effort bogus", {"messages": U, "reasoning_effort": "extreme"}),
    ("chat_template_kwargs not object", {"messages": U, "chat_template_kwargs": [1]}),
]

COMPLETION_CASES = [
    ("prompt -1", {"prompt": [-1]}),
    ("prompt vocab_size", {"prompt": [151552]}),
    ("prompt 2^31", {"prompt": [2**31]}),
    ("prompt nested bad", {"prompt": [[1, 2], [-5]]}),
    ("prompt empty", {"prompt": ""}),
    ("prompt empty list", {"prompt": []}),
    ("prompt too long", {"prompt": [1] * 600}),
    ("logprobs 21", {"prompt": "x", "logprobs": 21}),
    ("max_tokens 0 without echo", {"prompt": "x", "max_tokens": 0}),
    ("suffix", {"prompt": "x", "suffix": "y"}),
    ("json_schema", {"prompt": "x", "response_format": {"type": "json_schema", "json_schema": {"schema": 123}}}),
    ("response_format hiccup", {"prompt": "x", "response_format": {"type": "hiccup"}}),
]


@pytest.fixture(scope="module")
def server(striker_bin, tiny_model, tmp_path_factory):
    s = StrikerServer(striker_bin, tiny_model, ["--served-model-name", MODEL, "--max-model-len", "512",
                                                "--max-num-seqs", "8", "--kv-cache-memory", "32MiB"],
                      log_dir=tmp_path_factory.mktemp("log"))
    yield s
    s.stop()


def check_error(r, name):
    assert 400 <= r.status_code < 500 or r.status_code == 501, f"{name}: HTTP {r.status_code} {r.text[:300]}"
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"}, name
    assert err["code"] == r.status_code and err["message"], name


@pytest.mark.parametrize("name,body", CHAT_CASES, ids=[c[0] for c in CHAT_CASES])
def test_chat_bad_input(server, name, body):
    check_error(requests.post(server.url + "/v1/chat/completions", json={"model": MODEL, **body}, timeout=60), name)


@pytest.mark.parametrize("name,body", COMPLETION_CASES, ids=[c[0] for c in COMPLETION_CASES])
def test_completion_bad_input(server, name, body):
    check_error(requests.post(server.url + "/v1/completions", json={"model": MODEL, **body}, timeout=60), name)


def test_http_layer_bad_input(server):
    url = server.url
    for raw in (b"[]", b'"x"', b"123", b"null", b'{"messages": [', b'{"prompt": "\xff\xfe"}',
                b"[" * 100000 + b"]" * 100000):
        check_error(requests.post(url + "/v1/completions", data=raw, headers={"Content-Type": "application/json"}),
                    raw[:20])
    check_error(requests.post(url + "/v1/completions", data=b'{"prompt": "x"}', headers={"Content-Type": "text/plain"}),
                "content-type")
    check_error(requests.post(url + "/v1/completions", data=b"{" + b" " * (40 << 20) + b"}",
                              headers={"Content-Type": "application/json"}), "body too large")
    check_error(requests.get(url + "/v1/nothing"), "unknown route")
    check_error(requests.post(url + "/v1/chat/completions", json={"model": "other", "messages": U}), "unknown model")
    r = requests.get(url + "/v1/models", headers={f"X-H{i}": "v" * 100 for i in range(2000)})
    assert 400 <= r.status_code < 500
    # A slowloris client that never finishes its body does not block others.
    s = socket.create_connection(("127.0.0.1", server.port))
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
    assert requests.get(url + "/health", timeout=5).status_code == 200
    s.close()


def test_server_healthy_and_idle_after_bad_inputs(server):
    for name, body in CHAT_CASES[:5] + CHAT_CASES[-5:]:
        requests.post(server.url + "/v1/chat/completions", json={"model": MODEL, **body})
    for _ in range(3):  # consecutive over-length requests (llama.cpp b8330)
        requests.post(server.url + "/v1/completions", json={"model": MODEL, "prompt": [1] * 600})
    assert requests.get(server.url + "/health").status_code == 200
    m = server.metrics()
    assert m["vllm:num_requests_running"] == 0 and m["vllm:num_requests_waiting"] == 0
    r = server.client().chat.completions.create(model=MODEL, messages=U, max_tokens=2, extra_body={"ignore_eos": True})
    assert r.usage.completion_tokens == 2


def test_random_field_mutations_never_5xx(server):
    """Light schema fuzzing (vLLM runs schemathesis): every known field set to odd values."""
    import random
    rng = random.Random(1234)
    fields = ["model", "messages", "max_tokens", "max_completion_tokens", "n", "temperature", "top_p", "top_k", "min_p",
              "seed", "stop", "stop_token_ids", "logprobs", "top_logprobs", "prompt_logprobs", "logit_bias", "stream",
              "stream_options", "tools", "tool_choice", "chat_template_kwargs", "reasoning_effort", "include_reasoning",
              "parallel_tool_calls", "ignore_eos", "min_tokens", "presence_penalty", "frequency_penalty",
              "repetition_penalty", "skip_special_tokens", "add_generation_prompt", "response_format", "user"]
    values = [None, -1, 0, 1, 2, 1e300, -1e300, "x", "", [], {}, True, False, 2**64, -2**63, [1, 2], {"a": 1},
              [{"role": "user", "content": "hi"}], {"include_usage": True}, ["a", ""], {"1": 1e9}]
    for i in range(300):
        body = {"model": MODEL, "messages": U, "max_tokens": 2}
        for name in rng.sample(fields, rng.randint(1, 3)):
            body[name] = rng.choice(values)
        r = requests.post(server.url + "/v1/chat/completions", json=body, timeout=60)
        assert r.status_code < 500 or r.status_code == 501, f"{i}: {json.dumps(body)[:300]} -> {r.status_code} {r.text[:300]}"
        if r.status_code != 200:
            assert set(r.json()["error"]) == {"message", "type", "param", "code"}
    assert requests.get(server.url + "/health").status_code == 200
    m = server.metrics()
    assert m["vllm:num_requests_running"] == 0 and m["vllm:num_requests_waiting"] == 0


@pytest.mark.parametrize("route, base, fields, error_keys", [
    ("/v1/responses", {"input": "hi", "max_output_tokens": 2},
     ["model", "input", "instructions", "max_output_tokens", "temperature", "top_p", "tools", "tool_choice",
      "parallel_tool_calls", "reasoning", "text", "store", "stream", "previous_response_id", "include", "top_logprobs",
      "truncation", "metadata", "user", "background"],
     {"message", "type", "param", "code"}),
    ("/v1/messages", {"max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]},
     ["model", "messages", "max_tokens", "system", "temperature", "top_p", "top_k", "tools", "tool_choice", "thinking",
      "stop_sequences", "stream", "metadata"],
     {"type", "message"}),
])
def test_random_field_mutations_of_other_apis_never_5xx(server, route, base, fields, error_keys):
    """The Responses and Anthropic Messages routes under the same light fuzzing, items and blocks included."""
    import random
    rng = random.Random(4321)
    values = [None, -1, 0, 1, 2, 1e300, "x", "", [], {}, True, False, 2**64, [1, 2], {"a": 1}, {"type": "x"},
              [{"role": "user", "content": "hi"}], [{"type": "function_call"}], [{"type": "tool_result"}],
              [{"role": "assistant", "content": [{"type": "tool_use", "id": 1}]}], {"format": {"type": "json_schema"}},
              {"type": "enabled", "budget_tokens": "x"}, [{"type": "function", "name": 3}], ["a", ""]]
    statuses = set()
    for i in range(200):
        body = {"model": MODEL, **base}
        for name in rng.sample(fields, rng.randint(1, 3)):
            body[name] = rng.choice(values)
        r = requests.post(server.url + route, json=body, timeout=60)
        statuses.add(r.status_code)
        assert r.status_code < 500 or r.status_code == 501, f"{i}: {json.dumps(body)[:300]} -> {r.status_code} {r.text[:300]}"
        if r.status_code != 200 and not body.get("stream") is True:
            j = r.json()
            assert error_keys <= set(j["error"]), j
            if route == "/v1/messages":
                assert j["type"] == "error", j  # Anthropic's error shape, not the OpenAI one
    assert {200, 400} <= statuses, statuses  # the route served some mutations and refused others
    assert requests.get(server.url + "/health").status_code == 200
    m = server.metrics()
    assert m["vllm:num_requests_running"] == 0 and m["vllm:num_requests_waiting"] == 0
