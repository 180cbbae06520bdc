#!/usr/bin/env bash
# Session 18 run 1: the router tests of the landed sigmoids (never run on a GPU), the prepared ballot rounds
# (STRIKER_AB_BALLOT=1) and the NVFP4 one-token GEMVs' first chunk decoded before the wait (STRIKER_AB_PREDEC=1),
# one binary against main's code. Run with: cp .gpuwork/select_probe /tmp/ && ... bash .gpu_run/exp25.sh
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"; C=$B/config.json
t() { local name=$1 filt=$2; shift 2; env "$@" timeout 150 $B/test_cuda_kernels --gtest_brief=1 --gtest_filter="$filt" > /tmp/t_$name.log 2>&1;
  echo "tests $name rc=$? $(grep -E '^\[  (FAILED|PASSED) ' /tmp/t_$name.log | head -3 | tr '\n' ' ')"; grep -B2 -A10 Failure /tmp/t_$name.log | head -20; }
/tmp/select_probe 2>&1 | tail -4
t router 'CudaRouter*' X=1
t ballot 'CudaRouter*:CudaBackend.ForwardMatches*:CudaBackend.Nvfp4ForwardMatches*' STRIKER_AB_BALLOT=1
t predec 'CudaNvfp4.*:CudaBackend.Nvfp4*:CudaGemv*' STRIKER_AB_PREDEC=1
ms() { timeout 60 env "$@" $B/striker bench latency --config $C --graphs --steps 50 $A 2>&1 | grep -E 'ms/step' | sed -E 's/.*\(([0-9.]+) device.*/\1/'; }
for r in 1 2; do for A in "--context=8192 --quantization nvfp4" "--context=100000 --quantization nvfp4"; do
  echo "$A: main $(ms X=1)  ballot $(ms STRIKER_AB_BALLOT=1)  predec $(ms STRIKER_AB_PREDEC=1)  both $(ms STRIKER_AB_BALLOT=1 STRIKER_AB_PREDEC=1)"; done
  A="--context=8192"; echo "$A: main $(ms X=1)  ballot $(ms STRIKER_AB_BALLOT=1)"
  A="--context=8192 --quantization nvfp4 --batch 8"; echo "$A: main $(ms X=1)  ballot $(ms STRIKER_AB_BALLOT=1)"; done
for E in X=1 STRIKER_AB_PREDEC=1 STRIKER_AB_BALLOT=1; do
env $E CUDA_INJECTION64_PATH="$PWD/$B/libstriker_kernel_trace.so" STRIKER_KERNEL_TRACE=/tmp/tl_${E%%=*}.csv timeout 40 $B/striker bench latency --config $C --graphs --context=8192 --quantization nvfp4 --steps 15 --warmup 3 > /dev/null 2>&1
done
python3 scripts/step_timeline.py /tmp/tl_X.csv --compare /tmp/tl_STRIKER_AB_PREDEC.csv "main vs predec" | head -14
python3 scripts/step_timeline.py /tmp/tl_X.csv --compare /tmp/tl_STRIKER_AB_BALLOT.csv "main vs ballot" | head -14
