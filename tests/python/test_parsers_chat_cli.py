"""`striker chat` against a tiny SSE stub server that answers with canned chunks."""
import json
import socket
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

MODEL = "flint-test"


def chunk(delta, finish_reason=None):
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": MODEL,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}]}


GREETING = [
    chunk({"role": "assistant", "content": ""}),
    chunk({"reasoning": "Let me "}),
    chunk({"reasoning": "think"}),
    chunk({"content": "Hi "}),
    chunk({"content": "there!"}),
    chunk({}, "stop"),
]
TOOL_CALL = [
    chunk({"role": "assistant", "content": ""}),
    chunk({"reasoning": "Need the tool."}),
    chunk({"tool_calls": [{"index": 0, "id": "chatcmpl-tool-abc", "type": "function",
                           "function": {"name": "get_weather"}}]}),
    chunk({"tool_calls": [{"index": 0, "function": {"arguments": "{\"city\": \""}}]}),
    chunk({"tool_calls": [{"index": 0, "function": {"arguments": "Paris\"}"}}]}),
    chunk({}, "tool_calls"),
]
AFTER_TOOL = [chunk({"role": "assistant", "content": ""}), chunk({"content": "It is sunny."}), chunk({}, "stop")]
TRUNCATED = [chunk({"content": "Once upon"}), chunk({}, "length")]


class StubServer:
    """Records each chat request and answers with SSE chosen by the conversation."""

    def __init__(self):
        self.requests = []
        self.models_status = 200
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def send_json(self, status, body):
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                if self.path == "/v1/models" and stub.models_status == 200:
                    self.send_json(200, {"object": "list", "data": [{"id": MODEL, "object": "model"}]})
                elif self.path == "/v1/models":
                    self.send_json(stub.models_status, {"error": {"message": "Unauthorized", "code": stub.models_status}})
                else:
                    self.send_json(404, {"error": {"message": "not found", "code": 404}})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                stub.requests.append({"body": body, "auth": self.headers.get("Authorization")})
                last = body["messages"][-1]
                if last["role"] == "tool":
                    chunks = AFTER_TOOL
                elif "weather" in last["content"]:
                    chunks = TOOL_CALL
                elif "story" in last["content"]:
                    chunks = TRUNCATED
                elif "fail" in last["content"]:
                    self.send_json(400, {"error": {"message": "bad request for test", "type": "BadRequestError",
                                                   "param": None, "code": 400}})
                    return
                else:
                    chunks = GREETING
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                for c in chunks:
                    self.wfile.write(f"data: {json.dumps(c)}\n\n".encode())
                    self.wfile.flush()
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                self.close_connection = True

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def stub():
    server = StubServer()
    yield server
    server.close()


def run_chat(striker_bin, args, stdin):
    return subprocess.run([str(striker_bin), "chat", *args], input=stdin, capture_output=True, text=True,
                          timeout=30)


def test_streams_reasoning_dimmed_and_content(striker_bin, stub):
    res = run_chat(striker_bin, ["--url", stub.url, "--color", "always"], "hello\n/exit\n")
    assert res.returncode == 0, res.stderr
    assert "\x1b[2mLet me think\x1b[0m\nHi there!" in res.stdout
    assert f"model {MODEL}" in res.stdout
    body = stub.requests[0]["body"]
    assert body["model"] == MODEL and body["stream"] is True
    assert body["messages"] == [{"role": "user", "content": "hello"}]
    assert "chat_template_kwargs" not in body and "tools" not in body


def test_plain_output_without_color(striker_bin, stub):
    res = run_chat(striker_bin, ["--url", stub.url, "--color", "never"], "hello\n")
    assert res.returncode == 0, res.stderr
    assert "[thinking] Let me think\nHi there!" in res.stdout
    assert "\x1b[" not in res.stdout


def test_history_is_kept_and_ctrl_d_quits(striker_bin, stub):
    res = run_chat(striker_bin, ["--url", stub.url + "/v1/", "--model", "m2"], "hello\nagain\n")  # then EOF
    assert res.returncode == 0, res.stderr
    assert len(stub.requests) == 2
    second = stub.requests[1]["body"]
    assert second["model"] == "m2"
    assert second["messages"] == [
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": "Hi there!", "reasoning_content": "Let me think"},
        {"role": "user", "content": "again"},
    ]


