"""The production templates (GLM-4.7 from the Flint tokenizer, Qwen3) on many generated
conversations — odd whitespace, <think> in content, nested/unicode tool arguments, tool
result runs, thinking switches — rendered by striker's interpreter and by jinja2."""
import json
import random

from jinja_reference import compare, reference_render

TEXTS = ["Hi", "  padded  ", "\nleading newline", "multi\nline\n\ntext", "", "ünïcödé ✓ 東京", "<think>\nR\n</think>\nA",
         "a</think>b", "tabs\tand \"quotes\" and 'single'", "{\"json\": [1, 2]}", "trailing\n", "<tool_call>x</tool_call>"]
ARG_VALUES = ["Paris", "", 3, -1.5, 1e-7, True, None, [1, "two"], {"nested": {"k": "v"}}, "é\n\"q\""]


def random_tool_call(rng):
    args = {rng.choice(["city", "days", "q", "opt", "ключ"]): rng.choice(ARG_VALUES) for _ in range(rng.randint(0, 3))}
    call = {"id": f"call_{rng.randint(0, 99)}", "type": "function",
            "function": {"name": rng.choice(["get_weather", "now", "search"]), "arguments": args}}
    return call if rng.random() < 0.9 else call["function"]


def random_conversation(rng):
    messages = []
    if rng.random() < 0.4:
        messages.append({"role": "system", "content": rng.choice(TEXTS)})
    for _ in range(rng.randint(1, 6)):
        role = rng.choice(["user", "assistant", "assistant", "tool"])
        m = {"role": role, "content": rng.choice(TEXTS)}
        if role == "assistant":
            if rng.random() < 0.5:
                m["reasoning_content"] = rng.choice(TEXTS)
            if rng.random() < 0.4:
                m["tool_calls"] = [random_tool_call(rng) for _ in range(rng.randint(1, 3))]
        messages.append(m)
    variables = {"messages": messages, "add_generation_prompt": rng.random() < 0.6}
    if rng.random() < 0.5:
        variables["tools"] = [{"type": "function", "function": {"name": "get_weather", "description": rng.choice(TEXTS),
                                                                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]
    for key in ("enable_thinking", "clear_thinking"):
        if rng.random() < 0.3:
            variables[key] = rng.random() < 0.5
    return variables


def check(cases):
    # Both renderers failing counts as agreement, so make sure nearly all cases really render.
    rendered = sum(reference_render(t, v)[0] for t, v in cases)
    assert rendered >= 0.95 * len(cases)
    problems = compare(cases)
    assert not problems, f"{len(problems)} of {len(cases)} differ; first ones:\n" + "\n".join(problems[:5])


def test_glm47_template_on_generated_conversations(shared_dir):
    template = json.loads((shared_dir / "fixtures" / "flint-tokenizer" / "tokenizer_config.json").read_text())["chat_template"]
    rng = random.Random(47)
    cases = [(template, random_conversation(rng)) for _ in range(400)]
    check(cases)


def test_qwen3_template_on_generated_conversations(shared_dir):
    config = shared_dir / "fixtures" / "tokenizers" / "qwen3" / "tokenizer_config.json"
    template = json.loads(config.read_text())["chat_template"]
    rng = random.Random(3)
    cases = [(template, random_conversation(rng)) for _ in range(400)]
    check(cases)
