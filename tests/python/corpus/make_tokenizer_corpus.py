"""Builds tokenizer_corpus.jsonl: >= 2,000 deterministic strings that stress a tokenizer.

Run `python3 make_tokenizer_corpus.py` to regenerate; the output is committed so the C++ tests
and the benchmark read the same strings as the Python parity tests. Categories: English prose,
CJK, Arabic, Hindi and other scripts, emoji and ZWJ sequences, source code, long whitespace and
digit runs, combining marks (composed and not), special-token text inside normal text, and
random code points.
"""
import json
import pathlib
import random

OUT = pathlib.Path(__file__).with_name("tokenizer_corpus.jsonl")

ENGLISH_WORDS = (
    "the of and to in is was he for it with as his on be at by I this had not are but from or have an "
    "they which one you were her all she there would their we him been has when who will more no if out "
    "so said what up its about into than them can only other new some could time these two may then do "
    "first any my now such like our over man me even most made after also did many before must through "
    "back years where much your way well down should because each just those people Mr how too little "
    "state good very make world still own see men work long get here between both life being under never "
    "day same another know while last might us great old year off come since against go came right used "
    "take three tokenizer inference server Flint mixture experts attention kernel throughput latency"
).split()
CONTRACTIONS = ["don't", "it's", "we're", "they've", "I'm", "you'll", "she'd", "IT'S", "We'RE", "O'Neil",
                "rock'n'roll", "'tis", "'s", "''", "'"]
PUNCT = list(".,;:!?-()[]{}\"'/\\@#$%^&*_+=<>|~`…—–«»“”‘’¿¡")

CHINESE = "的一是不了人我在有他这为之大来以个中上们到说国和地也子时道出而要于就下得可你年生自会那后能对着事其里所去行过家十用发天如然作方成者多日都三小军二无同么经法当起与好看学进种将还分此心前面又定见只主没公从"
JAPANESE_KANA = "あいうえおかきくけこさしすせそたちつてとなにぬねのはひふへほまみむめもやゆよらりるれろわをんアイウエオカキクケコサシスセソタチツテトナニヌネノハヒフヘホマミムメモヤユヨラリルレロワヲンー"
ARABIC_WORDS = "السلام عليكم مرحبا بالعالم اللغة العربية جميلة كتاب مدرسة الحاسوب الذكاء الاصطناعي شكرا جزيلا".split()
HINDI_WORDS = "नमस्ते दुनिया हिन्दी भाषा बहुत सुंदर है कंप्यूटर विज्ञान कृत्रिम बुद्धिमत्ता धन्यवाद क्षत्रिय श्री".split()
OTHER_SCRIPTS = [
    "Привет, как дела? Съешь же ещё этих мягких французских булок.",
    "Γειά σου Κόσμε· ἐν ἀρχῇ ἦν ὁ λόγος",
    "שלום עולם, מה שלומך?",
    "สวัสดีครับ ภาษาไทยไม่มีช่องว่างระหว่างคำ",
    "안녕하세요 세계, 한국어 토크나이저 테스트입니다.",
    "Tiếng Việt có nhiều dấu: ạ ả ã ấ ầ ẩ ẫ ậ",
    "ქართული ენა, Հայերեն լեզու, አማርኛ ቋንቋ",
    "தமிழ் மொழி, ಕನ್ನಡ ಭಾಷೆ, বাংলা ভাষা, ગુજરાતી",
    "Ελληνικά, Türkçe: İıĞğŞş, Polski: zażółć gęślą jaźń",
    "Deutsch: Größenmaßstäbe, Straße, ẞ; Français: cœur, ça, où",
]
EMOJI = ["😀", "🙂", "🚀", "🔥", "👍🏽", "👍🏿", "❤️", "🇺🇸", "🇯🇵", "🏳️‍🌈", "👨‍👩‍👧‍👦", "🧑🏻‍💻",
         "👩‍❤️‍💋‍👨", "🫠", "🦀", "1️⃣", "#️⃣", "©️", "™", "🏴󠁧󠁢󠁳󠁣󠁴󠁿"]
