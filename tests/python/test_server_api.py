"""The OpenAI surface of `striker serve` on a random-weight tiny checkpoint, through the
official `openai` client (as vLLM's tests do) and raw HTTP where the client hides details."""
import json

import openai
import pytest
import requests

from server_fixture import StrikerServer, client, module_server, tiny_model  # noqa: F401  (fixtures)

MODEL = "tiny"
MSGS = [{"role": "user", "content": "Say something."}]


@pytest.fixture(scope="module")
def server(striker_bin, tiny_model, tmp_path_factory):
    yield from module_server(
        striker_bin, tiny_model,
        ["--served-model-name", MODEL, "--max-model-len", "512", "--max-num-seqs", "16", "--kv-cache-memory",
         "64MiB", "--seed", "3"],
        tmp_path_factory)


def sse_events(resp):
    # Split the raw bytes on newlines, then decode UTF-8: decoding first (requests guesses
    # ISO-8859-1 for text/event-stream) can turn a token's byte 0x85 into a "line break".
    out = []
    for raw in resp.iter_lines():
        line = raw.decode("utf-8")
        if line.startswith("data: "):
            out.append(line[6:])
    return out


def test_models_health_version(server, client):
    models = client.models.list()
    assert [m.id for m in models.data] == [MODEL]
    assert models.data[0].max_model_len == 512
    assert requests.get(server.url + "/health").status_code == 200
    assert requests.get(server.url + "/ping").status_code == 200 and requests.post(server.url + "/ping").status_code == 200
    assert "version" in requests.get(server.url + "/version").json()


def test_chat_non_streaming_usage_and_length(server, client):
    r = client.chat.completions.create(model=MODEL, messages=MSGS, max_tokens=5, temperature=0, extra_body={"ignore_eos": True})
    assert r.object == "chat.completion"
    assert r.id.startswith("chatcmpl-")
    assert r.choices[0].finish_reason == "length"
    assert r.choices[0].message.role == "assistant"
    assert r.usage.completion_tokens == 5
    counted = requests.post(server.url + "/tokenize", json={"messages": MSGS}).json()["count"]
    assert r.usage.prompt_tokens == counted
    assert r.usage.total_tokens == counted + 5


def test_max_completion_tokens_and_max_tokens(client):
    r = client.chat.completions.create(model=MODEL, messages=MSGS, max_completion_tokens=3, temperature=0,
                                       extra_body={"ignore_eos": True})
    assert r.usage.completion_tokens == 3 and r.choices[0].finish_reason == "length"


def test_chat_streaming_shape_and_include_usage(client):
    stream = client.chat.completions.create(model=MODEL, messages=MSGS, max_tokens=6, temperature=0, stream=True,
                                            stream_options={"include_usage": True}, extra_body={"ignore_eos": True})
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert all(c.choices[0].delta.role is None for c in chunks[1:] if c.choices)
    assert len({c.id for c in chunks}) == 1 and len({c.created for c in chunks}) == 1
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == ["length"]
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 6
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    plain = client.chat.completions.create(model=MODEL, messages=MSGS, max_tokens=6, temperature=0,
                                           extra_body={"ignore_eos": True})
    assert text == plain.choices[0].message.content


