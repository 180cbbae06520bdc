#!/usr/bin/env python3
"""One markdown table from several `serve_bench.py --save-result` JSON files (scripts/gpu_serve_bench.sh).

  python3 bench/serve_summary.py RESULT.json...

Columns: the run label and weight format (from --metadata run=... weights=...), the workload, how
many requests completed/failed, TTFT (for a single request: the prefill, as the client sees it) and
prompt tokens per second of it (concurrency 1 only),
TPOT and 1000/TPOT (decode tokens/s of one request), ITL, and output tokens/s over the whole run.
A file that is missing or unreadable is a row saying so, never a silent gap.
"""
import json
import sys


def fmt(v, digits=1):
    return "—" if v is None else f"{v:.{digits}f}"


def row(path):
    try:
        with open(path) as f:
            j = json.load(f)
    except (OSError, ValueError) as e:
        return f"| {path} | no result ({type(e).__name__}) |" + " |" * 10
    tpot = j.get("mean_tpot_ms")
    per_req = 1000.0 / tpot if tpot else None
    conc = j.get("max_concurrency") or "all"
    work = f"{j['num_prompts']} × {j['random_input_len']}→{j['random_output_len']}"
    # Prompt tokens per second of TTFT: the prefill rate, meaningful only one request at a time.
    prefill = None
    if j.get("max_concurrency") == 1 and j["completed"] and j.get("mean_ttft_ms"):
        prefill = j["total_input_tokens"] / j["completed"] / (j["mean_ttft_ms"] / 1000.0)
    return (f"| {j.get('run', '?')} | {j.get('weights', '?')} | {work} | {conc} | {j['completed']}/{j['failed']} "
            f"| {fmt(j.get('mean_ttft_ms'))} / {fmt(j.get('p99_ttft_ms'))} | {fmt(prefill, 0)} "
            f"| {fmt(tpot, 2)} / {fmt(j.get('p99_tpot_ms'), 2)} | {fmt(per_req)} "
            f"| {fmt(j.get('median_itl_ms'), 2)} / {fmt(j.get('p99_itl_ms'), 2)} "
            f"| {fmt(j['output_throughput'])} | {fmt(j['request_throughput'], 2)} |")


def main(paths):
    print("| run | weights | prompts × in→out | concurrency | ok/failed | TTFT mean / p99 ms | in/TTFT tok/s "
          "| TPOT mean / p99 ms | 1000/TPOT tok/s | ITL p50 / p99 ms | output tok/s | req/s |")
    print("|---|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for p in paths:
        print(row(p))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
