#!/usr/bin/env bash
# Session 31 run 3 (payload: main at the resident-A threshold commit):
# the grouped NVFP4 tests (bit for bit against the BF16 kernels: 16-row down now on the shared-tile kernel
# at T = 9 and on resident-A at T = 64 and 300), the NVFP4 forward tests, then batched-moe at T = 16 / 64 / 700
# (expected: T = 16 down ~40 us, T = 64 ~82 us as run 2's variants) and the 64-sequence NVFP4 step.
# Kernel payload: STRIKER_SHIP_SERVER=0 STRIKER_SHIP_SOURCES=0 STRIKER_SHIP_TRACE=0 STRIKER_SHIP_STRIP=all bash scripts/ship_gpu.sh;
# carry .gpuwork, unpack into /tmp/c, run from there.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 90 $B/test_cuda_kernels --gtest_filter='CudaMoeGrouped*:CudaMoe*:CudaBackend.Nvfp4*' > $OUT/tests.txt 2>&1
echo "tests rc=$? at ${SECONDS}s"; grep -E "^\[  (PASSED|FAILED) |^\[==========\] [0-9]+ tests|Failure|FAILED" $OUT/tests.txt | head -20
timeout 40 $B/bench_cuda_kernels batched-moe 16 64 700 2>&1 | grep -E "nvfp4 moe grouped T=[0-9]+ (gate|down|all)|failed" | cut -c1-100
for b in 16 64; do
  r=$(timeout 60 $B/striker bench latency --config $B/config.json --quantization nvfp4 --graphs --context 1024 --batch $b --steps 50 --warmup 3 2>&1)
  echo "nvfp4 ctx1024 b$b: $(echo "$r" | grep -oE 'median [0-9.]+ wall \([0-9.]+ device\)')$(echo "$r" | grep -m1 -i error)"
done
echo "all done at ${SECONDS}s"
