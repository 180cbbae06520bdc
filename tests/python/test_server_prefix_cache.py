"""Automatic prefix caching as a client sees it: two `striker serve` processes on the tiny model, one
with the cache (on by default, in a KV pool small enough to evict) and one with
--no-enable-prefix-caching, must answer every chat and completion identically (text, logprobs,
prompt logprobs); only usage.prompt_tokens_details.cached_tokens and the prefix-cache metrics differ.
Also POST /reset_prefix_cache, cache_salt, and a smoke run of bench/multi_turn_bench.py."""
import concurrent.futures
import os
import json
import pathlib
import subprocess
import sys
import time

import openai
import pytest
import requests

from server_fixture import StrikerServer, tiny_model  # noqa: F401  (fixtures)

MODEL = "tiny"
ROOT = pathlib.Path(__file__).resolve().parents[2]
COMMON = ["--served-model-name", MODEL, "--max-model-len", "512", "--max-num-seqs", "8",
          "--max-num-batched-tokens", "64"]


@pytest.fixture(scope="module")
def servers(striker_bin, tiny_model, tmp_path_factory):  # noqa: F811
    logs = tmp_path_factory.mktemp("prefix-cache-logs")
    # 1 MiB: 256 blocks of 16 tokens in the full pool, a few long conversations' worth.
    cached = StrikerServer(striker_bin, tiny_model, COMMON + ["--kv-cache-memory", "1MiB"], log_dir=logs)
    plain = StrikerServer(striker_bin, tiny_model, COMMON + ["--no-enable-prefix-caching"], log_dir=logs)
    yield cached, plain
    cached.stop()
    plain.stop()


def chat(server, messages, **kw):
    r = server.client().chat.completions.create(model=MODEL, messages=messages, max_tokens=12, temperature=0,
                                                logprobs=True, top_logprobs=3, extra_body={"ignore_eos": True}, **kw)
    lp = [(t.token, t.logprob, [(a.token, a.logprob) for a in t.top_logprobs]) for t in r.choices[0].logprobs.content]
    return r.choices[0].message.content, lp, r.usage


def cached_tokens(usage):
    return usage.prompt_tokens_details.cached_tokens


def test_conversation_turns_match_and_report_cached_tokens(servers):
    cached, plain = servers
    history = [{"role": "system", "content": "You are a terse assistant. " * 20},
               {"role": "user", "content": "Tell me about the sea and the sky."}]
    outs = {}
    for turn in range(4):
        for name, server in (("cached", cached), ("plain", plain)):
            outs[name] = chat(server, history)
        assert outs["cached"][:2] == outs["plain"][:2], f"turn {turn}"
        assert cached_tokens(outs["plain"][2]) == 0
        usage = outs["cached"][2]
        if turn > 0:
            # The history up to the previous answer is cached, in whole blocks of 16.
            assert cached_tokens(usage) > 0 and cached_tokens(usage) % 16 == 0, usage
            assert cached_tokens(usage) < usage.prompt_tokens
        history += [{"role": "assistant", "content": outs["plain"][0]},
                    {"role": "user", "content": f"And what about turn {turn}?"}]


def test_streamed_usage_carries_cached_tokens(servers):
    cached, _ = servers
    msgs = [{"role": "user", "content": "stream me a story about a lighthouse keeper " * 6}]
    for attempt in range(2):
        chunks = list(cached.client().chat.completions.create(
            model=MODEL, messages=msgs, max_tokens=4, temperature=0, stream=True,
            stream_options={"include_usage": True}, extra_body={"ignore_eos": True}))
        usage = chunks[-1].usage
        assert usage.prompt_tokens_details is not None
        if attempt == 1:
            assert cached_tokens(usage) == (usage.prompt_tokens - 1) // 16 * 16


