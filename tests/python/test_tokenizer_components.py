"""Each tokenizer.json component striker supports, checked against the Hugging Face `tokenizers`
package on small tokenizers built here with its Python API (saved to tokenizer.json, then
loaded by both). Also the one-line errors for bad or unsupported files."""
import json
import random

import pytest
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

from tokenizer_helpers import load_corpus, run_error, run_lines

TRAIN_TEXT = [
    "The quick brown fox jumps over the lazy dog 1234567890, again and again; don't stop!",
    "Tokenizers split text into pieces: words, sub-words and bytes. 2024-06-01 12:30",
    "naïve café résumé Straße ﬁnance ＡＢＣ ①②③ Ⅻ",
    "def main(): return [x * 2 for x in range(10)]",
    "你好世界，这是一个测试。 مرحبا بالعالم नमस्ते दुनिया 🙂🚀",
] * 20

SAMPLES = [
    "", " ", "Hello world", "hello   world  ", "don't STOP, 1234567 times!", "a,b;c,,d;;e", "x1y22z333",
    "  leading and trailing  ", "tabs\tand\nnewlines\r\n", "naïve café ﬁnance ＡＢＣ ①", "e\u0301 A\u030a",
    "你好世界 🙂 مرحبا नमस्ते", "<s>hello</s>", "a <x> b<x>c  <x>  d", "foo food foo_bar (foo) foo", "[R]   next",
    "BAR bar Bar", "unknown 中文 chars 🙂!", "a" * 300, "1 22 333 4444 55555", "foo<x>foo", "\u2028\u0085\u3000x",
]


@pytest.fixture(scope="module")
def samples():
    return SAMPLES + load_corpus()[:400]


def train_byte_level(pre_tok, normalizer=None, vocab_size=600):
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizer
    tok.pre_tokenizer = pre_tok
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(TRAIN_TEXT, trainer=trainer)
    return tok


def train_char_level(**bpe_args):
    tok = Tokenizer(models.BPE(unk_token=bpe_args.pop("unk_token", None), **bpe_args))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    affixes = {k: v for k, v in bpe_args.items() if k in ("continuing_subword_prefix", "end_of_word_suffix")}
    trainer = trainers.BpeTrainer(vocab_size=300, show_progress=False, special_tokens=["[UNK]"], **affixes)
    tok.train_from_iterator(TRAIN_TEXT[:4], trainer=trainer)
    return tok


def save(tok, tmp_path, patch=None):
    d = tmp_path / "tok"
    d.mkdir(exist_ok=True)
    data = json.loads(tok.to_str())
    if patch:
        patch(data)
    (d / "tokenizer.json").write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return d, Tokenizer.from_file(str(d / "tokenizer.json"))


def check(striker_bin, d, hf, texts, add_special=(False,)):
    for special in add_special:
        ours = run_lines(striker_bin, d, "input", texts, *(["--add-special-tokens"] if special else []))
        for s, o in zip(texts, ours):
            assert o == hf.encode(s, add_special_tokens=special).ids, f"encode {s!r:.120} special={special}"
    ids = [hf.encode(s, add_special_tokens=True).ids for s in texts]
    for skip in (False, True):
        ours = run_lines(striker_bin, d, "decode", ids, *(["--skip-special-tokens"] if skip else []))
        for i, o in zip(ids, ours):
            assert o == hf.decode(i, skip_special_tokens=skip), f"decode {i[:20]} skip={skip}"


SPLIT_PATTERNS = [Regex(r"\d+|[,;]"), Regex(r"\s+"), " ", Regex(r"(?i:the|and)"), Regex(r"\p{L}+")]


@pytest.mark.parametrize("behavior", ["removed", "isolated", "merged_with_previous", "merged_with_next", "contiguous"])
@pytest.mark.parametrize("invert", [False, True])
@pytest.mark.parametrize("pattern_index", range(len(SPLIT_PATTERNS)))
def test_split_behaviors(striker_bin, tmp_path, samples, behavior, invert, pattern_index):
    split = pre_tokenizers.Split(SPLIT_PATTERNS[pattern_index], behavior, invert=invert)
    tok = train_byte_level(pre_tokenizers.Sequence([split, pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]))
    d, hf = save(tok, tmp_path)
    check(striker_bin, d, hf, samples[:80])


@pytest.mark.parametrize("add_prefix_space", [False, True])
def test_byte_level_with_its_regex(striker_bin, tmp_path, samples, add_prefix_space):
    tok = train_byte_level(pre_tokenizers.ByteLevel(add_prefix_space=add_prefix_space, use_regex=True))
    tok.add_special_tokens([AddedToken("<s>", special=True)])
    d, hf = save(tok, tmp_path)
    check(striker_bin, d, hf, samples)


