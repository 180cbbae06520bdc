#!/usr/bin/env bash
# Session 31 run 5 (server payload of main + the async default; pyyaml now among the wheels):
# the server suites on --device cuda with async scheduling on by default, then the NVFP4 100K -> 256 TPOT
# with and without async again (run 4, H100: 2.99 ms without, 2.90 with).
# Server payload: STRIKER_GPU_WHEELS=/work/gpuwheels STRIKER_SHIP_KERNEL_TESTS=0 STRIKER_SHIP_STRIP=all STRIKER_SHIP_SOURCES=0
# STRIKER_SHIP_TRACE=0 bash scripts/ship_gpu.sh /work/main/.gpuwork_srv; carry .gpuwork_srv, unpack into /tmp/s, run from there.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 400 bash scripts/gpu_server_tests.sh $B; echo "server suites rc=$? at ${SECONDS}s"
tail -c 3000 "$OUT/server_tests.log" | grep -E "passed|failed|FAILED|ERROR" | tail -12
for a in "" "--no-async-scheduling"; do
  [ $SECONDS -gt 520 ] && break
  STRIKER_SERVE_BENCH_MULTI_TURN="" STRIKER_SERVE_BENCH_CONC="" STRIKER_SERVE_BENCH_DIR="serve${a:+_sync}" \
    STRIKER_SERVE_BENCH_SERVE_ARGS="--max-num-batched-tokens 8192 $a" \
    timeout $(( 585 - SECONDS )) bash scripts/gpu_serve_bench.sh $B 2>&1 | grep -E "^\| long"
  echo "serve bench [${a:-default async}] at ${SECONDS}s"
done
