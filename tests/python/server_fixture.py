"""Starts the real `striker serve` process for the server tests.

`StrikerServer` picks a free port, launches the binary with the given model and flags, waits
for /health to answer 200 (failing with the server's log if it exits or takes too long), and
kills it at the end. The pytest fixtures below share one server per module and flag set.
STRIKER_SERVE_DEVICE=cuda runs the same tests against the GPU backend (on the GPU machine).
"""
import os
import pathlib
import signal
import socket
import subprocess
import time

import pytest
import requests


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class StrikerServer:
    def __init__(self, striker_bin, model, args=(), env=None, log_dir=None, startup_timeout=180, port=None):
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = pathlib.Path(log_dir or "/tmp") / f"striker-serve-{self.port}.log"
        self._log = open(self.log_path, "a")  # a restart on the same port appends
        cmd = [str(striker_bin), "serve", str(model), "--host", "127.0.0.1", "--port", str(self.port),
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
