"""`striker perplexity --decode-batch N`: several sequences teacher-forced together, one token of
each per step (a serving decode step), after a short prefill each.

On the CPU backend every token's arithmetic is the same however the batch is made up, so the
decoded sequences must be bit-identical to scoring each one alone by prefill; compare_backends.py
must then compare such runs row for row (and reject mismatched runs)."""
import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from compare_backends import compare  # noqa: E402


@pytest.fixture(scope="module")
def tiny_model(striker_bin, shared_dir, tmp_path_factory):
    path = tmp_path_factory.mktemp("decode_tiny")
    subprocess.run([str(striker_bin), "make-model", "--config", str(shared_dir / "fixtures/flint-config/config.tiny.json"),
                    "--tokenizer", str(shared_dir / "fixtures/flint-tokenizer"), "--out", str(path), "--seed", "12"],
                   check=True, capture_output=True)
    return path


def perplexity(striker_bin, *args):
    return subprocess.run([str(striker_bin), "perplexity", *map(str, args)], capture_output=True, text=True, timeout=600)


def ids_text(n: int, seed: int) -> str:
    return ",".join(str(i) for i in np.random.default_rng(seed).integers(0, 151329, n))


# 4 sequences: decode steps of <= 8 tokens (the GEMV path on the GPU); 16: batched GEMM/MoE.
# 150 ids over 16 sequences gives lengths 10 and 9, so sequences finish at different steps and
# the batch shrinks; the tiny window (17) is crossed by the longer 4-way split.
@pytest.mark.parametrize("batch,length,prefill", [(4, 203, 5), (16, 150, 3), (1, 40, 1)])
def test_decode_batch_equals_prefill_bit_for_bit(striker_bin, tiny_model, batch, length, prefill):
    ids = ids_text(length, batch)
    r = perplexity(striker_bin, tiny_model, "--ids", ids, "--json", "--top", 5, "--decode-batch", batch,
                   "--decode-prefill", prefill)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    seqs = got["sequences"]
    assert got["decode_batch"] == batch and got["decode_prefill"] == prefill and len(seqs) == batch
    flat = [int(i) for i in ids.split(",")]
    assert [i for s in seqs for i in s["ids"]] == flat  # contiguous split, in order
    lengths = [len(s["ids"]) for s in seqs]
    assert max(lengths) - min(lengths) <= 1
    all_lp = []
    for s in seqs:
        alone = perplexity(striker_bin, tiny_model, "--ids", ",".join(map(str, s["ids"])), "--json", "--top", 5,
                           "--chunk-size", 13)
        assert alone.returncode == 0, alone.stderr
        want = json.loads(alone.stdout)
        assert s["logprobs"] == want["logprobs"] and s["argmax"] == want["argmax"]
        assert s["top_logprobs"] == want["top_logprobs"]
        assert s["perplexity"] == pytest.approx(want["perplexity"], rel=1e-12)
        all_lp += s["logprobs"]
    assert got["perplexity"] == pytest.approx(float(np.exp(-np.mean(all_lp))), rel=1e-9)


def test_compare_backends_reads_decode_runs_row_for_row(striker_bin, tiny_model):
    ids = ids_text(120, 7)
    runs = []
    for threads in (1, 2):
        r = perplexity(striker_bin, tiny_model, "--ids", ids, "--json", "--top", 20, "--decode-batch", 4,
                       "--threads", threads)
        assert r.returncode == 0, r.stderr
        runs.append(json.loads(r.stdout))
    same = compare(runs[0], runs[1])
    assert same["passed"] and same["positions"] == 120 - 4 and same["median"] == 0.0
    # A perturbed tested run must fail: shift every logprob of three sequences by 0.2 nats and
    # change the fourth's argmax for a token outside the reference's near ties.
    bad = json.loads(json.dumps(runs[1]))
    for k in (1, 2, 3):
        bad["sequences"][k]["logprobs"] = [lp - 0.2 for lp in bad["sequences"][k]["logprobs"]]
    bad["sequences"][0]["argmax"] = [a + 1 for a in bad["sequences"][0]["argmax"]]
    worse = compare(runs[0], bad)
    assert not worse["passed"] and worse["argmax_agreement"] < 0.8 and worse["median"] > 0.1
    # Sequences split differently (or a prefill run against a decode run) are not comparable.
    other = json.loads(perplexity(striker_bin, tiny_model, "--ids", ids, "--json", "--top", 20,
                                  "--decode-batch", 3).stdout)
    with pytest.raises(AssertionError, match="different ids"):
        compare(runs[0], other)
    prefill = json.loads(perplexity(striker_bin, tiny_model, "--ids", ids, "--json", "--top", 20).stdout)
    with pytest.raises(AssertionError, match="decode-batch"):
        compare(runs[0], prefill)


@pytest.mark.parametrize("args, message", [
    (["--ids", "1,2,3,4", "--decode-batch", "3"], "fewer than --decode-prefill + 1"),
    (["--ids", "1,2,3,4", "--decode-batch", "1", "--decode-prefill", "4"], "fewer than --decode-prefill + 1"),
    (["--ids", "1,2,3", "--decode-batch", "1", "--decode-prefill", "0"], "--decode-prefill"),
])
def test_decode_batch_bad_input_is_a_one_line_error(striker_bin, tiny_model, args, message):
    r = perplexity(striker_bin, tiny_model, *args)
    assert r.returncode != 0
    assert message in r.stderr, r.stderr
    assert r.stderr.strip().count("\n") == 0, r.stderr


def test_decode_batch_zero_is_refused_by_the_option_parser(striker_bin, tiny_model):
    r = perplexity(striker_bin, tiny_model, "--ids", "1,2,3", "--decode-batch", "0")
    assert r.returncode != 0 and "--decode-batch" in r.stderr and "not in range" in r.stderr, r.stderr
