#!/usr/bin/env bash
# Session 31 run 8 (H100; kernel payload: STRIKER_SHIP_SERVER=0 STRIKER_SHIP_SOURCES=0 STRIKER_SHIP_TRACE=0 STRIKER_SHIP_STRIP=all bash scripts/ship_gpu.sh): every GPU kernel test
# (test_cuda_kernels, last run whole in session 20) beside scripts/gpu_conformance.sh (last run in session 20).
cd "$(dirname "$0")/.."
source .gpu_run/env.sh
LIMIT=${S31D_LIMIT:-450}
( timeout $LIMIT $B/test_cuda_kernels > $OUT/kernel_tests.txt 2>&1; echo "kernel tests rc=$? at ${SECONDS}s" ) &
( timeout $LIMIT bash scripts/gpu_conformance.sh $B > $OUT/conformance.txt 2>&1; echo "conformance rc=$? at ${SECONDS}s" ) &
wait
grep -E "^\[  (PASSED|FAILED) |^\[==========\] [0-9]+ tests|^\[  FAILED" $OUT/kernel_tests.txt | head -20
grep -c "^\[       OK" $OUT/kernel_tests.txt; grep "^\[ RUN" $OUT/kernel_tests.txt | tail -1
tail -20 $OUT/conformance.txt
