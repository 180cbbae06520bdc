"""`striker quantize` writes an NVFP4 GGUF that llama.cpp's gguf-py reads with the names, types,
shapes and metadata of FLINT.md §3, whose NVFP4 blocks dequantise (gguf-py) close to the BF16
weights, and that our own loader accepts (and rejects when corrupted)."""
import json
import pathlib
import shutil
import subprocess

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")


@pytest.fixture(scope="module")
def tiny_pair(striker_bin, shared_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("quant")
    model = root / "bf16"
    subprocess.run([str(striker_bin), "make-model", "--config", str(shared_dir / "fixtures/flint-config/config.tiny.json"),
                    "--tokenizer", str(shared_dir / "fixtures/flint-tokenizer"), "--out", str(model), "--seed", "3"],
                   check=True, capture_output=True)
    out = root / "tiny.gguf"
    subprocess.run([str(striker_bin), "quantize", str(model), str(out)], check=True, capture_output=True)
    return model, out


def bf16_tensors(model_dir: pathlib.Path):
    """Reads every tensor of a safetensors checkpoint as float32 (independent tiny parser)."""
    out = {}
    for f in sorted(model_dir.glob("*.safetensors")):
        raw = f.read_bytes()
        n = int.from_bytes(raw[:8], "little")
        header = json.loads(raw[8:8 + n])
        base = 8 + n
        for name, info in header.items():
            if name == "__metadata__":
                continue
            a, b = info["data_offsets"]
            buf = raw[base + a:base + b]
            if info["dtype"] == "BF16":
                arr = (np.frombuffer(buf, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)
            else:
                arr = np.frombuffer(buf, dtype=np.float32)
            out[name] = arr.reshape(info["shape"])
    return out


def test_gguf_py_reads_names_types_shapes_metadata(tiny_pair, shared_dir):
    model, path = tiny_pair
    cfg = json.loads((shared_dir / "fixtures/flint-config/config.tiny.json").read_text())
    r = gguf.GGUFReader(str(path))
    fields = {k: r.fields[k] for k in r.fields}

    def scalar(key):
        f = fields[key]
        return f.parts[f.data[0]].tolist()[0]

    assert bytes(fields["general.architecture"].parts[-1]).decode() == "flint"
    assert scalar("flint.block_count") == cfg["num_hidden_layers"]
    assert scalar("flint.embedding_length") == cfg["hidden_size"]
    assert scalar("flint.expert_count") == cfg["n_routed_experts"]
    assert scalar("flint.expert_used_count") == cfg["num_experts_per_tok"]
    assert scalar("flint.attention.sliding_window") == cfg["sliding_window"]
    assert scalar("flint.attention.head_count_kv") == cfg["num_key_value_heads"]
    assert abs(scalar("flint.expert_weights_scale") - cfg["routed_scaling_factor"]) < 1e-6

    tensors = {t.name: t for t in r.tensors}
    H, E = cfg["hidden_size"], cfg["n_routed_experts"]
    I, V = cfg["moe_intermediate_size"], cfg["vocab_size"]
    assert tensors["token_embd.weight"].tensor_type == gguf.GGMLQuantizationType.BF16
    assert list(tensors["token_embd.weight"].shape) == [H, V]
    assert tensors["output.weight"].tensor_type == gguf.GGMLQuantizationType.NVFP4
    down = tensors["blk.2.ffn_down_exps.weight"]
    assert down.tensor_type == gguf.GGMLQuantizationType.NVFP4
    assert list(down.shape) == [I, H, E]
    assert list(tensors["blk.2.ffn_down_exps.scale"].shape) == [E]
    assert tensors["blk.2.ffn_gate_inp.weight"].tensor_type == gguf.GGMLQuantizationType.F32
    assert "blk.2.exp_probs_b.bias" in tensors
    assert "blk.0.ffn_gate.weight" in tensors and "blk.0.ffn_gate_exps.weight" not in tensors
    for l in range(cfg["num_hidden_layers"]):
        assert f"blk.{l}.attn_sinks.weight" in tensors


def test_nvfp4_blocks_dequantise_close_to_bf16(tiny_pair):
    model, path = tiny_pair
    src = bf16_tensors(model)
    r = gguf.GGUFReader(str(path))
    tensors = {t.name: t for t in r.tensors}
    from gguf.quants import dequantize

    def check(gguf_name, hf_name, expert=None):
        t = tensors[gguf_name]
        w = dequantize(t.data, t.tensor_type)
        scale = np.asarray(tensors[gguf_name.replace(".weight", ".scale")].data, dtype=np.float32)
        ref = src[hf_name]
        if expert is not None:
            w = w[expert] * scale[expert]
        else:
            w = w * scale[0]
        rel = np.sqrt(np.mean((w - ref) ** 2) / np.mean(ref ** 2))
        assert rel < 0.15, f"{gguf_name}: relative RMS error {rel:.3f}"
        # The largest weight of each tensor lands on the top of the grid exactly (6 x 448 x scale2).
        assert np.isclose(np.abs(w).max(), np.abs(ref).max(), rtol=0.02)

    check("blk.0.attn_q.weight", "model.layers.0.self_attn.q_proj.weight")
    check("blk.1.ffn_down.weight", "model.layers.1.mlp.down_proj.weight")
    check("blk.3.ffn_up_exps.weight", "model.layers.3.mlp.experts.5.up_proj.weight", expert=5)
    check("output.weight", "lm_head.weight")


def test_loader_accepts_and_names_problems(tiny_pair, striker_bin, tmp_path):
    model, path = tiny_pair
    ids = ",".join(str(i) for i in range(100, 140))
    ok = subprocess.run([str(striker_bin), "perplexity", str(path), "--hf-config-path", str(model), "--ids", ids,
                         "--json"], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    assert np.isfinite(json.loads(ok.stdout)["perplexity"])

    # A config that disagrees with the metadata is a load error naming the field.
    bad_cfg = tmp_path / "cfg"
    bad_cfg.mkdir()
    cfg = json.loads((model / "config.json").read_text())
    cfg["sliding_window"] = 19
    (bad_cfg / "config.json").write_text(json.dumps(cfg))
    r = subprocess.run([str(striker_bin), "perplexity", str(path), "--hf-config-path", str(bad_cfg), "--ids", ids],
                       capture_output=True, text=True)
    assert r.returncode != 0 and "sliding_window" in r.stderr and "Segmentation" not in r.stderr

    # A truncated file names the tensor that runs past the end.
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    r = subprocess.run([str(striker_bin), "perplexity", str(cut), "--hf-config-path", str(model), "--ids", ids],
                       capture_output=True, text=True)
    assert r.returncode != 0 and "runs past the end" in r.stderr
