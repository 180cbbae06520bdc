#!/usr/bin/env bash
# Session 32 run 5 (kernel payload of main after the two merges): every GPU kernel test, then the batched NVFP4
# steps the merges changed (1K context, 9-64 sequences) and the issue-11 NVFP4 rows as controls.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 330 $B/test_cuda_kernels > $OUT/tests.txt 2>&1
echo "test_cuda_kernels rc=$? $(grep -E '^\[  PASSED|^\[  FAILED' $OUT/tests.txt | tr '\n' ' ') at ${SECONDS}s"
grep -E '^\[  FAILED' $OUT/tests.txt | head
C=$B/config.json
for cb in "1024 9" "1024 16" "1024 32" "1024 64" "8192 1" "8192 8"; do
  set -- $cb
  r=$(timeout 60 $B/striker bench latency --config $C --quantization nvfp4 --graphs --context $1 --batch $2 --steps 30 --warmup 3 2>&1)
  echo "nvfp4 ctx$1 b$2: $(echo "$r" | grep -oE 'median [0-9.]+ wall \([0-9.]+ device\)') | $(echo "$r" | grep -oE '[0-9.]+% of the 4.6') | $(echo "$r" | grep -oE 'kernels per step: [0-9]+')$(echo "$r" | grep -m1 -i error)"
done
echo "all done at ${SECONDS}s"
