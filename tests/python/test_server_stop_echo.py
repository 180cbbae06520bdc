"""vLLM's `include_stop_str_in_output` (chat and completions) and legacy-completions `echo`, on the
real `striker serve` with the tiny random-weight model, through the official openai client.

Greedy decoding is deterministic, so a run without `stop` tells which text a stop string taken
from its own output must cut: the kept and the dropped variants are checked on the same prompt."""
import json

import pytest
import requests

from server_fixture import client, module_server, tiny_model  # noqa: F401  (fixtures)

MODEL = "tiny"
PROMPT = "The sky is"
MSGS = [{"role": "user", "content": "Say something."}]
GEN = 24


@pytest.fixture(scope="module")
def server(striker_bin, tiny_model, tmp_path_factory):
    yield from module_server(
        striker_bin, tiny_model,
        ["--served-model-name", MODEL, "--max-model-len", "512", "--max-num-seqs", "16", "--kv-cache-memory",
         "64MiB", "--seed", "3"],
        tmp_path_factory)


def pick_stop(full):
    """A 2-character stop string from the middle of `full`, so that text precedes and follows it."""
    assert len(full) >= 8, f"greedy output too short to pick a stop string from: {full!r}"
    for start in range(2, len(full) - 3):
        stop = full[start:start + 2]
        if stop.strip() and full.find(stop) >= 1:
            return stop, full.find(stop)
    pytest.fail(f"no usable stop string in {full!r}")


def completion_full(client, **kw):
    r = client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=GEN, temperature=0,
                                  extra_body={"ignore_eos": True}, **kw)
    return r.choices[0].text


def chat_full(client):
    r = client.chat.completions.create(model=MODEL, messages=MSGS, max_tokens=GEN, temperature=0,
                                       extra_body={"ignore_eos": True})
    return r.choices[0].message.content


@pytest.mark.parametrize("stream", [False, True])
def test_completions_stop_string_kept_vs_dropped(client, stream):
    full = completion_full(client)
    stop, at = pick_stop(full)
    got = {}
    for include in (False, True):
        kw = dict(model=MODEL, prompt=PROMPT, max_tokens=GEN, temperature=0, stop=[stop],
                  extra_body={"ignore_eos": True, "include_stop_str_in_output": include})
        if stream:
            chunks = list(client.completions.create(stream=True, **kw))
            text = "".join(c.choices[0].text for c in chunks)
            last = [c for c in chunks if c.choices[0].finish_reason]
            assert len(last) == 1
            finish, reason = last[0].choices[0].finish_reason, last[0].choices[0].model_extra["stop_reason"]
        else:
            c = client.completions.create(**kw).choices[0]
            text, finish, reason = c.text, c.finish_reason, c.model_extra["stop_reason"]
        assert finish == "stop" and reason == stop, (include, finish, reason)
        got[include] = text
    assert got[False] == full[:at], (full, stop)
    assert got[True] == full[:at + len(stop)], (full, stop)
    assert got[True] == got[False] + stop


@pytest.mark.parametrize("stream", [False, True])
def test_chat_stop_string_kept_vs_dropped(client, stream):
    full = chat_full(client)
    stop, at = pick_stop(full)
    for include in (False, True):
        kw = dict(model=MODEL, messages=MSGS, max_tokens=GEN, temperature=0, stop=stop,
                  extra_body={"ignore_eos": True, "include_stop_str_in_output": include})
        if stream:
            chunks = list(client.chat.completions.create(stream=True, **kw))
            text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
            finals = [c.choices[0] for c in chunks if c.choices and c.choices[0].finish_reason]
            assert len(finals) == 1
            finish, reason = finals[0].finish_reason, finals[0].model_extra["stop_reason"]
        else:
            ch = client.chat.completions.create(**kw).choices[0]
            text, finish, reason = ch.message.content, ch.finish_reason, ch.model_extra["stop_reason"]
        assert finish == "stop" and reason == stop
        assert text == (full[:at + len(stop)] if include else full[:at]), (include, full, stop, text)