def test_sse_framing_and_done(server):
    with requests.post(server.url + "/v1/chat/completions", stream=True, json={
            "model": MODEL, "messages": MSGS, "max_tokens": 3, "stream": True, "ignore_eos": True}) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        events = sse_events(r)
    assert events[-1] == "[DONE]"
    first = json.loads(events[0])
    assert first["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert all("usage" not in json.loads(e) for e in events[:-1])


def test_completions_non_streaming_and_streaming(client):
    r = client.completions.create(model=MODEL, prompt="The sky is", max_tokens=4, temperature=0,
                                  extra_body={"ignore_eos": True})
    assert r.object == "text_completion" and r.choices[0].finish_reason == "length"
    assert r.usage.completion_tokens == 4
    chunks = list(client.completions.create(model=MODEL, prompt="The sky is", max_tokens=4, temperature=0, stream=True,
                                            extra_body={"ignore_eos": True}))
    assert "".join(c.choices[0].text for c in chunks) == r.choices[0].text
    assert sum(1 for c in chunks if c.choices[0].finish_reason) == 1


def test_n3_choices_streaming_and_not(client):
    r = client.chat.completions.create(model=MODEL, messages=MSGS, n=3, max_tokens=4, seed=11, temperature=1.0,
                                       extra_body={"ignore_eos": True})
    assert sorted(c.index for c in r.choices) == [0, 1, 2]
    assert r.usage.completion_tokens == 12
    chunks = list(client.chat.completions.create(model=MODEL, messages=MSGS, n=3, max_tokens=4, seed=11,
                                                 temperature=1.0, stream=True, extra_body={"ignore_eos": True}))
    texts = {i: "" for i in range(3)}
    finishes = {i: 0 for i in range(3)}
    roles = {i: 0 for i in range(3)}
    for c in chunks:
        ch = c.choices[0]
        texts[ch.index] += ch.delta.content or ""
        finishes[ch.index] += 1 if ch.finish_reason else 0
        roles[ch.index] += 1 if ch.delta.role else 0
    assert finishes == {0: 1, 1: 1, 2: 1} and roles == {0: 1, 1: 1, 2: 1}
    assert texts == {c.index: c.message.content for c in r.choices}


def test_seed_is_reproducible(client):
    def run():
        return client.completions.create(model=MODEL, prompt="Once upon a time", max_tokens=8, seed=1234,
                                         temperature=1.0, extra_body={"ignore_eos": True}).choices[0].text
    a, b = run(), run()
    assert a == b
    others = {client.completions.create(model=MODEL, prompt="Once upon a time", max_tokens=8, seed=s, temperature=1.0,
                                        extra_body={"ignore_eos": True}).choices[0].text for s in (1, 2, 3)}
    assert len(others | {a}) > 1  # different seeds do not all collapse to one output


def test_chat_logprobs(client):
    r = client.chat.completions.create(model=MODEL, messages=MSGS, max_tokens=4, temperature=0, logprobs=True,
                                       top_logprobs=3, extra_body={"ignore_eos": True})
    content = r.choices[0].logprobs.content
    assert len(content) == 4
    for entry in content:
        assert len(entry.top_logprobs) == 3
        assert entry.logprob <= 0
        assert entry.bytes == list(entry.token.encode("utf-8"))
        # greedy: the sampled token is the most likely one
        assert entry.logprob == pytest.approx(entry.top_logprobs[0].logprob, abs=1e-5)
    assert "".join(e.token for e in content) == r.choices[0].message.content


def test_completion_logprobs(client):
    r = client.completions.create(model=MODEL, prompt="Hello", max_tokens=3, temperature=0, logprobs=2,
                                  extra_body={"ignore_eos": True})
    lp = r.choices[0].logprobs
    assert len(lp.tokens) == 3 and len(lp.token_logprobs) == 3 and len(lp.top_logprobs) == 3
    assert lp.text_offset[0] == 0
    assert "".join(lp.tokens) == r.choices[0].text


def test_stop_string_cuts_output(client):
    full = client.completions.create(model=MODEL, prompt="A B C", max_tokens=12, temperature=0,
                                     extra_body={"ignore_eos": True}).choices[0].text
    assert len(full) >= 4
    stop = full[len(full) // 2:len(full) // 2 + 2]
    assert stop.strip(), f"pick a visible stop string from {full!r}"
    r = client.completions.create(model=MODEL, prompt="A B C", max_tokens=12, temperature=0, stop=[stop],
                                  extra_body={"ignore_eos": True})
    choice = r.choices[0]
    assert choice.finish_reason == "stop"
    assert choice.text == full[:full.index(stop)]
    assert stop not in choice.text
    assert choice.model_extra["stop_reason"] == stop


def test_unknown_model_is_404(client):
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="nope", messages=MSGS, max_tokens=2)


def test_too_long_prompt_names_both_numbers(client):
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model=MODEL, prompt=[1] * 500, max_tokens=100)
    msg = str(e.value)
    assert "maximum context length is 512 tokens" in msg
    assert "100 output tokens" in msg and "500 input tokens" in msg


