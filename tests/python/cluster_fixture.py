"""N `striker serve` replicas behind the real vllm-router (PyPI), on loopback, for the scale-out
tests; and a load generator that keeps requests flowing through the router and records every
outcome. The router's health checks run every second so a draining or dead replica leaves its
rotation quickly (the default is a minute)."""
import dataclasses
import json
import shutil
import signal
import subprocess
import threading
import time

import requests

from server_fixture import StrikerServer, free_port

MODEL = "tiny"
REPLICA_ARGS = ["--served-model-name", MODEL, "--max-model-len", "2048", "--max-num-seqs", "16",
                "--kv-cache-memory", "64MiB", "--cpu-threads", "1"]


def router_bin():
    path = shutil.which("vllm-router")
    assert path, "vllm-router is not installed: pip install -r tests/python/requirements.txt"
    return path


class Cluster:
    def __init__(self, striker_bin, model, n, policy, log_dir, kv_events=False, replica_args=()):
        self.striker_bin, self.model, self.log_dir = striker_bin, model, log_dir
        self.kv_ports = [free_port() for _ in range(n)] if kv_events else []
        self.replica_args = [list(REPLICA_ARGS) + list(replica_args) for _ in range(n)]
        for i, port in enumerate(self.kv_ports):
            cfg = {"enable_kv_cache_events": True, "publisher": "zmq", "endpoint": f"tcp://*:{port}"}
            self.replica_args[i] += ["--kv-events-config", json.dumps(cfg)]
        # vllm-router's KV index chains blocks by the engines' hashes, so every replica must hash
        # alike: the same seed for the chain's root, as vLLM's kv_aware setup asks (PYTHONHASHSEED).
        self.env = {"PYTHONHASHSEED": "0"} if kv_events else None
        self.replicas = []
        self.router = None
        try:
            for i in range(n):
                self.replicas.append(StrikerServer(striker_bin, model, self.replica_args[i], env=self.env,
                                                   log_dir=log_dir))
            self._start_router(policy)
        except Exception:
            self.stop()
            raise

    def _start_router(self, policy):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        cmd = [router_bin(), "--host", "127.0.0.1", "--port", str(self.port), "--policy", policy,
               "--worker-urls", *[r.url for r in self.replicas],
               "--health-check-interval-secs", "1", "--health-failure-threshold", "1",
               "--health-success-threshold", "1", "--worker-startup-check-interval", "1",
               "--log-level", "info",
               # Its own metrics port: the default (29000) is taken by a router of another test
               # running at the same time (ctest -j), and the router exits when it cannot bind.
               "--prometheus-port", str(free_port())]
        for r, port in zip(self.replicas, self.kv_ports):
            cmd += ["--kv-event-source", f"{r.url}=tcp://127.0.0.1:{port}"]
        if self.kv_ports:
            cmd += ["--kv-event-model", MODEL]
        self.router_log_path = self.log_dir / "router.log"
        self._router_log = open(self.router_log_path, "w")
        self.router = subprocess.Popen(cmd, stdout=self._router_log, stderr=subprocess.STDOUT)
        deadline = time.time() + 60
        while time.time() < deadline:
            assert self.router.poll() is None, f"vllm-router exited:\n{self.router_log()[-3000:]}"
            try:
                if requests.get(self.url + "/health", timeout=2).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.2)
        raise AssertionError(f"vllm-router not ready after 60 s:\n{self.router_log()[-3000:]}")

    def router_log(self):
        self._router_log.flush()
        return self.router_log_path.read_text(errors="replace")

    def terminate(self, i, timeout=60):
        """SIGTERM replica i, as a rolling update does, and return its exit status."""
        r = self.replicas[i]
        r.proc.send_signal(signal.SIGTERM)
        return r.proc.wait(timeout=timeout)

    def restart(self, i):
        """Starts replica i again on its old port (and KV event port) and waits for /health."""
        old = self.replicas[i]
        old.stop()
        self.replicas[i] = StrikerServer(self.striker_bin, self.model, self.replica_args[i], env=self.env,
                                         port=old.port, log_path=old.log_path)

    def wait_routed(self, i, timeout=30):
        """Waits until the router sends replica i traffic again (its health checker saw it up)."""
        before = metric_sum(self.replicas[i], "vllm:request_success_total")
        deadline = time.time() + timeout
        while time.time() < deadline:
            complete(self.url, "ping", max_tokens=1)
            if metric_sum(self.replicas[i], "vllm:request_success_total") > before:
                return
            time.sleep(0.2)
        raise AssertionError(f"the router did not route to replica {i} within {timeout} s")

    def stop(self):
        if self.router and self.router.poll() is None:
            self.router.send_signal(signal.SIGTERM)
            try:
                self.router.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.router.kill()
                self.router.wait()
        for r in self.replicas:
            r.stop()


def metric_sum(server, name):
    """A counter summed over its label sets (finished_reason, ...)."""
    return sum(v for k, v in server.metrics().items() if k.startswith(name + "{"))


def complete(url, prompt, max_tokens=8, stream=False, timeout=60):
    body = {"model": MODEL, "prompt": prompt, "max_tokens": max_tokens, "ignore_eos": True, "stream": stream}
    r = requests.post(url + "/v1/completions", json=body, timeout=timeout, stream=stream)
    if r.status_code != 200:
        return r.status_code, r.text
    if not stream:
        body = r.json()
        n = body["usage"]["completion_tokens"]
        if n == max_tokens:
            return 200, None
        # The finish reason and the replica's request id say which path ended it early (a rare CI
        # failure in session 15: "11 tokens of 12" during a rolling restart, not reproduced since).
        reasons = [c.get("finish_reason") for c in body.get("choices", [])]
        return 200, f"{n} tokens of {max_tokens}, finish_reason {reasons}, id {body.get('id')}"
    events = [line.decode()[6:] for line in r.iter_lines() if line.startswith(b"data: ")]
    if not events or events[-1] != "[DONE]":
        return 200, f"stream ended without [DONE]: {events[-2:]}"
    errors = [e for e in events[:-1] if "error" in json.loads(e)]
    return (200, errors[0]) if errors else (200, None)


@dataclasses.dataclass
class Outcome:
    start: float
    end: float
    ok: bool
    detail: str


class Load:
    """`threads` clients sending short completions (streamed and not) through the router until
    stopped; every request's start, end and outcome is kept."""

    def __init__(self, url, threads=4, max_tokens=12):
        self.url, self.max_tokens = url, max_tokens
        self.outcomes = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._client, args=(k,), daemon=True) for k in range(threads)]

    def _client(self, k):
        n = 0
        while not self._stop.is_set():
            n += 1
            start = time.time()
            try:
                status, err = complete(self.url, f"client {k} request {n}", self.max_tokens, stream=n % 2 == 0)
                ok, detail = status == 200 and err is None, f"{status} {err}"
            except requests.RequestException as e:
                ok, detail = False, repr(e)
            with self._lock:
                self.outcomes.append(Outcome(start, time.time(), ok, detail))

    def __enter__(self):
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        for t in self._threads:
            t.join(120)

    def failures(self):
        with self._lock:
            return [o for o in self.outcomes if not o.ok]

    def count(self):
        with self._lock:
            return len(self.outcomes)

    def wait_for(self, n, timeout=60):
        deadline = time.time() + timeout
        while self.count() < n:
            assert time.time() < deadline, f"only {self.count()} requests done in {timeout} s"
            time.sleep(0.05)
