#!/usr/bin/env bash
# Session 28 run 2 (not run yet; renamed in session 29; session 30: no machine), of the async default in .gpu_run/s30_async_default.patch (server payload built with it applied: STRIKER_SHIP_KERNEL_TESTS=0 STRIKER_SHIP_STRIP=all STRIKER_SHIP_SOURCES=0
# STRIKER_SHIP_TRACE=0): the server suites on --device cuda with async scheduling on by default
# (test_server_async.py's reference server now turns it off by name), then one request 100,000 -> 256 with
# --no-async-scheduling and with the default (prediction, docs/performance.md, twenty-sixth session: TPOT at
# 100K -1.2 to -1.7 %).
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 290 bash scripts/gpu_server_tests.sh $B; echo "server suites rc=$? at ${SECONDS}s"
tail -c 1200 "$OUT/server_tests.log" | grep -E "passed|failed|FAILED|ERROR" | tail -8
for a in "--no-async-scheduling" ""; do
  limit=$(( 590 - SECONDS )); [ -n "$a" ] && limit=$(( limit / 2 ))
  STRIKER_SERVE_BENCH_MULTI_TURN="" STRIKER_SERVE_BENCH_CONC="" STRIKER_SERVE_BENCH_DIR="serve${a:+_sync}" \
    STRIKER_SERVE_BENCH_SERVE_ARGS="--max-num-batched-tokens 8192 $a" \
    timeout $limit bash scripts/gpu_serve_bench.sh $B 2>&1 | tail -6
  echo "serve bench [${a:-default async}] at ${SECONDS}s"
  grep -hiE "async" $OUT/serve${a:+_sync}/serve_*.log 2>/dev/null | tail -2
done
