#!/usr/bin/env bash
# Session 36 run 2 (kernel payload + .gpuwork/striker_main.xz, session 35's main, for the baseline): the shared
# expert of 3..64 NVFP4 per-slot tokens as skinny tiles in the first grid rows, NVFP4 per slot up to 28 tokens.
# Every GPU kernel test beside scripts/gpu_conformance.sh, then main vs this at 2-4 and 24-32 sequences (the
# 2 -> 3 threshold and the 28 crossover) and the issue-11 cases.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
xz -dc "${MAIN_XZ:-.gpuwork/striker_main.xz}" > $B/striker_main && chmod +x $B/striker_main
LIMIT=${S36B_LIMIT:-420}
( timeout $LIMIT $B/test_cuda_kernels > $OUT/kernel_tests.txt 2>&1; echo "kernel tests rc=$? at ${SECONDS}s" ) &
( timeout $LIMIT bash scripts/gpu_conformance.sh $B > $OUT/conformance.txt 2>&1; echo "conformance rc=$? at ${SECONDS}s" ) &
wait
grep -E "^\[  (PASSED|FAILED) |^\[==========\] [0-9]+ tests|^\[  FAILED" $OUT/kernel_tests.txt | head -20
grep -c "^\[       OK" $OUT/kernel_tests.txt; grep "^\[ RUN" $OUT/kernel_tests.txt | tail -1
tail -14 $OUT/conformance.txt
C=$B/config.json
step() {  # step BINARY FORMAT CONTEXT BATCH STEPS -> device ms/kernels
  local q=""; [ $2 = nvfp4 ] && q="--quantization nvfp4"
  local r; r=$(timeout 60 $B/$1 bench latency --config $C $q --graphs --context $3 --batch $4 --steps $5 --warmup 3 2>&1)
  echo "$(echo "$r" | grep -oE '\([0-9.]+ device\)' | grep -oE '[0-9.]+')/$(echo "$r" | grep -oE 'kernels per step: [0-9]+' | grep -oE '[0-9]+')$(echo "$r" | grep -m1 -i error)"
}
for rep in 1 2; do
  for b in 2 3 4 24 28 29 32; do echo "nvfp4 ctx1024 b$b: main $(step striker_main nvfp4 1024 $b 20) new $(step striker nvfp4 1024 $b 20)"; done
done
for f in bf16 nvfp4; do for cb in "8192 1" "100000 1" "8192 8"; do set -- $cb
  echo "issue11 $f ctx$1 b$2: main $(step striker_main $f $1 $2 50) new $(step striker $f $1 $2 50)"
done; done
echo "all done at ${SECONDS}s"
