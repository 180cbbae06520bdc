"""Serving metrics of `bench/serve_bench.py`, with the names and definitions of `vllm bench serve`.

Per request (client-side clocks, `time.perf_counter`):
  TTFT  = send -> first streamed chunk that carries a choice
  E2EL  = send -> end of the stream
  TPOT  = (E2EL - TTFT) / (output_tokens - 1), only for requests with more than one output token
  ITL   = gaps between consecutive streamed chunks, pooled over all requests
Output tokens are the server's `usage.completion_tokens`; a stream without usage falls back to the
number of chunks (one token per chunk is what striker sends unless the detokenizer holds text back).
"""
import dataclasses
import math


@dataclasses.dataclass
class RequestResult:
    prompt_len: int
    success: bool = False
    error: str = ""
    ttft: float = 0.0              # seconds
    latency: float = 0.0           # seconds, send -> end of stream
    itl: list = dataclasses.field(default_factory=list)          # seconds between chunks
    chunk_times: list = dataclasses.field(default_factory=list)  # absolute perf_counter of each chunk
    output_tokens: int = 0
    generated_text: str = ""
    start_time: float = 0.0        # absolute perf_counter at send


def percentile(values, p):
    """Linear interpolation between closest ranks (numpy's default `percentile`)."""
    if not values:
        return 0.0
    s = sorted(values)
    if len(s) == 1:
        return float(s[0])
    pos = (len(s) - 1) * p / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return float(s[lo] + (s[hi] - s[lo]) * (pos - lo))


def mean(values):
    return sum(values) / len(values) if values else 0.0


def std(values):
    """Population standard deviation (numpy's default `std`)."""
    if not values:
        return 0.0
    m = mean(values)
    return math.sqrt(sum((v - m) ** 2 for v in values) / len(values))


def peak_output_rate(results):
    """Most output tokens in any one-second bucket from the first send (vLLM's 'peak output token throughput').
    Chunks are counted, scaled per request by output_tokens / chunks so held-back text does not undercount."""
    starts = [r.start_time for r in results if r.start_time]
    t0 = min(starts) if starts else 0.0
    buckets = {}
    for r in results:
        if not r.success or not r.chunk_times:
            continue
        per_chunk = r.output_tokens / len(r.chunk_times)
        for t in r.chunk_times:
            b = int(t - t0)
            buckets[b] = buckets.get(b, 0.0) + per_chunk
    return max(buckets.values()) if buckets else 0.0


def peak_concurrency(results):
    """Most requests in flight at once, from each request's send and end times."""
    events = []
    for r in results:
        if r.start_time:
            events.append((r.start_time, 1))
            events.append((r.start_time + r.latency, -1))
    events.sort(key=lambda e: (e[0], e[1]))  # an end before a start at the same instant
    cur = peak = 0
    for _, d in events:
        cur += d
        peak = max(peak, cur)
    return peak


def meets_slos(r, slos):
    """goodput: a completed request counts only if each given SLO (ms) holds (DistServe's definition)."""
    values = {"ttft": r.ttft, "e2el": r.latency,
              "tpot": (r.latency - r.ttft) / (r.output_tokens - 1) if r.output_tokens > 1 else 0.0}
    return all(values[k] * 1000.0 <= limit for k, limit in slos.items())


def calculate(results, duration, selected, percentiles, slos=None):
    """Aggregates RequestResults into vLLM's BenchmarkMetrics fields (times in ms)."""
    ok = [r for r in results if r.success]
    ttfts = [r.ttft for r in ok]
    e2els = [r.latency for r in ok]
    tpots = [(r.latency - r.ttft) / (r.output_tokens - 1) for r in ok if r.output_tokens > 1]
    itls = [g for r in ok for g in r.itl]
    total_in = sum(r.prompt_len for r in ok)
    total_out = sum(r.output_tokens for r in ok)
    m = {
        "duration": duration,
        "completed": len(ok),
        "failed": len(results) - len(ok),
        "total_input_tokens": total_in,
        "total_output_tokens": total_out,
        "request_throughput": len(ok) / duration if duration > 0 else 0.0,
        "request_goodput": (sum(meets_slos(r, slos) for r in ok) / duration if duration > 0 else 0.0)
        if slos else None,
        "output_throughput": total_out / duration if duration > 0 else 0.0,
        "total_token_throughput": (total_in + total_out) / duration if duration > 0 else 0.0,
        "max_output_tokens_per_s": peak_output_rate(results),
        "max_concurrent_requests": peak_concurrency(results),
    }
    series = {"ttft": ttfts, "tpot": tpots, "itl": itls, "e2el": e2els}
    for name in selected:
        vals_ms = [v * 1000.0 for v in series[name]]
        m[f"mean_{name}_ms"] = mean(vals_ms)
        m[f"median_{name}_ms"] = percentile(vals_ms, 50)
        m[f"std_{name}_ms"] = std(vals_ms)
        for p in percentiles:
            m[f"p{format_pct(p)}_{name}_ms"] = percentile(vals_ms, p)
    return m


def format_pct(p):
    """99 -> '99', 99.9 -> '99.9' (the key and label vLLM uses)."""
    return str(int(p)) if float(p).is_integer() else str(p)


HEADERS = {
    "ttft": ("Time to First Token", "TTFT"),
    "tpot": ("Time per Output Token (excl. 1st token)", "TPOT"),
    "itl": ("Inter-token Latency", "ITL"),
    "e2el": ("End-to-end Latency", "E2EL"),
}


def report(m, selected, percentiles, max_concurrency, request_rate):
    """The result block in `vllm bench serve`'s layout: 40-column labels, values after them."""
    lines = ["{:=^50}".format(" Serving Benchmark Result ")]

    def row(label, value, fmt="{:<10.2f}"):
        lines.append("{:<40} ".format(label) + (fmt.format(value) if not isinstance(value, str) else value))

    row("Successful requests:", m["completed"], "{:<10}")
    row("Failed requests:", m["failed"], "{:<10}")
    if max_concurrency is not None:
        row("Maximum request concurrency:", max_concurrency, "{:<10}")
    row("Request rate configured (RPS):", "{:<10}".format("inf" if math.isinf(request_rate) else f"{request_rate:.2f}"))
    row("Benchmark duration (s):", m["duration"])
    row("Total input tokens:", m["total_input_tokens"], "{:<10}")
    row("Total generated tokens:", m["total_output_tokens"], "{:<10}")
    row("Request throughput (req/s):", m["request_throughput"])
    if m.get("request_goodput") is not None:
        row("Request goodput (req/s):", m["request_goodput"])
    row("Output token throughput (tok/s):", m["output_throughput"])
    row("Peak output token throughput (tok/s):", m["max_output_tokens_per_s"])
    row("Peak concurrent requests:", m["max_concurrent_requests"], "{:<10}")
    row("Total token throughput (tok/s):", m["total_token_throughput"])
    for name in selected:
        title, short = HEADERS[name]
        lines.append("{:-^50}".format(title))
        row(f"Mean {short} (ms):", m[f"mean_{name}_ms"])
        row(f"Median {short} (ms):", m[f"median_{name}_ms"])
        for p in percentiles:
            row(f"P{format_pct(p)} {short} (ms):", m[f"p{format_pct(p)}_{name}_ms"])
    lines.append("=" * 50)
    return "\n".join(lines)
