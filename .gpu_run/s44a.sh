#!/usr/bin/env bash
# Session 44 run 1: main with cuBLASLt opened at run time (linear/cublaslt_library.h) — every GPU kernel
# test (two processes) beside scripts/gpu_conformance.sh (the BF16 prefill GEMMs go through cuBLASLt),
# then issue 11's table (bench latency --graphs, 50 steps, device ms / kernels per step, two rounds) on
# the card lent (asked for an H200: the targets are the H200's). Leaner runs for a short device budget:
# S44_LIMIT (s per test process, 420), S44_FILTER (the first process's tests), S44_REST=0 (no second process
# for the other tests), S44_ROUNDS (of the table, 2); e.g. S44_LIMIT=240 S44_FILTER='CudaLinear*:CudaGemv*:CudaBackend*'.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader
echo "start-up (no subcommand): $( { /usr/bin/time -f '%e s %R page faults' $B/striker >/dev/null 2>/dev/null; } 2>&1 )"
LIMIT=${S44_LIMIT:-420}
F1=${S44_FILTER:-'CudaNvfp4.*:CudaMoe*:CudaBackend*:CudaLinear*:CudaGemv*'}
( timeout $LIMIT $B/test_cuda_kernels --gtest_filter="$F1" > $OUT/kernel_tests_1.txt 2>&1; echo "kernel tests 1 rc=$? at ${SECONDS}s" ) &
[ "${S44_REST:-1}" = 1 ] && ( timeout $LIMIT $B/test_cuda_kernels --gtest_filter="-$F1" > $OUT/kernel_tests_2.txt 2>&1; echo "kernel tests 2 rc=$? at ${SECONDS}s" ) &
( timeout $LIMIT bash scripts/gpu_conformance.sh $B > $OUT/conformance.txt 2>&1; echo "conformance rc=$? at ${SECONDS}s" ) &
wait
for f in $OUT/kernel_tests_*.txt; do
  grep -E "^\[  (PASSED|FAILED) |^\[==========\] [0-9]+ tests|^\[  FAILED" $f | head -20
  echo "OK lines: $(grep -c '^\[       OK' $f); last: $(grep '^\[ RUN' $f | tail -1)"
done
grep -i -m3 'cublas' $OUT/kernel_tests_*.txt $OUT/conformance.txt
tail -14 $OUT/conformance.txt
C=$B/config.json
run() {  # ctx batch [quantization args]
  local ctx=$1 b=$2; shift 2
  r=$(timeout 90 $B/striker bench latency --config $C "$@" --graphs --context $ctx --batch $b --steps 50 --warmup 3 2>&1)
  echo -n " $(echo "$r" | grep -oE '\([0-9.]+ device\)' | grep -oE '[0-9.]+')/$(echo "$r" | grep -oE 'kernels per step: [0-9]+' | grep -oE '[0-9]+$')$(echo "$r" | grep -m1 -i error)"
  [ "$rep" = 1 ] && echo "$r" > "$OUT/bench_${ctx}_${b}_${1:-bf16}${2:-}.txt"
}
for rep in $(seq ${S44_ROUNDS:-2}); do
  for cb in "8192 1" "100000 1" "8192 8"; do set -- $cb
    echo -n "nvfp4 ctx$1 b$2:"; run $1 $2 --quantization nvfp4; echo
    echo -n "bf16 ctx$1 b$2:"; run $1 $2; echo
  done
done
echo "all done at ${SECONDS}s"
