"""`striker perplexity` options for long contexts: --ids-file (a long id list does not fit in one
command-line argument) and --score-from (prefill a context without logits, score what follows).

On the CPU backend a token's arithmetic does not depend on chunking or batching, so the rows
--score-from keeps must be bit-identical to the same positions of a full run."""
import json
import subprocess
import sys

import numpy as np
import pytest


@pytest.fixture(scope="module")
def tiny_model(striker_bin, shared_dir, tmp_path_factory):
    path = tmp_path_factory.mktemp("long_inputs_tiny")
    subprocess.run([str(striker_bin), "make-model", "--config", str(shared_dir / "fixtures/flint-config/config.tiny.json"),
                    "--tokenizer", str(shared_dir / "fixtures/flint-tokenizer"), "--out", str(path), "--seed", "13"],
                   check=True, capture_output=True)
    return path


def perplexity(striker_bin, *args):
    r = subprocess.run([str(striker_bin), "perplexity", *map(str, args)], capture_output=True, text=True, timeout=600)
    return r


IDS = [int(i) for i in np.random.default_rng(8).integers(0, 151329, 90)]
TEXT = ",".join(map(str, IDS))


@pytest.fixture(scope="module")
def full(striker_bin, tiny_model):
    r = perplexity(striker_bin, tiny_model, "--ids", TEXT, "--json", "--chunk-size", "16")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["score_from"] == 0
    return out


def test_ids_file_reads_the_same_ids(striker_bin, tiny_model, tmp_path, full):
    f = tmp_path / "ids.txt"
    f.write_text(TEXT + "\n")
    r = perplexity(striker_bin, tiny_model, "--ids-file", f, "--json", "--chunk-size", "16")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == full


@pytest.mark.parametrize("score_from,chunk", [(1, 16), (40, 16), (41, 7), (88, 100)])
def test_score_from_keeps_the_tail_of_a_full_run_bit_for_bit(striker_bin, tiny_model, full, score_from, chunk):
    r = perplexity(striker_bin, tiny_model, "--ids", TEXT, "--json", "--chunk-size", chunk, "--score-from", score_from)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["score_from"] == score_from and got["ids"] == IDS
    assert got["logprobs"] == full["logprobs"][score_from:]
    assert got["argmax"] == full["argmax"][score_from:]


# Decode one sequence after a prefill of 30: --score-from below, at and past the prefill's last row.
@pytest.mark.parametrize("score_from", [0, 10, 29, 30, 50])
def test_score_from_in_decode_mode(striker_bin, tiny_model, full, score_from):
    r = perplexity(striker_bin, tiny_model, "--ids", TEXT, "--json", "--decode-batch", "1", "--decode-prefill", "30",
                   "--score-from", score_from)
    assert r.returncode == 0, r.stderr
    seq = json.loads(r.stdout)["sequences"][0]
    assert seq["score_from"] == score_from
    assert seq["logprobs"] == full["logprobs"][score_from:]
    assert seq["argmax"] == full["argmax"][score_from:]


def peak_rss_kib(striker_bin, *args):
    """Peak resident memory of one `striker perplexity` run, in KiB (a fresh Python parent per run, so
    RUSAGE_CHILDREN sees that run alone)."""
    probe = ("import resource, subprocess, sys\n"
             "rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE).returncode\n"
             "print(rc, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    r = subprocess.run([sys.executable, "-c", probe, str(striker_bin), "perplexity", *map(str, args)],
                       capture_output=True, text=True, timeout=600, check=True)
    rc, kib = map(int, r.stdout.split())
    assert rc == 0
    return kib


# The logits of a step reach the host 256 rows at a time (src/cli/perplexity_scoring.h), each
# reduced to its scores before the next: one 519-row chunk holds at most a block more than a run
# that scores one row. (Holding the step's rows at once, as before, takes ~519 rows: ~300 MiB more.)
def test_long_chunk_holds_one_block_of_logits(striker_bin, tiny_model, tmp_path):
    f = tmp_path / "ids.txt"
    f.write_text(",".join(str(int(i)) for i in np.random.default_rng(9).integers(0, 151329, 520)))
    common = [tiny_model, "--ids-file", f, "--threads", "2", "--chunk-size", "520"]
    one_row = peak_rss_kib(striker_bin, *common, "--score-from", "518")
    all_rows = peak_rss_kib(striker_bin, *common)
    row_kib = 151552 * 4 / 1024  # the tiny config keeps Flint's vocabulary
    assert all_rows - one_row < (256 + 100) * row_kib, (one_row, all_rows)


@pytest.mark.parametrize("args, message", [
    (["--ids", "1,2,3", "--score-from", "2"], "--score-from 2 leaves no position to score in 3 ids"),
    (["--ids", "1,2,3", "--score-from", "-1"], "--score-from must not be negative"),
    (["--ids", "1,2,3,4", "--decode-batch", "2", "--decode-prefill", "1", "--score-from", "1"],
     "--score-from 1 leaves no position to score"),
    (["--ids", "1,2", "--ids-file", "/nonexistent"], "exactly one of --ids, --ids-file and --text-file"),
    (["--ids-file", "/nonexistent/ids.txt"], "--ids-file: cannot open"),
])
def test_bad_long_input_is_a_one_line_error(striker_bin, tiny_model, args, message):
    r = perplexity(striker_bin, tiny_model, *args)
    assert r.returncode != 0
    assert message in r.stderr, r.stderr
    assert r.stderr.strip().count("\n") == 0, r.stderr
