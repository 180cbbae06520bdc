"""Async scheduling end to end (`--async-scheduling`, as vLLM takes it) on the trained toolcall-model: the
answers are the model's exact greedy answers (fixtures/toolcall-model/README.md) and seeded sampled answers
equal a server without it, streaming and not, with tool calls, reasoning, logprobs, n > 1, penalties and
grammars (counts and masks completed once the step before is collected); clients that vanish while the next step is already launched
end as aborts; the stats line shows steps launched ahead."""
import concurrent.futures as cf
import json
import re
import socket
import time

import pytest
import requests

from server_fixture import StrikerServer, client, module_server, toolcall_model  # noqa: F401  (fixtures)

MODEL = "toolcall"
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                   "required": ["city"]}}}
TIME = {"type": "function", "function": {
    "name": "get_time", "description": "Get the local time in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
FLAGS = ["--served-model-name", MODEL, "--enable-auto-tool-choice", "--tool-call-parser", "glm47", "--reasoning-parser",
         "glm47", "--max-model-len", "1024", "--max-num-seqs", "8", "--kv-cache-memory", "32MiB"]


@pytest.fixture(scope="module")
def server(striker_bin, toolcall_model, tmp_path_factory):  # noqa: F811
    yield from module_server(striker_bin, toolcall_model, [*FLAGS, "--async-scheduling", "--log-stats-interval", "0.5"],
                             tmp_path_factory)


@pytest.fixture(scope="module")
def plain_client(striker_bin, toolcall_model, tmp_path_factory):  # noqa: F811
    """The same server without async scheduling."""
    s = StrikerServer(striker_bin, toolcall_model, FLAGS, log_dir=tmp_path_factory.mktemp("plain"))
    yield s.client()
    s.stop()


def user(text):
    return [{"role": "user", "content": text}]


def test_startup_says_so(server):
    assert "async scheduling: each step is planned and launched while the previous one runs" in server.log()


def test_exact_answers_streaming_and_not(client):  # noqa: F811
    r = client.chat.completions.create(model=MODEL, messages=user("Repeat after me: apple river stone"), temperature=0,
                                       max_tokens=120, logprobs=True, top_logprobs=2)
    m = r.choices[0].message
    assert m.model_extra["reasoning"] == "The user wants an echo."
    assert m.content == "apple river stone"
    assert len(r.choices[0].logprobs.content) == r.usage.completion_tokens
    r = client.chat.completions.create(model=MODEL, messages=user("Compare the weather in Lima and Seoul."),
                                       tools=[WEATHER, TIME], temperature=0, max_tokens=160)
    m = r.choices[0].message
    assert m.model_extra["reasoning"] == "I need the weather for Lima and Seoul. Two calls."
    assert [(c.function.name, json.loads(c.function.arguments)) for c in m.tool_calls] == [
        ("get_weather", {"city": "Lima"}), ("get_weather", {"city": "Seoul"})]
    assert r.choices[0].finish_reason == "tool_calls"
    reasoning, calls, finish = "", {}, None
    for chunk in client.chat.completions.create(model=MODEL, messages=user("What time is it in Hanoi?"),
                                                tools=[WEATHER, TIME], temperature=0, max_tokens=160, stream=True):
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        reasoning += (delta.model_extra or {}).get("reasoning") or ""
        for tc in delta.tool_calls or []:
            calls.setdefault(tc.index, {"name": "", "arguments": ""})
            calls[tc.index]["name"] += tc.function.name or ""
            calls[tc.index]["arguments"] += tc.function.arguments or ""
        finish = chunk.choices[0].finish_reason or finish
    assert reasoning == "The user wants the local time in Hanoi."
    assert [(c["name"], json.loads(c["arguments"])) for c in calls.values()] == [("get_time", {"city": "Hanoi"})]
    assert finish == "tool_calls"


def test_sampled_answers_equal_the_plain_servers(client, plain_client):  # noqa: F811
    requests_ = [
        dict(messages=user("Repeat after me: apple river stone"), temperature=0.9, seed=5, max_tokens=60),
        dict(messages=user("Compare the weather in Cairo and Rome."), tools=[WEATHER, TIME], temperature=1.0, seed=9,
             max_tokens=120, n=3, logprobs=True, top_logprobs=3),
        dict(messages=user("Repeat after me: north happy"), temperature=0.8, seed=1, max_tokens=60, n=2,
             frequency_penalty=0.5),  # penalties: counts completed late
        dict(messages=user("What time is it in Perth?"), tools=[WEATHER, TIME], tool_choice="required",
             temperature=1.0, seed=3, max_tokens=120),  # a grammar: late masks
        dict(messages=user("Repeat after me: red blue green"), temperature=0, max_tokens=60, stop=["blue"]),
        dict(messages=user("Repeat after me: one two three"), temperature=0.7, seed=2, max_tokens=9),
    ]
    for kw in requests_:
        a = plain_client.chat.completions.create(model=MODEL, **kw).model_dump()
        b = client.chat.completions.create(model=MODEL, **kw).model_dump()
        for r in (a, b):
            for key in ("id", "created", "system_fingerprint"):
                r.pop(key, None)
            r["usage"].pop("prompt_tokens_details", None)  # cached tokens: each server's own cache
            for ch in r["choices"]:
                for call in (ch["message"].get("tool_calls") or []):
                    call.pop("id", None)
        assert a == b, kw


def test_structured_outputs_equal_the_plain_servers(client, plain_client):  # noqa: F811
    # JSON schema and choice grammars on sampled requests, several at once: each step's masks are made
    # after the step before it is read (late masks); the answers are the plain server's.
    schema = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
                                               "days": {"type": "integer"}}, "required": ["city", "days"]}
    kws = [dict(messages=user("What is the weather in Oslo?"), temperature=1.0, seed=s, max_tokens=80, n=2,
                response_format={"type": "json_schema", "json_schema": {"name": "w", "schema": schema}})
           for s in range(3)]
    kws.append(dict(messages=user("Pick one."), temperature=1.0, seed=7, max_tokens=20,
                    extra_body={"structured_outputs": {"choice": ["north", "south", "east west"]}}))
    with cf.ThreadPoolExecutor(4) as pool:
        plain = list(pool.map(lambda kw: plain_client.chat.completions.create(model=MODEL, **kw), kws))
        ahead = list(pool.map(lambda kw: client.chat.completions.create(model=MODEL, **kw), kws))
    for kw, a, b in zip(kws, plain, ahead):
        assert [c.message.content for c in a.choices] == [c.message.content for c in b.choices], kw
        for c in b.choices:
            if "response_format" in kw and c.finish_reason == "stop" and c.message.content:
                assert set(json.loads(c.message.content)) == {"city", "days"}
    answered = [c.message.content for r in ahead for c in r.choices if c.message.content]
    assert answered, "no structured answer came back"
    assert ahead[-1].choices[0].message.content in (None, "north", "south", "east west")


