"""continue_final_message / add_generation_prompt on /v1/chat/completions (and /tokenize), as vLLM:
the prompt is the conversation rendered without a generation prompt, cut right after the final
assistant message's content; with the glm47 reasoning parser the continuation is content."""
import json

import openai
import pytest
import requests

from jinja_reference import reference_render
from server_fixture import client, module_server, tiny_model  # noqa: F401  (fixtures)

MODEL = "tiny"
CONTINUE = {"continue_final_message": True, "add_generation_prompt": False}


@pytest.fixture(scope="module")
def server(striker_bin, tiny_model, tmp_path_factory):
    yield from module_server(
        striker_bin, tiny_model,
        ["--served-model-name", MODEL, "--max-model-len", "512", "--max-num-seqs", "8", "--kv-cache-memory",
         "64MiB", "--seed", "3", "--reasoning-parser", "glm47"],
        tmp_path_factory)


def prompt_of(server, messages, **flags):
    r = requests.post(server.url + "/tokenize", json={"model": MODEL, "messages": messages, **flags})
    assert r.status_code == 200, r.text
    tokens = r.json()["tokens"]
    text = requests.post(server.url + "/detokenize", json={"model": MODEL, "tokens": tokens}).json()["prompt"]
    return tokens, text


def convo(last):
    return [{"role": "user", "content": "Tell me a story."}, last]


def test_prompt_ends_with_the_final_content(server):
    _, text = prompt_of(server, convo({"role": "assistant", "content": "Once upon a time"}), **CONTINUE)
    assert text == "[gMASK]<sop><|user|>Tell me a story.<|assistant|></think>Once upon a time"
    _, text = prompt_of(server, convo({"role": "assistant", "reasoning_content": "A short one.",
                                       "content": "Once upon a time"}), **CONTINUE)
    assert text.endswith("<|assistant|><think>A short one.</think>Once upon a time"), text
    calls = [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"x\": 1}"}}]
    msg = {"role": "assistant", "content": "Let me look.", "tool_calls": calls}
    _, whole = prompt_of(server, convo(msg), add_generation_prompt=False)
    assert "<tool_call>f" in whole
    _, text = prompt_of(server, convo(msg), **CONTINUE)
    assert text.endswith("</think>Let me look."), text


def test_chat_continuation_is_content(server, client):
    messages = convo({"role": "assistant", "content": "Once upon a time"})
    r = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=8, temperature=0,
                                       extra_body=CONTINUE)
    choice = r.choices[0]
    tokens, _ = prompt_of(server, messages, **CONTINUE)
    assert r.usage.prompt_tokens == len(tokens)
    assert r.usage.completion_tokens >= 1
    # The same prompt ids through /v1/completions give the raw continuation (greedy).
    raw = requests.post(server.url + "/v1/completions",
                        json={"model": MODEL, "prompt": tokens, "max_tokens": 8, "temperature": 0,
                              "skip_special_tokens": False}).json()["choices"][0]["text"]
    assert "<think>" not in raw, f"greedy output opened a think block; pick another prompt: {raw!r}"
    # The prompt ended after `</think>`, so the glm47 parser reads the continuation as content.
    assert (choice.message.model_extra or {}).get("reasoning") is None
    assert choice.message.content == raw.replace("</think>", "")
    streamed, reasoning = "", ""
    for chunk in client.chat.completions.create(model=MODEL, messages=messages, max_tokens=8, temperature=0,
                                                stream=True, extra_body=CONTINUE):
        if chunk.choices:
            streamed += chunk.choices[0].delta.content or ""
            reasoning += (chunk.choices[0].delta.model_extra or {}).get("reasoning") or ""
    assert streamed == choice.message.content and reasoning == ""


def hf_continue_final_message(rendered, content):
    """Hugging Face apply_chat_template(continue_final_message=True) over a finished render."""
    assert content.strip() in rendered
    loc = rendered.rindex(content.strip())
    if rendered[loc:loc + len(content.lstrip())] == content:  # the template kept the spacing
        return rendered[:loc + len(content.lstrip())]
    return rendered[:loc + len(content.strip())]


# One argument key: the server renders with sorted object keys (build_chat_prompt uses
# ChatTemplate::render, not render_ordered), which jinja2 over a dict in client order does not.
CALL = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": {"s": "é"}}}
ORACLE_CASES = {
    "plain": [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "Once"}],
    "spaces": [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "\n Once upon\u3000 "}],
    "repeated": [{"role": "user", "content": "same"}, {"role": "assistant", "content": "x"},
                 {"role": "user", "content": "same"}, {"role": "assistant", "content": "same"}],
    "reasoning": [{"role": "system", "content": "S"}, {"role": "user", "content": "Q"},
                  {"role": "assistant", "reasoning_content": "R", "content": "So"}],
    "tool_calls": [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "Look.", "tool_calls": [CALL]}],
    "after_tool": [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "", "tool_calls": [CALL]},
                   {"role": "tool", "tool_call_id": "c1", "content": "ok"}, {"role": "assistant", "content": "It is"}],
    "open_think": [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "<think>Step one,"}],
    "empty": [{"role": "user", "content": "Q"}, {"role": "assistant", "content": ""}],
}


@pytest.mark.parametrize("name", sorted(ORACLE_CASES))
def test_prompt_matches_jinja2_plus_hf_cut(server, shared_dir, name):
    messages = ORACLE_CASES[name]
    config = json.loads((shared_dir / "fixtures/flint-tokenizer/tokenizer_config.json").read_text(encoding="utf-8"))
    ok, rendered = reference_render(config["chat_template"], {"messages": messages, "add_generation_prompt": False})
    assert ok, rendered
    expected = hf_continue_final_message(rendered, messages[-1]["content"])
    _, got = prompt_of(server, messages, **CONTINUE)
    assert got == expected


@pytest.mark.parametrize("messages,flags", [
    (convo({"role": "assistant", "content": "A"}), {"continue_final_message": True, "add_generation_prompt": True}),
    (convo({"role": "assistant", "content": "A"}), {"continue_final_message": True}),  # generation prompt defaults on
    ([{"role": "user", "content": "Q"}], CONTINUE),
])
def test_misuse_is_400_naming_the_field(server, client, messages, flags):
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=MODEL, messages=messages, max_tokens=4, extra_body=flags)
    assert e.value.status_code == 400
    assert e.value.body["param"] == "continue_final_message", e.value.body
    assert "continue_final_message" in e.value.body["message"]
    r = requests.post(server.url + "/v1/chat/completions",
                      json={"model": MODEL, "messages": messages, "max_tokens": 4, **flags})
    assert r.status_code == 400 and set(r.json()["error"]) == {"message", "type", "param", "code"}
