#!/usr/bin/env bash
# Session 41 run 6 (one binary, a temporary switch): the one-token decode router with R = 2 (main), 4 or 8
# expert rows per CTA (STRIKER_AB_ROUTER_ROWS; 128 / 64 / 32 CTAs for 256 experts). bench latency --graphs,
# 50 steps, device ms, three rounds; CudaRouter* tests under each R; ncu of the router kernel under each R.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
C=$B/config.json
run() {  # R ctx batch [quantization args]
  local R=$1 ctx=$2 b=$3; shift 3
  r=$(STRIKER_AB_ROUTER_ROWS=$R timeout 90 $B/striker bench latency --config $C "$@" --graphs --context $ctx --batch $b --steps 50 --warmup 3 2>&1)
  echo -n " [$R] $(echo "$r" | grep -oE '\([0-9.]+ device\)' | grep -oE '[0-9.]+')/$(echo "$r" | grep -oE 'kernels per step: [0-9]+' | grep -oE '[0-9]+$')$(echo "$r" | grep -m1 -i error)"
}
for rep in 1 2 3; do
  for ctx in 8192 100000; do echo -n "nvfp4 ctx$ctx b1:"; for R in 2 4 8; do run $R $ctx 1 --quantization nvfp4; done; echo; done
  echo -n "bf16 ctx8192 b1:"; for R in 2 4 8; do run $R 8192 1; done; echo
done
echo "table done at ${SECONDS}s"
for R in 2 4 8; do
  STRIKER_AB_ROUTER_ROWS=$R timeout 120 $B/test_cuda_kernels --gtest_filter='CudaRouter*' > $OUT/router_tests_$R.txt 2>&1
  echo "router tests R=$R rc=$?: $(grep -E '^\[  (PASSED|FAILED) ' $OUT/router_tests_$R.txt | tr '\n' ' ')"
done
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
M=gpu__time_duration.sum,launch__grid_size,launch__registers_per_thread
for R in 2 4 8; do
  STRIKER_AB_ROUTER_ROWS=$R timeout 60 "$NCU" --clock-control none -k "regex:router_spread" --launch-skip 20 --launch-count 3 \
    --metrics $M $B/striker bench latency --config $C --quantization nvfp4 --context 8192 --batch 1 --steps 1 --warmup 0 \
    > $OUT/ncu_router_$R.txt 2>&1
  echo "ncu R=$R rc=$?: $(grep -E '^\s+(gpu__time|launch__grid|launch__reg)' $OUT/ncu_router_$R.txt | awk '{print $1"="$NF}' | tr '\n' ' ')"
done
echo "all done at ${SECONDS}s"
