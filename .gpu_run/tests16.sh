#!/usr/bin/env bash
# Session 16: every GPU test on the landed form, alone on the machine.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"
timeout 480 $B/test_cuda_kernels --gtest_brief=1 > /tmp/t.log 2>&1; echo "test_cuda_kernels rc=$? $(grep -E '^\[  (FAILED|PASSED) ' /tmp/t.log | head -3 | tr '\n' ' ')"; grep -B2 -A12 Failure /tmp/t.log | head -30; grep -E '^\[  FAILED' /tmp/t.log | head; tail -3 /tmp/t.log
