"""What the suites that serve the trained toolcall-model with an engine option (speculation, async
scheduling) share: its tools, the server flags, its exact tool-call answers, and how two servers'
answers are compared."""
import json

import pytest

from server_fixture import StrikerServer
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
def plain_client(striker_bin, toolcall_model, tmp_path_factory):
    """The same server without the suite's engine option: its answers are the reference. Async
    scheduling is on by default with --device cuda, so the reference turns it off by name."""
    s = StrikerServer(striker_bin, toolcall_model, [*FLAGS, "--no-async-scheduling"],
                      log_dir=tmp_path_factory.mktemp("plain"))
    yield s.client()
    s.stop()


def user(text):
    return [{"role": "user", "content": text}]


def comparable(response) -> dict:
    """A chat completion without what differs between two servers for the same answer: ids, times,
    the fingerprint, cached prompt tokens (each server's own cache) and tool call ids."""
    r = response.model_dump()
    for key in ("id", "created", "system_fingerprint"):
        r.pop(key, None)
    r["usage"].pop("prompt_tokens_details", None)
    for ch in r["choices"]:
        for call in (ch["message"].get("tool_calls") or []):
            call.pop("id", None)
    return r


def streamed_tool_calls(stream):
    """(reasoning, [(name, arguments text)], finish_reason) gathered from a streamed chat completion."""
    reasoning, calls, finish = "", {}, None
    for chunk in stream:
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        reasoning += (delta.model_extra or {}).get("reasoning") or ""
        assert not delta.content
        for tc in delta.tool_calls or []:
            calls.setdefault(tc.index, {"name": "", "arguments": ""})
            calls[tc.index]["name"] += tc.function.name or ""
            calls[tc.index]["arguments"] += tc.function.arguments or ""
        finish = chunk.choices[0].finish_reason or finish
    return reasoning, [(c["name"], c["arguments"]) for c in calls.values()], finish


def check_exact_tool_calls(client):
    """The model's exact greedy tool-call answers (fixtures/toolcall-model/README.md), not streamed
    and streamed."""
    r = client.chat.completions.create(model=MODEL, messages=user("Compare the weather in Lima and Seoul."),
                                       tools=[WEATHER, TIME], temperature=0, max_tokens=160)
    m = r.choices[0].message
    assert m.model_extra["reasoning"] == "I need the weather for Lima and Seoul. Two calls."
    assert [(c.function.name, json.loads(c.function.arguments)) for c in m.tool_calls] == [
        ("get_weather", {"city": "Lima"}), ("get_weather", {"city": "Seoul"})]
    assert r.choices[0].finish_reason == "tool_calls"
    reasoning, calls, finish = streamed_tool_calls(client.chat.completions.create(
        model=MODEL, messages=user("What time is it in Hanoi?"), tools=[WEATHER, TIME], temperature=0, max_tokens=160,
        stream=True))
    assert reasoning == "The user wants the local time in Hanoi."
    assert [(name, json.loads(args)) for name, args in calls] == [("get_time", {"city": "Hanoi"})]
    assert finish == "tool_calls"
