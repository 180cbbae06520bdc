"""Anthropic's Messages API (POST /v1/messages, /v1/messages/count_tokens) end to end on the trained
toolcall-model (fixtures/toolcall-model/README.md), through the official anthropic client: thinking,
tool_use and text blocks are the model's known answers at temperature 0, streaming and not; a tool
result turn gives the known follow-up; the prompt is the one the chat route renders; errors come in
Anthropic's shape and the key is taken from x-api-key."""
import json

import anthropic
import pytest
import requests

from server_fixture import StrikerServer, module_server, toolcall_model  # noqa: F401  (fixtures)

MODEL = "toolcall"
KEY = "secret"
TOOLS = [
    {"name": "get_weather", "description": "Get the current weather for a city",
     "input_schema": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                      "required": ["city"]}},
    {"name": "get_time", "description": "Get the local time in a city",
     "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}},
]
CHAT_TOOLS = [{"type": "function", "function": {"name": t["name"], "description": t["description"],
                                                "parameters": t["input_schema"]}} for t in TOOLS]
GREEDY = {"temperature": 0}  # through extra_body: newer anthropic clients dropped the argument


@pytest.fixture(scope="module")
def server(striker_bin, toolcall_model, tmp_path_factory):
    yield from module_server(
        striker_bin, toolcall_model,
        ["--served-model-name", MODEL, "--enable-auto-tool-choice", "--tool-call-parser", "glm47",
         "--reasoning-parser", "glm47", "--max-model-len", "1024", "--max-num-seqs", "8", "--kv-cache-memory", "32MiB",
         "--api-key", KEY],
        tmp_path_factory)


@pytest.fixture(scope="module")
def client(server):
    return anthropic.Anthropic(base_url=server.url, api_key=KEY, max_retries=0)


def create(client, messages, **kw):
    kw.setdefault("max_tokens", 120)
    return client.messages.create(model=MODEL, messages=messages, extra_body=GREEDY, **kw)


def user(text):
    return [{"role": "user", "content": text}]


def blocks(message, type_):
    return [b for b in message.content if b.type == type_]


def test_tool_use_with_thinking(client):
    m = create(client, user("What is the weather in Paris?"), tools=TOOLS)
    assert m.type == "message" and m.role == "assistant" and m.model == MODEL and m.id.startswith("msg_")
    assert [b.type for b in m.content] == ["thinking", "tool_use"]
    assert m.content[0].thinking == "The user asks about the weather in Paris. I will call get_weather."
    call = m.content[1]
    assert call.name == "get_weather" and call.input == {"city": "Paris"} and call.id
    assert m.stop_reason == "tool_use" and m.stop_sequence is None
    assert m.usage.input_tokens > 0 and m.usage.output_tokens > 0


def test_prompt_is_the_chat_routes(server, client):
    """Same rendered prompt as /v1/chat/completions for the same conversation (count_tokens too)."""
    m = create(client, user("What time is it in Cairo?"), tools=TOOLS)
    c = requests.post(server.url + "/v1/chat/completions", headers={"Authorization": f"Bearer {KEY}"}, timeout=60,
                      json={"model": MODEL, "temperature": 0, "max_tokens": 120, "tools": CHAT_TOOLS,
                            "messages": user("What time is it in Cairo?")}).json()
    total = m.usage.input_tokens + m.usage.cache_read_input_tokens
    assert total == c["usage"]["prompt_tokens"]
    assert m.usage.output_tokens == c["usage"]["completion_tokens"]
    counted = client.messages.count_tokens(model=MODEL, messages=user("What time is it in Cairo?"), tools=TOOLS)
    assert counted.input_tokens == total


def test_tool_result_turn(client):
    first = create(client, user("What is the weather in Berlin?"), tools=TOOLS)
    call = blocks(first, "tool_use")[0]
    history = user("What is the weather in Berlin?") + [
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id,
                                      "content": json.dumps({"temp": 21, "condition": "sunny"})}]},
    ]
    m = create(client, history, tools=TOOLS)
    assert [b.type for b in m.content] == ["thinking", "text"]
    assert m.content[0].thinking == "The tool says 21 degrees and sunny."
    assert m.content[1].text == "It is 21 degrees and sunny in Berlin."
    assert m.stop_reason == "end_turn"


