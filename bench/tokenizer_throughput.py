"""Encode throughput (MB/s of UTF-8 input) of striker's tokenizer vs Hugging Face `tokenizers`,
both on one thread, on tests/python/corpus/tokenizer_corpus.jsonl and both fixture tokenizers.

  python3 bench/tokenizer_throughput.py --bench-bin build/bench/bench_tokenizer_encode [--shared-dir ../shared]

HF: RAYON_NUM_THREADS=1 and a plain `Tokenizer.encode(s, add_special_tokens=False)` loop (no
encode_batch). striker: bench_tokenizer_encode (Google Benchmark), a `Tokenizer::encode` loop.
"cold" is the first pass of a freshly loaded tokenizer (empty word caches), "warm" later passes.
Times are process CPU seconds, so other load on the machine disturbs the numbers less.
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys
import time

os.environ["RAYON_NUM_THREADS"] = "1"  # before tokenizers is imported
os.environ["TOKENIZERS_PARALLELISM"] = "false"
from tokenizers import Tokenizer  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "python" / "corpus" / "tokenizer_corpus.jsonl"
FIXTURES = {"flint": "flint-tokenizer", "qwen3": "tokenizers/qwen3"}


def load_corpus(path):
    return [json.loads(x) for x in path.read_bytes().decode("utf-8").split("\n") if x]


def hf_throughput(tokenizer_json, corpus, nbytes, min_seconds):
    tok = Tokenizer.from_file(str(tokenizer_json))
    t0 = time.process_time()
    for s in corpus:
        tok.encode(s, add_special_tokens=False)
    cold = nbytes / (time.process_time() - t0) / 1e6
    passes, t0 = 0, time.process_time()
    while True:
        for s in corpus:
            tok.encode(s, add_special_tokens=False)
        passes += 1
        elapsed = time.process_time() - t0
        if elapsed >= min_seconds and passes >= 3:
            break
    return cold, nbytes * passes / elapsed / 1e6


def striker_throughput(bench_bin, shared_dir, corpus_path):
    env = dict(os.environ, STRIKER_SHARED_DIR=str(shared_dir), STRIKER_CORPUS=str(corpus_path))
    r = subprocess.run([str(bench_bin), "--benchmark_format=json"], env=env, capture_output=True, text=True, check=True)
    out = {}
    for b in json.loads(r.stdout)["benchmarks"]:
        name = b["name"].split("/")[1]  # e.g. flint_warm
        out[name] = b["bytes_per_second"] / 1e6
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench-bin", default=ROOT / "build" / "bench" / "bench_tokenizer_encode", type=pathlib.Path)
    ap.add_argument("--shared-dir", default=os.environ.get("STRIKER_SHARED_DIR", ROOT.parent / "shared"), type=pathlib.Path)
    ap.add_argument("--corpus", default=CORPUS, type=pathlib.Path)
    ap.add_argument("--min-seconds", default=3.0, type=float)
    args = ap.parse_args()

    corpus = load_corpus(args.corpus)
    nbytes = sum(len(s.encode("utf-8")) for s in corpus)
    ours = striker_throughput(args.bench_bin, args.shared_dir, args.corpus)
    import tokenizers
    print(f"corpus: {len(corpus)} strings, {nbytes / 1e6:.3f} MB; tokenizers {tokenizers.__version__}; "
          f"python {sys.version.split()[0]}")
    print("| tokenizer | pass | striker MB/s | HF tokenizers MB/s | ratio |")
    print("|---|---|---:|---:|---:|")
    for short, sub in FIXTURES.items():
        cold, warm = hf_throughput(args.shared_dir / "fixtures" / sub / "tokenizer.json", corpus, nbytes, args.min_seconds)
        for kind, hf in (("cold", cold), ("warm", warm)):
            s = ours[f"{short}_{kind}"]
            print(f"| {short} | {kind} | {s:.2f} | {hf:.2f} | {s / hf:.1f}x |")


if __name__ == "__main__":
    main()
