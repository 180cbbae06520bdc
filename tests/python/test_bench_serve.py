"""bench/serve_bench.py (`vllm bench serve` for striker) against `striker serve` on the tiny CPU model:
the saved JSON must add up, agree with the per-request lists and with the server's own counters."""
import json
import math
import pathlib
import subprocess
import sys

import pytest

from server_fixture import StrikerServer, tiny_model  # noqa: F401  (fixtures)

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "serve_bench.py"
sys.path.insert(0, str(ROOT / "bench"))
import serve_metrics  # noqa: E402


@pytest.fixture(scope="module")
def server(striker_bin, tiny_model, tmp_path_factory):  # noqa: F811
    s = StrikerServer(striker_bin, tiny_model, ["--served-model-name", "tiny", "--max-model-len", "512"],
                      log_dir=tmp_path_factory.mktemp("bench-serve-logs"))
    yield s
    s.stop()


def bench(server, tmp_path, *args):
    out = tmp_path / "result.json"
    r = subprocess.run([sys.executable, str(SCRIPT), "--base-url", server.url, "--ready-check-timeout-sec", "30",
                        "--save-result", "--save-detailed", "--result-filename", str(out), *map(str, args)],
                       capture_output=True, text=True, timeout=300)
    return r, (json.loads(out.read_text()) if out.exists() else None)


def check_percentiles_ordered(j, name):
    p50, p90, p99 = (j[f"p{p}_{name}_ms"] for p in (50, 90, 99))
    assert p50 == j[f"median_{name}_ms"]
    assert 0 <= p50 <= p90 <= p99, (name, p50, p90, p99)
    assert j[f"std_{name}_ms"] >= 0


def test_random_run_adds_up(server, tmp_path):
    n, inp, out, conc = 6, 40, 9, 3
    before = server.metrics()
    r, j = bench(server, tmp_path, "--model", "tiny", "--num-prompts", n, "--random-input-len", inp,
                 "--random-output-len", out, "--max-concurrency", conc, "--ignore-eos", "--seed", 5,
                 "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,90,99",
                 "--goodput", "ttft:600000", "e2el:600000")
    assert r.returncode == 0, r.stderr
    after = server.metrics()
    # The printout has vLLM's layout and the same counts as the JSON.
    assert "============ Serving Benchmark Result ============" in r.stdout
    assert f"{'Successful requests:':<40} {n}" in r.stdout
    assert "Mean TPOT (ms):" in r.stdout and "P90 ITL (ms):" in r.stdout and "P99 E2EL (ms):" in r.stdout

    assert (j["completed"], j["failed"]) == (n, 0)
    assert j["errors"] == [""] * n
    assert j["input_lens"] == [inp] * n and j["total_input_tokens"] == n * inp
    assert j["output_lens"] == [out] * n and j["total_output_tokens"] == n * out  # ignore_eos honoured
    # The server counted the same tokens (its counters, not the client's).
    assert after["vllm:prompt_tokens_total"] - before["vllm:prompt_tokens_total"] == n * inp
    assert after["vllm:generation_tokens_total"] - before["vllm:generation_tokens_total"] == n * out

    d = j["duration"]
    assert d >= max(j["e2els"]) > 0
    assert j["request_throughput"] == pytest.approx(n / d, rel=1e-12)
    assert j["request_goodput"] == j["request_throughput"]  # SLOs of 10 minutes: every request meets them
    assert j["output_throughput"] == pytest.approx(n * out / d, rel=1e-12)
    assert j["total_token_throughput"] == pytest.approx(n * (inp + out) / d, rel=1e-12)
    assert 1 <= j["max_concurrent_requests"] <= conc
    assert 0 < j["max_output_tokens_per_s"] <= n * out

    for ttft, e2el, itl in zip(j["ttfts"], j["e2els"], j["itls"]):
        assert 0 < ttft <= e2el
        # one gap per chunk after the first; at most one chunk per token
        assert 1 <= len(itl) <= out - 1
        assert all(g >= 0 for g in itl)
        assert sum(itl) == pytest.approx(e2el - ttft, abs=1e-6)
    tpots = [(e - t) / (out - 1) * 1e3 for t, e in zip(j["ttfts"], j["e2els"])]
    assert j["mean_tpot_ms"] == pytest.approx(sum(tpots) / n, rel=1e-9)
    assert j["mean_ttft_ms"] == pytest.approx(sum(j["ttfts"]) / n * 1e3, rel=1e-9)
    all_itl = [g * 1e3 for itl in j["itls"] for g in itl]
    assert j["mean_itl_ms"] == pytest.approx(sum(all_itl) / len(all_itl), rel=1e-9)
    assert j["p99_e2el_ms"] <= max(j["e2els"]) * 1e3 + 1e-9
    for name in ("ttft", "tpot", "itl", "e2el"):
        check_percentiles_ordered(j, name)
    assert all(isinstance(t, str) for t in j["generated_texts"])