def test_streaming_include_stop_raw_sse(server, client):
    """Raw SSE (no client library): the deltas concatenate to the text ending with the stop string, and
    the last event carries finish_reason/stop_reason. (That nothing is held back while a stop string
    may be forming is checked piece by piece in tests/cpp/engine/test_stop_strings.cpp.)"""
    full = completion_full(client)
    stop, at = pick_stop(full)
    with requests.post(server.url + "/v1/completions", stream=True, json={
            "model": MODEL, "prompt": PROMPT, "max_tokens": GEN, "temperature": 0, "stop": [stop],
            "ignore_eos": True, "include_stop_str_in_output": True, "stream": True}) as r:
        events = [json.loads(line[6:].decode("utf-8")) for line in r.iter_lines()
                  if line.startswith(b"data: ") and line != b"data: [DONE]"]
    texts = [e["choices"][0]["text"] for e in events]
    assert "".join(texts) == full[:at + len(stop)]
    assert events[-1]["choices"][0]["finish_reason"] == "stop"
    assert events[-1]["choices"][0]["stop_reason"] == stop


def test_include_stop_with_n2(client):
    full = completion_full(client)
    stop, at = pick_stop(full)
    r = client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=GEN, temperature=0, n=2, stop=[stop],
                                  extra_body={"ignore_eos": True, "include_stop_str_in_output": True})
    assert len(r.choices) == 2
    for c in r.choices:
        assert c.text == full[:at + len(stop)] and c.finish_reason == "stop" and c.model_extra["stop_reason"] == stop


def test_include_stop_without_a_match_changes_nothing(client):
    full = completion_full(client)
    r = client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=GEN, temperature=0, stop=["\x01never\x02"],
                                  extra_body={"ignore_eos": True, "include_stop_str_in_output": True})
    assert r.choices[0].text == full and r.choices[0].finish_reason == "length"


def test_echo_text_begins_with_prompt(client):
    full = completion_full(client)
    r = client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=GEN, temperature=0, echo=True,
                                  extra_body={"ignore_eos": True})
    assert r.choices[0].text == PROMPT + full
    assert r.usage.completion_tokens == GEN


def test_echo_streaming_first_chunk_carries_prompt(client):
    full = completion_full(client)
    chunks = list(client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=GEN, temperature=0, echo=True,
                                            stream=True, extra_body={"ignore_eos": True}))
    assert chunks[0].choices[0].text.startswith(PROMPT)
    assert "".join(c.choices[0].text for c in chunks) == PROMPT + full


def test_echo_token_id_prompt(server, client):
    ids = requests.post(server.url + "/tokenize", json={"prompt": PROMPT, "add_special_tokens": False}).json()["tokens"]
    decoded = requests.post(server.url + "/detokenize", json={"tokens": ids}).json()["prompt"]
    r = client.completions.create(model=MODEL, prompt=ids, max_tokens=4, temperature=0, echo=True,
                                  extra_body={"ignore_eos": True})
    plain = client.completions.create(model=MODEL, prompt=ids, max_tokens=4, temperature=0,
                                      extra_body={"ignore_eos": True})
    assert r.choices[0].text == decoded + plain.choices[0].text
    assert r.choices[0].text.startswith(PROMPT)


