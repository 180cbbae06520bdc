"""thinking_token_budget (vLLM's) and the Messages API's thinking.budget_tokens, end to end on the
trained toolcall-model (fixtures/toolcall-model/README.md): at temperature 0 it reasons
"The user wants an echo." before echoing, so a small budget must cut that reasoning after exactly
that many tokens, force `</think>`, and let the answer follow; without a budget (or with one the
reasoning fits in) the output is the model's own. The same on the async and n-gram engines, and
every bad value is a 400 naming the field."""
import json
import subprocess

import pytest
import requests

from server_fixture import StrikerServer, toolcall_model  # noqa: F401  (fixture)
from toolcall_cases import FLAGS, MODEL

ECHO = [{"role": "user", "content": "Repeat after me: apple river stone"}]
WEATHER_TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                   "required": ["city"]}}}]


def start(striker_bin, model, tmp_path_factory, *extra):
    return StrikerServer(striker_bin, model, [*FLAGS, *extra], log_dir=tmp_path_factory.mktemp("log"))


@pytest.fixture(scope="module")
def server(striker_bin, toolcall_model, tmp_path_factory):
    # Async scheduling off by name: this server is the reference the async engine is compared with
    # (vLLM turns it on by default on GPUs; so may this server's --device cuda).
    s = start(striker_bin, toolcall_model, tmp_path_factory, "--no-async-scheduling")
    yield s
    s.stop()


def chat(server, budget=None, messages=ECHO, **kw):
    body = {"model": MODEL, "messages": messages, "temperature": 0, "max_tokens": 60, "return_token_ids": True, **kw}
    if budget is not None:
        body["thinking_token_budget"] = budget
    r = requests.post(server.url + "/v1/chat/completions", json=body, timeout=60)
    assert r.status_code == 200, r.text
    return r.json()["choices"][0]


def without_call_ids(choice):
    """A choice without its tool calls' ids (random per call)."""
    for call in choice["message"].get("tool_calls") or []:
        call.pop("id")
    return choice


def token_id(server, text):
    ids = requests.post(server.url + "/tokenize", json={"prompt": text, "add_special_tokens": False}).json()["tokens"]
    assert len(ids) == 1, ids
    return ids[0]


def count_tokens(server, text):
    return len(requests.post(server.url + "/tokenize", json={"prompt": text, "add_special_tokens": False}).json()["tokens"])


def test_without_a_budget_the_model_reasons_and_answers_as_trained(server):
    free = chat(server)
    assert free["message"]["reasoning"] == "The user wants an echo."
    assert free["message"]["content"] == "apple river stone"
    # -1 is vLLM's "no limit", and a budget the reasoning fits in changes nothing.
    for budget in (-1, 1000, count_tokens(server, "The user wants an echo.")):
        assert chat(server, budget) == free, budget


@pytest.mark.parametrize("budget", [0, 1, 3])
def test_a_small_budget_cuts_the_reasoning_and_the_answer_follows(server, budget):
    free = chat(server)
    cut = chat(server, budget)
    end = token_id(server, "</think>")
    # The first `budget` tokens are the model's own reasoning, then </think> is forced.
    assert cut["token_ids"][:budget] == free["token_ids"][:budget]
    assert cut["token_ids"][budget] == end
    assert end not in cut["token_ids"][:budget]
    reasoning = cut["message"]["reasoning"] or ""
    assert count_tokens(server, reasoning) == budget if reasoning else budget == 0
    assert "The user wants an echo.".startswith(reasoning)
    # The answer continues after the forced end: content, then the model's stop.
    assert cut["message"]["content"], cut
    assert cut["finish_reason"] == "stop", cut
    assert len(cut["token_ids"]) > budget + 2


def test_streamed_the_cut_is_the_same(server):
    cut = chat(server, 2)
    reasoning, content = "", ""
    with requests.post(server.url + "/v1/chat/completions", stream=True, timeout=60,
                       json={"model": MODEL, "messages": ECHO, "temperature": 0, "max_tokens": 60, "stream": True,
                             "thinking_token_budget": 2}) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if not line.startswith(b"data: ") or line == b"data: [DONE]":
                continue
            for ch in json.loads(line[6:])["choices"]:
                reasoning += ch["delta"].get("reasoning") or ""
                content += ch["delta"].get("content") or ""
    assert (reasoning, content) == (cut["message"]["reasoning"], cut["message"]["content"])


