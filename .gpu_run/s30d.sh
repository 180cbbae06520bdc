#!/usr/bin/env bash
# Session 30 run 4 (not run: no device time left; payload = main + .gpu_run/s30_regs.patch): NVFP4 16-row tiles on register fragments, 64-row
# tiles on the shared-memory tile decode (each the faster in runs 2-3). The grouped NVFP4 tests (bit for bit against
# the BF16 kernels at both heights) and the NVFP4 forward tests, then batched-moe at T = 64 (16-row) and 700 (64-row):
# expected ~regs' and ~ar's rows of run 3.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 70 $B/test_cuda_kernels --gtest_filter='CudaMoeGroupedNvfp4.*:CudaBackend.Nvfp4BatchedSteps*' > $OUT/tests.txt 2>&1
echo "tests rc=$? at ${SECONDS}s"; grep -E "^\[  (PASSED|FAILED) |^\[==========\] [0-9]+ tests|Failure|FAILED|^\[       OK" $OUT/tests.txt | head -20
timeout 30 $B/bench_cuda_kernels batched-moe 64 700 2>&1 | grep -E "nvfp4 moe grouped T=[0-9]+ (gate|down|all)|failed" | cut -c1-100
echo "all done at ${SECONDS}s"
