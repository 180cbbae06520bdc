"""Session 22, run 7: where a prompt-logprobs request's time goes (the toolcall model: a tiny forward pass). One
3,890-token prompt, max_tokens 1; each request gets a fresh prefix (no prefix-cache hit: a prompt-logprob request reads
no cache, so the baseline must not either). prompt_logprobs 0 / 1 / 5 / 20 (device) and 33 (host rows) scale the
response's JSON entries (1, 2, 6, 21, 34 per position) and the top-n selects."""
import json, statistics, subprocess, sys, time, urllib.request

port = 8399
srv = subprocess.Popen([sys.argv[1], "serve", sys.argv[2], "--device", "cuda", "--port", str(port), "--max-logprobs", "40",
                        "--max-model-len", "4096", "--served-model-name", "m"], stdout=open(sys.argv[3], "w"),
                       stderr=subprocess.STDOUT)


def post(body):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    t = time.perf_counter()
    with urllib.request.urlopen(req, timeout=120) as r:
        data = r.read()
    return (time.perf_counter() - t) * 1e3, len(data)


try:
    for _ in range(300):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
            break
        except Exception:
            time.sleep(0.2)
    words = " ".join(f"w{i % 97} is" for i in range(1000))
    k = 0
    for rnd in range(2):
        for n in (None, 0, 1, 5, 20, 33):
            ts, size = [], 0
            for _ in range(3):
                k += 1
                body = {"model": "m", "prompt": f"x{k} " + words, "max_tokens": 1, "temperature": 0}
                if n is not None:
                    body["prompt_logprobs"] = n
                ms, size = post(body)
                ts.append(ms)
            print(f"round {rnd} prompt_logprobs={n}: median {statistics.median(ts):.1f} ms (runs "
                  f"{', '.join(f'{x:.1f}' for x in ts)}), response {size / 1e6:.2f} MB", flush=True)
finally:
    srv.terminate()
    srv.wait(timeout=30)
