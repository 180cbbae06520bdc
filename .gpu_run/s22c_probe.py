"""Session 22: what prompt logprobs cost a served request (the toolcall model: its forward pass is tiny, so the
time is the logprob rows'): one 2,000-token prompt, max_tokens 1, without prompt logprobs, with 5 (computed on the
device) and with 33 (more than the device's 32: the rows come back to the host)."""
import statistics, subprocess, sys, time
import requests

port = 8399
srv = subprocess.Popen([sys.argv[1], "serve", sys.argv[2], "--device", "cuda", "--port", str(port), "--max-logprobs", "40",
                        "--max-model-len", "4096", "--served-model-name", "m"], stdout=open(sys.argv[3], "w"),
                       stderr=subprocess.STDOUT)
try:
    for _ in range(300):
        try:
            if requests.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                break
        except Exception:
            pass
        time.sleep(0.2)
    words = " ".join(f"w{i % 97} is" for i in range(1000))
    for n in (None, 5, 33, None, 5, 33):
        body = {"model": "m", "prompt": words, "max_tokens": 1, "temperature": 0}
        if n is not None:
            body["prompt_logprobs"] = n
        ts = []
        for _ in range(4):
            t = time.perf_counter()
            r = requests.post(f"http://127.0.0.1:{port}/v1/completions", json=body, timeout=120)
            ts.append((time.perf_counter() - t) * 1e3)
            assert r.status_code == 200, r.text[:300]
        j = r.json()
        plp = j["choices"][0].get("prompt_logprobs")
        print(f"prompt_logprobs={n}: {j['usage']['prompt_tokens']} prompt tokens, median {statistics.median(ts[1:]):.1f} ms"
              f" (runs {', '.join(f'{x:.1f}' for x in ts)}), entries {len(plp) if plp else 0}", flush=True)
finally:
    srv.terminate()
    srv.wait(timeout=30)