CODE = [
    "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n",
    "for (int i = 0; i < n; ++i) {\n\tsum += a[i] * b[i];\n}\n",
    "#include <vector>\nstd::vector<int32_t> ids{1, 2, 3};\nauto it = ids.begin();\n",
    "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}",
    "SELECT id, name FROM users WHERE age >= 18 ORDER BY name DESC LIMIT 10;",
    "fn main() -> Result<(), Box<dyn Error>> {\n    println!(\"{:?}\", x?);\n    Ok(())\n}\n",
    "<div class=\"row\"><span id='x'>&nbsp;&lt;tag&gt;</span></div>",
    "$ curl -s http://localhost:8000/v1/chat/completions -H 'Content-Type: application/json' | jq .",
    "x = [i**2 for i in range(10) if i % 2 == 0]  # squares\r\n",
    "    \t\tmixed_indent = True\n\n\n\treturn None\n",
    "if (a&&b||!c) { x <<= 2; y >>= 3; z ^= ~w; }",
    "const re = /^(?:[a-z0-9!#$%&'*+/=?^_`{|}~-]+)@example\\.com$/i;",
]
SPECIAL_TEXT = ["<|user|>", "<|assistant|>", "<|system|>", "<|observation|>", "<think>", "</think>",
                "<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>",
                "[gMASK]", "<sop>", "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_response>",
                "/nothink", "<|begin_of_box|>", "<|user", "|>", "<think", "think>", "<|", "[MASK]", "<eop>"]
WHITESPACE = [" ", "  ", "\t", "\n", "\r\n", "\u00a0", "\u3000", "\u2028", "\u2029", "\u0085", "\u200b",
              "\u2003", "\u202f", "\u205f", "\u180e", "\ufeff", "\x0b", "\x0c", "\r"]
DIGITS = "0123456789"
OTHER_DIGITS = ["٠١٢٣٤٥٦٧٨٩", "०१२३४५६७८९", "０１２３４５６７８９", "¹²³", "½¾", "Ⅻ", "௰", "𝟘𝟙𝟚"]
COMBINING = ["e\u0301", "a\u0308", "n\u0303", "o\u0302\u0323", "o\u0323\u0302", "A\u030a", "\u1100\u1161\u11a8",
             "c\u0327", "i\u0307", "u\u031b\u0301", "\u0915\u093c", "Z\u0335\u0336", "q\u0301\u0302\u0303\u0304",
             "\u0301", "e\u20dd", "ﬁ", "Ａ", "㎞", "ℌ", "①"]


def english_sentence(rng):
    words = []
    for _ in range(rng.randint(3, 25)):
        r = rng.random()
        if r < 0.08:
            words.append(rng.choice(CONTRACTIONS))
        elif r < 0.14:
            words.append(rng.choice(ENGLISH_WORDS).capitalize())
        elif r < 0.18:
            words.append(rng.choice(ENGLISH_WORDS).upper())
        else:
            words.append(rng.choice(ENGLISH_WORDS))
    s = " ".join(words)
    return s[0].upper() + s[1:] + rng.choice([".", "!", "?", "...", ",", ""])


def random_cjk(rng):
    parts = []
    for _ in range(rng.randint(1, 6)):
        pool = rng.choice([CHINESE, JAPANESE_KANA, CHINESE + JAPANESE_KANA])
        parts.append("".join(rng.choice(pool) for _ in range(rng.randint(1, 30))))
        parts.append(rng.choice(["，", "。", "、", "！", "？", " ", "", "「", "」"]))
    return "".join(parts)


def random_codepoint(rng):
    while True:
        plane = rng.random()
        if plane < 0.6:
            cp = rng.randint(0x20, 0xFFFF)
        elif plane < 0.9:
            cp = rng.randint(0x10000, 0x2FFFF)
        else:
            cp = rng.randint(0x30000, 0x10FFFF)
        if not 0xD800 <= cp <= 0xDFFF:
            return chr(cp)


