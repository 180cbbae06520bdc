#!/usr/bin/env bash
# Session 22, run 5 (final binary): every kernel test (CUDA changes this session: sampling/logprobs.cu and the backend's
# forward_sampled), then the server suites on --device cuda with the prefix-cache and echo suites.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"; L=${OUT:-/tmp/out}; mkdir -p $L
timeout 420 $B/test_cuda_kernels --gtest_brief=1 > $L/t.log 2>&1; echo "kernel tests rc=$? at ${SECONDS}s"
grep -E '^\[  (FAILED|PASSED) |tests ran|logprobs:' $L/t.log | sort -u | head -30; grep -B2 -A10 Failure $L/t.log | head -40
STRIKER_SERVER_SUITES="tests/python/test_server_api.py tests/python/test_server_load.py tests/python/test_server_bad_input.py tests/python/test_server_toolcall.py tests/python/test_server_structured.py tests/python/test_server_structured_toolcall.py tests/python/test_server_gguf.py tests/python/test_gguf_conformance.py tests/python/test_server_prefix_cache.py tests/python/test_server_stop_echo.py" \
  timeout $((590 - SECONDS)) bash scripts/gpu_server_tests.sh $B > $L/server.log 2>&1; echo "server suites rc=$? at ${SECONDS}s"
tail -25 $L/server.log | grep -vE '^\s*$' | tail -12
