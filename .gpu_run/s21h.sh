#!/usr/bin/env bash
# Session 21, run 10: what a served request asking for logprobs costs per token (host-side log-softmax of each row):
# NVFP4, one request 100K -> 256, generation_config, without and with "logprobs": 5.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"
for args in "" '--extra-body {"logprobs":5}'; do
  STRIKER_SERVE_BENCH_LONG_ARGS="$args" STRIKER_SERVE_BENCH_DIR="serve_$( [ -z "$args" ] && echo plain || echo logprobs )" \
  STRIKER_SERVE_BENCH_FORMATS=nvfp4 STRIKER_SERVE_BENCH_CONC="" STRIKER_SERVE_BENCH_MULTI_TURN="" \
    timeout 200 bash scripts/gpu_serve_bench.sh $B 2>&1 | grep -E "Median TPOT|Median ITL|P99 ITL|Median TTFT|rror" | head -8
  echo "served ($args) done at ${SECONDS}s"
done
