#!/usr/bin/env bash
# Session 19: KV cache blocks of 32/64/128 tokens (serve's new --block-size): the decode attention and backend
# tests at those sizes, then the step at each block size (bench latency --block-size; blocks shuffled).
# Question: is the full-layer attention's 0.76 of the roofline at 100K the DRAM's efficiency on 4 KiB runs?
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"; C=$B/config.json
timeout 60 $B/test_cuda_kernels --gtest_brief=1 --gtest_filter='CudaAttention.DecodeWithLargerCacheBlocks:CudaBackend.ForwardMatchesHostReferenceWithLargerCacheBlocks' > /tmp/t.log 2>&1
echo "tests rc=$? $(grep -E '^\[  (FAILED|PASSED) ' /tmp/t.log | sort -u | head -4 | tr '\n' ' ') at ${SECONDS}s"; grep -B2 -A8 Failure /tmp/t.log | head -20
ms() { timeout 20 $B/striker bench latency --config $C --graphs --steps 50 $A 2>&1 | grep -E 'ms/step' | sed -E 's/.*\(([0-9.]+) device.*/\1/'; }
for A in "--context=100000" "--context=100000 --quantization nvfp4" "--context=8192 --quantization nvfp4 --batch 8"; do
  line="$A:"; for bs in 16 64 128 32 16; do line="$line b$bs $(A="$A --block-size $bs" ms)"; done; echo "$line"; done
echo "done at ${SECONDS}s"
