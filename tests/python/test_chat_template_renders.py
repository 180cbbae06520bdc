"""`striker tokenize DIR --chat FILE` against Python jinja2 configured as Hugging Face does:
the GLM-4.7 template on the 13 renders of reference/chat-format.md §1.6 (also checked against
the strings pasted there), and the Qwen3 template on conversations with tools, tool results
and reasoning. Token ids are checked against the `tokenizers` library."""
import json
import re
import shutil
import subprocess

import pytest
from tokenizers import Tokenizer

from jinja_reference import reference_render

GET_WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Get current weather",
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                              "required": ["city"]}}}


def special_tokens(tokenizer_dir):
    """What HF puts under the template variables (special_tokens_map entries that are set)."""
    config = json.loads((tokenizer_dir / "tokenizer_config.json").read_text(encoding="utf-8"))
    out = {}
    for key in ("bos_token", "eos_token", "unk_token", "pad_token"):
        value = config.get(key)
        if isinstance(value, dict):
            value = value.get("content")
        if isinstance(value, str):
            out[key] = value
    if isinstance(config.get("additional_special_tokens"), list):
        out["additional_special_tokens"] = [t if isinstance(t, str) else t.get("content")
                                            for t in config["additional_special_tokens"]]
    return config["chat_template"], out


def striker_chat(striker_bin, tokenizer_dir, variables, tmp_path):
    path = tmp_path / "vars.json"
    path.write_text(json.dumps(variables, ensure_ascii=False), encoding="utf-8")
    proc = subprocess.run([str(striker_bin), "tokenize", str(tokenizer_dir), "--chat", str(path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def check_against_jinja2(striker_bin, tokenizer_dir, variables, tmp_path):
    template, specials = special_tokens(tokenizer_dir)
    ok, expected = reference_render(template, {**specials, **variables})
    assert ok, expected
    got = striker_chat(striker_bin, tokenizer_dir, variables, tmp_path)
    assert got["prompt"] == expected
    ids = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json")).encode(expected, add_special_tokens=False).ids
    assert got["ids"] == ids
    return got["prompt"]


def glm_renders(shared_dir):
    """Parses the §1.6 renders: (name, variables, expected GLM-4.7 prompt)."""
    text = (shared_dir / "reference" / "chat-format.md").read_text(encoding="utf-8")
    section = text[text.index("### 1.6 Exact rendered prompts"):text.index("### 1.7")]
    renders = []
    for chunk in re.split(r"^#### ", section, flags=re.M)[1:]:
        name = chunk.split(" ", 2)[1]
        messages = json.loads(re.search(r"^messages \(after vLLM preprocessing\): `(.*)`", chunk, re.M).group(1))
        kwargs = json.loads(re.search(r"^template kwargs: `(.*)`", chunk, re.M).group(1))
        tools = None
        tools_line = re.search(r"^tools: (.*?)\s*$", chunk, re.M)
        if tools_line:
            raw = tools_line.group(1)
            tools = [GET_WEATHER] if raw.startswith("[get_weather") else json.loads(raw.strip("`"))
        expected = json.loads(re.search(r"GLM-4\.7:\n```json\n(.*?)\n```", chunk, re.S).group(1))
        renders.append((name, {"messages": messages, "tools": tools, **kwargs}, expected))
    return renders


def test_all_thirteen_renders_are_present(shared_dir):
    names = sorted(name for name, _, _ in glm_renders(shared_dir))
    assert names == sorted("ABCDEFGHIJKLM")


@pytest.mark.parametrize("name", list("ABCDEFGHIJKLM"))
def test_glm47_render_matches_reference_and_jinja2(striker_bin, shared_dir, tmp_path, name):
    (variables, expected), = [(v, e) for n, v, e in glm_renders(shared_dir) if n == name]
    tokenizer_dir = shared_dir / "fixtures" / "flint-tokenizer"
    prompt = check_against_jinja2(striker_bin, tokenizer_dir, variables, tmp_path)
    assert prompt == expected


QWEN_TOOLS = [GET_WEATHER, {"type": "function", "function": {"name": "get_time", "description": "Local time ☀",
                                                          "parameters": {"type": "object", "properties": {
                                                              "city": {"type": "string", "enum": ["Zürich", "東京"]}},
                                                              "required": ["city"]}}}]
QWEN_CONVERSATIONS = {
    "plain": {"messages": [{"role": "user", "content": "Hi"}], "add_generation_prompt": True},
    "system_and_thinking_off": {"messages": [{"role": "system", "content": "Be brief."},
                                             {"role": "user", "content": "Hi"}],
                                "add_generation_prompt": True, "enable_thinking": False},
    "tools_and_system": {"messages": [{"role": "system", "content": "Sys"}, {"role": "user", "content": "Weather?"}],
                         "tools": QWEN_TOOLS, "add_generation_prompt": True},
    "tool_chain": {"messages": [
        {"role": "user", "content": "Weather in Paris and time in Zürich?"},
        {"role": "assistant", "content": "", "reasoning_content": "\nNeed two tools.\n",
         "tool_calls": [{"id": "a", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}},
                        {"id": "b", "type": "function", "function": {"name": "get_time", "arguments": "{\"city\": \"Zürich\"}"}}]},
        {"role": "tool", "tool_call_id": "a", "content": "{\"temp\": 18}"},
        {"role": "tool", "tool_call_id": "b", "content": "10:00"},
        {"role": "assistant", "content": "It is 18° in Paris; 10:00 in Zürich.", "reasoning_content": "Done."}],
        "tools": QWEN_TOOLS, "add_generation_prompt": False},
    "history_reasoning_dropped": {"messages": [
        {"role": "user", "content": "Q1"},
        {"role": "assistant", "content": "<think>\nold reasoning\n</think>\n\nA1"},
        {"role": "user", "content": "Q2"},
        {"role": "assistant", "content": "A2", "reasoning_content": "new reasoning"},
        {"role": "user", "content": "<tool_response>x</tool_response>"}], "add_generation_prompt": True},
    "tool_then_generation": {"messages": [
        {"role": "user", "content": "Time?"},
        {"role": "assistant", "content": "Checking.", "tool_calls": [
            {"type": "function", "function": {"name": "get_time", "arguments": {"city": "東京"}}}]},
        {"role": "tool", "content": "21:00"}], "tools": QWEN_TOOLS, "add_generation_prompt": True},
}


@pytest.mark.parametrize("name", sorted(QWEN_CONVERSATIONS))
def test_qwen3_render_matches_jinja2(striker_bin, shared_dir, tmp_path, name):
    tokenizer_dir = shared_dir / "fixtures" / "tokenizers" / "qwen3"
    check_against_jinja2(striker_bin, tokenizer_dir, QWEN_CONVERSATIONS[name], tmp_path)


def tokenizer_dir_with_template(shared_dir, tmp_path, template):
    (tmp_path / "tok").mkdir()
    shutil.copy(shared_dir / "fixtures" / "flint-tokenizer" / "tokenizer.json", tmp_path / "tok" / "tokenizer.json")
    config = {"chat_template": template}
    (tmp_path / "tok" / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")


def test_raise_exception_is_a_clean_error(striker_bin, shared_dir, tmp_path):
    tokenizer_dir_with_template(shared_dir, tmp_path, "{{ raise_exception('no system role allowed') }}")
    (tmp_path / "vars.json").write_text("{}", encoding="utf-8")
    proc = subprocess.run([str(striker_bin), "tokenize", str(tmp_path / "tok"), "--chat", str(tmp_path / "vars.json")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert "no system role allowed" in proc.stderr
    assert proc.stderr.count("\n") <= 1


def test_syntax_error_reports_line_and_column(striker_bin, shared_dir, tmp_path):
    tokenizer_dir_with_template(shared_dir, tmp_path, "line one\n{% if x %}\n  {{ 1 + }}\n{% endif %}")
    (tmp_path / "vars.json").write_text("{}", encoding="utf-8")
    proc = subprocess.run([str(striker_bin), "tokenize", str(tmp_path / "tok"), "--chat", str(tmp_path / "vars.json")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert ":3:10:" in proc.stderr, proc.stderr
