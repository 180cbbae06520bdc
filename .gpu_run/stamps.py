#!/usr/bin/env python3
"""Session 15 experiment: per-CTA stamps of the one-token NVFP4 MoE kernels (nvfp4_moe.cu, STRIKER_STAMPS).
usage: stamps.py STAMPS.bin [TRACE.csv]"""
import csv, sys
import numpy as np

W = 16
def load(path):
    out = []
    with open(path, "rb") as f:
        for _ in range(2):
            n = int(np.frombuffer(f.read(4), np.uint32)[0])
            out.append(np.frombuffer(f.read(n * W * 8), np.uint64).reshape(n, W).astype(np.int64))
    return out

def launches(r):
    r = r[np.argsort(r[:, 15])]
    g0 = r[:, 2]
    cut = np.where(np.diff(g0) > 15000)[0] + 1
    return np.split(r, cut)

gu, dn = load(sys.argv[1])
G, D = launches(gu), launches(dn)
print(f"gate/up launches {len(G)} (CTAs {sorted(set(len(x) for x in G))[:5]}), down launches {len(D)} (CTAs {sorted(set(len(x) for x in D))[:5]})")
# Only the steady state: the last 60% of launches.
n = min(len(G), len(D))
G, D = G[n - int(0.6 * n):n], D[n - int(0.6 * n):n]
# clock rate from long spans
rows = np.concatenate(G)
dg = rows[:, 6] - rows[:, 2]; dc = rows[:, 11] - rows[:, 7]
ok = dg > 2000
ghz = np.median(dc[ok] / dg[ok]) if ok.any() else float("nan")
print(f"SM clock vs global timer: {ghz:.3f} cycles/ns; global timer step (min nonzero delta) "
      f"{np.min(np.diff(np.unique(rows[:, 3]))) if len(rows) > 1 else 0} ns")
med = lambda a: float(np.median(a)) / 1000.0
def cyc(a): return float(np.median(a)) / ghz / 1000.0
m = {k: [] for k in ["g_entry", "g_s1spread", "g_ids", "g_dot", "g_tail", "g_span", "g_ids_c", "g_dot_c", "g_tail_c",
                     "sh_dot", "d_entry", "d_s1spread", "d_boundary", "d_dot", "d_tail", "d_span", "d_dot_c", "d_tail_c", "d_lastend_vs_rel"]}
K = 6
for g, d in zip(G, D):
    rel = g[:, 3].min()
    routed = ((g[:, 0] >> 24) & 0xFFFF) < K
    m["g_entry"].append(rel - np.median(g[:, 2]))
    m["g_s1spread"].append(g[:, 3].max() - rel)
    gr = g[routed]
    m["g_ids"].append(np.median(gr[:, 4] - gr[:, 3])); m["g_ids_c"].append(np.median(gr[:, 9] - gr[:, 8]))
    m["g_dot"].append(np.median(gr[:, 5] - gr[:, 4])); m["g_dot_c"].append(np.median(gr[:, 10] - gr[:, 9]))
    m["g_tail"].append(np.median(g[:, 6] - g[:, 5])); m["g_tail_c"].append(np.median(g[:, 11] - g[:, 10]))
    gs = g[~routed]
    if len(gs): m["sh_dot"].append(np.median(gs[:, 5] - gs[:, 3]))
    gend = g[:, 6].max()
    m["g_span"].append(gend - rel)
    drel = d[:, 3].min()
    m["d_entry"].append(drel - np.median(d[:, 2]))
    m["d_s1spread"].append(d[:, 3].max() - drel)
    m["d_boundary"].append(drel - gend)
    m["d_dot"].append(np.median(d[:, 5] - d[:, 3])); m["d_dot_c"].append(np.median(d[:, 10] - d[:, 8]))
    m["d_tail"].append(np.median(d[:, 6] - d[:, 5])); m["d_tail_c"].append(np.median(d[:, 11] - d[:, 10]))
    m["d_span"].append(d[:, 6].max() - drel)
