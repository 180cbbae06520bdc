"""SSE events reach Python clients as they are generated. requests and httpx (the openai SDK)
always send Accept-Encoding: gzip; a compressed event stream would arrive in one piece at the end
(deflate buffers), so streams go out uncompressed, as vLLM's do."""
import time

import requests

from server_fixture import StrikerServer, tiny_model  # noqa: F401  (fixture)


def test_stream_arrives_event_by_event_with_default_client_headers(striker_bin, tiny_model, tmp_path):
    server = StrikerServer(striker_bin, tiny_model, ["--served-model-name", "tiny", "--max-model-len", "1024"],
                           log_dir=tmp_path)
    try:
        body = {"model": "tiny", "prompt": "stream", "max_tokens": 300, "ignore_eos": True, "stream": True}
        t0 = time.time()
        with requests.post(server.url + "/v1/completions", json=body, stream=True, timeout=120) as r:
            assert "gzip" in r.request.headers["Accept-Encoding"]
            assert r.headers.get("Content-Encoding") is None
            assert r.headers["Content-Type"] == "text/event-stream; charset=utf-8"
            events = [(time.time() - t0, raw) for raw in r.iter_lines() if raw.startswith(b"data: ")]
        assert events[-1][1] == b"data: [DONE]" and len(events) > 200  # tokens with partial characters merge
        times = [t for t, _ in events]
        # Half of the events were in the client's hands before the stream was half over.
        assert sum(t < times[-1] / 2 for t in times) > 50, (times[0], times[-1])
    finally:
        server.stop()