def test_digits_whitespace_sequence(striker_bin, tmp_path, samples):
    for seq in ([pre_tokenizers.Digits(individual_digits=True)], [pre_tokenizers.Digits(individual_digits=False)],
                [pre_tokenizers.Whitespace()], [pre_tokenizers.WhitespaceSplit()],
                [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Digits(individual_digits=True)]):
        tok = train_byte_level(pre_tokenizers.Sequence(seq + [pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]))
        d, hf = save(tok, tmp_path)
        check(striker_bin, d, hf, samples[:150])


NORMALIZERS = [
    normalizers.NFC(), normalizers.NFD(), normalizers.NFKC(), normalizers.NFKD(), normalizers.Lowercase(),
    normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()]), normalizers.Strip(),
    normalizers.Strip(left=False, right=True), normalizers.Replace(" ", "_"), normalizers.Replace(Regex(r"\d+"), "#"),
    normalizers.Prepend("▁"),
]


@pytest.mark.parametrize("index", range(len(NORMALIZERS)))
def test_normalizers(striker_bin, tmp_path, samples, index):
    tok = train_byte_level(pre_tokenizers.ByteLevel(add_prefix_space=False), normalizer=NORMALIZERS[index])
    d, hf = save(tok, tmp_path)
    check(striker_bin, d, hf, samples[:200])


def test_added_token_flags(striker_bin, tmp_path, samples):
    tok = train_byte_level(pre_tokenizers.ByteLevel(add_prefix_space=False), normalizer=normalizers.Lowercase())
    tok.add_special_tokens([AddedToken("<s>", special=True), AddedToken("</s>", special=True)])
    tok.add_tokens([
        AddedToken("<x>", lstrip=True, rstrip=False, normalized=False),
        AddedToken("[R]", rstrip=True, normalized=False),
        AddedToken("foo", single_word=True, normalized=False),
        AddedToken("BAR", normalized=True),  # matched against the lowercased text, decodes as "bar"
        AddedToken("Sé", special=True, normalized=True),  # HF decodes it as "s\ufffd", even when skipping
        AddedToken("<xx>", normalized=False),  # longest match wins over "<x>"
    ])
    d, hf = save(tok, tmp_path)
    extra = ["<xx> <x>", "x<xx>x", "foo.foo", "éfoo foo1 _foo foo_", "  <x>  [R]  [R][R]  ", "bar BAR", "Sé sé"]
    check(striker_bin, d, hf, samples[:200] + extra)


@pytest.mark.parametrize("kind", ["template", "bert", "roberta"])
def test_post_processors(striker_bin, tmp_path, samples, kind):
    tok = train_byte_level(pre_tokenizers.ByteLevel(add_prefix_space=False))
    tok.add_special_tokens([AddedToken("<s>", special=True), AddedToken("</s>", special=True)])
    bos, eos = tok.token_to_id("<s>"), tok.token_to_id("</s>")
    if kind == "template":
        tok.post_processor = processors.TemplateProcessing(single="<s> $A </s> </s>", special_tokens=[("<s>", bos), ("</s>", eos)])
    elif kind == "bert":
        tok.post_processor = processors.BertProcessing(("</s>", eos), ("<s>", bos))
    else:
        tok.post_processor = processors.RobertaProcessing(("</s>", eos), ("<s>", bos))
    d, hf = save(tok, tmp_path)
    check(striker_bin, d, hf, samples[:100], add_special=(False, True))


@pytest.mark.parametrize("fuse_unk", [False, True])
def test_char_level_unk_and_affixes(striker_bin, tmp_path, samples, fuse_unk):
    for affixes in ({}, {"continuing_subword_prefix": "##"}, {"end_of_word_suffix": "</w>"}):
        tok = train_char_level(unk_token="[UNK]", fuse_unk=fuse_unk, **affixes)
        tok.decoder = decoders.Sequence([decoders.Replace("</w>", " "), decoders.Fuse()])
        d, hf = save(tok, tmp_path)
        check(striker_bin, d, hf, samples[:150])


@pytest.mark.parametrize("start, stop", [(0, 1), (1, 0), (2, 3)])
def test_strip_decoder(striker_bin, tmp_path, samples, start, stop):
    tok = train_char_level(end_of_word_suffix="</w>")
    tok.decoder = decoders.Sequence([decoders.Replace("</w>", " "), decoders.Strip(" ", start, stop), decoders.Fuse()])
    d, hf = save(tok, tmp_path)
    # HF's Strip decoder panics on an empty token list, so only non-empty id lists are compared.
    ids = [i for i in (hf.encode(s).ids for s in samples[:150]) if i]
    assert run_lines(striker_bin, d, "decode", ids) == [hf.decode(i) for i in ids]


