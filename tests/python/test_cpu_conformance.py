"""`striker perplexity` (CPU backend) against the independent numpy reference, FLINT.md §4's rule.

Three random checkpoints of the tiny config (make-model seeds 1-3), 256 random tokens each.
Also checks the checkpoints are realistic enough for the comparison to mean something, and
that the comparison can fail (a reference with the sliding window one token short must fail).
"""
import json
import os
import pathlib
import subprocess

import numpy as np
import pytest

from flint_reference import Checkpoint, FlintReference, conformance, teacher_forced

SEEDS = (1, 2, 3)   # the tiny config
VARIANT_SEED = 4    # a variant of it where the tiny config is blind (see variant_config)
LENGTH = 256


def variant_config(tiny_config: dict) -> dict:
    """The tiny config has one KV head and q_dim == H, so a wrong query-head -> KV-head
    mapping or a q_dim/H mix-up could not show there. This variant has 2 KV heads
    (2 query heads each), q_dim 192 != H 256, another window and layer order, top-4 of 12."""
    c = dict(tiny_config)
    c.update({"num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 48, "sliding_window": 9,
              "layer_types": ["full_attention", "sliding_attention", "sliding_attention", "full_attention",
                              "sliding_attention", "full_attention", "sliding_attention"],
              "first_k_dense_replace": 1, "n_routed_experts": 12, "num_experts_per_tok": 4,
              "routed_scaling_factor": 1.5})
    return c


def report(line: str) -> None:
    """Prints a measured number (visible with pytest -s) and keeps it in the build folder, so
    a quiet CI run still leaves the numbers behind (build/cpu_conformance.txt)."""
    print("\n" + line)
    build = os.environ.get("STRIKER_BUILD_DIR")
    if build and pathlib.Path(build).is_dir():
        with open(pathlib.Path(build) / "cpu_conformance.txt", "a") as f:
            f.write(line + "\n")


def tokenizer_size(tokenizer_dir: pathlib.Path) -> int:
    tok = json.loads((tokenizer_dir / "tokenizer.json").read_text())
    ids = list(tok["model"]["vocab"].values()) + [t["id"] for t in tok.get("added_tokens", [])]
    return max(ids) + 1


@pytest.fixture(scope="module")
def tiny(shared_dir):
    return shared_dir / "fixtures" / "flint-config" / "config.tiny.json", shared_dir / "fixtures" / "flint-tokenizer"


@pytest.fixture(scope="module")
def checkpoints(striker_bin, tiny, tmp_path_factory):
    config, tokenizer = tiny
    variant = tmp_path_factory.mktemp("variant_config") / "config.json"
    variant.write_text(json.dumps(variant_config(json.loads(config.read_text()))))
    out = {}
    for seed in SEEDS + (VARIANT_SEED,):
        path = tmp_path_factory.mktemp(f"tiny_seed{seed}")
        cfg = variant if seed == VARIANT_SEED else config
        subprocess.run([str(striker_bin), "make-model", "--config", str(cfg), "--tokenizer", str(tokenizer),
                        "--out", str(path), "--seed", str(seed)], check=True, capture_output=True)
        out[seed] = path
    return out


@pytest.fixture(scope="module")
def runs(striker_bin, tiny, checkpoints):
    """Per seed: the ids, striker's JSON output, and the reference's logits and routing stats."""
    _, tokenizer = tiny
    below = tokenizer_size(tokenizer)
    results = {}
    for seed, path in checkpoints.items():
        ids = np.random.default_rng(1000 + seed).integers(0, below, LENGTH).tolist()
        # Chunks of 100: the scored sequence also exercises chunked prefill over the cache.
        proc = subprocess.run([str(striker_bin), "perplexity", str(path), "--ids", ",".join(map(str, ids)),
                               "--json", "--chunk-size", "100"], check=True, capture_output=True, text=True)
        got = json.loads(proc.stdout)
        stats = {}
        logits = FlintReference(path).logits(ids, stats)
        results[seed] = {"ids": ids, "striker": got, "ref_logits": logits, "stats": stats}
    return results


