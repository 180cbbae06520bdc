"""Graceful drain on SIGTERM/SIGINT, as vLLM with --shutdown-timeout (and uvicorn) do: /health and
new requests answer 503 at once, requests already running finish, the process exits 0. Past the
timeout, or on a second signal, what still runs ends with a 503 its client sees (an HTTP 503, or an
in-band error event for a stream), never a dropped connection or a 499."""
import concurrent.futures as cf
import json
import signal
import threading
import time

import pytest
import requests

from server_fixture import StrikerServer, tiny_model  # noqa: F401  (fixtures)

MODEL = "tiny"
ARGS = ["--served-model-name", MODEL, "--max-model-len", "4096", "--max-num-seqs", "16", "--kv-cache-memory", "128MiB"]


def start(striker_bin, model, tmp_path, *extra):
    return StrikerServer(striker_bin, model, [*ARGS, *extra], log_dir=tmp_path)


class Stream:
    """One streaming completion read on its own thread; `started` is set at its first token."""

    def __init__(self, url, i, max_tokens):
        self.started = threading.Event()
        self.status = None
        self.events = []
        self.error = None
        self._thread = threading.Thread(target=self._run, args=(url, i, max_tokens), daemon=True)
        self._thread.start()

    def _run(self, url, i, max_tokens):
        body = {"model": MODEL, "prompt": f"drain {i}", "max_tokens": max_tokens, "ignore_eos": True,
                "stream": True, "stream_options": {"include_usage": True}}
        try:
            with requests.post(url + "/v1/completions", json=body, stream=True, timeout=120) as r:
                self.status = r.status_code
                for raw in r.iter_lines():
                    line = raw.decode("utf-8")
                    if line.startswith("data: "):
                        self.events.append(line[6:])
                        self.started.set()
        except requests.RequestException as e:  # a dropped connection is a failure the test reports
            self.error = repr(e)
        self.started.set()

    def join(self, timeout=120):
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "stream still open"

    def usage(self):
        return json.loads(self.events[-2])["usage"]

    def error_event(self):
        errors = [json.loads(e)["error"] for e in self.events if e != "[DONE]" and "error" in json.loads(e)]
        return errors[0] if errors else None


def completion(url, max_tokens):
    body = {"model": MODEL, "prompt": "non-streaming", "max_tokens": max_tokens, "ignore_eos": True}
    return requests.post(url + "/v1/completions", json=body, timeout=120)


def wait_exit(server, timeout):
    t0 = time.time()
    rc = server.proc.wait(timeout=timeout)
    return rc, time.time() - t0


def wait_running(server, n, timeout=60):
    deadline = time.time() + timeout
    while server.metrics()["vllm:num_requests_running"] < n:
        assert time.time() < deadline, f"fewer than {n} requests running after {timeout} s"
        time.sleep(0.05)


def test_sigterm_drains_running_requests_and_refuses_new_ones(striker_bin, tiny_model, tmp_path):
    server = start(striker_bin, tiny_model, tmp_path, "--shutdown-timeout", "120")
    tokens = 128  # long enough to be running when the signal comes (checked below)
    try:
        streams = [Stream(server.url, i, tokens) for i in range(3)]
        with cf.ThreadPoolExecutor(2) as pool:
            plain = [pool.submit(completion, server.url, tokens) for _ in range(2)]
            wait_running(server, 5)
            server.proc.send_signal(signal.SIGTERM)
            time.sleep(0.3)
            # Readiness drops and new work is refused with an OpenAI error body, while the old runs on.
            health = requests.get(server.url + "/health", timeout=10)
            assert health.status_code == 503, health.text
            refused = completion(server.url, 4)
            assert refused.status_code == 503, refused.text
            err = refused.json()["error"]
            assert err["type"] == "ServiceUnavailableError" and err["code"] == 503 and "shutting down" in err["message"]
            results = [f.result() for f in plain]
        for s in streams:
            s.join()
            assert s.error is None and s.status == 200, (s.error, s.status)
            assert s.events[-1] == "[DONE]" and s.error_event() is None
            assert s.usage()["completion_tokens"] == tokens
        for r in results:
            assert r.status_code == 200, r.text
            assert r.json()["usage"]["completion_tokens"] == tokens
        rc, secs = wait_exit(server, 30)
        assert rc == 0, server.log()[-3000:]
        assert "draining: /health and new requests answer 503, 5 running request(s)" in server.log()
        assert secs < 5, f"exit took {secs:.1f} s after the last request finished"
    finally:
        server.stop()


def test_requests_past_the_shutdown_timeout_end_with_a_503(striker_bin, tiny_model, tmp_path):
    server = start(striker_bin, tiny_model, tmp_path, "--shutdown-timeout", "1")
    try:
        stream = Stream(server.url, 0, 4000)
        with cf.ThreadPoolExecutor(1) as pool:
            plain = pool.submit(completion, server.url, 4000)
            assert stream.started.wait(60)
            time.sleep(0.2)
            server.proc.send_signal(signal.SIGINT)
            r = plain.result()
        stream.join()
        # The stream's headers were sent: the error comes in-band, then [DONE].
        assert stream.error is None and stream.status == 200
        err = stream.error_event()
        assert err and err["code"] == 503 and err["type"] == "ServiceUnavailableError", stream.events[-3:]
        assert stream.events[-1] == "[DONE]"
        assert r.status_code == 503, r.text
        assert "--shutdown-timeout" in r.json()["error"]["message"]
        rc, secs = wait_exit(server, 30)
        assert rc == 0, server.log()[-3000:]
    finally:
        server.stop()


def test_a_second_signal_exits_at_once(striker_bin, tiny_model, tmp_path):
    server = start(striker_bin, tiny_model, tmp_path, "--shutdown-timeout", "600")
    try:
        stream = Stream(server.url, 0, 4000)
        assert stream.started.wait(60)
        server.proc.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        assert server.proc.poll() is None, "the first signal must drain, not exit"
        t0 = time.time()
        server.proc.send_signal(signal.SIGTERM)
        rc = server.proc.wait(timeout=10)
        assert time.time() - t0 < 5
        assert rc == 0, server.log()[-3000:]
        stream.join()
        err = stream.error_event()
        assert stream.error is None and err and err["code"] == 503, (stream.error, stream.events[-3:])
    finally:
        server.stop()


def test_idle_server_exits_at_once_and_refuses_bad_flag(striker_bin, tiny_model, tmp_path):
    server = start(striker_bin, tiny_model, tmp_path)
    # An idle kept-alive connection (a pooling client's) must not hold the exit for the 5 s
    # keep-alive timeout.
    session = requests.Session()
    assert session.get(server.url + "/v1/models", timeout=10).status_code == 200
    t0 = time.time()
    server.proc.send_signal(signal.SIGTERM)
    assert server.proc.wait(timeout=10) == 0
    assert time.time() - t0 < 3
    session.close()
    server.stop()
    import subprocess
    bad = subprocess.run([str(striker_bin), "serve", str(tiny_model), "--shutdown-timeout", "-1"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode != 0 and "--shutdown-timeout" in bad.stderr
