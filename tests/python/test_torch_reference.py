"""The PyTorch reference (torch_reference.py) against the float64 numpy reference, on the CPU.

torch is not in CI's requirements: PyPI's Linux wheel brings ~4 GB of CUDA libraries, too heavy
for a 2-core CI run, so these tests skip without it. The GPU flow runs the same check on the H200
(`long_context_check.py rule`, from scripts/gpu_long_context.sh), where torch is installed. Here:
the tiny config and its 2-KV-head variant under FLINT.md §4's rule, and the controls the
long-context check relies on (window one short, full layers cut to the last keys) must fail it.
"""
import json
import subprocess

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch not installed (too heavy for CI; the GPU flow runs this check)")

from flint_reference import FlintReference, conformance, teacher_forced  # noqa: E402
from test_cpu_conformance import variant_config  # noqa: E402
from torch_reference import TorchFlint  # noqa: E402

LENGTH = 300


@pytest.fixture(scope="module")
def models(striker_bin, shared_dir, tmp_path_factory):
    tiny = shared_dir / "fixtures/flint-config/config.tiny.json"
    variant = tmp_path_factory.mktemp("torch_variant_config") / "config.json"
    variant.write_text(json.dumps(variant_config(json.loads(tiny.read_text()))))
    out = {}
    for name, cfg, extra in (("tiny", tiny, []), ("variant", variant, []), ("sharp", tiny, ["--q-norm-scale", "3"])):
        path = tmp_path_factory.mktemp(f"torch_{name}")
        subprocess.run([str(striker_bin), "make-model", "--config", str(cfg), "--tokenizer",
                        str(shared_dir / "fixtures/flint-tokenizer"), "--out", str(path), "--seed", "5", *extra],
                       check=True, capture_output=True)
        out[name] = path
    return out


@pytest.fixture(scope="module")
def references(models):
    """Per model: the ids and the float64 reference's full log-softmax."""
    out = {}
    for name, path in models.items():
        ids = np.random.default_rng(40).integers(0, 151000, LENGTH)
        _, _, lsm = teacher_forced(FlintReference(path).logits(ids), ids)
        out[name] = (ids, lsm)
    return out


def check(model, references, name, **overrides):
    ids, lsm = references[name]
    tf = TorchFlint(model, device="cpu", **overrides).teacher_forced(ids)
    r = conformance(tf["logprobs"], tf["argmax"], lsm, ids)
    print(f"\ntorch vs float64, {name} {overrides or ''}: median {r['median']:.4f} p95 {r['p95']:.4f} "
          f"argmax {r['argmax_agreement']:.1%} worst gap {r['worst_disagreement_gap']:.3f}")
    return r, tf


@pytest.mark.parametrize("name", ["tiny", "variant"])
def test_torch_reference_meets_the_rule(models, references, name):
    r, tf = check(models[name], references, name)
    assert r["passed"], r
    # The reference's own argmax logprob and the `at` gather agree with its logprobs.
    ids, _ = references[name]
    again = TorchFlint(models[name], device="cpu").teacher_forced(ids, at=[ids[1:]])
    assert np.array_equal(again["at"][0], tf["logprobs"])
    assert (tf["best"] >= tf["logprobs"]).all()


def test_sharp_attention_is_measured(models, references):
    """q_norm x3: the two references still agree closely; the numbers go to the log."""
    r, _ = check(models["sharp"], references, "sharp")
    assert r["median"] < 0.05 and r["argmax_agreement"] > 0.9, r


@pytest.mark.parametrize("overrides", [{"sliding_window": 16}, {"full_window": 64}])
def test_controls_fail_the_rule(models, references, overrides):
    r, _ = check(models["tiny"], references, "tiny", **overrides)
    assert not r["passed"], r
