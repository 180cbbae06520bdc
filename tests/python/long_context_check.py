"""Long-context conformance: striker's teacher-forced log-probabilities over up to ~100K positions
against the PyTorch reference (torch_reference.py), with a verdict measured in the same run.

On a checkpoint with sharp attention two correct implementations differ by more than FLINT.md §4's
fixed thresholds, so the bounds are relative: the float64 numpy reference (flint_reference.py)
scores the first BASELINE positions, and the torch reference's distance to it there — median and
95th percentile of |Δlogprob|, argmax disagreement rate — is the noise floor. A striker run passes
when, in every position range it scored, each of the three is at most SLACK times the floor (the
argmax rate at least 1% of positions): the same bound at every range, so no growth by position.
Two controls, the torch reference with the sliding window one short and with full-attention
layers limited to the last 4,096 keys, are held to the same bound and must FAIL it.

    python3 long_context_check.py rule MODEL --positions 500 [--device cuda]
    python3 long_context_check.py long MODEL --ids-file IDS --run "LABEL=striker.json" ... [--table OUT]

`rule` checks the torch reference against the float64 one under FLINT.md §4's own rule (exit 1
when it fails). `long` prints the table and exits 0 only when every run passes and every control
fails. A run's JSON is `striker perplexity --json` output (prefill or --decode-batch 1, with or
without --score-from) over a prefix of the ids.
"""
from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

from flint_reference import FlintReference, conformance, teacher_forced

SLACK = 2.0
MIN_DISAGREEMENT = 0.01
EDGES = [0, 513, 8192, 16384, 32768, 98304]  # range starts; the last range runs to the end
LABELS = ["0-513", "513-8K", "8K-16K", "16K-32K", "32K-98K", "98K-end"]


def read_ids(path: str) -> np.ndarray:
    return np.array([int(x) for x in open(path).read().replace("\n", "").split(",") if x.strip()], dtype=np.int64)


def stats(d: np.ndarray, agree: np.ndarray, gaps: np.ndarray) -> dict:
    return {"n": int(d.size), "median": float(np.median(d)), "p95": float(np.percentile(d, 95)),
            "disagree": float(1.0 - agree.mean()), "worst_gap": float(gaps[~agree].max()) if (~agree).any() else 0.0}


def within(s: dict, floor: dict) -> bool:
    return (s["median"] <= SLACK * floor["median"] and s["p95"] <= SLACK * floor["p95"]
            and s["disagree"] <= max(SLACK * floor["disagree"], MIN_DISAGREEMENT))