def test_stream_matches_the_message(client):
    with client.messages.stream(model=MODEL, max_tokens=120, tools=TOOLS, extra_body=GREEDY,
                                messages=user("Compare the weather in Tokyo and Lima.")) as stream:
        events = list(stream)
        final = stream.get_final_message()
    types = [e.type for e in events]
    assert types[0] == "message_start" and "message_stop" in types
    starts = [e for e in events if e.type == "content_block_start"]
    assert [e.index for e in starts] == [0, 1, 2]
    assert [b.type for b in final.content] == ["thinking", "tool_use", "tool_use"]
    assert [b.input for b in blocks(final, "tool_use")] == [{"city": "Tokyo"}, {"city": "Lima"}]
    plain = create(client, user("Compare the weather in Tokyo and Lima."), tools=TOOLS)
    strip = lambda b: {k: v for k, v in b.model_dump().items() if k != "id"}
    assert [strip(b) for b in final.content] == [strip(b) for b in plain.content]
    assert final.stop_reason == "tool_use" and final.usage.output_tokens == plain.usage.output_tokens


def test_text_stream_stop_sequence_and_max_tokens(client):
    with client.messages.stream(model=MODEL, max_tokens=60, extra_body=GREEDY,
                                messages=user("Repeat after me: apple river stone")) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == "apple river stone" == blocks(final, "text")[0].text
    m = create(client, user("Repeat after me: apple river stone"), stop_sequences=["river"])
    assert m.stop_reason == "stop_sequence" and m.stop_sequence == "river"
    assert blocks(m, "text")[0].text == "apple "
    m = create(client, user("Repeat after me: apple river stone"), max_tokens=3)
    assert m.stop_reason == "max_tokens" and m.usage.output_tokens == 3


def test_system_thinking_disabled_and_tool_choice(client):
    m = create(client, user("Repeat after me: apple"), system="You are terse.", thinking={"type": "disabled"})
    assert not blocks(m, "thinking")
    m = create(client, user("What is the weather in Oslo?"), tools=TOOLS,
               tool_choice={"type": "tool", "name": "get_time"})
    assert [b.name for b in blocks(m, "tool_use")] == ["get_time"]
    m = create(client, user("Compare the weather in Tokyo and Lima."), tools=TOOLS,
               tool_choice={"type": "auto", "disable_parallel_tool_use": True})
    assert len(blocks(m, "tool_use")) == 1


@pytest.mark.parametrize("body, needle", [
    ({"messages": user("hi")}, "`max_tokens` is required"),
    ({"max_tokens": 0, "messages": user("hi")}, "`max_tokens` must be an integer >= 1"),
    ({"max_tokens": 5, "messages": []}, "`messages` must be a non-empty array"),
    ({"max_tokens": 5, "messages": [{"role": "system", "content": "x"}]}, "must be user or assistant"),
    ({"max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]},
     "content block type 'image'"),
    ({"max_tokens": 5, "messages": user("hi"), "tools": [{"type": "web_search_20250305", "name": "w"}]},
     "is not supported (only client tools)"),
    ({"max_tokens": 5, "messages": user("hi"), "tool_choice": {"type": "sometimes"}}, "`tool_choice.type`"),
    ({"max_tokens": 5, "messages": user("hi"), "thinking": {"type": "maybe"}}, "`thinking.type`"),
    ({"max_tokens": 5, "messages": [{"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f",
                                                                      "input": "x"}]}]}, ".input` must be an object"),
])
def test_bad_requests_are_anthropic_400s(server, body, needle):
    r = requests.post(server.url + "/v1/messages", headers={"x-api-key": KEY}, json={"model": MODEL, **body},
                      timeout=30)
    assert r.status_code == 400, r.text
    j = r.json()
    assert j["type"] == "error" and j["error"]["type"] == "invalid_request_error"
    assert needle in j["error"]["message"], j


def test_unknown_model_and_bad_key(server, client):
    r = requests.post(server.url + "/v1/messages", headers={"x-api-key": KEY}, timeout=30,
                      json={"model": "claude-9", "max_tokens": 5, "messages": user("hi")})
    assert r.status_code == 404 and r.json()["error"]["type"] == "not_found_error"
    with pytest.raises(anthropic.AuthenticationError):
        anthropic.Anthropic(base_url=server.url, api_key="wrong", max_retries=0).messages.create(
            model=MODEL, max_tokens=5, messages=user("hi"))
