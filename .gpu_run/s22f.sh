#!/usr/bin/env bash
# Session 22, run 6: the sampling and logprob tests after select_top_pruned was shared by both kernel files.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"; L=${OUT:-/tmp/out}; mkdir -p $L
timeout 200 $B/test_cuda_kernels --gtest_brief=1 --gtest_filter='CudaLogprobs.*:CudaSampling.*:CudaBackend.*' > $L/t.log 2>&1; echo "tests rc=$? at ${SECONDS}s"
grep -E '^\[  (FAILED|PASSED) |tests ran|logprobs:|vocab 151552|sampling timing' $L/t.log | sort -u | head -30; grep -B2 -A10 Failure $L/t.log | head -40
