#!/usr/bin/env bash
# Session 23, run 1: the decode layer's GEMV chain in one persistent kernel (bench_cuda_kernels persistent-chain),
# against the step's per-op kernels (bench latency --graphs, BF16 8K, same machine).
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"; C=$B/config.json
timeout 150 $B/bench_cuda_kernels persistent-chain 2>&1 | tail -30; echo "chain rc=${PIPESTATUS[0]} at ${SECONDS}s"
ms() { timeout 60 $B/striker bench latency --config $C --graphs --steps 50 $A 2>&1 | grep -E 'ms/step' | sed -E 's/.*\(([0-9.]+) device.*/\1/'; }
A="--context=8192" ms | sed 's/^/step BF16 8K: /'
echo "done at ${SECONDS}s"
