#!/usr/bin/env bash
# Session 20, last run: the server suites on --device cuda with main's final binary (the engine's sliding release
# changed), and bench throughput's serve path once more.
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"; C=$B/config.json
timeout 430 bash scripts/gpu_server_tests.sh $B; echo "server suites rc=$? at ${SECONDS}s"
timeout 60 $B/striker bench throughput --config $C --tokenizer $B/flint-tokenizer --device cuda --num-prompts 8 --input-len 8192 --output-len 128 2>&1 | grep -E "throughput|decode steps|time to first"
echo "all done at ${SECONDS}s"
