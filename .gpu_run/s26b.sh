#!/usr/bin/env bash
# Session 26, prepared for a session with a device (async scheduling, never run on a GPU yet).
# Payload: the kernel tests and bench (STRIKER_SHIP_SERVER=0 bash scripts/ship_gpu.sh).
# 1. The new GPU tests (CudaEmbedding.TakeDrawnTokensMatchesReference, CudaSampling.AsyncStepsMatchForwardSampled)
#    and every test of the code forward_sampled's split touched (sampling, logprobs, backend).
# 2. bench throughput with and without --async-scheduling (the batched decode path's host share).
# 3. .gpu_run/s26a.sh: the 9..256-sequence decode curve, timelines and ncu sections at batch 64.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"; C=$B/config.json
timeout 240 $B/test_cuda_kernels --gtest_filter='CudaEmbedding.*:CudaSampling.*:CudaLogprob*:CudaBackend.*' 2>&1 |
  grep -E "^\[  (PASSED|FAILED) |^\[==========\]|Failure" | head -30
echo "kernel tests done at ${SECONDS}s"
for q in "" "--quantization nvfp4"; do
  for a in "" "--async-scheduling"; do
    echo "throughput $q $a: $(timeout 150 $B/striker bench throughput --config $C --tokenizer $B/flint-tokenizer --device cuda \
      --num-prompts 64 --input-len 1024 --output-len 128 $q $a 2>&1 | grep -E 'elapsed|decode steps' | tr '\n' ' ')"
  done
done
echo "throughput done at ${SECONDS}s"
timeout $((590 - SECONDS)) bash .gpu_run/s26a.sh
