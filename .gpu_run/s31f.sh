#!/usr/bin/env bash
# Prepared in session 31 (no device time left): NVFP4 dense projections of 9-64 tokens on the skinny MMA
# kernels (groups of 8 tokens in grid.y) instead of dequantise + cuBLASLt — branch s31-skinny, as
# .gpu_run/s31_skinny.patch on main. The knob STRIKER_AB_NVFP4_SKINNY (8 = today's rule, up to 64) exists in
# the patch only for this A/B: the winner becomes a constant and the knob goes. Prediction (docs/performance.md,
# thirty-first session): at 16 sequences the skinny rule wins by ~0.5-1.5 ms per step (no 2.97 GB of bf16
# scratch written and read; the LM head read twice instead of dequantised), less at 32, and at 64 the LM head's
# 8 reads of 175 MB (it does not fit L2) eat the gain. Falsified if 16 sequences gain < 0.3 ms.
# Payload: build main + the patch (striker, test_cuda_kernels), then STRIKER_SHIP_SERVER=0 STRIKER_SHIP_SOURCES=0
# STRIKER_SHIP_TRACE=0 STRIKER_SHIP_STRIP=all bash scripts/ship_gpu.sh; carry .gpuwork, unpack into /tmp/c, run
# from there. ~4 minutes.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 60 $B/test_cuda_kernels --gtest_filter='CudaNvfp4.*' > $OUT/tests.txt 2>&1
echo "kernel tests rc=$?"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED" $OUT/tests.txt | head
STRIKER_AB_NVFP4_SKINNY=64 timeout 60 $B/test_cuda_kernels --gtest_filter='CudaBackend.Nvfp4*' > $OUT/tests64.txt 2>&1
echo "backend tests with the knob at 64 rc=$?"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED" $OUT/tests64.txt | head
C=$B/config.json
for rep in 1 2; do
  for b in 9 16 32 64; do
    for v in 8 64; do  # 8: dequantise + cuBLASLt above 8 tokens (main); 64: the skinny kernels up to 64
      r=$(STRIKER_AB_NVFP4_SKINNY=$v timeout 60 $B/striker bench latency --config $C --quantization nvfp4 --graphs --context 1024 --batch $b --steps 30 --warmup 3 2>&1)
      echo "skinny<=$v nvfp4 b$b: $(echo "$r" | grep -oE 'median [0-9.]+ wall \([0-9.]+ device\)')$(echo "$r" | grep -m1 -i error)"
    done
  done
done
echo "all done at ${SECONDS}s"
