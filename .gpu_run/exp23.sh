#!/usr/bin/env bash
# Prepared in session 16, not run: the one-token NVFP4 MoE down in the old half-warp kernel's shape (256
# threads, 80 registers, 2 rows per warp) with the sums on the diagonal MMA (STRIKER_AB_DNHW=1) against the
# landed one-warp-per-expert kernel (224 threads, 126 registers), one binary. Question: the next layer's
# attention lost ~1.1 us per layer with the landed kernel (co-residency?); prediction: NVFP4 8K -0.03 to
# -0.05 ms if that was the cause. (With the knob, T-token steps lose one-token bits: that test is left out.)
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"; C=$B/config.json
STRIKER_AB_DNHW=1 timeout 100 $B/test_cuda_kernels --gtest_brief=1 --gtest_filter='CudaNvfp4.*:CudaBackend.Nvfp4Forward*:-CudaNvfp4.SelectedExpertsMoeOfTTokens*' > /tmp/t1.log 2>&1; echo "tests half-warp mma rc=$? $(grep -E '^\[  (FAILED|PASSED) ' /tmp/t1.log | head -3 | tr '\n' ' ')"; grep -B2 -A10 Failure /tmp/t1.log | head -20
ms() { timeout 90 env "$@" $B/striker bench latency --config $C --graphs --steps 50 $A 2>&1 | grep -E 'ms/step' | sed -E 's/.*\(([0-9.]+) device.*/\1/'; }
for r in 1 2; do for a in "--context=8192" "--context=100000"; do
  A="$a --quantization nvfp4"; echo "nvfp4 $a landed: $(ms X=1)  half-warp mma: $(ms STRIKER_AB_DNHW=1)"
done; done
for E in X=1 STRIKER_AB_DNHW=1; do
env $E CUDA_INJECTION64_PATH="$PWD/$B/libstriker_kernel_trace.so" STRIKER_KERNEL_TRACE=/tmp/tl_${E%%=*}.csv timeout 40 $B/striker bench latency --config $C --graphs --context=8192 --quantization nvfp4 --steps 15 --warmup 3 > /dev/null 2>&1
done
python3 scripts/step_timeline.py /tmp/tl_X.csv --compare /tmp/tl_STRIKER_AB_DNHW.csv "landed down vs half-warp mma down" | head -14