def test_completions_prompt_logprobs_and_sampling_match(servers):
    cached, plain = servers
    prompt = "The quick brown fox jumps over the lazy dog. " * 8
    got = {}
    for name, server in (("cached", cached), ("plain", plain)):
        c = server.client()
        c.completions.create(model=MODEL, prompt=prompt, max_tokens=2, temperature=0)  # fills the cache
        r = c.completions.create(model=MODEL, prompt=prompt + " Again", max_tokens=10, temperature=0.9, seed=4,
                                 n=3, logprobs=2, extra_body={"prompt_logprobs": 2, "ignore_eos": True})
        got[name] = ([(ch.text, ch.logprobs.token_logprobs, ch.logprobs.top_logprobs) for ch in r.choices],
                     r.choices[0].model_extra["prompt_logprobs"], r.usage)
    assert got["cached"][:2] == got["plain"][:2]
    # Prompt logprobs need every prompt position computed: such a request reads no cache.
    assert cached_tokens(got["cached"][2]) == 0


def test_many_clients_through_a_small_pool_match(servers):
    # 8 concurrent clients: how many tokens share a step differs between the two servers, and the
    # CUDA backend picks its kernels by step size (GEMV up to 8 tokens, grouped tensor-core GEMMs
    # above), so bit equality under concurrency is a property of the CPU backend only (on the H200
    # this compared unequal in round 0; the sequential tests above compare the GPU path bit for bit).
    if os.environ.get("STRIKER_SERVE_DEVICE", "cpu") == "cuda":
        pytest.skip("bit equality across different batch compositions holds on the CPU backend only")
    cached, plain = servers
    system = "Shared instructions for every client. " * 12

    def ask(server, i, rnd):
        msgs = [{"role": "system", "content": system},
                {"role": "user", "content": f"client {i % 5} asks question {rnd} " * (1 + i % 4)}]
        r = server.client().chat.completions.create(model=MODEL, messages=msgs, max_tokens=8, temperature=1.0,
                                                    seed=100 * rnd + i, extra_body={"ignore_eos": True})
        return r.choices[0].message.content, cached_tokens(r.usage)

    before = cached.metrics()
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        for rnd in range(3):
            a = list(pool.map(lambda i: ask(cached, i, rnd), range(16)))
            b = list(pool.map(lambda i: ask(plain, i, rnd), range(16)))
            assert [x[0] for x in a] == [x[0] for x in b], f"round {rnd}"
    after = cached.metrics()
    hits = after["vllm:prefix_cache_hits_total"] - before["vllm:prefix_cache_hits_total"]
    queries = after["vllm:prefix_cache_queries_total"] - before["vllm:prefix_cache_queries_total"]
    assert 0 < hits < queries
    assert plain.metrics()["vllm:prefix_cache_queries_total"] == 0


def test_metrics_count_queried_and_hit_tokens(servers):
    cached, _ = servers
    prompt = "metrics prompt with a few words that fill more than one block of sixteen tokens " * 3
    n = requests.post(cached.url + "/tokenize", json={"prompt": prompt}).json()["count"]
    c = cached.client()
    q = "vllm:prefix_cache_queries_total"

    def settled(since):  # the counters are sampled from the engine's stats: wait until a request shows
        deadline = time.time() + 10
        while True:
            m = cached.metrics()
            if m[q] - since >= n or time.time() > deadline:
                return m
            time.sleep(0.05)

    start = cached.metrics()[q]
    c.completions.create(model=MODEL, prompt=prompt, max_tokens=1)
    before = settled(start)
    c.completions.create(model=MODEL, prompt=prompt, max_tokens=1)
    after = settled(before[q])
    assert after[q] - before[q] == n
    assert after["vllm:prefix_cache_hits_total"] - before["vllm:prefix_cache_hits_total"] == (n - 1) // 16 * 16
    info = [k for k in after if k.startswith("vllm:cache_config_info{")]
    assert info and 'enable_prefix_caching="True"' in info[0] and 'prefix_caching_hash_algo="sha256"' in info[0]
    assert 0 <= after["vllm:kv_cache_usage_perc"] <= 1


