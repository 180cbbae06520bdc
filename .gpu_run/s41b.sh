#!/usr/bin/env bash
# Session 41 run 2: A = main (striker_A.xz), E = the split combine inside the front's split kernel for
# one-query steps whose KV head's splits fit one cluster (≤ 16), NVFP4 one-token sliding layers at the
# planner's 9 splits (main: 5 + the combine launch) — the payload's own build. bench latency --graphs,
# 50 steps, device ms / kernels per step, three rounds, NVFP4 and BF16; then every GPU kernel test (two
# processes) beside scripts/gpu_conformance.sh on E.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
xz -dc .gpuwork/striker_A.xz > $B/striker_A && chmod +x $B/striker_A
cp $B/striker $B/striker_E
C=$B/config.json
run() {  # bin ctx batch [quantization args]
  local bin=$1 ctx=$2 b=$3; shift 3
  r=$(timeout 90 $B/$bin bench latency --config $C "$@" --graphs --context $ctx --batch $b --steps 50 --warmup 3 2>&1)
  echo -n " ${bin#striker_} $(echo "$r" | grep -oE '\([0-9.]+ device\)' | grep -oE '[0-9.]+')/$(echo "$r" | grep -oE 'kernels per step: [0-9]+' | grep -oE '[0-9]+$')$(echo "$r" | grep -m1 -i error)"
}
for rep in 1 2 3; do
  for cb in "8192 1" "100000 1" "1024 1" "8192 8" "1024 2"; do set -- $cb
    echo -n "nvfp4 ctx$1 b$2:"; for bin in striker_A striker_E; do run $bin $1 $2 --quantization nvfp4; done; echo
  done
  for cb in "8192 1" "100000 1" "8192 8"; do set -- $cb
    echo -n "bf16 ctx$1 b$2:"; for bin in striker_A striker_E; do run $bin $1 $2; done; echo
  done
done
echo "table done at ${SECONDS}s"
LIMIT=${S41_LIMIT:-420}
F1='CudaNvfp4.*:CudaMoe*:CudaBackend*:CudaLinear*:CudaGemv*'
( timeout $LIMIT $B/test_cuda_kernels --gtest_filter="$F1" > $OUT/kernel_tests_1.txt 2>&1; echo "kernel tests 1 rc=$? at ${SECONDS}s" ) &
( timeout $LIMIT $B/test_cuda_kernels --gtest_filter="-$F1" > $OUT/kernel_tests_2.txt 2>&1; echo "kernel tests 2 rc=$? at ${SECONDS}s" ) &
( timeout $LIMIT bash scripts/gpu_conformance.sh $B > $OUT/conformance.txt 2>&1; echo "conformance rc=$? at ${SECONDS}s" ) &
wait
for f in $OUT/kernel_tests_1.txt $OUT/kernel_tests_2.txt; do
  grep -E "^\[  (PASSED|FAILED) |^\[==========\] [0-9]+ tests|^\[  FAILED" $f | head -20
  echo "OK lines: $(grep -c '^\[       OK' $f); last: $(grep '^\[ RUN' $f | tail -1)"
done
grep -A3 'OneTokenFront\|AddsNoKernel' $OUT/kernel_tests_2.txt | grep -E 'OK|FAILED' | head
tail -14 $OUT/conformance.txt
echo "all done at ${SECONDS}s"
