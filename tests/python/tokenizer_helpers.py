"""Helpers shared by the tokenizer tests: the corpus, and running `striker tokenize`."""
import json
import pathlib
import subprocess

CORPUS = pathlib.Path(__file__).with_name("corpus") / "tokenizer_corpus.jsonl"


def load_corpus():
    # Split on "\n" only: the JSON lines hold raw U+2028, U+0085 etc., which splitlines() would cut.
    return [json.loads(line) for line in CORPUS.read_bytes().decode("utf-8").split("\n") if line]


def run_lines(striker_bin, tokenizer_dir, mode, lines, *flags):
    """Feeds JSON lines to `striker tokenize DIR --<mode> -` and returns the parsed output lines."""
    payload = "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines)
    r = subprocess.run([str(striker_bin), "tokenize", str(tokenizer_dir), f"--{mode}", "-", *flags],
                       input=payload.encode("utf-8"), capture_output=True, timeout=600)
    assert r.returncode == 0, r.stderr.decode("utf-8", "replace")
    out = [json.loads(x) for x in r.stdout.decode("utf-8").split("\n") if x]
    assert len(out) == len(lines)
    return out


def run_error(striker_bin, *args, stdin=b""):
    r = subprocess.run([str(striker_bin), "tokenize", *map(str, args)], input=stdin, capture_output=True, timeout=120)
    return r.returncode, r.stderr.decode("utf-8", "replace")
