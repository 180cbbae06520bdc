#!/usr/bin/env bash
# Prepared in session 31 (no device time left): the A/B of .gpu_run/s31_dense_tiled.patch — NVFP4 projections of
# 9-64 tokens on the grouped kernels' tiles instead of dequantise + cuBLASLt (branch s31-dense-tiled; the switch
# STRIKER_AB_DENSE_TILED=0 is the old path, in the patch only for this measurement: delete it before merging).
# Prediction (docs/performance.md, thirty-first session): NVFP4 steps at 1K context, 16 sequences 12.2 -> ~9-10 ms,
# 64 sequences 20.0 -> ~17-18 ms on the H100; falsified if either gains < 1 ms. BF16 64 sequences: unchanged.
# Payload: build main + the patch (striker, test_cuda_kernels, bench_cuda_kernels), then STRIKER_SHIP_SERVER=0
# STRIKER_SHIP_SOURCES=0 STRIKER_SHIP_TRACE=0 STRIKER_SHIP_STRIP=all bash scripts/ship_gpu.sh; carry .gpuwork,
# unpack into /tmp/c, run from there. ~4 minutes.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 120 $B/test_cuda_kernels --gtest_filter='CudaNvfp4.*:CudaBackend.Nvfp4*:CudaMoeGroupedNvfp4.*' > $OUT/tests.txt 2>&1
echo "tests rc=$? at ${SECONDS}s"; grep -E "^\[  (PASSED|FAILED) |^\[==========\] [0-9]+ tests|^\[  FAILED" $OUT/tests.txt | head
for v in 1 0; do
  echo "== bench rows, STRIKER_AB_DENSE_TILED=$v"
  STRIKER_AB_DENSE_TILED=$v timeout 60 $B/bench_cuda_kernels batched-moe 16 64 2>&1 | grep -E "nvfp4 gemm|failed" | cut -c1-100
done
C=$B/config.json
for rep in 1 2; do
  for v in 1 0; do
    for b in 9 16 32 64; do
      r=$(STRIKER_AB_DENSE_TILED=$v timeout 60 $B/striker bench latency --config $C --quantization nvfp4 --graphs --context 1024 --batch $b --steps 30 --warmup 3 2>&1)
      echo "tiled=$v nvfp4 b$b: $(echo "$r" | grep -oE 'median [0-9.]+ wall \([0-9.]+ device\)')$(echo "$r" | grep -m1 -i error)"
    done
  done
done
r=$(timeout 60 $B/striker bench latency --config $C --graphs --context 1024 --batch 64 --steps 30 --warmup 3 2>&1)
echo "bf16 b64 (control): $(echo "$r" | grep -oE 'median [0-9.]+ wall \([0-9.]+ device\)')"
echo "all done at ${SECONDS}s"
