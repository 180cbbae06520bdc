#!/usr/bin/env bash
# Session 20: main verified on the GPU (the full kernel tests last ran in session 16): every test_cuda_kernels
# test beside scripts/gpu_conformance.sh (CPU-bound; the two do not compete for the GPU's time much).
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"
mkdir -p "${OUT:-/tmp/out}"; L=${OUT:-/tmp/out}
(timeout 480 $B/test_cuda_kernels --gtest_brief=1 > $L/tests.log 2>&1; echo "test_cuda_kernels rc=$? at ${SECONDS}s" > $L/tests.rc) &
(timeout 500 bash scripts/gpu_conformance.sh $B > $L/conformance.log 2>&1; echo "conformance rc=$? at ${SECONDS}s" > $L/conf.rc) &
wait
cat $L/tests.rc; grep -E '^\[  (FAILED|PASSED) |tests? ran' $L/tests.log | sort -u | head -12; grep -B2 -A8 Failure $L/tests.log | head -30
cat $L/conf.rc; grep -E '^\|' $L/conformance.log | head -16; tail -3 $L/conformance.log
