#!/usr/bin/env bash
# Session 21, run 1: the sampler's cut path (top_p without top_k, top_k above the candidate cap on all
# slices, one launch per radix digit). CudaSampling.* first (stop there if they fail), then every
# kernel test beside the conformance rows, the sampling timing rows, the step table.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"; C=$B/config.json
mkdir -p "${OUT:-/tmp/out}"; L=${OUT:-/tmp/out}
timeout 150 $B/test_cuda_kernels --gtest_filter='CudaSampling.*' > $L/sampling.log 2>&1; rc=$?
echo "CudaSampling rc=$rc at ${SECONDS}s"; grep -E '^\[  (FAILED|PASSED) |^\[       OK|rows \(|CUT STATE|MISMATCH|boundary' $L/sampling.log | head -40
grep 'sampling timing' $L/sampling.log
[ $rc = 0 ] || { grep -B3 -A12 Failure $L/sampling.log | head -60; exit 1; }
(timeout 450 $B/test_cuda_kernels --gtest_brief=1 --gtest_filter='-CudaSampling.*' > $L/tests.log 2>&1; echo "test_cuda_kernels rc=$? at ${SECONDS}s" > $L/tests.rc) &
(timeout 480 bash scripts/gpu_conformance.sh $B > $L/conformance.log 2>&1; echo "conformance rc=$? at ${SECONDS}s" > $L/conf.rc) &
wait
cat $L/tests.rc; grep -E '^\[  (FAILED|PASSED) ' $L/tests.log | sort -u | head -12; grep -B2 -A8 Failure $L/tests.log | head -30
cat $L/conf.rc; grep -E '^\| (tiny|mid)' $L/conformance.table 2>/dev/null || grep -E '^\| (tiny|mid)' $L/conformance.log | sort -u
ms() { timeout 30 $B/striker bench latency --config $C --graphs --steps 50 $A 2>&1 | grep -E 'ms/step' | sed -E 's/.*\(([0-9.]+) device.*/\1/'; }
for A in "--context=8192" "--context=100000" "--context=8192 --quantization nvfp4" "--context=100000 --quantization nvfp4" "--context=8192 --batch 8" "--context=8192 --batch 8 --quantization nvfp4"; do
  echo "$A: $(ms)"; done
echo "all done at ${SECONDS}s"
