#!/usr/bin/env bash
# Session 42 run 1: the persistent-chain probe with a second transport (warp streams: each warp's own
# cp.async ring, no producer warp) beside session 25's ring, with a dependency-free stream of the same
# bytes as the card's control, BF16 and NVFP4 weights. The probe only: device time is short.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv,noheader
timeout 300 $B/bench_cuda_kernels persistent-chain 2>&1 | tee $OUT/probe.txt
echo "probe rc=$? at ${SECONDS}s"
echo "all done at ${SECONDS}s"