def test_completions_and_responses_take_the_budget(server):
    end = token_id(server, "</think>")
    rendered = requests.post(server.url + "/v1/chat/completions/render",
                             json={"model": MODEL, "messages": ECHO}).json()
    body = {"model": MODEL, "prompt": rendered["token_ids"], "temperature": 0, "max_tokens": 20,
            "return_token_ids": True, "thinking_token_budget": 2}
    assert rendered["sampling_params"]["thinking_token_budget"] is None
    out = requests.post(server.url + "/v1/completions", json=body, timeout=60).json()["choices"][0]
    assert out["token_ids"][2] == end and end not in out["token_ids"][:2]
    r = requests.post(server.url + "/v1/responses", timeout=60,
                      json={"model": MODEL, "input": ECHO[0]["content"], "temperature": 0, "thinking_token_budget": 2})
    assert r.status_code == 200, r.text
    reasoning = [c["text"] for item in r.json()["output"] if item["type"] == "reasoning" for c in item["content"]]
    assert reasoning == [chat(server, 2)["message"]["reasoning"]]


@pytest.mark.parametrize("value", ["3", -2, 1.5, True, [3], {"n": 3}, 2**40])
def test_bad_values_are_400s_naming_the_field(server, value):
    for route, body in (("/v1/chat/completions", {"messages": ECHO}), ("/v1/completions", {"prompt": "hi"})):
        r = requests.post(server.url + route, json={"model": MODEL, "max_tokens": 5, "thinking_token_budget": value,
                                                    **body}, timeout=30)
        assert r.status_code == 400, (route, value, r.text)
        err = r.json()["error"]
        assert err["param"] == "thinking_token_budget" and "thinking_token_budget" in err["message"], err
    assert requests.get(server.url + "/health").status_code == 200


def test_a_forced_end_that_min_tokens_masks_is_a_400(server):
    """`</think>` among stop_token_ids is masked out below min_tokens, so the budget could not force
    it: refused with the reason, and the same request without min_tokens runs."""
    end = token_id(server, "</think>")
    body = {"model": MODEL, "messages": ECHO, "max_tokens": 20, "thinking_token_budget": 2, "stop_token_ids": [end]}
    r = requests.post(server.url + "/v1/chat/completions", json={**body, "min_tokens": 5}, timeout=30)
    assert r.status_code == 400, r.text
    assert "min_tokens" in r.json()["error"]["message"] and "stop_token_ids" in r.json()["error"]["message"], r.text
    r = requests.post(server.url + "/v1/chat/completions", json=body, timeout=60)
    assert r.status_code == 200, r.text
    assert requests.get(server.url + "/health").status_code == 200


def test_messages_budget_tokens_cuts_the_thinking_block(server):
    body = {"model": MODEL, "max_tokens": 60, "temperature": 0, "messages": ECHO,
            "thinking": {"type": "enabled", "budget_tokens": 3}}
    r = requests.post(server.url + "/v1/messages", json=body, timeout=60)
    assert r.status_code == 200, r.text
    blocks = r.json()["content"]
    cut = chat(server, 3)
    assert blocks[0] == {"type": "thinking", "thinking": cut["message"]["reasoning"], "signature": ""}
    assert count_tokens(server, blocks[0]["thinking"]) == 3
    assert [b["type"] for b in blocks[1:]] == ["text"] and blocks[1]["text"] == cut["message"]["content"]
    # A budget the thinking fits in: the model's own thinking, whole.
    body["thinking"]["budget_tokens"] = 50
    whole = requests.post(server.url + "/v1/messages", json=body, timeout=60).json()["content"]
    assert whole[0]["thinking"] == "The user wants an echo." and whole[1]["text"] == "apple river stone"


@pytest.mark.parametrize("thinking, needle", [
    ({"type": "enabled", "budget_tokens": "x"}, "must be an integer >= 1"),
    ({"type": "enabled", "budget_tokens": 0}, "must be an integer >= 1"),
    ({"type": "enabled", "budget_tokens": -5}, "must be an integer >= 1"),
    ({"type": "enabled", "budget_tokens": 1.5}, "must be an integer >= 1"),
    ({"type": "enabled", "budget_tokens": 60}, "`max_tokens` must be greater than `thinking.budget_tokens`"),
    ({"type": "disabled", "budget_tokens": 10}, "only taken with `thinking.type` enabled"),
])
def test_messages_bad_budgets_are_anthropic_400s(server, thinking, needle):
    r = requests.post(server.url + "/v1/messages", timeout=30,
                      json={"model": MODEL, "max_tokens": 60, "messages": ECHO, "thinking": thinking})
    assert r.status_code == 400, r.text
    j = r.json()
    assert j["type"] == "error" and j["error"]["type"] == "invalid_request_error", j
    assert needle in j["error"]["message"], j
    # count_tokens takes no max_tokens: the budget is not held against one there.
    if thinking.get("budget_tokens") == 60:
        c = requests.post(server.url + "/v1/messages/count_tokens", timeout=30,
                          json={"model": MODEL, "messages": ECHO, "thinking": thinking})
        assert c.status_code == 200, c.text