def test_echo_several_prompts_with_n2_and_include_stop(client):
    full = completion_full(client)
    stop, at = pick_stop(full)
    prompts = [PROMPT, "Other words"]
    r = client.completions.create(model=MODEL, prompt=prompts, max_tokens=GEN, temperature=0, n=2, echo=True,
                                  stop=[stop], extra_body={"ignore_eos": True, "include_stop_str_in_output": True})
    assert len(r.choices) == 4
    assert [c.index for c in r.choices] == [0, 1, 2, 3]
    for c in r.choices[:2]:
        assert c.text == PROMPT + full[:at + len(stop)]
    for c in r.choices[2:]:
        assert c.text.startswith("Other words")
    chunks = list(client.completions.create(model=MODEL, prompt=prompts, max_tokens=GEN, temperature=0, n=2,
                                            echo=True, stream=True, stop=[stop],
                                            extra_body={"ignore_eos": True, "include_stop_str_in_output": True}))
    per_choice = {}
    for c in chunks:
        per_choice.setdefault(c.choices[0].index, []).append(c.choices[0].text)
    assert sorted(per_choice) == [0, 1, 2, 3]
    for i, texts in per_choice.items():
        assert texts[0].startswith(prompts[i // 2])  # each choice's first chunk carries its prompt
        assert "".join(texts) == r.choices[i].text


@pytest.mark.parametrize("stream", [False, True])
def test_echo_with_max_tokens_0_returns_just_the_prompt(client, stream):
    kw = dict(model=MODEL, prompt=PROMPT, max_tokens=0, temperature=0, echo=True, extra_body={"ignore_eos": True})
    if stream:
        chunks = list(client.completions.create(stream=True, **kw))
        assert "".join(c.choices[0].text for c in chunks) == PROMPT
        assert chunks[0].choices[0].text == PROMPT
    else:
        r = client.completions.create(**kw)
        assert r.choices[0].text == PROMPT
        assert r.choices[0].finish_reason == "length"


def test_rejected_max_tokens_0_without_echo_is_an_openai_error(server):
    r = requests.post(server.url + "/v1/completions", json={"model": MODEL, "prompt": PROMPT, "max_tokens": 0})
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"}
    assert err["code"] == 400 and err["param"] == "max_tokens"


def prompt_pieces(server, ids):
    return [requests.post(server.url + "/detokenize", json={"tokens": [i]}).json()["prompt"] for i in ids]


@pytest.mark.parametrize("stream", [False, True])
def test_echo_with_logprobs_prompt_tokens_first(server, client, stream):
    """vLLM: the prompt's tokens come first in logprobs, the first with null logprob and top_logprobs."""
    ids = requests.post(server.url + "/tokenize", json={"prompt": PROMPT}).json()["tokens"]
    plain = client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=5, temperature=0, logprobs=2,
                                      extra_body={"ignore_eos": True}).choices[0]
    kw = dict(model=MODEL, prompt=PROMPT, max_tokens=5, temperature=0, logprobs=2, echo=True,
              extra_body={"ignore_eos": True})
    if stream:
        chunks = list(client.completions.create(stream=True, **kw))
        text = "".join(c.choices[0].text for c in chunks)
        lp = {"tokens": [], "token_logprobs": [], "top_logprobs": [], "text_offset": []}
        for c in chunks:
            if c.choices[0].logprobs:
                for k in lp:
                    lp[k] += getattr(c.choices[0].logprobs, k)
        first = chunks[0].choices[0].logprobs
        assert first.tokens[:len(ids)] == prompt_pieces(server, ids)  # the prompt's logprobs ride the first chunk
    else:
        c = client.completions.create(**kw).choices[0]
        text = c.text
        lp = {k: getattr(c.logprobs, k) for k in ("tokens", "token_logprobs", "top_logprobs", "text_offset")}
    assert text == PROMPT + plain.text
    n = len(ids)
    assert len(lp["tokens"]) == n + 5
    assert lp["tokens"][:n] == prompt_pieces(server, ids)
    assert lp["token_logprobs"][0] is None and lp["top_logprobs"][0] is None
    for v, top in zip(lp["token_logprobs"][1:n], lp["top_logprobs"][1:n]):
        assert isinstance(v, float) and v <= 0 and 1 <= len(top) <= 2
    # The completion part is exactly what logprobs without echo reports.
    assert lp["tokens"][n:] == plain.logprobs.tokens
    assert lp["token_logprobs"][n:] == pytest.approx(plain.logprobs.token_logprobs, abs=1e-4)
    # Offsets run over the prompt pieces, then the completion.
    assert lp["text_offset"] == sorted(lp["text_offset"]) and lp["text_offset"][0] == 0
    assert lp["text_offset"][n] == sum(len(p.encode()) for p in lp["tokens"][:n])


def test_echo_logprobs_max_tokens_0_only_prompt(server, client):
    ids = requests.post(server.url + "/tokenize", json={"prompt": PROMPT}).json()["tokens"]
    r = client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=0, logprobs=1, echo=True,
                                  extra_body={"ignore_eos": True})
    assert r.choices[0].text == PROMPT
    assert len(r.choices[0].logprobs.tokens) == len(ids) and r.choices[0].logprobs.token_logprobs[0] is None


def test_chat_echo_is_rejected(server):
    r = requests.post(server.url + "/v1/chat/completions", json={"model": MODEL, "messages": MSGS, "echo": True})
    assert r.status_code == 501
    assert r.json()["error"]["param"] == "echo"