def test_byte_fallback(striker_bin, tmp_path, samples):
    tok = train_char_level()
    tok.decoder = decoders.Sequence([decoders.ByteFallback(), decoders.Fuse()])

    def add_bytes(data):
        vocab = data["model"]["vocab"]
        for b in range(256):
            vocab.setdefault(f"<0x{b:02X}>", len(vocab))
        data["model"]["byte_fallback"] = True
        data["model"]["unk_token"] = None

    d, hf = save(tok, tmp_path, add_bytes)
    rng = random.Random(3)
    # Random byte-token runs decode to U+FFFD per byte when they are not valid UTF-8.
    byte_ids = [hf.token_to_id(f"<0x{b:02X}>") for b in range(256)]
    texts = samples[:150]
    check(striker_bin, d, hf, texts)
    id_lists = [[rng.choice(byte_ids + [5, 6, 7]) for _ in range(rng.randint(1, 10))] for _ in range(500)]
    ours = run_lines(striker_bin, d, "decode", id_lists)
    assert ours == [hf.decode(i) for i in id_lists]


def test_ignore_merges_and_legacy_merges(striker_bin, tmp_path, samples):
    tok = train_byte_level(pre_tokenizers.ByteLevel(add_prefix_space=False), vocab_size=400)

    def ignore(data):
        data["model"]["ignore_merges"] = True
        # A whole word in the vocab that merges would not produce: ignore_merges must pick it.
        data["model"]["vocab"]["Ġquickbrown"] = len(data["model"]["vocab"])

    d, hf = save(tok, tmp_path, ignore)
    check(striker_bin, d, hf, samples[:150] + [" quickbrown", "the quickbrown fox"])

    def legacy(data):
        data["model"]["merges"] = [" ".join(m) for m in data["model"]["merges"]]

    d, hf = save(tok, tmp_path, legacy)
    check(striker_bin, d, hf, samples[:150])


# ---- errors: one line naming the file and the JSON path ----

def write(tmp_path, data):
    d = tmp_path / "bad"
    d.mkdir(exist_ok=True)
    (d / "tokenizer.json").write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return d


def small_json():
    return json.loads(train_byte_level(pre_tokenizers.ByteLevel(add_prefix_space=False), vocab_size=300).to_str())


@pytest.mark.parametrize("mutate, expect", [
    (lambda j: j.update(pre_tokenizer={"type": "Sequence", "pretokenizers": [{"type": "ByteLevel"}, {"type": "CharDelimiterSplit"}]}),
     "/pre_tokenizer/pretokenizers/1/type: unsupported pre-tokenizer type 'CharDelimiterSplit'"),
    (lambda j: j.update(normalizer={"type": "BertNormalizer"}), "/normalizer/type: unsupported normalizer type"),
    (lambda j: j["model"].update(type="WordPiece"), "/model/type: unsupported model type 'WordPiece'"),
    (lambda j: j.update(decoder={"type": "CTC"}), "/decoder/type: unsupported decoder type 'CTC'"),
    (lambda j: j["model"]["merges"].__setitem__(3, ["nope?", "x"]), "/model/merges/3: merge token 'nope?' is not in the vocab"),
    (lambda j: j["model"].pop("vocab"), "/model/vocab: missing field"),
    (lambda j: j.update(pre_tokenizer={"type": "Split", "pattern": {"Regex": "(unclosed"}, "behavior": "Isolated"}),
     "/pre_tokenizer/pattern/Regex: regex does not compile"),
    (lambda j: j.update(pre_tokenizer={"type": "Split", "pattern": {"Regex": "a"}, "behavior": "Sideways"}),
     "/pre_tokenizer/behavior: unknown split behavior 'Sideways'"),
])
def test_bad_component_errors(striker_bin, tmp_path, mutate, expect):
    data = small_json()
    mutate(data)
    d = write(tmp_path, data)
    rc, err = run_error(striker_bin, d, "--text", "hi")
    assert rc != 0
    assert err.count("\n") == 1, err
    assert str(d / "tokenizer.json") in err and expect in err, err


def test_missing_and_invalid_files(striker_bin, tmp_path):
    rc, err = run_error(striker_bin, tmp_path / "nowhere", "--text", "hi")
    # (a path that is neither a folder nor a Hub repo id: the error names it)
    assert rc != 0 and "nowhere' is not an existing file or directory" in err and err.count("\n") == 1
    d = write(tmp_path, "{ not json")
    rc, err = run_error(striker_bin, d, "--text", "hi")
    assert rc != 0 and "invalid JSON" in err and err.count("\n") == 1