@pytest.mark.parametrize("engine_flags", [
    ["--async-scheduling"],
    ["--speculative-config", '{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 2, '
                             '"prompt_lookup_min": 1}'],
], ids=["async", "ngram"])
def test_async_and_ngram_engines_cut_the_same(striker_bin, toolcall_model, tmp_path_factory, server, engine_flags):
    other = start(striker_bin, toolcall_model, tmp_path_factory, *engine_flags)
    try:
        for budget in (None, 0, 2, 5):
            assert chat(other, budget) == chat(server, budget), (engine_flags, budget)
        # The weather turn too (a tool call after the cut reasoning, under the same masks).
        weather = [{"role": "user", "content": "What is the weather in Oslo?"}]
        for budget in (None, 4):
            got, want = (without_call_ids(chat(s, budget, messages=weather, tools=WEATHER_TOOLS)) for s in (other, server))
            assert got == want, budget
    finally:
        other.stop()


def test_without_reasoning_delimiters_a_budget_is_refused(striker_bin, toolcall_model, tmp_path_factory):
    plain = StrikerServer(striker_bin, toolcall_model, ["--served-model-name", MODEL, "--max-model-len", "1024",
                                                        "--kv-cache-memory", "32MiB"],
                          log_dir=tmp_path_factory.mktemp("log"))
    try:
        r = requests.post(plain.url + "/v1/chat/completions", timeout=30,
                          json={"model": MODEL, "messages": ECHO, "max_tokens": 5, "thinking_token_budget": 3})
        assert r.status_code == 400, r.text
        err = r.json()["error"]
        assert err["param"] == "thinking_token_budget" and "--reasoning-parser" in err["message"], err
        r = requests.post(plain.url + "/v1/messages", timeout=30,
                          json={"model": MODEL, "messages": ECHO, "max_tokens": 50,
                                "thinking": {"type": "enabled", "budget_tokens": 3}})
        assert r.status_code == 400 and r.json()["type"] == "error", r.text
        assert "--reasoning-parser" in r.json()["error"]["message"]
        # Without a budget it serves as before.
        assert requests.post(plain.url + "/v1/chat/completions", timeout=30,
                             json={"model": MODEL, "messages": ECHO, "max_tokens": 5}).status_code == 200
    finally:
        plain.stop()


def test_reasoning_config_flag_sets_the_delimiters(striker_bin, toolcall_model, tmp_path_factory, server):
    """--reasoning-config alone (no reasoning parser): the budget counts between its strings; the
    text comes back unparsed, so the forced end is in the token ids."""
    end = token_id(server, "</think>")
    s = StrikerServer(striker_bin, toolcall_model,
                      ["--served-model-name", MODEL, "--max-model-len", "1024", "--kv-cache-memory", "32MiB",
                       "--reasoning-config", '{"reasoning_start_str": "<think>", "reasoning_end_str": "</think>"}'],
                      log_dir=tmp_path_factory.mktemp("log"))
    try:
        got = chat(s, 2)
        assert got["token_ids"][2] == end and got["token_ids"][:2] == chat(server)["token_ids"][:2]
        # Without a reasoning parser a structured output is in force from the first token, inside the
        # open section: a forced end would break it, so the pair is refused up front.
        r = requests.post(s.url + "/v1/chat/completions", timeout=30,
                          json={"model": MODEL, "messages": ECHO, "max_tokens": 20, "thinking_token_budget": 2,
                                "response_format": {"type": "json_object"}})
        assert r.status_code == 400 and "structured output" in r.json()["error"]["message"], r.text
    finally:
        s.stop()


@pytest.mark.parametrize("config, needle", [
    ('{"think_start": "<think>"}', "'think_start' is not taken"),
    ('{"reasoning_start_str": "<think>"}', "needs both reasoning_start_str and reasoning_end_str"),
    ('{"reasoning_start_str": 3, "reasoning_end_str": "</think>"}', "must be a string"),
    ("[1]", "must be a JSON object"),
])
def test_bad_reasoning_config_stops_at_startup(striker_bin, toolcall_model, config, needle):
    r = subprocess.run([str(striker_bin), "serve", str(toolcall_model), "--port", "0", "--device", "cpu",
                        "--reasoning-config", config], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert needle in r.stdout + r.stderr, r.stdout + r.stderr