def test_api_key(striker_bin, tiny_model, tmp_path):
    s = StrikerServer(striker_bin, tiny_model, ["--max-model-len", "256", "--kv-cache-memory", "16MiB",
                                                "--max-num-seqs", "4"],
                      env={"VLLM_API_KEY": "k3y"}, log_dir=tmp_path)
    try:
        assert requests.get(s.url + "/health").status_code == 200
        assert requests.get(s.url + "/ping").status_code == 200
        assert requests.get(s.url + "/metrics").status_code == 200
        for path in ("/v1/models", "/version"):
            r = requests.get(s.url + path)
            assert r.status_code == 401 and r.json()["error"]["type"] == "authentication_error"
        with pytest.raises(openai.AuthenticationError):
            s.client(api_key="wrong").models.list()
        assert s.client(api_key="k3y").models.list().data
        r = s.client(api_key="k3y").completions.create(model=str(tiny_model), prompt="x", max_tokens=1)
        assert r.usage.completion_tokens == 1
    finally:
        s.stop()


def test_prompt_logprobs(server, client):
    r = client.completions.create(model=MODEL, prompt="one two three", max_tokens=1, temperature=0,
                                  extra_body={"prompt_logprobs": 2, "ignore_eos": True})
    plp = r.choices[0].model_extra["prompt_logprobs"]
    assert plp[0] is None and len(plp) == r.usage.prompt_tokens
    assert all(isinstance(p, dict) and 1 <= len(p) <= 3 for p in plp[1:])
    # vLLM's entries: logprob, rank (the best tokens 1 and 2; the prompt token its own, >= 1), decoded_token
    prompt_ids = requests.post(server.url + "/tokenize", json={"model": MODEL, "prompt": "one two three"}).json()["tokens"]
    assert len(prompt_ids) == len(plp)
    for tok, p in zip(prompt_ids[1:], plp[1:]):
        assert p[str(tok)]["rank"] >= 1 and set(p[str(tok)]) == {"logprob", "rank", "decoded_token"}
        top = max(e["logprob"] for e in p.values())
        assert any(e["rank"] == 1 and e["logprob"] == top for e in p.values())
    with pytest.raises(openai.BadRequestError):
        client.completions.create(model=MODEL, prompt="x", max_tokens=1, stream=True, extra_body={"prompt_logprobs": 1})


def test_concurrent_prompt_logprobs(server, client):
    # Prompt logprobs return a logits row per prompt token; several such requests in one step once asked
    # the CUDA backend for more rows than it holds (3 x 256 > 512) and failed every request of the step.
    import concurrent.futures
    prompt = "one two three four " * 70

    def ask(i):
        r = client.completions.create(model=MODEL, prompt=prompt + str(i), max_tokens=1, temperature=0,
                                      extra_body={"prompt_logprobs": 1})
        return r.usage.prompt_tokens, r.choices[0].model_extra["prompt_logprobs"]

    with concurrent.futures.ThreadPoolExecutor(4) as ex:
        results = list(ex.map(ask, range(4)))
    for n, plp in results:
        assert n > 256 and len(plp) == n and plp[0] is None and all(p for p in plp[1:])


