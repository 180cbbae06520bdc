#!/usr/bin/env bash
# Prepared in session 32 (no device time left), branch s32-down16 (= main + .gpu_run/s32_down16.patch): which 16-row NVFP4 down kernel wins at 9-64
# tokens now that the fragment kernels decode pairwise (resident-A down -12 % at T = 64 in session 32's run 9, the
# shared-memory tile decode unchanged). STRIKER_AB_DOWN16: 0 main's rule (tile below 384 pairs, resident-A from),
# 1 tile always, 2 fragments (grouped_gemm<16,1,Nvfp4FragmentWeights>, 94 registers, 5 CTAs/SM), 3 fragments wide
# (68 registers), 4 resident-A always. Prediction (docs/performance.md, thirty-second session): fragments beat the
# tile at 16-32 tokens (T = 16 ~42 -> ~36 µs), resident-A's threshold moves down to ~32 tokens. The winner becomes
# the rule; the knob goes. Payload: build the branch (striker, test_cuda_kernels, bench_cuda_kernels), then
# STRIKER_SHIP_SERVER=0 STRIKER_SHIP_SOURCES=0 STRIKER_SHIP_STRIP=all STRIKER_SHIP_TRACE=0 bash scripts/ship_gpu.sh;
# carry .gpuwork, unpack into /tmp/c, run from there. ~4 minutes.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
# The bit-for-bit test orders the BF16 down's inputs by main's rule, so the knob runs take the reference tests only.
for v in 2 3 4; do
  STRIKER_AB_DOWN16=$v timeout 60 $B/test_cuda_kernels \
    --gtest_filter='CudaMoeGroupedNvfp4.*:CudaBackend.Nvfp4Batched*:-CudaMoeGroupedNvfp4.DecodedTilesMatchBf16KernelsBitForBit' \
    > $OUT/tests_$v.txt 2>&1
  echo "down16=$v tests rc=$? $(grep -E '^\[  PASSED|^\[  FAILED' $OUT/tests_$v.txt | tr '\n' ' ')"
done
for v in 0 1 2 3 4; do
  STRIKER_AB_DOWN16=$v timeout 60 $B/bench_cuda_kernels batched-moe 9 16 32 48 64 > $OUT/bm_$v.txt 2>&1
  echo "down16=$v $(grep -E 'nvfp4 moe grouped T=[0-9]+ (down|all)' $OUT/bm_$v.txt | awk -F'|' '{print $2 $3 $4}' | sed 's/nvfp4 moe grouped //; s/all 4 kernels/all/' | tr -s ' ' | paste -sd' ')"
done
C=$B/config.json
for rep in 1 2; do
  for b in 16 32 64; do
    line="b$b:"
    for v in 0 1 2 3 4; do
      r=$(STRIKER_AB_DOWN16=$v timeout 40 $B/striker bench latency --config $C --quantization nvfp4 --graphs --context 1024 --batch $b --steps 20 --warmup 3 2>&1)
      line="$line d$v $(echo "$r" | grep -oE '\([0-9.]+ device\)' | grep -oE '[0-9.]+')$(echo "$r" | grep -m1 -i error)"
    done
    echo "$line"
  done
done
echo "all done at ${SECONDS}s"
