"""The numpy reference's own building blocks, on values small enough to check by hand."""
import numpy as np

from flint_reference import bf16, conformance, log_softmax, rope_tables


def f32_to_bf16_bits_reference(x32: np.ndarray) -> np.ndarray:
    """Round-to-nearest-even float32 -> bfloat16 the textbook way (on uint32 bits)."""
    u = x32.view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return ((u << 16).astype(np.uint32)).view(np.float32).astype(np.float64)


def test_bf16_ties_go_to_even_and_exact_values_stay():
    # 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: ties to the even mantissa (1).
    assert bf16(np.array([1.0 + 2.0**-8]))[0] == 1.0
    # 1 + 3·2^-8 lies halfway between 1 + 2^-7 and 1 + 2^-6: even is 1 + 2^-6.
    assert bf16(np.array([1.0 + 3 * 2.0**-8]))[0] == 1.0 + 2.0**-6
    # Just above a tie rounds up (a float64 bit below float32 precision still counts).
    assert bf16(np.array([1.0 + 2.0**-8 + 2.0**-40]))[0] == 1.0 + 2.0**-7
    for v in (0.0, -0.0, 1.5, -3.25, 2.0**-100, 448.0):
        assert bf16(np.array([v]))[0] == v
    assert np.isnan(bf16(np.array([np.nan]))[0])


def test_bf16_matches_float32_rounding_on_float32_inputs():
    x = np.random.default_rng(0).standard_normal(100000).astype(np.float32) * 37.0
    np.testing.assert_array_equal(bf16(x.astype(np.float64)), f32_to_bf16_bits_reference(x))


def test_rope_tables_start_at_identity_and_are_bf16():
    cos, sin = rope_tables(np.array([0, 1, 262143]), 32, 10000.0)
    assert (cos[0] == 1).all() and (sin[0] == 0).all()
    assert (bf16(cos) == cos).all() and (bf16(sin) == sin).all()
    # θ_0 = 1, so at p = 1 the first pair turns by exactly one radian.
    assert cos[1, 0] == bf16(np.array([np.cos(1.0)]))[0]


def test_conformance_rule_accepts_identity_and_rejects_noise():
    rng = np.random.default_rng(1)
    logits = bf16(rng.standard_normal((300, 50)) * 3)
    ids = rng.integers(0, 50, 301)
    lsm = log_softmax(logits)
    lp = lsm[np.arange(300), ids[1:]]
    ok = conformance(lp, lsm.argmax(axis=1), lsm, ids)
    assert ok["passed"] and ok["median"] == 0 and ok["argmax_agreement"] == 1
    noisy = log_softmax(logits + rng.standard_normal(logits.shape) * 0.3)
    bad = conformance(noisy[np.arange(300), ids[1:]], noisy.argmax(axis=1), lsm, ids)
    assert not bad["passed"]
