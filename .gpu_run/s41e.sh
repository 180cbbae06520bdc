#!/usr/bin/env bash
# Session 41 run 4: F = the landed form (the cluster combine on NVFP4 one-token steps; the payload's own
# build): bench latency --graphs, 50 steps, device ms / kernels, two rounds; test_cuda_kernels' attention
# and backend suites (two processes).
cd "$(dirname "$0")/.."
source .gpu_run/env.sh
run() {  # ctx batch [quantization args]
  local ctx=$1 b=$2; shift 2
  r=$(timeout 90 $B/striker bench latency --config $C "$@" --graphs --context $ctx --batch $b --steps 50 --warmup 3 2>&1)
  echo -n " $(echo "$r" | grep -oE '\([0-9.]+ device\)' | grep -oE '[0-9.]+')/$(echo "$r" | grep -oE 'kernels per step: [0-9]+' | grep -oE '[0-9]+$')$(echo "$r" | grep -m1 -i error)"
}
for rep in 1 2; do
  echo -n "F:"; run 8192 1 --quantization nvfp4; run 100000 1 --quantization nvfp4; run 8192 1; run 100000 1; echo
done
echo "table done at ${SECONDS}s"
( timeout 300 $B/test_cuda_kernels --gtest_filter='CudaAttention.*' > $OUT/kernel_tests_a.txt 2>&1; echo "attention tests rc=$? at ${SECONDS}s" ) &
( timeout 300 $B/test_cuda_kernels --gtest_filter='CudaBackend.*' > $OUT/kernel_tests_b.txt 2>&1; echo "backend tests rc=$? at ${SECONDS}s" ) &
wait
for f in $OUT/kernel_tests_a.txt $OUT/kernel_tests_b.txt; do
  grep -E "^\[  (PASSED|FAILED) |^\[==========\] [0-9]+ tests|^\[  FAILED" $f | head -20
  echo "OK lines: $(grep -c '^\[       OK' $f); last: $(grep '^\[ RUN' $f | tail -1)"
done
echo "all done at ${SECONDS}s"
