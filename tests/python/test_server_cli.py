"""`striker serve` startup: flags whose feature is missing fail fast with a clear one-line
error instead of being ignored; the summary names the KV capacity and the address."""
import socket
import subprocess

import pytest

from server_fixture import StrikerServer, tiny_model, toolcall_model  # noqa: F401  (fixtures)


@pytest.mark.parametrize("flags,needle", [
    (["--device", "cuda"], "--device cuda: no"),  # CI has no GPU: no device, or no CUDA backend in the build
    (["--device", "tpu"], "--device must be cpu or cuda"),
    (["--prefix-caching-hash-algo", "md5"], "--prefix-caching-hash-algo must be one of sha256, sha256_cbor"),
    (["--kv-cache-dtype", "fp8"], "--kv-cache-dtype fp8 is not supported"),
    (["--block-size", "12"], "--block-size must be one of 1, 8, 16, 32, 64, 128, got 12"),
    (["--gpu-memory-utilization", "0.5"], "--gpu-memory-utilization applies to --device cuda"),
    (["--enable-auto-tool-choice"], "requires --tool-call-parser"),
    (["--tool-call-parser", "hermes"], "--tool-call-parser 'hermes' is not available"),
    (["--reasoning-parser", "deepseek_r1"], "--reasoning-parser 'deepseek_r1' is not available"),
    (["--default-chat-template-kwargs", "[1]"], "expected a JSON object"),
    (["--kv-cache-memory", "lots"], "--kv-cache-memory"),
    (["--max-model-len", "999999"], "exceeds the model's max_position_embeddings"),
    (["--generation-config", "/nonexistent"], "generation_config.json does not exist"),
    (["--enforce-eager", "--cuda-graphs"], "--enforce-eager and --cuda-graphs contradict"),
    (["--cuda-graphs"], "--cuda-graphs applies to --device cuda"),
    # vLLM flags with values striker cannot honour: refused with why, not "argument was not expected".
    (["-tp", "2"], "--tensor-parallel-size and --pipeline-parallel-size must be 1"),
    (["--pipeline-parallel-size=2"], "--tensor-parallel-size and --pipeline-parallel-size must be 1"),
    (["-dp", "4"], "--data-parallel-size must be 1: run one `striker serve` per GPU behind vllm-router"),
    (["--dtype", "float16"], "--dtype float16 is not supported"),
    (["--chat-template", "/nonexistent/t.jinja"], "looks like a file path, but it cannot be opened"),
    (["--chat-template", "{% if %}"], "--chat-template:1:"),
    (["--chat-template-content-format", "openai"], "--chat-template-content-format openai is not supported"),
    (["--allowed-origins", "*"], "--allowed-origins must be a JSON list of strings"),
    (["--uvicorn-log-level", "loud"], "--uvicorn-log-level must be one of"),
    (["--no-enable-chunked-prefill"], "--no-enable-chunked-prefill is not supported"),
    (["--scheduling-policy", "priority"], "--scheduling-policy priority is not supported"),
    (["--async-scheduling", "--speculative-config", '{"method": "ngram", "num_speculative_tokens": 2}'],
     "--async-scheduling does not run with --speculative-config"),
    (["--speculative-config", '{"method": "ngram"}'], "num_speculative_tokens is required"),
    (["--speculative-config", '{"method": "eagle3", "num_speculative_tokens": 3}'], "method 'eagle3' is not available"),
    (["--speculative-config", '{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 6, '
      '"prompt_lookup_max": 2}'], "prompt_lookup_min=6 must be <= prompt_lookup_max=2"),
    (["--speculative-config", "ngram"], "--speculative-config is not valid JSON"),
    (["--enable-lora"], "--enable-lora is not available"),
    (["--override-generation-config", '{"max_new_tokens": 5}'], "'max_new_tokens' is not a sampling default"),
    (["--override-generation-config", '{"top_k": 1.5}'], "field 'top_k' must be an integer"),
])
def test_bad_flags_fail_at_startup(striker_bin, tiny_model, flags, needle):
    device = [] if "--device" in flags else ["--device", "cpu"]
    r = subprocess.run([str(striker_bin), "serve", str(tiny_model), "--port", "0", *device, *flags],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0
    assert needle in r.stderr, r.stderr
    assert "error:" in r.stderr


def test_missing_model_is_a_clear_error(striker_bin, tmp_path):
    r = subprocess.run([str(striker_bin), "serve", str(tmp_path / "nope"), "--port", "0", "--device", "cpu"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "error:" in r.stderr


def test_port_in_use_is_a_clear_error(striker_bin, tiny_model):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = subprocess.run([str(striker_bin), "serve", str(tiny_model), "--host", "127.0.0.1", "--port", str(port),
                            "--device", "cpu"], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and f"cannot listen on 127.0.0.1:{port}" in r.stderr


def test_startup_summary(striker_bin, tiny_model, tmp_path):
    s = StrikerServer(striker_bin, tiny_model, ["--max-model-len", "256", "--kv-cache-memory", "8MiB",
                                                "--max-num-seqs", "4"], log_dir=tmp_path)
    try:
        log = s.log()
        assert "Loading weights" in log and "100%" in log
        assert "dtype bfloat16" in log
        assert "maximum concurrency for 256 tokens per request" in log
        assert f"listening on http://127.0.0.1:{s.port}" in log
        assert "KV cache:" in log and "tokens;" in log
    finally:
        s.stop()
    assert s.proc.returncode == 0  # SIGTERM is a clean shutdown


def test_sigterm_with_streams_in_flight_exits_cleanly(striker_bin, tiny_model, tmp_path):
    """Streams still running when the drain gives up (--shutdown-timeout 1) end with an in-band 503
    error and [DONE], never a cut connection; the process exits 0 (test_server_drain.py has more)."""
    import threading
    import time

    import requests
    s = StrikerServer(striker_bin, tiny_model, ["--max-model-len", "512", "--kv-cache-memory", "8MiB",
                                                "--max-num-seqs", "4", "--shutdown-timeout", "1"], log_dir=tmp_path)
    got = [[] for _ in range(3)]
    errors = []

    def stream(i):
        body = {"model": str(tiny_model), "prompt": "go", "max_tokens": 480, "stream": True, "ignore_eos": True}
        try:
            with requests.post(s.url + "/v1/completions", json=body, stream=True, timeout=60) as r:
                for line in r.iter_lines():
                    if line.startswith(b"data: "):
                        got[i].append(line)
        except requests.RequestException as e:
            errors.append(repr(e))
    threads = [threading.Thread(target=stream, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    deadline = time.time() + 60
    while min(len(g) for g in got) < 2 and time.time() < deadline:
        time.sleep(0.05)
    assert min(len(g) for g in got) >= 2
    t0 = time.time()
    s.stop()  # raises if the process does not exit within its wait
    assert s.proc.returncode == 0 and time.time() - t0 < 15
    for t in threads:
        t.join(timeout=30)
    assert not errors, errors
    for g in got:
        assert g[-1] == b"data: [DONE]"
        assert b'"code":503' in g[-2] or b'"finish_reason":"length"' in g[-2] or b'"finish_reason":"length"' in g[-3]
    assert "SIGTERM received" in s.log()

def test_vllm_serve_flags_are_taken(striker_bin, toolcall_model, tmp_path):
    """A `vllm serve` command line of single-GPU flags starts as it is; the flags that change
    behaviour do: --chat-template replaces the tokenizer's template, --return-tokens-as-token-ids
    names logprob tokens by id, --disable-uvicorn-access-log drops the per-request log line, and
    CORS (vLLM's default: any origin) answers a browser's preflight before the API key check."""
    import requests
    template = tmp_path / "t.jinja"
    template.write_text("{% for m in messages %}<|user|>PLAIN:{{ m.content }}{% endfor %}<|assistant|>")
    s = StrikerServer(striker_bin, toolcall_model, [
        "--max-model-len", "512", "--kv-cache-memory", "16MiB", "-tp", "1", "--pipeline-parallel-size", "1",
        "--dtype", "auto", "--trust-remote-code", "--enable-chunked-prefill", "--enable-prompt-tokens-details",
        "--enable-request-id-headers", "--disable-fastapi-docs", "--swap-space", "4", "--scheduling-policy", "fcfs",
        "--chat-template", str(template), "--return-tokens-as-token-ids", "--disable-uvicorn-access-log",
        "--api-key", "k"], log_dir=tmp_path)
    try:
        auth = {"Authorization": "Bearer k"}
        r = requests.post(s.url + "/v1/chat/completions/render", headers=auth, timeout=30,
                          json={"messages": [{"role": "user", "content": "hi"}]})
        assert r.status_code == 200, r.text
        prompt = requests.post(s.url + "/detokenize", headers=auth, json={"tokens": r.json()["token_ids"]},
                               timeout=30).json()["prompt"]
        assert prompt == "<|user|>PLAIN:hi<|assistant|>"
        r = requests.post(s.url + "/v1/completions", headers=auth, timeout=60,
                          json={"prompt": "a", "max_tokens": 2, "logprobs": 1, "temperature": 0})
        assert all(t.startswith("token_id:") for t in r.json()["choices"][0]["logprobs"]["tokens"])
        # CORS: the preflight needs no key; responses to a cross-origin call carry the origin allowance.
        pre = requests.options(s.url + "/v1/chat/completions", timeout=10, headers={
            "Origin": "http://ui.example", "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, content-type"})
        assert pre.status_code == 200
        assert pre.headers["Access-Control-Allow-Origin"] == "*"
        assert pre.headers["Access-Control-Allow-Headers"] == "authorization, content-type"
        assert "POST" in pre.headers["Access-Control-Allow-Methods"]
        r = requests.get(s.url + "/v1/models", headers={**auth, "Origin": "http://ui.example"}, timeout=10)
        assert r.status_code == 200 and r.headers["Access-Control-Allow-Origin"] == "*"
        assert "Access-Control-Allow-Origin" not in requests.get(s.url + "/v1/models", headers=auth, timeout=10).headers
        assert "[http]" not in s.log()
    finally:
        s.stop()


def test_cors_origins_restricted(striker_bin, tiny_model, tmp_path):
    import requests
    s = StrikerServer(striker_bin, tiny_model, ["--max-model-len", "256", "--kv-cache-memory", "8MiB",
                                                "--allowed-origins", '["http://ok.example"]', "--allow-credentials"],
                      log_dir=tmp_path)
    try:
        def preflight(origin):
            return requests.options(s.url + "/v1/completions", timeout=10, headers={
                "Origin": origin, "Access-Control-Request-Method": "POST"})
        ok = preflight("http://ok.example")
        assert ok.status_code == 200 and ok.headers["Access-Control-Allow-Origin"] == "http://ok.example"
        assert ok.headers["Access-Control-Allow-Credentials"] == "true" and ok.headers["Vary"] == "Origin"
        bad = preflight("http://evil.example")
        assert bad.status_code == 400 and "Access-Control-Allow-Origin" not in bad.headers
        assert "origin" in bad.text
        r = requests.get(s.url + "/v1/models", headers={"Origin": "http://evil.example"}, timeout=10)
        assert r.status_code == 200 and "Access-Control-Allow-Origin" not in r.headers
        r = requests.get(s.url + "/v1/models", headers={"Origin": "http://ok.example"}, timeout=10)
        assert r.headers["Access-Control-Allow-Origin"] == "http://ok.example"
    finally:
        s.stop()


def test_override_generation_config_and_load(striker_bin, tiny_model, tmp_path):
    """--override-generation-config sets the sampling defaults a request without them gets (seen in
    /v1/chat/completions/render's sampling_params); GET /load counts requests in flight with
    --enable-server-load-tracking and is public, as vLLM's."""
    import threading
    import time

    import requests
    s = StrikerServer(striker_bin, tiny_model, ["--max-model-len", "512", "--kv-cache-memory", "8MiB",
                                                "--override-generation-config", '{"temperature": 0.25, "top_k": 7}',
                                                "--enable-server-load-tracking", "--api-key", "k"], log_dir=tmp_path)
    try:
        auth = {"Authorization": "Bearer k"}
        r = requests.post(s.url + "/v1/chat/completions/render", headers=auth, timeout=30,
                          json={"messages": [{"role": "user", "content": "hi"}]})
        sp = r.json()["sampling_params"]
        assert sp["temperature"] == 0.25 and sp["top_k"] == 7
        assert "overridden by --override-generation-config" in s.log()
        assert requests.get(s.url + "/load", timeout=10).json() == {"server_load": 0}
        done = threading.Event()

        def long_request():
            requests.post(s.url + "/v1/completions", headers=auth, timeout=120,
                          json={"prompt": "go", "max_tokens": 400, "ignore_eos": True})
            done.set()
        t = threading.Thread(target=long_request)
        t.start()
        loads = []
        while not done.is_set() and len(loads) < 2000:
            loads.append(requests.get(s.url + "/load", timeout=10).json()["server_load"])
            if loads[-1] == 1:
                break
            time.sleep(0.005)
        t.join()
        assert 1 in loads
        assert requests.get(s.url + "/load", timeout=10).json() == {"server_load": 0}
    finally:
        s.stop()
