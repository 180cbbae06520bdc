#!/usr/bin/env bash
# Session 20: the server suites on --device cuda (last run in session 10), the served decode at 100K against the
# bench step (issue 11: TPOT within 3 %), and the step table of main.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"; C=$B/config.json
mkdir -p "${OUT:-/tmp/out}"; L=${OUT:-/tmp/out}
timeout 430 bash scripts/gpu_server_tests.sh $B; echo "server suites rc=$? at ${SECONDS}s"
ms() { timeout 30 $B/striker bench latency --config $C --graphs --steps 50 $A 2>&1 | grep -E 'ms/step|kernels' | tr '\n' ' '; }
for A in "--context=100000" "--context=100000 --quantization nvfp4"; do echo "$A: $(ms)"; done
STRIKER_SERVE_BENCH_CONC="" STRIKER_SERVE_BENCH_MULTI_TURN="" timeout $((540 - SECONDS)) bash scripts/gpu_serve_bench.sh $B 2>&1 | tail -12
echo "serve bench rc=$? at ${SECONDS}s"
for A in "--context=8192" "--context=8192 --quantization nvfp4" "--context=8192 --batch 8" "--context=8192 --batch 8 --quantization nvfp4"; do echo "$A: $(ms)"; done
echo "all done at ${SECONDS}s"
