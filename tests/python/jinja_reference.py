"""Python jinja2 configured the way Hugging Face transformers renders chat templates, plus a
driver for striker's batch renderer (tests/cpp/chat/test_jinja_batch.cpp)."""
import copy
import datetime
import json
import os
import pathlib
import subprocess
import tempfile

from jinja2.exceptions import TemplateError
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = pathlib.Path(__file__).resolve().parents[2]


def hf_environment() -> ImmutableSandboxedEnvironment:
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def raise_exception(message):
        raise TemplateError(message)

    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.datetime.now().strftime(fmt)
    return env


_COMPILED = {}


def reference_render(template: str, variables: dict):
    """(True, output) or (False, error message)."""
    try:
        if template not in _COMPILED:
            _COMPILED[template] = hf_environment().from_string(template)
        # A deep copy: some jinja2 filters mutate their input in place (indent on a list does
        # `s += "\n"`), which would leak into later cases sharing the same context.
        return True, _COMPILED[template].render(**copy.deepcopy(variables))
    except Exception as e:  # jinja2 raises many types: all count as "render failed"
        return False, f"{type(e).__name__}: {e}"


def batch_binary() -> pathlib.Path:
    build = pathlib.Path(os.environ.get("STRIKER_BUILD_DIR", ROOT / "build"))
    return build / "tests" / "test_chat"


def striker_render_batch(cases):
    """Renders [(template, vars)] with striker's interpreter in one process."""
    binary = batch_binary()
    if not binary.exists():
        raise FileNotFoundError(f"{binary} not found: build the test_chat target first")
    with tempfile.TemporaryDirectory() as tmp:
        cin = pathlib.Path(tmp, "cases.json")
        cout = pathlib.Path(tmp, "results.json")
        cin.write_text(json.dumps([{"template": t, "vars": v} for t, v in cases], ensure_ascii=False), encoding="utf-8")
        env = dict(os.environ, STRIKER_JINJA_BATCH_IN=str(cin), STRIKER_JINJA_BATCH_OUT=str(cout))
        proc = subprocess.run([str(binary), "--gtest_filter=JinjaBatch.RenderCasesFromEnv"], env=env,
                              capture_output=True, text=True, timeout=600)
        if proc.returncode != 0 or not cout.exists():
            raise RuntimeError(f"batch renderer failed (rc={proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
        results = json.loads(cout.read_text(encoding="utf-8"))
    assert len(results) == len(cases)
    return [(r["ok"], r["out"] if r["ok"] else r["error"]) for r in results]


def compare(cases):
    """Returns a list of mismatch descriptions (empty when striker agrees with jinja2 everywhere).
    Both failing counts as agreement: error texts differ by design."""
    mine = striker_render_batch(cases)
    problems = []
    for (template, variables), (ok, out) in zip(cases, mine):
        ref_ok, ref_out = reference_render(template, variables)
        if ok != ref_ok or (ok and out != ref_out):
            problems.append(f"template={template!r} vars={variables!r}\n  jinja2 : {ref_ok} {ref_out!r}\n  striker: {ok} {out!r}")
    return problems
