"""One streaming /v1/completions request over http.client, timed chunk by chunk.

Standard library only, so the benchmark runs on a machine without a package registry (the GPU
machine). One connection per request, as a fresh client would open; the clock starts just before
the request is written and each chunk is stamped as soon as its line is read, before JSON parsing.
"""
import http.client
import json
import time
import urllib.parse

from serve_metrics import RequestResult


class Endpoint:
    def __init__(self, base_url, path, api_key="", timeout=3600.0):
        u = urllib.parse.urlsplit(base_url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"--base-url must look like http://HOST:PORT, got {base_url!r}")
        self.https = u.scheme == "https"
        self.host = u.hostname
        self.port = u.port or (443 if self.https else 80)
        self.prefix = u.path.rstrip("/")
        self.path = path if path.startswith("/") else "/" + path
        self.api_key = api_key
        self.timeout = timeout

    def connect(self):
        cls = http.client.HTTPSConnection if self.https else http.client.HTTPConnection
        return cls(self.host, self.port, timeout=self.timeout)

    def headers(self):
        h = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if self.api_key:
            h["Authorization"] = f"Bearer {self.api_key}"
        return h

    def get_json(self, path):
        """GET PREFIX+path -> (status, parsed JSON or None)."""
        conn = self.connect()
        try:
            conn.request("GET", self.prefix + path, headers=self.headers())
            resp = conn.getresponse()
            body = resp.read()
            try:
                return resp.status, json.loads(body)
            except ValueError:
                return resp.status, None
        finally:
            conn.close()


def stream_completion(ep: Endpoint, payload: dict, prompt_len: int) -> RequestResult:
    """Sends one streaming completion and records TTFT, ITL and the end of the stream.
    Never raises: transport and server errors end up in result.error with success False."""
    r = RequestResult(prompt_len=prompt_len)
    body = json.dumps(payload).encode()
    conn = ep.connect()
    st = time.perf_counter()
    r.start_time = st
    last = st
    saw_done = False
    try:
        conn.request("POST", ep.prefix + ep.path, body=body, headers=ep.headers())
        resp = conn.getresponse()
        if resp.status != 200:
            r.error = f"HTTP {resp.status}: {resp.read()[:300].decode(errors='replace')}"
            return r
        while True:
            line = resp.readline()   # chunked transfer decoding is done by http.client
            if not line:
                break
            now = time.perf_counter()
            line = line.strip()
            if not line.startswith(b"data:"):
                continue             # blank separators, SSE comments
            data = line[5:].strip()
            if data == b"[DONE]":
                saw_done = True
                break
            event = json.loads(data)
            if "error" in event:
                err = event["error"]
                r.error = "in-stream error: " + (err.get("message", "") if isinstance(err, dict) else str(err))
                break
            choices = event.get("choices")
            if choices:
                if not r.chunk_times:
                    r.ttft = now - st
                else:
                    r.itl.append(now - last)
                last = now
                r.chunk_times.append(now)
                r.generated_text += choices[0].get("text") or ""
            usage = event.get("usage")
            if usage and usage.get("completion_tokens") is not None:
                r.output_tokens = int(usage["completion_tokens"])
    except Exception as e:  # noqa: BLE001 - any transport or malformed-stream failure is this request's error
        r.error = f"{type(e).__name__}: {e}"
        return r
    finally:
        conn.close()
    # Like vLLM: the request's latency ends at its last content chunk (the usage chunk and
    # [DONE] carry no token), so TPOT spans exactly the decode of tokens 2..N.
    r.latency = last - st
    if not r.error and not saw_done:
        r.error = "stream ended without [DONE]"
    if not r.error and not r.chunk_times:
        r.error = "stream carried no output chunk"
    if not r.error and r.output_tokens == 0:
        r.output_tokens = len(r.chunk_times)  # no usage chunk: one token per chunk
    r.success = not r.error
    return r
