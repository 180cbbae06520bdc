"""Forced tool calls and constrained content on the trained toolcall-model
(fixtures/toolcall-model/README.md) with --reasoning-parser glm47: the model reasons freely, the
grammar takes over after </think>, and the calls it then writes validate against the tools'
schemas, streamed with vLLM's deltas. STRIKER_SERVE_DEVICE=cuda runs it on the GPU sampler."""
import json

import jsonschema
import pytest

from server_fixture import client, module_server, toolcall_model  # noqa: F401  (fixtures)
from test_server_toolcall import MODEL, TOOLS, collect_stream

SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}


@pytest.fixture(scope="module")
def server(striker_bin, toolcall_model, tmp_path_factory):
    yield from module_server(
        striker_bin, toolcall_model,
        ["--served-model-name", MODEL, "--enable-auto-tool-choice", "--tool-call-parser", "glm47",
         "--reasoning-parser", "glm47", "--max-model-len", "1024", "--max-num-seqs", "8", "--kv-cache-memory", "32MiB"],
        tmp_path_factory)


def weather(city):
    return [{"role": "user", "content": f"What is the weather in {city}?"}]


def check(calls, names):
    assert calls
    for c in calls:
        assert c["name"] in names
        jsonschema.validate(json.loads(c["arguments"]), SCHEMAS[c["name"]])


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_required_keeps_the_models_own_call(client, temperature):
    r = client.chat.completions.create(model=MODEL, messages=weather("Oslo"), tools=TOOLS, tool_choice="required",
                                       temperature=temperature, max_tokens=120, seed=1)
    msg = r.choices[0].message
    calls = [{"name": c.function.name, "arguments": c.function.arguments} for c in msg.tool_calls or []]
    check(calls, set(SCHEMAS))
    assert r.choices[0].finish_reason == "tool_calls"
    if temperature == 0.0:  # the trained answer is inside the constraint, so greedy keeps it
        assert (msg.model_extra or {}).get("reasoning") == "The user asks about the weather in Oslo. I will call get_weather."
        assert calls == [{"name": "get_weather", "arguments": '{"city": "Oslo"}'}]


def test_named_forces_the_other_tool_streaming(client):
    reasoning, content, calls, finish = collect_stream(
        client, weather("Lima"), tools=TOOLS, tool_choice={"type": "function", "function": {"name": "get_time"}})
    assert reasoning.startswith("The user asks about the weather in Lima.")  # free before </think>
    assert len(calls) == 1 and calls[0]["name"] == "get_time"
    check(calls, {"get_time"})
    assert finish == "stop"


@pytest.mark.parametrize("stream", [False, True])
def test_choice_after_reasoning(client, stream):
    msgs = [{"role": "user", "content": "Repeat after me: apple river"}]
    kw = dict(model=MODEL, messages=msgs, temperature=0, max_tokens=60,
              extra_body={"structured_outputs": {"choice": ["apple river", "stone cloud"]}})
    if not stream:
        msg = client.chat.completions.create(**kw).choices[0].message
        reasoning, content = (msg.model_extra or {}).get("reasoning"), msg.content
    else:
        reasoning, content = "", ""
        for chunk in client.chat.completions.create(stream=True, **kw):
            if chunk.choices:
                reasoning += (chunk.choices[0].delta.model_extra or {}).get("reasoning") or ""
                content += chunk.choices[0].delta.content or ""
    assert reasoning == "The user wants an echo."
    assert content == "apple river"
