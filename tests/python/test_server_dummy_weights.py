"""`--load-format dummy`: random weights from config.json alone (no weight file in the folder),
on the CPU; `--quantization` and the host-memory check fail at startup with clear errors."""
import re
import resource
import shutil
import subprocess

import pytest

from server_fixture import StrikerServer, tiny_model  # noqa: F401  (fixtures)


@pytest.fixture(scope="module")
def config_only(shared_dir, tmp_path_factory):
    """A model folder with config.json and the tokenizer files but no weights at all."""
    d = tmp_path_factory.mktemp("config-only")
    shutil.copy(shared_dir / "fixtures/flint-config/config.tiny.json", d / "config.json")
    for f in (shared_dir / "fixtures/flint-tokenizer").iterdir():
        shutil.copy(f, d / f.name)
    return d


@pytest.fixture(scope="module")
def full_config_only(shared_dir, tmp_path_factory):
    d = tmp_path_factory.mktemp("full-config-only")
    shutil.copy(shared_dir / "fixtures/flint-config/config.json", d / "config.json")
    for f in (shared_dir / "fixtures/flint-tokenizer").iterdir():
        shutil.copy(f, d / f.name)
    return d


@pytest.mark.parametrize("quant", [[], ["--quantization", "nvfp4"]])
def test_dummy_weights_serve_a_chat_completion(striker_bin, config_only, tmp_path, quant):
    server = StrikerServer(striker_bin, config_only, ["--load-format", "dummy", "--seed", "3", *quant], log_dir=tmp_path)
    try:
        r = server.client().chat.completions.create(
            model=str(config_only), messages=[{"role": "user", "content": "hello"}], max_tokens=8,
            extra_body={"ignore_eos": True})
        assert r.usage.completion_tokens == 8
        assert r.choices[0].finish_reason == "length"
        log = server.log()
        assert "random " + ("NVFP4" if quant else "BF16") + " weights in host memory" in log, log
    finally:
        server.stop()


def serve_error(striker_bin, model, *flags, limit_bytes=None):
    def limit():
        if limit_bytes:
            resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, limit_bytes))
    r = subprocess.run([str(striker_bin), "serve", str(model), "--port", "0", "--device", "cpu", *map(str, flags)],
                       capture_output=True, text=True, timeout=120, preexec_fn=limit)
    assert r.returncode != 0, r.stderr
    assert "error:" in r.stderr
    return r.stderr


@pytest.mark.parametrize("value", ["awq", "fp8", "NVFP4"])
def test_unknown_quantization_is_a_startup_error(striker_bin, config_only, value):
    err = serve_error(striker_bin, config_only, "--load-format", "dummy", "--quantization", value)
    assert f"--quantization '{value}' is not supported" in err, err


def test_full_config_does_not_fit_in_host_memory(striker_bin, full_config_only):
    # An 8 GiB address-space limit makes the check deterministic on any CI host: full-size BF16
    # dummy weights need ~80 GB.
    err = serve_error(striker_bin, full_config_only, "--load-format", "dummy", limit_bytes=8 << 30)
    m = re.search(r"random BF16 weights .* need ([0-9.]+) GiB of host memory", err)
    assert m and float(m.group(1)) > 70 and "--device cuda" in err, err
    err = serve_error(striker_bin, full_config_only, "--load-format", "dummy", "--quantization", "nvfp4",
                      limit_bytes=8 << 30)
    assert "random NVFP4 weights" in err and "of host memory" in err, err


def test_nvfp4_quantization_with_a_bf16_checkpoint(striker_bin, tiny_model):
    err = serve_error(striker_bin, tiny_model, "--quantization", "nvfp4")
    assert "--quantization nvfp4 but this is a BF16 safetensors checkpoint" in err, err
    err = serve_error(striker_bin, tiny_model, "--quantization", "modelopt_fp4")
    assert "BF16 safetensors checkpoint" in err, err


def test_dummy_without_config_is_a_clear_error(striker_bin, tmp_path):
    err = serve_error(striker_bin, tmp_path, "--load-format", "dummy")
    assert "no config.json beside the model" in err, err
