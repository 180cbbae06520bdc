#!/usr/bin/env bash
# Session 41 run 3 (one binary, a temporary switch): BF16 one-token sliding layers with
# STRIKER_AB_BF16_SLIDING = -1 (main's two launches, 9 splits + the wide combine), 0 (the cluster kernel,
# 9 splits), 5 / 7 (the cluster kernel at 5 / 7 splits). bench latency --graphs, 50 steps, device ms /
# kernels per step, three rounds; then the server suites on --device cuda (scripts/gpu_server_tests.sh).
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
C=$B/config.json
run() {  # ab ctx batch [quantization args]
  local ab=$1 ctx=$2 b=$3; shift 3
  r=$(STRIKER_AB_BF16_SLIDING=$ab timeout 90 $B/striker bench latency --config $C "$@" --graphs --context $ctx --batch $b --steps 50 --warmup 3 2>&1)
  echo -n " [$ab] $(echo "$r" | grep -oE '\([0-9.]+ device\)' | grep -oE '[0-9.]+')/$(echo "$r" | grep -oE 'kernels per step: [0-9]+' | grep -oE '[0-9]+$')$(echo "$r" | grep -m1 -i error)"
}
for rep in 1 2 3; do
  for ctx in 8192 100000 1024; do
    echo -n "bf16 ctx$ctx b1:"; for ab in -1 0 5 7; do run $ab $ctx 1; done; echo
  done
done
echo "table done at ${SECONDS}s"
bash scripts/gpu_server_tests.sh $B
echo "all done at ${SECONDS}s"
