#!/usr/bin/env bash
# Session 41 run 7: A = main (striker_A.xz: the cluster combine landed) vs G = the one-token router inside the
# NVFP4 gate/up launch (nvfp4_moe_route_gate_up; the payload's own build). bench latency --graphs, 50 steps,
# device ms / kernels, three rounds; then the affected GPU tests (two processes) beside gpu_conformance.sh.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
xz -dc .gpuwork/striker_A.xz > $B/striker_A && chmod +x $B/striker_A
cp $B/striker $B/striker_G
C=$B/config.json
run() {  # bin ctx batch [quantization args]
  local bin=$1 ctx=$2 b=$3; shift 3
  r=$(timeout 90 $B/$bin bench latency --config $C "$@" --graphs --context $ctx --batch $b --steps 50 --warmup 3 2>&1)
  echo -n " ${bin#striker_} $(echo "$r" | grep -oE '\([0-9.]+ device\)' | grep -oE '[0-9.]+')/$(echo "$r" | grep -oE 'kernels per step: [0-9]+' | grep -oE '[0-9]+$')$(echo "$r" | grep -m1 -i error)"
}
for rep in 1 2 3; do
  for cb in "8192 1" "100000 1" "1024 1" "8192 8"; do set -- $cb
    echo -n "nvfp4 ctx$1 b$2:"; for bin in striker_A striker_G; do run $bin $1 $2 --quantization nvfp4; done; echo
  done
done
echo -n "bf16 ctx8192 b1:"; for bin in striker_A striker_G; do run $bin 8192 1; done; echo
echo "table done at ${SECONDS}s"
F1='CudaMoeRouteGateUp.*:CudaNvfp4.*:CudaRouter*:CudaMoe*'
( timeout 300 $B/test_cuda_kernels --gtest_filter="$F1" > $OUT/kernel_tests_1.txt 2>&1; echo "kernel tests 1 rc=$? at ${SECONDS}s" ) &
( timeout 300 $B/test_cuda_kernels --gtest_filter='CudaBackend.*' > $OUT/kernel_tests_2.txt 2>&1; echo "kernel tests 2 rc=$? at ${SECONDS}s" ) &
( timeout 300 bash scripts/gpu_conformance.sh $B > $OUT/conformance.txt 2>&1; echo "conformance rc=$? at ${SECONDS}s" ) &
wait
for f in $OUT/kernel_tests_1.txt $OUT/kernel_tests_2.txt; do
  grep -E "^\[  (PASSED|FAILED) |^\[==========\] [0-9]+ tests|^\[  FAILED" $f | head -20
  echo "OK lines: $(grep -c '^\[       OK' $f); last: $(grep '^\[ RUN' $f | tail -1)"
done
grep -B3 -A12 'Failure' $OUT/kernel_tests_1.txt | head -40
tail -14 $OUT/conformance.txt
echo "all done at ${SECONDS}s"
