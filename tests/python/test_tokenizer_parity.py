"""striker's tokenizer vs the Hugging Face `tokenizers` package (the oracle, run live here) on
both fixture tokenizers and a corpus of > 2,000 strings."""
import random

import pytest
from tokenizers import Tokenizer

from tokenizer_helpers import load_corpus, run_lines

TOKENIZERS = ["flint-tokenizer", "tokenizers/qwen3"]


@pytest.fixture(scope="module")
def corpus():
    strings = load_corpus()
    assert len(strings) >= 2000
    return strings


def fixture_dir(shared_dir, name):
    return shared_dir / "fixtures" / name


def first_mismatch(ours, theirs, inputs):
    for i, (a, b) in enumerate(zip(ours, theirs)):
        if a != b:
            return f"input {i} {inputs[i]!r:.200}: ours {a!r:.300} hf {b!r:.300}"
    return None


@pytest.mark.parametrize("name", TOKENIZERS)
@pytest.mark.parametrize("add_special", [False, True])
def test_encode_ids_equal_hf(striker_bin, shared_dir, corpus, name, add_special):
    d = fixture_dir(shared_dir, name)
    hf = Tokenizer.from_file(str(d / "tokenizer.json"))
    flags = ["--add-special-tokens"] if add_special else []
    ours = run_lines(striker_bin, d, "input", corpus, *flags)
    theirs = [hf.encode(s, add_special_tokens=add_special).ids for s in corpus]
    assert first_mismatch(ours, theirs, corpus) is None
    assert sum(map(len, ours)) > 100_000  # the corpus really exercises the model


@pytest.mark.parametrize("name", TOKENIZERS)
@pytest.mark.parametrize("skip_special", [False, True])
def test_decode_equals_hf(striker_bin, shared_dir, corpus, name, skip_special):
    d = fixture_dir(shared_dir, name)
    hf = Tokenizer.from_file(str(d / "tokenizer.json"))
    id_lists = [hf.encode(s, add_special_tokens=False).ids for s in corpus]
    flags = ["--skip-special-tokens"] if skip_special else []
    ours = run_lines(striker_bin, d, "decode", id_lists, *flags)
    theirs = [hf.decode(ids, skip_special_tokens=skip_special) for ids in id_lists]
    assert first_mismatch(ours, theirs, id_lists) is None
    if not skip_special:
        # Round trip: decoding what was encoded gives back the (NFC-normalized) text.
        normalizer = hf.normalizer
        for s, text in zip(corpus, ours):
            assert text == normalizer.normalize_str(s)


@pytest.mark.parametrize("name", TOKENIZERS)
def test_decode_random_ids_equals_hf(striker_bin, shared_dir, name):
    """Arbitrary id sequences split UTF-8 characters anywhere: the U+FFFD substitution must match."""
    d = fixture_dir(shared_dir, name)
    hf = Tokenizer.from_file(str(d / "tokenizer.json"))
    rng = random.Random(7)
    size = hf.get_vocab_size(with_added_tokens=True)
    id_lists = [[rng.randrange(size) for _ in range(rng.randint(0, 30))] for _ in range(3000)]
    # Bias towards single-byte tokens so lone lead / continuation bytes are common.
    byte_ids = [i for i in range(size) if len(hf.decode([i]).encode("utf-8")) <= 3 and len(hf.id_to_token(i)) == 1]
    id_lists += [[rng.choice(byte_ids) for _ in range(rng.randint(1, 12))] for _ in range(3000)]
    for skip in (False, True):
        ours = run_lines(striker_bin, d, "decode", id_lists, *(["--skip-special-tokens"] if skip else []))
        theirs = [hf.decode(ids, skip_special_tokens=skip) for ids in id_lists]
        assert first_mismatch(ours, theirs, id_lists) is None


FUZZ_POOL = list(" \t\n\r\u00a0\u3000\u2028\u0085\u180e'sStTdDlLmMvVrReE0123456789٣²½aé中🙂\u200d\u0301,.!?<>|/[]_-") + [
    "<|user|>", "<think>", "</think>", "<|im_start|>", "'s", "'LL", "<|", "|>", "[gMASK]", "\r\n", "  ", "\u0915\u094d"]


def random_codepoint(rng):
    while True:
        c = rng.randint(0x20, 0x10FFFF)
        if not 0xD800 <= c <= 0xDFFF:
            return chr(c)


@pytest.mark.parametrize("name", TOKENIZERS)
def test_fuzzed_strings_equal_hf(striker_bin, shared_dir, name):
    """Short strings from an alphabet of regex-boundary characters (contractions, digits, the
    whitespace the split pattern treats specially, token fragments), plus random code points."""
    d = fixture_dir(shared_dir, name)
    hf = Tokenizer.from_file(str(d / "tokenizer.json"))
    rng = random.Random(1)
    strings = ["".join(rng.choice(FUZZ_POOL) for _ in range(rng.randint(0, 40))) for _ in range(6000)]
    strings += ["".join(random_codepoint(rng) if rng.random() < 0.5 else rng.choice(" a1\n")
                        for _ in range(rng.randint(1, 30))) for _ in range(2000)]
    ours = run_lines(striker_bin, d, "input", strings)
    theirs = [hf.encode(s, add_special_tokens=False).ids for s in strings]
    assert first_mismatch(ours, theirs, strings) is None
