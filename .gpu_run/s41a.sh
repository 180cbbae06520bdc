#!/usr/bin/env bash
# Session 41 run 1: A = main (striker_A.xz), B = the split combine inside the front's split kernel where a
# KV head's splits fit one cluster (the payload's own build), C = B with NVFP4 one-token sliding layers at
# the planner's 9 splits (B: 5), D = B with 3. bench latency --graphs, 50 steps, device ms, three rounds;
# BF16 A vs B; then every GPU kernel test (two processes) beside scripts/gpu_conformance.sh on B.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
for a in A C D; do xz -dc .gpuwork/striker_$a.xz > $B/striker_$a && chmod +x $B/striker_$a; done
cp $B/striker $B/striker_B
C=$B/config.json
run() {  # bin quant ctx batch
  r=$(timeout 90 $B/$1 bench latency --config $C --quantization $2 --graphs --context $3 --batch $4 --steps 50 --warmup 3 2>&1)
  echo -n " ${1#striker_} $(echo "$r" | grep -oE '\([0-9.]+ device\)' | grep -oE '[0-9.]+')/$(echo "$r" | grep -oE 'kernels per step: [0-9]+' | grep -oE '[0-9]+$')$(echo "$r" | grep -m1 -i error)"
}
for rep in 1 2 3; do
  for cb in "8192 1" "100000 1" "8192 8" "1024 2" "1024 16"; do set -- $cb
    echo -n "nvfp4 ctx$1 b$2:"
    for bin in striker_A striker_B striker_C striker_D; do run $bin nvfp4 $1 $2; done; echo
  done
  for cb in "8192 1" "8192 8"; do set -- $cb
    echo -n "bf16 ctx$1 b$2:"
    for bin in striker_A striker_B; do run $bin bf16 $1 $2; done; echo
  done
done
echo "table done at ${SECONDS}s"
timeout 60 $B/striker_B bench latency --config $C --quantization nvfp4 --graphs --context 8192 --batch 1 --steps 50 --warmup 3 > $OUT/bench_B_1x8k.txt 2>&1
grep -iE 'kernels|roofline|peak' $OUT/bench_B_1x8k.txt | head -5
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
tail -14 $OUT/conformance.txt
echo "all done at ${SECONDS}s"
