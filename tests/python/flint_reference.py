"""Independent numpy reference of the Flint forward pass (FLINT.md §4).

Written straight from the spec, sharing no code with striker: its own safetensors reader
(raw little-endian bytes, bf16 decoded from uint16), float64 accumulation everywhere, and
bf16 rounding (nearest-even, done on the float64 bit pattern) exactly where the spec writes
bf16(). Whole-sequence prefill with explicit causal/window masks (no KV cache), so it checks
striker's paged cache, chunking and batching too.
"""
from __future__ import annotations

import json
import pathlib
import struct

import numpy as np

# ----------------------------------------------------------------------------------------
# Numerics


def bf16(x) -> np.ndarray:
    """Rounds float64 values to the nearest bfloat16 (ties to even), returned as float64.

    bfloat16 keeps 7 explicit mantissa bits; a float64 has 52, so the low 45 bits are
    rounded away in one step (no double rounding through float32)."""
    a = np.array(x, dtype=np.float64)  # a fresh copy: rounded in place below
    nan = np.isnan(a)
    u = a.view(np.uint64)
    keep = u >> np.uint64(45)
    keep &= np.uint64(1)
    u += keep
    u += np.uint64((1 << 44) - 1)
    u &= ~np.uint64((1 << 45) - 1)
    if nan.any():
        a[nan] = np.nan
    return a


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


# ----------------------------------------------------------------------------------------
# Checkpoint reading (safetensors, single file or sharded)

_DTYPES = {"BF16": ("<u2", 2), "F16": ("<f2", 2), "F32": ("<f4", 4), "F64": ("<f8", 8)}


class Checkpoint:
    """Reads tensors of every *.safetensors file in a directory as float64 arrays."""

    def __init__(self, model_dir):
        self.dir = pathlib.Path(model_dir)
        self.config = json.loads((self.dir / "config.json").read_text())
        self._where = {}  # name -> (path, header entry, data start)
        files = sorted(self.dir.glob("*.safetensors"))
        if not files:
            raise FileNotFoundError(f"{self.dir}: no *.safetensors files")
        for path in files:
            with open(path, "rb") as f:
                (n,) = struct.unpack("<Q", f.read(8))
                header = json.loads(f.read(n))
            for name, entry in header.items():
                if name != "__metadata__":
                    self._where[name] = (path, entry, 8 + n)
        self._maps = {}

    def names(self):
        return self._where.keys()

    def raw(self, name: str) -> tuple[str, np.ndarray]:
        """(dtype string, array of raw storage type) without conversion."""
        path, entry, base = self._where[name]
        if path not in self._maps:
            self._maps[path] = np.memmap(path, dtype=np.uint8, mode="r")
        begin, end = entry["data_offsets"]
        code, size = _DTYPES[entry["dtype"]]
        data = self._maps[path][base + begin : base + end].view(code)
        return entry["dtype"], data.reshape(entry["shape"])

    def get(self, name: str) -> np.ndarray:
        dtype, data = self.raw(name)
        if dtype == "BF16":
            return (data.astype(np.uint32) << np.uint32(16)).view(np.float32).astype(np.float64)
        return data.astype(np.float64)


# ----------------------------------------------------------------------------------------
# Building blocks


