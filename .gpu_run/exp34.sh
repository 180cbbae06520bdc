#!/usr/bin/env bash
# Session 19: the 2-8 token MoE kernels held to 5 CTAs per SM (STRIKER_AB_OCC=5: BF16 gate/up and down slots
# 48 registers, NVFP4 down slots 96; small spills) against main's (OCC=0, SASS-identical to main).
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"; C=$B/config.json
STRIKER_AB_OCC=5 timeout 90 $B/test_cuda_kernels --gtest_brief=1 --gtest_filter='CudaMoe.DecodeSteps*:CudaNvfp4.SelectedExpertsMoeOfTTokens*:CudaMoeGroupedNvfp4.DecodeSteps*' > /tmp/t.log 2>&1
rc=$?; echo "tests OCC=5 rc=$rc $(grep -E '^\[  (FAILED|PASSED) ' /tmp/t.log | sort -u | head -8 | tr '\n' ' ') at ${SECONDS}s"; grep -B2 -A8 Failure /tmp/t.log | head -20
ms() { timeout 25 env "$@" $B/striker bench latency --config $C --graphs --steps 50 $A 2>&1 | grep -E 'ms/step' | sed -E 's/.*\(([0-9.]+) device.*/\1/'; }
for r in 1 2; do for A in "--context=8192 --quantization nvfp4 --batch 8" "--context=8192 --batch 8" "--context=8192 --quantization nvfp4 --batch 4" "--context=8192 --batch 4" "--context=8192 --batch 2"; do
  echo "$A: main $(ms STRIKER_AB_OCC=0)  occ5 $(ms STRIKER_AB_OCC=5)"; done; done
echo "A/B done at ${SECONDS}s"
for q in nvfp4 bf16; do for E in STRIKER_AB_OCC=0 STRIKER_AB_OCC=5; do
Q=""; [ $q = nvfp4 ] && Q="--quantization nvfp4"
env $E CUDA_INJECTION64_PATH="$PWD/$B/libstriker_kernel_trace.so" STRIKER_KERNEL_TRACE=$OUT/tl_${q}_b8_${E##*=}.csv timeout 30 $B/striker bench latency --config $C --graphs --context=8192 --batch 8 $Q --steps 15 --warmup 3 > /dev/null 2>&1
done; done
echo "all done at ${SECONDS}s"
