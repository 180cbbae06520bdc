"""N-gram speculation end to end (`--speculative-config '{"method": "ngram", ...}'`, as vLLM takes it) on the
trained toolcall-model: the answers are the model's exact greedy answers (fixtures/toolcall-model/README.md),
streaming and not, with tool calls and reasoning parsed from deltas that now carry several tokens; logprobs
and usage count every token; vLLM's spec_decode counters and log line show guesses checked and accepted."""
import json
import re
import time

import pytest
import requests

from server_fixture import client, module_server, toolcall_model  # noqa: F401  (fixtures)

MODEL = "toolcall"
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                   "required": ["city"]}}}
TIME = {"type": "function", "function": {
    "name": "get_time", "description": "Get the local time in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
SPEC = '{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 1, "prompt_lookup_max": 3}'
WORDS = "apple river stone"  # the model echoes up to three words


@pytest.fixture(scope="module")
def server(striker_bin, toolcall_model, tmp_path_factory):  # noqa: F811
    yield from module_server(
        striker_bin, toolcall_model,
        ["--served-model-name", MODEL, "--enable-auto-tool-choice", "--tool-call-parser", "glm47",
         "--reasoning-parser", "glm47", "--max-model-len", "1024", "--max-num-seqs", "8", "--kv-cache-memory", "32MiB",
         "--speculative-config", SPEC, "--log-stats-interval", "0.5"],
        tmp_path_factory)


def user(text):
    return [{"role": "user", "content": text}]


def counters(server):
    m = server.metrics()
    return (m["vllm:spec_decode_num_drafts_total"], m["vllm:spec_decode_num_draft_tokens_total"],
            m["vllm:spec_decode_num_accepted_tokens_total"])


def test_echo_is_exact_and_guesses_are_accepted(server, client):  # noqa: F811
    before = counters(server)
    r = client.chat.completions.create(model=MODEL, messages=user("Repeat after me: " + WORDS), temperature=0,
                                       max_tokens=120, logprobs=True, top_logprobs=2)
    m = r.choices[0].message
    assert m.model_extra["reasoning"] == "The user wants an echo."
    assert m.content == WORDS
    assert r.choices[0].finish_reason == "stop"
    # Every generated token has its logprob entry, accepted guesses included.
    assert len(r.choices[0].logprobs.content) == r.usage.completion_tokens
    assert [t.token for t in r.choices[0].logprobs.content][-3:] == [" river", " stone", "<|user|>"]
    drafts, drafted, accepted = (a - b for a, b in zip(counters(server), before))
    # " river" recurs in the prompt: " stone" is guessed after it and accepted.
    assert drafts > 0 and 0 < accepted <= drafted
    per_pos = [server.metrics()[f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",model_name="{MODEL}",position="{p}"}}']
               for p in range(4)]
    assert per_pos == sorted(per_pos, reverse=True) and per_pos[0] > 0


def test_tool_calls_are_exact_streaming_and_not(client):  # noqa: F811
    r = client.chat.completions.create(model=MODEL, messages=user("Compare the weather in Lima and Seoul."),
                                       tools=[WEATHER, TIME], temperature=0, max_tokens=160)
    m = r.choices[0].message
    assert m.model_extra["reasoning"] == "I need the weather for Lima and Seoul. Two calls."
    assert [(c.function.name, json.loads(c.function.arguments)) for c in m.tool_calls] == [
        ("get_weather", {"city": "Lima"}), ("get_weather", {"city": "Seoul"})]
    assert r.choices[0].finish_reason == "tool_calls"

    reasoning, calls, finish, chunks = "", {}, None, 0
    for chunk in client.chat.completions.create(model=MODEL, messages=user("What time is it in Hanoi?"),
                                                tools=[WEATHER, TIME], temperature=0, max_tokens=160, stream=True):
        if not chunk.choices:
            continue
        chunks += 1
        delta = chunk.choices[0].delta
        reasoning += (delta.model_extra or {}).get("reasoning") or ""
        assert not delta.content
        for tc in delta.tool_calls or []:
            calls.setdefault(tc.index, {"name": "", "arguments": ""})
            calls[tc.index]["name"] += tc.function.name or ""
            calls[tc.index]["arguments"] += tc.function.arguments or ""
        finish = chunk.choices[0].finish_reason or finish
    assert reasoning == "The user wants the local time in Hanoi."
    assert [(c["name"], json.loads(c["arguments"])) for c in calls.values()] == [("get_time", {"city": "Hanoi"})]
    assert finish == "tool_calls"


def test_completions_with_n_and_seed_match_plain_decoding_elsewhere(server, client):  # noqa: F811
    # Sampled choices keep their seeded draws: the same request twice gives the same text, and the
    # usage counts every token of both choices.
    kw = dict(model=MODEL, prompt="<|user|>Repeat after me: apple river stone apple river stone<|assistant|><think>",
              max_tokens=40, n=2, seed=11, temperature=0.7)
    a, b = client.completions.create(**kw), client.completions.create(**kw)
    assert [c.text for c in a.choices] == [c.text for c in b.choices]
    assert a.usage.completion_tokens == b.usage.completion_tokens > 2


def test_spec_decoding_log_line(server, client):  # noqa: F811
    client.chat.completions.create(model=MODEL, messages=user("Repeat after me: green seven light green seven"),
                                   temperature=0, max_tokens=60)
    pattern = (r"SpecDecoding metrics: Mean acceptance length: (\d+\.\d\d), Accepted throughput: \d+\.\d\d tokens/s, "
               r"Drafted throughput: \d+\.\d\d tokens/s, Accepted: (\d+) tokens, Drafted: (\d+) tokens, "
               r"Per-position acceptance rate: \d\.\d{3}, \d\.\d{3}, \d\.\d{3}, \d\.\d{3}, "
               r"Avg Draft acceptance rate: \d+\.\d%")
    deadline = time.time() + 10
    while not re.search(pattern, server.log()):
        assert time.time() < deadline, server.log()[-3000:]
        time.sleep(0.1)
    m = re.search(pattern, server.log())
    assert float(m.group(1)) > 1.0 and int(m.group(2)) <= int(m.group(3))
    assert requests.get(server.url + "/health", timeout=10).status_code == 200