def run_rows(path: str, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(positions, logprobs, argmax) of a striker perplexity JSON (one sequence) scored over ids."""
    run = json.load(open(path))
    if "error" in run:  # scripts/gpu_long_context.sh: the run failed, this is its last stderr line
        raise ValueError(run["error"])
    if "sequences" in run:
        if len(run["sequences"]) != 1:
            raise ValueError(f"{path}: long-context runs decode one sequence, not {len(run['sequences'])}")
        run = run["sequences"][0]
    n = len(run["ids"])
    if n > ids.size or not np.array_equal(np.asarray(run["ids"]), ids[:n]):
        raise ValueError(f"{path}: its ids are not a prefix of the checked ids")
    first = int(run.get("score_from", 0))
    pos = np.arange(first, n - 1)
    if len(run["logprobs"]) != pos.size or len(run["argmax"]) != pos.size:
        raise ValueError(f"{path}: {len(run['logprobs'])} rows for positions {first}..{n - 2}")
    return pos, np.asarray(run["logprobs"], dtype=np.float64), np.asarray(run["argmax"], dtype=np.int64)


def by_range(pos, lp, arg, ref: dict, ref_at: np.ndarray) -> list:
    """Per position range: stats of (lp, arg) at positions pos against the torch reference
    (ref_at: the reference's logprob of arg at pos, for the near-tie gaps); None where empty."""
    out = []
    for i, lo in enumerate(EDGES):
        hi = EDGES[i + 1] if i + 1 < len(EDGES) else 1 << 62
        m = (pos >= lo) & (pos < hi)
        if not m.any():
            out.append(None)
            continue
        p = pos[m]
        out.append(stats(np.abs(lp[m] - ref["logprobs"][p]), arg[m] == ref["argmax"][p], ref["best"][p] - ref_at[m]))
    return out


def cell(s: dict | None, floor: dict) -> str:
    """median/p95/argmax-disagreement of one range, marked ✗ when outside the bound."""
    if s is None:
        return "-"
    return f"{s['median']:.3f} / {s['p95']:.3f} / {s['disagree']:.1%}{'' if within(s, floor) else ' ✗'}"


def rule(args) -> int:
    """The torch reference against the float64 one under FLINT.md §4's fixed rule."""
    from torch_reference import TorchFlint  # torch only where the reference runs (not in CI)
    ids = np.random.default_rng(args.seed).integers(0, 151000, args.positions)
    t0 = time.time()
    tf = TorchFlint(args.model, device=args.device).teacher_forced(ids)
    _, _, lsm = teacher_forced(FlintReference(args.model).logits(ids), ids)
    r = conformance(tf["logprobs"], tf["argmax"], lsm, ids)
    print(f"torch vs float64 ({args.device}, {args.model}): median {r['median']:.4f} p95 {r['p95']:.4f} "
          f"argmax {r['argmax_agreement']:.1%} worst-gap {r['worst_disagreement_gap']:.3f} over {r['positions']} "
          f"positions ({time.time() - t0:.0f} s) -> {'PASS' if r['passed'] else 'FAIL'}")
    return 0 if r["passed"] else 1


def long_context(args) -> int:
    from torch_reference import TorchFlint
    ids = read_ids(args.ids_file)
    n = ids.size - 1  # scored positions 0..n-1
    t0 = time.time()
    runs = []  # (label, positions, logprobs, argmax) or (label, error)
    for spec in args.run:
        label, _, path = spec.partition("=")
        try:
            runs.append((label, *run_rows(path, ids)))
        except (OSError, ValueError, KeyError, json.JSONDecodeError) as e:
            runs.append((label, str(e)))
    model = TorchFlint(args.model, device=args.device)
    controls = []  # (label, full-length logprobs, argmax)
    for label, window, full_window in ((f"control: window {model.window - 1} (one short)", model.window - 1, None),
                                       (f"control: full layers see the last {args.full_window} keys",
                                        model.window, args.full_window)):
        model.window, model.full_window = window, full_window
        r = model.teacher_forced(ids)
        controls.append((label, r["logprobs"], r["argmax"]))
    model.window, model.full_window = int(model.c["sliding_window"]), None
    # Reference scores, plus its logprob of every tested argmax (near-tie gaps).
    tested = [np.zeros(n, dtype=np.int64) for _ in runs] + [c[2] for c in controls]
    for t, run in zip(tested, runs):
        if len(run) == 4:
            t[run[1]] = run[3]
    final = model.final_hidden(ids)
    ref = model.score(final, ids, at=tested)
    torch_s = time.time() - t0
    del final, model

    # Noise floor: the torch reference against the float64 one on the first positions.
    b = args.baseline
    _, _, lsm = teacher_forced(FlintReference(args.model).logits(ids[:b]), ids[:b])
    rows = np.arange(b - 1)
    f64_arg = lsm.argmax(axis=1)
    floor = stats(np.abs(ref["logprobs"][:b - 1] - lsm[rows, ids[1:b]]), ref["argmax"][:b - 1] == f64_arg,
                  lsm[rows, f64_arg] - lsm[rows, ref["argmax"][:b - 1]])

    head = "| run | " + " | ".join(LABELS) + " | verdict |"
    lines = [f"Long-context check: {ids.size} ids, noise floor (torch vs float64, positions 0-{b - 2}): median "
             f"{floor['median']:.4f}, p95 {floor['p95']:.4f}, argmax disagreement {floor['disagree']:.2%}; "
             f"bound per range: {SLACK:g}x each (argmax at least {MIN_DISAGREEMENT:.0%}). "
             f"Cells: median / p95 / argmax disagreement vs torch; ✗ = outside the bound.",
             head, "|---" * (len(LABELS) + 2) + "|"]
    status = 0
    for k, run in enumerate(runs):
        if len(run) == 2:
            lines.append(f"| {run[0]} | " + " | ".join("-" for _ in LABELS) + f" | ERROR: {run[1]} |")
            status = 1
            continue
        label, pos, lp, arg = run
        cells = by_range(pos, lp, arg, ref, ref["at"][k][pos])
        ok = all(c is None or within(c, floor) for c in cells)
        worst = max(c["worst_gap"] for c in cells if c is not None)
        lines.append(f"| {label} | " + " | ".join(cell(c, floor) for c in cells) +
                     f" | {'PASS' if ok else 'FAIL'} ({pos.size} rows, worst gap {worst:.2f}) |")
        status |= 0 if ok else 1
    for k, (label, lp, arg) in enumerate(controls):
        pos = np.arange(n)
        cells = by_range(pos, lp, arg, ref, ref["at"][len(runs) + k])
        failed = not all(c is None or within(c, floor) for c in cells)
        lines.append(f"| {label} | " + " | ".join(cell(c, floor) for c in cells) +
                     f" | {'FAILS, as it must' if failed else 'PASSES: the check cannot see this error'} |")
        status |= 0 if failed else 1
    lines.append(f"(torch reference and controls {torch_s:.0f} s, float64 baseline {time.time() - t0 - torch_s:.0f} s)")
    text = "\n".join(lines)
    print(text)
    if args.table:
        open(args.table, "w").write(text + "\n")
    return status


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("rule", help="torch reference vs float64 reference under FLINT.md §4's rule")
    r.add_argument("model")
    r.add_argument("--positions", type=int, default=500)
    r.add_argument("--seed", type=int, default=7)
    r.add_argument("--device", default="cuda")
    g = sub.add_parser("long", help="striker runs vs the torch reference, with controls")
    g.add_argument("model")
    g.add_argument("--ids-file", required=True)
    g.add_argument("--run", action="append", default=[], metavar="LABEL=JSON")
    g.add_argument("--baseline", type=int, default=1000, help="positions the float64 reference scores")
    g.add_argument("--full-window", type=int, default=4096, help="keys the full-layer control sees")
    g.add_argument("--device", default="cuda")
    g.add_argument("--table", help="also write the table here")
    args = ap.parse_args()
    return rule(args) if args.cmd == "rule" else long_context(args)


if __name__ == "__main__":
    sys.exit(main())
