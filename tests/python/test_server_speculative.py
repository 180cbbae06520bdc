"""N-gram speculation end to end (`--speculative-config '{"method": "ngram", ...}'`, as vLLM takes it) on the
trained toolcall-model: the answers are the model's exact greedy answers (fixtures/toolcall-model/README.md),
streaming and not, with tool calls and reasoning parsed from deltas that now carry several tokens; logprobs
and usage count every token; vLLM's spec_decode counters and log line show guesses checked and accepted."""
import json
import os
import re
import time

import pytest
import requests

from server_fixture import client, module_server, toolcall_model  # noqa: F401  (fixtures)
from toolcall_cases import (FLAGS, MODEL, TIME, WEATHER, check_exact_tool_calls, comparable, plain_client,  # noqa: F401
                           user)

SPEC = '{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 1, "prompt_lookup_max": 3}'
WORDS = "apple river stone"  # the model echoes up to three words


@pytest.fixture(scope="module")
def server(striker_bin, toolcall_model, tmp_path_factory):  # noqa: F811
    yield from module_server(striker_bin, toolcall_model, [*FLAGS, "--speculative-config", SPEC, "--log-stats-interval", "0.5"],
                             tmp_path_factory)


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
    check_exact_tool_calls(client)


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


def test_forced_tool_calls_under_the_grammar(server, client):  # noqa: F811
    before = counters(server)
    r = client.chat.completions.create(model=MODEL, messages=user("What is the weather in Oslo?"), tools=[WEATHER, TIME],
                                       tool_choice="required", temperature=0, max_tokens=120)
    m = r.choices[0].message
    assert m.model_extra["reasoning"] == "The user asks about the weather in Oslo. I will call get_weather."
    assert [(c.function.name, c.function.arguments) for c in m.tool_calls] == [("get_weather", '{"city": "Oslo"}')]
    r = client.chat.completions.create(model=MODEL, messages=user("What is the weather in Lima?"), tools=[WEATHER, TIME],
                                       tool_choice={"type": "function", "function": {"name": "get_time"}},
                                       temperature=0, max_tokens=120)
    calls = r.choices[0].message.tool_calls
    assert len(calls) == 1 and calls[0].function.name == "get_time"
    assert set(json.loads(calls[0].function.arguments)) == {"city"}
    drafts, _, accepted = (a - b for a, b in zip(counters(server), before))
    assert drafts > 0 and accepted > 0  # guessed inside the grammar too


@pytest.mark.skipif(os.environ.get("STRIKER_SERVE_DEVICE", "cpu") != "cpu",
                    reason="bit-identical rows are the CPU backend's promise; the CUDA backend's multi-token decode "
                           "kernels sum in another order than its one-token ones, so sampled near-ties may differ")
def test_sampled_answers_equal_plain_decodings(client, plain_client):  # noqa: F811
    # Seeded sampling, free text and under a grammar: the answers with speculation are the plain server's.
    requests_ = [
        dict(messages=user("Repeat after me: apple river stone"), temperature=0.9, seed=5, max_tokens=60),
        dict(messages=user("Compare the weather in Cairo and Rome."), tools=[WEATHER, TIME], temperature=1.0, seed=9,
             max_tokens=120),
        dict(messages=user("What time is it in Perth?"), tools=[WEATHER, TIME], tool_choice="required",
             temperature=1.0, seed=3, max_tokens=120),
        dict(messages=user("Repeat after me: north happy"), temperature=0.8, seed=1, max_tokens=60, n=3,
             frequency_penalty=0.5, logprobs=True, top_logprobs=3),
    ]
    for kw in requests_:
        a = comparable(plain_client.chat.completions.create(model=MODEL, **kw))
        b = comparable(client.chat.completions.create(model=MODEL, **kw))
        assert a == b, kw
