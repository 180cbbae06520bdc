#!/usr/bin/env bash
# Session 20: the sampler's race path (rows without a top_k or top_p cut, greedy included, over 32 slices): the
# sampling tests against the CPU sampler, and the per-launch timings at one row (before: greedy 17.4 µs,
# temperature only 115.5 µs, top_k 20 / top_p 0.95 23.7 µs).
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"
timeout 150 $B/test_cuda_kernels --gtest_brief=1 --gtest_filter='CudaSampling.*' > /tmp/t.log 2>&1
echo "sampling tests rc=$? at ${SECONDS}s"; grep -E "sampling timing|PASSED|FAILED|Failure|race path|vocab 151552" /tmp/t.log | grep -vE "rows  64|rows 256" | head -30
echo "done at ${SECONDS}s"
