#!/usr/bin/env bash
# Prepared in session 18, not run: every decode router CTA selects (router.h's epoch protocol) and requests its share
# of the selected experts' gate and up rows into L2 (STRIKER_AB_PFGU=1), for the gate/up kernel's first loads after
# its wait (the down rows' version, landed in session 18, took the down kernel -0.9 µs per layer).
# Prediction: gate/up -0.5 to -0.9 µs per MoE layer, router unchanged (every CTA waits for all words anyway);
# NVFP4 8K -0.02 to -0.04 ms; BF16 unknown (its 25 MB are the gate/up's own bytes, started ~1 µs earlier).
# STRIKER_AB_PFGU=2 (NVFP4): the router requests the down rows too, instead of the gate/up CTAs (whose prefetch
# issue cost the gate/up +0.57 µs per layer when it landed): prediction a further -0.3 to -0.5 µs per layer.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"; C=$B/config.json
t() { local name=$1 filt=$2 to=$3; shift 3; env "$@" timeout $to $B/test_cuda_kernels --gtest_brief=1 --gtest_filter="$filt" > /tmp/t_$name.log 2>&1;
  echo "tests $name rc=$? $(grep -E '^\[  (FAILED|PASSED) ' /tmp/t_$name.log | head -3 | tr '\n' ' ')"; grep -B2 -A10 Failure /tmp/t_$name.log | head -20; }
t router 'CudaRouter*' 120 X=1
t pfgu 'CudaBackend.*:CudaMoe*' 250 STRIKER_AB_PFGU=1
t pfgu2 'CudaBackend.Nvfp4*' 120 STRIKER_AB_PFGU=2
ms() { timeout 60 env "$@" $B/striker bench latency --config $C --graphs --steps 50 $A 2>&1 | grep -E 'ms/step' | sed -E 's/.*\(([0-9.]+) device.*/\1/'; }
for r in 1 2; do for A in "--context=8192 --quantization nvfp4" "--context=8192" "--context=100000 --quantization nvfp4" "--context=100000" "--context=8192 --quantization nvfp4 --batch 8" "--context=8192 --batch 8"; do
  echo "$A: main $(ms X=1)  pfgu $(ms STRIKER_AB_PFGU=1)  pfgu2 $(ms STRIKER_AB_PFGU=2)"; done; done
for q in nvfp4 bf16; do for E in X=1 STRIKER_AB_PFGU=1; do
Q=""; [ $q = nvfp4 ] && Q="--quantization nvfp4"
env $E CUDA_INJECTION64_PATH="$PWD/$B/libstriker_kernel_trace.so" STRIKER_KERNEL_TRACE=/tmp/tl_${q}_${E%%=*}.csv timeout 40 $B/striker bench latency --config $C --graphs --context=8192 $Q --steps 15 --warmup 3 > /dev/null 2>&1
done
python3 scripts/step_timeline.py /tmp/tl_${q}_X.csv --compare /tmp/tl_${q}_STRIKER_AB_PFGU.csv "$q main vs pfgu" | head -9
done
