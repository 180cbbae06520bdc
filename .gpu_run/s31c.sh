#!/usr/bin/env bash
# Session 31 run 7, on an H200 (BF16 at 100K cannot be served on an 80 GB H100: 79.3 GB of weights; run 4):
# main with the register-fragment NVFP4 kernels and async scheduling on by default. The issue-11 table (bench latency --graphs, 50 steps), then one request 100,000 -> 256 served, BF16 and
# NVFP4, async (the default) and, if time is left, --no-async-scheduling.
# Server payload: STRIKER_GPU_WHEELS=/work/gpuwheels STRIKER_SHIP_KERNEL_TESTS=0 STRIKER_SHIP_STRIP=all STRIKER_SHIP_SOURCES=0
# STRIKER_SHIP_TRACE=0 bash scripts/ship_gpu.sh /work/main/.gpuwork_srv; carry .gpuwork_srv, unpack into /tmp/s, run from there.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
S33C_TIMELINES=0 bash .gpu_run/s33c.sh  # the issue-11 table
echo "table done at ${SECONDS}s"
for a in "" "--no-async-scheduling"; do
  [ $SECONDS -gt 380 ] && break
  STRIKER_SERVE_BENCH_MULTI_TURN="" STRIKER_SERVE_BENCH_CONC="" STRIKER_SERVE_BENCH_DIR="serve${a:+_sync}" \
    STRIKER_SERVE_BENCH_SERVE_ARGS="--max-num-batched-tokens 8192 $a" \
    timeout $(( 570 - SECONDS )) bash scripts/gpu_serve_bench.sh $B 2>&1 | grep -E "^\| long"
  echo "serve bench [${a:-default async}] at ${SECONDS}s"
done
