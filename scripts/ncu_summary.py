#!/usr/bin/env python3
"""Summarises an `ncu --csv` log of one decode step: per kernel family, launches, device µs, MB read,
the fraction of 4.6 TB/s each reaches, and the step's totals. Used by scripts/gpu_profile.sh.

ncu replays each kernel alone (no PDL overlap, no neighbours), so the sum of its times is an upper
bound on the step's device time; the shares are what the profile is for."""
import csv
import re
import sys
from collections import OrderedDict

ROOFLINE = 4.6e12  # bytes/s, measured read (shared/reference/performance.md §10)


def family(name: str) -> str:
    """'void ns::(anonymous namespace)::gemv_kernel<4, 1, 8, (ns::GemvOut)1>(args)' -> 'gemv_kernel<4,1,8,1>'."""
    name = name.replace("(anonymous namespace)::", "")
    name = re.sub(r"^void ", "", name)
    depth, cut = 0, len(name)
    for i, ch in enumerate(name):  # the argument list starts at the first '(' outside <...>
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0:
            cut = i
            break
    name = name[:cut]
    name = re.sub(r"\([A-Za-z_:]+\)", "", name)  # enum casts in template arguments
    name = re.sub(r"\b[A-Za-z_]+::", "", name).replace(" ", "")
    return name


def main(path: str, title: str) -> None:
    rows = OrderedDict()  # ID -> {name, us, bytes}
    with open(path, newline="") as f:
        lines = [l for l in f if l.startswith('"')]
    for r in csv.DictReader(lines):
        k = r["ID"]
        e = rows.setdefault(k, {"name": family(r["Kernel Name"]), "us": 0.0, "bytes": 0.0})
        unit, val = r["Metric Unit"], float(r["Metric Value"].replace(",", "") or 0)
        if r["Metric Name"] == "gpu__time_duration.sum":
            e["us"] = val / 1e3 if unit in ("nsecond", "ns") else val * (1e3 if unit in ("msecond", "ms") else 1)
        elif r["Metric Name"] == "dram__bytes_read.sum":
            scale = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "KB": 1e3, "MB": 1e6, "GB": 1e9}.get(unit, 1)
            e["bytes"] = val * scale
    fams = OrderedDict()
    for e in rows.values():
        g = fams.setdefault(e["name"], {"n": 0, "us": 0.0, "bytes": 0.0})
        g["n"] += 1
        g["us"] += e["us"]
        g["bytes"] += e["bytes"]
    tot_us = sum(g["us"] for g in fams.values())
    tot_b = sum(g["bytes"] for g in fams.values())
    print(f"### {title}: {len(rows)} kernels, sum of isolated device time {tot_us/1e3:.3f} ms, "
          f"{tot_b/1e9:.3f} GB read, floor {tot_b/ROOFLINE*1e3:.3f} ms at 4.6 TB/s")
    print("| kernel | launches | µs each | µs total | share | MB each | fraction of 4.6 TB/s |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, g in sorted(fams.items(), key=lambda kv: -kv[1]["us"]):
        each = g["us"] / g["n"]
        mb = g["bytes"] / g["n"] / 1e6
        frac = (g["bytes"] / (g["us"] * 1e-6)) / ROOFLINE if g["us"] > 0 else 0
        print(f"| {name} | {g['n']} | {each:.2f} | {g['us']:.0f} | {100*g['us']/tot_us:.1f}% | {mb:.2f} | {frac:.2f} |")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else sys.argv[1])
