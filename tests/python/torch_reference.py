"""Independent PyTorch reference of the Flint forward pass (FLINT.md §4) for long sequences.

Written from the spec, sharing no code with striker or flint_reference.py, so that 100,000
positions of a mid-size checkpoint fit on one GPU (the float64 numpy reference is quadratic in
memory and far too slow there):
  - weights through the `safetensors` library (the files `striker make-model` writes, single or
    sharded), kept in their stored dtype;
  - the whole sequence one layer at a time (no KV cache), attention in query chunks over the
    keys each chunk may see, so memory is bounded by one chunk's scores;
  - bf16 rounding exactly where §4 writes bf16(): mm(x, W) of bf16 operands is a bf16 GEMM
    (fp32 accumulation, output rounded once; reduced-precision split-K reductions off);
    attention scores and P·V, the router and the expert sum in fp32 (TF32 off); every
    elementwise step in fp32, rounded to bf16 where §4 rounds; cos/sin in float64 rounded
    straight to bf16 (no detour through fp32);
  - top-K experts by a stable sort (ties: the lower expert index).
Controls for the long-context check change the masks and nothing else: `sliding_window` (e.g.
one short) and `full_window` (full-attention layers see only the last N keys).
"""
from __future__ import annotations

import json
import math
import pathlib

import numpy as np
import torch
from safetensors import safe_open


