#!/usr/bin/env bash
# Session 15, run 7: the NVFP4 one-token MoE down kernel with every post-wait load in one batch
# (STRIKER_AB_DOWNB=1) against main's, one binary; stamps of both.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"; C=$B/config.json
STRIKER_AB_DOWNB=1 timeout 100 $B/test_cuda_kernels --gtest_brief=1 --gtest_filter='CudaNvfp4.*:CudaBackend.Nvfp4*' > /tmp/t1.log 2>&1; echo "tests downb rc=$? $(grep -E '^\[  (FAILED|PASSED) ' /tmp/t1.log | head -3 | tr '\n' ' ')"; grep -B3 -A10 Failure /tmp/t1.log | head -20
run() { local tag=$1; shift; echo "$tag: $(env "$@" timeout 60 $B/striker bench latency --config $C --graphs --steps 50 $ARGS 2>&1 | grep -E 'ms/step|kernels per' | sed -E 's/.*\(([0-9.]+) device.*/\1/; s/.*kernels per step: ([0-9]+).*/\1 kernels/' | tr '\n' ' ')"; }
for r in 1 2; do for a in "--context=8192 --quantization nvfp4" "--context=100000 --quantization nvfp4"; do
ARGS="$a"; run "$a" X=1; run "$a batched down" STRIKER_AB_DOWNB=1
done; done
ARGS="--context=8192 --quantization nvfp4"
STRIKER_STAMPS=/tmp/s1.bin run "stamped batched" STRIKER_AB_DOWNB=1; python3 .gpu_run/stamps.py /tmp/s1.bin | grep -E "d_|g_span"
