"""OpenAI's Responses API (POST /v1/responses, GET/DELETE /v1/responses/{id}) end to end on the trained
toolcall-model (fixtures/toolcall-model/README.md), through the official openai client: at temperature 0
the reasoning items, function calls and messages are the model's known answers, streaming and not; a tool
result sent back with previous_response_id gives the known follow-up; the conversation a chat client
would send gives the same tokens."""
import json

import openai
import pytest
import requests

from server_fixture import StrikerServer, client, module_server, toolcall_model  # noqa: F401  (fixtures)

MODEL = "toolcall"
TOOLS = [
    {"type": "function", "name": "get_weather", "description": "Get the current weather for a city",
     "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                    "required": ["city"]}},
    {"type": "function", "name": "get_time", "description": "Get the local time in a city",
     "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}},
]
CHAT_TOOLS = [{"type": "function", "function": {k: v for k, v in t.items() if k != "type"}} for t in TOOLS]


@pytest.fixture(scope="module")
def server(striker_bin, toolcall_model, tmp_path_factory):
    yield from module_server(
        striker_bin, toolcall_model,
        ["--served-model-name", MODEL, "--enable-auto-tool-choice", "--tool-call-parser", "glm47",
         "--reasoning-parser", "glm47", "--max-model-len", "1024", "--max-num-seqs", "8", "--kv-cache-memory", "32MiB"],
        tmp_path_factory)


def create(client, **kw):
    kw.setdefault("temperature", 0)
    kw.setdefault("max_output_tokens", 120)
    return client.responses.create(model=MODEL, **kw)


def items(response, type_):
    return [i for i in response.output if i.type == type_]


def reasoning_text(response):
    return "".join(c.text for i in items(response, "reasoning") for c in (i.content or []))


def test_function_call_with_reasoning(client):
    r = create(client, input="What is the weather in Paris?", tools=TOOLS)
    assert r.object == "response" and r.id.startswith("resp_") and r.status == "completed"
    assert [i.type for i in r.output] == ["reasoning", "function_call"]
    assert reasoning_text(r) == "The user asks about the weather in Paris. I will call get_weather."
    call = items(r, "function_call")[0]
    assert call.name == "get_weather" and json.loads(call.arguments) == {"city": "Paris"}
    assert call.call_id and call.id.startswith("fc_") and call.status == "completed"
    assert r.output_text == ""
    u = r.usage
    assert u.input_tokens > 0 and u.output_tokens > u.output_tokens_details.reasoning_tokens > 0
    assert u.total_tokens == u.input_tokens + u.output_tokens
    assert r.model == MODEL and r.tools[0].name == "get_weather" and r.tool_choice == "auto"


def test_same_tokens_as_chat_completions(client):
    """The Responses input renders the prompt a chat request renders: same prompt and output token counts."""
    r = create(client, input=[{"role": "user", "content": "What time is it in Cairo?"}], tools=TOOLS)
    c = client.chat.completions.create(model=MODEL, temperature=0, max_tokens=120, tools=CHAT_TOOLS,
                                       messages=[{"role": "user", "content": "What time is it in Cairo?"}])
    assert r.usage.input_tokens == c.usage.prompt_tokens
    assert r.usage.output_tokens == c.usage.completion_tokens
    assert reasoning_text(r) == c.choices[0].message.model_extra["reasoning"]
    call = items(r, "function_call")[0]
    assert (call.name, call.arguments) == (c.choices[0].message.tool_calls[0].function.name,
                                           c.choices[0].message.tool_calls[0].function.arguments)


def test_two_calls_and_parallel_tool_calls_false(client):
    r = create(client, input="Compare the weather in Tokyo and Lima.", tools=TOOLS)
    calls = items(r, "function_call")
    assert [json.loads(c.arguments) for c in calls] == [{"city": "Tokyo"}, {"city": "Lima"}]
    assert len({c.call_id for c in calls}) == 2
    r1 = create(client, input="Compare the weather in Tokyo and Lima.", tools=TOOLS, parallel_tool_calls=False)
    assert [json.loads(c.arguments) for c in items(r1, "function_call")] == [{"city": "Tokyo"}]
    assert r1.parallel_tool_calls is False


def test_tool_output_turn_with_previous_response_id(client):
    first = create(client, input="What is the weather in Berlin?", tools=TOOLS)
    call = items(first, "function_call")[0]
    second = create(client, previous_response_id=first.id, tools=TOOLS,
                    input=[{"type": "function_call_output", "call_id": call.call_id,
                            "output": json.dumps({"temp": 21, "condition": "sunny"})}])
    assert second.previous_response_id == first.id
    assert reasoning_text(second) == "The tool says 21 degrees and sunny."
    assert second.output_text == "It is 21 degrees and sunny in Berlin."
    assert [i.type for i in second.output] == ["reasoning", "message"]
    msg = items(second, "message")[0]
    assert msg.role == "assistant" and msg.status == "completed" and msg.id.startswith("msg_")


def test_tool_output_turn_from_items_without_store(client):
    """The same turn sent as explicit input items (a stateless client): reasoning, call, output."""
    items_in = [
        {"role": "user", "content": "What is the weather in Madrid?"},
        {"type": "reasoning", "id": "rs_1", "summary": [],
         "content": [{"type": "reasoning_text", "text": "The user asks about the weather in Madrid. I will call get_weather."}]},
        {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": json.dumps({"city": "Madrid"})},
        {"type": "function_call_output", "call_id": "call_1", "output": json.dumps({"temp": -3, "condition": "snowy"})},
    ]
    r = create(client, input=items_in, tools=TOOLS, store=False)
    assert r.output_text == "It is -3 degrees and snowy in Madrid."
    assert r.store is False
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(r.id)


def test_stateless_replay_as_codex_does(client):
    """store: false with include reasoning.encrypted_content (what Codex sends), then the next request replays the
    output items as they came (reasoning included) with the tool's output: the known follow-up."""
    events = list(create(client, input=[{"role": "user", "content": "What is the weather in Quito?"}], tools=TOOLS,
                         store=False, include=["reasoning.encrypted_content"], stream=True))
    first = events[-1].response
    assert first.store is False and [i.type for i in first.output] == ["reasoning", "function_call"]
    call = first.output[1]
    replay = [{"role": "user", "content": "What is the weather in Quito?"}]
    replay += [item.model_dump(exclude_none=True) for item in first.output]
    replay.append({"type": "function_call_output", "call_id": call.call_id,
                   "output": json.dumps({"temp": 14, "condition": "rainy"})})
    second = create(client, input=replay, tools=TOOLS, store=False, include=["reasoning.encrypted_content"])
    assert second.output_text == "It is 14 degrees and rainy in Quito."


def test_streaming_events_rebuild_the_response(client):
    events = list(create(client, input="Compare the weather in Oslo and Rome.", tools=TOOLS, stream=True))
    types = [e.type for e in events]
    assert types[:2] == ["response.created", "response.in_progress"] and types[-1] == "response.completed"
    assert [e.sequence_number for e in events] == list(range(len(events)))
    final = events[-1].response
    reasoning = "".join(e.delta for e in events if e.type == "response.reasoning_text.delta")
    assert reasoning == "I need the weather for Oslo and Rome. Two calls." == reasoning_text(final)
    added = [e.item for e in events if e.type == "response.output_item.added"]
    done = [e.item for e in events if e.type == "response.output_item.done"]
    assert [i.type for i in added] == [i.type for i in done] == ["reasoning", "function_call", "function_call"]
    assert [i.model_dump() for i in done] == [i.model_dump() for i in final.output]
    for index, item in enumerate(done):
        if item.type != "function_call":
            continue
        args = "".join(e.delta for e in events
                       if e.type == "response.function_call_arguments.delta" and e.output_index == index)
        assert args == item.arguments
    assert [json.loads(i.arguments) for i in done if i.type == "function_call"] == [{"city": "Oslo"}, {"city": "Rome"}]
    # The non-streaming response of the same request has the same items (ids aside).
    plain = create(client, input="Compare the weather in Oslo and Rome.", tools=TOOLS)
    strip = lambda i: {k: v for k, v in i.model_dump().items() if k not in ("id", "call_id")}
    assert [strip(i) for i in plain.output] == [strip(i) for i in final.output]
    assert final.usage.output_tokens == plain.usage.output_tokens


def test_streaming_message_text(client):
    stream = create(client, input="Repeat after me: apple river stone", stream=True)
    events = list(stream)
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == "apple river stone"
    done = [e for e in events if e.type == "response.output_text.done"]
    assert len(done) == 1 and done[0].text == text
    assert events[-1].response.output_text == text


BERLIN_TURN = [
    {"role": "user", "content": "What is the weather in Berlin?"},
    {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": json.dumps({"city": "Berlin"})},
    {"type": "function_call_output", "call_id": "call_1", "output": json.dumps({"temp": 21, "condition": "sunny"})},
]


def test_output_text_logprobs(client):
    """include message.output_text.logprobs: the message's output_text carries one entry per token that wrote
    it (not the reasoning's), each with top_logprobs alternatives; the values are the chat route's for the
    same tokens; streamed, the text deltas carry them piecewise and the done events and the final response
    hold them all; without the include, top_logprobs asks for nothing."""
    r = create(client, input=BERLIN_TURN, tools=TOOLS, include=["message.output_text.logprobs"], top_logprobs=2)
    assert r.output_text == "It is 21 degrees and sunny in Berlin." and r.top_logprobs == 2
    lps = items(r, "message")[0].content[0].logprobs
    assert lps and all(lp.logprob <= 0 and len(lp.top_logprobs) == 2 for lp in lps)
    assert all(bytes(lp.bytes).decode() == lp.token for lp in lps)
    assert "".join(lp.token for lp in lps).strip() == r.output_text
    assert all(lp.top_logprobs[0].logprob >= lp.top_logprobs[1].logprob for lp in lps)
    assert all(lp.logprob <= lp.top_logprobs[0].logprob + 1e-6 for lp in lps)  # greedy: the drawn token is the best
    # The chat route's logprobs of the same generation cover every token (reasoning too): ours are its tail
    # before the stop token.
    chat_messages = [BERLIN_TURN[0],
                     {"role": "assistant", "content": "", "tool_calls": [
                         {"id": "call_1", "type": "function", "function": {"name": "get_weather",
                                                                          "arguments": json.dumps({"city": "Berlin"})}}]},
                     {"role": "tool", "tool_call_id": "call_1", "content": json.dumps({"temp": 21, "condition": "sunny"})}]
    c = client.chat.completions.create(model=MODEL, temperature=0, max_tokens=120, tools=CHAT_TOOLS,
                                       messages=chat_messages, logprobs=True, top_logprobs=2)
    assert c.choices[0].message.content == r.output_text
    chat_lps = [(e.token, e.logprob) for e in c.choices[0].logprobs.content]
    ours = [(lp.token, lp.logprob) for lp in lps]
    start = next(i for i in range(len(chat_lps)) if chat_lps[i:i + len(ours)] == ours)
    assert len(chat_lps) - (start + len(ours)) <= 1, (chat_lps, ours)
    assert start > 0  # the reasoning's tokens came first and are not in the message's logprobs

    events = list(create(client, input=BERLIN_TURN, tools=TOOLS, include=["message.output_text.logprobs"],
                         top_logprobs=2, stream=True))
    pieces = [lp for e in events if e.type == "response.output_text.delta" for lp in e.logprobs]
    done = [e for e in events if e.type == "response.output_text.done"][0].logprobs
    final = items(events[-1].response, "message")[0].content[0].logprobs
    assert [(lp.token, lp.logprob) for lp in pieces] == [(lp.token, lp.logprob) for lp in done] == ours
    assert [lp.model_dump() for lp in final] == [lp.model_dump() for lp in lps]

    plain = create(client, input=BERLIN_TURN, tools=TOOLS, top_logprobs=2)
    assert items(plain, "message")[0].content[0].logprobs == []
    assert plain.output_text == r.output_text


def test_instructions_max_output_tokens_and_incomplete(client):
    r = create(client, input="Repeat after me: apple river stone", max_output_tokens=3,
               instructions="You are terse.")
    assert r.status == "incomplete" and r.incomplete_details.reason == "max_output_tokens"
    assert r.usage.output_tokens == 3 and r.max_output_tokens == 3 and r.instructions == "You are terse."
    events = list(create(client, input="Repeat after me: apple river stone", max_output_tokens=3, stream=True))
    assert events[-1].type == "response.incomplete" and events[-1].response.status == "incomplete"


def test_retrieve_and_delete(client):
    r = create(client, input="What time is it in Rome?", tools=TOOLS)
    got = client.responses.retrieve(r.id)
    assert got.model_dump() == r.model_dump()
    client.responses.delete(r.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(r.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.delete(r.id)


@pytest.mark.parametrize("body, param", [
    ({"input": "hi", "tools": [{"type": "web_search"}]}, "tools"),
    ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "http://x/y.png"}]}]}, "input"),
    ({"input": [{"type": "item_reference", "id": "msg_1"}]}, "input"),
    ({"input": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": "not json"}]}, "input"),
    ({"input": []}, "input"),
    ({}, "input"),
    ({"input": "hi", "background": True}, "background"),
    ({"input": "hi", "top_logprobs": -1}, "top_logprobs"),
    ({"input": "hi", "top_logprobs": "5"}, "top_logprobs"),
    ({"input": "hi", "include": ["message.output_text.logprobs"], "top_logprobs": 21}, "top_logprobs"),
    ({"input": "hi", "include": ["file_search_call.results"]}, "include"),
    ({"input": "hi", "include": "message.output_text.logprobs"}, "include"),
    ({"input": "hi", "text": {"format": {"type": "yaml"}}}, "text"),
    ({"input": "hi", "tool_choice": {"type": "file_search"}}, "tool_choice"),
    ({"input": "hi", "max_output_tokens": 0}, "max_output_tokens"),
    ({"input": "hi", "max_output_tokens": "7"}, "max_output_tokens"),
    ({"input": "hi", "stream": "yes"}, "stream"),
    ({"input": "hi", "instructions": ["x"]}, "instructions"),
    ({"input": [{"role": "tool", "content": "x"}]}, "input"),
    ({"input": [{"type": "function_call_output", "call_id": "c"}]}, "input"),
])
def test_bad_requests_are_400(server, body, param):
    r = requests.post(server.url + "/v1/responses", json={"model": MODEL, **body}, timeout=30)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["type"] == "BadRequestError" and err["message"]
    assert err["param"] == param, err
    assert requests.get(server.url + "/health", timeout=10).status_code == 200


def test_unknown_previous_response_and_model_are_404(server):
    r = requests.post(server.url + "/v1/responses", json={"model": MODEL, "input": "hi",
                                                          "previous_response_id": "resp_nope"}, timeout=30)
    assert r.status_code == 404 and r.json()["error"]["param"] == "previous_response_id"
    r = requests.post(server.url + "/v1/responses", json={"model": "other", "input": "hi"}, timeout=30)
    assert r.status_code == 404


def test_json_schema_text_format(client):
    """text.format constrains the message (after the reasoning) as response_format does in chat."""
    schema = {"type": "object", "properties": {"city": {"enum": ["Paris", "Oslo"]}}, "required": ["city"],
              "additionalProperties": False}
    r = create(client, input="Repeat after me: Paris", max_output_tokens=400,
               text={"format": {"type": "json_schema", "name": "city", "schema": schema, "strict": True}})
    assert r.text.format.type == "json_schema"
    assert r.status == "completed", r.output_text
    assert json.loads(r.output_text)["city"] in ("Paris", "Oslo")