def test_max_logprobs_flag(striker_bin, tiny_model, tmp_path):
    # vLLM's --max-logprobs (default 20) bounds logprobs, top_logprobs and prompt_logprobs. Asking 33 is
    # more than a CUDA backend computes on the device (32), so those rows come back to the host: the
    # same prompt's logprobs at 5 (device) and 33 (host) must agree on the first 5 of every position.
    s = StrikerServer(striker_bin, tiny_model, ["--max-model-len", "256", "--kv-cache-memory", "16MiB",
                                                "--max-num-seqs", "4", "--max-logprobs", "40"], log_dir=tmp_path)
    try:
        c = s.client()
        prompt = "the quick brown fox jumps over the lazy dog " * 3
        got = {}
        for n in (5, 33):
            r = c.completions.create(model=str(tiny_model), prompt=prompt, max_tokens=2, temperature=0, logprobs=n,
                                     extra_body={"prompt_logprobs": n, "ignore_eos": True})
            got[n] = (r.choices[0].model_extra["prompt_logprobs"], r.choices[0].logprobs.top_logprobs)
            assert all(len(t) >= n for t in got[n][1])
        for small, big in zip(got[5][0][1:], got[33][0][1:]):
            assert len(big) >= 33
            for tok, v in small.items():
                assert big[tok]["logprob"] == pytest.approx(v["logprob"], abs=1e-5)
        for small, big in zip(got[5][1], got[33][1]):
            for tok, lp in small.items():
                assert big[tok] == pytest.approx(lp, abs=1e-5)
        for body in ({"logprobs": 41}, {"prompt_logprobs": 41}):
            r = requests.post(s.url + "/v1/completions", json={"model": str(tiny_model), "prompt": "x", "max_tokens": 1,
                                                               **body})
            assert r.status_code == 400 and r.json()["error"]["param"] in ("logprobs", "prompt_logprobs")
    finally:
        s.stop()


def test_metrics_count_requests_and_tokens(server, client):
    before = server.metrics()
    for _ in range(3):
        client.completions.create(model=MODEL, prompt="count me", max_tokens=4, temperature=0,
                                  extra_body={"ignore_eos": True})
    after = server.metrics()
    key = 'vllm:request_success_total{engine="0",model_name="tiny",finished_reason="length"}'
    assert after[key] - before.get(key, 0) == 3
    assert after["vllm:generation_tokens_total"] - before["vllm:generation_tokens_total"] == 12
    prompt = requests.post(server.url + "/tokenize", json={"prompt": "count me"}).json()["count"]
    assert after["vllm:prompt_tokens_total"] - before["vllm:prompt_tokens_total"] == 3 * prompt
    ttft = 'vllm:time_to_first_token_seconds_count{engine="0",model_name="tiny"}'
    assert after[ttft] - before[ttft] == 3
    itl = 'vllm:inter_token_latency_seconds_count{engine="0",model_name="tiny"}'
    assert after[itl] - before[itl] == 3 * 3
    for name in ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
                 "vllm:num_preemptions_total", "vllm:e2e_request_latency_seconds_count", "vllm:cache_config_info"):
        assert name in after, name
    # vLLM's request phases: queue -> prefill (to the first token) -> decode (to the last); inference = both.
    label = '{engine="0",model_name="tiny"}'
    delta = {p: after[f"vllm:request_{p}_time_seconds_sum{label}"] - before.get(f"vllm:request_{p}_time_seconds_sum{label}", 0)
             for p in ("queue", "prefill", "decode", "inference")}
    for p in delta:
        count = f"vllm:request_{p}_time_seconds_count{label}"
        assert after[count] - before.get(count, 0) == 3, p
        assert delta[p] >= 0, (p, delta)
    assert delta["prefill"] > 0 and delta["decode"] > 0, delta
    assert abs(delta["prefill"] + delta["decode"] - delta["inference"]) < 1e-6, delta
    e2e = f"vllm:e2e_request_latency_seconds_sum{label}"
    assert after[e2e] - before[e2e] >= delta["queue"] + delta["inference"] - 1e-6, delta


def test_continuous_usage_stats(client):
    chunks = list(client.chat.completions.create(
        model=MODEL, messages=MSGS, max_tokens=4, temperature=0, stream=True, extra_body={"ignore_eos": True},
        stream_options={"include_usage": True, "continuous_usage_stats": True}))
    usages = [c.usage.completion_tokens for c in chunks]
    assert usages == sorted(usages) and usages[-1] == 4
    assert all(c.usage.prompt_tokens == chunks[0].usage.prompt_tokens for c in chunks)