def test_range_ratio_prefix_and_rate(server, tmp_path):
    n, inp, out, prefix = 8, 30, 8, 5
    r, j = bench(server, tmp_path, "--num-prompts", n, "--random-input-len", inp, "--random-output-len", out,
                 "--random-range-ratio", 0.5, "--random-prefix-len", prefix, "--request-rate", 50,
                 "--ignore-eos", "--seed", 11, "--num-warmups", 1)
    assert r.returncode == 0, r.stderr
    assert j["model_id"] == "tiny"  # asked /v1/models
    assert (j["completed"], j["failed"]) == (n, 0)
    assert all(prefix + 15 <= L <= prefix + 45 for L in j["input_lens"]), j["input_lens"]
    assert len(set(j["input_lens"])) > 1  # the ratio spreads lengths
    assert all(4 <= L <= 12 for L in j["requested_output_lens"])
    assert j["output_lens"] == j["requested_output_lens"]
    assert j["total_input_tokens"] == sum(j["input_lens"])
    assert j["total_output_tokens"] == sum(j["output_lens"])
    # Same seed, same prompts: lengths are reproducible.
    _, j2 = bench(server, tmp_path, "--num-prompts", n, "--random-input-len", inp, "--random-output-len", out,
                  "--random-range-ratio", 0.5, "--random-prefix-len", prefix, "--ignore-eos", "--seed", 11)
    assert j2["input_lens"] == j["input_lens"] and j2["requested_output_lens"] == j["requested_output_lens"]


def test_rejected_requests_are_failures_not_numbers(server, tmp_path):
    # Prompts longer than --max-model-len 512: the server answers 400, nothing completes.
    r, j = bench(server, tmp_path, "--num-prompts", 3, "--random-input-len", 600, "--random-output-len", 4)
    assert r.returncode == 1
    assert (j["completed"], j["failed"]) == (0, 3)
    assert j["total_output_tokens"] == 0 and j["output_throughput"] == 0
    assert all(e.startswith("HTTP 400") for e in j["errors"]), j["errors"]
    assert "failed request: HTTP 400" in r.stderr


@pytest.mark.parametrize("args, message", [
    (["--endpoint", "/v1/chat/completions"], "only /v1/completions"),
    (["--dataset-name", "sharegpt"], "only random"),
    (["--percentile-metrics", "ttft,bogus"], "unknown ['bogus']"),
    (["--metric-percentiles", "0"], "must be in (0, 100]"),
    (["--random-range-ratio", "1.5"], "[0, 1)"),
    (["--goodput", "ttft:abc"], "KEY:MILLISECONDS"),
    (["--goodput", "itl:5"], "KEY is ttft, tpot or e2el"),
])
def test_bad_flags_are_refused(args, message):
    r = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and message in r.stderr, r.stderr


