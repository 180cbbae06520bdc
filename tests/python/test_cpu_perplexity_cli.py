"""`striker perplexity`: input handling, chunk-size invariance and clear errors."""
import json
import subprocess

import numpy as np
import pytest


@pytest.fixture(scope="module")
def tiny_model(striker_bin, shared_dir, tmp_path_factory):
    path = tmp_path_factory.mktemp("ppl_tiny")
    subprocess.run([str(striker_bin), "make-model", "--config", str(shared_dir / "fixtures/flint-config/config.tiny.json"),
                    "--tokenizer", str(shared_dir / "fixtures/flint-tokenizer"), "--out", str(path), "--seed", "11"],
                   check=True, capture_output=True)
    return path


def perplexity(striker_bin, *args):
    return subprocess.run([str(striker_bin), "perplexity", *map(str, args)], capture_output=True, text=True, timeout=600)


def test_chunk_size_does_not_change_results(striker_bin, tiny_model):
    ids = ",".join(str(i) for i in np.random.default_rng(3).integers(0, 151329, 40))
    outs = []
    for chunk in (1, 7, 512):
        r = perplexity(striker_bin, tiny_model, "--ids", ids, "--json", "--chunk-size", chunk)
        assert r.returncode == 0, r.stderr
        outs.append(json.loads(r.stdout))
    assert outs[0] == outs[1] == outs[2]  # same arithmetic per token: bit-identical


def test_text_file_uses_the_model_tokenizer(striker_bin, tiny_model, tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    text = "Flint scores this sentence, token by token: 42 times!\n"
    f = tmp_path / "t.txt"
    f.write_text(text)
    r = perplexity(striker_bin, tiny_model, "--text-file", f, "--json")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    want = tokenizers.Tokenizer.from_file(str(tiny_model / "tokenizer.json")).encode(text, add_special_tokens=False).ids
    assert got["ids"] == want
    assert len(got["logprobs"]) == len(want) - 1
    r = perplexity(striker_bin, tiny_model, "--text-file", f)
    assert r.returncode == 0 and "perplexity:" in r.stdout


@pytest.mark.parametrize("args, message", [
    (["--ids", "1"], "at least 2 tokens"),
    (["--ids", "1,x"], "'x' is not a token id"),
    (["--ids", "1,,2"], "empty entry"),
    (["--ids", "1,151552"], "outside the vocabulary"),
    (["--ids", "1,-3"], "'-3' is not a token id"),
    ([], "exactly one of --ids, --ids-file and --text-file"),
    (["--ids", "1,2", "--chunk-size", "0"], "--chunk-size"),
    (["--ids", "1,2", "--device", "tpu"], "--device"),
    (["--text-file", "/nonexistent/file.txt"], "cannot open"),
])
def test_bad_input_is_a_one_line_error(striker_bin, tiny_model, args, message):
    r = perplexity(striker_bin, tiny_model, *args)
    assert r.returncode != 0
    assert message in r.stderr, r.stderr
    assert r.stderr.strip().count("\n") == 0, r.stderr


def test_missing_model_is_an_error(striker_bin, tmp_path):
    r = perplexity(striker_bin, tmp_path / "no-such-model", "--ids", "1,2")
    assert r.returncode != 0 and r.stderr.startswith("error:")


def test_device_cuda_fails_clearly_or_agrees_with_cpu(striker_bin, tiny_model):
    """Without a CUDA backend or GPU: a one-line error. With one: FLINT.md §4's rule vs the CPU."""
    ids = ",".join(str(i) for i in np.random.default_rng(4).integers(0, 151329, 200))
    r = perplexity(striker_bin, tiny_model, "--ids", ids, "--json", "--device", "cuda")
    if r.returncode != 0:
        assert r.stderr.startswith("error:") and r.stderr.strip().count("\n") == 0, r.stderr
        assert "cuda" in r.stderr.lower() or "gpu" in r.stderr.lower(), r.stderr
        return
    cpu = json.loads(perplexity(striker_bin, tiny_model, "--ids", ids, "--json").stdout)
    gpu = json.loads(r.stdout)
    delta = np.abs(np.asarray(gpu["logprobs"]) - np.asarray(cpu["logprobs"]))
    agree = np.mean(np.asarray(gpu["argmax"]) == np.asarray(cpu["argmax"]))
    print(f"\ncuda vs cpu: median {np.median(delta):.4f}, p95 {np.percentile(delta, 95):.4f}, argmax {agree:.1%}")
    assert np.median(delta) <= 0.03 and np.percentile(delta, 95) <= 0.15 and agree >= 0.95