def test_logit_bias_forces_and_stop_token_ids_stop(server, client):
    tok = requests.post(server.url + "/tokenize", json={"prompt": " banana", "add_special_tokens": False}).json()["tokens"][0]
    text = requests.post(server.url + "/detokenize", json={"tokens": [tok]}).json()["prompt"]
    r = client.completions.create(model=MODEL, prompt="x", max_tokens=3, temperature=1.0, seed=5,
                                  logit_bias={str(tok): 100}, extra_body={"ignore_eos": True})
    assert r.choices[0].text == text * 3
    r = client.completions.create(model=MODEL, prompt="x", max_tokens=3, logit_bias={str(tok): 100},
                                  extra_body={"stop_token_ids": [tok]})
    assert r.choices[0].finish_reason == "stop"
    assert r.choices[0].model_extra["stop_reason"] == tok
    assert r.choices[0].text == ""


def test_truncate_prompt_tokens_keeps_the_prompts_last_tokens(server, client):
    # Completions: the last k tokens, by token list and by text; greedy output equal to the same
    # request made with those k ids as the prompt.
    ids = requests.post(server.url + "/tokenize", json={"prompt": "one two three four five six seven eight"}).json()["tokens"]
    assert len(ids) > 4
    cut = client.completions.create(model=MODEL, prompt="one two three four five six seven eight", max_tokens=6,
                                    temperature=0, extra_body={"truncate_prompt_tokens": 4, "ignore_eos": True})
    assert cut.usage.prompt_tokens == 4
    same = client.completions.create(model=MODEL, prompt=ids[-4:], max_tokens=6, temperature=0,
                                     extra_body={"ignore_eos": True})
    assert cut.choices[0].text == same.choices[0].text
    by_ids = client.completions.create(model=MODEL, prompt=ids, max_tokens=1, extra_body={"truncate_prompt_tokens": 2})
    assert by_ids.usage.prompt_tokens == 2
    # Longer than the prompt, or -1 (max_model_len): nothing cut.
    for k in (len(ids) + 5, -1):
        full = client.completions.create(model=MODEL, prompt=ids, max_tokens=1, extra_body={"truncate_prompt_tokens": k})
        assert full.usage.prompt_tokens == len(ids)
    # Several prompts: each cut.
    multi = client.completions.create(model=MODEL, prompt=[ids, ids[:3]], max_tokens=1,
                                      extra_body={"truncate_prompt_tokens": 3})
    assert multi.usage.prompt_tokens == 6
    # Chat: the rendered prompt's last k tokens.
    chat = client.chat.completions.create(model=MODEL, messages=MSGS, max_tokens=1,
                                          extra_body={"truncate_prompt_tokens": 5})
    assert chat.usage.prompt_tokens == 5


@pytest.mark.parametrize("value, needle", [
    (513, "truncate_prompt_tokens value is greater than max_model_len"),
    (0, "truncate_prompt_tokens"),
    (-2, "truncate_prompt_tokens"),
    ("3", "truncate_prompt_tokens"),
])
def test_truncate_prompt_tokens_bad_values_are_400s(server, value, needle):
    for path, body in (("/v1/completions", {"prompt": "hello there"}), ("/v1/chat/completions", {"messages": MSGS})):
        r = requests.post(server.url + path, json={"model": MODEL, "max_tokens": 1, "truncate_prompt_tokens": value, **body})
        assert r.status_code == 400, r.text
        err = r.json()["error"]
        assert needle in err["message"] and err["param"] == "truncate_prompt_tokens" and err["type"] == "BadRequestError"


