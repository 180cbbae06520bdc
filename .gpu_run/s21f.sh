#!/usr/bin/env bash
# Session 21, run 7: the server suites on --device cuda with the cut path, then one served request 100K -> 256 (NVFP4)
# with the model's generation_config (top_k 20, top_p 0.95: candidate path) and with top_p 0.9, top_k -1 (cut path).
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"
timeout 430 bash scripts/gpu_server_tests.sh $B; echo "server suites rc=$? at ${SECONDS}s"
for args in "" "--top-p 0.9 --top-k -1"; do
  STRIKER_SERVE_BENCH_LONG_ARGS="$args" STRIKER_SERVE_BENCH_DIR="serve_$( [ -z "$args" ] && echo gen || echo topp )" \
  STRIKER_SERVE_BENCH_FORMATS=nvfp4 STRIKER_SERVE_BENCH_CONC="" STRIKER_SERVE_BENCH_MULTI_TURN="" \
    timeout 200 bash scripts/gpu_serve_bench.sh $B 2>&1 | grep -E "TPOT|ITL|TTFT|tok/s|\| long|error|Error" | head -12
  echo "served ($args) done at ${SECONDS}s"
done
