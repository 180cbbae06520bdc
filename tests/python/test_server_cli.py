"""`striker serve` startup: flags whose feature is missing fail fast with a clear one-line
error instead of being ignored; the summary names the KV capacity and the address."""
import socket
import subprocess

import pytest

from server_fixture import StrikerServer, tiny_model  # noqa: F401  (fixtures)


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