#!/usr/bin/env bash
# One served request 100K -> 256 (NVFP4, scripts/gpu_serve_bench.sh's long run) per argument set: LABEL=ARGS ... (ARGS:
# extra serve_bench.py flags, e.g. "topp=--top-p 0.9 --top-k -1"; "plain=" for the model's generation_config).
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"
for spec in "$@"; do
  label=${spec%%=*}; args=${spec#*=}
  STRIKER_SERVE_BENCH_LONG_ARGS="$args" STRIKER_SERVE_BENCH_DIR="serve_$label" \
  STRIKER_SERVE_BENCH_FORMATS=nvfp4 STRIKER_SERVE_BENCH_CONC="" STRIKER_SERVE_BENCH_MULTI_TURN="" \
    timeout 200 bash scripts/gpu_serve_bench.sh $B 2>&1 | grep -E "TPOT|ITL|TTFT|tok/s|\| long|rror" | head -12
  echo "served $label ($args) done at ${SECONDS}s"
done
