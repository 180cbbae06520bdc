import subprocess

import pytest


def test_help_lists_commands(striker_bin):
    out = subprocess.run([str(striker_bin), "--help"], capture_output=True, text=True, check=True).stdout
    for cmd in ("serve", "perplexity", "make-model", "tokenize"):
        assert cmd in out


def test_unknown_command_fails(striker_bin):
    r = subprocess.run([str(striker_bin), "no-such-command"], capture_output=True, text=True)
    assert r.returncode != 0


def _bench_latency(striker_bin, *args):
    # --block-size 7 is refused after the batch checks and before any GPU work, so a run that
    # reaches it passed them (with or without a GPU).
    r = subprocess.run([str(striker_bin), "bench", "latency", *args], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    return r.stdout + r.stderr


def test_bench_latency_takes_batches_above_eight_without_guesses(striker_bin):
    out = _bench_latency(striker_bin, "--batch", "64", "--block-size", "7")
    if "built without CUDA" in out:
        pytest.skip("this striker was built without CUDA: bench latency refuses every run")
    assert "--block-size must be" in out, out


def test_bench_latency_limits_batches(striker_bin):
    out = _bench_latency(striker_bin, "--batch", "3", "--speculative-tokens", "3", "--block-size", "7")
    if "built without CUDA" in out:
        pytest.skip("this striker was built without CUDA: bench latency refuses every run")
    assert "must be 1..8 with guesses" in out, out
    out = _bench_latency(striker_bin, "--batch", "257", "--block-size", "7")
    assert "--batch must be 1..256" in out, out
