"""Async scheduling end to end (`--async-scheduling`, as vLLM takes it) on the trained toolcall-model: the
answers are the model's exact greedy answers (fixtures/toolcall-model/README.md) and seeded sampled answers
equal a server without it, streaming and not, with tool calls, reasoning, logprobs, n > 1, penalties and
grammars (counts and masks completed once the step before is collected); clients that vanish while the next step is already launched
end as aborts; the stats line shows steps launched ahead."""
import concurrent.futures as cf
import json
import re
import time

import pytest
import requests

from server_fixture import client, module_server, toolcall_model, vanish_mid_stream  # noqa: F401
from toolcall_cases import (FLAGS, MODEL, TIME, WEATHER, check_exact_tool_calls, comparable, plain_client,  # noqa: F401
                           user)


@pytest.fixture(scope="module")
def server(striker_bin, toolcall_model, tmp_path_factory):  # noqa: F811
    yield from module_server(striker_bin, toolcall_model, [*FLAGS, "--async-scheduling", "--log-stats-interval", "0.5"],
                             tmp_path_factory)


def test_startup_says_so(server):
    assert "async scheduling: each step is planned and launched while the previous one runs" in server.log()


def test_exact_answers_streaming_and_not(client):  # noqa: F811
    r = client.chat.completions.create(model=MODEL, messages=user("Repeat after me: apple river stone"), temperature=0,
                                       max_tokens=120, logprobs=True, top_logprobs=2)
    m = r.choices[0].message
    assert m.model_extra["reasoning"] == "The user wants an echo."
    assert m.content == "apple river stone"
    assert len(r.choices[0].logprobs.content) == r.usage.completion_tokens
    check_exact_tool_calls(client)


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
        a = comparable(plain_client.chat.completions.create(model=MODEL, **kw))
        b = comparable(client.chat.completions.create(model=MODEL, **kw))
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


def test_clients_that_vanish_end_as_aborts_and_serving_goes_on(server, client):  # noqa: F811
    aborted = 'vllm:request_success_total{engine="0",model_name="toolcall",finished_reason="abort"}'
    before = server.metrics().get(aborted, 0)
    port = int(server.url.rsplit(":", 1)[1])
    with cf.ThreadPoolExecutor(8) as pool:
        assert all(pool.map(lambda i: vanish_mid_stream(port, {
            "model": MODEL, "prompt": f"<|user|>Repeat after me: vanish {i}<|assistant|>", "max_tokens": 400,
            "stream": True, "ignore_eos": True}), range(8)))
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
