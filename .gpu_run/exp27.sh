#!/usr/bin/env bash
# Session 18 run 3: the landed router selection and NVFP4 down-row prefetch (tests), and two more L2 prefetches
# of static weights by CTAs that sit waiting anyway: the one-query combine's CTAs request this layer's o_proj
# weights (STRIKER_AB_PFOP=1), the one-token NVFP4 down kernel's CTAs the next layer's QKV (STRIKER_AB_PFQKV=1).
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"; C=$B/config.json
t() { local name=$1 filt=$2 to=$3; shift 3; env "$@" timeout $to $B/test_cuda_kernels --gtest_brief=1 --gtest_filter="$filt" > /tmp/t_$name.log 2>&1;
  echo "tests $name rc=$? $(grep -E '^\[  (FAILED|PASSED) ' /tmp/t_$name.log | head -3 | tr '\n' ' ')"; grep -B2 -A10 Failure /tmp/t_$name.log | head -20; }
t landed 'CudaRouter*:CudaNvfp4.*:CudaMoe*:CudaBackend.*' 290 X=1
t pf 'CudaBackend.Nvfp4*:CudaBackend.ForwardMatches*' 120 STRIKER_AB_PFOP=1 STRIKER_AB_PFQKV=1
ms() { timeout 60 env "$@" $B/striker bench latency --config $C --graphs --steps 50 $A 2>&1 | grep -E 'ms/step' | sed -E 's/.*\(([0-9.]+) device.*/\1/'; }
for r in 1 2; do for A in "--context=8192 --quantization nvfp4" "--context=100000 --quantization nvfp4"; do
  echo "$A: landed $(ms X=1)  pfop $(ms STRIKER_AB_PFOP=1)  pfqkv $(ms STRIKER_AB_PFQKV=1)  both $(ms STRIKER_AB_PFOP=1 STRIKER_AB_PFQKV=1)"; done
  for A in "--context=8192" "--context=100000"; do echo "$A: landed $(ms X=1)  pfop $(ms STRIKER_AB_PFOP=1)"; done
  for A in "--context=8192 --quantization nvfp4 --batch 8" "--context=8192 --batch 8"; do echo "$A: landed $(ms X=1)"; done; done
for q in nvfp4 bf16; do for E in X=1 STRIKER_AB_PFOP=1 STRIKER_AB_PFQKV=1; do
Q=""; [ $q = nvfp4 ] && Q="--quantization nvfp4"
env $E CUDA_INJECTION64_PATH="$PWD/$B/libstriker_kernel_trace.so" STRIKER_KERNEL_TRACE=/tmp/tl_${q}_${E%%=*}.csv timeout 40 $B/striker bench latency --config $C --graphs --context=8192 $Q --steps 15 --warmup 3 > /dev/null 2>&1
done
python3 scripts/step_timeline.py /tmp/tl_${q}_X.csv --compare /tmp/tl_${q}_STRIKER_AB_PFOP.csv "$q landed vs pfop" | head -9
[ $q = nvfp4 ] && python3 scripts/step_timeline.py /tmp/tl_${q}_X.csv --compare /tmp/tl_${q}_STRIKER_AB_PFQKV.csv "$q landed vs pfqkv" | head -9
done
