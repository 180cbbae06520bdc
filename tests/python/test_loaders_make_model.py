"""`striker make-model` end to end: the checkpoint it writes is a valid HF safetensors checkpoint
as read by the independent `safetensors` Python library, with the exact Flint tensor set."""
import json
import pathlib
import subprocess

import numpy as np
import pytest
from safetensors import safe_open


def make(striker_bin, shared_dir, out, seed=0, extra=()):
    cmd = [str(striker_bin), "make-model",
           "--config", str(shared_dir / "fixtures/flint-config/config.tiny.json"),
           "--tokenizer", str(shared_dir / "fixtures/flint-tokenizer"),
           "--out", str(out), "--seed", str(seed), *extra]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def expected_names(cfg):
    names = {"model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"}
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        names |= {p + n for n in ["input_layernorm.weight", "post_attention_layernorm.weight",
                                  "self_attn.q_proj.weight", "self_attn.k_proj.weight",
                                  "self_attn.v_proj.weight", "self_attn.o_proj.weight",
                                  "self_attn.q_norm.weight", "self_attn.k_norm.weight", "self_attn.sinks"]}
        mlps = [p + "mlp"] if l < cfg["first_k_dense_replace"] else \
            [p + f"mlp.experts.{e}" for e in range(cfg["n_routed_experts"])] + [p + "mlp.shared_experts"]
        if l >= cfg["first_k_dense_replace"]:
            names |= {p + "mlp.gate.weight", p + "mlp.gate.e_score_correction_bias"}
        names |= {m + f".{w}_proj.weight" for m in mlps for w in ("gate", "up", "down")}
    return names


