#!/usr/bin/env bash
# Session 21, run 7: the server suites on --device cuda with the cut path, then one served request 100K -> 256 (NVFP4)
# with the model's generation_config (top_k 20, top_p 0.95: candidate path) and with top_p 0.9, top_k -1 (cut path).
set -uo pipefail
cd "$(dirname "$0")/.."
B=gpubin; export LD_LIBRARY_PATH="$PWD/$B/lib"
timeout 430 bash scripts/gpu_server_tests.sh $B; echo "server suites rc=$? at ${SECONDS}s"
bash .gpu_run/serve_long.sh "gen=" "topp=--top-p 0.9 --top-k -1"