def mixed(rng):
    pieces = []
    for _ in range(rng.randint(2, 10)):
        kind = rng.randrange(10)
        if kind == 0:
            pieces.append(english_sentence(rng))
        elif kind == 1:
            pieces.append(random_cjk(rng))
        elif kind == 2:
            pieces.append(" ".join(rng.choice(ARABIC_WORDS) for _ in range(rng.randint(1, 6))))
        elif kind == 3:
            pieces.append(" ".join(rng.choice(HINDI_WORDS) for _ in range(rng.randint(1, 6))))
        elif kind == 4:
            pieces.append("".join(rng.choice(EMOJI) for _ in range(rng.randint(1, 5))))
        elif kind == 5:
            pieces.append(rng.choice(CODE))
        elif kind == 6:
            pieces.append(rng.choice(SPECIAL_TEXT))
        elif kind == 7:
            pieces.append("".join(rng.choice(WHITESPACE) for _ in range(rng.randint(1, 8))))
        elif kind == 8:
            pieces.append("".join(rng.choice(DIGITS) for _ in range(rng.randint(1, 20))))
        else:
            pieces.append(rng.choice(COMBINING) + rng.choice(OTHER_SCRIPTS)[: rng.randint(1, 40)])
    sep = rng.choice(["", " ", "\n", "  "])
    return sep.join(pieces)


def build():
    rng = random.Random(20261129)
    out = ["", " ", "\n", "a", "Hello, world!", "<|user|>", "<think></think>", "[gMASK]<sop><|system|>\nhi"]
    out += OTHER_SCRIPTS + CODE + EMOJI + COMBINING + SPECIAL_TEXT + WHITESPACE + OTHER_DIGITS
    for _ in range(400):
        out.append(english_sentence(rng))
    for _ in range(200):
        out.append(random_cjk(rng))
    for _ in range(100):
        out.append(" ".join(rng.choice(ARABIC_WORDS) for _ in range(rng.randint(1, 15))))
        out.append(" ".join(rng.choice(HINDI_WORDS) for _ in range(rng.randint(1, 15))))
    for _ in range(100):
        out.append(" ".join("".join(rng.choice(EMOJI) for _ in range(rng.randint(1, 4))) for _ in range(rng.randint(1, 6))))
    for _ in range(100):
        out.append("\n".join(rng.choice(CODE) for _ in range(rng.randint(1, 4))))
    for _ in range(100):  # whitespace runs, long ones too
        n = rng.choice([1, 2, 3, 7, 16, 64, 300, 2000])
        ws = "".join(rng.choice(WHITESPACE[:6]) for _ in range(n)) if rng.random() < 0.5 else rng.choice(WHITESPACE) * n
        out.append(rng.choice(["", "word", "x = 1"]) + ws + rng.choice(["", "end", "\n", "é"]))
    for _ in range(100):  # digit runs, long ones too
        n = rng.choice([1, 2, 3, 4, 5, 9, 17, 100, 1000])
        d = "".join(rng.choice(DIGITS) for _ in range(n))
        out.append(rng.choice(["", "$", "v", "pi = ", "-"]) + d + rng.choice(["", ".5", "%", " ms", rng.choice(OTHER_DIGITS)]))
    for _ in range(150):  # combining marks, decomposed / non-canonical order, compatibility chars
        out.append("".join(rng.choice(COMBINING) + rng.choice("aeiouAEIOU ") for _ in range(rng.randint(1, 12))))
    for _ in range(200):  # special-token text embedded in normal text
        parts = []
        for _ in range(rng.randint(2, 8)):
            parts.append(rng.choice([english_sentence(rng), rng.choice(SPECIAL_TEXT), rng.choice(SPECIAL_TEXT) * 2,
                                     " " + rng.choice(SPECIAL_TEXT) + " ", random_cjk(rng)[:5], "\n"]))
        out.append("".join(parts))
    for _ in range(200):  # random code points
        out.append("".join(random_codepoint(rng) for _ in range(rng.randint(1, 40))))
    for _ in range(350):
        out.append(mixed(rng))
    # Long words exercise the large-word merge path.
    out.append("a" * 3000)
    out.append("".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(5000)))
    out.append("".join(rng.choice(CHINESE) for _ in range(2000)))
    out.append("=" * 1500 + "-" * 700)
    out.append("🙂" * 400)
    out.append(" ".join(english_sentence(rng) for _ in range(300)))
    return out


def main():
    corpus = build()
    with OUT.open("w", encoding="utf-8") as f:
        for s in corpus:
            f.write(json.dumps(s, ensure_ascii=False) + "\n")
    print(f"{len(corpus)} strings, {sum(len(s.encode()) for s in corpus)} bytes -> {OUT}")


if __name__ == "__main__":
    main()
