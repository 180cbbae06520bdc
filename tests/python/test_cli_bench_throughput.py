"""`striker bench throughput --device cpu` on the tiny config: JSON whose counts add up."""
import json
import shutil
import subprocess

import pytest


@pytest.fixture(scope="module")
def config_only(shared_dir, tmp_path_factory):
    d = tmp_path_factory.mktemp("bench-config-only")
    shutil.copy(shared_dir / "fixtures/flint-config/config.tiny.json", d / "config.json")
    for f in (shared_dir / "fixtures/flint-tokenizer").iterdir():
        shutil.copy(f, d / f.name)
    return d


def bench(striker_bin, *args):
    device = [] if "--device" in args else ["--device", "cpu"]
    return subprocess.run([str(striker_bin), "bench", "throughput", *device, *map(str, args)],
                          capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("quant", [[], ["--quantization", "nvfp4"]])
def test_json_counts_add_up(striker_bin, config_only, quant):
    n, inp, out = 6, 40, 9
    r = bench(striker_bin, config_only, "--num-prompts", n, "--input-len", inp, "--output-len", out,
              "--max-num-seqs", 4, "--json", *quant)
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    assert j["weight_format"] == ("NVFP4" if quant else "BF16")
    assert j["prompt_tokens"] == n * inp
    assert j["output_tokens"] == n * out
    assert j["elapsed_s"] > 0
    assert j["output_tokens_per_s"] > 0
    assert j["requests_per_s"] == pytest.approx(n / j["elapsed_s"], rel=1e-9)
    assert j["output_tokens_per_s"] == pytest.approx(n * out / j["elapsed_s"], rel=1e-9)
    assert j["total_tokens_per_s"] == pytest.approx(n * (inp + out) / j["elapsed_s"], rel=1e-9)
    assert 0 < j["ttft_median_ms"] < j["elapsed_s"] * 1e3
    # Every token after the first of each request comes from a decode step (batch <= max-num-seqs);
    # a step that mixes in a prefill chunk is not counted as decode.
    assert 0 < j["decode_steps"] <= n * (out - 1)
    assert 1 <= j["mean_decode_batch"] <= 4
    assert j["mean_decode_step_ms"] > 0
    assert j["decode_steps"] + j["prefill_or_mixed_steps"] == j["engine_steps"]
    assert j["decode_time_s"] + j["prefill_or_mixed_time_s"] <= j["elapsed_s"] * 1.05
    assert j["decode_bytes_estimate"] > j["decode_weight_bytes_estimate"] > 0
    assert 0 < j["roofline_fraction_estimate"] < 1


def test_block_size_is_the_engine_block(striker_bin, config_only):
    """--block-size (vLLM's engine flag) reaches the engine: with one KV budget the cache holds whole blocks of
    the given size (so blocks of 8 and 64 give different token capacities), runs whose prompts span several
    blocks of 8 and one of 64 tokens complete every request, and the JSON reports the size."""
    outs = {}
    for block in (8, 64):
        r = bench(striker_bin, config_only, "--num-prompts", 3, "--input-len", 70, "--output-len", 5,
                  "--max-num-seqs", 2, "--block-size", block, "--kv-cache-memory", "1000000", "--json")
        assert r.returncode == 0, r.stderr
        j = json.loads(r.stdout)
        assert j["block_size"] == block
        assert j["kv_cache_tokens"] % block == 0
        outs[block] = (j["prompt_tokens"], j["output_tokens"], j["kv_cache_tokens"])
    assert outs[8][:2] == outs[64][:2] == (3 * 70, 3 * 5)
    assert outs[8][2] != outs[64][2]  # the same budget in blocks of 8 and of 64 tokens


def test_text_output_and_dummy_without_model(striker_bin, shared_dir):
    r = bench(striker_bin, "--config", shared_dir / "fixtures/flint-config/config.tiny.json",
              "--tokenizer", shared_dir / "fixtures/flint-tokenizer",
              "--num-prompts", 2, "--input-len", 8, "--output-len", 4)
    assert r.returncode == 0, r.stderr
    assert "output tokens/s" in r.stdout and "time to first token" in r.stdout
    assert "ESTIMATE" in r.stdout


@pytest.mark.parametrize("args, message", [
    (["--num-prompts", "0"], "--num-prompts must be at least 1"),
    (["--output-len", "0"], "--output-len must be at least 1"),
    (["--input-len", "5000"], "exceeds max_position_embeddings"),
    (["--quantization", "awq"], "--quantization 'awq' is not supported"),
    (["--device", "tpu"], "--device must be cpu or cuda"),
    (["--block-size", "24"], "--block-size must be one of 1, 8, 16, 32, 64, 128, got 24"),
])
def test_bad_flags(striker_bin, config_only, args, message):
    r = bench(striker_bin, config_only, *args)
    assert r.returncode != 0
    assert message in r.stderr, r.stderr


def test_real_checkpoint_on_cpu(striker_bin, shared_dir, tmp_path):
    ck = tmp_path / "ck"
    subprocess.run([str(striker_bin), "make-model", "--config", str(shared_dir / "fixtures/flint-config/config.tiny.json"),
                    "--tokenizer", str(shared_dir / "fixtures/flint-tokenizer"), "--out", str(ck), "--seed", "2"],
                   check=True, capture_output=True)
    r = bench(striker_bin, ck, "--load-format", "auto", "--num-prompts", 3, "--input-len", 20, "--output-len", 5,
              "--json")
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    assert j["weights"].startswith("loaded from") and j["weight_format"] == "BF16"
    assert j["output_tokens"] == 15 and j["prompt_tokens"] == 60
