"""End to end on the trained toolcall-model (fixtures/toolcall-model/README.md): at temperature 0
it answers its prompts exactly, so reasoning, tool calls and content are checked verbatim,
streaming and not, through the official openai client."""
import json

import pytest

from server_fixture import StrikerServer, client, module_server, toolcall_model  # noqa: F401  (fixtures)

MODEL = "toolcall"
TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Get the current weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                       "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "get_time", "description": "Get the local time in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
]


@pytest.fixture(scope="module")
def server(striker_bin, toolcall_model, tmp_path_factory):
    yield from module_server(
        striker_bin, toolcall_model,
        ["--served-model-name", MODEL, "--enable-auto-tool-choice", "--tool-call-parser", "glm47",
         "--reasoning-parser", "glm47", "--max-model-len", "1024", "--max-num-seqs", "8", "--kv-cache-memory", "32MiB"],
        tmp_path_factory)


def chat(client, messages, **kw):
    return client.chat.completions.create(model=MODEL, messages=messages, temperature=0, max_tokens=120, **kw)


def collect_stream(client, messages, **kw):
    """Rebuilds the message from stream deltas, checking vLLM's tool-call delta rules."""
    reasoning, content, finish = "", "", None
    calls = {}
    for chunk in client.chat.completions.create(model=MODEL, messages=messages, temperature=0, max_tokens=120,
                                                stream=True, **kw):
        if not chunk.choices:
            continue
        ch = chunk.choices[0]
        delta = ch.delta
        reasoning += (delta.model_extra or {}).get("reasoning") or ""
        content += delta.content or ""
        for tc in delta.tool_calls or []:
            assert tc.index is not None
            if tc.index not in calls:
                assert tc.id and tc.id.startswith("chatcmpl-tool-") and tc.function.name and tc.type == "function"
                calls[tc.index] = {"id": tc.id, "name": tc.function.name, "arguments": ""}
            else:
                assert tc.id is None and not tc.function.name
            calls[tc.index]["arguments"] += tc.function.arguments or ""
        if ch.finish_reason:
            assert finish is None
            finish = ch.finish_reason
    return reasoning, content, [calls[i] for i in sorted(calls)], finish


def user(text):
    return [{"role": "user", "content": text}]


def test_one_tool_call(client):
    r = chat(client, user("What is the weather in Paris?"), tools=TOOLS)
    m = r.choices[0].message
    assert m.model_extra["reasoning"] == "The user asks about the weather in Paris. I will call get_weather."
    assert m.content is None
    assert len(m.tool_calls) == 1
    assert m.tool_calls[0].function.name == "get_weather"
    assert json.loads(m.tool_calls[0].function.arguments) == {"city": "Paris"}
    assert m.tool_calls[0].id.startswith("chatcmpl-tool-")
    assert r.choices[0].finish_reason == "tool_calls"
    assert r.choices[0].model_extra["stop_reason"] == 151338  # <|observation|>


def test_one_tool_call_streaming_matches(client):
    reasoning, content, calls, finish = collect_stream(client, user("What is the weather in Oslo?"), tools=TOOLS)
    assert reasoning == "The user asks about the weather in Oslo. I will call get_weather."
    assert content == ""
    assert [(c["name"], json.loads(c["arguments"])) for c in calls] == [("get_weather", {"city": "Oslo"})]
    assert finish == "tool_calls"


def test_two_tool_calls(client):
    r = chat(client, user("Compare the weather in Tokyo and Lima."), tools=TOOLS)
    m = r.choices[0].message
    assert m.model_extra["reasoning"] == "I need the weather for Tokyo and Lima. Two calls."
    assert [(c.function.name, json.loads(c.function.arguments)) for c in m.tool_calls] == [
        ("get_weather", {"city": "Tokyo"}), ("get_weather", {"city": "Lima"})]
    assert len({c.id for c in m.tool_calls}) == 2
    assert r.choices[0].finish_reason == "tool_calls"
    reasoning, content, calls, finish = collect_stream(client, user("Compare the weather in Tokyo and Lima."),
                                                       tools=TOOLS)
    assert [json.loads(c["arguments"]) for c in calls] == [{"city": "Tokyo"}, {"city": "Lima"}]
    assert [c["arguments"] for c in calls] == [c.function.arguments for c in m.tool_calls]
    assert finish == "tool_calls"


def test_get_time_call(client):
    m = chat(client, user("What time is it in Cairo?"), tools=TOOLS).choices[0].message
    assert m.model_extra["reasoning"] == "The user wants the local time in Cairo."
    assert [(c.function.name, json.loads(c.function.arguments)) for c in m.tool_calls] == [("get_time", {"city": "Cairo"})]