@pytest.mark.parametrize("seed", SEEDS + (VARIANT_SEED,))
def test_perplexity_output_shape(runs, seed):
    got = runs[seed]["striker"]
    ids = runs[seed]["ids"]
    assert got["ids"] == ids
    assert len(got["logprobs"]) == len(ids) - 1 and len(got["argmax"]) == len(ids) - 1
    lp = np.asarray(got["logprobs"])
    assert np.isfinite(lp).all() and (lp <= 0).all()
    assert got["perplexity"] == pytest.approx(float(np.exp(-lp.mean())), rel=1e-9)


@pytest.mark.parametrize("seed", SEEDS + (VARIANT_SEED,))
def test_cpu_backend_conforms_to_reference(runs, seed):
    r = runs[seed]
    _, _, lsm = teacher_forced(r["ref_logits"], r["ids"])
    result = conformance(r["striker"]["logprobs"], r["striker"]["argmax"], lsm, r["ids"])
    report(f"{'variant' if seed == VARIANT_SEED else 'tiny'} seed {seed}: median |dlogprob| {result['median']:.4f}, p95 {result['p95']:.4f}, "
           f"argmax agreement {result['argmax_agreement']:.1%}, worst disagreement gap "
           f"{result['worst_disagreement_gap']:.3f} nats over {result['positions']} positions")
    assert result["passed"], result


def test_window_one_short_fails_the_rule(runs, checkpoints):
    """Negative control: the rule must reject a real (if small) semantic error."""
    seed = SEEDS[0]
    r = runs[seed]
    window = json.loads((checkpoints[seed] / "config.json").read_text())["sliding_window"]
    wrong = FlintReference(checkpoints[seed], sliding_window=window - 1).logits(r["ids"])
    _, _, lsm = teacher_forced(wrong, r["ids"])
    result = conformance(r["striker"]["logprobs"], r["striker"]["argmax"], lsm, r["ids"])
    report(f"negative control, window {window - 1} instead of {window}: median {result['median']:.4f}, "
           f"p95 {result['p95']:.4f}, argmax agreement {result['argmax_agreement']:.1%} (must fail)")
    assert not result["passed"], result


@pytest.mark.parametrize("seed", SEEDS + (VARIANT_SEED,))
def test_make_model_checkpoint_is_realistic(runs, checkpoints, seed):
    """The comparison only means something if the random model behaves like a model."""
    ckpt = Checkpoint(checkpoints[seed])
    config = ckpt.config
    for name in ckpt.names():
        dtype, raw = ckpt.raw(name)
        values = (raw.astype(np.uint32) << np.uint32(16)).view(np.float32) if dtype == "BF16" else raw
        assert np.isfinite(values).all(), f"{name} has NaN/Inf"
    moe_layers = range(int(config["first_k_dense_replace"]), int(config["num_hidden_layers"]))
    n_exp = int(config["n_routed_experts"])
    for l in range(int(config["num_hidden_layers"])):
        sinks = ckpt.get(f"model.layers.{l}.self_attn.sinks")
        assert np.count_nonzero(sinks) == sinks.size, f"layer {l}: zero sinks"
    used = []
    for l in moe_layers:
        bias = ckpt.get(f"model.layers.{l}.mlp.gate.e_score_correction_bias")
        assert np.count_nonzero(bias) > 0, f"layer {l}: routing bias is all zero"
        counts = runs[seed]["stats"]["expert_counts"][l]
        share = counts / counts.sum()
        used.append(f"{(counts > 0).sum()}/{n_exp} (max share {share.max():.0%})")
        # 256 tokens x top-6 of 16: every expert should be used and none should dominate.
        assert (counts > 0).sum() >= int(0.75 * n_exp), f"layer {l}: routing uses only {(counts > 0).sum()} experts"
        assert share.max() < 3.0 / n_exp, f"layer {l}: one expert takes {share.max():.0%} of the routing"
    report(f"seed {seed}: experts used per MoE layer: " + ", ".join(used))
    # The residual stream stays finite and grows gently through the layers (embeddings are
    # N(0, 0.5^2), so it starts near 0.5).
    rms = runs[seed]["stats"]["hidden_rms"]
    assert all(np.isfinite(rms)), rms
    assert max(rms) < 10.0, f"residual stream RMS per layer {rms}"
    report(f"seed {seed}: residual RMS per layer " + " ".join(f"{r:.2f}" for r in rms))
    logits = runs[seed]["ref_logits"]
    assert np.isfinite(logits).all()
    assert logits.std() > 0.1, "logits are nearly constant"
