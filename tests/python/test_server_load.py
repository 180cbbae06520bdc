"""Concurrency on the real server: many streaming clients, clients that vanish mid-stream, and a
KV budget so small that requests must queue and be preempted - everything must complete and
the engine must return to idle (vLLM's test_abort_metrics_reset / test_request_cancellation)."""
import concurrent.futures as cf
import json
import socket
import time

import pytest
import requests

from server_fixture import StrikerServer, tiny_model, vanish_mid_stream  # noqa: F401  (fixtures)

MODEL = "tiny"


def wait_idle(server, timeout=60):
    deadline = time.time() + timeout
    m = {}
    while time.time() < deadline:
        m = server.metrics()
        if (m["vllm:num_requests_running"] == 0 and m["vllm:num_requests_waiting"] == 0
                and m["vllm:kv_cache_usage_perc"] == 0):
            return m
        time.sleep(0.2)
    raise AssertionError(f"engine not idle after {timeout} s: running={m.get('vllm:num_requests_running')} "
                         f"waiting={m.get('vllm:num_requests_waiting')} kv={m.get('vllm:kv_cache_usage_perc')}")


def stream_chat(url, i, max_tokens):
    body = {"model": MODEL, "messages": [{"role": "user", "content": f"client {i}"}], "max_tokens": max_tokens,
            "stream": True, "ignore_eos": True, "stream_options": {"include_usage": True}}
    with requests.post(url + "/v1/chat/completions", json=body, stream=True, timeout=300) as r:
        assert r.status_code == 200, r.text
        lines = (raw.decode("utf-8") for raw in r.iter_lines())  # bytes first: see test_server_api.sse_events
        events = [line[6:] for line in lines if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    usage = json.loads(events[-2])["usage"]
    return usage["completion_tokens"]


@pytest.fixture(scope="module")
def server(striker_bin, tiny_model, tmp_path_factory):
    s = StrikerServer(striker_bin, tiny_model, ["--served-model-name", MODEL, "--max-model-len", "512",
                                                "--max-num-seqs", "64", "--max-num-batched-tokens", "2048",
                                                "--kv-cache-memory", "128MiB"],
                      log_dir=tmp_path_factory.mktemp("log"))
    yield s
    s.stop()


def test_64_streams_and_200_disconnects_then_idle(server):
    with cf.ThreadPoolExecutor(max_workers=64) as pool:
        done = list(pool.map(lambda i: stream_chat(server.url, i, 4), range(64)))
    assert done == [4] * 64
    with cf.ThreadPoolExecutor(max_workers=50) as pool:
        started = list(pool.map(lambda i: vanish_mid_stream(server.port, {
            "model": MODEL, "prompt": f"vanish {i}", "max_tokens": 400, "stream": True, "ignore_eos": True}), range(200)))
    assert sum(started) == 200
    m = wait_idle(server)
    assert m["vllm:generation_tokens_total"] < 200 * 400  # the vanished requests were cut short
    t0 = time.time()
    r = server.client().completions.create(model=MODEL, prompt="still alive?", max_tokens=3,
                                           extra_body={"ignore_eos": True})
    assert r.usage.completion_tokens == 3
    assert time.time() - t0 < 30
    assert requests.get(server.url + "/health").status_code == 200


def test_non_streaming_client_timeouts_abort(server):
    def timed_out(i):
        try:
            # 480 tokens outlast a 0.1 s client timeout even on the GPU (~0.5–1 ms per step).
            requests.post(server.url + "/v1/completions", timeout=0.1,
                          json={"model": MODEL, "prompt": f"slow {i}", "max_tokens": 480, "ignore_eos": True})
        except requests.exceptions.Timeout:
            return True
        return False
    with cf.ThreadPoolExecutor(max_workers=20) as pool:
        assert all(pool.map(timed_out, range(20)))
    wait_idle(server)


def test_tiny_kv_budget_queues_and_preempts(striker_bin, tiny_model, tmp_path):
    # 64 KiB holds 128 tokens of KV: 12 requests that each grow to ~55 tokens must wait for room
    # and get preempted (recomputed) as they grow, and every one of them must still finish.
    s = StrikerServer(striker_bin, tiny_model, ["--served-model-name", MODEL, "--max-model-len", "128",
                                                "--max-num-seqs", "8", "--kv-cache-memory", "64KiB"],
                      log_dir=tmp_path)
    try:
        assert "128 tokens" in s.log()
        peak_waiting = 0.0
        with cf.ThreadPoolExecutor(max_workers=12) as pool:
            futures = [pool.submit(stream_chat, s.url, i, 40) for i in range(12)]
            while not all(f.done() for f in futures):
                peak_waiting = max(peak_waiting, s.metrics()["vllm:num_requests_waiting"])
                time.sleep(0.05)
            counts = [f.result() for f in futures]
        assert counts == [40] * 12
        m = wait_idle(s)
        assert peak_waiting > 0
        assert m["vllm:num_preemptions_total"] > 0
    finally:
        s.stop()


def aborted_requests(server):
    return sum(v for k, v in server.metrics().items()
               if k.startswith("vllm:request_success_total{") and 'finished_reason="abort"' in k)


@pytest.mark.parametrize("route, body", [
    ("/v1/responses", {"input": "vanish", "max_output_tokens": 480, "stream": True, "ignore_eos": True}),
    ("/v1/responses", {"input": "vanish", "max_output_tokens": 480, "ignore_eos": True}),
    ("/v1/messages", {"max_tokens": 480, "messages": [{"role": "user", "content": "vanish"}], "stream": True,
                      "ignore_eos": True}),
    ("/v1/messages", {"max_tokens": 480, "messages": [{"role": "user", "content": "vanish"}], "ignore_eos": True}),
])
def test_other_apis_free_their_work_when_the_client_vanishes(server, route, body):
    """The Responses and Messages routes, streaming or not, abort what a vanished client asked for: every
    request ends as an abort, none runs to its 480 tokens. (The client leaves after 50 ms: 480 steps of 16
    sequences outlast that on the GPU too, ~0.3-1 ms per step; the first GPU run of a 400-token, 200 ms
    version counted more than half the tokens generated, which said nothing about the abort.)"""
    payload = json.dumps({"model": MODEL, **body}).encode()

    def vanish(_):
        s = socket.create_connection(("127.0.0.1", server.port), timeout=120)
        s.sendall(f"POST {route} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n".encode() +
                  b"Content-Length: " + str(len(payload)).encode() + b"\r\n\r\n" + payload)
        if body.get("stream"):
            s.recv(256)  # the stream started
        else:
            time.sleep(0.05)  # the request is running
        s.close()
    before = server.metrics()["vllm:generation_tokens_total"]
    aborts_before = aborted_requests(server)
    with cf.ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(vanish, range(16)))
    m = wait_idle(server)
    generated = m["vllm:generation_tokens_total"] - before
    assert aborted_requests(server) - aborts_before == 16
    assert generated < 16 * 480, generated  # cut short
    assert requests.get(server.url + "/health").status_code == 200
