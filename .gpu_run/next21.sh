#!/usr/bin/env bash
# Prepared in session 20 for the next session's first call: every kernel test on main (the sampler's race path is the
# only CUDA change since the last full run, session 20 run 2), the conformance rows beside them, then the step table.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"; C=$B/config.json
mkdir -p "${OUT:-/tmp/out}"; L=${OUT:-/tmp/out}
(timeout 480 $B/test_cuda_kernels --gtest_brief=1 > $L/tests.log 2>&1; echo "test_cuda_kernels rc=$? at ${SECONDS}s" > $L/tests.rc) &
(timeout 500 bash scripts/gpu_conformance.sh $B > $L/conformance.log 2>&1; echo "conformance rc=$? at ${SECONDS}s" > $L/conf.rc) &
wait
cat $L/tests.rc; grep -E '^\[  (FAILED|PASSED) ' $L/tests.log | sort -u | head -12; grep -B2 -A8 Failure $L/tests.log | head -30
cat $L/conf.rc; grep -E '^\| (tiny|mid)' $L/conformance.table 2>/dev/null || grep -E '^\| (tiny|mid)' $L/conformance.log | sort -u
ms() { timeout 30 $B/striker bench latency --config $C --graphs --steps 50 $A 2>&1 | grep -E 'ms/step' | sed -E 's/.*\(([0-9.]+) device.*/\1/'; }
for A in "--context=8192" "--context=100000" "--context=8192 --quantization nvfp4" "--context=100000 --quantization nvfp4" "--context=8192 --batch 8" "--context=8192 --batch 8 --quantization nvfp4"; do
  echo "$A: $(ms)"; done
echo "all done at ${SECONDS}s"
