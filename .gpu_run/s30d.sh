#!/usr/bin/env bash
# Session 30 run 4 (not run: no device time left; payload = main + .gpu_run/s30_regs.patch): NVFP4 16-row tiles on register fragments, 64-row
# tiles on the shared-memory tile decode (each the faster in runs 2-3). The grouped NVFP4 tests (bit for bit against
# the BF16 kernels at both heights) and the NVFP4 forward tests, then batched-moe at T = 64 (16-row) and 700 (64-row):
# expected ~regs' and ~ar's rows of run 3, but the 16-row down on grouped_down_resident_a_kernel (predicted T = 64
# 91 -> ~50-55 us on the H100). Then, if time is left (S30D_LIMIT, default 300 s), the issue-11 table
# (bench latency --graphs, 50 steps: BF16 / NVFP4 at 8K and 100K, batch 8 at 8K; steps of <= 8 tokens do not use the
# patched kernels) — its last H200 numbers are session 25's.
# Payload: build main + the patch (striker, test_cuda_kernels, bench_cuda_kernels), then STRIKER_SHIP_SERVER=0 STRIKER_SHIP_SOURCES=0
# STRIKER_SHIP_TRACE=0 STRIKER_SHIP_STRIP=all bash scripts/ship_gpu.sh; on the device: tar xJf .gpuwork/payload.tar.xz -C /tmp/c && bash .gpu_run/s30d.sh
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 70 $B/test_cuda_kernels --gtest_filter='CudaMoeGroupedNvfp4.*:CudaBackend.Nvfp4BatchedSteps*' > $OUT/tests.txt 2>&1
echo "tests rc=$? at ${SECONDS}s"; grep -E "^\[  (PASSED|FAILED) |^\[==========\] [0-9]+ tests|Failure|FAILED|^\[       OK" $OUT/tests.txt | head -20
timeout 30 $B/bench_cuda_kernels batched-moe 64 700 2>&1 | grep -E "nvfp4 moe grouped T=[0-9]+ (gate|down|all)|failed" | cut -c1-100
LIMIT=${S30D_LIMIT:-300}
C=$B/config.json
for q in "" "--quantization nvfp4"; do
  for cb in "8192 1" "100000 1" "8192 8"; do
    set -- $cb
    [ $SECONDS -gt $(( LIMIT - 40 )) ] && break 2
    r=$(timeout 60 $B/striker bench latency --config $C $q --graphs --context $1 --batch $2 --steps 50 --warmup 3 2>&1)
    echo "${q:-bf16} ctx$1 b$2: $(echo "$r" | grep -oE 'median [0-9.]+ wall \([0-9.]+ device\)') | $(echo "$r" | grep -oE '[0-9.]+% of the 4.6') | $(echo "$r" | grep -oE 'kernels per step: [0-9]+')$(echo "$r" | grep -m1 -i error)"
  done
done
echo "all done at ${SECONDS}s"
