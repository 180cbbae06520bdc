#!/usr/bin/env bash
# Session 33 (A/B; prepared, not run: git apply .gpu_run/s33_front.patch on main): the attention front inside the split kernel for decode steps of one token
# per sequence (2-64 sequences; one-token steps had it since session 14). STRIKER_AB_FRONT_OFF=1: the front
# kernel first, as before. Tests: the attention and backend GPU tests, then the steps.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 170 $B/test_cuda_kernels --gtest_filter='CudaAttention.*:CudaQkRopeKv.*:CudaBackend.*' > $OUT/tests.txt 2>&1
echo "tests rc=$? at ${SECONDS}s $(grep -E '^\[  PASSED|^\[  FAILED' $OUT/tests.txt | tr '\n' ' ')"; grep -E '^\[  FAILED' $OUT/tests.txt | head
C=$B/config.json
for rep in 1 2; do
  [ $rep = 2 ] && [ $SECONDS -gt 330 ] && break
  for cb in "bf16 8192 8" "nvfp4 8192 8" "nvfp4 8192 4" "nvfp4 8192 2" "nvfp4 1024 16" "nvfp4 1024 64" "nvfp4 8192 1"; do
    set -- $cb; q=""; [ $1 = nvfp4 ] && q="--quantization nvfp4"
    line="$1 ctx$2 b$3:"
    for v in off on; do
      if [ $v = off ]; then export STRIKER_AB_FRONT_OFF=1; else unset STRIKER_AB_FRONT_OFF; fi
      r=$(timeout 40 $B/striker bench latency --config $C $q --graphs --context $2 --batch $3 --steps 30 --warmup 3 2>&1)
      line="$line $v $(echo "$r" | grep -oE '\([0-9.]+ device\)' | grep -oE '[0-9.]+')/$(echo "$r" | grep -oE 'kernels per step: [0-9]+' | grep -oE '[0-9]+')$(echo "$r" | grep -m1 -i error)"
    done
    unset STRIKER_AB_FRONT_OFF
    echo "$line"
  done
done
echo "all done at ${SECONDS}s"
