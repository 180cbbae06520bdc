"""`striker serve` on an NVFP4 GGUF made by `striker quantize`, with the vLLM-style command of
FLINT.md §6 (GGUF file + --hf-config-path + --tokenizer as local directories), on the CPU."""
import subprocess

import pytest

from server_fixture import StrikerServer

GLM47 = ["--enable-auto-tool-choice", "--tool-call-parser", "glm47", "--reasoning-parser", "glm47",
         "--exclude-tools-when-tool-choice-none"]


@pytest.fixture(scope="module")
def toolcall_gguf(striker_bin, shared_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("gguf") / "toolcall-nvfp4.gguf"
    subprocess.run([str(striker_bin), "quantize", str(shared_dir / "fixtures/toolcall-model"), str(out)],
                   check=True, capture_output=True)
    return out


def test_serves_nvfp4_gguf_with_vllm_flags(striker_bin, shared_dir, toolcall_gguf, tmp_path):
    src = shared_dir / "fixtures/toolcall-model"
    server = StrikerServer(striker_bin, toolcall_gguf,
                           ["--hf-config-path", src, "--tokenizer", src, "--served-model-name", "flint-nvfp4", *GLM47],
                           log_dir=tmp_path)
    try:
        client = server.client()
        assert [m.id for m in client.models.list().data] == ["flint-nvfp4"]
        r = client.chat.completions.create(model="flint-nvfp4", temperature=0, max_tokens=40,
                                           messages=[{"role": "user", "content": "Repeat after me: apple river"}])
        choice = r.choices[0]
        assert choice.finish_reason in ("stop", "length")
        assert r.usage.completion_tokens > 0
        # 4-bit weights change a tiny trained model's greedy text; the parsers still split it.
        text = (choice.message.content or "") + (getattr(choice.message, "reasoning", None) or "")
        assert text.strip()
        stream = client.chat.completions.create(model="flint-nvfp4", temperature=0, max_tokens=20, stream=True,
                                                messages=[{"role": "user", "content": "What time is it in Oslo?"}])
        chunks = list(stream)
        assert chunks and chunks[-1].choices[0].finish_reason is not None
        log = server.log()
        assert "NVFP4" in log or "nvfp4" in log.lower() or ".gguf" in log
    finally:
        server.stop()


def test_gguf_without_config_is_a_clear_startup_error(striker_bin, toolcall_gguf, tmp_path):
    r = subprocess.run([str(striker_bin), "serve", str(toolcall_gguf), "--device", "cpu", "--port", "0"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0
    assert "--hf-config-path" in r.stderr
