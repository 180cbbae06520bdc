"""`striker perplexity --load-format dummy` on the CPU: deterministic per --seed, different across
seeds, and exactly the weights `make-model --seed S` writes (BF16) or `quantize` makes of them (NVFP4)."""
import json
import shutil
import subprocess

import numpy as np
import pytest


@pytest.fixture(scope="module")
def config_only(shared_dir, tmp_path_factory):
    d = tmp_path_factory.mktemp("ppl-config-only")
    shutil.copy(shared_dir / "fixtures/flint-config/config.tiny.json", d / "config.json")
    return d


IDS = ",".join(str(i) for i in np.random.default_rng(5).integers(0, 151329, 48))


def scores(striker_bin, model, *args):
    r = subprocess.run([str(striker_bin), "perplexity", str(model), "--ids", IDS, "--json", *map(str, args)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_deterministic_per_seed_and_different_across_seeds(striker_bin, config_only):
    a = scores(striker_bin, config_only, "--load-format", "dummy", "--seed", "1")
    b = scores(striker_bin, config_only, "--load-format", "dummy", "--seed", "1")
    c = scores(striker_bin, config_only, "--load-format", "dummy", "--seed", "2")
    assert a == b
    assert a["logprobs"] != c["logprobs"]
    assert np.all(np.isfinite(a["logprobs"])) and np.all(np.isfinite(c["logprobs"]))
    # Random weights: perplexity is large but finite, not degenerate.
    assert 1 < a["perplexity"] < 1e9


def test_bf16_dummy_equals_make_model(striker_bin, shared_dir, config_only, tmp_path):
    ck = tmp_path / "ck"
    subprocess.run([str(striker_bin), "make-model", "--config", str(shared_dir / "fixtures/flint-config/config.tiny.json"),
                    "--tokenizer", str(shared_dir / "fixtures/flint-tokenizer"), "--out", str(ck), "--seed", "9"],
                   check=True, capture_output=True)
    dummy = scores(striker_bin, config_only, "--load-format", "dummy", "--seed", "9")
    real = scores(striker_bin, ck)
    assert dummy == real


def test_nvfp4_dummy_equals_quantized_make_model(striker_bin, shared_dir, config_only, tmp_path):
    ck = tmp_path / "ck"
    subprocess.run([str(striker_bin), "make-model", "--config", str(shared_dir / "fixtures/flint-config/config.tiny.json"),
                    "--tokenizer", str(shared_dir / "fixtures/flint-tokenizer"), "--out", str(ck), "--seed", "4"],
                   check=True, capture_output=True)
    gguf = tmp_path / "tiny.gguf"
    subprocess.run([str(striker_bin), "quantize", str(ck), str(gguf)], check=True, capture_output=True)
    dummy = scores(striker_bin, config_only, "--load-format", "dummy", "--seed", "4", "--quantization", "nvfp4")
    real = scores(striker_bin, gguf, "--hf-config-path", ck, "--quantization", "gguf")
    bf16 = scores(striker_bin, config_only, "--load-format", "dummy", "--seed", "4")
    # Same codes, scales and global scales; norms/router are F32 in the GGUF and BF16 here, the same values.
    np.testing.assert_allclose(dummy["logprobs"], real["logprobs"], rtol=0, atol=1e-5)
    assert dummy["argmax"] == real["argmax"]
    assert dummy["logprobs"] != bf16["logprobs"]  # really quantised


@pytest.mark.parametrize("args, message", [
    (["--load-format", "dummy", "--quantization", "int4"], "--quantization 'int4' is not supported"),
    (["--load-format", "weird"], "--load-format 'weird' is not one of"),
])
def test_bad_flags(striker_bin, config_only, args, message):
    r = subprocess.run([str(striker_bin), "perplexity", str(config_only), "--ids", "1,2", *args],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0
    assert message in r.stderr, r.stderr
