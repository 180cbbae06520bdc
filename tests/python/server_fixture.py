"""Starts the real `striker serve` process for the server tests.

`StrikerServer` launches the binary with `--port 0` (the kernel picks a free port at bind time, so
test files running in parallel never race for one), reads the port from the server's "listening on"
line, waits for /health to answer 200 (failing with the server's log if it exits or takes too
long), and kills it at the end. The pytest fixtures below share one server per module and flag set.
STRIKER_SERVE_DEVICE=cuda runs the same tests against the GPU backend (on the GPU machine).
"""
import os
import itertools
import json
import pathlib
import re
import signal
import socket
import subprocess
import tempfile
import time

import pytest
import requests


_LISTENING = re.compile(r"listening on http://127\.0\.0\.1:(\d+)")
_serial = itertools.count()


def free_port() -> int:
    """A port free right now, for scripts that need a number in advance (it may be taken again
    before they bind it; StrikerServer avoids that race with --port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class StrikerServer:
    def __init__(self, striker_bin, model, args=(), env=None, log_dir=None, startup_timeout=180, command=None,
                 port=None, log_path=None):
        """`command` replaces `striker serve MODEL --port 0 ARGS` (e.g. scripts/run.sh with PORT=0);
        it must bind port 0 on 127.0.0.1 and print striker's "listening on" line. `port` binds a fixed
        port instead (a replica restarted on the port its router knows), and `log_path` appends to an
        earlier server's log (so one file tells a replica's whole story)."""
        self.port = port
        self.url = f"http://127.0.0.1:{port}" if port else None
        if log_path is None:
            log_dir = pathlib.Path(log_dir) if log_dir else pathlib.Path(tempfile.mkdtemp(prefix="striker-serve-"))
            log_path = log_dir / f"striker-serve-{next(_serial)}.log"
        self.log_path = pathlib.Path(log_path)
        self._log = open(self.log_path, "a")
        cmd = command or [str(striker_bin), "serve", str(model), "--host", "127.0.0.1", "--port", str(port or 0),
                          "--device", os.environ.get("STRIKER_SERVE_DEVICE", "cpu"), *map(str, args)]
        self.cmd = cmd
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT,
                                     env={**os.environ, **(env or {})})
        self._wait_ready(startup_timeout)

    def log(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(errors="replace")

    def _wait_ready(self, timeout):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"striker serve exited with {self.proc.returncode}:\n{self.log()[-4000:]}")
            if self.port is None:
                m = _LISTENING.search(self.log())
                if m:
                    self.port = int(m.group(1))
                    self.url = f"http://127.0.0.1:{self.port}"
                time.sleep(0.05)
                continue
            try:
                if requests.get(self.url + "/health", timeout=2).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"striker serve not ready after {timeout} s:\n{self.log()[-4000:]}")

    def stop(self):
        """SIGTERM, as an orchestrator would (striker drains running requests first); a server that
        does not exit cleanly fails the test."""
        hung = False
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=45)  # a drain waits up to --shutdown-timeout (30 s by default)
            except subprocess.TimeoutExpired:
                hung = True
                self.proc.kill()
                self.proc.wait()
        if not self._log.closed:
            self._log.close()
        if hung:
            raise RuntimeError(f"striker serve did not exit within 45 s of SIGTERM:\n{self.log_path.read_text()[-2000:]}")

    def client(self, **kw):
        import openai
        return openai.OpenAI(base_url=self.url + "/v1", api_key=kw.pop("api_key", "unused"), max_retries=0, **kw)

    def metrics(self) -> dict:
        """Parses /metrics into {name{labels}: value} and {name: value} for unlabelled lookups."""
        text = requests.get(self.url + "/metrics", timeout=10).text
        out = {}
        for line in text.splitlines():
            if not line or line.startswith("#"):
                continue
            key, _, value = line.rpartition(" ")
            out[key] = float(value)
            out.setdefault(key.split("{")[0], float(value))
        return out


@pytest.fixture(scope="session")
def tiny_model(striker_bin, shared_dir, tmp_path_factory) -> pathlib.Path:
    """A random-weight tiny Flint checkpoint written by `striker make-model`."""
    out = tmp_path_factory.mktemp("tiny-model")
    subprocess.run([str(striker_bin), "make-model", "--config", str(shared_dir / "fixtures/flint-config/config.tiny.json"),
                    "--tokenizer", str(shared_dir / "fixtures/flint-tokenizer"), "--out", str(out), "--seed", "7"],
                   check=True, capture_output=True)
    return out


@pytest.fixture(scope="session")
def toolcall_model(shared_dir) -> pathlib.Path:
    return shared_dir / "fixtures/toolcall-model"


@pytest.fixture
def start_server(striker_bin, tmp_path):
    """Factory: start_server(model, *flags) -> a ready StrikerServer, stopped after the test."""
    servers = []

    def start(model, *args, env=None, startup_timeout=180):
        s = StrikerServer(striker_bin, model, args, env=env, log_dir=tmp_path, startup_timeout=startup_timeout)
        servers.append(s)
        return s

    yield start
    for s in servers:
        s.stop()


def module_server(striker_bin, model, args, tmp_path_factory):
    """Body of a module-scoped `server` fixture (`yield from module_server(...)`): one server for the
    whole test module, stopped at its end."""
    s = StrikerServer(striker_bin, model, args, log_dir=tmp_path_factory.mktemp("log"))
    yield s
    s.stop()


@pytest.fixture(scope="module")
def client(server):
    """The official openai client for the test module's `server` fixture."""
    return server.client()


def vanish_mid_stream(port, body) -> bool:
    """POSTs `body` (a streaming /v1/completions request) on a raw socket, reads the first bytes of
    the response, then resets the connection: a client that vanishes mid-stream. True when the
    response had started (HTTP 200)."""
    data = json.dumps(body).encode()
    s = socket.create_connection(("127.0.0.1", port), timeout=120)
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: " + str(len(data)).encode() + b"\r\n\r\n" + data)
    got = s.recv(256)
    s.close()
    return got.startswith(b"HTTP/1.1 200")
