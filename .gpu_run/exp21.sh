#!/usr/bin/env bash
# Prepared in session 15, not run: the NVFP4 one-token MoE down kernel with every post-wait load in one
# batch, the activations by cp.async into its reserved shared memory (STRIKER_AB_DOWNB=1, 106 registers:
# a QKV CTA fits beside it again) against main's kernel, one binary; stamps and CUPTI timelines of both.
# Prediction: the stamps' 1.7 us per layer kept this time, NVFP4 8K -0.07 ms, 100K -0.07 ms.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"; C=$B/config.json
STRIKER_AB_DOWNB=1 timeout 100 $B/test_cuda_kernels --gtest_brief=1 --gtest_filter='CudaNvfp4.*:CudaBackend.Nvfp4*' > /tmp/t1.log 2>&1; echo "tests downb rc=$? $(grep -E '^\[  (FAILED|PASSED) ' /tmp/t1.log | head -3 | tr '\n' ' ')"; grep -B3 -A10 Failure /tmp/t1.log | head -20
run() { local tag=$1; shift; echo "$tag: $(env "$@" timeout 60 $B/striker bench latency --config $C --graphs --steps 50 $ARGS 2>&1 | grep -E 'ms/step|kernels per' | sed -E 's/.*\(([0-9.]+) device.*/\1/; s/.*kernels per step: ([0-9]+).*/\1 kernels/' | tr '\n' ' ')"; }
for r in 1 2; do for a in "--context=8192 --quantization nvfp4" "--context=100000 --quantization nvfp4"; do
ARGS="$a"; run "$a" X=1; run "$a batched down" STRIKER_AB_DOWNB=1
done; done
ARGS="--context=8192 --quantization nvfp4"
STRIKER_STAMPS=/tmp/s0.bin run "stamped main" X=1; python3 .gpu_run/stamps.py /tmp/s0.bin | grep -E "d_|g_span"
STRIKER_STAMPS=/tmp/s1.bin run "stamped batched" STRIKER_AB_DOWNB=1; python3 .gpu_run/stamps.py /tmp/s1.bin | grep -E "d_|g_span"
for E in STRIKER_AB_X=0 STRIKER_AB_DOWNB=1; do
env $E CUDA_INJECTION64_PATH="$PWD/$B/libstriker_kernel_trace.so" STRIKER_KERNEL_TRACE=/tmp/tl_${E%%=*}.csv timeout 40 $B/striker bench latency --config $C --graphs --context=8192 --quantization nvfp4 --steps 15 --warmup 3 > /dev/null 2>&1
python3 scripts/step_timeline.py /tmp/tl_${E%%=*}.csv "$E" | sed -n '/one layer/,$p' | head -9
done
python3 scripts/step_timeline.py /tmp/tl_STRIKER_AB_X.csv --compare /tmp/tl_STRIKER_AB_DOWNB.csv "main down vs batched down" | head -9
