#!/usr/bin/env bash
# Session 16: the tensor-core NVFP4 decode (nvfp4_pair_bf16: E2M1 as bf16 bits, the scale folded by one
# bf16x2 multiply, mma.sync sums) against main's kernels in one binary. Knobs: STRIKER_AB_GUMMA=1 the
# per-slot MoE gate/up ("diagonal" MMA, same loads), STRIKER_AB_GVMMA=1 the one-token GEMVs and dense
# gate/up (QKV, o_proj, LM head), STRIKER_AB_DNMMA=1 the one-token MoE down (one warp per expert, 16
# rows per CTA), STRIKER_AB_SKD=1 the 2-8-token skinny GEMMs.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"; C=$B/config.json
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader
ALL="STRIKER_AB_SKD=1 STRIKER_AB_GUMMA=1 STRIKER_AB_GVMMA=1 STRIKER_AB_DNMMA=1"
F='CudaNvfp4.*:CudaBackend.Nvfp4*:CudaGemvInputNorm.Nvfp4*:CudaBackend.ForwardMatches*'
timeout 150 env $ALL $B/test_cuda_kernels --gtest_brief=1 --gtest_filter="$F" > /tmp/t1.log 2>&1; echo "tests mma rc=$? $(grep -E '^\[  (FAILED|PASSED) ' /tmp/t1.log | head -3 | tr '\n' ' ')"; grep -B2 -A12 Failure /tmp/t1.log | head -40
run() { local tag=$1; shift; echo "$tag: $(env "$@" timeout 60 $B/striker bench latency --config $C --graphs --steps 50 $ARGS 2>&1 | grep -E 'ms/step|kernels per' | sed -E 's/.*\(([0-9.]+) device.*/\1/; s/.*kernels per step: ([0-9]+).*/\1 kernels/' | tr '\n' ' ')"; }
for r in 1 2; do
ARGS="--context=8192 --quantization nvfp4"
run "8K main" X=1; run "8K gu-mma" STRIKER_AB_GUMMA=1; run "8K gemv-mma" STRIKER_AB_GVMMA=1; run "8K down-mma" STRIKER_AB_DNMMA=1; run "8K all" $ALL
ARGS="--context=8192 --quantization nvfp4 --batch 8"
run "b8 main" X=1; run "b8 skinny-fold" STRIKER_AB_SKD=1; run "b8 all" $ALL
done
ARGS="--context=100000 --quantization nvfp4"
run "100K main" X=1; run "100K all" $ALL
ARGS="--context=8192"
run "bf16 8K main" X=1; run "bf16 8K all" $ALL
for E in main all; do
if [ $E = all ]; then V="$ALL"; else V=X=1; fi
env $V CUDA_INJECTION64_PATH="$PWD/$B/libstriker_kernel_trace.so" STRIKER_KERNEL_TRACE=/tmp/tl_$E.csv timeout 40 $B/striker bench latency --config $C --graphs --context=8192 --quantization nvfp4 --steps 15 --warmup 3 > /dev/null 2>&1
done
python3 scripts/step_timeline.py /tmp/tl_main.csv --compare /tmp/tl_all.csv "main vs all mma" | head -16
python3 scripts/step_timeline.py /tmp/tl_all.csv "all mma" | sed -n '/one layer/,$p' | head -12
