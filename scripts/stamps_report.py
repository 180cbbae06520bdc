#!/usr/bin/env python3
"""Reads the per-CTA stamps of a profiling build (src/backends/cuda/common/stamps.cuh) and prints, per kernel
and predecessor, where the time of the replayed decode chain goes.

usage: stamps_report.py STAMPS.bin [--steps N] [--skip FRACTION]

Each launch is one kernel's CTAs (a kind's records in entry order, split where a block index repeats or where
10 µs pass between two entries: every CTA of a grid enters before its dependent grid is launched, so the entry
counter orders launches). The chain
is the launches in entry order. Per (kernel, predecessor, CTAs) the medians over launches of:
  boundary  first CTA past its wait - the predecessor's last CTA exit (global timer)
  span      last CTA exit - first CTA past its wait: the kernel's time on the chain after its wait
  share     last CTA exit - the predecessor's last CTA exit
  ahead     how long a CTA was resident before its wait released (median CTA)
and the phases inside a CTA (SM cycles between consecutive points, in µs): for the median CTA and for the CTA
that exits last. Points: 0 entry, 1 past the PDL wait, 2-6 the kernel's own (stamps.cuh), 7 exit.
"""
import argparse
import sys

import numpy as np

KINDS = {1: "nvfp4_gemv", 2: "nvfp4_gate_up", 3: "bf16_gemv", 4: "bf16_gate_up", 5: "attn_cluster", 6: "attn_split",
         7: "attn_combine", 8: "router", 9: "nvfp4_moe_gate_up", 10: "nvfp4_moe_down", 11: "moe_gate_up",
         12: "moe_down"}
POINTS = 8
# A launch's CTAs enter within a few µs of each other; the same kernel's next launch enters a layer later at the
# latest. The gap rule resynchronises the split where the ring's first launch lost its first CTAs (a repeated
# block index alone would then cut every later launch one CTA late).
GAP_NS = 10_000


def load(path):
    with open(path, "rb") as f:
        words, n = np.frombuffer(f.read(8), np.uint32)
        rec = np.frombuffer(f.read(int(n) * int(words) * 8), np.uint64).reshape(int(n), int(words))
    if int(words) != 2 + 2 * POINTS:
        sys.exit(f"{path}: {words} words per record, this reader knows {2 + 2 * POINTS}")
    h = rec[:, 0]
    return {
        "kind": (h & np.uint64(0xFF)).astype(np.int64),
        "sm": ((h >> np.uint64(8)) & np.uint64(0xFFF)).astype(np.int64),
        "block": (h >> np.uint64(20)).astype(np.int64),  # x | y << 20 | z << 32: unique within a grid
        "seq": rec[:, 1].astype(np.int64),
        "g": rec[:, 2:2 + POINTS].astype(np.int64),
        "c": rec[:, 2 + POINTS:2 + 2 * POINTS].astype(np.int64),
    }


def launches(d):
    """Index arrays, one per launch, in chain order."""
    out = []
    for k in np.unique(d["kind"]):
        idx = np.where(d["kind"] == k)[0]
        idx = idx[np.argsort(d["seq"][idx], kind="stable")]
        seen, cur, last = set(), [], None
        for i in idx:
            b, g0 = int(d["block"][i]), int(d["g"][i, 0])
            if b in seen or (last is not None and g0 - last > GAP_NS):
                out.append(np.array(cur))
                seen, cur = set(), []
            seen.add(b)
            cur.append(i)
            last = g0
        if cur:
            out.append(np.array(cur))
    out.sort(key=lambda a: int(d["seq"][a].min()))
    return out


def release(d, i):
    g = d["g"][i]
    return np.where(g[:, 1] > 0, g[:, 1], g[:, 0])  # CTAs without a wait stamp: their entry


def cycles_per_ns(d):
    g, c = d["g"], d["c"]
    dg, dc = g[:, POINTS - 1] - g[:, 0], c[:, POINTS - 1] - c[:, 0]
    ok = (dg > 3000) & (g[:, POINTS - 1] > 0)
    return float(np.median(dc[ok] / dg[ok])) if ok.any() else float("nan")


