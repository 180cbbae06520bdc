"""README's demo, exactly as written there: `scripts/run.sh` serves the trained toolcall model, then the
README's curl, `openai` Python (chat and Responses), `anthropic` Python and `striker chat` examples run against it and must print what the README
shows (tool call ids, which are random, excepted). Edit the README and this test follows it."""
import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

from server_fixture import StrikerServer

ROOT = pathlib.Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
README_URL = "http://localhost:8000"


def readme_block(name):
    """The fenced block right after `<!-- readme-test: NAME -->`."""
    m = re.search(r"<!-- readme-test: " + re.escape(name) + r" -->\n```[a-z]*\n(.*?)```", README, re.S)
    assert m, f"README.md has no block marked readme-test: {name}"
    return m.group(1)


def same_ids(text):
    return re.sub(r"chatcmpl-tool-[0-9a-f]+", "chatcmpl-tool-…", text)


@pytest.fixture(scope="module")
def server(striker_bin, shared_dir, tmp_path_factory):
    """README's first command, `bash scripts/run.sh`, with the binary already built and any free port."""
    env = {**os.environ, "STRIKER_BIN": str(striker_bin), "STRIKER_SHARED_DIR": str(shared_dir), "PORT": "0"}
    s = StrikerServer(striker_bin, None, env=env, log_dir=tmp_path_factory.mktemp("readme"),
                      command=["bash", str(ROOT / "scripts/run.sh")])
    yield s
    s.stop()


def test_curl_example_returns_the_readme_tool_call(server):
    script = readme_block("curl").replace(README_URL, server.url)
    r = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    choice = json.loads(r.stdout)["choices"][0]
    assert choice["message"]["tool_calls"][0]["function"]["name"] == "get_weather"
    assert json.loads(same_ids(json.dumps(choice))) == json.loads(readme_block("curl-answer"))


def test_python_example_prints_the_readme_output(server):
    script = readme_block("python").replace(README_URL + "/v1", server.url + "/v1")
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert r.stdout == readme_block("python-output")


@pytest.mark.parametrize("name, base", [("responses", README_URL + "/v1"), ("anthropic", README_URL)])
def test_other_api_examples_print_the_readme_output(server, name, base):
    script = readme_block(name).replace(base, server.url + ("/v1" if base.endswith("/v1") else ""))
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert r.stdout == readme_block(name + "-output")


def test_striker_chat_example_prints_the_readme_transcript(server, striker_bin):
    """The transcript's typed lines (after `> ` and `result of NAME> `) become stdin; a terminal echoes
    them, a pipe does not, so the expected output is the transcript without them."""
    command, transcript = readme_block("chat").split("\n", 1)
    assert command.startswith("$ build/striker chat ")
    args = command.split()[3:]
    typed, expected = [], []
    for line in transcript.splitlines(keepends=True):
        m = re.match(r"((?:result of \S+)?> )(.*)\n", line)
        if m:
            typed.append(m.group(2))
            expected.append(m.group(1))
        else:
            expected.append(line)
    cmd = [str(striker_bin), "chat", "--color", "never", *[a.replace(README_URL, server.url) for a in args]]
    r = subprocess.run(cmd, input="\n".join(typed) + "\n", capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "".join(expected).replace(README_URL, server.url)
