#!/usr/bin/env python3
"""Online serving benchmark for striker (or any OpenAI-compatible server): `vllm bench serve`'s
flags, metric names and printout, for the random dataset over streaming /v1/completions.

  python3 bench/serve_bench.py --base-url http://127.0.0.1:8000 --dataset-name random \
      --random-input-len 1024 --random-output-len 128 --num-prompts 64 --max-concurrency 64 \
      --ignore-eos --percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,90,99 \
      --save-result --result-filename out.json

Prompts are random token ids (the completions API accepts a list of ids as `prompt`), so the
input lengths are exact and no tokenizer is needed on the client. Standard library only.
Differences from vLLM: readiness is a /health poll instead of a test request (a 100K-token test
request would double the run), and ids are drawn from [0, --random-max-token-id).
"""
import argparse
import concurrent.futures
import datetime
import http.client
import json
import math
import os
import random
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_client  # noqa: E402
import serve_metrics  # noqa: E402

METRIC_NAMES = ("ttft", "tpot", "itl", "e2el")
MAX_THREADS = 1024  # one client thread per in-flight request


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--backend", default="openai", help="openai (streaming /v1/completions) is the only one")
    p.add_argument("--base-url", default=None, help="server URL, e.g. http://127.0.0.1:8000 (else --host/--port)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--endpoint", default="/v1/completions")
    p.add_argument("--model", default=None, help="model name sent in requests (default: the first of /v1/models)")
    p.add_argument("--dataset-name", default="random", help="random is the only one")
    p.add_argument("--random-input-len", type=int, default=1024)
    p.add_argument("--random-output-len", type=int, default=128)
    p.add_argument("--random-range-ratio", type=float, default=0.0,
                   help="lengths uniform in [len*(1-r), len*(1+r)]")
    p.add_argument("--random-prefix-len", type=int, default=0, help="random ids shared by every prompt, before it")
    p.add_argument("--random-max-token-id", type=int, default=100000,
                   help="prompt ids are uniform in [0, this) (striker extension; must be <= the vocabulary)")
    p.add_argument("--num-prompts", type=int, default=1000)
    p.add_argument("--max-concurrency", type=int, default=None)
    p.add_argument("--request-rate", type=float, default=float("inf"),
                   help="requests/s with gamma-distributed gaps (Poisson at burstiness 1); inf = all at once")
    p.add_argument("--burstiness", type=float, default=1.0)
    p.add_argument("--ignore-eos", action="store_true", help="send ignore_eos so every request makes max_tokens")
    p.add_argument("--temperature", type=float, default=None)
    p.add_argument("--top-p", type=float, default=None)
    p.add_argument("--top-k", type=int, default=None)
    p.add_argument("--extra-body", default=None, help="JSON object merged into every request body")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--num-warmups", type=int, default=0, help="unmeasured requests of the first prompt's shape first (fresh ids: "
                   "the prefix cache must not serve the measured prompt)")
    p.add_argument("--percentile-metrics", default="ttft,tpot,itl", help="comma list of ttft,tpot,itl,e2el")
    p.add_argument("--metric-percentiles", default="99", help="comma list, e.g. 50,90,99")
    p.add_argument("--goodput", nargs="+", default=None,
                   help="SLOs as KEY:MS (ttft, tpot, e2el); adds request goodput (completed requests/s meeting all)")
    p.add_argument("--save-result", action="store_true")
    p.add_argument("--save-detailed", action="store_true", help="also per-request lists in the JSON")
    p.add_argument("--result-dir", default=None)
    p.add_argument("--result-filename", default=None)
    p.add_argument("--metadata", nargs="*", default=[], help="KEY=VALUE pairs stored in the JSON")
    p.add_argument("--ready-check-timeout-sec", type=float, default=600.0,
                   help="wait this long for /health to answer 200 (0 = do not wait)")
    p.add_argument("--request-timeout", type=float, default=3600.0, help="socket timeout per read, seconds")
    p.add_argument("--disable-tqdm", action="store_true", help="no progress lines on stderr")
    a = p.parse_args(argv)
    check_args(p, a)
    return a


