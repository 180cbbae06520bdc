#!/usr/bin/env bash
# Prepared in session 19, not run: (1) .gpu_run/exp35.sh (blocks of 32-128: tests, then the step per block size);
# (2) the 2-8 token NVFP4 gate/up with 4 output rows per warp (STRIKER_AB_GU=41: 1 CTA per SM, 244 registers;
# 42: 2 CTAs per SM, 128 registers + 224 B of spills) against main's two-row kernel (SASS-identical old arm).
# Prediction: the batch-8 gate/up is issue-bound (ncu 0.66) and ~half of a warp's instructions do not scale with
# its rows, so 41 takes ~20 % fewer instructions per weight: gate/up 35 -> ~29 µs per layer, NVFP4 batch 8
# -0.2 to -0.3 ms — unless 2 warps per scheduler cannot keep the issue rate (then a loss). 42: a loss (spills).
set -uo pipefail
cd "$(dirname "$0")/.."
bash .gpu_run/exp35.sh
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"; C=$B/config.json
for gu in 41 42; do
  STRIKER_AB_GU=$gu timeout 90 $B/test_cuda_kernels --gtest_brief=1 --gtest_filter='CudaNvfp4.SelectedExperts*:CudaMoeGroupedNvfp4.DecodeSteps*' > /tmp/t.log 2>&1
  echo "tests GU=$gu rc=$? $(grep -E '^\[  (FAILED|PASSED) ' /tmp/t.log | sort -u | head -4 | tr '\n' ' ')"; grep -B2 -A8 Failure /tmp/t.log | head -12
done
ms() { timeout 20 env "$@" $B/striker bench latency --config $C --graphs --steps 50 $A 2>&1 | grep -E 'ms/step' | sed -E 's/.*\(([0-9.]+) device.*/\1/'; }
for r in 1 2; do for A in "--context=8192 --quantization nvfp4 --batch 8" "--context=8192 --quantization nvfp4 --batch 4" "--context=8192 --quantization nvfp4 --batch 2" "--context=8192 --quantization nvfp4"; do
  echo "$A: main $(ms STRIKER_AB_GU=0)  gu41 $(ms STRIKER_AB_GU=41)  gu42 $(ms STRIKER_AB_GU=42)"; done; done
for E in STRIKER_AB_GU=0 STRIKER_AB_GU=41; do
  env $E CUDA_INJECTION64_PATH="$PWD/$B/libstriker_kernel_trace.so" STRIKER_KERNEL_TRACE=/tmp/tl_${E##*=}.csv timeout 30 $B/striker bench latency --config $C --graphs --context=8192 --batch 8 --quantization nvfp4 --steps 15 --warmup 3 > /dev/null 2>&1
done
python3 scripts/step_timeline.py /tmp/tl_0.csv --compare /tmp/tl_41.csv "nvfp4 b8 main vs 4 rows per warp" 2>/dev/null | head -8
echo "all done at ${SECONDS}s"
