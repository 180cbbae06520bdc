#!/usr/bin/env bash
# Session 21, last run: the sampling and backend tests on main's final binary (the refusal of vocabularies beyond the split is new).
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"; L=${OUT:-/tmp/out}; mkdir -p $L
timeout 300 $B/test_cuda_kernels --gtest_brief=1 --gtest_filter='CudaSampling.*:CudaBackend.*:CudaBackendNvfp4*' > $L/t.log 2>&1; echo "rc=$? at ${SECONDS}s"
grep -E '^\[  (FAILED|PASSED) |tests ran' $L/t.log | sort -u; grep -B2 -A10 Failure $L/t.log | head -40
grep 'sampling timing' $L/t.log