def _strict_numerics() -> None:
    """fp32 matmuls in true fp32 (no TF32), bf16 GEMM reductions in fp32."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    torch.set_float32_matmul_precision("highest")


def bf16_from_f64(x: torch.Tensor) -> torch.Tensor:
    """float64 -> bfloat16 rounded once to nearest-even (torch rounds through fp32: twice)."""
    u = x.contiguous().view(torch.int64)
    keep = (u >> 45) & 1
    u = (u + keep + ((1 << 44) - 1)) & ~((1 << 45) - 1)
    return u.view(torch.float64).to(torch.bfloat16)  # exact: the value is a bfloat16 now


def to_bf16(x: torch.Tensor) -> torch.Tensor:
    return x.to(torch.bfloat16)


class TorchFlint:
    """Flint from a safetensors checkpoint directory on `device`.

    sliding_window / full_window override the masks (controls); full_window=None: every key."""

    def __init__(self, model_dir, device: str = "cuda", sliding_window: int | None = None,
                 full_window: int | None = None, query_chunk_bytes: int = 4 << 30):
        _strict_numerics()
        self.dir = pathlib.Path(model_dir)
        self.c = json.loads((self.dir / "config.json").read_text())
        self.device = torch.device(device)
        self.window = int(sliding_window if sliding_window is not None else self.c["sliding_window"])
        self.full_window = full_window
        self.query_chunk_bytes = query_chunk_bytes
        self.t = {}
        files = sorted(self.dir.glob("*.safetensors"))
        if not files:
            raise FileNotFoundError(f"{self.dir}: no *.safetensors files")
        for f in files:
            with safe_open(str(f), framework="pt", device="cpu") as st:
                for name in st.keys():
                    self.t[name] = st.get_tensor(name).to(self.device)
        self._stack_experts()

    def _stack_experts(self) -> None:
        """Routed experts as [E, out, in] per layer and projection (one gather per expert later)."""
        c = self.c
        self.experts = {}
        for l in range(int(c["num_hidden_layers"])):
            if l < int(c["first_k_dense_replace"]):
                continue
            p = f"model.layers.{l}.mlp.experts."
            for proj in ("gate_proj", "up_proj", "down_proj"):
                names = [f"{p}{e}.{proj}.weight" for e in range(int(c["n_routed_experts"]))]
                self.experts[(l, proj)] = torch.stack([self.t.pop(n) for n in names])

    def w(self, name: str) -> torch.Tensor:
        return self.t[name]

    # ------------------------------------------------------------------------------------
    # Building blocks (x are bf16 tensors; results bf16 unless said otherwise)

    def rmsnorm(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        r = 1.0 / torch.sqrt(xf.square().mean(dim=-1, keepdim=True) + float(self.c["rms_norm_eps"]))  # not rsqrt's ~2 ulp
        return to_bf16(to_bf16(xf * r).float() * w.float())

    @staticmethod
    def mm(x: torch.Tensor, W: torch.Tensor) -> torch.Tensor:
        """bf16(mm(x, W)): a bf16 GEMM accumulates in fp32 and rounds its output once."""
        return x @ W.to(torch.bfloat16).t()

    def swiglu(self, x, gate, up, down) -> torch.Tensor:
        g = self.mm(x, gate).float()
        u = self.mm(x, up).float()
        a = to_bf16(to_bf16(g * torch.sigmoid(g)).float() * u)
        return self.mm(a, down)

    def rope_tables(self, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        """bf16 cos/sin [n, d/2]: θ_i and φ = fp32(p)·θ_i in fp32, cos/sin in float64."""
        d = int(self.c["head_dim"])
        i = torch.arange(d // 2, dtype=torch.float64)
        inv_freq = (float(self.c["rope_theta"]) ** (-2.0 * i / d)).float().to(self.device)
        phi = torch.arange(n, dtype=torch.float32, device=self.device)[:, None] * inv_freq[None, :]
        phi = phi.double()
        return bf16_from_f64(torch.cos(phi)), bf16_from_f64(torch.sin(phi))

    @staticmethod
    def rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """x [T, heads, d]; pairs (i, i + d/2)."""
        half = x.shape[-1] // 2
        x1, x2 = x[..., :half].float(), x[..., half:].float()
        c, s = cos[:, None, :].float(), sin[:, None, :].float()
        lo = to_bf16(to_bf16(x1 * c).float() - to_bf16(x2 * s).float())
        hi = to_bf16(to_bf16(x2 * c).float() + to_bf16(x1 * s).float())
        return torch.cat([lo, hi], dim=-1)

    def attention(self, q, k, v, sinks, sliding: bool) -> torch.Tensor:
        """q [T, nh, d], k/v [T, nkv, d] (bf16) at positions 0..T-1 -> o [T, nh·d] bf16.

        Query chunks [a, b) see keys [lo, b): lo from the window (sliding) or full_window."""
        T, nh, d = q.shape
        nkv = k.shape[1]
        group = nh // nkv
        span = self.window if sliding else self.full_window  # keys p-span+1 .. p, None: all
        kf = k.float().permute(1, 0, 2).contiguous()  # [nkv, T, d]
        vf = v.float().permute(1, 0, 2).contiguous()
        # Sink logit of query head g·group + j, shaped to broadcast over [nkv, group, C, keys].
        sink = sinks.float().view(nkv, group, 1, 1)
        out = torch.empty(T, nh * d, dtype=torch.bfloat16, device=q.device)
        # Scores of a chunk are fp32 [nh, C, keys]: a window's chunk sees C + span - 1 keys, a
        # full layer's up to T, so full layers take as many queries as fit in query_chunk_bytes.
        chunk = 1024 if span is not None else max(16, self.query_chunk_bytes // (4 * nh * T))
        scale = math.sqrt(d)
        for a in range(0, T, chunk):
            b = min(T, a + chunk)
            C = b - a
            lo = 0 if span is None else max(0, a - span + 1)
            qc = q[a:b].float().view(C, nkv, group, d).permute(1, 2, 0, 3).reshape(nkv, group * C, d)
            s = torch.bmm(qc, kf[:, lo:b].transpose(1, 2)).div_(scale).view(nkv, group, C, b - lo)
            pq = torch.arange(a, b, device=q.device)[:, None]
            pk = torch.arange(lo, b, device=q.device)[None, :]
            allowed = pk <= pq
            if span is not None:
                allowed &= (pq - pk) < span
            s.masked_fill_(~allowed, float("-inf"))
            m = torch.maximum(s.amax(dim=-1, keepdim=True), sink)
            s.sub_(m).exp_()
            denom = torch.exp(sink - m) + s.sum(dim=-1, keepdim=True)
            s.div_(denom)
            o = torch.bmm(s.view(nkv, group * C, b - lo), vf[:, lo:b])  # [nkv, group·C, d] fp32
            o = to_bf16(o).view(nkv, group, C, d).permute(2, 0, 1, 3).reshape(C, nh * d)
            out[a:b] = o
            del s, o
        return out

    def moe(self, x: torch.Tensor, l: int) -> torch.Tensor:
        c = self.c
        p = f"model.layers.{l}.mlp."
        K, rsf = int(c["num_experts_per_tok"]), float(c["routed_scaling_factor"])
        r = x.float() @ self.w(p + "gate.weight").float().t()
        s = torch.sigmoid(r)
        sel = s + self.w(p + "gate.e_score_correction_bias").float()[None, :]
        chosen = torch.sort(sel, dim=1, descending=True, stable=True).indices[:, :K]
        ws = s.gather(1, chosen)
        if c.get("norm_topk_prob", True):
            ws = ws / (ws.sum(dim=1, keepdim=True) + 1e-20)
        ws = ws * rsf
        acc = torch.zeros(x.shape, dtype=torch.float32, device=x.device)
        gate, up, down = (self.experts[(l, n)] for n in ("gate_proj", "up_proj", "down_proj"))
        order = torch.argsort(chosen.flatten(), stable=True)
        counts = torch.bincount(chosen.flatten(), minlength=gate.shape[0]).tolist()
        start = 0
        for e, n in enumerate(counts):
            if n == 0:
                continue
            flat = order[start:start + n]
            start += n
            rows = flat // K
            y = self.swiglu(x[rows], gate[e], up[e], down[e])
            acc.index_add_(0, rows, ws.flatten()[flat][:, None] * y.float())
        q = p + "shared_experts."
        shared = self.swiglu(x, self.w(q + "gate_proj.weight"), self.w(q + "up_proj.weight"),
                             self.w(q + "down_proj.weight"))
        return to_bf16(to_bf16(acc).float() + shared.float())

    # ------------------------------------------------------------------------------------
    # The model

    @torch.no_grad()
    def final_hidden(self, ids) -> torch.Tensor:
        """rmsnorm(h, model.norm) [T, H] bf16 for the sequence `ids` from position 0."""
        c = self.c
        nh, nkv, d = int(c["num_attention_heads"]), int(c["num_key_value_heads"]), int(c["head_dim"])
        ids_t = torch.as_tensor(np.asarray(ids, dtype=np.int64), device=self.device)
        T = ids_t.numel()
        cos, sin = self.rope_tables(T)
        h = self.w("model.embed_tokens.weight")[ids_t].to(torch.bfloat16)
        for l in range(int(c["num_hidden_layers"])):
            p = f"model.layers.{l}."
            sliding = c["layer_types"][l] == "sliding_attention"
            x = self.rmsnorm(h, self.w(p + "input_layernorm.weight"))
            q = self.mm(x, self.w(p + "self_attn.q_proj.weight")).view(T, nh, d)
            k = self.mm(x, self.w(p + "self_attn.k_proj.weight")).view(T, nkv, d)
            v = self.mm(x, self.w(p + "self_attn.v_proj.weight")).view(T, nkv, d)
            if c.get("use_qk_norm", True):
                q = self.rmsnorm(q, self.w(p + "self_attn.q_norm.weight"))
                k = self.rmsnorm(k, self.w(p + "self_attn.k_norm.weight"))
            if sliding:
                q, k = self.rope(q, cos, sin), self.rope(k, cos, sin)
            if c.get("attention_sinks", True):
                sinks = self.w(p + "self_attn.sinks")
            else:
                sinks = torch.full((nh,), float("-inf"), device=self.device)
            o = self.attention(q, k, v, sinks, sliding)
            del q, k, v
            h = to_bf16(h.float() + self.mm(o, self.w(p + "self_attn.o_proj.weight")).float())
            x = self.rmsnorm(h, self.w(p + "post_attention_layernorm.weight"))
            if l < int(c["first_k_dense_replace"]):
                y = self.swiglu(x, self.w(p + "mlp.gate_proj.weight"), self.w(p + "mlp.up_proj.weight"),
                                self.w(p + "mlp.down_proj.weight"))
            else:
                y = self.moe(x, l)
            h = to_bf16(h.float() + y.float())
        return self.rmsnorm(h, self.w("model.norm.weight"))

    @torch.no_grad()
    def score(self, final: torch.Tensor, ids, at=(), rows_per_chunk: int = 2048) -> dict:
        """Teacher-forced scores of positions 0..T-2 from final_hidden(ids): log-softmax of the bf16
        logits in float64. Returns numpy arrays: logprobs (of ids[i+1]), argmax (lowest id on
        ties), best (the argmax's logprob) and at[k] -> logprobs of the tokens at[k][i] (e.g.
        another implementation's argmax, for the near-tie rule)."""
        head = self.w("lm_head.weight")
        ids_t = torch.as_tensor(np.asarray(ids, dtype=np.int64), device=self.device)
        n = ids_t.numel() - 1
        at_t = [torch.as_tensor(np.asarray(a, dtype=np.int64), device=self.device) for a in at]
        lp = torch.empty(n, dtype=torch.float64, device=self.device)
        arg = torch.empty(n, dtype=torch.int64, device=self.device)
        best = torch.empty(n, dtype=torch.float64, device=self.device)
        lp_at = [torch.empty(n, dtype=torch.float64, device=self.device) for _ in at]
        for a in range(0, n, rows_per_chunk):
            b = min(n, a + rows_per_chunk)
            logits = self.mm(final[a:b], head).double()
            lse = torch.logsumexp(logits, dim=1)
            lp[a:b] = logits.gather(1, ids_t[a + 1:b + 1, None])[:, 0] - lse
            arg[a:b] = logits.argmax(dim=1)  # first maximum: the lowest id
            best[a:b] = logits.gather(1, arg[a:b, None])[:, 0] - lse
            for k, tok in enumerate(at_t):
                lp_at[k][a:b] = logits.gather(1, tok[a:b, None])[:, 0] - lse
            del logits
        return {"logprobs": lp.cpu().numpy(), "argmax": arg.cpu().numpy(), "best": best.cpu().numpy(),
                "at": [x.cpu().numpy() for x in lp_at]}

    def teacher_forced(self, ids, at=()) -> dict:
        return self.score(self.final_hidden(ids), ids, at)
