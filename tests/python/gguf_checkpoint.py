"""Reads a Flint NVFP4 GGUF (FLINT.md §3) through llama.cpp's gguf-py and serves its tensors
under the Hugging Face names of FLINT.md §2, dequantised to float64 (E2M1 x E4M3 x scale2), so
the independent reference can run on exactly the weights the engine computes with."""
import json
import pathlib
import re

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize

_ATTN = {"q_proj": "attn_q", "k_proj": "attn_k", "v_proj": "attn_v", "o_proj": "attn_output",
         "q_norm": "attn_q_norm", "k_norm": "attn_k_norm"}
_MLP = {"gate_proj": "gate", "up_proj": "up", "down_proj": "down"}


def gguf_name(hf: str):
    """HF tensor name -> (GGUF tensor name, expert index or None)."""
    fixed = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
             "lm_head.weight": "output.weight"}
    if hf in fixed:
        return fixed[hf], None
    m = re.fullmatch(r"model\.layers\.(\d+)\.(.+)", hf)
    if not m:
        raise KeyError(hf)
    l, rest = m.group(1), m.group(2)
    b = f"blk.{l}."
    if rest == "input_layernorm.weight":
        return b + "attn_norm.weight", None
    if rest == "post_attention_layernorm.weight":
        return b + "ffn_norm.weight", None
    if rest == "self_attn.sinks":
        return b + "attn_sinks.weight", None
    if m2 := re.fullmatch(r"self_attn\.(\w+)\.weight", rest):
        return b + _ATTN[m2.group(1)] + ".weight", None
    if rest == "mlp.gate.weight":
        return b + "ffn_gate_inp.weight", None
    if rest == "mlp.gate.e_score_correction_bias":
        return b + "exp_probs_b.bias", None
    if m2 := re.fullmatch(r"mlp\.experts\.(\d+)\.(\w+)\.weight", rest):
        return b + f"ffn_{_MLP[m2.group(2)]}_exps.weight", int(m2.group(1))
    if m2 := re.fullmatch(r"mlp\.shared_experts\.(\w+)\.weight", rest):
        return b + f"ffn_{_MLP[m2.group(1)]}_shexp.weight", None
    if m2 := re.fullmatch(r"mlp\.(\w+)\.weight", rest):
        return b + f"ffn_{_MLP[m2.group(1)]}.weight", None
    raise KeyError(hf)


class GgufCheckpoint:
    """Same interface as flint_reference.Checkpoint (config, names(), get())."""

    def __init__(self, gguf_path, config_dir):
        self.reader = GGUFReader(str(gguf_path))
        self.config = json.loads((pathlib.Path(config_dir) / "config.json").read_text())
        self.tensors = {t.name: t for t in self.reader.tensors}
        self._dequant = {}

    def names(self):
        return self.tensors.keys()

    def _full(self, name: str) -> np.ndarray:
        if name not in self._dequant:
            t = self.tensors[name]
            w = np.asarray(dequantize(t.data, t.tensor_type), dtype=np.float64)
            scale_name = name[: -len(".weight")] + ".scale" if name.endswith(".weight") else None
            for s in (scale_name, name + ".scale"):
                if s and s in self.tensors:
                    scale = np.asarray(self.tensors[s].data, dtype=np.float64).reshape(-1)
                    w = w * (scale.reshape(-1, 1, 1) if w.ndim == 3 else scale[0])
            self._dequant[name] = w
        return self._dequant[name]

    def get(self, hf: str) -> np.ndarray:
        name, expert = gguf_name(hf)
        w = self._full(name)
        return w[expert] if expert is not None else w

    def raw(self, hf: str):
        """(dtype, array) like Checkpoint.raw; the weights are already dequantised float64."""
        return "F64", self.get(hf)
