#!/usr/bin/env bash
# Session 20 probe (temporary instrumentation, reverted): per-step host timings of the served decode at 100K.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"; L=${OUT:-/tmp/out}; mkdir -p $L
for f in nvfp4 bf16; do
  STRIKER_STEP_PROBE=$L/probe_$f.txt STRIKER_SERVE_BENCH_FORMATS=$f STRIKER_SERVE_BENCH_CONC="" STRIKER_SERVE_BENCH_MULTI_TURN="" \
    timeout 200 bash scripts/gpu_serve_bench.sh $B 2>&1 | grep -E "^\| long"
done
echo "done at ${SECONDS}s"
