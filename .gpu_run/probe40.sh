#!/usr/bin/env bash
# Session 20: the device sampling's own time per launch (CudaSampling timing rows), for the served step's tail.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"
timeout 120 $B/test_cuda_kernels --gtest_brief=1 --gtest_filter='CudaSampling.*' 2>&1 | grep -E "sampling timing|PASSED|FAILED" | grep -E "rows   1|PASSED|FAILED"
echo "done at ${SECONDS}s"
