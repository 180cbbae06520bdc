#!/usr/bin/env python3
"""Each kernel's share of a replayed decode step, from tests/cuda/profiling/kernel_trace.cpp's CSV.

A step graph is a chain: every kernel waits (griddepcontrol.wait) for the one in front. So a
kernel's cost on the chain is the time from its predecessor's end to its own end ("share"); the
shares add up to the step. "lead" is how long its CTAs were already running before the predecessor
ended (weights requested before the wait); "busy" is its start-to-end time. Per kernel position
the median over the replays is taken, then positions are summed per kernel (name and grid).

usage: step_timeline.py TRACE.csv [title]
"""
import csv
import statistics
import sys
from collections import defaultdict


def short(name):
    # striker::cuda::(anonymous namespace)::gemv_kernel<4; 8; ...> -> gemv_kernel<4;8;...>
    name = name.replace("(anonymous namespace)::", "").replace("striker::cuda::", "")
    for ns in ("decode::", "detail::"):
        name = name.replace(ns, "")
    name = name.replace(" ", "")
    return name if len(name) <= 60 else name[:57] + "..."


def main():
    path = sys.argv[1]
    title = sys.argv[2] if len(sys.argv) > 2 else path
    replays = defaultdict(list)
    with open(path) as f:
        for r in csv.DictReader(f):
            if r["graph_id"] == "0":
                continue
            replays[(r["graph_id"], r["correlation"])].append(r)
    if not replays:
        print(f"{title}: no graph kernels in {path}")
        return 1
    # The replays of the most used graph (the timed steps), in launch order; the first is dropped
    # when there are enough (it may still pay first-use costs).
    by_graph = defaultdict(list)
    for (g, c), ks in replays.items():
        by_graph[g].append((int(c), ks))
    g, runs = max(by_graph.items(), key=lambda kv: len(kv[1]))
    runs.sort()
    runs = [ks for _, ks in runs]
    if len(runs) > 3:
        runs = runs[1:]
    n = len(runs[0])
    runs = [ks for ks in runs if len(ks) == n]
    shares = [[] for _ in range(n)]
    leads = [[] for _ in range(n)]
    busys = [[] for _ in range(n)]
    steps = []
    keys = None
    for ks in runs:
        ks = sorted(ks, key=lambda r: (int(r["end_ns"]), int(r["start_ns"])))
        start0 = min(int(r["start_ns"]) for r in ks)
        steps.append((int(ks[-1]["end_ns"]) - start0) / 1e3)
        prev_end = start0
        key_row = []
        for i, r in enumerate(ks):
            s, e = int(r["start_ns"]), int(r["end_ns"])
            shares[i].append((e - prev_end) / 1e3)
            leads[i].append((prev_end - s) / 1e3)
            busys[i].append((e - s) / 1e3)
            prev_end = e
            key_row.append(f'{short(r["name"])} [{r["grid_x"]}x{r["grid_y"]}x{r["grid_z"]}]')
        if keys is None:
            keys = key_row
    med = lambda xs: statistics.median(xs)
    step = med(steps)
    agg = defaultdict(lambda: [0, 0.0, 0.0, 0.0])
    order = []
    for i, k in enumerate(keys):
        if k not in agg:
            order.append(k)
        a = agg[k]
        a[0] += 1
        a[1] += med(shares[i])
        a[2] += med(leads[i])
        a[3] += med(busys[i])
    total = sum(a[1] for a in agg.values())
    print(f"\n== {title}: graph {g}, {len(runs)} replays, {n} kernels, step {step:.1f} us "
          f"(first start to last end, median) ==")
    print(f"{'kernel [grid]':<72}{'calls':>6}{'share/call':>11}{'lead/call':>10}{'busy/call':>10}"
          f"{'ms/step':>9}{'%':>6}")
    for k in sorted(order, key=lambda k: -agg[k][1]):
        c, sh, ld, bz = agg[k]
        print(f"{k:<72}{c:>6}{sh / c:>11.2f}{ld / c:>10.2f}{bz / c:>10.2f}{sh / 1e3:>9.3f}{100 * sh / total:>6.1f}")
    print(f"{'sum of shares':<72}{n:>6}{'':>31}{total / 1e3:>9.3f}")
    # One middle layer as a sequence: between the 24th and 25th use of the earliest kernel (name and
    # grid) that runs once per MoE layer or more often (Flint: 47 MoE of 49 layers).
    counts = defaultdict(int)
    for k in keys:
        counts[k] += 1
    per_layer = [k for k in keys if 47 <= counts[k] <= 49]
    starts = [i for i, k in enumerate(keys) if per_layer and k == per_layer[0]]
    if len(starts) > 25:
        a, b = starts[24], starts[25]
        print(f"-- one layer (positions {a}..{b - 1}), median us --")
        for i in range(a, b):
            print(f"  {keys[i]:<72} share {med(shares[i]):6.2f}  lead {med(leads[i]):6.2f}  busy {med(busys[i]):6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
