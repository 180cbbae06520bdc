#!/usr/bin/env bash
# Session 16, run 1: the tensor-core NVFP4 decode (nvfp4_pair_bf16: E2M1 as bf16 bits, the scale folded
# by one bf16x2 multiply, mma.sync sums) in the per-slot MoE gate/up (STRIKER_AB_GUMMA=1), the one-token
# MoE down (STRIKER_AB_DNMMA=1) and the 2-8-token skinny GEMMs (STRIKER_AB_SKD=1), against main's
# kernels in one binary; plus session 15's prepared batched down (STRIKER_AB_DOWNB=1).
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"; C=$B/config.json
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
F='CudaNvfp4.*:CudaBackend.Nvfp4*:CudaGemv*:CudaBackend.ForwardMatches*'
timeout 150 env STRIKER_AB_SKD=1 STRIKER_AB_GUMMA=1 STRIKER_AB_DNMMA=1 $B/test_cuda_kernels --gtest_brief=1 --gtest_filter="$F" > /tmp/t1.log 2>&1; echo "tests mma rc=$? $(grep -E '^\[  (FAILED|PASSED) ' /tmp/t1.log | head -3 | tr '\n' ' ')"; grep -B2 -A12 Failure /tmp/t1.log | head -40
timeout 60 env STRIKER_AB_DOWNB=1 $B/test_cuda_kernels --gtest_brief=1 --gtest_filter='CudaNvfp4.*:CudaBackend.Nvfp4Forward*' > /tmp/t2.log 2>&1; echo "tests downb rc=$? $(grep -E '^\[  (FAILED|PASSED) ' /tmp/t2.log | head -3 | tr '\n' ' ')"
run() { local tag=$1; shift; echo "$tag: $(env "$@" timeout 60 $B/striker bench latency --config $C --graphs --steps 50 $ARGS 2>&1 | grep -E 'ms/step|kernels per' | sed -E 's/.*\(([0-9.]+) device.*/\1/; s/.*kernels per step: ([0-9]+).*/\1 kernels/' | tr '\n' ' ')"; }
for r in 1 2; do
ARGS="--context=8192 --quantization nvfp4"
run "8K main" X=1; run "8K gu-mma" STRIKER_AB_GUMMA=1; run "8K down-mma" STRIKER_AB_DNMMA=1; run "8K both-mma" STRIKER_AB_GUMMA=1 STRIKER_AB_DNMMA=1; run "8K batched-down" STRIKER_AB_DOWNB=1
ARGS="--context=8192 --quantization nvfp4 --batch 8"
run "b8 main" X=1; run "b8 skinny-fold" STRIKER_AB_SKD=1; run "b8 all-mma" STRIKER_AB_SKD=1 STRIKER_AB_GUMMA=1 STRIKER_AB_DNMMA=1
done
ARGS="--context=100000 --quantization nvfp4"
run "100K main" X=1; run "100K both-mma" STRIKER_AB_GUMMA=1 STRIKER_AB_DNMMA=1
for E in X=1 STRIKER_AB_GUMMA=1; do
env $E STRIKER_AB_DNMMA=${E#*=} CUDA_INJECTION64_PATH="$PWD/$B/libstriker_kernel_trace.so" STRIKER_KERNEL_TRACE=/tmp/tl_${E%%=*}.csv timeout 40 $B/striker bench latency --config $C --graphs --context=8192 --quantization nvfp4 --steps 15 --warmup 3 > /dev/null 2>&1
done
python3 scripts/step_timeline.py /tmp/tl_X.csv --compare /tmp/tl_STRIKER_AB_GUMMA.csv "main vs mma MoE" | head -14
