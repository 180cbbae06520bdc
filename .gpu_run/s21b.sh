#!/usr/bin/env bash
# Session 21, run 2: the cut path with its tie search on one slice and batched loads: CudaSampling.* and its timing rows.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"
mkdir -p "${OUT:-/tmp/out}"; L=${OUT:-/tmp/out}
timeout 150 $B/test_cuda_kernels --gtest_filter='CudaSampling.*' > $L/sampling.log 2>&1; rc=$?
echo "CudaSampling rc=$rc at ${SECONDS}s"; grep -E '^\[  (FAILED|PASSED) |rows \(|CUT STATE|MISMATCH|boundary' $L/sampling.log | head -40
grep 'sampling timing' $L/sampling.log
[ $rc = 0 ] || grep -B3 -A12 Failure $L/sampling.log | head -60
