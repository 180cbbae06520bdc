"""vLLM's render endpoints, POST /v1/chat/completions/render and /v1/completions/render: the request
validated and its prompt rendered to token ids as the generating route would, nothing generated.
The answer is vLLM's GenerateRequest (a list of them for completions); vllm-router's kv_aware
policy reads `token_ids` from it (test_kv_events_routing.py checks the router really calls it)."""
import pytest
import requests

from server_fixture import module_server, tiny_model  # noqa: F401  (fixtures)

MODEL = "tiny"
MAX_LEN = 512
MSGS = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say something."}]
KEYS = {"request_id", "token_ids", "features", "sampling_params", "model", "stream", "stream_options",
        "cache_salt", "priority", "kv_transfer_params"}


@pytest.fixture(scope="module")
def server(striker_bin, tiny_model, tmp_path_factory):
    yield from module_server(
        striker_bin, tiny_model,
        ["--served-model-name", MODEL, "--max-model-len", str(MAX_LEN), "--max-num-seqs", "4", "--kv-cache-memory",
         "32MiB", "--seed", "3"],
        tmp_path_factory)


def post(server, path, body):
    return requests.post(server.url + path, json=body, timeout=30)


def tokens(server, **body):
    r = post(server, "/tokenize", {"model": MODEL, **body})
    assert r.status_code == 200, r.text
    return r.json()["tokens"]


def chat_render(server, **body):
    r = post(server, "/v1/chat/completions/render", {"model": MODEL, "messages": MSGS, **body})
    assert r.status_code == 200, r.text
    return r.json()


def test_chat_render_is_a_generate_request_with_the_chat_routes_prompt_ids(server):
    out = chat_render(server, max_tokens=7, temperature=0.5, seed=11, stop=["x"])
    assert set(out) == KEYS
    assert out["request_id"].startswith("chatcmpl-")
    assert out["token_ids"] == tokens(server, messages=MSGS)
    assert out["features"] is None and out["kv_transfer_params"] is None
    assert out["model"] == MODEL and out["stream"] is False and out["stream_options"] is None
    assert out["priority"] == 0 and out["cache_salt"] is None
    sp = out["sampling_params"]
    assert (sp["max_tokens"], sp["temperature"], sp["seed"], sp["stop"], sp["n"]) == (7, 0.5, 11, ["x"], 1)
    # The ids the generating route runs: its usage counts exactly these.
    r = post(server, "/v1/chat/completions", {"model": MODEL, "messages": MSGS, "max_tokens": 1})
    assert r.json()["usage"]["prompt_tokens"] == len(out["token_ids"])
    # Each call is a new request id.
    assert chat_render(server)["request_id"] != out["request_id"]


def test_chat_render_follows_template_options_and_resolves_max_tokens(server):
    plain = chat_render(server)
    assert plain["sampling_params"]["max_tokens"] == MAX_LEN - len(plain["token_ids"])
    no_gen = chat_render(server, add_generation_prompt=False)
    assert no_gen["token_ids"] == tokens(server, messages=MSGS, add_generation_prompt=False)
    assert no_gen["token_ids"] != plain["token_ids"]
    thinking = chat_render(server, chat_template_kwargs={"enable_thinking": False})
    assert thinking["token_ids"] == tokens(server, messages=MSGS, chat_template_kwargs={"enable_thinking": False})


def test_render_applies_truncate_prompt_tokens(server):
    full = chat_render(server)["token_ids"]
    cut = chat_render(server, truncate_prompt_tokens=4)
    assert cut["token_ids"] == full[-4:]
    assert cut["sampling_params"]["max_tokens"] == MAX_LEN - 4
    r = post(server, "/v1/completions/render", {"model": MODEL, "prompt": [1, 2, 3, 4, 5], "truncate_prompt_tokens": 2})
    assert r.status_code == 200, r.text
    out = r.json()
    assert len(out) == 1 and out[0]["token_ids"] == [4, 5]


def test_chat_render_echoes_stream_salt_priority_and_no_model(server):
    out = chat_render(server, stream=True, stream_options={"include_usage": True}, cache_salt="salt-1", priority=-3)
    assert out["stream"] is True
    assert out["stream_options"] == {"include_usage": True, "continuous_usage_stats": False}
    assert (out["cache_salt"], out["priority"]) == ("salt-1", -3)
    r = post(server, "/v1/chat/completions/render", {"messages": MSGS})
    assert r.status_code == 200 and r.json()["model"] is None


def test_chat_render_accepts_the_body_vllm_router_sends(server):
    # What vllm-router 0.1.17 posts (its request struct with defaults filled in), as captured.
    body = {"model": MODEL, "messages": MSGS, "stream": False, "max_tokens": 5, "logprobs": False,
            "no_stop_trim": False, "ignore_eos": False, "continue_final_message": False, "skip_special_tokens": True,
            "separate_reasoning": True, "stream_reasoning": True, "return_hidden_states": False,
            "include_reasoning": True}
    r = post(server, "/v1/chat/completions/render", body)
    assert r.status_code == 200, r.text
    assert r.json()["token_ids"] == tokens(server, messages=MSGS)


