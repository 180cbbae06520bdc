"""Compares two `striker perplexity --json --top N` outputs under FLINT.md §4's rule, the first
as the reference: median |dlogprob| <= 0.03, p95 <= 0.15, identical argmax on >= 95% of
positions, every disagreement a near-tie (< 0.5 nats) in the reference.

    python3 compare_backends.py REFERENCE.json TESTED.json [label]

A disagreement whose token is not in the reference's top-N counts as a failed near-tie.
Runs made with `--decode-batch N` hold one entry per sequence ("sequences"); the two runs are
then compared sequence by sequence, row for row, and the rule applies to all rows together."""
import json
import sys

import numpy as np


def rows(run: dict) -> dict:
    """The scored rows of a run, sequences concatenated in order (one sequence: itself)."""
    seqs = run["sequences"] if "sequences" in run else [run]
    out = {"ids": [], "logprobs": [], "argmax": [], "top_logprobs": []}
    for s in seqs:
        # --score-from S: rows start at position S (older outputs have no score_from: 0)
        scored = len(s["ids"]) - 1 - s.get("score_from", 0)
        assert len(s["logprobs"]) == scored == len(s["argmax"]), "a sequence's rows do not match its ids"
        out["ids"].append(s["ids"])
        out["logprobs"] += s["logprobs"]
        out["argmax"] += s["argmax"]
        out["top_logprobs"] += s.get("top_logprobs", [])
    return out


def compare(ref: dict, test: dict) -> dict:
    assert ("sequences" in ref) == ("sequences" in test), "one run is --decode-batch, the other is not"
    ref, test = rows(ref), rows(test)
    assert ref["ids"] == test["ids"], "the two runs scored different ids"
    assert len(ref["logprobs"]) == len(test["logprobs"]), "the two runs scored different positions (--score-from)"
    d = np.abs(np.asarray(ref["logprobs"]) - np.asarray(test["logprobs"]))
    ra, ta = np.asarray(ref["argmax"]), np.asarray(test["argmax"])
    agree = ra == ta
    if (~agree).any():
        assert len(ref["top_logprobs"]) == len(ref["argmax"]), "the reference run needs --top N"
    worst = 0.0
    for i in np.nonzero(~agree)[0]:
        top = dict((int(t), lp) for t, lp in ref["top_logprobs"][i])
        best = ref["top_logprobs"][i][0][1]
        gap = best - top[int(ta[i])] if int(ta[i]) in top else float("inf")
        worst = max(worst, gap)
    r = {"positions": int(d.size), "median": float(np.median(d)), "p95": float(np.percentile(d, 95)),
         "argmax_agreement": float(agree.mean()), "worst_disagreement_gap": worst}
    r["passed"] = bool(r["median"] <= 0.03 and r["p95"] <= 0.15 and r["argmax_agreement"] >= 0.95 and worst < 0.5)
    return r


def table_row(config: str, mode: str, r: dict | None, error: str = "") -> str:
    """One markdown row: config, mode, median, p95, argmax, worst gap, verdict (ERROR: no result)."""
    if r is None:
        return f"| {config} | {mode} | - | - | - | - | ERROR: {error} |"
    return (f"| {config} | {mode} | {r['median']:.4f} | {r['p95']:.4f} | {r['argmax_agreement']:.1%} | "
            f"{r['worst_disagreement_gap']:.3f} | {'PASS' if r['passed'] else 'FAIL'} ({r['positions']} rows) |")


TABLE_HEADER = "| config | mode | median \\|Δ\\| | p95 | argmax | worst gap | rule |\n|---|---|---:|---:|---:|---:|---|"


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("reference")
    ap.add_argument("tested")
    ap.add_argument("label", nargs="?", help="name printed in the one-line summary")
    ap.add_argument("--table", nargs=2, metavar=("CONFIG", "MODE"), help="print one markdown table row instead")
    args = ap.parse_args()
    ref, test = (json.load(open(p)) for p in (args.reference, args.tested))
    r = compare(ref, test)
    if args.table:
        print(table_row(*args.table, r))
    else:
        label = args.label or args.tested
        print(f"{label}: median {r['median']:.4f} p95 {r['p95']:.4f} argmax {r['argmax_agreement']:.1%} "
              f"worst-gap {r['worst_disagreement_gap']:.3f} over {r['positions']} -> {'PASS' if r['passed'] else 'FAIL'}")
    sys.exit(0 if r["passed"] else 1)
