"""Logs as vLLM users expect: level + timestamp on every line, --log-level / VLLM_LOGGING_LEVEL (the flag
wins), one line per request with its tokens and latency unless --disable-log-requests, and vLLM's
periodic stats line every --log-stats-interval seconds unless --disable-log-stats."""
import os
import re
import subprocess
import time

import pytest
import requests

from server_fixture import StrikerServer, toolcall_model  # noqa: F401  (fixtures)

PREFIX = r"(DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d\.\d{3} \[[a-z-]+\] "
FLAGS = ["--served-model-name", "toolcall", "--max-model-len", "512", "--kv-cache-memory", "16MiB"]
STATS = re.compile(r"^INFO .* \[stats\] Avg prompt throughput: (\d+\.\d) tokens/s, Avg generation throughput: "
                   r"(\d+\.\d) tokens/s, Running: \d+ reqs, Waiting: \d+ reqs, GPU KV cache usage: \d+\.\d%"
                   r"(, Prefix cache hit rate: \d+\.\d%)?$", re.M)  # the rate once the engine has a prefix cache


def wait_for_log(server, pattern, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        m = re.search(pattern, server.log(), re.M)
        if m:
            return m
        time.sleep(0.1)
    pytest.fail(f"no log line matching {pattern!r}:\n{server.log()[-3000:]}")


def chat(client, stream=False):
    r = client.chat.completions.create(model="toolcall", messages=[{"role": "user", "content": "Repeat after me: apple"}],
                                       temperature=0, max_tokens=20, stream=stream,
                                       **({"stream_options": {"include_usage": True}} if stream else {}))
    if not stream:
        return r.id, r.usage
    usage, rid = None, None
    for chunk in r:
        rid = chunk.id
        usage = chunk.usage or usage
    return rid, usage


def test_request_lines_stats_lines_and_prefixes(striker_bin, toolcall_model, tmp_path):  # noqa: F811
    s = StrikerServer(striker_bin, toolcall_model, [*FLAGS, "--log-stats-interval", "0.5"], log_dir=tmp_path)
    try:
        client = s.client()
        for stream in (False, True):
            rid, usage = chat(client, stream)
            m = wait_for_log(s, r"^" + PREFIX + r'127\.0\.0\.1:\d+ "POST /v1/chat/completions" 200 ' + re.escape(rid) +
                             r" prompt_tokens=(\d+) completion_tokens=(\d+) latency=(\d+\.\d{3})s$")
            assert m.group(1) == "INFO"
            assert (int(m.group(2)), int(m.group(3))) == (usage.prompt_tokens, usage.completion_tokens)
        assert requests.get(s.url + "/v1/models", timeout=10).status_code == 200
        wait_for_log(s, r'"GET /v1/models" 200 - prompt_tokens=- completion_tokens=- latency=\d+\.\d{3}s$')
        deadline = time.time() + 10  # a stats line within an interval or two that saw the generated tokens
        while not any(float(m.group(2)) > 0 for m in STATS.finditer(s.log())):
            assert time.time() < deadline, "no stats line saw the generated tokens:\n" + s.log()[-3000:]
            time.sleep(0.1)
        log = s.log()
        assert '"GET /health"' not in log  # probes are logged at debug level only
        for line in log.splitlines():
            if not line.startswith("Loading weights ["):  # the progress bar is not a log line
                assert re.match(PREFIX, line), line
    finally:
        s.stop()


def test_disable_log_requests_and_stats(striker_bin, toolcall_model, tmp_path):  # noqa: F811
    s = StrikerServer(striker_bin, toolcall_model, [*FLAGS, "--disable-log-requests", "--disable-log-stats",
                                                    "--log-stats-interval", "0.2"], log_dir=tmp_path)
    try:
        chat(s.client())
        time.sleep(1.0)
        log = s.log()
        assert "[http]" not in log and "Avg prompt throughput" not in log, log[-2000:]
        assert "ready in" in log
    finally:
        s.stop()


def test_debug_level_shows_probes(striker_bin, toolcall_model, tmp_path):  # noqa: F811
    s = StrikerServer(striker_bin, toolcall_model, [*FLAGS, "--log-level", "debug"], log_dir=tmp_path)
    try:
        wait_for_log(s, r'^DEBUG .* \[http\] 127\.0\.0\.1:\d+ "GET /health" 200 ')
    finally:
        s.stop()


def make_model(striker_bin, shared_dir, out, *flags, env_level=None):
    env = {k: v for k, v in os.environ.items() if k != "VLLM_LOGGING_LEVEL"}
    if env_level is not None:
        env["VLLM_LOGGING_LEVEL"] = env_level
    return subprocess.run([str(striker_bin), "make-model", "--config", str(shared_dir / "fixtures/flint-config/config.tiny.json"),
                           "--tokenizer", str(shared_dir / "fixtures/flint-tokenizer"), "--out", str(out), "--seed", "1",
                           *flags], capture_output=True, text=True, timeout=120, env=env)


def test_level_from_env_and_flag(striker_bin, shared_dir, tmp_path):
    wrote = re.compile(r"^INFO \d\d-\d\d [\d:.]+ \[make-model\] wrote ", re.M)
    assert wrote.search(make_model(striker_bin, shared_dir, tmp_path / "a").stderr)
    quiet = make_model(striker_bin, shared_dir, tmp_path / "b", env_level="WARNING")
    assert quiet.returncode == 0 and quiet.stderr == ""
    flag_wins = make_model(striker_bin, shared_dir, tmp_path / "c", "--log-level", "info", env_level="ERROR")
    assert wrote.search(flag_wins.stderr)


@pytest.mark.parametrize("flags,env_level,needle", [
    (["--log-level", "loud"], None, "--log-level must be one of debug, info, warning, error, critical; got 'loud'"),
    ([], "chatty", "VLLM_LOGGING_LEVEL must be one of debug, info, warning, error, critical; got 'chatty'"),
])
def test_bad_level_is_a_clear_error(striker_bin, shared_dir, tmp_path, flags, env_level, needle):
    r = make_model(striker_bin, shared_dir, tmp_path / "m", *flags, env_level=env_level)
    assert r.returncode != 0 and needle in r.stderr, r.stderr


@pytest.mark.parametrize("flags", [["--log-stats-interval", "0"], ["--disable-log-requests", "--enable-log-requests"]])
def test_bad_logging_flags_fail_at_startup(striker_bin, toolcall_model, flags):  # noqa: F811
    r = subprocess.run([str(striker_bin), "serve", str(toolcall_model), "--port", "0", "--device", "cpu", *flags],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "error:" in r.stderr and flags[0] in r.stderr, r.stderr