def test_llama2_style_sentencepiece_bpe(striker_bin, tmp_path, samples):
    """Prepend + Replace normalizers, no pre-tokenizer, byte_fallback with an unk token, and the
    Replace / ByteFallback / Fuse / Strip decoder chain (the layout of Llama-2-style files)."""
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    trainer = trainers.BpeTrainer(vocab_size=400, show_progress=False, special_tokens=["<unk>", "<s>", "</s>"])
    tok.train_from_iterator([t.replace(" ", "▁") for t in TRAIN_TEXT], trainer=trainer)
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])

    def add_bytes(data):
        vocab = data["model"]["vocab"]
        for b in range(256):
            vocab.setdefault(f"<0x{b:02X}>", len(vocab))

    d, hf = save(tok, tmp_path, add_bytes)
    texts = [s for s in samples if s][:300]  # HF's Strip decoder panics on an empty token list
    check(striker_bin, d, hf, texts, add_special=(False, True))


@pytest.mark.parametrize("scheme", ["always", "first", "never"])
@pytest.mark.parametrize("split", [True, False])
def test_metaspace(striker_bin, tmp_path, samples, scheme, split):
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme=scheme, split=split)
    tok.decoder = decoders.Sequence([decoders.Metaspace(prepend_scheme=scheme), decoders.ByteFallback(), decoders.Fuse()])
    trainer = trainers.BpeTrainer(vocab_size=400, show_progress=False, special_tokens=["<unk>", "<s>", "</s>"])
    tok.train_from_iterator(TRAIN_TEXT, trainer=trainer)

    def add_bytes(data):
        vocab = data["model"]["vocab"]
        for b in range(256):
            vocab.setdefault(f"<0x{b:02X}>", len(vocab))
        data["added_tokens"].append({"id": len(vocab), "content": "<x>", "single_word": False, "lstrip": False,
                                     "rstrip": False, "normalized": False, "special": False})

    d, hf = save(tok, tmp_path, add_bytes)
    check(striker_bin, d, hf, samples[:300] + ["<x>a b", "a<x> b", " <x>", "<s> hi", "▁▁x ▁"])


def test_tokenizer_config_overrides_added_token_flags(striker_bin, tmp_path, samples):
    """from_dir applies tokenizer_config.json's added_tokens_decoder flags, as transformers does."""
    tok = train_byte_level(pre_tokenizers.ByteLevel(add_prefix_space=False))
    tok.add_tokens([AddedToken("<x>", normalized=False)])
    d, _ = save(tok, tmp_path)
    xid = tok.token_to_id("<x>")
    flags = {"content": "<x>", "lstrip": True, "rstrip": True, "single_word": False, "normalized": False, "special": True}
    (d / "tokenizer_config.json").write_text(json.dumps({"added_tokens_decoder": {str(xid): flags}}))
    expected = train_byte_level(pre_tokenizers.ByteLevel(add_prefix_space=False))
    expected.add_special_tokens([AddedToken("<x>", lstrip=True, rstrip=True, normalized=False, special=True)])
    texts = samples[:50] + ["a <x> b", "a  <x>  b", "<x><x>"]
    assert run_lines(striker_bin, d, "input", texts) == [expected.encode(s).ids for s in texts]
    ids = [expected.encode(s).ids for s in texts]
    assert run_lines(striker_bin, d, "decode", ids, "--skip-special-tokens") == [expected.decode(i) for i in ids]

    (d / "tokenizer_config.json").write_text(json.dumps({"added_tokens_decoder": {str(xid): dict(flags, content="<y>")}}))
    rc, err = run_error(striker_bin, d, "--text", "a")
    assert rc != 0 and f"tokenizer_config.json: /added_tokens_decoder/{xid}/content: does not match" in err


def test_padding_and_truncation(striker_bin, tmp_path, samples):
    tok = train_byte_level(pre_tokenizers.ByteLevel(add_prefix_space=False))
    tok.enable_padding()  # BatchLongest: no effect on one sequence, so it is accepted
    d, hf = save(tok, tmp_path)
    check(striker_bin, d, hf, samples[:50])
    tok.enable_padding(length=64)
    d, _ = save(tok, tmp_path)
    rc, err = run_error(striker_bin, d, "--text", "a")
    assert rc != 0 and "/padding: padding other than BatchLongest is not supported" in err
    tok.no_padding()
    tok.enable_truncation(16)
    d, _ = save(tok, tmp_path)
    rc, err = run_error(striker_bin, d, "--text", "a")
    assert rc != 0 and "/truncation: truncation is not supported" in err
