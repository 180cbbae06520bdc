#!/usr/bin/env python3
"""Each kernel's share of a replayed decode step, from tests/cuda/profiling/kernel_trace.cpp's CSV.

A step graph is a chain: every kernel waits (griddepcontrol.wait) for the one in front. So a
kernel's cost on the chain is the time from its predecessor's end to its own end ("share"); the
shares add up to the step. "lead" is how long its CTAs were already running before the predecessor
ended (weights requested before the wait); "busy" is its start-to-end time. Per kernel position
the median over the replays is taken, then positions are summed per kernel (name and grid).

usage: step_timeline.py TRACE.csv [title]
       step_timeline.py A.csv --compare B.csv [title]   (per kernel family: ms/step in A and B)
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


def family(key):
    """gemv_kernel<4;8;0;true> [1280x1x1] -> gemv_kernel"""
    return key.split(" [")[0].split("<")[0]


class Timeline:
    """The median replay of the most replayed graph in a trace."""

    def __init__(self, path):
        replays = defaultdict(list)
        with open(path) as f:
            for r in csv.DictReader(f):
                if r["graph_id"] != "0":
                    replays[(r["graph_id"], r["correlation"])].append(r)
        self.ok = bool(replays)
        if not self.ok:
            return
        # The replays of the most used graph (the timed steps), in launch order; the first is
        # dropped when there are enough (it may still pay first-use costs).
        by_graph = defaultdict(list)
        for (g, c), ks in replays.items():
            by_graph[g].append((int(c), ks))
        self.graph, runs = max(by_graph.items(), key=lambda kv: len(kv[1]))
        runs.sort()
        runs = [ks for _, ks in runs]
        if len(runs) > 3:
            runs = runs[1:]
        n = len(runs[0])
        runs = [ks for ks in runs if len(ks) == n]
        shares, leads, busys = ([[] for _ in range(n)] for _ in range(3))
        steps = []
        self.keys = None
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
            if self.keys is None:
                self.keys = key_row
        med = statistics.median
        self.replays, self.n, self.step = len(runs), n, med(steps)
        self.share = [med(x) for x in shares]
        self.lead = [med(x) for x in leads]
        self.busy = [med(x) for x in busys]
        self.agg = defaultdict(lambda: [0, 0.0, 0.0, 0.0])  # key -> calls, share, lead, busy (us)
        self.order = []
        for i, k in enumerate(self.keys):
            if k not in self.agg:
                self.order.append(k)
            a = self.agg[k]
            a[0] += 1
            a[1] += self.share[i]
            a[2] += self.lead[i]
            a[3] += self.busy[i]
        self.total = sum(a[1] for a in self.agg.values())

    def families(self):
        f = defaultdict(lambda: [0, 0.0])
        for k, a in self.agg.items():
            f[family(k)][0] += a[0]
            f[family(k)][1] += a[1]
        return f


def report(t, title):
    print(f"\n== {title}: graph {t.graph}, {t.replays} replays, {t.n} kernels, step {t.step:.1f} us "
          f"(first start to last end, median) ==")
    print(f"{'kernel [grid]':<72}{'calls':>6}{'share/call':>11}{'lead/call':>10}{'busy/call':>10}"
          f"{'ms/step':>9}{'%':>6}")
    for k in sorted(t.order, key=lambda k: -t.agg[k][1]):
        c, sh, ld, bz = t.agg[k]
        print(f"{k:<72}{c:>6}{sh / c:>11.2f}{ld / c:>10.2f}{bz / c:>10.2f}{sh / 1e3:>9.3f}{100 * sh / t.total:>6.1f}")
    print(f"{'sum of shares':<72}{t.n:>6}{'':>31}{t.total / 1e3:>9.3f}")
    # One middle layer as a sequence: between the 24th and 25th use of the earliest kernel (name and
    # grid) that runs once per MoE layer or more often (Flint: 47 MoE of 49 layers).
    counts = defaultdict(int)
    for k in t.keys:
        counts[k] += 1
    per_layer = [k for k in t.keys if 47 <= counts[k] <= 49]
    starts = [i for i, k in enumerate(t.keys) if per_layer and k == per_layer[0]]
    if len(starts) > 25:
        a, b = starts[24], starts[25]
        print(f"-- one layer (positions {a}..{b - 1}), median us --")
        for i in range(a, b):
            print(f"  {t.keys[i]:<72} share {t.share[i]:6.2f}  lead {t.lead[i]:6.2f}  busy {t.busy[i]:6.2f}")


def compare(a, b, title):
    fa, fb = a.families(), b.families()
    names = sorted(set(fa) | set(fb), key=lambda n: -max(fa.get(n, [0, 0])[1], fb.get(n, [0, 0])[1]))
    print(f"\n== {title}: step {a.step:.1f} -> {b.step:.1f} us ({b.step - a.step:+.1f}), "
          f"kernels {a.n} -> {b.n} ==")
    print(f"{'kernel family':<44}{'calls A':>8}{'ms A':>9}{'calls B':>8}{'ms B':>9}{'B - A':>9}")
    for n in names:
        ca, sa = fa.get(n, [0, 0.0])
        cb, sb = fb.get(n, [0, 0.0])
        print(f"{n[:43]:<44}{ca:>8}{sa / 1e3:>9.3f}{cb:>8}{sb / 1e3:>9.3f}{(sb - sa) / 1e3:>+9.3f}")


def main():
    args = sys.argv[1:]
    if not args:
        print(__doc__)
        return 2
    if len(args) >= 3 and args[1] == "--compare":
        a, b = Timeline(args[0]), Timeline(args[2])
        title = args[3] if len(args) > 3 else f"{args[0]} vs {args[2]}"
        for t, p in ((a, args[0]), (b, args[2])):
            if not t.ok:
                print(f"{title}: no graph kernels in {p}")
                return 1
        compare(a, b, title)
        return 0
    t = Timeline(args[0])
    title = args[1] if len(args) > 1 else args[0]
    if not t.ok:
        print(f"{title}: no graph kernels in {args[0]}")
        return 1
    report(t, title)
    return 0


if __name__ == "__main__":
    sys.exit(main())
