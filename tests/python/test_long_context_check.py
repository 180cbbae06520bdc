"""long_context_check.py's bookkeeping, without torch: reading `striker perplexity` JSON (prefill,
--score-from, --decode-batch 1, a failed run), splitting rows into position ranges and the
relative bound. The torch side runs on the GPU (scripts/gpu_long_context.sh)."""
import json
import subprocess

import numpy as np
import pytest

import long_context_check as lc

IDS = np.random.default_rng(9).integers(0, 151000, 120)


@pytest.fixture(scope="module")
def model(striker_bin, shared_dir, tmp_path_factory):
    path = tmp_path_factory.mktemp("lc_tiny")
    subprocess.run([str(striker_bin), "make-model", "--config", str(shared_dir / "fixtures/flint-config/config.tiny.json"),
                    "--tokenizer", str(shared_dir / "fixtures/flint-tokenizer"), "--out", str(path), "--seed", "14"],
                   check=True, capture_output=True)
    return path


@pytest.fixture(scope="module")
def ids_file(tmp_path_factory):
    f = tmp_path_factory.mktemp("lc_ids") / "ids.txt"
    f.write_text(",".join(map(str, IDS)))
    return f


def run(striker_bin, model, ids_file, out, *args):
    r = subprocess.run([str(striker_bin), "perplexity", str(model), "--ids-file", str(ids_file), "--json", *args],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    out.write_text(r.stdout)
    return out


@pytest.fixture(scope="module")
def reference(striker_bin, model, ids_file, tmp_path_factory):
    """A full prefill run standing in for the torch reference's scores (best = its top-1 logprob)."""
    path = run(striker_bin, model, ids_file, tmp_path_factory.mktemp("lc_ref") / "full.json", "--top", "1")
    j = json.loads(path.read_text())
    return {"logprobs": np.asarray(j["logprobs"]), "argmax": np.asarray(j["argmax"]),
            "best": np.asarray([t[0][1] for t in j["top_logprobs"]])}


FLOOR = {"median": 0.01, "p95": 0.05, "disagree": 0.02}


@pytest.mark.parametrize("args", [["--chunk-size", "7", "--score-from", "50"],
                                  ["--decode-batch", "1", "--decode-prefill", "60", "--score-from", "60"]])
def test_identical_rows_pass_in_their_ranges(striker_bin, model, ids_file, reference, tmp_path, monkeypatch, args):
    monkeypatch.setattr(lc, "EDGES", [0, 40, 80])
    pos, lp, arg = lc.run_rows(str(run(striker_bin, model, ids_file, tmp_path / "r.json", *args)), IDS)
    first = int(args[-1])
    assert pos[0] == first and pos[-1] == IDS.size - 2 and lp.size == arg.size == pos.size
    cells = lc.by_range(pos, lp, arg, reference, reference["best"][pos])
    assert cells[0] is None  # nothing scored before `first`
    assert [c["n"] for c in cells[1:]] == [int(((pos >= 40) & (pos < 80)).sum()), int((pos >= 80).sum())]
    for c in cells[1:]:
        assert c["median"] == 0 and c["disagree"] == 0 and lc.within(c, FLOOR)
    # The same rows moved by 0.05 nats are outside a 2x bound of a 0.01 median.
    moved = lc.by_range(pos, lp + 0.05, arg, reference, reference["best"][pos])
    assert not lc.within(moved[2], FLOOR) and "✗" in lc.cell(moved[2], FLOOR)


def test_argmax_disagreements_count_against_the_bound(reference):
    pos = np.arange(IDS.size - 1)
    arg = reference["argmax"].copy()
    arg[::10] += 1  # 10% of positions disagree
    (c,) = [x for x in lc.by_range(pos, reference["logprobs"], arg, reference, reference["best"] - 1.0) if x]
    assert c["disagree"] == pytest.approx(0.1, abs=0.01) and c["worst_gap"] == pytest.approx(1.0)
    assert not lc.within(c, FLOOR)


@pytest.mark.parametrize("content, message", [
    ({"error": "moe_combine_sorted: 98304 tokens exceed one launch (65535)"}, "exceed one launch"),
    ({"ids": [1, 2, 3], "logprobs": [0.0, 0.0], "argmax": [0, 0]}, "not a prefix"),
    ({"sequences": [{}, {}]}, "one sequence"),
    ({"ids": IDS[:5].tolist(), "score_from": 2, "logprobs": [0.0], "argmax": [0]}, "rows for positions 2..3"),
])
def test_bad_run_files_are_named_errors(tmp_path, content, message):
    f = tmp_path / "bad.json"
    f.write_text(json.dumps(content))
    with pytest.raises(ValueError, match=message):
        lc.run_rows(str(f), IDS)