def check_args(p, a):
    if a.backend not in ("openai", "vllm"):
        p.error(f"--backend {a.backend}: only openai (streaming /v1/completions) is implemented")
    if a.endpoint.rstrip("/") != "/v1/completions":
        p.error(f"--endpoint {a.endpoint}: only /v1/completions is implemented (token-id prompts)")
    if a.dataset_name != "random":
        p.error(f"--dataset-name {a.dataset_name}: only random is implemented")
    if a.num_prompts < 1 or a.random_input_len < 1 or a.random_output_len < 1:
        p.error("--num-prompts, --random-input-len and --random-output-len must be at least 1")
    if not 0.0 <= a.random_range_ratio < 1.0:
        p.error("--random-range-ratio must be in [0, 1)")
    if a.random_prefix_len < 0 or a.random_max_token_id < 1 or a.num_warmups < 0:
        p.error("--random-prefix-len and --num-warmups must be >= 0, --random-max-token-id >= 1")
    if a.max_concurrency is not None and not 1 <= a.max_concurrency <= MAX_THREADS:
        p.error(f"--max-concurrency must be in [1, {MAX_THREADS}]")
    if not a.request_rate > 0 or not a.burstiness > 0:
        p.error("--request-rate and --burstiness must be positive")
    a.selected = [m.strip() for m in a.percentile_metrics.split(",") if m.strip()]
    bad = [m for m in a.selected if m not in METRIC_NAMES]
    if bad:
        p.error(f"--percentile-metrics: unknown {bad}; choose from {','.join(METRIC_NAMES)}")
    try:
        a.percentiles = [float(x) for x in a.metric_percentiles.split(",") if x.strip()]
    except ValueError:
        p.error(f"--metric-percentiles must be numbers, got {a.metric_percentiles!r}")
    if any(not 0 < x <= 100 for x in a.percentiles):
        p.error("--metric-percentiles must be in (0, 100]")
    try:
        a.extra = json.loads(a.extra_body) if a.extra_body else {}
    except ValueError as e:
        p.error(f"--extra-body is not JSON: {e}")
    if not isinstance(a.extra, dict):
        p.error("--extra-body must be a JSON object")
    a.slos = {}
    for item in a.goodput or []:
        key, _, ms = item.partition(":")
        try:
            a.slos[key] = float(ms)
        except ValueError:
            p.error(f"--goodput wants KEY:MILLISECONDS, got {item!r}")
        if key not in ("ttft", "tpot", "e2el") or not a.slos[key] >= 0:
            p.error(f"--goodput: {item!r}: KEY is ttft, tpot or e2el and MILLISECONDS >= 0")
    for kv in a.metadata:
        if "=" not in kv:
            p.error(f"--metadata wants KEY=VALUE, got {kv!r}")


def random_requests(a):
    """[(prompt ids, output len)]: lengths uniform around the targets, ids uniform, all from --seed."""
    rng = random.Random(a.seed)
    r = a.random_range_ratio

    def length(target):
        return rng.randint(max(1, math.floor(target * (1 - r))), max(1, math.ceil(target * (1 + r))))

    prefix = [rng.randrange(a.random_max_token_id) for _ in range(a.random_prefix_len)]
    out = []
    for _ in range(a.num_prompts):
        n_in, n_out = length(a.random_input_len), length(a.random_output_len)
        out.append((prefix + [rng.randrange(a.random_max_token_id) for _ in range(n_in)], n_out))
    return out


def payload(a, model, prompt, max_tokens):
    body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "stream": True,
            "stream_options": {"include_usage": True}}
    if a.ignore_eos:
        body["ignore_eos"] = True
    for key, val in (("temperature", a.temperature), ("top_p", a.top_p), ("top_k", a.top_k)):
        if val is not None:
            body[key] = val
    body.update(a.extra)
    return body


def wait_ready(ep, timeout):
    deadline = time.time() + timeout
    last = "no answer"
    while True:
        try:
            status, _ = ep.get_json("/health")
            if status == 200:
                return
            last = f"HTTP {status}"
        except (OSError, http.client.HTTPException) as e:
            last = f"{type(e).__name__}: {e}"
        if time.time() >= deadline:
            raise SystemExit(f"error: server at {ep.host}:{ep.port} not ready after {timeout:.0f} s ({last})")
        time.sleep(0.5)


def served_model(ep):
    try:
        status, body = ep.get_json("/v1/models")
    except (OSError, http.client.HTTPException) as e:
        raise SystemExit(f"error: GET /v1/models failed ({type(e).__name__}: {e}); pass --model")
    if status != 200 or not isinstance(body, dict) or not body.get("data"):
        raise SystemExit(f"error: GET /v1/models answered HTTP {status}; pass --model")
    return body["data"][0]["id"]


