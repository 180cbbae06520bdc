#!/usr/bin/env bash
# Session 20: the NVFP4 decode's top-K selected in the MoE gate/up kernel (STRIKER_AB_SEL2=1: the router writes
# plain logits and exits; every routed gate/up CTA ranks its token's logits over its 8 warps) against main's router
# tail (flagged words, CTA 0 polls, selects, stores). Old arms SASS-identical to main.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"; C=$B/config.json
STRIKER_AB_SEL2=1 timeout 200 $B/test_cuda_kernels --gtest_brief=1 --gtest_filter='CudaBackend.Nvfp4*' > /tmp/t.log 2>&1
echo "tests SEL2 rc=$? $(grep -E '^\[  (FAILED|PASSED) ' /tmp/t.log | sort -u | head -4 | tr '\n' ' ') at ${SECONDS}s"; grep -B2 -A8 Failure /tmp/t.log | head -20
ms() { timeout 30 env "$@" $B/striker bench latency --config $C --graphs --steps 50 $A 2>&1 | grep -E 'ms/step' | sed -E 's/.*\(([0-9.]+) device.*/\1/'; }
for r in 1 2; do for A in "--context=8192 --quantization nvfp4" "--context=100000 --quantization nvfp4" "--context=8192 --quantization nvfp4 --batch 8" "--context=8192 --quantization nvfp4 --batch 2" "--context=8192"; do
  echo "$A: main $(ms X=1)  sel2 $(ms STRIKER_AB_SEL2=1)"; done; done
for E in X=1 STRIKER_AB_SEL2=1; do
  for b in 1 8; do
  env $E CUDA_INJECTION64_PATH="$PWD/$B/libstriker_kernel_trace.so" STRIKER_KERNEL_TRACE=/tmp/tl_${E%%=*}_$b.csv timeout 30 $B/striker bench latency --config $C --graphs --context=8192 --quantization nvfp4 --batch $b --steps 15 --warmup 3 > /dev/null 2>&1
  done
done
for b in 1 8; do python3 scripts/step_timeline.py /tmp/tl_X_$b.csv --compare /tmp/tl_STRIKER_AB_SEL2_$b.csv "nvfp4 8K batch $b: main vs sel2" 2>/dev/null | head -9; done
echo "all done at ${SECONDS}s"