def test_tool_result_turn_gives_content(client):
    messages = user("What is the weather in Berlin?") + [
        {"role": "assistant", "content": None,
         "reasoning_content": "The user asks about the weather in Berlin. I will call get_weather.",
         "tool_calls": [{"id": "call_1", "type": "function",
                         "function": {"name": "get_weather", "arguments": json.dumps({"city": "Berlin"})}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": json.dumps({"temp": 21, "condition": "sunny"})},
    ]
    r = chat(client, messages, tools=TOOLS)
    m = r.choices[0].message
    assert m.model_extra["reasoning"] == "The tool says 21 degrees and sunny."
    assert m.content == "It is 21 degrees and sunny in Berlin."
    assert not m.tool_calls
    assert r.choices[0].finish_reason == "stop"
    assert r.choices[0].model_extra["stop_reason"] == 151336  # <|user|>
    reasoning, content, calls, finish = collect_stream(client, messages, tools=TOOLS)
    assert (reasoning, content, calls, finish) == ("The tool says 21 degrees and sunny.",
                                                   "It is 21 degrees and sunny in Berlin.", [], "stop")


def test_echo_without_tools(client):
    r = chat(client, user("Repeat after me: apple river stone"))
    m = r.choices[0].message
    assert m.model_extra["reasoning"] == "The user wants an echo."
    assert m.content == "apple river stone"
    assert r.choices[0].finish_reason == "stop"


def test_tool_choice_none_returns_no_tool_calls(client):
    r = chat(client, user("What is the weather in Rome?"), tools=TOOLS, tool_choice="none")
    m = r.choices[0].message
    assert not m.tool_calls
    assert r.choices[0].finish_reason != "tool_calls"
    assert m.model_extra["reasoning"] == "The user asks about the weather in Rome. I will call get_weather."
    _, content, calls, finish = collect_stream(client, user("What is the weather in Rome?"), tools=TOOLS,
                                               tool_choice="none")
    assert calls == [] and finish != "tool_calls" and "<tool_call>" not in content


def test_named_tool_choice_reports_stop(client):
    r = chat(client, user("What is the weather in Perth?"), tools=TOOLS,
             tool_choice={"type": "function", "function": {"name": "get_weather"}})
    assert [c.function.name for c in r.choices[0].message.tool_calls] == ["get_weather"]
    assert r.choices[0].finish_reason == "stop"


def test_thinking_disabled_puts_everything_in_content(client):
    r = chat(client, user("Repeat after me: green seven"), extra_body={"chat_template_kwargs": {"enable_thinking": False}})
    m = r.choices[0].message
    assert m.model_extra.get("reasoning") is None
    assert m.content is not None


def test_include_reasoning_false(client):
    r = chat(client, user("Repeat after me: music paper"), extra_body={"include_reasoning": False})
    assert r.choices[0].message.model_extra.get("reasoning") is None
    assert r.choices[0].message.content == "music paper"


def test_exclude_tools_flag_and_default_template_kwargs(striker_bin, toolcall_model, tmp_path, server):
    # --exclude-tools-when-tool-choice-none drops the tools block from the prompt only for "none";
    # --default-chat-template-kwargs turns thinking off unless the request turns it back on.
    s = StrikerServer(striker_bin, toolcall_model,
                      ["--served-model-name", MODEL, "--enable-auto-tool-choice", "--tool-call-parser", "glm47",
                       "--reasoning-parser", "glm47", "--exclude-tools-when-tool-choice-none", "--max-model-len", "1024",
                       "--kv-cache-memory", "16MiB", "--max-num-seqs", "4",
                       "--default-chat-template-kwargs", '{"enable_thinking": false}'],
                      log_dir=tmp_path)
    try:
        import requests
        msgs = user("What is the weather in Rome?")

        def prompt(srv, **kw):
            toks = requests.post(srv.url + "/tokenize", json={"messages": msgs, "tools": TOOLS, **kw}).json()["tokens"]
            return requests.post(srv.url + "/detokenize", json={"tokens": toks}).json()["prompt"]
        with_tools = prompt(server, tool_choice="none")
        excluded = prompt(s, tool_choice="none")
        assert "# Tools" in with_tools and "# Tools" not in excluded
        assert "# Tools" in prompt(s, tool_choice="auto")
        assert excluded.endswith("<|assistant|></think>")
        assert prompt(s, chat_template_kwargs={"enable_thinking": True}).endswith("<|assistant|><think>")
        r = s.client().chat.completions.create(model=MODEL, messages=msgs, tools=TOOLS, tool_choice="none",
                                               temperature=0, max_tokens=40)
        assert not r.choices[0].message.tool_calls
        assert r.choices[0].message.model_extra.get("reasoning") is None  # thinking off: no split
    finally:
        s.stop()
