#!/usr/bin/env bash
# Session 22, run 1: logprobs on the device — the kernel tests against token_logprob, the sampler's tests, one served
# request 100K -> 256 (NVFP4) without and with "logprobs": 5, the server suites on --device cuda.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"; L=${OUT:-/tmp/out}; mkdir -p $L
timeout 200 $B/test_cuda_kernels --gtest_brief=1 --gtest_filter='CudaLogprobs.*:CudaSampling.*' > $L/t.log 2>&1; echo "tests rc=$? at ${SECONDS}s"
grep -E '^\[  (FAILED|PASSED) |tests ran|^logprobs:|MISMATCH' $L/t.log | sort -u | head -30; grep -B2 -A10 Failure $L/t.log | head -40
bash .gpu_run/serve_long.sh "plain=" 'logprobs=--extra-body {"logprobs":5}' 'lp20=--extra-body {"logprobs":20}'
timeout $((570 - SECONDS)) bash scripts/gpu_server_tests.sh $B > $L/server.log 2>&1; echo "server suites rc=$? at ${SECONDS}s"
tail -4 $L/server.log
