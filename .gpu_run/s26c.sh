#!/usr/bin/env bash
# Session 26, prepared: async scheduling served end to end on the GPU (server payload:
# STRIKER_SHIP_KERNEL_TESTS=0 STRIKER_SHIP_STRIP=all STRIKER_SHIP_SOURCES=0 STRIKER_SHIP_TRACE=0 bash scripts/ship_gpu.sh).
# 1. The server suites on --device cuda, test_server_async.py included (~420 s): run alone with
#    STRIKER_S26C=suites.
# 2. STRIKER_S26C=bench: one request 100,000 -> 256 and 128 x (1024 -> 128) at 64 in flight, BF16 and NVFP4,
#    with and without --async-scheduling. Prediction (docs/performance.md, twenty-sixth session): TPOT at
#    100K -35 to -45 us (~1.2-1.7 %), so within ~1 % of the bench step's device time; c64 output tok/s +1-3 %.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"
case "${STRIKER_S26C:-suites}" in
  suites) timeout 580 bash scripts/gpu_server_tests.sh $B; echo "server suites rc=$? at ${SECONDS}s" ;;
  bench)
    for a in "" "--async-scheduling"; do
      limit=$(( 590 - SECONDS )); [ -z "$a" ] && limit=$(( limit / 2 ))
      STRIKER_SERVE_BENCH_MULTI_TURN="" STRIKER_SERVE_BENCH_DIR="serve${a:+_async}" \
        STRIKER_SERVE_BENCH_SERVE_ARGS="--max-num-batched-tokens 8192 $a" \
        timeout $limit bash scripts/gpu_serve_bench.sh $B 2>&1 | tail -10
      echo "serve bench [$a] rc=$? at ${SECONDS}s"
    done ;;
esac
