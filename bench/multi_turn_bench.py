#!/usr/bin/env python3
"""Multi-turn chat benchmark: time to first token per turn of a long conversation (prefix caching).

Modelled on vLLM's benchmarks/multi_turn (benchmark_serving_multi_turn.py): clients replay
conversations through /v1/chat/completions, each turn sending the whole history (earlier user
messages and the server's own answers) plus one new user message, and the TTFT of every turn is
measured. With automatic prefix caching, turn 2 re-reads turn 1's prompt from the KV cache, so its
TTFT is a small fraction of turn 1's; the turn-2/turn-1 ratio is printed (and saved).

    python3 bench/multi_turn_bench.py --base-url http://127.0.0.1:8000 \
        --first-turn-tokens 32000 --num-turns 3 --turn-tokens 200 --output-len 64

The conversation is random English words (seeded), sized with the server's /tokenize so the first
prompt has about --first-turn-tokens tokens. Before measuring, POST /reset_prefix_cache makes the
first turn cold (--no-reset to skip). Standard library only, like bench/serve_bench.py.
"""
import argparse
import http.client
import json
import random
import statistics
import sys
import time

import serve_client

WORDS = ("time year people way day man thing woman life child world school state family student group "
         "country problem hand part place case week company system program question work government number "
         "night point home water room mother area money story fact month lot right study book eye job word "
         "business issue side kind head house service friend father power hour game line end member law car "
         "city community name president team minute idea kid body information back parent face others level "
         "office door health person art war history party result change morning reason research girl guy moment "
         "air teacher force education").split()


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--base-url", default="http://127.0.0.1:8000")
    p.add_argument("--model", default=None, help="default: the first model of /v1/models")
    p.add_argument("--api-key", default="")
    p.add_argument("--num-conversations", type=int, default=1, help="conversations, replayed one after another")
    p.add_argument("--num-turns", type=int, default=3, help="user turns per conversation (at least 2)")
    p.add_argument("--first-turn-tokens", type=int, default=32000, help="prompt tokens of turn 1 (about)")
    p.add_argument("--turn-tokens", type=int, default=200, help="tokens of each later user message (about)")
    p.add_argument("--output-len", type=int, default=64, help="max_tokens of every answer")
    p.add_argument("--no-ignore-eos", dest="ignore_eos", action="store_false",
                   help="let answers end at EOS (default: ignore_eos, so every answer has --output-len tokens)")
    p.add_argument("--no-reset", dest="reset", action="store_false",
                   help="do not POST /reset_prefix_cache before the run")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--ready-check-timeout-sec", type=float, default=600)
    p.add_argument("--save-result", default=None, metavar="FILE", help="write the per-turn results as JSON")
    a = p.parse_args(argv)
    if a.num_turns < 2:
        p.error("--num-turns must be at least 2 (the ratio compares turn 2 with turn 1)")
    for name in ("num_conversations", "first_turn_tokens", "turn_tokens", "output_len"):
        if getattr(a, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be positive")
    return a


def request_json(ep, method, path, body=None):
    """One JSON request -> (status, parsed body or None)."""
    conn = ep.connect()
    try:
        conn.request(method, ep.prefix + path, body=None if body is None else json.dumps(body).encode(),
                     headers=ep.headers())
        resp = conn.getresponse()
        raw = resp.read()
        try:
            return resp.status, json.loads(raw)
        except ValueError:
            return resp.status, None
    finally:
        conn.close()


def phase_sums(ep):
    """Seconds summed so far in vLLM's request phase histograms (queue, prefill) from /metrics, or None
    when the server does not export them. The difference over one request splits its TTFT into the
    engine's queue and prefill (first scheduled -> first token) and the rest (HTTP, chat template,
    tokenizing, streaming)."""
    try:
        conn = ep.connect()
        conn.request("GET", ep.prefix + "/metrics", headers=ep.headers())
        resp = conn.getresponse()
        text = resp.read().decode(errors="replace")
        conn.close()
    except OSError:
        return None
    if resp.status != 200:
        return None
    sums = {}
    for line in text.splitlines():
        for phase in ("queue", "prefill"):
            if line.startswith(f"vllm:request_{phase}_time_seconds_sum"):
                sums[phase] = sums.get(phase, 0.0) + float(line.rsplit(" ", 1)[1])
    return sums if len(sums) == 2 else None


def wait_ready(ep, timeout):
    deadline = time.time() + timeout
    while True:
        try:
            status, _ = ep.get_json("/health")
            if status == 200:
                return
        except (OSError, http.client.HTTPException):
            pass
        if time.time() >= deadline:
            raise SystemExit(f"error: server at {ep.host}:{ep.port} not ready after {timeout:.0f} s")
        time.sleep(0.5)


class Text:
    """Random words, sized in tokens with the server's tokenizer (POST /tokenize)."""

    def __init__(self, ep, rng):
        self.ep, self.rng = ep, rng
        sample = self.words(400)
        status, body = request_json(ep, "POST", "/tokenize", {"prompt": sample, "add_special_tokens": False})
        self.tokens_per_word = body["count"] / 400 if status == 200 and body else 1.3

    def words(self, n):
        return " ".join(self.rng.choice(WORDS) for _ in range(n))

    def of_tokens(self, n):
        return self.words(max(1, round(n / self.tokens_per_word)))


def chat_turn(ep, model, messages, a):
    """Streams one chat completion; returns (ttft s, latency s, answer text, usage dict, error)."""
    body = {"model": model, "messages": messages, "max_tokens": a.output_len, "temperature": 0.0,
            "stream": True, "stream_options": {"include_usage": True}, "ignore_eos": a.ignore_eos}
    conn = ep.connect()
    start = time.perf_counter()
    ttft, answer, usage = None, "", {}
    try:
        conn.request("POST", ep.prefix + "/v1/chat/completions", body=json.dumps(body).encode(), headers=ep.headers())
        resp = conn.getresponse()
        if resp.status != 200:
            return None, 0.0, "", {}, f"HTTP {resp.status}: {resp.read()[:300].decode(errors='replace')}"
        while True:
            line = resp.readline()
            if not line:
                break
            now = time.perf_counter()
            line = line.strip()
            if not line.startswith(b"data:"):
                continue
            data = line[5:].strip()
            if data == b"[DONE]":
                break
            event = json.loads(data)
            if "error" in event:
                return ttft, now - start, answer, usage, f"in-stream error: {event['error']}"
            choices = event.get("choices") or []
            if choices and ttft is None:
                ttft = now - start  # the first chunk (the role) is sent with the first token
            for choice in choices:
                answer += (choice.get("delta") or {}).get("content") or ""
            if event.get("usage"):
                usage = event["usage"]
    except (OSError, http.client.HTTPException, ValueError) as e:
        return ttft, time.perf_counter() - start, answer, usage, f"{type(e).__name__}: {e}"
    finally:
        conn.close()
    latency = time.perf_counter() - start
    if ttft is None:
        return None, latency, answer, usage, "the stream carried no token"
    return ttft, latency, answer, usage, ""


def cached_tokens(usage):
    details = usage.get("prompt_tokens_details") or {}
    return int(details.get("cached_tokens") or 0)


def main(argv=None):
    a = parse_args(argv)
    ep = serve_client.Endpoint(a.base_url, "/v1/chat/completions", a.api_key)
    wait_ready(ep, a.ready_check_timeout_sec)
    model = a.model
    if not model:
        status, body = ep.get_json("/v1/models")
        if status != 200 or not body or not body.get("data"):
            raise SystemExit(f"error: GET /v1/models answered HTTP {status}; pass --model")
        model = body["data"][0]["id"]
    rng = random.Random(a.seed)
    text = Text(ep, rng)
    # Warm-up: the first request of a fresh server pays one-time costs that are not prefill.
    _, _, _, _, err = chat_turn(ep, model, [{"role": "user", "content": text.words(8)}], a)
    if err:
        raise SystemExit(f"error: warm-up request failed: {err}")
    if a.reset:
        status, body = request_json(ep, "POST", "/reset_prefix_cache")
        if status != 200 or not (body or {}).get("success", False):
            print(f"warning: POST /reset_prefix_cache answered HTTP {status} {body}; turn 1 may not be cold",
                  file=sys.stderr)

    turns = [[] for _ in range(a.num_turns)]  # per turn index: one record per conversation
    failed = 0
    for conv in range(a.num_conversations):
        # A fresh random opening per conversation, so no conversation hits another's cache.
        messages = [{"role": "user", "content": f"Conversation {conv}-{rng.random()}: " + text.of_tokens(a.first_turn_tokens)}]
        for t in range(a.num_turns):
            before = phase_sums(ep)
            ttft, latency, answer, usage, err = chat_turn(ep, model, messages, a)
            after = phase_sums(ep)
            rec = {"conversation": conv, "turn": t + 1, "ttft_ms": None if ttft is None else ttft * 1e3,
                   "latency_ms": latency * 1e3, "prompt_tokens": usage.get("prompt_tokens"),
                   "cached_tokens": cached_tokens(usage), "completion_tokens": usage.get("completion_tokens"),
                   "error": err}
            phases = ""
            if before is not None and after is not None:
                rec["server_queue_ms"] = (after["queue"] - before["queue"]) * 1e3
                rec["server_prefill_ms"] = (after["prefill"] - before["prefill"]) * 1e3
                phases = f" (server: queue {rec['server_queue_ms']:.1f} ms, prefill {rec['server_prefill_ms']:.1f} ms)"
            turns[t].append(rec)
            print(f"conversation {conv} turn {t + 1}: prompt {rec['prompt_tokens']} tokens "
                  f"({rec['cached_tokens']} cached), TTFT {rec['ttft_ms'] or float('nan'):.1f} ms{phases}, "
                  f"E2E {rec['latency_ms']:.1f} ms{'  ERROR ' + err if err else ''}", flush=True)
            if err:
                failed += 1
                break
            messages += [{"role": "assistant", "content": answer}, {"role": "user", "content": text.of_tokens(a.turn_tokens)}]

    def mean_ttft(t):
        vals = [r["ttft_ms"] for r in turns[t] if not r["error"] and r["ttft_ms"] is not None]
        return statistics.mean(vals) if vals else None

    print("=============== Multi-turn Benchmark Result ===============")
    print(f"{'Conversations:':<40} {a.num_conversations}")
    print(f"{'Failed turns:':<40} {failed}")
    for t in range(a.num_turns):
        ok = [r for r in turns[t] if not r["error"]]
        if not ok:
            continue
        print(f"{f'Turn {t + 1} mean TTFT (ms):':<40} {mean_ttft(t):<10.2f} "
              f"prompt {statistics.mean(r['prompt_tokens'] or 0 for r in ok):.0f} tokens, "
              f"cached {statistics.mean(r['cached_tokens'] for r in ok):.0f}")
    t1, t2 = mean_ttft(0), mean_ttft(1)
    ratio = t2 / t1 if t1 and t2 is not None else None
    print(f"{'Turn-2 / turn-1 TTFT ratio:':<40} {'n/a' if ratio is None else f'{ratio:.4f}'}")
    print("=" * 59)
    if a.save_result:
        with open(a.save_result, "w") as f:
            json.dump({"model": model, "num_conversations": a.num_conversations, "num_turns": a.num_turns,
                       "first_turn_tokens": a.first_turn_tokens, "turn_tokens": a.turn_tokens,
                       "output_len": a.output_len, "ttft_ratio_turn2_turn1": ratio,
                       "mean_ttft_ms_per_turn": [mean_ttft(t) for t in range(a.num_turns)],
                       "turns": [r for turn in turns for r in turn]}, f, indent=2)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
