#!/usr/bin/env bash
# Session 22, run 4: the server suites on --device cuda after the scheduler's per-step budget for prompt-logprob
# chunks (the new test_concurrent_prompt_logprobs asks 4 x ~290 rows at once), with the prefix-cache and echo suites.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"; L=${OUT:-/tmp/out}; mkdir -p $L
STRIKER_SERVER_SUITES="tests/python/test_server_api.py tests/python/test_server_load.py tests/python/test_server_bad_input.py tests/python/test_server_toolcall.py tests/python/test_server_structured.py tests/python/test_server_structured_toolcall.py tests/python/test_server_gguf.py tests/python/test_gguf_conformance.py tests/python/test_server_prefix_cache.py tests/python/test_server_stop_echo.py" \
  timeout 300 bash scripts/gpu_server_tests.sh $B > $L/server.log 2>&1; echo "server suites rc=$? at ${SECONDS}s"
tail -25 $L/server.log | grep -vE '^\s*$' | tail -12