def test_server_not_ready_is_an_error(tmp_path):
    from server_fixture import free_port
    r = subprocess.run([sys.executable, str(SCRIPT), "--port", str(free_port()), "--ready-check-timeout-sec", "1"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "not ready after 1 s" in r.stderr


def test_percentile_and_std_match_numpy():
    np = pytest.importorskip("numpy")
    vals = [3.0, 1.0, 4.0, 1.5, 9.0, 2.6, 5.3]
    for p in (1, 50, 90, 99, 99.9, 100):
        assert serve_metrics.percentile(vals, p) == pytest.approx(float(np.percentile(vals, p)), rel=1e-12)
    assert serve_metrics.std(vals) == pytest.approx(float(np.std(vals)), rel=1e-12)
    assert serve_metrics.percentile([], 99) == 0.0 and serve_metrics.percentile([7.0], 99) == 7.0
    assert not math.isnan(serve_metrics.std([]))


def test_peak_concurrency_counts_overlaps():
    R = serve_metrics.RequestResult
    rs = [R(1, True, start_time=0.0, latency=2.0), R(1, True, start_time=1.0, latency=2.0),
          R(1, True, start_time=2.0, latency=1.0), R(1, True, start_time=5.0, latency=1.0)]
    # [0,2) [1,3) [2,3) [5,6): at most two at once (an end and a start at 2.0 do not overlap)
    assert serve_metrics.peak_concurrency(rs) == 2


def test_gpu_script_rehearsed_on_cpu(striker_bin, shared_dir, tmp_path):
    """scripts/gpu_serve_bench.sh end to end with the CPU backend and tiny shapes: it starts the
    server on dummy weights, runs both benchmarks, prints the table and stops the server cleanly."""
    from server_fixture import free_port
    import os
    bin_dir = pathlib.Path(striker_bin).parent
    env = {**os.environ, "OUT": str(tmp_path), "STRIKER_SERVE_BENCH_DEVICE": "cpu",
           "STRIKER_GPU_CONFIG": str(shared_dir / "fixtures/flint-config/config.tiny.json"),
           "STRIKER_GPU_TOKENIZER": str(shared_dir / "fixtures/flint-tokenizer"),
           "STRIKER_SERVE_BENCH_FORMATS": "bf16", "STRIKER_SERVE_BENCH_LONG": "200 6",
           "STRIKER_SERVE_BENCH_CONC": "6 3 30 5", "STRIKER_SERVE_BENCH_MULTI_TURN": "150 3 10 4",
           "STRIKER_SERVE_BENCH_PORT": str(free_port()),
           "STRIKER_SERVE_BENCH_SERVE_ARGS": "--max-model-len 512"}
    r = subprocess.run(["bash", str(ROOT / "scripts/gpu_serve_bench.sh"), str(bin_dir)], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert "serve bench rc=0" in r.stdout
    rows = [line for line in r.stdout.splitlines() if line.startswith("| long |") or line.startswith("| c3 |")]
    assert len(rows) == 2, r.stdout[-2000:]
    assert "| 1 × 200→6 | 1 | 1/0 |" in rows[0] and "| 6 × 30→5 | 3 | 6/0 |" in rows[1]
    long_run = json.loads((tmp_path / "serve_bench/long_bf16.json").read_text())
    assert (long_run["total_input_tokens"], long_run["total_output_tokens"]) == (200, 6)
    assert (long_run["run"], long_run["weights"], long_run["num_warmups"]) == ("long", "bf16", 1)
    assert "SIGTERM received, draining" in (tmp_path / "serve_bench/serve_bf16.log").read_text()
    # The multi-turn run: turn 2 re-reads turn 1's prompt from the prefix cache.
    assert "== multi-turn (bf16): TTFT per turn (ms)" in r.stdout and "turn-2/turn-1 TTFT ratio" in r.stdout
    turns = json.loads((tmp_path / "serve_bench/multi_turn_bf16.json").read_text())["turns"]
    assert len(turns) == 3 and turns[0]["cached_tokens"] == 0 and turns[1]["cached_tokens"] > 100


def test_gpu_script_reports_a_server_that_cannot_start(striker_bin, shared_dir, tmp_path):
    from server_fixture import free_port
    import os
    env = {**os.environ, "OUT": str(tmp_path), "STRIKER_SERVE_BENCH_DEVICE": "cpu",
           "STRIKER_GPU_CONFIG": str(shared_dir / "fixtures/flint-config/config.tiny.json"),
           "STRIKER_GPU_TOKENIZER": str(shared_dir / "fixtures/flint-tokenizer"),
           "STRIKER_SERVE_BENCH_FORMATS": "bf16", "STRIKER_SERVE_BENCH_PORT": str(free_port()),
           "STRIKER_SERVE_BENCH_SERVE_ARGS": "--max-model-len 99999999"}
    r = subprocess.run(["bash", str(ROOT / "scripts/gpu_serve_bench.sh"), str(pathlib.Path(striker_bin).parent)],
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "serve bench rc=1" in r.stdout
    assert "exited with 1 before ready" in r.stdout and "max_position_embeddings" in r.stdout


class FakeSse:
    """A one-route HTTP server that answers every POST with the given status and SSE body."""

    def __init__(self, status, events):
        import http.server
        import threading
        body = "".join(f"data: {e}\n\n" for e in events).encode()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                self.rfile.read(int(self.headers["Content-Length"]))
                self.send_response(status)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        self.httpd = http.server.HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()


def chunk(text):
    return json.dumps({"choices": [{"index": 0, "text": text, "finish_reason": None}]})


@pytest.mark.parametrize("status, events, error, tokens", [
    (200, [chunk("a"), chunk("b"), chunk("c"), json.dumps({"choices": [], "usage": {"completion_tokens": 5}}),
           "[DONE]"], "", 5),                                  # usage wins over the chunk count
    (200, [chunk("a"), chunk("b"), "[DONE]"], "", 2),          # no usage: one token per chunk
    (200, [chunk("a"), chunk("b")], "stream ended without [DONE]", 0),
    (200, [chunk("a"), json.dumps({"error": {"message": "boom", "code": 500}}), "[DONE]"],
     "in-stream error: boom", 0),
    (200, ["[DONE]"], "stream carried no output chunk", 0),
    (200, ["{not json"], "JSONDecodeError", 0),
    (503, ["x"], "HTTP 503", 0),
])
def test_client_classifies_streams(status, events, error, tokens):
    import serve_client
    fake = FakeSse(status, events)
    try:
        r = serve_client.stream_completion(serve_client.Endpoint(fake.url, "/v1/completions", timeout=10),
                                           {"prompt": [1, 2]}, 2)
    finally:
        fake.close()
    assert r.success == (error == ""), r.error
    assert error in r.error
    if r.success:
        assert r.output_tokens == tokens and r.generated_text == "".join("abc"[:len(r.chunk_times)])
        assert 0 < r.ttft <= r.latency and len(r.itl) == len(r.chunk_times) - 1


def test_goodput_counts_requests_meeting_every_slo():
    R = serve_metrics.RequestResult
    # ttft 0.1 s, e2el 1.0 s, 10 tokens -> tpot 0.1 s; and a slow one: ttft 0.5 s, tpot 0.3 s
    rs = [R(4, True, ttft=0.1, latency=1.0, output_tokens=10, start_time=1.0),
          R(4, True, ttft=0.5, latency=3.2, output_tokens=10, start_time=1.0),
          R(4, False, error="HTTP 500")]
    m = serve_metrics.calculate(rs, 2.0, ["ttft"], [99], {"ttft": 200.0, "tpot": 100.0 + 1e-9})
    assert m["request_goodput"] == pytest.approx(0.5)  # one of two completed, over 2 s
    assert m["request_throughput"] == pytest.approx(1.0) and m["failed"] == 1
    m = serve_metrics.calculate(rs, 2.0, ["ttft"], [99], {"e2el": 5000.0})
    assert m["request_goodput"] == pytest.approx(1.0)
    assert serve_metrics.calculate(rs, 2.0, ["ttft"], [99])["request_goodput"] is None
    assert "Request goodput (req/s):" in serve_metrics.report(m, ["ttft"], [99], None, float("inf"))
