#!/usr/bin/env bash
# Session 27 run 2 (server payload: STRIKER_SHIP_KERNEL_TESTS=0 STRIKER_SHIP_STRIP=all STRIKER_SHIP_SOURCES=0
# STRIKER_SHIP_TRACE=0 bash scripts/ship_gpu.sh .gpuwork_srv): the server suites on --device cuda
# (test_server_async.py included), then the served numbers with and without --async-scheduling: one request
# 100,000 -> 256 and 128 x (1024 -> 128) at 64 in flight, BF16 and NVFP4 (prediction in docs/performance.md,
# twenty-sixth session: TPOT at 100K -1.2 to -1.7 %, c64 output tok/s +1-3 %).
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
timeout 300 bash scripts/gpu_server_tests.sh $B; echo "server suites rc=$? at ${SECONDS}s"
for a in "" "--async-scheduling"; do
  limit=$(( 585 - SECONDS )); [ -z "$a" ] && limit=$(( limit / 2 ))
  STRIKER_SERVE_BENCH_MULTI_TURN="" STRIKER_SERVE_BENCH_DIR="serve${a:+_async}" \
    STRIKER_SERVE_BENCH_SERVE_ARGS="--max-num-batched-tokens 8192 $a" \
    timeout $limit bash scripts/gpu_serve_bench.sh $B 2>&1 | tail -8
  echo "serve bench [${a:-sync}] rc=$? at ${SECONDS}s"
  grep -hE "Async|async" $OUT/serve${a:+_async}/serve_*.log 2>/dev/null | tail -3
done
