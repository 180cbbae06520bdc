#!/usr/bin/env bash
# Session 18 run 2: the top-K selection by ranks over the selecting CTA's 8 warps (STRIKER_AB_SELCTA=1) and the
# decode gate/up kernels requesting the selected experts' down rows into L2 (STRIKER_AB_PFDOWN=1), one binary
# against main's code.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"; C=$B/config.json
t() { local name=$1 filt=$2; shift 2; env "$@" timeout 170 $B/test_cuda_kernels --gtest_brief=1 --gtest_filter="$filt" > /tmp/t_$name.log 2>&1;
  echo "tests $name rc=$? $(grep -E '^\[  (FAILED|PASSED) ' /tmp/t_$name.log | head -3 | tr '\n' ' ')"; grep -B2 -A10 Failure /tmp/t_$name.log | head -20; }
t selcta 'CudaRouter*:CudaBackend.ForwardMatches*:CudaBackend.Nvfp4ForwardMatches*' STRIKER_AB_SELCTA=1
t pfdown 'CudaMoe*:CudaNvfp4.*:CudaBackend.*' STRIKER_AB_PFDOWN=1
ms() { timeout 60 env "$@" $B/striker bench latency --config $C --graphs --steps 50 $A 2>&1 | grep -E 'ms/step' | sed -E 's/.*\(([0-9.]+) device.*/\1/'; }
for r in 1 2; do for A in "--context=8192 --quantization nvfp4" "--context=8192" "--context=100000 --quantization nvfp4"; do
  echo "$A: main $(ms X=1)  selcta $(ms STRIKER_AB_SELCTA=1)  pfdown $(ms STRIKER_AB_PFDOWN=1)  both $(ms STRIKER_AB_SELCTA=1 STRIKER_AB_PFDOWN=1)"; done
  for A in "--context=8192 --quantization nvfp4 --batch 8" "--context=8192 --batch 8"; do
  echo "$A: main $(ms X=1)  selcta $(ms STRIKER_AB_SELCTA=1)  pfdown $(ms STRIKER_AB_PFDOWN=1)"; done; done
for q in nvfp4 bf16; do for E in X=1 STRIKER_AB_SELCTA=1 STRIKER_AB_PFDOWN=1; do
Q=""; [ $q = nvfp4 ] && Q="--quantization nvfp4"
env $E CUDA_INJECTION64_PATH="$PWD/$B/libstriker_kernel_trace.so" STRIKER_KERNEL_TRACE=/tmp/tl_${q}_${E%%=*}.csv timeout 40 $B/striker bench latency --config $C --graphs --context=8192 $Q --steps 15 --warmup 3 > /dev/null 2>&1
done
python3 scripts/step_timeline.py /tmp/tl_${q}_X.csv --compare /tmp/tl_${q}_STRIKER_AB_SELCTA.csv "$q main vs selcta" | head -9
python3 scripts/step_timeline.py /tmp/tl_${q}_X.csv --compare /tmp/tl_${q}_STRIKER_AB_PFDOWN.csv "$q main vs pfdown" | head -9
done
