#!/usr/bin/env bash
# The server's end-to-end pytest suites against `striker serve --device cuda`, and the NVFP4 GGUF
# checkpoints against the numpy reference on the CUDA backend (called by scripts/gpu.sh on the GPU machine). The GPU machine has no package registry: Python wheels travel in ./.whl (see
# scripts/ship_gpu.sh) and are installed into a private folder, never into the system Python.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${1:?usage: gpu_server_tests.sh BIN_DIR}
LOGS=${OUT:-/tmp/striker-gpu}
mkdir -p "$LOGS"
PYDEPS=/tmp/striker-pydeps
if [ -d .whl ]; then
  # gguf without its dependencies: numpy is on the machine, and its wheel would not fit the transfer.
  python3 -m pip install -q --no-index --find-links .whl --target "$PYDEPS" --no-deps gguf >"$LOGS/pip_gguf.log" 2>&1
  python3 -m pip install -q --no-index --find-links .whl --target "$PYDEPS" openai anthropic pytest requests pyyaml jsonschema \
    >"$LOGS/pip.log" 2>&1 || { echo "server tests: installing the carried wheels failed (see pip.log)"; exit 2; }
fi
export PYTHONPATH="$PYDEPS${PYTHONPATH:+:$PYTHONPATH}"
export STRIKER_BIN="$PWD/$BIN/striker" STRIKER_SERVE_DEVICE=cuda
export STRIKER_SHARED_DIR=${STRIKER_SHARED_DIR:-$PWD/shared}
SUITES=${STRIKER_SERVER_SUITES:-tests/python/test_server_api.py tests/python/test_server_load.py tests/python/test_server_bad_input.py tests/python/test_server_toolcall.py tests/python/test_server_speculative.py tests/python/test_server_async.py tests/python/test_server_responses.py tests/python/test_server_messages.py tests/python/test_server_structured.py tests/python/test_server_structured_toolcall.py tests/python/test_server_thinking_budget.py tests/python/test_server_gguf.py tests/python/test_gguf_conformance.py}
export STRIKER_CONFORMANCE_DEVICE=cuda
# shellcheck disable=SC2086
timeout 420 python3 -m pytest -q -p no:cacheprovider $SUITES >"$LOGS/server_tests.log" 2>&1
rc=$?
# The servers' own logs (server_fixture.py writes /tmp/striker-serve-PORT.log) explain failures.
[ "$rc" = 0 ] || cp /tmp/striker-serve-*.log "$LOGS/" 2>/dev/null
echo "server tests on cuda (rc=$rc): $(tail -1 "$LOGS/server_tests.log")"
grep -E "^(FAILED|ERROR)" "$LOGS/server_tests.log" | head -20
exit $rc