for k, v in m.items():
    if not v: continue
    v = np.array(v, dtype=np.float64)
    if k.endswith("_c"):
        print(f"  {k:<18} median {np.median(v) / ghz / 1000:7.3f} us (SM clock)")
    else:
        print(f"  {k:<18} median {np.median(v) / 1000:7.3f} us  p10 {np.percentile(v, 10) / 1000:7.3f}  p90 {np.percentile(v, 90) / 1000:7.3f}")
# Per-CTA distribution of end times in one typical launch
g = G[len(G) // 2]; rel = g[:, 3].min()
e = np.sort(g[:, 6] - rel) / 1000
print("  gate/up CTA ends after first release (us), quantiles 0/25/50/75/90/100:", np.round(np.percentile(e, [0, 25, 50, 75, 90, 100]), 2))
s1 = np.sort(g[:, 3] - rel) / 1000
print("  gate/up CTA releases (us), quantiles 0/50/90/100:", np.round(np.percentile(s1, [0, 50, 90, 100]), 2))
d = D[len(D) // 2]; drel = d[:, 3].min()
print("  down CTA releases (us), quantiles 0/50/90/100:", np.round(np.percentile(np.sort(d[:, 3] - drel) / 1000, [0, 50, 90, 100]), 2))
print("  down CTA ends (us), quantiles 0/50/90/100:", np.round(np.percentile(np.sort(d[:, 6] - drel) / 1000, [0, 50, 90, 100]), 2))
if len(sys.argv) > 2 and sys.argv[2]:  # CUPTI kernel ends on the same timer? router end -> gate/up release
    ends = {}
    with open(sys.argv[2]) as f:
        rs = [(int(r["start_ns"]), int(r["end_ns"]), r["name"]) for r in csv.DictReader(f)]
    rs.sort()
    starts = np.array([x[0] for x in rs]); endsa = np.array([x[1] for x in rs])
    out = []
    for g, d in zip(G, D):
        rel = g[:, 3].min(); gend = g[:, 6].max()
        # the gate/up kernel in the trace: the one whose end is nearest the stamps' last end
        i = int(np.argmin(np.abs(endsa - gend)))
        if "gate_up" not in rs[i][2]: continue
        # the kernel before it in the chain (the router): latest end before this one's end, other name
        j = i - 1
        while j >= 0 and "router" not in rs[j][2]: j -= 1
        if j < 0: continue
        out.append((endsa[i] - gend, rel - endsa[j], gend - endsa[j]))
    if out:
        o = np.array(out, dtype=np.float64)
        print(f"  CUPTI gate/up end - stamped last end: median {np.median(o[:, 0]) / 1000:.3f} us")
        print(f"  router end (CUPTI) -> first gate/up release: median {np.median(o[:, 1]) / 1000:.3f} us, p90 {np.percentile(o[:, 1], 90) / 1000:.3f}")
        print(f"  router end -> gate/up last stamped end (the gate/up share): median {np.median(o[:, 2]) / 1000:.3f} us")
# Instruction-bound or latency-bound? The routed gate/up CTAs' dot phase by how many of the launch's
# CTAs share their SM (8 warps per CTA), and the down kernel's likewise.
def by_sm(L, lo, hi, label):
    one, two = [], []
    for g in L:
        sm = (g[:, 0] >> 40) & 0xFFFF
        vals, cnt = np.unique(sm, return_counts=True)
        per = dict(zip(vals.tolist(), cnt.tolist()))
        k = np.array([per[s] for s in sm.tolist()])
        routed = ((g[:, 0] >> 24) & 0xFFFF) < K if label == "gate/up" else np.ones(len(g), bool)
        d = g[:, hi] - g[:, lo]
        one += d[(k == 1) & routed].tolist(); two += d[(k >= 2) & routed].tolist()
    if one and two:
        print(f"  {label} dot phase, CTAs alone on their SM: median {np.median(one) / 1000:.3f} us (n={len(one)}); "
              f"sharing it: {np.median(two) / 1000:.3f} us (n={len(two)})")
by_sm(G, 4, 5, "gate/up")
by_sm(D, 3, 5, "down")
if len(sys.argv) > 3:  # keep the last 200 launches of each kind
    with open(sys.argv[3], "wb") as f:
        for L in (G[-200:], D[-200:]):
            a = np.concatenate(L).astype(np.uint64)
            f.write(np.uint32(len(a)).tobytes()); f.write(a.tobytes())