def rmsnorm(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    """Over the last axis: y = bf16(bf16(x·r)·w), r = 1/sqrt(mean(x²)+eps)."""
    r = 1.0 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return bf16(bf16(x * r) * w)


def swiglu(x: np.ndarray, gate: np.ndarray, up: np.ndarray, down: np.ndarray) -> np.ndarray:
    g = bf16(x @ gate.T)
    u = bf16(x @ up.T)
    a = bf16(bf16(g * sigmoid(g)) * u)
    return bf16(a @ down.T)


def rope_tables(positions: np.ndarray, d: int, theta: float) -> tuple[np.ndarray, np.ndarray]:
    """bf16 cos and sin [T, d/2]: θ_i and φ in fp32, cos/sin in float64 then bf16."""
    i = np.arange(d // 2, dtype=np.float64)
    inv_freq = (float(theta) ** (-2.0 * i / d)).astype(np.float32)
    phi = positions.astype(np.float32)[:, None] * inv_freq[None, :]  # float32 product
    assert phi.dtype == np.float32
    phi = phi.astype(np.float64)
    return bf16(np.cos(phi)), bf16(np.sin(phi))


def rope(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """x [T, heads, d]; pairs (i, i + d/2)."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    c, s = cos[:, None, :], sin[:, None, :]
    return np.concatenate([bf16(bf16(x1 * c) - bf16(x2 * s)), bf16(bf16(x2 * c) + bf16(x1 * s))], axis=-1)


def attention(q, k, v, sinks, sliding: bool, window: int) -> np.ndarray:
    """q [T, nh, d], k/v [T, nkv, d] at positions 0..T-1; returns bf16 o [T, nh·d]."""
    T, nh, d = q.shape
    group = nh // k.shape[1]
    i = np.arange(T)[:, None]
    j = np.arange(T)[None, :]
    allowed = j <= i
    if sliding:
        allowed &= (i - j) < window
    out = np.empty((T, nh, d))
    for h in range(nh):
        kv = h // group
        s = (q[:, h, :] @ k[:, kv, :].T) / np.sqrt(d)
        s = np.where(allowed, s, -np.inf)
        m = np.maximum(s.max(axis=1, keepdims=True), sinks[h])
        e = np.exp(s - m)
        p = e / (np.exp(sinks[h] - m) + e.sum(axis=1, keepdims=True))
        out[:, h, :] = bf16(p @ v[:, kv, :])
    return out.reshape(T, nh * d)


# ----------------------------------------------------------------------------------------
# The model


class FlintReference:
    def __init__(self, model_dir, sliding_window: int | None = None):
        """sliding_window overrides the config's W (for negative controls)."""
        self.ckpt = Checkpoint(model_dir)
        c = self.ckpt.config
        self.c = c
        self.window = int(sliding_window if sliding_window is not None else c["sliding_window"])
        self._cache = {}

    def w(self, name: str) -> np.ndarray:
        if name not in self._cache:
            self._cache[name] = self.ckpt.get(name)
        return self._cache[name]

    def moe(self, x: np.ndarray, p: str, stats: dict | None, layer: int) -> np.ndarray:
        c = self.c
        n_exp, k, rsf = int(c["n_routed_experts"]), int(c["num_experts_per_tok"]), float(c["routed_scaling_factor"])
        r = x @ self.w(p + "mlp.gate.weight").T
        s = sigmoid(r)
        sel = s + self.w(p + "mlp.gate.e_score_correction_bias")[None, :]
        chosen = np.argsort(-sel, axis=1, kind="stable")[:, :k]  # stable: ties keep the lower index
        ws = np.take_along_axis(s, chosen, axis=1)
        if c.get("norm_topk_prob", True):
            ws = ws / (ws.sum(axis=1, keepdims=True) + 1e-20)
        ws = ws * rsf
        if stats is not None:
            stats.setdefault("expert_counts", {})[layer] = np.bincount(chosen.ravel(), minlength=n_exp)
        acc = np.zeros_like(x)
        for e in range(n_exp):
            rows, slots = np.nonzero(chosen == e)
            if rows.size == 0:
                continue
            q = f"{p}mlp.experts.{e}."
            y = swiglu(x[rows], self.w(q + "gate_proj.weight"), self.w(q + "up_proj.weight"), self.w(q + "down_proj.weight"))
            acc[rows] += ws[rows, slots][:, None] * y
        q = p + "mlp.shared_experts."
        shared = swiglu(x, self.w(q + "gate_proj.weight"), self.w(q + "up_proj.weight"), self.w(q + "down_proj.weight"))
        return bf16(bf16(acc) + shared)

    def logits(self, ids, stats: dict | None = None) -> np.ndarray:
        """bf16 logits [T, V] (float64 array) of the sequence `ids` from position 0.

        stats, when given, receives expert_counts {layer: selections per expert} and
        hidden_rms [per layer: RMS of the residual stream after the layer]."""
        c = self.c
        eps = float(c["rms_norm_eps"])
        nh, nkv, d = int(c["num_attention_heads"]), int(c["num_key_value_heads"]), int(c["head_dim"])
        ids = np.asarray(ids, dtype=np.int64)
        T = ids.size
        cos, sin = rope_tables(np.arange(T), d, float(c["rope_theta"]))
        h = bf16(self._rows("model.embed_tokens.weight", ids))
        for l in range(int(c["num_hidden_layers"])):
            p = f"model.layers.{l}."
            sliding = c["layer_types"][l] == "sliding_attention"
            x = rmsnorm(h, self.w(p + "input_layernorm.weight"), eps)
            q = bf16(x @ self.w(p + "self_attn.q_proj.weight").T).reshape(T, nh, d)
            k = bf16(x @ self.w(p + "self_attn.k_proj.weight").T).reshape(T, nkv, d)
            v = bf16(x @ self.w(p + "self_attn.v_proj.weight").T).reshape(T, nkv, d)
            if c.get("use_qk_norm", True):
                q = rmsnorm(q, self.w(p + "self_attn.q_norm.weight"), eps)
                k = rmsnorm(k, self.w(p + "self_attn.k_norm.weight"), eps)
            if sliding:
                q, k = rope(q, cos, sin), rope(k, cos, sin)
            sinks = self.w(p + "self_attn.sinks") if c.get("attention_sinks", True) else np.full(nh, -np.inf)
            o = attention(q, k, v, sinks, sliding, self.window)
            h = bf16(h + bf16(o @ self.w(p + "self_attn.o_proj.weight").T))
            x = rmsnorm(h, self.w(p + "post_attention_layernorm.weight"), eps)
            if l < int(c["first_k_dense_replace"]):
                y = swiglu(x, self.w(p + "mlp.gate_proj.weight"), self.w(p + "mlp.up_proj.weight"),
                           self.w(p + "mlp.down_proj.weight"))
            else:
                y = self.moe(x, p, stats, l)
            h = bf16(h + y)
            if stats is not None:
                stats.setdefault("hidden_rms", []).append(float(np.sqrt(np.mean(h * h))))
        x = rmsnorm(h, self.w("model.norm.weight"), eps)
        return self._lm_head(x)

    def _lm_head(self, x: np.ndarray) -> np.ndarray:
        # In vocabulary slices: the float64 copy of a whole [V, H] head would be large.
        _, head = self.ckpt.raw("lm_head.weight")
        V = head.shape[0]
        out = np.empty((x.shape[0], V))
        step = 16384
        for b in range(0, V, step):
            rows = self._rows("lm_head.weight", slice(b, min(V, b + step)))
            out[:, b : b + rows.shape[0]] = bf16(x @ rows.T)
        return out

    def _rows(self, name: str, index) -> np.ndarray:
        """Rows of a 2-D tensor (slice or id array) as float64, without converting the rest."""
        dtype, data = self.ckpt.raw(name)
        part = np.asarray(data[index])
        if dtype == "BF16":
            return (part.astype(np.uint32) << np.uint32(16)).view(np.float32).astype(np.float64)
        return part.astype(np.float64)


def log_softmax(logits: np.ndarray) -> np.ndarray:
    m = logits.max(axis=-1, keepdims=True)
    return logits - (m + np.log(np.exp(logits - m).sum(axis=-1, keepdims=True)))


def teacher_forced(logits: np.ndarray, ids) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(logprobs [T-1] of ids[i+1], argmax [T-1], full log-softmax [T-1, V]) from logits [T, V]."""
    ids = np.asarray(ids)
    lsm = log_softmax(logits[:-1])
    lp = lsm[np.arange(ids.size - 1), ids[1:]]
    return lp, lsm.argmax(axis=1), lsm


def conformance(test_logprobs, test_argmax, ref_lsm, ids) -> dict:
    """FLINT.md §4's statistical rule, comparing a tested implementation against the reference.

    Returns the measured numbers and `passed`."""
    ids = np.asarray(ids)
    n = ids.size - 1
    ref_lp = ref_lsm[np.arange(n), ids[1:]]
    ref_arg = ref_lsm.argmax(axis=1)
    delta = np.abs(np.asarray(test_logprobs, dtype=np.float64) - ref_lp)
    test_argmax = np.asarray(test_argmax)
    agree = test_argmax == ref_arg
    # A disagreement is acceptable only when the reference itself nearly ties the two tokens.
    gaps = ref_lsm[np.arange(n), ref_arg] - ref_lsm[np.arange(n), test_argmax]
    worst_gap = float(gaps[~agree].max()) if (~agree).any() else 0.0
    result = {
        "positions": int(n),
        "median": float(np.median(delta)),
        "p95": float(np.percentile(delta, 95)),
        "argmax_agreement": float(agree.mean()),
        "worst_disagreement_gap": worst_gap,
    }
    result["passed"] = bool(result["median"] <= 0.03 and result["p95"] <= 0.15
                            and result["argmax_agreement"] >= 0.95 and worst_gap < 0.5)
    return result
