#!/usr/bin/env bash
# Session 22, run 3: prompt logprobs on the device too — the kernel tests, the server suites on --device cuda with the
# logprob-heavy ones (prefix cache with prompt logprobs, echo with logprobs), a served prompt-logprobs timing, and the
# served decode with "logprobs": 5 again.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"; L=${OUT:-/tmp/out}; mkdir -p $L
timeout 200 $B/test_cuda_kernels --gtest_brief=1 --gtest_filter='CudaLogprobs.*:CudaSampling.*' > $L/t.log 2>&1; echo "tests rc=$? at ${SECONDS}s"
grep -E '^\[  (FAILED|PASSED) |tests ran|logprobs:|MISMATCH' $L/t.log | sort -u | head -30; grep -B2 -A10 Failure $L/t.log | head -40
STRIKER_SERVER_SUITES="tests/python/test_server_api.py tests/python/test_server_load.py tests/python/test_server_bad_input.py tests/python/test_server_toolcall.py tests/python/test_server_structured.py tests/python/test_server_structured_toolcall.py tests/python/test_server_gguf.py tests/python/test_gguf_conformance.py tests/python/test_server_prefix_cache.py tests/python/test_server_stop_echo.py" \
  timeout 300 bash scripts/gpu_server_tests.sh $B > $L/server.log 2>&1; echo "server suites rc=$? at ${SECONDS}s"
tail -25 $L/server.log | grep -vE '^\s*$' | tail -12
PYTHONPATH=/tmp/striker-pydeps timeout 120 python3 .gpu_run/s22c_probe.py $B/striker shared/fixtures/toolcall-model $L/probe_serve.log; echo "probe rc=$? at ${SECONDS}s"
bash .gpu_run/serve_long.sh 'logprobs=--extra-body {"logprobs":5}' 2>&1 | grep -E 'TPOT|done'
echo "all done at ${SECONDS}s"