@pytest.fixture(scope="module")
def tiny(striker_bin, shared_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("tiny")
    r = make(striker_bin, shared_dir, out, seed=3)
    assert r.returncode == 0, r.stderr
    return out


def test_layout_matches_hf(tiny, shared_dir):
    cfg = json.loads((tiny / "config.json").read_text())
    assert (tiny / "config.json").read_bytes() == (shared_dir / "fixtures/flint-config/config.tiny.json").read_bytes()
    for f in ("generation_config.json", "tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        assert (tiny / f).read_bytes() == (shared_dir / "fixtures/flint-tokenizer" / f).read_bytes(), f
    index = json.loads((tiny / "model.safetensors.index.json").read_text())
    shards = sorted(set(index["weight_map"].values()))
    n = len(shards)
    assert n > 1
    assert shards == [f"model-{k:05d}-of-{n:05d}.safetensors" for k in range(1, n + 1)]
    assert set(index["weight_map"]) == expected_names(cfg)
    total = 0
    for shard in shards:
        with safe_open(str(tiny / shard), "np") as f:
            assert f.metadata() == {"format": "pt"}
            keys = set(f.keys())
            assert keys == {k for k, v in index["weight_map"].items() if v == shard}
            for k in keys:
                sl = f.get_slice(k)
                total += int(np.prod(sl.get_shape())) * (4 if sl.get_dtype() == "F32" else 2)
                want = "F32" if k.endswith("e_score_correction_bias") else "BF16"
                assert sl.get_dtype() == want, k
    assert index["metadata"]["total_size"] == total


def test_values_are_finite_and_scaled(tiny):
    index = json.loads((tiny / "model.safetensors.index.json").read_text())["weight_map"]

    def get(name):
        with safe_open(str(tiny / index[name]), "np") as f:
            # numpy has no bfloat16: read the F32 bias directly, BF16 via its raw bits.
            if name.endswith("bias"):
                return f.get_tensor(name).astype(np.float64)
        raw = (tiny / index[name]).read_bytes()
        hlen = int.from_bytes(raw[:8], "little")
        entry = json.loads(raw[8:8 + hlen])[name]
        b, e = entry["data_offsets"]
        bits = np.frombuffer(raw[8 + hlen + b:8 + hlen + e], dtype=np.uint16).astype(np.uint32) << 16
        return bits.view(np.float32).reshape(entry["shape"]).astype(np.float64)

    q = get("model.layers.3.self_attn.q_proj.weight")
    o = get("model.layers.3.self_attn.o_proj.weight")
    down = get("model.layers.3.mlp.experts.5.down_proj.weight")
    bias = get("model.layers.3.mlp.gate.e_score_correction_bias")
    for t in (q, o, down, bias):
        assert np.isfinite(t).all()
    assert abs(q.std() * np.sqrt(q.shape[1]) - 1.0) < 0.05
    assert abs(o.std() * np.sqrt(o.shape[1]) - 0.2) < 0.01
    assert abs(down.std() * np.sqrt(down.shape[1]) - 0.2) < 0.02
    assert 0 < np.abs(bias).max() < 0.2


def test_deterministic_per_seed(striker_bin, shared_dir, tiny, tmp_path):
    r = make(striker_bin, shared_dir, tmp_path, seed=3)
    assert r.returncode == 0, r.stderr
    for f in tiny.iterdir():
        assert (tmp_path / f.name).read_bytes() == f.read_bytes(), f.name


def test_bad_arguments_fail_with_one_line(striker_bin, shared_dir, tmp_path):
    r = subprocess.run([str(striker_bin), "make-model", "--config", str(tmp_path / "nope.json"),
                        "--tokenizer", str(shared_dir / "fixtures/flint-tokenizer"), "--out", str(tmp_path),
                        "--seed", "1"], capture_output=True, text=True)
    assert r.returncode != 0
    bad = tmp_path / "bad.json"
    bad.write_text('{"hidden_size": "x"}')
    r = subprocess.run([str(striker_bin), "make-model", "--config", str(bad),
                        "--tokenizer", str(shared_dir / "fixtures/flint-tokenizer"), "--out", str(tmp_path / "o"),
                        "--seed", "1"], capture_output=True, text=True)
    assert r.returncode == 1
    assert r.stderr.startswith("error: ") and r.stderr.count("\n") == 1, r.stderr
    assert "bad.json" in r.stderr


def test_random_model_is_numerically_tame(tiny):
    """A float64 forward pass (FLINT.md §4 without the bf16 rounding) over 48 random tokens: the
    residual stream must stay near its starting RMS (0.5), and every MoE router must spread tokens over all
    experts, so the conformance tests of the backends see a realistic network."""
    cfg = json.loads((tiny / "config.json").read_text())
    wm = json.loads((tiny / "model.safetensors.index.json").read_text())["weight_map"]
    files = {}

    def get(name):
        shard = wm[name]
        if shard not in files:
            raw = (tiny / shard).read_bytes()
            n = int.from_bytes(raw[:8], "little")
            files[shard] = (raw, json.loads(raw[8:8 + n]), 8 + n)
        raw, header, start = files[shard]
        e = header[name]
        b, end = e["data_offsets"]
        buf = raw[start + b:start + end]
        if e["dtype"] == "F32":
            return np.frombuffer(buf, np.float32).reshape(e["shape"]).astype(np.float64)
        bits = np.frombuffer(buf, np.uint16).astype(np.uint32) << 16
        return bits.view(np.float32).reshape(e["shape"]).astype(np.float64)

    H, nh, nkv, d = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    eps, K, E = cfg["rms_norm_eps"], cfg["num_experts_per_tok"], cfg["n_routed_experts"]

    def rms(x, w):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w

    def rope(x, pos):
        half = d // 2
        phi = pos[:, None] * cfg["rope_theta"] ** (-2 * np.arange(half) / d)[None]
        c, s = np.cos(phi)[:, None], np.sin(phi)[:, None]
        a, b = x[..., :half], x[..., half:]
        return np.concatenate([a * c - b * s, b * c + a * s], -1)

    def mlp(x, p):
        g = x @ get(p + ".gate_proj.weight").T
        return (g / (1 + np.exp(-g)) * (x @ get(p + ".up_proj.weight").T)) @ get(p + ".down_proj.weight").T

    T = 48
    pos = np.arange(T)
    h = get("model.embed_tokens.weight")[np.random.default_rng(0).integers(0, 151000, T)]
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        x = rms(h, get(p + "input_layernorm.weight"))
        q = rms((x @ get(p + "self_attn.q_proj.weight").T).reshape(T, nh, d), get(p + "self_attn.q_norm.weight"))
        k = rms((x @ get(p + "self_attn.k_proj.weight").T).reshape(T, nkv, d), get(p + "self_attn.k_norm.weight"))
        v = (x @ get(p + "self_attn.v_proj.weight").T).reshape(T, nkv, d)
        mask = pos[None, :] <= pos[:, None]
        if cfg["layer_types"][l] == "sliding_attention":
            q, k = rope(q, pos), rope(k, pos)
            mask &= (pos[:, None] - pos[None, :]) < cfg["sliding_window"]
        sinks = get(p + "self_attn.sinks")
        o = np.zeros((T, nh, d))
        for hh in range(nh):
            kv = hh // (nh // nkv)
            s = np.where(mask, q[:, hh] @ k[:, kv].T / np.sqrt(d), -np.inf)
            m = np.maximum(s.max(1), sinks[hh])
            P = np.exp(s - m[:, None])
            o[:, hh] = (P / (np.exp(sinks[hh] - m) + P.sum(1))[:, None]) @ v[:, kv]
        h = h + o.reshape(T, -1) @ get(p + "self_attn.o_proj.weight").T
        x = rms(h, get(p + "post_attention_layernorm.weight"))
        if l < cfg["first_k_dense_replace"]:
            y = mlp(x, p + "mlp")
        else:
            scores = 1 / (1 + np.exp(-(x @ get(p + "mlp.gate.weight").T)))
            top = np.argsort(-(scores + get(p + "mlp.gate.e_score_correction_bias")), 1, kind="stable")[:, :K]
            assert len(set(top.ravel())) == E, f"layer {l} routes {T} tokens to only {len(set(top.ravel()))} experts"
            assert scores.std() > 0.15, f"layer {l} router scores barely spread: std {scores.std():.3f}"
            y = mlp(x, p + "mlp.shared_experts")
            for t in range(T):
                w = scores[t, top[t]] / scores[t, top[t]].sum() * cfg["routed_scaling_factor"]
                for e, we in zip(top[t], w):
                    y[t] += we * mlp(x[t:t + 1], p + f"mlp.experts.{e}")[0]
        h = h + y
        h_rms = np.sqrt((h * h).mean())
        # Embeddings are N(0, 0.5^2): the stream starts near RMS 0.5 and grows gently.
        assert np.isfinite(h).all() and 0.4 < h_rms < 0.8, f"layer {l}: residual RMS {h_rms:.3f}"
    logits = rms(h, get("model.norm.weight")) @ get("lm_head.weight").T
    assert np.isfinite(logits).all() and 0.5 < logits.std() < 2.0


def test_q_norm_scale_sharpens_attention_only(striker_bin, shared_dir, tiny, tmp_path):
    """--q-norm-scale S (long-context checks): q_norm weights S times larger, every other tensor
    (k_norm included) byte for byte the same as without it."""
    from flint_reference import Checkpoint

    r = make(striker_bin, shared_dir, tmp_path / "sharp", seed=3, extra=["--q-norm-scale", "3"])
    assert r.returncode == 0, r.stderr
    plain, sharp = Checkpoint(tiny), Checkpoint(tmp_path / "sharp")
    assert set(plain.names()) == set(sharp.names())
    for name in plain.names():
        if name.endswith("q_norm.weight"):
            np.testing.assert_allclose(sharp.get(name), 3 * plain.get(name), rtol=8e-3)
            assert abs(sharp.get(name).mean() - 3) < 0.1, name
        else:
            assert np.array_equal(sharp.raw(name)[1], plain.raw(name)[1]), name
    bad = make(striker_bin, shared_dir, tmp_path / "bad", seed=3, extra=["--q-norm-scale", "0"])
    assert bad.returncode != 0 and "--q-norm-scale" in bad.stderr, bad.stderr