def test_completions_render_is_a_list_one_per_prompt(server):
    ids = tokens(server, prompt="Once upon a time")
    r = post(server, "/v1/completions/render", {"model": MODEL, "prompt": ["Once upon a time", [5, 6, 7]],
                                                "max_tokens": 4})
    assert r.status_code == 200, r.text
    out = r.json()
    assert isinstance(out, list) and len(out) == 2
    assert all(set(o) == KEYS and o["request_id"].startswith("cmpl-") for o in out)
    assert [o["token_ids"] for o in out] == [ids, [5, 6, 7]]
    assert [o["sampling_params"]["max_tokens"] for o in out] == [4, 4]
    one = post(server, "/v1/completions/render", {"model": MODEL, "prompt": "Once upon a time"}).json()
    # Without the max_tokens field, vLLM's CompletionRequest default of 16 (what /v1/completions runs);
    # an explicit null is the room left in the context.
    assert len(one) == 1 and one[0]["sampling_params"]["max_tokens"] == 16
    room = post(server, "/v1/completions/render", {"model": MODEL, "prompt": "Once upon a time", "max_tokens": None})
    assert room.json()[0]["sampling_params"]["max_tokens"] == MAX_LEN - len(ids)
    no_special = post(server, "/v1/completions/render",
                      {"model": MODEL, "prompt": "Once upon a time", "add_special_tokens": False}).json()
    assert no_special[0]["token_ids"] == tokens(server, prompt="Once upon a time", add_special_tokens=False)


@pytest.mark.parametrize("path,body,status,param", [
    ("/v1/chat/completions/render", {"model": MODEL}, 400, "messages"),
    ("/v1/chat/completions/render", {"model": MODEL, "messages": "hi"}, 400, "messages"),
    ("/v1/chat/completions/render", {"model": "nope", "messages": MSGS}, 404, None),
    ("/v1/chat/completions/render", {"model": MODEL, "messages": MSGS, "temperature": -1}, 400, "temperature"),
    ("/v1/chat/completions/render", {"model": MODEL, "messages": MSGS, "use_beam_search": True}, 501,
     "use_beam_search"),
    ("/v1/chat/completions/render", {"model": MODEL, "messages": MSGS, "priority": "high"}, 400, "priority"),
    ("/v1/chat/completions/render", {"model": MODEL, "messages": MSGS, "stream_options": {"include_usage": True}},
     400, "stream_options"),
    ("/v1/chat/completions/render", {"model": MODEL, "messages": [{"role": "user", "content": "go " * 600}]},
     400, None),
    ("/v1/completions/render", {"model": MODEL}, 400, "prompt"),
    ("/v1/completions/render", {"model": MODEL, "prompt": []}, 400, "prompt"),
    ("/v1/completions/render", {"model": MODEL, "prompt": [1, 10**9]}, 400, "prompt"),
    ("/v1/completions/render", {"model": MODEL, "prompt": "hi", "add_special_tokens": "yes"}, 400,
     "add_special_tokens"),
    ("/v1/completions/render", {"model": MODEL, "prompt": "hi", "max_tokens": MAX_LEN}, 400, None),
])
def test_render_rejects_bad_input_like_the_generating_route(server, path, body, status, param):
    r = post(server, path, body)
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert err["message"] and err["code"] == status
    if param:
        assert err["param"] == param, err
    # The generating route gives the same answer for the same body.
    twin = post(server, path.removesuffix("/render"), body)
    assert (twin.status_code, twin.json()["error"]["message"]) == (status, err["message"])


def test_render_rejects_malformed_json_and_runs_nothing(server):
    before = server.metrics().get("vllm:prompt_tokens_total", 0)
    r = requests.post(server.url + "/v1/chat/completions/render", data=b"{not json",
                      headers={"Content-Type": "application/json"}, timeout=30)
    assert r.status_code == 400 and r.json()["error"]["message"]
    for _ in range(3):
        chat_render(server)
    metrics = server.metrics()
    assert metrics.get("vllm:prompt_tokens_total", 0) == before
    # Counted per route and status (a handler that only sets content is a 200, not httplib's -1).
    ok = metrics['striker:http_requests_total{handler="/v1/chat/completions/render",status="200"}']
    assert ok >= 3
    assert metrics['striker:http_requests_total{handler="/v1/chat/completions/render",status="400"}'] >= 1
    assert not [k for k in metrics if 'status="-1"' in k]
    assert requests.get(server.url + "/health", timeout=10).status_code == 200