def test_block_size_flag_sets_the_cache_granularity(striker_bin, tiny_model, tmp_path):  # noqa: F811
    """--block-size 32 (vLLM's flag): prefix hits come in whole blocks of 32 tokens, /metrics reports the
    size, and the greedy answer from the cached blocks equals the first, uncached one."""
    prompt = "a prompt for the block size flag, long enough to fill more than two blocks of thirty-two tokens " * 4
    s32 = StrikerServer(striker_bin, tiny_model, COMMON + ["--kv-cache-memory", "1MiB", "--block-size", "32"],
                        log_dir=tmp_path)
    try:
        n = requests.post(s32.url + "/tokenize", json={"prompt": prompt}).json()["count"]
        assert (n - 1) // 32 * 32 != (n - 1) // 16 * 16  # blocks of 16 would cache another count
        c = s32.client()
        first = c.completions.create(model=MODEL, prompt=prompt, max_tokens=8, temperature=0)
        second = c.completions.create(model=MODEL, prompt=prompt, max_tokens=8, temperature=0)
        assert cached_tokens(first.usage) == 0
        assert cached_tokens(second.usage) == (n - 1) // 32 * 32
        assert second.choices[0].text == first.choices[0].text
        info = [k for k in s32.metrics() if k.startswith("vllm:cache_config_info{")]
        assert info and 'block_size="32"' in info[0], info
    finally:
        s32.stop()


def test_reset_prefix_cache(servers):
    cached, plain = servers
    prompt = "reset me please, this prompt is long enough for two blocks of tokens " * 3
    c = cached.client()
    c.completions.create(model=MODEL, prompt=prompt, max_tokens=1)
    assert cached_tokens(c.completions.create(model=MODEL, prompt=prompt, max_tokens=1).usage) > 0
    r = requests.post(cached.url + "/reset_prefix_cache")
    assert r.status_code == 200 and r.json() == {"success": True}
    assert cached_tokens(c.completions.create(model=MODEL, prompt=prompt, max_tokens=1).usage) == 0
    assert requests.post(plain.url + "/reset_prefix_cache").json() == {"success": True}


def test_cache_salt_isolates_and_is_validated(servers):
    cached, _ = servers
    c = cached.client()
    prompt = "a salted prompt shared by two tenants, long enough to fill whole blocks " * 3
    c.completions.create(model=MODEL, prompt=prompt, max_tokens=1, extra_body={"cache_salt": "tenant-a"})
    same = c.completions.create(model=MODEL, prompt=prompt, max_tokens=1, extra_body={"cache_salt": "tenant-a"})
    other = c.completions.create(model=MODEL, prompt=prompt, max_tokens=1, extra_body={"cache_salt": "tenant-b"})
    assert cached_tokens(same.usage) > 0
    assert cached_tokens(other.usage) == 0
    with pytest.raises(openai.BadRequestError) as e:
        c.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "x"}], extra_body={"cache_salt": ""})
    assert "cache_salt" in str(e.value)


def test_multi_turn_bench_smoke(servers, tmp_path):
    cached, _ = servers
    out = tmp_path / "multi_turn.json"
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "multi_turn_bench.py"), "--base-url", cached.url,
                        "--first-turn-tokens", "300", "--turn-tokens", "20", "--output-len", "6", "--num-turns", "3",
                        "--save-result", str(out)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Turn-2 / turn-1 TTFT ratio:" in r.stdout
    j = json.loads(out.read_text())
    turns = j["turns"]
    assert [t["turn"] for t in turns] == [1, 2, 3] and not any(t["error"] for t in turns)
    assert turns[0]["cached_tokens"] == 0 and 250 <= turns[0]["prompt_tokens"] <= 400
    assert turns[1]["cached_tokens"] >= turns[0]["prompt_tokens"] - 32
    assert j["ttft_ratio_turn2_turn1"] > 0
    # The server's own phases of each turn (vLLM's phase histograms, read from /metrics around it).
    for t in turns:
        assert 0 <= t["server_queue_ms"] and 0 < t["server_prefill_ms"] <= t["ttft_ms"], t
    assert "(server: queue" in r.stdout