def test_system_prompt_no_think_and_api_key(striker_bin, stub):
    res = run_chat(striker_bin, ["--url", stub.url, "--system", "Be brief.", "--no-think", "--api-key", "sekret"],
                   "hello\n/exit\n")
    assert res.returncode == 0, res.stderr
    req = stub.requests[0]
    assert req["auth"] == "Bearer sekret"
    assert req["body"]["chat_template_kwargs"] == {"enable_thinking": False}
    assert req["body"]["messages"][0] == {"role": "system", "content": "Be brief."}


def test_tool_call_is_shown_and_answered(striker_bin, stub, tmp_path):
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}}}}]
    tools_file = tmp_path / "tools.json"
    tools_file.write_text(json.dumps(tools))
    res = run_chat(striker_bin, ["--url", stub.url, "--tools", str(tools_file), "--color", "never"],
                   "weather in Paris?\n{\"temp\": 18}\n/exit\n")
    assert res.returncode == 0, res.stderr
    assert '[tool call] get_weather {"city": "Paris"}' in res.stdout
    assert "result of get_weather> " in res.stdout
    assert "It is sunny." in res.stdout
    assert len(stub.requests) == 2
    assert json.dumps(stub.requests[0]["body"]["tools"]) == json.dumps(tools)  # as written, keys not sorted
    messages = stub.requests[1]["body"]["messages"]
    assert messages[1] == {"role": "assistant", "content": "", "reasoning_content": "Need the tool.",
                           "tool_calls": [{"id": "chatcmpl-tool-abc", "type": "function",
                                           "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]}
    assert messages[2] == {"role": "tool", "tool_call_id": "chatcmpl-tool-abc", "content": "{\"temp\": 18}"}


def test_http_error_is_reported_and_turn_dropped(striker_bin, stub):
    res = run_chat(striker_bin, ["--url", stub.url], "please fail\nhello\n/exit\n")
    assert res.returncode == 0
    assert "the server answered HTTP 400: bad request for test" in res.stderr
    assert stub.requests[1]["body"]["messages"] == [{"role": "user", "content": "hello"}]


def test_length_cut_is_flagged(striker_bin, stub):
    res = run_chat(striker_bin, ["--url", stub.url, "--max-tokens", "3"], "tell a story\n/exit\n")
    assert res.returncode == 0, res.stderr
    assert "Once upon" in res.stdout and "[stopped: max tokens reached]" in res.stdout
    assert stub.requests[0]["body"]["max_tokens"] == 3


def test_unreachable_server_is_a_clear_error(striker_bin):
    with socket.socket() as s:  # a port that nothing listens on once closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    res = run_chat(striker_bin, ["--url", f"http://127.0.0.1:{port}"], "hello\n")
    assert res.returncode == 1
    assert f"cannot reach the server at http://127.0.0.1:{port}" in res.stderr
    assert res.stderr.count("\n") == 1  # one line


def test_bad_url_is_a_clear_error(striker_bin):
    res = run_chat(striker_bin, ["--url", "https://example.invalid"], "")
    assert res.returncode == 1
    assert "https is not supported" in res.stderr


def test_model_flag_tolerates_a_server_without_model_listing(striker_bin, stub):
    stub.models_status = 404
    res = run_chat(striker_bin, ["--url", stub.url, "--model", "given"], "hello\n/exit\n")
    assert res.returncode == 0, res.stderr
    assert stub.requests[0]["body"]["model"] == "given"
    assert "Hi there!" in res.stdout


def test_refused_api_key_is_a_clear_error(striker_bin, stub):
    stub.models_status = 401
    res = run_chat(striker_bin, ["--url", stub.url, "--model", "given"], "hello\n")
    assert res.returncode == 1
    assert "the server answered HTTP 401: Unauthorized" in res.stderr
    assert stub.requests == []