def phases(d, rows, ghz):
    """Median µs between consecutive reached points, keyed 'a-b'."""
    c = d["c"][rows]
    res = {}
    for a in range(POINTS - 1):
        for b in range(a + 1, POINTS):
            ok = (c[:, a] > 0) & (c[:, b] > 0) if a > 0 else (c[:, b] > 0)
            # consecutive reached points only: no point between a and b reached
            if a + 1 < b:
                ok &= ~np.any(c[:, a + 1:b] > 0, axis=1)
            if ok.any():
                res[f"{a}-{b}"] = float(np.median(c[ok, b] - c[ok, a])) / ghz / 1000.0
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("stamps")
    ap.add_argument("--steps", type=int, default=0, help="steps recorded after --skip (default: inferred)")
    ap.add_argument("--skip", type=float, default=0.3, help="fraction of the launches left out at the start")
    a = ap.parse_args()
    d = load(a.stamps)
    ghz = cycles_per_ns(d)
    L = launches(d)
    L = L[int(len(L) * a.skip):]
    print(f"{len(d['seq'])} CTA records, {len(L)} launches after the first {a.skip:.0%}; SM clock {ghz:.3f} GHz")
    groups = {}
    prev = None
    for i in L:
        kind = KINDS.get(int(d["kind"][i[0]]), str(int(d["kind"][i[0]])))
        rel = release(d, i)
        first_rel, last_exit = int(rel.min()), int(d["g"][i, POINTS - 1].max())
        if prev is not None:
            pkind, pexit = prev
            key = (kind, pkind, len(i))
            gr = groups.setdefault(key, {"b": [], "s": [], "sh": [], "ahead": [], "rows": [], "last": [],
                                         "order": len(groups)})
            gr["b"].append(first_rel - pexit)
            gr["s"].append(last_exit - first_rel)
            gr["sh"].append(last_exit - pexit)
            gr["ahead"].append(float(np.median(rel - d["g"][i, 0])))
            gr["rows"].append(i)
            gr["last"].append(i[int(np.argmax(d["g"][i, POINTS - 1]))])
        prev = (kind, last_exit)
    steps = a.steps or min((len(g["b"]) for g in groups.values() if len(g["b"]) >= 3), default=0)
    print(f"steps: {steps} ({'given' if a.steps else 'the rarest group of at least 3 launches: one launch a step'})")
    print(f"{'kernel <- predecessor':<38}{'CTAs':>6}{'n':>7}{'ahead':>8}{'bound':>8}{'span':>8}{'share':>8}"
          f"{'/step':>8}   phases µs (median CTA | last CTA)")
    total = 0.0
    for (kind, pkind, n), gr in sorted(groups.items(), key=lambda kv: kv[1]["order"]):
        if len(gr["b"]) < 3:
            continue
        med = lambda v: float(np.median(v)) / 1000.0
        per_step = med(gr["sh"]) * len(gr["sh"]) / steps if steps else float("nan")
        total += per_step if steps else 0.0
        rows = np.concatenate(gr["rows"])
        pm = phases(d, rows, ghz)
        pl = phases(d, np.array(gr["last"]), ghz)
        ph = " ".join(f"{k}:{pm[k]:.2f}|{pl.get(k, float('nan')):.2f}" for k in sorted(pm))
        print(f"{kind + ' <- ' + pkind:<38}{n:>6}{len(gr['b']):>7}{np.median(gr['ahead']) / 1000:>8.2f}"
              f"{med(gr['b']):>8.2f}{med(gr['s']):>8.2f}{med(gr['sh']):>8.2f}{per_step:>8.1f}   {ph}")
    if steps:
        print(f"sum of the stamped kernels' shares per step: {total:.1f} µs (the chain's other kernels are not stamped)")


if __name__ == "__main__":
    main()
