#!/usr/bin/env bash
# Prepared in session 17, not run: the selection's rounds with a ballot for the unique maximum (STRIKER_AB_BALLOT=1)
# against main's (two REDUX per round). Before it: the router tests of the landed sigmoids (never run on a GPU).
# Build the probe here first: nvcc -std=c++20 -O3 -arch=sm_90a -I src tests/cuda/profiling/select_probe.cu -o .gpuwork/select_probe
# (ship_gpu.sh empties .gpuwork: build it after shipping) and run with: cp .gpuwork/select_probe /tmp/ && ... bash .gpu_run/exp24.sh
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"; C=$B/config.json
/tmp/select_probe 2>&1 | tail -3
timeout 100 $B/test_cuda_kernels --gtest_brief=1 --gtest_filter='CudaRouter*' > /tmp/t0.log 2>&1; echo "router tests (main) rc=$? $(grep -E '^\[  (FAILED|PASSED) ' /tmp/t0.log | head -3 | tr '\n' ' ')"; grep -B2 -A10 Failure /tmp/t0.log | head -20
STRIKER_AB_BALLOT=1 timeout 100 $B/test_cuda_kernels --gtest_brief=1 --gtest_filter='CudaRouter*:CudaBackend.ForwardMatches*:CudaBackend.Nvfp4ForwardMatches*' > /tmp/t1.log 2>&1; echo "tests BALLOT rc=$? $(grep -E '^\[  (FAILED|PASSED) ' /tmp/t1.log | head -3 | tr '\n' ' ')"; grep -B2 -A10 Failure /tmp/t1.log | head -20
ms() { timeout 60 env "$@" $B/striker bench latency --config $C --graphs --steps 50 $A 2>&1 | grep -E 'ms/step' | sed -E 's/.*\(([0-9.]+) device.*/\1/'; }
for r in 1 2; do for A in "--context=8192 --quantization nvfp4" "--context=8192" "--context=100000 --quantization nvfp4"; do
  echo "$A: main $(ms X=1)  ballot $(ms STRIKER_AB_BALLOT=1)"; done; done