def vanish_mid_stream(port, i):
    """A long streaming request whose client reads the first bytes of the response, then resets."""
    body = json.dumps({"model": MODEL, "prompt": f"<|user|>Repeat after me: vanish {i}<|assistant|>", "max_tokens": 400,
                       "stream": True, "ignore_eos": True}).encode()
    s = socket.create_connection(("127.0.0.1", port), timeout=120)
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    got = s.recv(256)
    s.close()
    return got.startswith(b"HTTP/1.1 200")


def test_clients_that_vanish_end_as_aborts_and_serving_goes_on(server, client):  # noqa: F811
    aborted = 'vllm:request_success_total{engine="0",model_name="toolcall",finished_reason="abort"}'
    before = server.metrics().get(aborted, 0)
    port = int(server.url.rsplit(":", 1)[1])
    with cf.ThreadPoolExecutor(8) as pool:
        assert all(pool.map(lambda i: vanish_mid_stream(port, i), range(8)))
    deadline = time.time() + 60
    while server.metrics().get(aborted, 0) - before < 8:
        assert time.time() < deadline, "the vanished clients' requests did not end as aborts"
        time.sleep(0.2)
    m = server.metrics()
    assert m["vllm:num_requests_running"] == 0 and m["vllm:kv_cache_usage_perc"] == 0
    r = client.chat.completions.create(model=MODEL, messages=user("Repeat after me: apple river stone"), temperature=0,
                                       max_tokens=120)
    assert r.choices[0].message.content == "apple river stone"


def test_stats_line_shows_steps_launched_ahead(server, client):  # noqa: F811
    with cf.ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda i: client.completions.create(
            model=MODEL, prompt=f"<|user|>Repeat after me: tick {i}<|assistant|>", max_tokens=200, temperature=0.5,
            seed=i, extra_body={"ignore_eos": True}), range(4)))
    pattern = r"Async: (\d+\.\d)% of (\d+) steps launched ahead"
    deadline = time.time() + 10
    while not re.search(pattern, server.log()):
        assert time.time() < deadline, server.log()[-3000:]
        time.sleep(0.1)
    best = max(float(m.group(1)) for m in re.finditer(pattern, server.log()))
    assert best > 50.0, server.log()[-3000:]
    assert requests.get(server.url + "/health", timeout=10).status_code == 200