def run_requests(ep, a, model, reqs, label):
    """Sends reqs at --request-rate, at most --max-concurrency in flight; returns (results, seconds)."""
    workers = a.max_concurrency or len(reqs)
    gaps = random.Random(a.seed + 1)
    results = [None] * len(reqs)
    done = [0]
    lock = threading.Lock()

    def one(i):
        prompt, n_out = reqs[i]
        results[i] = serve_client.stream_completion(ep, payload(a, model, prompt, n_out), len(prompt))
        with lock:
            done[0] += 1
            step = max(1, len(reqs) // 10)
            if not a.disable_tqdm and (done[0] % step == 0 or done[0] == len(reqs)):
                print(f"{label}: {done[0]}/{len(reqs)} requests done", file=sys.stderr, flush=True)

    if workers > MAX_THREADS:
        print(f"note: at most {MAX_THREADS} requests in flight (one thread each); pass --max-concurrency",
              file=sys.stderr)
    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(max_workers=min(workers, MAX_THREADS)) as pool:
        futures = []
        next_at = start
        for i in range(len(reqs)):
            if not math.isinf(a.request_rate):
                # Gamma gaps with mean 1/rate; shape = burstiness (1 = Poisson arrivals).
                next_at += gaps.gammavariate(a.burstiness, 1.0 / (a.request_rate * a.burstiness))
                delay = next_at - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
            futures.append(pool.submit(one, i))
        for f in futures:
            f.result()
    return results, time.perf_counter() - start


def result_json(a, model, m, results, reqs):
    out = {
        "date": datetime.datetime.now().strftime("%Y%m%d-%H%M%S"),
        "endpoint_type": a.backend, "backend": a.backend, "model_id": model, "tokenizer_id": None,
        "num_prompts": a.num_prompts, "request_rate": "inf" if math.isinf(a.request_rate) else a.request_rate,
        "burstiness": a.burstiness, "max_concurrency": a.max_concurrency,
        "random_input_len": a.random_input_len, "random_output_len": a.random_output_len,
        "random_range_ratio": a.random_range_ratio, "random_prefix_len": a.random_prefix_len,
        "ignore_eos": a.ignore_eos, "num_warmups": a.num_warmups, "seed": a.seed,
    }
    out.update(m)
    if a.save_detailed:
        out["input_lens"] = [r.prompt_len for r in results]
        out["output_lens"] = [r.output_tokens if r.success else 0 for r in results]
        out["requested_output_lens"] = [n_out for _, n_out in reqs]
        out["ttfts"] = [r.ttft if r.success else 0.0 for r in results]
        out["e2els"] = [r.latency if r.success else 0.0 for r in results]
        out["itls"] = [r.itl if r.success else [] for r in results]
        out["generated_texts"] = [r.generated_text for r in results]
        out["errors"] = [r.error for r in results]
    for kv in a.metadata:
        k, _, v = kv.partition("=")
        out[k] = v
    return out


def main(argv=None):
    a = parse_args(sys.argv[1:] if argv is None else argv)
    ep = serve_client.Endpoint(a.base_url or f"http://{a.host}:{a.port}", a.endpoint,
                               os.environ.get("OPENAI_API_KEY", ""), a.request_timeout)
    if a.ready_check_timeout_sec > 0:
        wait_ready(ep, a.ready_check_timeout_sec)
    model = a.model or served_model(ep)
    reqs = random_requests(a)
    print(f"{a.num_prompts} random prompts of ~{a.random_input_len} ids -> {a.random_output_len} tokens, "
          f"rate {a.request_rate}, max concurrency {a.max_concurrency}, model {model}", flush=True)
    if a.num_warmups:
        # Same length as the first prompt but other ids (and the --random-prefix-len prefix
        # only when one was asked for), so automatic prefix caching cannot turn the measured
        # prefill into a cache hit.
        ids = random.Random(a.seed + 2)
        n_prefix = a.random_prefix_len
        warm_reqs = [(reqs[0][0][:n_prefix] + [ids.randrange(a.random_max_token_id)
                                                for _ in range(len(reqs[0][0]) - n_prefix)], reqs[0][1])
                     for _ in range(a.num_warmups)]
        warm, _ = run_requests(ep, a, model, warm_reqs, "warmup")
        failed = [r.error for r in warm if not r.success]
        if failed:
            raise SystemExit(f"error: warmup request failed: {failed[0]}")
    results, duration = run_requests(ep, a, model, reqs, "benchmark")
    m = serve_metrics.calculate(results, duration, a.selected, a.percentiles, a.slos)
    print(serve_metrics.report(m, a.selected, a.percentiles, a.max_concurrency, a.request_rate), flush=True)
    errors = [r.error for r in results if not r.success]
    for e in sorted(set(errors))[:5]:
        print(f"failed request: {e}", file=sys.stderr)
    if a.save_result or a.save_detailed or a.result_filename:
        name = a.result_filename or (
            f"{a.backend}-{'inf' if math.isinf(a.request_rate) else a.request_rate}qps-"
            f"concurrency{a.max_concurrency}-{os.path.basename(model.rstrip('/'))}-"
            f"{datetime.datetime.now().strftime('%Y%m%d-%H%M%S')}.json")
        if a.result_dir:
            os.makedirs(a.result_dir, exist_ok=True)
        path = os.path.join(a.result_dir, name) if a.result_dir else name
        with open(path, "w") as f:
            json.dump(result_json(a, model, m, results, reqs), f, indent=1)
        print(f"result saved to {path}", file=sys.stderr)
    return 0 if m["completed"] > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