def test_return_token_ids_completions(server, client):
    prompt = "one two three"
    ids = requests.post(server.url + "/tokenize", json={"prompt": prompt}).json()["tokens"]
    body = {"model": MODEL, "prompt": prompt, "max_tokens": 5, "temperature": 0, "ignore_eos": True}
    plain = requests.post(server.url + "/v1/completions", json=body).json()["choices"][0]
    assert plain["token_ids"] is None and plain["prompt_token_ids"] is None
    out = requests.post(server.url + "/v1/completions", json={**body, "return_token_ids": True}).json()
    choice = out["choices"][0]
    assert choice["prompt_token_ids"] == ids
    assert len(choice["token_ids"]) == 5 == out["usage"]["completion_tokens"]
    assert requests.post(server.url + "/detokenize", json={"tokens": choice["token_ids"]}).json()["prompt"] == choice["text"]
    # Streaming: the prompt's ids with the first chunk, then each chunk's new ids.
    with requests.post(server.url + "/v1/completions", json={**body, "return_token_ids": True, "stream": True},
                       stream=True) as r:
        chunks = [json.loads(e) for e in sse_events(r) if e != "[DONE]"]
    firsts = [c["choices"][0] for c in chunks if "prompt_token_ids" in c["choices"][0]]
    assert len(firsts) == 1 and firsts[0]["prompt_token_ids"] == ids and chunks[0]["choices"][0] is firsts[0]
    assert [t for c in chunks for t in c["choices"][0]["token_ids"]] == choice["token_ids"]
    bad = requests.post(server.url + "/v1/completions", json={**body, "return_token_ids": "yes"})
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "return_token_ids"


def test_return_token_ids_chat(server, client):
    ids = requests.post(server.url + "/tokenize", json={"messages": MSGS}).json()["tokens"]
    body = {"model": MODEL, "messages": MSGS, "max_tokens": 6, "temperature": 0, "ignore_eos": True}
    plain = requests.post(server.url + "/v1/chat/completions", json=body).json()
    assert plain["prompt_token_ids"] is None and plain["choices"][0]["token_ids"] is None
    out = requests.post(server.url + "/v1/chat/completions", json={**body, "return_token_ids": True}).json()
    assert out["prompt_token_ids"] == ids
    got = out["choices"][0]["token_ids"]
    assert len(got) == 6 == out["usage"]["completion_tokens"]
    with requests.post(server.url + "/v1/chat/completions", json={**body, "return_token_ids": True, "stream": True},
                       stream=True) as r:
        chunks = [json.loads(e) for e in sse_events(r) if e != "[DONE]"]
    assert chunks[0]["prompt_token_ids"] == ids
    assert all("prompt_token_ids" not in c for c in chunks[1:])
    assert [t for c in chunks[1:] for t in c["choices"][0].get("token_ids") or []] == got


def test_return_tokens_as_token_ids_names_logprob_tokens_by_id(server, client):
    body = {"model": MODEL, "max_tokens": 3, "temperature": 0, "ignore_eos": True, "return_token_ids": True}
    chat = requests.post(server.url + "/v1/chat/completions",
                         json={**body, "messages": MSGS, "logprobs": True, "top_logprobs": 2,
                               "return_tokens_as_token_ids": True}).json()["choices"][0]
    entries = chat["logprobs"]["content"]
    assert [e["token"] for e in entries] == [f"token_id:{t}" for t in chat["token_ids"]]
    assert all(top["token"].startswith("token_id:") for e in entries for top in e["top_logprobs"])
    assert entries[0]["bytes"] == list(entries[0]["token"].encode())
    comp = requests.post(server.url + "/v1/completions",
                         json={**body, "prompt": "one two", "logprobs": 2, "echo": True,
                               "return_tokens_as_token_ids": True}).json()["choices"][0]
    ids = comp["prompt_token_ids"] + comp["token_ids"]
    assert comp["logprobs"]["tokens"] == [f"token_id:{t}" for t in ids]
    assert all(k.startswith("token_id:") for top in comp["logprobs"]["top_logprobs"] if top for k in top)
    # Off by default: the tokens' text.
    plain = requests.post(server.url + "/v1/completions", json={**body, "prompt": "one two", "logprobs": 1}).json()
    assert not any(t.startswith("token_id:") for t in plain["choices"][0]["logprobs"]["tokens"])
