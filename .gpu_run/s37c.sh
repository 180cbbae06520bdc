#!/usr/bin/env bash
# Session 37 run 3 (kernel payload + .gpuwork/striker_main.xz = main 05f987c): the multiply-form E2M1 pair decode in
# the per-slot MoE, skinny and grouped mma.sync kernels, the shift form kept in the one-token GEMVs (their SASS is
# main's). Every GPU kernel test (or those S37C_FILTER names) beside scripts/gpu_conformance.sh, then main vs new.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
xz -dc .gpuwork/striker_main.xz > $B/striker_main && chmod +x $B/striker_main
( timeout 380 $B/test_cuda_kernels --gtest_filter="${S37C_FILTER:-*}" > $OUT/kernel_tests.txt 2>&1; echo "kernel tests rc=$? at ${SECONDS}s" ) &
[ -z "${S37C_NO_CONF:-}" ] && ( OUT=/tmp/conf timeout 380 bash scripts/gpu_conformance.sh $B > $OUT/conformance.txt 2>&1; echo "conformance rc=$? at ${SECONDS}s" ) &
wait
grep -E "^\[  (PASSED|FAILED) |^\[==========\] [0-9]+ tests|^\[  FAILED" $OUT/kernel_tests.txt | head -20
grep "^\[ RUN" $OUT/kernel_tests.txt | tail -1
[ -f $OUT/conformance.txt ] && tail -14 $OUT/conformance.txt
C=$B/config.json
step() {  # step BINARY FORMAT CONTEXT BATCH STEPS -> device ms/kernels
  local q=""; [ $2 = nvfp4 ] && q="--quantization nvfp4"
  local r; r=$(timeout 60 $B/$1 bench latency --config $C $q --graphs --context $3 --batch $4 --steps $5 --warmup 3 2>&1)
  echo "$(echo "$r" | grep -oE '\([0-9.]+ device\)' | grep -oE '[0-9.]+')/$(echo "$r" | grep -oE 'kernels per step: [0-9]+' | grep -oE '[0-9]+')$(echo "$r" | grep -oE 'at [0-9.]+% of it' | sed 's/at / card /;s/ of it//')$(echo "$r" | grep -m1 -i error)"
}
for rep in 1 2; do
  cases='"8192 1" "100000 1" "8192 8" "1024 4" "1024 16" "1024 28" "1024 32" "1024 64"'
  [ $rep = 2 ] && cases='"8192 1" "8192 8" "1024 16" "1024 32"'
  eval "set -- $cases"; for cb in "$@"; do set -- $cb
    [ $SECONDS -gt 570 ] && break
    echo "nvfp4 ctx$1 b$2: main $(step striker_main nvfp4 $1 $2 50) new $(step striker nvfp4 $1 $2 50)"
  done
done
$B/striker bench latency --config $C --quantization nvfp4 --graphs --context 8192 --batch 8 --steps 20 --warmup 3 2>&1 | grep -E "bytes/step|achieved|DRAM peak|routing"
echo "all done at ${SECONDS}s"
